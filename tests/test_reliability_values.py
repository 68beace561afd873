"""Values are validated where they enter, and user errors read as errors (the first fault probe's value and error rows).

One parametrised test per mechanism; each case is a row of the reliability probe (the row number is in its id).
API cases assert the exception type and the argument or key path named in the message; CLI cases assert exit
code 2, the option or key path in the output and no traceback (tracebacks are for ``nclab --debug`` only).
"""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
import torch
import yaml
from typer.testing import CliRunner

from nclab.cli import app
from nclab.data import CorruptDatasetError, load
from nclab.geometry.codes import softmax_code_search
from nclab.io.arrays import iter_batches
from nclab.io.yaml_io import DuplicateKeyError, load_yaml
from nclab.metrics import (
    check_conventions,
    collapse_report,
    duality_distances,
    fuzziness,
    nc1,
    self_duality,
    within_class_split,
)
from nclab.stats import ClassStats
from nclab.theory.central_path import closed_form_omega, simulate
from nclab.train import ConfigError, resolve_config, train
from nclab.train.config import SEED_LIMIT, load_config
from nclab.validation import check_bool, check_output_dir, check_output_file

runner = CliRunner()

TINY = {
    "name": "tiny",
    "data": {"name": "digits", "per_class": 20, "test_per_class": 5},
    "model": {"name": "mlp", "options": {"widths": [16], "batchnorm": True}},
    "loss": {"name": "ce"},
    "optim": {"lr": 0.05, "weight_decay": 5e-3},
    "schedule": {"name": "constant"},
    "train": {"epochs": 1, "batch_size": 32, "threads": 1},
    "measure": {"num_log": 1},
    "report": False,
}


@pytest.fixture
def stats(rng):
    K, n, d = 3, 10, 4
    y = np.repeat(np.arange(K), n)
    H = 3 * rng.normal(size=(K, d))[y] + rng.normal(size=(K * n, d))
    return ClassStats.from_arrays(H, y, K=K), rng.normal(size=(K, d))


@pytest.fixture
def tiny_yaml(tmp_path):
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(TINY))
    return path


def _clean_exit_2(res, *names):
    """Exit 2, every name in the message, no traceback (CliRunner keeps an unhandled exception in .exception)."""
    assert res.exit_code == 2, res.output
    assert isinstance(res.exception, SystemExit), repr(res.exception)
    assert "Traceback" not in res.output
    for name in names:
        assert name in res.output, (name, res.output)


# ------------------------------------------------------------------------- booleans (rows 35, 59, 78)
@pytest.mark.parametrize("value", ["no", "false", "False", "0", "", 0, 1, None, 1.0])
def test_check_bool_refuses_everything_but_bools(value):
    with pytest.raises(TypeError, match=r"^flag must be true or false"):
        check_bool(value, name="flag")


def test_check_bool_accepts_python_and_numpy_bools():
    assert check_bool(True, name="x") is True and check_bool(np.False_, name="x") is False


@pytest.mark.parametrize(
    ("call", "keyword"),
    [
        (lambda s, W: nc1(s, normalize="false"), "normalize"),  # row 35: was read as True
        (lambda s, W: fuzziness(s, normalize="no"), "normalize"),
        (lambda s, W: within_class_split(s, normalize="no"), "normalize"),
        (lambda s, W: self_duality(s, W=W, center_w="no"), "center_w"),  # row 35: 'no' -> True
        (lambda s, W: self_duality(s, W=W, center_means="false"), "center_means"),
        (lambda s, W: duality_distances(s, W=W, center_means="no"), "center_means"),
    ],
    ids=["row35-nc1", "fuzziness", "within_class_split", "row35-center_w", "center_means", "duality_distances"],
)
def test_bool_keywords_of_metrics_refuse_strings(stats, call, keyword):
    s, W = stats
    with pytest.raises(TypeError, match=rf"^{keyword} must be true or false"):
        call(s, W)


def test_numpy_bool_keyword_is_the_bool(stats):
    s, _ = stats
    # the unnormalised NC1 is K times the normalised one
    assert nc1(s, normalize=np.False_) == pytest.approx(3 * nc1(s), rel=1e-14)


@pytest.mark.parametrize(
    ("conventions", "error", "key"),
    [
        ({"center_w": "no"}, TypeError, "center_w"),  # row 35
        ({"nc1_normalize": "false"}, TypeError, "nc1_normalize"),  # row 35
        ({"nc1_normalize": None}, TypeError, "nc1_normalize"),  # row 35: None was False
        ({"weighting": "bogus"}, ValueError, "weighting"),
        ({"cdnv_exponent": True}, ValueError, "cdnv_exponent"),  # a bool is not the choice 1
        ({"ddof": "1"}, ValueError, "ddof"),
        ({"vci_rank": 0}, ValueError, "vci_rank"),
        ({"self_duality_variant": "frob"}, ValueError, "self_duality_variant"),
    ],
)
def test_collapse_report_checks_convention_values_first(stats, conventions, error, key):
    s, W = stats
    with pytest.raises(error, match=rf"conventions\['{key}'\] must be"):
        collapse_report(s, W=W, conventions=conventions)


# probe row 23: a NaN bias was accepted by collapse_report when no NCC used it (shape checked, values not)
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_collapse_report_refuses_a_non_finite_bias(stats, bad):
    s, W = stats
    with pytest.raises(ValueError, match="b contains NaN or inf"):
        collapse_report(s, W=W, b=np.array([0.0, bad, 1.0]))
    with pytest.raises(ValueError, match="W contains NaN or inf"):
        collapse_report(s, W=np.where(np.eye(3, 4) > 0, bad, W), b=np.zeros(3))


def test_check_conventions_merges_over_defaults():
    conv = check_conventions({"cdnv_exponent": np.int64(2), "center_w": np.True_})
    assert conv["cdnv_exponent"] == 2 and type(conv["cdnv_exponent"]) is int
    assert conv["center_w"] is True and conv["weighting"] == "balanced"


# ---------------------------------------------------------------------------- duplicate YAML keys (row 72)
def test_duplicate_yaml_key_names_path_and_lines():
    with pytest.raises(DuplicateKeyError, match=r"run.yaml: duplicate key 'train.epochs' \(line 2 and line 3\)"):
        load_yaml("train:\n  epochs: 2\n  epochs: 5\n", source="run.yaml")


def test_yaml_booleans_are_only_true_and_false():
    assert load_yaml("a: true\nb: False\nc: no\nd: on") == {"a": True, "b": False, "c": "no", "d": "on"}


def test_config_file_with_duplicate_key_is_refused(tmp_path):
    path = tmp_path / "dup.yaml"
    path.write_text("name: dup\ntrain:\n  epochs: 2\n  epochs: 5\n")
    with pytest.raises(ConfigError, match=r"duplicate key 'train.epochs' \(line 3 and line 4\)") as info:
        load_config(path)
    assert str(path) in str(info.value)


def test_set_value_with_duplicate_key_is_refused():
    with pytest.raises(ConfigError, match=r"--set train: duplicate key 'epochs'"):
        resolve_config(TINY, ["train={epochs: 1, epochs: 2}"])


# ------------------------------------------------------------------ config schema (rows 73, 75-79, 99, 100)
@pytest.mark.parametrize(
    ("override", "path"),
    [
        ("model.options.widths=[0]", "model.options.widths"),  # row 73
        ("model.options.widths=[-4]", "model.options.widths"),  # row 73
        ("model.options.widths=abc", "model.options.widths"),  # row 73
        ("model.options.widths=[1.5]", "model.options.widths"),
        ("model.options.batchnorm=nope", "model.options.batchnorm"),
        ("model.options.bogus=1", "model.options.bogus"),
        ("train.device=bogus", "train.device"),  # row 75
        ("seed=-3", "seed"),  # row 76
        ("seed=99999999999999999999999", "seed"),  # row 76
        (f"seed={SEED_LIMIT}", "seed"),
        ("measure.conventions.weighting=bogus", "measure.conventions.weighting"),  # row 77
        ("measure.conventions.nc1_normalize=nope", "measure.conventions.nc1_normalize"),  # row 78
        ("measure.conventions.center_w=no", "measure.conventions.center_w"),  # YAML 'no' is a string
        ("measure.conventions.cdnv_exponent=3", "measure.conventions.cdnv_exponent"),
        ("measure.splits=[]", "measure.splits"),  # row 79: refused (a run must measure something)
        ("train.epochs=0", "train.epochs"),  # rows 99, 100
        ("train.epochs=-1", "train.epochs"),
        ("train.batch_size=0", "train.batch_size"),
        ("measure.batch_size=-5", "measure.batch_size"),
        ("data.normalize=no", "data.normalize"),
        ("report=1", "report"),
        ("optim.nesterov=yes", "optim.nesterov"),
    ],
)
def test_bad_config_values_name_their_key_path(override, path):
    with pytest.raises(ConfigError) as info:
        resolve_config(TINY, [override])
    assert f"  {path}:" in str(info.value)


def test_largest_seed_is_accepted():
    assert resolve_config(TINY, [f"seed={SEED_LIMIT - 1}"]).seed == SEED_LIMIT - 1


@pytest.mark.parametrize(
    ("override", "path", "text"),
    [
        ("model.options.activation=bogus", "model", "unknown activation 'bogus'"),  # row 74
        ("data.per_class=100000", "data", "per_class=100000"),  # row 74
        ("data.options.bogus=1", "data", "bogus"),  # row 74
        ("measure.layers=[nope]", "measure.layers", "no module named 'nope'"),  # row 74
    ],
)
def test_values_judged_at_build_time_are_config_errors(tmp_path, override, path, text):
    out = tmp_path / "run"
    with pytest.raises(ConfigError, match=rf"(?s)  {path}: .*{text}"):
        train(resolve_config(TINY, [override]), out, progress=False)
    assert not out.exists()  # nothing started


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a torch without CUDA")
def test_cuda_on_a_cpu_torch_is_refused_before_work(tmp_path):  # row 75
    with pytest.raises(ConfigError, match=r"train\.device: CUDA is not available"):
        train(resolve_config(TINY, ["train.device=cuda"]), tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()


# --------------------------------------------------------------------------------- data files (row 82)
@pytest.mark.parametrize(
    ("problem", "file", "text"),
    [("nan", "train_features.npy", "NaN or inf"), ("negative", "train_labels.npy", "label -1")],
)
def test_features_dataset_with_bad_values_names_the_file(tmp_path, rng, problem, file, text):
    y = np.repeat(np.arange(3), 20)
    H = (3 * rng.normal(size=(3, 6))[y] + rng.normal(size=(60, 6))).astype(np.float32)
    if problem == "nan":
        H[3, 2] = np.nan
    else:
        y = y - 1
    np.save(tmp_path / "train_features.npy", H)
    np.save(tmp_path / "train_labels.npy", y)
    with pytest.raises(CorruptDatasetError, match=text) as info:
        load("features", "train", root=tmp_path)
    assert info.value.path == tmp_path / file


# ------------------------------------------------------------- sizes, steps, horizons (rows 57, 107, 112, 113)
@pytest.mark.parametrize("batch_size", [0, -5])
def test_batch_size_below_one_is_refused(batch_size):  # row 57
    with pytest.raises(ValueError, match=r"batch_size must be an int >= 1"):
        next(iter_batches(np.zeros((4, 2)), np.zeros(4, dtype=int), batch_size))


@pytest.mark.parametrize("steps", [0, -5])
def test_code_search_refuses_no_steps(steps):  # row 107: the random start was reported as the code
    with pytest.raises(ValueError, match=r"steps must be an int >= 1"):
        softmax_code_search(3, 12, restarts=1, steps=steps)


@pytest.mark.parametrize(
    ("kwargs", "error", "name"),
    [
        ({"d": 0}, ValueError, "d"),  # row 112
        ({"K": 1}, ValueError, "K"),
        ({"t_end": math.inf}, ValueError, "t_end"),  # row 113: hung
        ({"t_end": math.nan}, ValueError, "t_end"),
        ({"num_checkpoints": 0}, ValueError, "num_checkpoints"),
        ({"method": "gd", "t_end": 1e9}, ValueError, "max_steps"),  # 1e11 gradient steps
    ],
)
def test_simulate_refuses_bad_sizes_and_horizons(kwargs, error, name):
    from nclab.theory import FlowOptions

    args = {"K": 3, "n": 4, "d": 4, "t_end": 1.0} | kwargs
    flow = {k: args.pop(k) for k in list(args) if k in FlowOptions.__dataclass_fields__}
    with pytest.raises(error, match=name):
        simulate(args.pop("K"), args.pop("n"), args.pop("d"), args.pop("t_end"), options=FlowOptions(**flow), **args)


def test_simulate_stops_at_its_evaluation_bound():
    with pytest.raises(RuntimeError, match=r"max_evals=20 right-hand-side evaluations"):
        from nclab.theory import FlowOptions

        simulate(3, 4, 4, 1e12, options=FlowOptions(num_checkpoints=2, max_evals=20), nc_metrics=False)


def test_closed_form_refuses_an_infinite_time():
    with pytest.raises(ValueError, match="finite"):
        closed_form_omega([1.0], [math.inf], 3, 4)


# ------------------------------------------------------------------------ output paths (rows 83, 109, 117)
def test_output_checks(tmp_path):
    regular = tmp_path / "file"
    regular.write_text("x")
    with pytest.raises(NotADirectoryError, match=rf"run directory {regular}/run: {regular} is a file"):
        check_output_dir(regular / "run", name="run directory")
    assert check_output_dir(tmp_path / "a" / "b", name="out", create=True).is_dir()
    with pytest.raises(FileNotFoundError, match=r"--out .*: the folder .*missing does not exist"):
        check_output_file(tmp_path / "missing" / "x.npy", name="--out")
    with pytest.raises(ValueError, match=r"must end in \.npy"):
        check_output_file(tmp_path / "code.txt", name="--out", suffix=".npy")
    with pytest.raises(IsADirectoryError):
        check_output_file(tmp_path, name="--out")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_unwritable_output_folder(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir(mode=0o500)
    with pytest.raises(PermissionError, match=rf"{ro} is not writable"):
        check_output_dir(ro / "run", name="run directory")


def test_train_into_a_path_under_a_file_fails_before_work(tmp_path):  # row 83
    regular = tmp_path / "file"
    regular.write_text("x")
    with pytest.raises(NotADirectoryError, match="is a file, not a folder"):
        train(resolve_config(TINY), regular / "run", progress=False)


# ------------------------------------------------------------------- every command: exit 2, no traceback
@pytest.fixture
def arrays(tmp_path, rng):
    y = np.repeat(np.arange(3), 10)
    np.save(tmp_path / "H.npy", (3 * rng.normal(size=(3, 4))[y] + rng.normal(size=(30, 4))).astype(np.float32))
    np.save(tmp_path / "y.npy", y)
    return str(tmp_path / "H.npy"), str(tmp_path / "y.npy")


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["--batch-size", "0"], ["--batch-size"]),  # row 57
        (["--batch-size", "-5"], ["--batch-size"]),  # row 57
        (["-c", "nc1_normalize=nope"], ["nc1_normalize", "true or false"]),  # row 59
        (["-c", "center_w=no"], ["center_w", "true or false"]),
    ],
)
def test_cli_measure(arrays, args, names):
    _clean_exit_2(runner.invoke(app, ["measure", *arrays, *args]), *names)


@pytest.mark.parametrize(
    ("override", "names"),
    [
        ("model.options.widths=[0]", ["model.options.widths"]),  # row 73
        ("model.options.activation=bogus", ["model", "bogus"]),  # row 74
        ("measure.layers=[nope]", ["measure.layers", "nope"]),  # row 74
        ("train.device=bogus", ["train.device"]),  # row 75
        ("seed=-3", ["seed"]),  # row 76
        ("measure.conventions.weighting=bogus", ["measure.conventions.weighting"]),  # row 77
        ("measure.conventions.nc1_normalize=nope", ["measure.conventions.nc1_normalize"]),  # row 78
        ("measure.splits=[]", ["measure.splits"]),  # row 79
    ],
)
def test_cli_train_bad_values(tiny_yaml, tmp_path, override, names):
    res = runner.invoke(
        app, ["train", str(tiny_yaml), "--out", str(tmp_path / "run"), "--no-progress", "--set", override]
    )
    _clean_exit_2(res, *names)
    assert not (tmp_path / "run").exists()


def test_cli_train_duplicate_key(tmp_path):  # row 72
    path = tmp_path / "dup.yaml"
    path.write_text(yaml.safe_dump(TINY) + "seed: 1\nseed: 2\n")
    res = runner.invoke(app, ["train", str(path), "--out", str(tmp_path / "run"), "--no-progress"])
    _clean_exit_2(res, "duplicate key 'seed'", str(path))


def test_cli_train_features_with_nan(tiny_yaml, tmp_path, rng):  # row 82
    y = np.repeat(np.arange(3), 20)
    H = (3 * rng.normal(size=(3, 6))[y] + rng.normal(size=(60, 6))).astype(np.float32)
    H[3, 2] = np.nan
    for split in ("train", "test"):
        np.save(tmp_path / f"{split}_features.npy", H)
        np.save(tmp_path / f"{split}_labels.npy", y)
    sets = ["data.name=features", f"data.root={tmp_path}", "data.per_class=null", "data.test_per_class=null"]
    args = ["train", str(tiny_yaml), "--out", str(tmp_path / "run"), "--no-progress"]
    res = runner.invoke(app, [*args, *(a for s in sets for a in ("--set", s))])
    _clean_exit_2(res, "train_features.npy", "NaN")


def test_cli_output_under_a_regular_file(tiny_yaml, tmp_path):  # rows 83, 117
    regular = tmp_path / "file"
    regular.write_text("x")
    res = runner.invoke(app, ["train", str(tiny_yaml), "--out", str(regular / "run"), "--no-progress"])
    _clean_exit_2(res, str(regular))
    res = runner.invoke(app, ["experiment", "run", "gnc-assignment", "--scale", "tiny", "--out", str(regular / "x")])
    _clean_exit_2(res, str(regular))


@pytest.mark.parametrize("epochs", ["0", "-1"])
def test_cli_demo_epochs(tmp_path, epochs):  # rows 99, 100
    _clean_exit_2(runner.invoke(app, ["demo", "--out", str(tmp_path / "dm"), "--epochs", epochs]), "--epochs")
    assert not (tmp_path / "dm").exists()


@pytest.mark.parametrize("steps", ["0", "-5"])
def test_cli_codes_steps(steps):  # row 107
    _clean_exit_2(runner.invoke(app, ["codes", "softmax", "-d", "3", "-K", "12", "--steps", steps]), "--steps")


@pytest.mark.parametrize(("name", "text"), [("missing/x.npy", "does not exist"), ("code.txt", "must end in .npy")])
def test_cli_codes_out_checked_before_the_search(tmp_path, monkeypatch, name, text):  # row 109
    import nclab.geometry.codes

    def search(*args, **kwargs):
        raise AssertionError("the search ran before --out was checked")

    monkeypatch.setattr(nclab.geometry.codes, "softmax_code_search", search)
    res = runner.invoke(app, ["codes", "softmax", "-d", "3", "-K", "6", "--out", str(tmp_path / name)])
    _clean_exit_2(res, "--out", text)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("args", "names"),
    [(["-d", "0"], ["--dim"]), (["--t-end", "inf"], ["t_end", "finite"]), (["--checkpoints", "0"], ["--checkpoints"])],
)
def test_cli_theory_simulate(args, names):  # rows 112, 113
    _clean_exit_2(runner.invoke(app, ["theory", "simulate", "-K", "3", "-n", "4", "-d", "4", *args]), *names)
