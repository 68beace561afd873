"""Short real training runs on digits: zero training error detected, collapse, schema, resume, config errors,
the CLI and the demo."""

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from typer.testing import CliRunner

from nclab.cli.train import app as train_app
from nclab.data import load
from nclab.experiments.demo import run_demo
from nclab.io import MetricRow, read_metrics
from nclab.measure import collect_features, measurement_epochs
from nclab.metrics import REGISTRY
from nclab.nets import build_model
from nclab.train import ConfigError, resolve_config, train
from nclab.train.checkpoint import load_checkpoint
from nclab.train.config import deep_merge
from nclab.train.trainer import run_id
from tests.conftest import brute_stats

FAST = {
    "name": "fast",
    "data": {"name": "digits", "per_class": 40, "test_per_class": 10},
    "model": {"name": "mlp", "options": {"widths": [32, 32], "batchnorm": True}},
    "loss": {"name": "ce"},
    "optim": {"lr": 0.05, "weight_decay": 5e-3},
    "schedule": {"name": "constant"},
    "train": {"epochs": 12, "batch_size": 64, "threads": 1},
    "measure": {"num_log": 4, "zero_error_check": "every_epoch"},
    "report": False,
}
OUTPUT_METRICS = {"loss", "error", "running_loss", "running_error", "lr"} | {
    f"mse_{k}" for k in ("L", "L_LS", "L_NC1", "L_NC23", "L_perp", "proximity_ratio")
}


@pytest.fixture(scope="module")
def fast_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("fast")
    return train(resolve_config(FAST), out, progress=False)


def test_zero_error_reached_and_detected(fast_run):
    zero = fast_run.zero_error_epoch
    assert zero is not None and zero < 12
    # every epoch's eval-mode train error was checked (every_epoch): zero is the first epoch where it is 0
    err = fast_run.series("error", "output")
    assert all(err[e] > 0 for e in err if e < zero) and err[zero] == 0.0
    assert set(range(0, zero + 1)) <= set(err)
    assert zero in fast_run.measured_epochs and 12 in fast_run.measured_epochs and 0 in fast_run.measured_epochs
    nc1 = fast_run.series("nc1")
    assert nc1[12] < nc1[0] and nc1[12] < nc1[zero]


def test_metrics_file_schema(fast_run):
    with open(fast_run.out / "metrics.csv", newline="") as fh:
        reader = csv.reader(fh)
        header, first = next(reader), next(reader)
    # the trainer's table leads with the run's id, the one summary.json records
    assert header == ["run_id", "epoch", "split", "layer", "metric", "value"]
    assert first[0] == json.loads((fast_run.out / "summary.json").read_text())["run_id"]
    rows = read_metrics(fast_run.out)
    assert rows == [tuple(r) for r in fast_run.rows]
    assert {r[1] for r in rows} == {"train", "test"}
    assert {r[2] for r in rows} == {"output", "layer1", "layer2"}
    for e, _, lay, m, v in rows:
        assert isinstance(e, int) and 0 <= e <= 12 and isinstance(v, float)
        assert m in (OUTPUT_METRICS if lay == "output" else REGISTRY), m
    for e in fast_run.measured_epochs:  # every measured epoch: PFC1-3 at every layer, NC1 at the penultimate
        for split in ("train", "test"):
            got = {(lay, m) for ee, s, lay, m, _ in rows if ee == e and s == split}
            assert {
                (lay, m) for lay in ("layer1", "layer2") for m in ("trace_ratio", "etf_gram_error", "ncc_accuracy")
            } <= got
            assert ("layer2", "nc1") in got and ("layer2", "ncc_mismatch") in got and ("layer1", "nc1") not in got
    # the parquet file holds the same long table, bit for bit (pyarrow comes with the dev/parquet extras)
    pq = pytest.importorskip("pyarrow.parquet")
    table = pq.read_table(fast_run.out / "metrics.parquet").to_pydict()
    assert list(table) == ["run_id", "epoch", "split", "layer", "metric", "value"]
    assert set(table.pop("run_id")) == {first[0]}
    assert list(zip(*table.values(), strict=True)) == rows
    summary = yaml.safe_load((fast_run.out / "summary.json").read_text())
    assert summary["zero_error_epoch"] == fast_run.zero_error_epoch
    saved = yaml.safe_load((fast_run.out / "config.yaml").read_text())
    assert resolve_config(saved) == fast_run.config


def _duplicate_keys(rows) -> list:
    seen: dict = {}
    for r in rows:
        key = (r.epoch, r.split, r.layer, r.metric)
        seen[key] = seen.get(key, 0) + 1
    return [k for k, c in seen.items() if c > 1]


def test_table_key_unique_when_zero_error_is_reached_between_measurements(fast_run):
    # the zero-error check and the extra measurement it triggers used to both write (zero, train, output, error)
    zero = fast_run.zero_error_epoch
    assert zero not in measurement_epochs(12, 4)  # the case that duplicated the row
    assert _duplicate_keys(read_metrics(fast_run.out)) == []
    assert fast_run.series("error", "output")[zero] == 0.0
    summary = yaml.safe_load((fast_run.out / "summary.json").read_text())
    assert summary["zero_error_epoch"] == zero and summary["run_id"] == run_id(fast_run.config)


def test_run_result_to_frame_is_tidy_and_pivots(fast_run):
    """The metric rows as a DataFrame: one row per MetricRow, and pivot on (epoch, split, layer) x metric works
    because the key is unique (the failure the tidy-data requirement was written for)."""
    pd = pytest.importorskip("pandas")
    frame = fast_run.to_frame()
    assert list(frame.columns) == list(MetricRow._fields)
    assert len(frame) == len(fast_run.rows)
    wide = frame.pivot(index=["epoch", "split", "layer"], columns="metric", values="value")
    zero = fast_run.zero_error_epoch
    assert wide.loc[(zero, "train", "output"), "error"] == fast_run.series("error", "output")[zero] == 0.0
    assert isinstance(wide, pd.DataFrame)


@pytest.mark.parametrize("path", sorted((Path(__file__).resolve().parents[1] / "configs").glob("*.yaml")), ids=str)
def test_shipped_configs_tiny_runs_have_a_tidy_table(path, tmp_path):
    """Every shipped config, shrunk to a few images and epochs, writes one row per (epoch, split, layer, metric)."""
    from nclab.data import DatasetNotFoundError

    raw = yaml.safe_load(path.read_text())
    if str(raw.get("train", {}).get("device", "cpu")).startswith("cuda") and not torch.cuda.is_available():
        pytest.skip(f"{path.name}: train.device {raw['train']['device']} needs a CUDA device (torch.cuda)")
    tiny = {
        "data": {"per_class": 6, "test_per_class": 3},
        "train": {"epochs": 3, "batch_size": 16, "threads": 1},
        "measure": {"num_log": 2, "zero_error_check": "every_epoch"},
        "report": False,
    }
    try:
        run = train(resolve_config(deep_merge(raw, tiny)), tmp_path / "run", progress=False)
    except DatasetNotFoundError as err:
        pytest.skip(f"{path.name}: {err}")
    rows = read_metrics(run.out)
    assert len(rows) == len(run.rows) > 0
    assert _duplicate_keys(rows) == []


class _Kill(Exception):
    pass


def test_resume_is_bit_identical_and_loses_nothing(fast_run, tmp_path):
    out = tmp_path / "run"

    def kill_at_7(epoch):
        if epoch == 7:
            raise _Kill

    with pytest.raises(_Kill):
        train(resolve_config(FAST), out, progress=False, on_epoch_end=kill_at_7)
    written = (out / "metrics.csv").read_text()
    assert max(r[0] for r in read_metrics(out)) == 7
    with pytest.raises(FileExistsError, match="resume"):
        train(resolve_config(FAST), out, progress=False)
    resumed = train(resolve_config(FAST), out, resume=True, progress=False)
    final = (out / "metrics.csv").read_text()
    assert final.startswith(written)  # nothing already written was lost or changed
    assert final == (fast_run.out / "metrics.csv").read_text()  # bit-identical to the uninterrupted run
    assert resumed.zero_error_epoch == fast_run.zero_error_epoch
    with pytest.raises(ConfigError, match=r"optim\.lr"):
        train(resolve_config(FAST, ["optim.lr=0.1"]), out, resume=True, progress=False)


def test_checkpoint_every_and_partial_epochs(tmp_path):
    cfg = resolve_config(FAST, ["checkpoint.every=4", "train.epochs=6", "measure.splits=[train]"])

    def kill_at_6(epoch):
        if epoch == 6:
            raise _Kill

    with pytest.raises(_Kill):
        train(cfg, tmp_path, progress=False, on_epoch_end=kill_at_6)
    # epoch 6 is the last one, so it was checkpointed; an uninterrupted twin gives the same table
    twin = train(cfg, tmp_path / "twin", progress=False)
    assert read_metrics(tmp_path) == twin.rows


@pytest.mark.parametrize(
    ("override", "path"),
    [
        ("optim.lr=-1", "optim.lr"),
        ("train.epoch=3", "train.epoch: unknown key"),
        ("model.options.depth=3", "model.options.depth"),
        ("model.head.kind=softmax", "model.head.kind"),
        ("data.name=places365", "data.name"),
        ("measure.conventions={weighting: sideways2}", "measure.conventions.weighting: must be balanced or empirical"),
        ("measure.conventions={colour: red}", "measure.conventions"),
        ("loss.label_smoothing=1.5", "loss.label_smoothing"),
    ],
)
def test_bad_config_rejected_with_key_path(override, path):
    with pytest.raises(ConfigError) as info:
        resolve_config(FAST, [override])
    assert path in str(info.value)
    if "sideways2" in override:  # the value is named too
        assert "got 'sideways2'" in str(info.value)


def test_cli_train_and_report(tmp_path):
    cfg_file = tmp_path / "c.yaml"
    cfg_file.write_text(yaml.safe_dump(FAST))
    runner = CliRunner()
    out = tmp_path / "run"
    res = runner.invoke(
        train_app,
        ["train", str(cfg_file), "--set", "train.epochs=3", "--out", str(out), "--no-progress"],
    )
    assert res.exit_code == 0, res.output
    assert (out / "metrics.csv").is_file() and not (out / "report.html").exists() and "zero-error epoch" in res.output
    bad = runner.invoke(train_app, ["train", str(cfg_file), "--set", "optim.momentum=2", "--out", str(tmp_path / "b")])
    assert bad.exit_code == 2 and "optim.momentum" in bad.output
    rep = runner.invoke(train_app, ["report", str(out)])
    assert rep.exit_code == 0 and (out / "report.html").is_file()
    assert runner.invoke(train_app, ["report", str(tmp_path)]).exit_code == 2


def test_run_demo_short(tmp_path):
    path = run_demo(tmp_path, epochs=3, progress=False)
    assert path == tmp_path / "report.html" and path.is_file()
    for loss in ("mse", "ce"):
        assert (tmp_path / loss / "metrics.csv").is_file() and (tmp_path / loss / "report.html").is_file()
        rows = read_metrics(tmp_path / loss)
        assert {r[2] for r in rows} == {"output", "layer1", "layer2", "layer3"}
        # the rows of the last epoch are the NC1 of the saved final model: rebuild it from config.yaml and the
        # checkpoint, take its eval-mode features of the train split, and recompute NC1 = Tr(Sigma_W Sigma_B^+) / K
        # from two-pass numpy class statistics, Sigma_B^+ on its K - 1 nonzero eigenvalues
        cfg = resolve_config(yaml.safe_load((tmp_path / loss / "config.yaml").read_text()))
        saved = load_checkpoint(tmp_path / loss / "checkpoints" / "last.pt")
        assert saved["epoch"] == 3
        d = cfg.data
        data = load(d.name, "train", per_class=d.per_class, root=d.root, seed=cfg.seed, pad_to=d.pad_to,
                    normalize=d.normalize, **d.options)  # fmt: skip
        model = build_model(
            cfg.model.name, data.input_shape, data.K, head=cfg.model.head.build_kwargs(), **cfg.model.options
        )
        model.load_state_dict(saved["model"])
        feats = collect_features(model, data.x)
        y = data.y.numpy()
        K = data.K
        logged = {r[2]: r[4] for r in rows if r[0] == 3 and r[1] == "train" and r[3] == "nc1"}
        assert model.penultimate_name in logged  # the penultimate layer is measured at every logged epoch
        for layer, value in logged.items():
            ref = brute_stats(feats[layer].double().numpy(), y, K)
            lam, V = np.linalg.eigh(ref["sb_bal"])
            sb_pinv = (V[:, -(K - 1) :] / lam[-(K - 1) :]) @ V[:, -(K - 1) :].T
            assert value == pytest.approx(np.trace(ref["sw"] @ sb_pinv) / K, rel=1e-9), (loss, layer)


def test_mse_runs_log_the_exact_mse_decomposition(tmp_path):
    # [Han et al. 2022] Thms 1-2 at every measured epoch of an MSE run, from the statistics of the measurement pass
    run_demo(tmp_path, epochs=6, progress=False)
    rows = read_metrics(tmp_path / "mse")
    table: dict = {}
    for e, split, lay, m, v in rows:
        if lay == "output":
            table.setdefault((e, split), {})[m] = v
    measured = [k for k, t in table.items() if "mse_L" in t]
    assert len(measured) >= 4 and {s for _, s in measured} == {"train", "test"}
    K = 10
    penalty = {}
    for (e, _split), t in table.items():
        if "mse_L" not in t:
            continue
        assert t["mse_L"] == pytest.approx(t["mse_L_NC1"] + t["mse_L_NC23"] + t["mse_L_perp"], rel=1e-9)
        assert t["mse_L_LS"] == pytest.approx(t["mse_L_NC1"] + t["mse_L_NC23"], rel=1e-9)
        assert t["mse_L_perp"] >= 0 and t["mse_L_LS"] <= t["mse_L"] * (1 + 1e-12)
        assert t["mse_proximity_ratio"] == pytest.approx(t["mse_L_perp"] / t["mse_L_LS"], rel=1e-9)
        # independent check: L (from class statistics) minus the per-sample eval loss of the same pass
        # (nn.MSELoss mean = 2/K of the [Han et al. 2022] data term) is the weight penalty, the same on both splits
        penalty.setdefault(e, []).append(t["mse_L"] - K / 2 * t["loss"])
    for e, vals in penalty.items():
        # the eval loss is a float32 forward pass (the statistics are float64): float32-level agreement
        assert len(vals) == 2 and vals[0] == pytest.approx(vals[1], rel=1e-5) and vals[0] > 0, e
    # the CE run has no decomposition
    assert not any(m.startswith("mse_") for _, _, _, m, _ in read_metrics(tmp_path / "ce"))


@pytest.mark.slow
def test_sigkill_mid_run_then_resume_is_bit_identical(tmp_path):
    # a real kill -9 of a `nclab train` process at an arbitrary moment (atomic writes: every file on disk stays
    # readable), then --resume: the metrics equal an uninterrupted run's, and nothing written before was lost
    import os
    import signal
    import subprocess
    import sys
    import time

    cfg = {**FAST, "train": {**FAST["train"], "epochs": 150}, "checkpoint": {"every": 1}}
    cfg_path = tmp_path / "cfg.yaml"
    cfg_path.write_text(yaml.safe_dump(cfg))
    out = tmp_path / "killed"
    cmd = [sys.executable, "-m", "nclab", "train", str(cfg_path), "--out", str(out), "--no-progress"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    log = out / "log.txt"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if log.is_file() and "epoch 30:" in log.read_text():
            break
        time.sleep(0.02)
    assert proc.poll() is None, "the run finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    written = read_metrics(out)  # readable: no half-written file
    assert 30 <= max(r[0] for r in written) < 150
    resumed = train(resolve_config(cfg), out, resume=True, progress=False)
    twin = train(resolve_config(cfg), tmp_path / "twin", progress=False)
    assert resumed.rows == twin.rows  # bit-identical to the uninterrupted run
    assert read_metrics(out)[: len(written)] == written  # what was on disk before the kill is kept as it was


@pytest.mark.parametrize("path", sorted((Path(__file__).resolve().parents[1] / "configs").glob("*.yaml")), ids=str)
def test_shipped_configs_validate(path):
    """Every config in configs/ resolves (pydantic validation, presets merged) and names a known model."""
    from nclab.nets import NET_MODELS

    cfg = resolve_config(yaml.safe_load(path.read_text()))
    assert cfg.model.name in NET_MODELS and cfg.train.epochs >= 1
