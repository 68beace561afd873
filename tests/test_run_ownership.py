"""Run directories are owned and resumed honestly: the lock (two writers, a stale lock), every refused resume
(leaving the folder byte-identical), the repair of a truncated metrics.csv, a full disk, and extending a run."""

import errno
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from nclab.cli.train import app as train_app
from nclab.io import read_metrics
from nclab.train import resolve_config, train
from nclab.train.checkpoint import load_checkpoint
from nclab.train.rundir import (
    LOCK_NAME,
    RunDirBusyError,
    acquire_run_lock,
    budget_dependent_fields,
    metrics_file_status,
)

# the tiny run of test_train_runs.FAST; explicit measured epochs, so that the plan of a 2-epoch run is the start
# of a 4-epoch run's (the "log" plan is log-spaced over the budget, so it moves when the budget does)
TINY = {
    "name": "tiny",
    "data": {"name": "digits", "per_class": 40, "test_per_class": 10},
    "model": {"name": "mlp", "options": {"widths": [32, 32], "batchnorm": True}},
    "loss": {"name": "ce"},
    "optim": {"lr": 0.05, "weight_decay": 5e-3},
    "schedule": {"name": "constant"},
    "train": {"epochs": 2, "batch_size": 64, "threads": 1},
    "measure": {"epochs": [0, 1, 2, 3, 4], "zero_error_check": "every_epoch"},
    "report": False,
}

runner = CliRunner()


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _cli(*args: object):
    return runner.invoke(train_app, ["train", *(str(a) for a in args), "--no-progress"])


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A finished 2-epoch run (copy it before changing it)."""
    out = tmp_path_factory.mktemp("finished") / "run"
    train(resolve_config(TINY), out, progress=False)
    return out


@pytest.fixture(scope="module")
def four_epochs(tmp_path_factory) -> Path:
    """The uninterrupted 4-epoch twin of ``finished``."""
    out = tmp_path_factory.mktemp("four") / "run"
    train(resolve_config(TINY, ["train.epochs=4"]), out, progress=False)
    return out


@pytest.fixture
def run(finished, tmp_path) -> Path:
    out = tmp_path / "run"
    shutil.copytree(finished, out)
    return out


@pytest.fixture
def cfg_file(tmp_path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(TINY))
    return path


# ----------------------------------------------------------------------------------------------- the lock
def test_lock_is_exclusive_names_its_owner_and_leaves_nothing(tmp_path):
    with acquire_run_lock(tmp_path) as held:
        assert held.locked and held.previous is None and held.note == ""
        record = json.loads((tmp_path / LOCK_NAME).read_text())
        assert record["pid"] == os.getpid() and record["host"] == socket.gethostname()
        # flock belongs to the open file: a second acquisition, even from this process, is refused
        with pytest.raises(RunDirBusyError, match=rf"pid {os.getpid()} on host {socket.gethostname()}") as info:
            acquire_run_lock(tmp_path)
        assert str(tmp_path / LOCK_NAME) in str(info.value)
    assert not (tmp_path / LOCK_NAME).exists()
    with acquire_run_lock(tmp_path) as again:  # free again
        assert again.previous is None


def test_two_trainings_into_one_folder_one_fails_at_once(tmp_path):
    # probe row 98: two `nclab train` into one folder, with different learning rates, started together
    cfg = {**TINY, "train": {**TINY["train"], "epochs": 150}, "measure": {"epochs": [0, 150]}}
    cfg_path = tmp_path / "c.yaml"
    cfg_path.write_text(yaml.safe_dump(cfg))
    out = tmp_path / "shared"
    base = [sys.executable, "-m", "nclab", "train", str(cfg_path), "--out", str(out), "--no-progress"]
    lrs = (0.05, 0.02)
    procs = [
        subprocess.Popen([*base, "--set", f"optim.lr={lr}"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for lr in lrs
    ]
    deadline, first_done = time.monotonic() + 300, None
    while time.monotonic() < deadline and any(p.poll() is None for p in procs):
        done = [p for p in procs if p.poll() is not None]
        if done and first_done is None:
            first_done = done[0]
            still_running = [p.poll() is None for p in procs if p is not first_done]
        time.sleep(0.02)
    results = [(p.returncode, *p.communicate()) for p in procs]
    codes = sorted(r[0] for r in results)
    assert codes == [0, 2], results
    loser = next(i for i, r in enumerate(results) if r[0] == 2)
    winner = 1 - loser
    assert first_done is procs[loser] and still_running == [True]  # failed at once, while the other ran
    err = " ".join(results[loser][2].split())
    assert LOCK_NAME in err and f"pid {procs[winner].pid}" in err and "in use by another nclab process" in err
    # the winner's files are its own and agree with each other
    saved = yaml.safe_load((out / "config.yaml").read_text())
    assert saved["optim"]["lr"] == lrs[winner]
    rows = read_metrics(out)
    assert {r.value for r in rows if r.metric == "lr"} == {lrs[winner]} and max(r.epoch for r in rows) == 150
    ckpt = load_checkpoint(out / "checkpoints" / "last.pt")
    assert ckpt["epoch"] == 150 and [tuple(r) for r in rows] == [tuple(r) for r in ckpt["rows"]]
    assert (out / "log.txt").read_text().count("start:") == 1
    assert not (out / LOCK_NAME).exists()


def test_stale_lock_of_a_killed_process_is_reported_and_taken_over(run):
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from nclab.train.rundir import acquire_run_lock; acquire_run_lock(sys.argv[1]); "
            "print('locked', flush=True); time.sleep(600)",
            str(run),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        before = _snapshot(run)
        busy = _cli(run, "--resume", "--set", "train.epochs=3")
        assert busy.exit_code == 2 and f"pid {holder.pid} on host" in " ".join(busy.output.split())
        assert _snapshot(run) == before
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
    assert (run / LOCK_NAME).is_file()  # a kill -9 leaves the file; the kernel dropped the lock
    res = _cli(run, "--resume", "--set", "train.epochs=3")
    assert res.exit_code == 0, res.output
    note = f"previous owner pid {holder.pid} on host {socket.gethostname()} is gone"
    assert note in " ".join(res.output.split()) and "taking over" in res.output
    assert note in (run / "log.txt").read_text()
    assert not (run / LOCK_NAME).exists() and max(r.epoch for r in read_metrics(run)) == 3


# ----------------------------------------------------------------------------------------------- refusals
def _half_run(tmp_path: Path) -> Path:
    out = tmp_path / "half"

    class _Kill(Exception):
        pass

    def kill_at_1(epoch):
        if epoch == 1:
            raise _Kill

    with pytest.raises(_Kill):
        train(resolve_config(TINY, ["train.epochs=4"]), out, progress=False, on_epoch_end=kill_at_1)
    return out


def test_resume_without_checkpoint_is_refused(tmp_path, cfg_file):
    # probe row 90: --resume of a run whose checkpoint is gone used to start a new run over the old results
    out = _half_run(tmp_path)
    (out / "checkpoints" / "last.pt").unlink()
    before = _snapshot(out)
    res = _cli(cfg_file, "--out", out, "--resume", "--set", "optim.lr=0.01", "--set", "train.epochs=3")
    msg = " ".join(res.output.split())
    assert res.exit_code == 2 and "cannot resume" in msg and "last.pt is missing" in msg and "--overwrite" in msg
    assert _snapshot(out) == before


def test_resume_without_saved_config_is_refused(run, cfg_file):
    # probe row 91: the checkpoint alone used to be continued with whatever config was given
    (run / "config.yaml").unlink()
    before = _snapshot(run)
    for args in ((cfg_file, "--out", run, "--resume", "--set", "optim.lr=0.02"), (run, "--resume")):
        res = _cli(*args)
        assert res.exit_code == 2 and "config.yaml is missing" in " ".join(res.output.split()), res.output
        assert _snapshot(run) == before


def test_resume_with_overwrite_is_refused(run, cfg_file):
    # probe row 92
    before = _snapshot(run)
    for args in ((cfg_file, "--out", run), (run,)):
        res = _cli(*args, "--resume", "--overwrite")
        assert res.exit_code == 2 and "contradict" in res.output
        assert _snapshot(run) == before


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "pass --resume"),  # a folder without --resume
        (("--resume", "--set", "train.epochs=1"), "past train.epochs=1"),  # a run is not cut short
        (("--resume", "--out", "elsewhere"), "continued in place"),
    ],
)
def test_other_refusals_leave_the_run_as_it_was(run, args, message):
    before = _snapshot(run)
    res = _cli(run, *args)
    assert res.exit_code == 2 and message in " ".join(res.output.split())
    assert _snapshot(run) == before


def test_resume_of_a_missing_folder_is_refused_and_creates_nothing(tmp_path, cfg_file):
    res = _cli(cfg_file, "--out", tmp_path / "nothing", "--resume")
    assert res.exit_code == 2 and "no such folder" in res.output and not (tmp_path / "nothing").exists()


@pytest.mark.parametrize("damage", ["cut mid-line", "half a line appended", "missing"])
def test_truncated_metrics_of_a_finished_run_is_repaired(run, finished, damage):
    # probe row 95: a finished run's --resume used to leave a truncated metrics.csv as it was
    full = (finished / "metrics.csv").read_bytes()
    rows = read_metrics(finished)
    if damage == "missing":
        (run / "metrics.csv").unlink()
    else:
        (run / "metrics.csv").write_bytes(full[: len(full) // 3] if damage == "cut mid-line" else full + b"2,tra")
    status, n = metrics_file_status(run / "metrics.csv", rows)
    assert status == ("missing" if damage == "missing" else "prefix")
    assert n == {"cut mid-line": full[: len(full) // 3].count(b"\n") - 1, "half a line appended": len(rows)}.get(
        damage, 0
    )
    res = _cli(run, "--resume")
    assert res.exit_code == 0 and "rewritten from the checkpoint" in " ".join(res.output.split())
    assert (run / "metrics.csv").read_bytes() == full


def test_metrics_that_disagree_with_the_checkpoint_are_not_overwritten(run):
    text = (run / "metrics.csv").read_text().splitlines(keepends=True)
    *key, value = text[3].rstrip("\n").split(",")  # run_id, epoch, split, layer, metric, value
    text[3] = f"{','.join(key)},{float(value) + 1.0!r}\n"  # an edited value: not a truncation
    (run / "metrics.csv").write_text("".join(text))
    before = _snapshot(run)
    res = _cli(run, "--resume")
    msg = " ".join(res.output.split())
    assert res.exit_code == 2 and "disagrees with the checkpoint" in msg and "data line 3" in msg
    assert _snapshot(run) == before


# ----------------------------------------------------------------------------------------------- full disk
def _enospc_replace(monkeypatch, when):
    real = os.replace

    def replace(src, dst, *a, **k):
        if when(Path(dst)):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(src, dst, *a, **k)

    monkeypatch.setattr(os, "replace", replace)


def test_disk_full_refuses_cleanly_and_leaves_the_run_as_it_was(run, monkeypatch):
    # probe row 86: a full disk used to end in a traceback (exit 1)
    before = _snapshot(run)
    _enospc_replace(monkeypatch, lambda dst: True)
    res = _cli(run, "--resume", "--set", "train.epochs=4")
    msg = " ".join(res.output.split())
    assert res.exit_code == 2 and "no space left on the device" in msg and "--resume" in msg, res.output
    assert "Traceback" not in res.output
    assert _snapshot(run) == before  # no temporary file either


def test_disk_full_mid_run_loses_nothing_and_resumes(tmp_path, cfg_file, four_epochs, monkeypatch):
    out = tmp_path / "full"
    checkpoints = []

    def full_at_epoch_2_checkpoint(dst: Path) -> bool:
        if dst.name == "last.pt":
            checkpoints.append(dst)
        return len(checkpoints) >= 3  # epochs 0 and 1 checkpointed, then the disk is full

    _enospc_replace(monkeypatch, full_at_epoch_2_checkpoint)
    res = _cli(cfg_file, "--out", out, "--set", "train.epochs=4")
    assert res.exit_code == 2 and "no space left" in res.output and f"nclab train {out} --resume" in res.output
    assert not [p for p in out.rglob("*") if p.name.endswith(".tmp")]
    assert max(r.epoch for r in read_metrics(out)) == 1
    monkeypatch.undo()  # space freed
    again = _cli(out, "--resume")
    assert again.exit_code == 0, again.output
    assert (out / "metrics.csv").read_bytes() == (four_epochs / "metrics.csv").read_bytes()


# ----------------------------------------------------------------------------------------------- extension
def test_extending_a_finished_run_equals_the_longer_run(run, four_epochs):
    # with a constant lr the extended run is the uninterrupted one: the training order is drawn from
    # (seed, epoch), the torch RNG and optimiser state come from the checkpoint. A cosine schedule (horizon =
    # train.epochs) or multistep milestones given as fractions of the budget would have given epochs 1-2 other
    # learning rates in a 4-epoch run, and the "log" measurement plan other measured epochs: those runs differ.
    res = _cli(run, "--resume", "--set", "train.epochs=4")
    assert res.exit_code == 0, res.output
    assert "extending the run: train.epochs 2 -> 4" in " ".join(res.output.split())
    ext, ref = read_metrics(run), read_metrics(four_epochs)
    assert [r[:4] for r in ext] == [r[:4] for r in ref]
    assert all(
        a.value == pytest.approx(b.value, rel=1e-12, abs=1e-12, nan_ok=True) for a, b in zip(ext, ref, strict=True)
    )
    assert yaml.safe_load((run / "config.yaml").read_text())["train"]["epochs"] == 4
    assert json.loads((run / "summary.json").read_text())["epochs"] == 4


def test_refused_extension_lists_every_differing_key(run):
    before = _snapshot(run)
    res = _cli(
        run, "--resume", "--set", "train.epochs=4", "--set", "optim.lr=0.1", "--set", "model.options.widths=[16, 16]"
    )
    msg = " ".join(res.output.split())
    assert res.exit_code == 2 and "differs from the saved one at model.options.widths, optim.lr (" in msg
    assert _snapshot(run) == before


def test_budget_dependent_schedules_are_named():
    for schedule, expected in [
        ({"name": "constant"}, []),
        ({"name": "multistep", "milestones": [5]}, []),
        (
            {"name": "multistep", "milestones": None},
            ["schedule.milestone_fractions (milestones int(train.epochs * f))"],
        ),
        ({"name": "cosine"}, ["schedule.name=cosine (horizon train.epochs)"]),
    ]:
        assert budget_dependent_fields({"schedule": schedule, "measure": {"epochs": [0]}}) == expected
