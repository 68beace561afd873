"""The per-epoch checkpoint written off the training thread: the same bytes as a synchronous write, a failed
write fails the run, and a kill -9 in the middle of a background write resumes to the same metrics."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
import torch
import yaml

import nclab.train.trainer as trainer_mod
from nclab.io import read_metrics
from nclab.train import Trainer, resolve_config, train
from nclab.train.checkpoint import CheckpointWriter, load_checkpoint, snapshot_state

TINY = {
    "name": "bgwrite",
    "data": {"name": "digits", "per_class": 20, "test_per_class": 5},
    "model": {"name": "mlp", "options": {"widths": [16], "batchnorm": True}},
    "loss": {"name": "ce"},
    "optim": {"lr": 0.05, "momentum": 0.9, "weight_decay": 5e-3},
    "schedule": {"name": "constant"},
    "train": {"epochs": 5, "batch_size": 50, "threads": 1},
    "measure": {"epochs": [0, 2, 5], "zero_error_check": "every_epoch"},
    "report": False,
}


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("whole") / "run"
    train(resolve_config(TINY), out, progress=False)
    return out


def test_snapshot_keeps_shared_storage_and_ignores_later_updates():
    w = torch.arange(6.0)
    state = {"w": w, "view": w[2:4], "step": torch.tensor(3), "lr": 0.1}
    snap = snapshot_state(state)
    w.mul_(10.0)
    assert snap["w"].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0] and snap["view"].tolist() == [2.0, 3.0]
    assert snap["view"].untyped_storage().data_ptr() == snap["w"].untyped_storage().data_ptr()  # one copy
    assert snap["view"].storage_offset() == 2 and snap["lr"] == 0.1


def test_writer_runs_jobs_in_order_and_drops_what_follows_a_failure():
    done: list[int] = []
    writer = CheckpointWriter()
    gate = threading.Event()
    writer.submit(lambda: (gate.wait(10), done.append(1)))
    writer.submit(lambda: done.append(2))
    writer.raise_error()  # nothing failed yet; does not wait
    assert done == []
    gate.set()
    writer.wait()
    assert done == [1, 2]

    def fail() -> None:
        raise OSError(errno.EIO, "disk went away")

    writer.submit(fail)
    writer.submit(lambda: done.append(3))  # behind a failed write: dropped
    with pytest.raises(OSError, match="disk went away") as err:
        writer.wait()
    assert "background checkpoint writer" in err.value.__notes__[0]
    writer.close()  # raised once: not again
    assert done == [1, 2]
    with pytest.raises(RuntimeError, match="closed"):
        writer.submit(lambda: None)


def test_background_checkpoint_is_byte_identical_to_the_synchronous_one(tmp_path, monkeypatch):
    trainer = Trainer(resolve_config(TINY), tmp_path / "run")
    last = trainer.run_dir.checkpoint
    trainer.epoch()  # outside `with`: the checkpoint is written before epoch() returns
    fixed = {"train_s": 1.5, "measure_s": 0.25, "checkpoint_s": 0.125}
    trainer.state.timings = dict(fixed)
    trainer.checkpoint()
    synchronous = last.read_bytes()
    assert load_checkpoint(last)["optimizer"]["state"]  # momentum buffers: optimiser tensors are covered too

    gate, writes = threading.Event(), []
    real = trainer_mod.atomic_write_bytes

    def held(path, data):  # the background write waits until training has moved the model on
        assert threading.current_thread() is not threading.main_thread()
        writes.append(path.name)
        gate.wait(30)
        return real(path, data)

    monkeypatch.setattr(trainer_mod, "atomic_write_bytes", held)
    trainer.state.timings = dict(fixed)
    inode = last.stat().st_ino
    with trainer:
        trainer.checkpoint()  # returns with the write in flight
        with torch.no_grad():  # what the next epoch's steps do, in place
            for p in trainer.model.parameters():
                p.add_(1.0)
            for s in trainer.opt.state.values():
                s["momentum_buffer"].mul_(-3.0)
        for m in trainer.model.modules():
            if isinstance(m, torch.nn.BatchNorm1d):
                m.running_mean.add_(1.0)
                m.num_batches_tracked.add_(5)
        gate.set()
        trainer.wait_for_writes()
    assert writes == ["last.pt"] and last.stat().st_ino != inode  # rewritten, by the background thread
    assert last.read_bytes() == synchronous


@pytest.mark.parametrize("failing_epoch", [2, 5])
def test_a_failed_background_write_fails_the_run(tmp_path, monkeypatch, failing_epoch):
    real = trainer_mod.write_metrics
    attempts = []

    def write_metrics(rows, out, **kw):  # after the checkpoint of the same epoch, in the background
        epoch = max(r.epoch for r in rows)
        attempts.append(epoch)
        if epoch == failing_epoch:
            raise OSError(errno.EIO, os.strerror(errno.EIO), str(out))
        return real(rows, out, **kw)

    monkeypatch.setattr(trainer_mod, "write_metrics", write_metrics)
    seen: list[int] = []
    out = tmp_path / "run"
    with pytest.raises(OSError) as err:
        train(resolve_config(TINY), out, progress=False, on_epoch_end=seen.append)
    assert err.value.errno == errno.EIO
    # the error stops the run at the next epoch (or at the end): no epoch after it is checkpointed
    assert attempts == list(range(failing_epoch + 1)) and seen == list(range(1, failing_epoch + 1))
    assert max(r.epoch for r in read_metrics(out)) == failing_epoch - 1
    log = (out / "log.txt").read_text()
    assert f"epoch {failing_epoch - 1}:" in log and f"epoch {failing_epoch}:" not in log  # not logged as done
    assert not (out / "summary.json").exists()
    assert not [p for p in out.rglob("*.tmp")]


KILLED_RUN = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path

    import yaml

    import nclab.train.trainer as trainer_mod
    from nclab.io.atomic import AtomicFile
    from nclab.train import resolve_config, train

    config, out, marker = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    real, calls = trainer_mod.atomic_write_bytes, []

    def slow(path, data):
        calls.append(path.name)
        if calls.count("last.pt") == 4:  # epoch 3's checkpoint: half written, then the process is killed
            staged = AtomicFile(path)
            staged.file.write(data[: len(data) // 2])
            staged.file.flush()
            marker.write_text(str(staged.tmp))
            time.sleep(600)
        return real(path, data)

    trainer_mod.atomic_write_bytes = slow
    train(resolve_config(yaml.safe_load(Path(config).read_text())), out, progress=False)
    """
)


def test_kill_9_during_a_background_write_resumes_byte_identically(tmp_path, uninterrupted):
    cfg_path, out, marker = tmp_path / "cfg.yaml", tmp_path / "killed", tmp_path / "writing"
    cfg_path.write_text(yaml.safe_dump(TINY))
    script = tmp_path / "killed_run.py"
    script.write_text(KILLED_RUN)
    proc = subprocess.Popen([sys.executable, str(script), str(cfg_path), str(out), str(marker)])
    try:
        deadline = time.monotonic() + 300
        while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists(), f"the run never reached its slow write (exit code {proc.poll()})"
        time.sleep(0.2)  # the training thread goes on meanwhile (epoch 4), its checkpoint waiting for this one
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert Path(marker.read_text()).is_file()  # killed in the middle of the write: its temporary file is left
    assert load_checkpoint(out / "checkpoints" / "last.pt")["epoch"] == 2  # the previous checkpoint, whole
    written = (out / "metrics.csv").read_text()
    assert max(r.epoch for r in read_metrics(out)) == 2
    assert "epoch 3:" not in (out / "log.txt").read_text()  # the epoch's line follows its checkpoint
    train(resolve_config(TINY), out, resume=True, progress=False)
    final = (out / "metrics.csv").read_text()
    assert final.startswith(written)
    assert final == (uninterrupted / "metrics.csv").read_text()  # byte-identical to the uninterrupted run
