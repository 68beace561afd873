"""Rows of the third reliability probe on the command line (reviews/reliability-probe-3.md, rows R3, E4, E11):
clean refusals (one line naming the cause and the fix, exit 2, nothing written) for ``nclab report`` on a
read-only run folder (and ``--out`` to write the report elsewhere), ``--epochs`` above a paper run's own, and a
paper-scale experiment on a machine without CUDA (``--device cpu`` chooses the CPU).

Each test fails on the code before (10a54cf) and passes now.
"""

from __future__ import annotations

import errno
import hashlib
import os
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from nclab.cli import app
from nclab.experiments import run
from nclab.experiments.protocols import RunSelection
from nclab.train import train
from tests.test_probe2_rundir import TINY

runner = CliRunner()


def _digests(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("rep") / "run"
    train(TINY, out, progress=False)
    return out


def _read_only(monkeypatch, folder: Path) -> None:
    """``folder`` behaves as on a read-only mount: not writable by access(2), and every file created in it
    fails with EROFS (as root, a chmod would not stop the writes)."""
    real_access, real_mkstemp = os.access, __import__("tempfile").mkstemp

    def access(path, mode, *args, **kwargs):
        if mode & os.W_OK and Path(path).resolve() == folder.resolve():
            return False
        return real_access(path, mode, *args, **kwargs)

    def mkstemp(*args, dir=None, **kwargs):
        if dir is not None and Path(dir).resolve() == folder.resolve():
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(dir))
        return real_mkstemp(*args, dir=dir, **kwargs)

    monkeypatch.setattr(os, "access", access)
    monkeypatch.setattr("tempfile.mkstemp", mkstemp)


# ---------------------------------------------------------------------- R3: report on a read-only run folder
def test_report_on_a_read_only_run_is_one_line_naming_out(finished, tmp_path, monkeypatch):
    run_dir = Path(__import__("shutil").copytree(finished, tmp_path / "ro"))
    before = _digests(run_dir)
    _read_only(monkeypatch, run_dir)
    result = runner.invoke(app, ["report", str(run_dir)])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert "is not writable" in result.output and "--out DIR" in result.output
    assert _digests(run_dir) == before


def test_a_write_refused_by_the_file_system_is_one_line_too(finished, tmp_path, monkeypatch):
    """access(2) may say yes where the write fails (a network file system): still one line, exit 2."""
    import nclab.report.run_report as rr

    def refuse(*args, **kwargs):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(tmp_path / "x" / ".report.html.abc.tmp"))

    monkeypatch.setattr(rr, "write_report", refuse)
    result = runner.invoke(app, ["report", str(finished), "--out", str(tmp_path / "x")])
    assert result.exit_code == 2 and "Read-only file system" in result.output
    assert "Traceback" not in result.output


def test_report_out_writes_elsewhere_and_leaves_the_run_untouched(finished, tmp_path, monkeypatch):
    run_dir = Path(__import__("shutil").copytree(finished, tmp_path / "ro"))
    before = _digests(run_dir)
    _read_only(monkeypatch, run_dir)
    result = runner.invoke(app, ["report", str(run_dir), "--out", str(tmp_path / "reports" / "a")])
    assert result.exit_code == 0, result.output
    page = (tmp_path / "reports" / "a" / "report.html").read_text()
    assert "<img" in page and "tiny" in page
    assert _digests(run_dir) == before


# ---------------------------------------------------------------------- E4: --epochs above the paper's
def test_epochs_above_the_papers_are_refused_in_the_dry_run_and_the_run(tmp_path):
    for extra in (["--dry-run"], ["--out", str(tmp_path / "e")]):
        result = runner.invoke(
            app, ["experiment", "run", "pfc-table1", "--scale", "paper", "--epochs", "100000", *extra]
        )
        assert result.exit_code == 2, result.output
        assert "--epochs 100000 is more than the 350 epochs of the paper's run" in result.output
        assert "give at most 350" in result.output
    assert not (tmp_path / "e").exists()
    # at the limit and below, a cut is still a cut
    ok = runner.invoke(app, ["experiment", "run", "pfc-table1", "--scale", "paper", "--epochs", "350", "--dry-run"])
    assert ok.exit_code == 0, ok.output
    with pytest.raises(ValueError, match="cannot extend it"):
        RunSelection(epochs=351).check_epochs({"a": 350, "b": 200})


# ---------------------------------------------------------------------- E11: the device of a paper-scale run
def test_paper_scale_without_cuda_is_refused_naming_device_and_writes_nothing(tmp_path, monkeypatch):
    import nclab.experiments.protocols as protocols

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(protocols, "check_data", lambda *a, **k: None)  # the data may be missing here: not at stake
    out = tmp_path / "p1"
    result = runner.invoke(
        app,
        [
            "experiment",
            "run",
            "pfc-table1",
            "--scale",
            "paper",
            "--runs",
            "fashion-mnist/*",
            "--epochs",
            "1",
            "-o",
            str(out),
        ],
    )
    assert result.exit_code == 2, result.output
    assert "which this machine cannot use" in result.output and "--device cpu" in result.output
    assert "nothing was written" in result.output
    assert not out.exists()
    dry = runner.invoke(app, ["experiment", "run", "pfc-table1", "--scale", "paper", "--dry-run"])
    assert dry.exit_code == 0 and "would refuse this" in dry.output and "--device cpu" in dry.output


def test_device_cpu_trains_the_paper_protocol_on_the_cpu(tmp_path, monkeypatch):
    from nclab.experiments import get
    from nclab.experiments.runs import paper_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with paper_device("cpu"):
        configs = get("pfc-table1").configs["paper"]()
    assert {c.train.device for c in configs.values()} == {"cpu"}
    assert {c.train.device for c in get("pfc-table1").configs["paper"]().values()} == {"cuda"}  # the default again
    dry = runner.invoke(app, ["experiment", "run", "pfc-table1", "--scale", "paper", "--device", "cpu", "--dry-run"])
    assert dry.exit_code == 0 and "--device cpu: the cost below is one H200 GPU's" in dry.output
    assert "would refuse" not in dry.output
    # the device passes its check: the run goes on to its output folder (stopped there: not trained here)
    import nclab.experiments.registry as registry

    monkeypatch.setattr("nclab.experiments.protocols.check_data", lambda *a, **k: None)

    def stop(*args, **kwargs):
        raise ValueError("device passed")

    monkeypatch.setattr(registry, "check_output_dir", stop)
    with pytest.raises(ValueError, match="device passed"):
        run("pfc-table1", tmp_path / "p2", scale="paper", selection=RunSelection(runs=("fashion-mnist/*",), epochs=1),
            device="cpu")  # fmt: skip
    assert not (tmp_path / "p2").exists()


def test_device_at_another_scale_is_refused(tmp_path):
    result = runner.invoke(
        app, ["experiment", "run", "digits-mlp-demo", "--scale", "tiny", "--device", "cpu", "-o", str(tmp_path / "d")]
    )
    assert result.exit_code == 2 and "drop --device" in result.output
    assert not (tmp_path / "d").exists()
