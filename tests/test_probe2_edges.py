"""Rows of the second reliability probe (docs/reliability.md) in the logger sinks, configs, probes and the
transfer study: each test reproduces the probe's case and checks the refusal (its type and what its message
names) or the result that replaces the crash.

Cases that hung or retried for minutes before the fix (an unreachable MLflow server, an unopenable SQLite
store, a YAML alias bomb) run in a child process under a timeout, so that the code before the fix fails the
test instead of hanging it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import nclab
from nclab.io.sinks import RunTableSink, make_sink

SRC = Path(nclab.__file__).resolve().parents[1]  # the tree under test, for child processes


def _needs(pkg: str):
    return pytest.mark.skipif(importlib.util.find_spec(pkg) is None, reason=f"{pkg} is not installed")


def _child(code: str, cwd: Path, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter on the tree under test; a run past ``timeout`` fails the test."""
    env = {**os.environ, "PYTHONPATH": str(SRC), "OMP_NUM_THREADS": "1"}
    try:
        return subprocess.run(
            [sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"no result within {timeout:g} s: the case hangs")


def _cli(args: list[str], cwd: Path, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    return _child(f"import sys; from nclab.cli import main; sys.argv = ['nclab', *{args!r}]; main()", cwd, timeout)


def _closed_port() -> int:
    """A local port with nothing listening (bound, then released): a connection to it is refused at once."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


TINY = textwrap.dedent(
    """\
    name: tiny
    data: {name: digits, per_class: 10, test_per_class: 5}
    model: {name: mlp, options: {widths: [8]}}
    train: {epochs: 1, batch_size: 50, threads: 1}
    measure: {num_log: 1}
    report: false
    """
)


# ------------------------------------------------------------------------------------------------- sinks
def test_p2_row_053_run_table_sink_bad_target_fails_at_construction(tmp_path):
    from torch import nn

    from nclab import CollapseMonitor

    (tmp_path / "afile").write_text("a regular file")
    with pytest.raises(NotADirectoryError, match=r"out .*afile/t: .*afile is a file, not a folder"):
        RunTableSink(tmp_path / "afile" / "t")
    net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    # the monitor's default table sink: refused when the monitor is built, before any measurement
    with pytest.raises(NotADirectoryError, match="afile is a file"):
        CollapseMonitor(net, 3, out=tmp_path / "afile" / "run")
    if Path("/proc/self").is_dir():  # the kernel's proc filesystem takes no new folders, even from root
        with pytest.raises((FileNotFoundError, PermissionError), match="out /proc/nclab-p2-53"):
            make_sink({"kind": "table", "out": "/proc/nclab-p2-53"}, tmp_path)
    RunTableSink(tmp_path / "new" / "run")  # a good target is made at once
    assert (tmp_path / "new" / "run").is_dir()


@_needs("wandb")
def test_p2_row_055_wandb_dir_that_cannot_be_used_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))  # where W&B's silent fallback would have gone
    (tmp_path / "tmp").mkdir()
    (tmp_path / "afile").write_text("a regular file")
    with pytest.raises(NotADirectoryError, match=r"dir .*afile/wb: .*afile is a file, not a folder"):
        make_sink({"kind": "wandb", "dir": str(tmp_path / "afile" / "wb")}, tmp_path)
    assert list((tmp_path / "tmp").iterdir()) == []  # no run started anywhere


@_needs("mlflow")
def test_p2_row_057_mlflow_sqlite_store_that_cannot_be_opened(tmp_path):
    (tmp_path / "adir").mkdir()  # a folder where the database file should be: SQLite cannot open it
    uris = [f"sqlite:///{tmp_path / 'adir'}"]
    if Path("/proc/self").is_dir():
        uris.append("sqlite:////proc/nclab-p2-57.db")  # the probe's case
    code = textwrap.dedent(
        f"""\
        import json, time
        from nclab.io.sinks import make_sink
        out = []
        for uri in {uris!r}:
            t = time.perf_counter()
            try:
                make_sink({{"kind": "mlflow", "tracking_uri": uri}}, ".")
                out.append(["no error", "", 0.0])
            except Exception as err:
                out.append([type(err).__name__, str(err), time.perf_counter() - t])
        print(json.dumps(out))
        """
    )
    res = _child(code, tmp_path)  # MLflow itself retries such a file for ~100 s before its own error
    assert res.returncode == 0, res.stderr[-2000:]
    for uri, (kind, message, seconds) in zip(uris, json.loads(res.stdout.splitlines()[-1]), strict=True):
        assert kind == "SinkError"
        assert f"MLflow tracking_uri {uri!r}" in message and "unable to open database file" in message
        assert seconds < 10


@_needs("mlflow")
def test_p2_row_058_mlflow_store_under_a_regular_file(tmp_path):
    (tmp_path / "afile").write_text("a regular file")
    uri = f"sqlite:///{tmp_path / 'afile' / 'x.db'}"
    # a ValueError (SinkError): a user error, which the CLI reports in one paragraph with exit code 2
    with pytest.raises(ValueError) as err:
        make_sink({"kind": "mlflow", "tracking_uri": uri}, tmp_path)
    assert type(err.value).__name__ == "SinkError"
    assert str(err.value) == (
        f"MLflow tracking_uri {uri!r}: cannot open the SQLite database {tmp_path / 'afile' / 'x.db'} "
        f"({tmp_path / 'afile'} is a file, not a folder)"
    )


@_needs("mlflow")
def test_p2_row_059_mlflow_unsupported_uri_scheme(tmp_path):
    with pytest.raises(ValueError) as err:  # SinkError
        make_sink({"kind": "mlflow", "tracking_uri": "bogus://x"}, tmp_path)
    message = str(err.value)
    assert message.startswith(
        "MLflow tracking_uri 'bogus://x': MLflow has no tracking store for the URI scheme 'bogus'"
    )
    assert "registry" not in message.lower()  # MLflow's own message blamed the model registry


@_needs("mlflow")
def test_p2_row_060_unreachable_mlflow_server_fails_within_the_timeout(tmp_path):
    uri = f"http://127.0.0.1:{_closed_port()}"
    code = textwrap.dedent(
        f"""\
        import time
        import mlflow, mlflow.tracking.registry, sqlalchemy.exc  # first: only the check is timed
        from nclab.io.sinks import MLflowSink
        t = time.perf_counter()
        try:
            MLflowSink({uri!r})
            print("no error")
        except Exception as err:
            print(f"{{time.perf_counter() - t:.3f}} {{type(err).__name__}}: {{err}}")
        """
    )
    res = _child(code, tmp_path)  # MLflow's own retries hung for over 150 s (the probe's timeout)
    seconds, _, message = res.stdout.strip().splitlines()[-1].partition(" ")
    assert float(seconds) < 3, message  # refused at once; a silent host would be given up after 10 s
    assert message.startswith(f"SinkError: MLflow tracking_uri {uri!r}: the tracking server at 127.0.0.1:")
    assert "cannot be reached within 10 s (Connection refused); start the server, or fix tracking_uri" in message
    # the same through `nclab train`: one error paragraph, exit code 2, before any epoch
    (tmp_path / "cfg.yaml").write_text(TINY + f"log: {{sinks: [{{kind: mlflow, tracking_uri: '{uri}'}}]}}\n")
    res = _cli(["train", "cfg.yaml", "--out", "run", "--no-progress"], tmp_path)
    assert res.returncode == 2, res.stderr[-2000:]
    assert f"error: MLflow tracking_uri {uri!r}" in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "run" / "metrics.csv").exists()


def test_p2_row_062_misspelt_or_mistyped_sink_option_is_refused(tmp_path):
    from nclab.train import ConfigError, resolve_config

    with pytest.raises(ValueError, match=r"^sink 'tensorboard': unknown option 'logdir'; known: log_dir$"):
        make_sink({"kind": "tensorboard", "logdir": "tb"}, tmp_path)
    with pytest.raises(
        ValueError, match=r"unknown option 'tracking'; known: tracking_uri, experiment, run_name, timeout"
    ):
        make_sink({"kind": "mlflow", "tracking": "sqlite:///x.db"}, tmp_path)
    with pytest.raises(TypeError, match=r"sink 'table': option 'resume' must be true/false, got 'yes'"):
        make_sink({"kind": "table", "resume": "yes"}, tmp_path)
    with pytest.raises(TypeError, match=r"option 'timeout' must be a number, got True"):
        make_sink({"kind": "mlflow", "timeout": True}, tmp_path)
    with pytest.raises(TypeError, match=r"option 'log_dir' must be a string or a path, got 3"):
        make_sink({"kind": "tensorboard", "log_dir": 3}, tmp_path)
    assert not (tmp_path / "tensorboard").exists()  # nothing was made for the refused entries
    # a training config is refused when it is read, naming the key path
    with pytest.raises(ConfigError, match=r"log\.sinks: sink 'tensorboard': unknown option 'logdir'"):
        resolve_config({"log": {"sinks": [{"kind": "tensorboard", "logdir": "tb"}]}})
    assert resolve_config({"log": {"sinks": [{"kind": "table", "resume": True}]}}).log.sinks[0]["resume"] is True


# ------------------------------------------------------------------------------------------------ configs
_BOMB = "".join(
    [
        "a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n",
        *(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 9)),
    ]
)


def test_p2_row_136_yaml_alias_bomb_is_refused_quickly(tmp_path):
    from nclab.io.yaml_io import load_yaml

    (tmp_path / "bomb.yaml").write_text(_BOMB + "name: bomb\n")
    (tmp_path / "tiny.yaml").write_text(TINY)
    (tmp_path / "sweep.yaml").write_text(_BOMB + "name: s\nbase: tiny.yaml\ngrid: {optim.lr: *a8}\n")
    code = textwrap.dedent(
        """\
        import time
        from nclab.train.config import load_config
        from nclab.train.sweep import load_sweep
        for load, path in ((load_config, "bomb.yaml"), (load_sweep, "sweep.yaml")):
            t = time.perf_counter()
            try:
                load(path)
                print("no error")
            except ValueError as err:
                print(f"{time.perf_counter() - t:.3f} {err}")
        """
    )
    res = _child(code, tmp_path)  # before the fix: no return within 60 s, 340 MB and growing
    lines = res.stdout.strip().splitlines()
    assert len(lines) == 2, res.stderr[-2000:]
    for line, name in zip(lines, ("bomb.yaml", "sweep.yaml"), strict=True):
        seconds, _, message = line.partition(" ")
        assert float(seconds) < 2.0
        assert message.startswith(f"{name}: its YAML aliases expand it by ")
        assert "more than the limit of 100,000 (an alias bomb?)" in message
    # bomb.yaml as a tree: the list a0 has 1 + 10 nodes, a_i = 1 + 10 a_{i-1}; the root, 10 keys and `bomb`
    # are 12 more. Written, it has 31 distinct nodes (a0's 11, one list node per a1..a8, root, keys, `bomb`).
    sizes = [11]
    for _ in range(8):
        sizes.append(1 + 10 * sizes[-1])
    assert f"expand it by {sum(sizes) + 12 - 31:,} nodes" in lines[0]  # 1,234,567,880
    # the command: one error paragraph, exit code 2
    res = _cli(["train", "bomb.yaml", "--no-progress"], tmp_path)
    assert res.returncode == 2 and "error: bomb.yaml: its YAML aliases" in res.stderr
    assert "Traceback" not in res.stderr
    # row 137 still works: anchors, aliases and merge keys of ordinary size
    doc = "common: &c {lr: 0.1, momentum: 0.9}\noptim: {<<: *c, momentum: 0.5}\nlists: [&l [1, 2], *l]\n"
    assert load_yaml(doc) == {
        "common": {"lr": 0.1, "momentum": 0.9},
        "optim": {"lr": 0.1, "momentum": 0.5},
        "lists": [[1, 2], [1, 2]],
    }
    with pytest.raises(ValueError, match="refers to a node that contains it"):
        load_yaml("a: &a [1, *a]", source="loop.yaml")


def test_p2_row_140_run_name_cannot_escape_runs(tmp_path, monkeypatch):
    from nclab.cli import app

    work = tmp_path / "a" / "b"
    work.mkdir(parents=True)
    (work / "tiny.yaml").write_text(TINY)
    monkeypatch.chdir(work)
    runner = CliRunner()
    for name in ("../../escape", "sub/run", "/tmp/nclab-p2-140", ".."):
        res = runner.invoke(app, ["train", "tiny.yaml", "--set", f"name={name}", "--no-progress"])
        assert res.exit_code == 2, res.output
        assert f"error: name {name!r} cannot name a folder under runs: it must be one folder name" in res.output
        assert "Traceback" not in res.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a"] and not (work / "runs").exists()
    assert not Path("/tmp/nclab-p2-140").exists()
    # a sweep's default folder runs/sweeps/<name> follows the same rule
    (work / "s.yaml").write_text("name: ../x\nbase: tiny.yaml\nseeds: [0]\n")
    res = runner.invoke(app, ["sweep", "s.yaml", "--local"])
    assert res.exit_code == 2 and "name '../x' cannot name a folder under runs/sweeps" in res.output


# ------------------------------------------------------------------------------------------- probe, study
def _save_task(folder: Path, train: tuple[np.ndarray, np.ndarray], test: tuple[np.ndarray, np.ndarray]) -> None:
    folder.mkdir()
    for split, (X, y) in (("train", train), ("test", test)):
        np.save(folder / f"{split}_features.npy", X.astype(np.float32))
        np.save(folder / f"{split}_labels.npy", y)


def _pretrain_features(tmp_path: Path) -> list[str]:
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(4), 30)
    np.save(tmp_path / "H.npy", rng.normal(size=(120, 6)) + 3 * np.eye(6)[y])
    np.save(tmp_path / "y.npy", y)
    return [str(tmp_path / "H.npy"), str(tmp_path / "y.npy")]


def test_p2_row_123_perfect_probe_is_a_result(tmp_path):
    from nclab.cli import app
    from nclab.transfer import mean_log_odds, mlog

    # the closed forms: log odds of 1 is +inf, so MLO = +inf; inf - inf is nan
    assert mean_log_odds([1.0, 0.5]) == np.inf and mean_log_odds([0.0, 0.5]) == -np.inf
    assert np.isnan(mean_log_odds([0.0, 1.0]))
    assert mlog([0.5], 1.0) == -np.inf and np.isnan(mlog([1.0], 1.0))
    assert mlog([1.0, 0.9], 0.5) == np.inf
    # d = 5000 > N = 10: separable, the probe is perfect
    rng = np.random.default_rng(1)
    y = np.arange(10) % 2
    X = [rng.normal(size=(10, 5000)) for _ in range(2)]
    for x in X:
        x[:, 0] += 50.0 * (2 * y - 1)
    _save_task(tmp_path / "sep", (X[0], y), (X[1], y))
    args = ["probe", *_pretrain_features(tmp_path), "-t", f"sep={tmp_path / 'sep'}", "--lams", "1e-3:1:4"]
    res = CliRunner().invoke(app, [*args, "-p", "0.8", "-f", "json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["tasks"]["sep"]["accuracy"] == 1.0 and out["mlo"] == "inf" and out["mlog"] == "inf"
    note = "accuracy 1 (a perfect probe, log odds +inf) on 'sep': MLO = +inf, MLOG = +inf"
    assert out["notes"] == [note] and f"note: {note}" in res.stderr
    # CLI messages name CLI flags, never the API's percent=True
    bad = CliRunner().invoke(app, [*args, "-p", "7"])
    assert bad.exit_code == 2 and "--pretrain-accuracy" in bad.output and "percent" not in bad.output


def test_p2_row_126_unseen_test_class_is_noted(tmp_path):
    from nclab.cli import app
    from nclab.transfer import linear_probe

    rng = np.random.default_rng(2)
    centres = 10.0 * rng.normal(size=(8, 8))  # far apart: every seen class is classified right
    ytr = np.repeat(np.arange(4), 30)
    yte = np.concatenate([np.repeat(np.arange(4), 10), np.full(10, 7)])
    train = (rng.normal(size=(120, 8)) + centres[ytr], ytr)
    test = (rng.normal(size=(50, 8)) + centres[yte], yte)
    res = linear_probe(train, test, lams=np.logspace(-3, 0, 4))
    assert res.top1 == 40 / 50  # the 10 samples of class 7 are all errors, nothing else
    assert res.mean_per_class == 4 / 5  # recall 1 on classes 0-3, 0 on class 7
    expected = (
        "test labels [7] never occur in the training data: the probe cannot predict them, so their 10 test "
        "sample(s) all count as errors"
    )
    assert res.notes == [expected]
    assert linear_probe(train, (test[0][:40], yte[:40]), lams=[1.0]).notes == []
    _save_task(tmp_path / "unseen", train, test)
    cli = CliRunner().invoke(
        app, ["probe", *_pretrain_features(tmp_path), "-t", f"u={tmp_path / 'unseen'}", "--lams", "1e-3:1:4"]
    )
    assert cli.exit_code == 0, cli.output
    assert f"note: u: {expected}" in cli.stderr


def test_p2_row_130_correlation_of_two_settings_is_nan_with_a_note(tmp_path):
    from nclab.cli import app
    from nclab.transfer.study import correlation_table

    def rows(values):
        return [
            {"group": "g", "value": v, "seed": 0, "m": float(v), "pretrain_accuracy": 0.5 + v / 10, "mlog": v**2}
            for v in values
        ]

    two = {c["metric"]: c for c in correlation_table(rows([1, 2]), ["m"]) if c["group"] == "g"}
    assert np.isnan(two["m"]["pearson_r"]) and np.isnan(two["m"]["spearman_rho"])
    assert two["m"]["note"] == (
        "2 points: r and rho need at least 3 (any 2 points give r = rho = +-1, which is no evidence)"
    )
    three = {c["metric"]: c for c in correlation_table(rows([1, 2, 3]), ["m"]) if c["group"] == "g"}
    x, y = np.array([1.0, 2, 3]), np.array([1.0, 4, 9])
    assert three["m"]["pearson_r"] == pytest.approx(np.corrcoef(x, y)[0, 1], abs=1e-12)
    assert three["m"]["spearman_rho"] == 1.0 and three["m"]["note"] == ""
    # the command: a study of 2 settings says why its correlations are nan, on stderr and in study.json
    study = {
        "name": "two",
        "base": {
            "data": {"name": "digits", "per_class": 10, "test_per_class": 5, "options": {"classes": [0, 1, 2, 3, 4]}},
            "model": {"name": "mlp", "options": {"widths": [16]}},
            "train": {"epochs": 2, "batch_size": 50, "threads": 1},
            "measure": {"num_log": 1},
            "report": False,
        },
        "groups": [{"name": "tau", "axis": "loss.tau", "values": [0.5, 1.0]}],
        "downstream": [
            {"name": "rest", "dataset": "digits", "classes": [5, 6, 7, 8, 9], "per_class": 10, "test_per_class": 5}
        ],
        "probe": {"lams": [1e-2, 1.0, 3], "max_iter": 100},
        "threads": 1,
    }
    (tmp_path / "study.yaml").write_text(json.dumps(study))  # JSON is YAML
    res = CliRunner().invoke(app, ["transfer", "run", str(tmp_path / "study.yaml"), "--out", str(tmp_path / "st")])
    assert res.exit_code == 0, res.output
    summary = json.loads((tmp_path / "st" / "study.json").read_text())
    assert len(summary["notes"]) == 1
    note = summary["notes"][0]
    assert note.startswith("r and rho are nan for tau/nc1, tau/trace_ratio, ") and note.endswith(
        "and 4 more: " + two["m"]["note"]
    )
    assert f"note: {note}" in res.stderr
