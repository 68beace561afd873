"""Rows of the second reliability probe on run directories (reviews/reliability-probe-2.md, rows 30-52, 92-120):
one owner of the format (:class:`nclab.io.rundir.RunDir`), every writer locked and appending to its own run only,
epochs numbered from the trainer's own counter, sweeps locked and bound to one sweep file, and ``nclab verify``
checking the files of a run against each other.

Each test fails on the code before (9b25a4f) and passes now.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
import yaml
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from typer.testing import CliRunner

import nclab
from nclab import CollapseMonitor
from nclab.cli import app
from nclab.io.run_table import MetricRow, read_metrics, read_run_id, write_metrics
from nclab.train import resolve_config, train

runner = CliRunner()
SRC = str(Path(nclab.__file__).resolve().parents[1])
ENV = {**os.environ, "PYTHONPATH": SRC, "OMP_NUM_THREADS": "1"}

#: A 2-epoch digits MLP: a second or two per run.
TINY = {
    "name": "tiny",
    "data": {"name": "digits", "per_class": 10, "test_per_class": 4},
    "model": {"name": "mlp", "options": {"widths": [8]}},
    "loss": {"name": "ce"},
    "optim": {"lr": 0.05, "weight_decay": 5e-3},
    "train": {"epochs": 2, "batch_size": 32, "threads": 1},
    "measure": {"num_log": 1},
    "report": False,
}


def _digests(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _net(width: int = 8) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, width), nn.ReLU(), nn.Linear(width, 3))


def _data() -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(60, 4, generator=g), torch.arange(60) % 3
    return [(x[:30], y[:30]), (x[30:], y[30:])]


def _keys(folder: Path) -> list[tuple[int, str, str, str]]:
    return [(r.epoch, r.split, r.layer, r.metric) for r in read_metrics(folder)]


def _hold_lock(folder: Path) -> subprocess.Popen:
    """Another process holding ``folder``'s lock (as a live ``nclab train`` or sweep driver would)."""
    code = (
        "import sys, time; from nclab.train.rundir import acquire_run_lock; acquire_run_lock(sys.argv[1]); "
        "print('locked', flush=True); time.sleep(120)"
    )
    holder = subprocess.Popen([sys.executable, "-c", code, str(folder)], env=ENV, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "locked"
    return holder


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """Finished runs of TINY with cross-entropy and with MSE (copy them before changing them)."""
    root = tmp_path_factory.mktemp("runs")
    out = {}
    for loss in ("ce", "mse"):
        cfg = {**TINY, "loss": {"name": loss}}
        out[loss] = train(resolve_config(cfg), root / loss, progress=False).out
    return out


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def _verify(folder: Path):
    return runner.invoke(app, ["verify", str(folder)])


# ------------------------------------------------------------------------------------------ the monitor
def test_p2_row_030_same_epoch_measured_twice_replaces_its_rows(tmp_path):
    net, data = _net(), _data()
    with CollapseMonitor(net, 3, out=tmp_path / "m") as monitor:
        first = monitor.measure(data, epoch=1)
        with torch.no_grad():
            net[0].weight.mul_(2.0)  # other weights: other values at the same epoch
        second = monitor.measure(data, epoch=1)
    keys = _keys(tmp_path / "m")
    assert len(keys) == len(set(keys)) == len(second.rows)  # one row per key, no duplicates
    table = {(r.layer, r.metric): r.value for r in read_metrics(tmp_path / "m")}
    assert first.value("penultimate", "nc1") != second.value("penultimate", "nc1")
    assert table[("penultimate", "nc1")] == second.value("penultimate", "nc1")
    assert len(monitor.rows) == len(second.rows)  # the monitor's own list replaces them too


def test_p2_row_031_two_monitors_one_folder(tmp_path):
    out, data = tmp_path / "d", _data()
    a = CollapseMonitor(_net(), 3, out=out)
    a.measure(data, epoch=0)
    other = _net(width=5)  # another run: other parameter shapes
    with pytest.raises(ValueError, match="in use by another nclab process or writer"):
        CollapseMonitor(other, 3, out=out)  # while a is open: its lock
    a.close()
    with pytest.raises(ValueError, match=rf"holds the rows of another run: its run_id is {a.identity.run_id}") as err:
        CollapseMonitor(other, 3, out=out)
    assert "overwrite=True" in str(err.value) and "parameters.0.weight" in str(err.value)
    assert {k[0] for k in _keys(out)} == {0}  # the first monitor's rows are intact
    # a second monitor of the same run, even while the first is open, appends
    b1, b2 = CollapseMonitor(_net(), 3, out=out), CollapseMonitor(_net(), 3, out=out)
    b1.measure(data, epoch=1)
    b2.measure(data, epoch=2)
    b1.close(), b2.close()
    assert sorted({k[0] for k in _keys(out)}) == [0, 1, 2]


def test_p2_row_032_new_monitor_on_its_own_folder_appends(tmp_path):
    out, data = tmp_path / "runA", _data()
    m = CollapseMonitor(_net(), 3, out=out)
    m.measure(data, epoch=0)
    m.close()
    CollapseMonitor(_net(), 3, out=out).measure(data, epoch=1)  # a re-run script: not closed, collected
    assert sorted({k[0] for k in _keys(out)}) == [0, 1]
    assert read_run_id(out) == m.identity.run_id
    assert json.loads((out / "identity.json").read_text())["run_id"] == m.identity.run_id
    # overwrite=True starts over
    CollapseMonitor(_net(), 3, out=out, overwrite=True).measure(data, epoch=5)
    assert {k[0] for k in _keys(out)} == {5}


def test_p2_row_033_monitor_pointed_at_an_nclab_train_run_is_refused(runs, tmp_path):
    run = _copy(runs["ce"], tmp_path / "ref")
    before = _digests(run)
    with pytest.raises(ValueError, match="holds an nclab training run") as err:
        CollapseMonitor(_net(), 3, out=run)
    text = str(err.value)
    assert str(run) in text and read_run_id(run) in text and "overwrite=True" in text
    assert CollapseMonitor(_net(), 3).identity.run_id in text  # both identities
    assert _digests(run) == before
    assert _verify(run).exit_code == 0
    # a run being trained: its lock is honoured
    live = tmp_path / "live"
    live.mkdir()
    holder = _hold_lock(live)
    try:
        with pytest.raises(ValueError, match=rf"in use by another nclab process \(pid {holder.pid}"):
            CollapseMonitor(_net(), 3, out=live)
    finally:
        holder.kill()
        holder.wait()


# ------------------------------------------------------------------------------------------ Lightning
def _lightning():
    return pytest.importorskip("lightning.pytorch", reason="lightning is not installed")


def _lit_module():
    pl = _lightning()

    class Tiny(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.body = nn.Sequential(nn.Linear(4, 8), nn.ReLU())
            self.fc = nn.Linear(8, 3)

        def forward(self, x):
            return self.fc(self.body(x))

        def training_step(self, batch, _):
            x, y = batch
            return nn.functional.cross_entropy(self(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    torch.manual_seed(0)
    return Tiny()


def _loader() -> DataLoader:
    g = torch.Generator().manual_seed(2)
    x, y = torch.randn(100, 4, generator=g), torch.arange(100) % 3
    return DataLoader(TensorDataset(x, y), batch_size=10)  # 10 batches an epoch, unshuffled


def _trainer(tmp_path: Path, **kw):
    pl = _lightning()
    opts = dict(logger=False, enable_progress_bar=False, enable_model_summary=False, accelerator="cpu")
    return pl.Trainer(default_root_dir=tmp_path, **(opts | kw))


def test_p2_row_041_fast_dev_run_measures_nothing_and_writes_no_table(tmp_path):
    from nclab.integrations.lightning import CollapseCallback

    cb = CollapseCallback(3, out=tmp_path / "fdr")
    with pytest.warns(UserWarning, match="fast_dev_run: nothing is measured and no table is written"):
        _trainer(tmp_path, fast_dev_run=True, callbacks=[cb]).fit(_lit_module(), _loader())
    assert cb.results == [] and not (tmp_path / "fdr").exists()


def test_p2_row_044_max_steps_ending_mid_epoch_is_not_recorded_as_an_epoch(tmp_path):
    from nclab.integrations.lightning import CollapseCallback

    cb = CollapseCallback(3, out=tmp_path / "ms")
    with pytest.warns(UserWarning, match=r"after 5 of the epoch's 10 batches is at epoch 0\.5, not at the end"):
        _trainer(tmp_path, max_steps=5, enable_checkpointing=False, callbacks=[cb]).fit(_lit_module(), _loader())
    assert [r.epoch for r in cb.results] == [0]
    assert {k[0] for k in _keys(tmp_path / "ms")} == {0}


def test_p2_row_046_resumed_lightning_fit_continues_the_epoch_numbering(tmp_path):
    from nclab.integrations.lightning import CollapseCallback

    out = tmp_path / "res"
    first = CollapseCallback(3, out=out)
    trainer = _trainer(tmp_path / "a", max_epochs=2, callbacks=[first])
    trainer.fit(_lit_module(), _loader())
    ckpt = trainer.checkpoint_callback.best_model_path  # epoch=1-step=20.ckpt: after 2 epochs
    at2 = {(r.layer, r.metric): r.value for r in read_metrics(out) if r.epoch == 2}
    second = CollapseCallback(3, out=out)
    _trainer(tmp_path / "b", max_epochs=3, callbacks=[second]).fit(_lit_module(), _loader(), ckpt_path=ckpt)
    assert [r.epoch for r in second.results] == [2, 3]  # the restored epoch-2 model, then epoch 3
    assert sorted({k[0] for k in _keys(out)}) == [0, 1, 2, 3]  # the first fit's epochs are kept
    again = {(r.layer, r.metric): r.value for r in read_metrics(out) if r.epoch == 2}
    assert again.keys() == at2.keys()
    assert again[("penultimate", "nc1")] == pytest.approx(at2[("penultimate", "nc1")], rel=1e-12)
    keys = _keys(out)
    assert len(keys) == len(set(keys))


def test_p2_row_047_one_callback_across_two_fits_continues_numbering(tmp_path):
    from nclab.integrations.lightning import CollapseCallback

    cb, model = CollapseCallback(3, out=tmp_path / "two"), _lit_module()
    for sub in ("a", "b"):
        _trainer(tmp_path / sub, max_epochs=1, enable_checkpointing=False, callbacks=[cb]).fit(model, _loader())
    assert [r.epoch for r in cb.results] == [0, 1, 1, 2]  # the second fit starts where the first ended
    assert sorted({k[0] for k in _keys(tmp_path / "two")}) == [0, 1, 2]


# ------------------------------------------------------------------------------------------ Hugging Face
def _hf_trainer(tmp_path: Path, model, cb, **args):
    transformers = pytest.importorskip("transformers", reason="transformers is not installed")
    from tests.test_integrations_hf import Tokens

    targs = transformers.TrainingArguments(
        output_dir=str(tmp_path / "hf"),
        per_device_train_batch_size=8,
        report_to=[],
        use_cpu=True,
        save_strategy="no",
        logging_strategy="no",
        disable_tqdm=True,
        **args,
    )
    return transformers.Trainer(model=model, args=targs, train_dataset=Tokens(40, 0), callbacks=[cb])


def _hf_model():
    pytest.importorskip("transformers", reason="transformers is not installed")
    from tests.test_integrations_hf import _model

    return _model("bert")


def test_p2_row_051_fractional_hf_epochs_are_not_rounded(tmp_path):
    from nclab.integrations.hf import CollapseCallback

    cb = CollapseCallback(3, out=tmp_path / "frac")
    with pytest.warns(UserWarning, match=r"at epoch 1\.6 \(step 8\) is not at the end of an epoch"):
        _hf_trainer(tmp_path, _hf_model(), cb, num_train_epochs=1.5).train()  # 5 steps an epoch, 8 in all
    assert [r.epoch for r in cb.results] == [0, 1]
    cb = CollapseCallback(3, out=tmp_path / "steps")
    with pytest.warns(UserWarning, match=r"at epoch 0\.6 \(step 3\)"):
        _hf_trainer(tmp_path, _hf_model(), cb, max_steps=3).train()
    assert [r.epoch for r in cb.results] == [0]
    assert {k[0] for k in _keys(tmp_path / "steps")} == {0}


def test_p2_row_052_second_hf_train_call_appends_and_continues(tmp_path):
    from nclab.integrations.hf import CollapseCallback

    cb, model = CollapseCallback(3, out=tmp_path / "hfcoll"), _hf_model()
    trainer = _hf_trainer(tmp_path, model, cb, num_train_epochs=1)
    trainer.train()
    end_of_first = {(r.layer, r.metric): r.value for r in read_metrics(tmp_path / "hfcoll") if r.epoch == 1}
    trainer.train()  # a new TrainerState counting from 0, on the trained model
    assert [r.epoch for r in cb.results] == [0, 1, 1, 2]
    table = read_metrics(tmp_path / "hfcoll")
    assert sorted({r.epoch for r in table}) == [0, 1, 2]  # the first call's rows are kept
    again = {(r.layer, r.metric): r.value for r in table if r.epoch == 1}
    assert again[("penultimate", "nc1")] == pytest.approx(end_of_first[("penultimate", "nc1")], rel=1e-9)


# ------------------------------------------------------------------------------------------ --nproc, sweeps
def test_p2_row_092_nproc_into_a_folder_another_training_holds(tmp_path):
    busy = tmp_path / "busy"
    busy.mkdir()
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump(TINY))
    holder = _hold_lock(busy)
    try:
        res = subprocess.run(
            [sys.executable, "-m", "nclab", "train", str(config), "--out", str(busy), "--nproc", "2", "--no-progress"],
            env=ENV,
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        holder.kill()
        holder.wait()
    assert res.returncode == 2, res.stderr
    assert res.stderr.count("error:") == 1 and "Traceback" not in res.stderr
    assert f"pid {holder.pid}" in res.stderr and "--resume" not in res.stderr
    assert [p.name for p in busy.iterdir()] == ["run.lock"]  # nothing written but the killed holder's lock file


SWEEP = "name: s2\nbase: tiny.yaml\ngrid:\n  optim.lr: [0.05]\nseeds: [0]\n"


def _sweep_files(tmp_path: Path) -> Path:
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    (tmp_path / "s2.yaml").write_text(SWEEP)
    (tmp_path / "s3.yaml").write_text(SWEEP.replace("[0.05]", "[0.01]"))
    return tmp_path


def test_p2_row_097_a_second_sweep_driver_into_a_busy_sweep_folder_fails_at_once(tmp_path):
    from nclab.train.sweep import run_sweep

    _sweep_files(tmp_path)
    c2 = tmp_path / "c2"
    c2.mkdir()
    holder = _hold_lock(c2)  # the first driver
    try:
        with pytest.raises(ValueError, match=rf"c2 is in use by another nclab process \(pid {holder.pid}"):
            run_sweep(tmp_path / "s2.yaml", c2, local=True)
    finally:
        holder.kill()
        holder.wait()
    assert not (c2 / "sweep.csv").exists() and not (c2 / "sweep.yaml").exists()


def test_p2_row_098_another_sweep_file_into_an_existing_sweep_folder_is_refused(tmp_path):
    _sweep_files(tmp_path)
    first = runner.invoke(app, ["sweep", str(tmp_path / "s2.yaml"), "--out", str(tmp_path / "c"), "--local"])
    assert first.exit_code == 0, first.output
    before = _digests(tmp_path / "c")
    res = runner.invoke(app, ["sweep", str(tmp_path / "s3.yaml"), "--out", str(tmp_path / "c"), "--local"])
    assert res.exit_code == 2
    text = " ".join(res.stderr.split())
    assert "holds another sweep: its sweep.yaml differs from" in text and "grid.optim.lr" in text
    assert _digests(tmp_path / "c") == before
    again = runner.invoke(app, ["sweep", str(tmp_path / "s2.yaml"), "--out", str(tmp_path / "c"), "--local"])
    assert again.exit_code == 0  # the same file again: a re-run


def test_p2_row_102_completed_trial_without_its_table_is_reported_and_repaired(tmp_path):
    _sweep_files(tmp_path)
    (tmp_path / "s4.yaml").write_text(SWEEP.replace("seeds: [0]", "seeds: [0, 1]"))
    sweep = tmp_path / "c"
    assert runner.invoke(app, ["sweep", str(tmp_path / "s4.yaml"), "--out", str(sweep), "--local"]).exit_code == 0
    trial = next(p for p in sorted(sweep.iterdir()) if p.is_dir())
    table = (trial / "metrics.csv").read_bytes()
    (trial / "metrics.csv").unlink()
    cmp = runner.invoke(app, ["compare", str(sweep), "--out", str(tmp_path / "cmp.html")])
    assert cmp.exit_code == 0
    assert f"trial {trial.name} (status completed) could not be read" in " ".join(cmp.stderr.split())
    ver = _verify(sweep)
    assert ver.exit_code == 2 and f"{trial}: damaged: sweep.csv marks it completed" in " ".join(ver.stdout.split())
    rerun = runner.invoke(app, ["sweep", str(tmp_path / "s4.yaml"), "--out", str(sweep), "--local"])
    assert rerun.exit_code == 0, rerun.output
    assert (
        f"damaged {trial.name}: marked completed, but its metrics.csv is missing" in (sweep / "sweep.log").read_text()
    )
    assert (trial / "metrics.csv").read_bytes() == table  # rebuilt from the checkpoint
    assert _verify(sweep).exit_code == 0


# ------------------------------------------------------------------------------------------ report, compare
def test_p2_row_109_duplicated_rows_are_refused_by_report_and_compare(tmp_path):
    old = tmp_path / "old"  # a monitor folder of an older nclab: epoch 1 measured twice, both kept
    rows = [MetricRow(e, "train", "penultimate", "nc1", v) for e, v in ((0, 2.0), (1, 0.5), (1, 0.25))]
    write_metrics(rows, old)
    res = runner.invoke(app, ["report", str(old)])
    assert res.exit_code == 2
    text = " ".join(res.stderr.split())
    assert "epoch 1, split train, layer penultimate, metric nc1 at data lines 2 and 3" in text
    cmp = runner.invoke(app, ["compare", str(old), "--out", str(tmp_path / "c.html")])
    assert cmp.exit_code == 2 and "measured twice" in " ".join(cmp.stderr.split())
    assert _verify(old).exit_code == 2


# ------------------------------------------------------------------------------------------ verify
def _edit_line(path: Path, line: int) -> None:
    lines = path.read_text().splitlines(keepends=True)
    head, value = lines[line].rsplit(",", 1)
    lines[line] = f"{head},{float(value) + 0.5!r}\n"
    path.write_text("".join(lines))


def test_p2_row_110_a_changed_digit_in_metrics_csv_fails_verify(runs, tmp_path):
    v = _copy(runs["ce"], tmp_path / "v")
    _edit_line(v / "metrics.csv", 30)
    res = _verify(v)
    assert res.exit_code == 2
    assert f"{v / 'metrics.csv'}: disagrees with the" in res.stdout and "at data line 30" in res.stdout


def test_p2_row_111_a_deleted_row_fails_verify(runs, tmp_path):
    v = _copy(runs["ce"], tmp_path / "v")
    lines = (v / "metrics.csv").read_text().splitlines(keepends=True)
    (v / "metrics.csv").write_text("".join(lines[:40] + lines[41:]))
    res = _verify(v)
    assert res.exit_code == 2 and "at data line 40" in res.stdout


def test_p2_row_112_metrics_csv_cut_at_a_line_boundary_fails_verify(runs, tmp_path):
    v = _copy(runs["ce"], tmp_path / "v")
    lines = (v / "metrics.csv").read_text().splitlines(keepends=True)
    (v / "metrics.csv").write_text("".join(lines[:51]))
    res = _verify(v)
    assert res.exit_code == 2
    assert f"holds the first 50 of the {len(lines) - 1} rows" in " ".join(res.stdout.split())


def test_p2_row_114_a_checkpoint_of_another_run_fails_verify(runs, tmp_path):
    v = _copy(runs["ce"], tmp_path / "v")
    shutil.copy(runs["mse"] / "checkpoints" / "last.pt", v / "checkpoints" / "last.pt")
    out = " ".join(_verify(v).stdout.split())
    assert "differs from the config that trained" in out and "at loss.name" in out
    assert f"was written by run {read_run_id(runs['mse'])}" in out


def test_p2_row_115_an_edited_config_yaml_fails_verify(runs, tmp_path):
    v = _copy(runs["ce"], tmp_path / "v")
    (v / "config.yaml").write_text((v / "config.yaml").read_text().replace("lr: 0.05", "lr: 0.07"))
    res = _verify(v)
    assert res.exit_code == 2
    out = " ".join(res.stdout.split())
    assert f"records run {read_run_id(v)}, but config.yaml hashes to" in out and "at optim.lr" in out


def test_p2_row_116_resume_after_an_edited_config_is_refused_naming_the_key(runs, tmp_path):
    v = _copy(runs["ce"], tmp_path / "v")
    (v / "config.yaml").write_text((v / "config.yaml").read_text().replace("lr: 0.05", "lr: 0.07"))
    before = _digests(v)
    res = runner.invoke(app, ["train", str(v), "--resume", "--set", "train.epochs=3", "--no-progress"])
    assert res.exit_code == 2
    text = " ".join(res.stderr.split())
    assert "config.yaml was edited after the run wrote it" in text
    assert "optim.lr is 0.07 in config.yaml, 0.05 in the checkpoint" in text
    assert _digests(v) == before  # no row relabelled with the new config's hash
    # an edit that resume allows (the epoch budget) still extends the run
    (v / "config.yaml").write_text((v / "config.yaml").read_text().replace("lr: 0.07", "lr: 0.05"))
    ok = runner.invoke(app, ["train", str(v), "--resume", "--set", "train.epochs=3", "--no-progress"])
    assert ok.exit_code == 0, ok.output
    assert _verify(v).exit_code == 0


def test_p2_row_117_metrics_parquet_of_another_run_fails_verify(runs, tmp_path):
    pytest.importorskip("pyarrow")
    v = _copy(runs["ce"], tmp_path / "v")
    shutil.copy(runs["mse"] / "metrics.parquet", v / "metrics.parquet")
    res = _verify(v)
    assert res.exit_code == 2
    assert f"{v / 'metrics.parquet'}: holds run_id {read_run_id(runs['mse'])}" in " ".join(res.stdout.split())


def test_p2_row_118_metrics_csv_of_another_run_fails_verify(runs, tmp_path):
    v = _copy(runs["ce"], tmp_path / "v")
    shutil.copy(runs["mse"] / "metrics.csv", v / "metrics.csv")
    res = _verify(v)
    assert res.exit_code == 2
    assert f"{v / 'metrics.csv'}: records run {read_run_id(runs['mse'])}" in " ".join(res.stdout.split())


def test_p2_row_119_an_edited_summary_json_fails_verify(runs, tmp_path):
    v = _copy(runs["ce"], tmp_path / "v")
    summary = json.loads((v / "summary.json").read_text())
    for key, want in (("zero_error_epoch", "zero_error_epoch is 12345"), ("num_classes", "num_classes 12345")):
        (v / "summary.json").write_text(json.dumps({**summary, key: 12345}))
        res = _verify(v)
        assert res.exit_code == 2 and want in " ".join(res.stdout.split()), res.stdout
    # fields that nothing else records are caught by the summary's own seal (the fresh-clone re-run of the probe)
    edits = {"train_samples": 12345, "test_samples": 12345, "timings": {**summary["timings"], "checkpoint_s": 12345}}
    for key, value in edits.items():
        (v / "summary.json").write_text(json.dumps({**summary, key: value}))
        res = _verify(v)
        assert res.exit_code == 2 and "edited after the run wrote it" in " ".join(res.stdout.split()), key
    (v / "summary.json").write_text(json.dumps(summary))  # the untouched content, reformatted: still verifies
    assert _verify(v).exit_code == 0


def test_a_summary_written_before_the_lambda_key_was_renamed_verifies(runs, tmp_path):
    """Runs written before ``lambda_from_weight_decay`` had its name store it as ``paper004_lambda``: still read."""
    v = _copy(runs["ce"], tmp_path / "v")
    summary = json.loads((v / "summary.json").read_text())
    lam = summary.pop("lambda_from_weight_decay")
    del summary["sha256"]  # summaries of that time were not sealed either
    (v / "summary.json").write_text(json.dumps({**summary, "paper004_lambda": lam}))
    assert _verify(v).exit_code == 0
    (v / "summary.json").write_text(json.dumps({**summary, "paper004_lambda": 2 * lam}))
    res = _verify(v)
    assert res.exit_code == 2 and f"paper004_lambda {2 * lam!r} does not follow" in " ".join(res.stdout.split())


def test_p2_row_120_monitor_and_callback_folders_verify_ok(tmp_path):
    with CollapseMonitor(_net(), 3, out=tmp_path / "mon") as monitor:
        monitor.measure(_data(), epoch=0)
        monitor.measure(_data(), split="test", epoch=0)
    res = _verify(tmp_path / "mon")
    assert res.exit_code == 0, res.output
    assert "metrics table" in res.stdout and "run identity" in res.stdout
    # an edited identity is caught: its run id no longer hashes what it records
    ident = json.loads((tmp_path / "mon" / "identity.json").read_text())
    ident["hashed"]["num_classes"] = 4
    (tmp_path / "mon" / "identity.json").write_text(json.dumps(ident))
    assert _verify(tmp_path / "mon").exit_code == 2
    _lightning()
    from nclab.integrations.lightning import CollapseCallback

    cb = CollapseCallback(3, out=tmp_path / "lit")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _trainer(tmp_path, max_epochs=1, enable_checkpointing=False, callbacks=[cb]).fit(_lit_module(), _loader())
    res = _verify(tmp_path / "lit")
    assert res.exit_code == 0, res.output


def test_a_monitor_runs_penultimate_layer_is_the_recorded_one_not_the_first_measured(tmp_path):
    """The fresh-clone newcomer re-trial: with an earlier layer measured too, reports and compare read the first
    layer with NC1 rows as the 'penultimate' (a silent wrong number: the shallow layer's NC1 shown as the
    classifier input's). The run's identity records the penultimate layer; an explicit run_id falls back to the
    layer named penultimate."""
    from nclab.io.rundir import read_run

    for kw, out in (({}, tmp_path / "a"), ({"run_id": "mine"}, tmp_path / "b")):
        with CollapseMonitor(_net(), 3, layers=["0", "penultimate"], out=out, **kw) as monitor:
            res0 = monitor.measure(_data(), epoch=0)
            monitor.measure(_data(), epoch=1)
        rec = read_run(out)
        assert rec.penultimate == "penultimate", kw
        nc1 = {r.layer: r.value for r in rec.rows if r.metric == "nc1" and r.epoch == 0}
        assert nc1["penultimate"] == res0.value("penultimate", "nc1") != nc1["0"]
