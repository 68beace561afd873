"""Rows of the third reliability probe on run files (reviews/reliability-probe-3.md, rows V3, V7, V8, K5): every
file of a run knows where it belongs, and ``nclab verify`` checks it against its name and the metrics table,
knows which files a run must have, and reports the temporary files of an interrupted write, which the next owner
of the run (``--resume``) removes.

Each test fails on the code before (10a54cf) and passes now.
"""

from __future__ import annotations

import copy
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from nclab import ClassStats
from nclab.cli import app
from nclab.io.atomic import AtomicFile
from nclab.io.integrity import CorruptFileError
from nclab.io.run_table import read_run_id
from nclab.io.rundir import RunDir
from nclab.train import train
from nclab.train.checkpoint import load_checkpoint
from nclab.train.verify import verify
from tests.test_probe2_rundir import ENV, TINY

runner = CliRunner()

#: TINY for 4 epochs, measured at 0, 2 and 4, each measured epoch's checkpoint kept.
KEPT = copy.deepcopy(TINY) | {"train": {**TINY["train"], "epochs": 4}, "measure": {"epochs": [0, 2, 4]}}
KEPT["checkpoint"] = {"keep_measured": True}


@pytest.fixture(scope="module")
def kept_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("kept") / "run"
    train(KEPT, out, progress=False)
    assert not [f for f in verify(out) if not f.ok]
    return out


def _copy(run: Path, tmp_path: Path, name: str = "run") -> Path:
    return Path(shutil.copytree(run, tmp_path / name))


def _problems(path: Path) -> dict[str, str]:
    return {Path(f.path).relative_to(path).as_posix(): f.problem for f in verify(path) if not f.ok}


# ---------------------------------------------------------------------- V3: a kept checkpoint of another epoch
def test_verify_refuses_a_kept_checkpoint_copied_over_another_epochs(kept_run, tmp_path):
    run = _copy(kept_run, tmp_path)
    shutil.copy(run / "checkpoints/epoch_0004.pt", run / "checkpoints/epoch_0002.pt")
    problems = _problems(run)
    assert list(problems) == ["checkpoints/epoch_0002.pt"]
    assert "holds epoch 4, its name says epoch 2" in problems["checkpoints/epoch_0002.pt"]
    result = runner.invoke(app, ["verify", str(run)])
    assert result.exit_code == 2 and "holds epoch 4" in result.output


def test_verify_refuses_a_kept_checkpoint_of_another_run(kept_run, tmp_path):
    other = tmp_path / "other"
    train(KEPT | {"seed": 1}, other, progress=False)
    run = _copy(kept_run, tmp_path)
    shutil.copy(other / "checkpoints/epoch_0002.pt", run / "checkpoints/epoch_0002.pt")
    problem = _problems(run)["checkpoints/epoch_0002.pt"]
    assert "another config than config.yaml (at seed)" in problem and "metric rows are not" in problem


# ---------------------------------------------------------------------- V7: the files a run must have
def test_verify_reports_the_missing_parquet_of_a_run_and_resume_rewrites_it(kept_run, tmp_path):
    pytest.importorskip("pyarrow")
    run = _copy(kept_run, tmp_path)
    (run / "metrics.parquet").unlink()
    problems = _problems(run)
    assert list(problems) == ["metrics.parquet"] and problems["metrics.parquet"].startswith("missing")
    before = (run / "metrics.csv").read_bytes()
    train(KEPT, run, resume=True, progress=False)
    assert (run / "metrics.csv").read_bytes() == before  # the same table, rewritten with its parquet twin
    assert _problems(run) == {}
    assert "metrics.parquet was missing" in (run / "log.txt").read_text()


def test_verify_reports_the_missing_summary_of_a_finished_run_and_resume_writes_it(kept_run, tmp_path):
    run = _copy(kept_run, tmp_path)
    (run / "summary.json").unlink()
    problems = _problems(run)
    assert list(problems) == ["summary.json"]
    assert "the checkpoint is at the last epoch (4 of train.epochs=4)" in problems["summary.json"]
    train(KEPT, run, resume=True, progress=False)
    assert _problems(run) == {}


def test_verify_reports_a_missing_kept_checkpoint_and_a_missing_last_checkpoint(kept_run, tmp_path):
    run = _copy(kept_run, tmp_path)
    (run / "checkpoints/epoch_0002.pt").unlink()
    problems = _problems(run)
    assert (
        list(problems) == ["checkpoints/epoch_0002.pt"]
        and "epoch 2 was measured" in problems["checkpoints/epoch_0002.pt"]
    )
    gone = _copy(kept_run, tmp_path, "gone")
    shutil.rmtree(gone / "checkpoints")
    assert _problems(gone) == {"checkpoints/last.pt": "missing"}


def test_an_interrupted_run_is_not_required_to_have_a_summary(tmp_path):
    """A run killed mid-way (checkpoint before the last epoch) has no summary.json yet: nothing to report."""
    out = tmp_path / "cut"

    def stop(epoch: int) -> None:
        if epoch == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train(KEPT, out, progress=False, on_epoch_end=stop)
    assert not (out / "summary.json").exists()
    assert _problems(out) == {}


# ---------------------------------------------------------------------- K5: leftovers of an interrupted write
def _plant_leftovers(run: Path) -> list[Path]:
    """What a kill -9 inside an atomic write leaves: the temporary twin of last.pt (cut) and of summary.json."""
    ckpt = run / "checkpoints/.last.pt.56ffvirv.tmp"
    ckpt.write_bytes((run / "checkpoints/last.pt").read_bytes()[:1000])
    summary = run / ".summary.json.5do4rtg4.tmp"
    summary.write_text("{")
    return [summary, ckpt]


def test_the_atomic_writers_temporary_files_are_the_ones_recognised_as_leftovers(tmp_path):
    pending = AtomicFile(tmp_path / "checkpoints" / "last.pt")
    try:
        assert RunDir(tmp_path).leftover_temporaries() == [pending.tmp]
    finally:
        pending.abort()
    (tmp_path / "notes.tmp").write_text("mine")  # not an atomic write's name: a user's file stays
    (tmp_path / ".hidden.tmp").write_text("mine")
    assert RunDir(tmp_path).leftover_temporaries() == []


def test_verify_reports_leftover_temporaries_and_resume_removes_them(kept_run, tmp_path):
    run = _copy(kept_run, tmp_path)
    planted = _plant_leftovers(run)
    problems = _problems(run)
    assert sorted(problems) == [".summary.json.5do4rtg4.tmp", "checkpoints/.last.pt.56ffvirv.tmp"]
    assert "interrupted before its rename" in problems["checkpoints/.last.pt.56ffvirv.tmp"]
    assert runner.invoke(app, ["verify", str(run)]).exit_code == 2
    before = {p: (run / p).read_bytes() for p in ("metrics.csv", "config.yaml")}
    train(KEPT, run, resume=True, progress=False)
    assert not any(p.exists() for p in planted)
    assert {p: (run / p).read_bytes() for p in before} == before
    assert "removed 2 temporary file(s) left by an interrupted write" in (run / "log.txt").read_text()
    assert _problems(run) == {}


def test_a_killed_run_resumes_byte_identical_and_without_leftovers(tmp_path):
    """Killed after epoch 2 with a half-written checkpoint beside it: the resume removes the debris and ends
    with the uninterrupted run's table."""
    ref, out = tmp_path / "ref", tmp_path / "cut"
    train(KEPT, ref, progress=False)

    def stop(epoch: int) -> None:
        if epoch == 2:
            (out / "checkpoints/.last.pt.abcd_123.tmp").write_bytes(b"half a checkpoint")
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train(KEPT, out, progress=False, on_epoch_end=stop)
    assert "checkpoints/.last.pt.abcd_123.tmp" in _problems(out)
    train(KEPT, out, resume=True, progress=False)
    assert (out / "metrics.csv").read_bytes() == (ref / "metrics.csv").read_bytes()
    assert RunDir(out).leftover_temporaries() == []


def test_leftovers_are_not_reported_while_a_writer_holds_the_run(kept_run, tmp_path):
    from tests.test_probe2_rundir import _hold_lock

    run = _copy(kept_run, tmp_path)
    _plant_leftovers(run)
    (run / "summary.json").unlink()  # a run finishing right now
    holder = _hold_lock(run)
    try:
        assert _problems(run) == {}  # its writes may be in progress
    finally:
        holder.kill()
        holder.wait()
    assert len(_problems(run)) == 3


# ---------------------------------------------------------------------- V8: statistics files know their epoch
def _stats(seed: int) -> ClassStats:
    r = np.random.default_rng(seed)
    y = np.repeat(np.arange(3), 10)
    s = ClassStats(3, 4)
    s.update(r.normal(size=(30, 4)) + seed * np.eye(3, 4)[y], y)
    return s


def test_statistics_files_record_where_they_come_from_and_old_files_still_load(tmp_path):
    s = _stats(0)
    for suffix in (".npz", ".safetensors"):
        path = s.save(tmp_path / f"a{suffix}", run_id="tiny-0123456789", epoch=5, layer="layer1", split="train")
        assert ClassStats.load(path).provenance == {
            "run_id": "tiny-0123456789",
            "epoch": 5,
            "layer": "layer1",
            "split": "train",
        }
        plain = s.save(tmp_path / f"plain{suffix}")  # the layout of files written before provenance existed
        assert ClassStats.load(plain).provenance == {}
        np.testing.assert_array_equal(ClassStats.load(plain).counts, s.counts)
    with zipfile.ZipFile(tmp_path / "plain.npz") as zf:
        assert "meta__provenance.npy" not in zf.namelist()
    for bad in ({"epoch": -1}, {"epoch": True}, {"split": ""}, {"layer": "a,b"}, {"run_id": 3}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            s.save(tmp_path / "bad.npz", **bad)
    assert not (tmp_path / "bad.npz").exists()


def test_edited_provenance_fails_the_checksum(tmp_path):
    path = _stats(0).save(tmp_path / "s.npz", epoch=5)
    with np.load(path) as fh:
        arrays = {k: fh[k] for k in fh.files}
    arrays["meta__provenance"] = np.array('{"epoch": 10}')
    np.savez(path, **arrays)
    with pytest.raises(CorruptFileError, match="checksum mismatch"):
        ClassStats.load(path)


def test_verify_refuses_two_statistics_files_swapped(kept_run, tmp_path):
    run = _copy(kept_run, tmp_path)
    rid = read_run_id(run / "metrics.csv")
    (run / "stats").mkdir()
    for e in (2, 4):
        _stats(e).save(tmp_path / f"st_e{e}.safetensors", run_id=rid, epoch=e, layer="layer1", split="train")
    shutil.copy(tmp_path / "st_e4.safetensors", run / "stats/epoch2.safetensors")
    shutil.copy(tmp_path / "st_e2.safetensors", run / "stats/epoch4.safetensors")
    problems = _problems(run)
    assert problems == {
        "stats/epoch2.safetensors": "it records epoch 4, its name says epoch 2 (copied or renamed from another file?)",
        "stats/epoch4.safetensors": "it records epoch 2, its name says epoch 4 (copied or renamed from another file?)",
    }
    single = runner.invoke(app, ["verify", str(run / "stats/epoch2.safetensors")])
    assert single.exit_code == 2 and "records epoch 4, its name says epoch 2" in single.output
    # in their places, they pass, and are checked against the table
    shutil.copy(tmp_path / "st_e2.safetensors", run / "stats/epoch2.safetensors")
    shutil.copy(tmp_path / "st_e4.safetensors", run / "stats/epoch4.safetensors")
    assert _problems(run) == {}
    assert {f.kind for f in verify(run) if f.cross} >= {"statistics vs run"}


def test_verify_checks_statistics_against_the_runs_table(kept_run, tmp_path):
    run = _copy(kept_run, tmp_path)
    rid = read_run_id(run / "metrics.csv")
    s = _stats(0)
    s.save(run / "other_run.npz", run_id="tiny-ffffffffff", epoch=2, layer="layer1", split="train")
    s.save(run / "unmeasured.npz", run_id=rid, epoch=3, layer="layer1", split="train")
    s.save(run / "no_layer.npz", run_id=rid, epoch=2, layer="conv9", split="train")
    s.save(run / "e2_layer1_train.npz", run_id=rid, epoch=2, layer="output", split="train")
    problems = _problems(run)
    assert "records run tiny-ffffffffff" in problems["other_run.npz"]
    assert "records epoch 3, which metrics.csv has no measurements of" in problems["unmeasured.npz"]
    assert "records layer 'conv9', which metrics.csv has no rows of" in problems["no_layer.npz"]
    assert "records layer 'output', its name says layer1" in problems["e2_layer1_train.npz"]
    assert len(problems) == 4
    # a name that states another split is refused by the file's own check
    (wrong,) = verify(s.save(tmp_path / "e2_test.npz", run_id=rid, epoch=2, split="train"))
    assert wrong.problem is not None and "records split 'train', its name says test" in wrong.problem


def test_a_held_run_still_refuses_a_second_writer(tmp_path):
    """The leftovers are removed by the owner only: a resume of a folder another process holds changes
    nothing."""
    run = tmp_path / "run"
    train(KEPT, run, progress=False)
    planted = _plant_leftovers(run)
    code = (
        "import sys, time; from nclab.train.rundir import acquire_run_lock; acquire_run_lock(sys.argv[1]); "
        "print('locked', flush=True); time.sleep(120)"
    )
    holder = subprocess.Popen([sys.executable, "-c", code, str(run)], env=ENV, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(Exception, match="in use by another nclab process"):
            train(KEPT, run, resume=True, progress=False)
        assert all(p.exists() for p in planted)
    finally:
        holder.kill()
        holder.wait()
    assert load_checkpoint(run / "checkpoints/last.pt")["epoch"] == 4
