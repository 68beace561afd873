"""``nclab sweep``: trials expanded from a sweep file, run on Ray (2 workers) or in-process (``--local``), indexed
in ``sweep.csv``; re-runs skip completed trials and resume interrupted ones; bad sweep files exit 2 and write
nothing."""

import csv
import importlib.util
import json
import time

import pytest
import yaml
from typer.testing import CliRunner

from nclab.cli import app
from nclab.io import read_metrics, read_run_id
from nclab.train import resolve_config, train
from nclab.train.sweep import SWEEP_COLUMNS, SweepError, SweepSpec, expand_trials, load_sweep, run_sweep
from nclab.train.trainer import run_id

runner = CliRunner()

TINY = {
    "name": "tiny",
    "data": {"name": "digits", "per_class": 12, "test_per_class": 4},
    "model": {"name": "mlp", "options": {"widths": [16, 16]}},
    "train": {"epochs": 2, "batch_size": 32, "threads": 1},
    "measure": {"num_log": 1},
    "report": False,
}
BAD_LAYER = "measure.layers=[nosuchlayer]"  # a valid config that fails when the model is built


def _write(tmp_path, sweep: dict, name: str = "sweep.yaml"):
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    path = tmp_path / name
    path.write_text(yaml.safe_dump({"base": "tiny.yaml", **sweep}))
    return path


def _table(sweep_dir):
    with open(sweep_dir / "sweep.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert tuple(rows[0]) == SWEEP_COLUMNS
    return {r["trial_id"]: r for r in rows}


def _log_lines(sweep_dir, verb):
    return [ln.split()[3] for ln in (sweep_dir / "sweep.log").read_text().splitlines() if ln.split()[2] == verb]


def _stamp(sweep_dir, tids):
    return {
        t: ((sweep_dir / t / "metrics.csv").stat().st_mtime_ns, (sweep_dir / t / "metrics.csv").read_bytes())
        for t in tids
    }


def test_expand_grid_overrides_seeds_with_stable_ids():
    spec = SweepSpec(base="x", grid={"optim.lr": [0.1, 0.2], "model.options.widths": [[8], [8, 8]]}, seeds=[0, 1])
    base = dict(TINY)
    trials = expand_trials(spec, base)
    assert len(trials) == 2 * 2 * 2
    assert trials[0].overrides == ("optim.lr=0.1", "model.options.widths=[8]", "seed=0")
    assert trials[-1].overrides == ("optim.lr=0.2", "model.options.widths=[8, 8]", "seed=1")
    # the id is the trainer's run id of the resolved config: the same on every expansion, distinct per trial
    cfg = resolve_config(base, ["optim.lr=0.2", "model.options.widths=[8, 8]", "seed=1"])
    assert trials[-1].trial_id == run_id(cfg) and trials[-1].config == cfg
    assert [t.trial_id for t in expand_trials(spec, base)] == [t.trial_id for t in trials]
    assert len({t.trial_id for t in trials}) == 8
    crossed = expand_trials(SweepSpec(base="x", overrides=[["optim.lr=0.3"], []], grid={"seed": [4]}), base)
    assert [t.overrides for t in crossed] == [("optim.lr=0.3", "seed=4"), ("seed=4",)]


@pytest.mark.parametrize(
    ("sweep", "needle"),
    [
        ({"grid": {"optim.lr": [0.1]}, "sedes": [1]}, "sedes: unknown key"),
        ({"grid": {}}, "grid is empty"),
        ({"grid": {"optim.lr": []}}, "grid.optim.lr is an empty list"),
        ({"seeds": []}, "seeds is an empty list"),
        ({"overrides": []}, "overrides is an empty list"),
        ({}, "nothing to sweep"),
        ({"overrides": [["optim.lr=0.1"], ["optim.lr=0.1"]]}, "duplicate trial tiny-"),
        ({"grid": {"optim.lrr": [0.1]}}, "optim.lrr: unknown key"),
        ({"grid": {"optim.momentum": [0.5, 2]}}, "optim.momentum"),
    ],
)
def test_bad_sweep_files_exit_2_and_write_nothing(tmp_path, sweep, needle):
    path = _write(tmp_path, sweep)
    out = tmp_path / "out"
    out.mkdir()
    (out / "sweep.csv").write_text("keep me\n")
    res = runner.invoke(app, ["sweep", str(path), "--out", str(out), "--local"])
    assert res.exit_code == 2, res.output
    assert needle in res.stderr and "Traceback" not in res.output
    assert (out / "sweep.csv").read_text() == "keep me\n" and sorted(p.name for p in out.iterdir()) == ["sweep.csv"]
    with pytest.raises(SweepError, match=needle.split(":")[0]):
        spec, base, _ = load_sweep(path)
        expand_trials(spec, base)


def test_ray_missing_names_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "ray", None)  # `import ray` raises ImportError
    path = _write(tmp_path, {"seeds": [0]})
    res = runner.invoke(app, ["sweep", str(path), "--out", str(tmp_path / "out")])
    assert res.exit_code == 2 and "pip install 'nclab[sweep]'" in res.stderr and "--local" in res.stderr
    assert not (tmp_path / "out").exists()


def test_local_sweep_records_failure_skips_completed_and_resumes_interrupted(tmp_path):
    path = _write(tmp_path, {"overrides": [["optim.lr=0.02"], ["optim.lr=0.05"], [BAD_LAYER]], "seeds": [3]})
    out = tmp_path / "out"
    spec, base, _ = load_sweep(path)
    ok, interrupted, bad = (t.trial_id for t in expand_trials(spec, base))

    # an interrupted trial: killed after its first epoch's checkpoint
    class Stop(Exception):
        pass

    def stop(epoch):
        raise Stop

    with pytest.raises(Stop):
        train(resolve_config(base, ["optim.lr=0.05", "seed=3"]), out / interrupted, progress=False, on_epoch_end=stop)
    assert max(r.epoch for r in read_metrics(out / interrupted)) == 1

    res = runner.invoke(app, ["sweep", str(path), "--out", str(out), "--local"])
    assert res.exit_code == 1, res.output  # one trial failed
    assert "1 of 3 trials failed" in res.stderr
    table = _table(out)
    assert [table[t]["status"] for t in (ok, interrupted, bad)] == ["completed", "completed", "failed"]
    # a bad layer name is a user error now (probe row 74): ConfigError under its key path, not a bare KeyError
    assert table[bad]["error"].startswith("ConfigError: invalid config: measure.layers: no module named 'nosuchlayer'")
    assert table[ok]["overrides"] == "optim.lr=0.02 seed=3" and table[ok]["epochs"] == "2"
    assert _log_lines(out, "start") == [ok, bad] and _log_lines(out, "resume") == [interrupted]
    for tid in (ok, interrupted):
        summary = json.loads((out / tid / "summary.json").read_text())
        assert summary["run_id"] == tid == read_run_id(out / tid)
        rows = read_metrics(out / tid)
        assert max(r.epoch for r in rows) == 2 and float(table[tid]["nc1"]) == next(
            r.value
            for r in rows
            if r.epoch == 2 and r.split == "train" and r.layer == summary["penultimate"] and r.metric == "nc1"
        )
    # the resumed trial continued from epoch 1: its log shows one start and one resume
    assert "resumed from epoch 1" in (out / interrupted / "log.txt").read_text()
    assert not (out / bad).exists()

    before = _stamp(out, [ok, interrupted])
    res = runner.invoke(app, ["sweep", str(path), "--out", str(out), "--local"])
    assert res.exit_code == 1
    assert _stamp(out, [ok, interrupted]) == before
    assert _log_lines(out, "start") == [ok, bad] and _log_lines(out, "resume") == [interrupted]  # nothing new
    assert _log_lines(out, "skip")[-3:] == [ok, interrupted, bad]
    assert _table(out) == table


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="Ray is not installed (pip install 'nclab[sweep]')")
def test_ray_sweep_two_workers_one_failure_then_rerun_runs_nothing(tmp_path):
    variants = [["optim.lr=0.01"], ["optim.lr=0.02"], ["optim.lr=0.05"], [BAD_LAYER]]
    path = _write(tmp_path, {"overrides": variants, "resources": {"num_cpus": 2, "cpus_per_trial": 1}})
    out = tmp_path / "out"
    result = run_sweep(path, out)
    tids = list(result.rows)
    table = _table(out)
    assert [table[t]["status"] for t in tids] == ["completed"] * 3 + ["failed"]
    assert result.failed == [tids[3]] and "nosuchlayer" in table[tids[3]]["error"]
    for t in tids[:3]:
        assert read_run_id(out / t) == t and max(r.epoch for r in read_metrics(out / t)) == 2
    # three trials with different learning rates: three different runs
    assert len({table[t]["nc1"] for t in tids[:3]}) == 3
    before = _stamp(out, tids[:3])
    time.sleep(0.01)
    again = run_sweep(path, out)
    assert again.rows == result.rows and _stamp(out, tids[:3]) == before
    assert sorted(_log_lines(out, "start")) == sorted(tids)  # each trial started once, in the first run only
    assert _log_lines(out, "skip")[-4:] == tids


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="Ray is not installed (pip install 'nclab[sweep]')")
def test_unreachable_address_fails_fast(tmp_path):
    path = _write(tmp_path, {"seeds": [0]})
    t0 = time.perf_counter()
    res = runner.invoke(app, ["sweep", str(path), "--out", str(tmp_path / "out"), "--address", "127.0.0.1:9"])
    assert res.exit_code == 2 and "no Ray cluster answers at 127.0.0.1:9" in res.stderr
    assert time.perf_counter() - t0 < 30
    assert not (tmp_path / "out").exists()  # checked before anything is written
