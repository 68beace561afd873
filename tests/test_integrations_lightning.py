"""Lightning callback: a tiny module fitted a few epochs on the embedded digits; epoch 0 (before training) and
the scheduled epochs are logged (table and loggers) and the last ones equal a direct CollapseMonitor.measure of
the final model; epoch 0 equals a measurement of the initial weights."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from nclab.io.run_table import read_metrics

pl = pytest.importorskip("lightning.pytorch", reason="lightning is not installed (pip install nclab[lightning])")


class Recorder(pl.loggers.Logger):
    """A logger that keeps every ``log_metrics`` call."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[dict[str, float], int]] = []

    @property
    def name(self) -> str:
        return "recorder"

    @property
    def version(self) -> int:
        return 0

    def log_hyperparams(self, params, *args, **kwargs) -> None:
        pass

    def log_metrics(self, metrics, step=None) -> None:
        self.calls.append((dict(metrics), step))


class Tiny(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(64, 24), nn.ReLU())
        self.fc = nn.Linear(24, 10)

    def forward(self, x):
        return self.fc(self.body(x))

    def training_step(self, batch, _):
        x, y = batch
        return nn.functional.cross_entropy(self(x), y)

    def validation_step(self, batch, _):
        pass

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.2)


def test_callback_rows_equal_a_direct_measurement(tmp_path):
    from nclab.data import load
    from nclab.integrations.lightning import CollapseCallback
    from nclab.monitor import CollapseMonitor

    torch.manual_seed(0)
    tr, te = load("digits", "train", per_class=15), load("digits", "test", per_class=5)
    train_dl = DataLoader(TensorDataset(tr.x.flatten(1), tr.y), batch_size=50)
    val_dl = DataLoader(TensorDataset(te.x.flatten(1), te.y), batch_size=50)
    cb = CollapseCallback(10, schedule=[0, 1, 3], out=tmp_path / "run")
    logger = Recorder()
    trainer = pl.Trainer(
        max_epochs=3,
        callbacks=[cb],
        logger=logger,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tmp_path,
        accelerator="cpu",
    )
    model = Tiny()
    initial = CollapseMonitor(model, 10).measure(train_dl, epoch=0)
    trainer.fit(model, train_dl, val_dl)
    table = read_metrics(tmp_path / "run")
    assert sorted({(r.epoch, r.split) for r in table}) == [(e, s) for e in (0, 1, 3) for s in ("test", "train")]
    for r in initial.rows:
        (v,) = [t.value for t in table if (t.epoch, t.split, t.layer, t.metric) == (0, "train", r.layer, r.metric)]
        assert v == pytest.approx(r.value, rel=1e-12, abs=1e-14), r
    direct = CollapseMonitor(model, 10)
    ref_train = direct.measure(train_dl, epoch=3)
    ref_test = direct.measure(val_dl, split="test", epoch=3)
    got = {(r.split, r.layer, r.metric): r.value for r in table if r.epoch == 3}
    for res in (ref_train, ref_test):
        for r in res.rows:
            assert got[(r.split, r.layer, r.metric)] == pytest.approx(r.value, rel=1e-12, abs=1e-14), r
    assert "self_duality" in ref_train.reports["penultimate"]
    # the loggers got epoch 0 at step 0, then epochs 1 and 3 through log_dict at the epoch's last step with
    # Lightning's own 0-based epoch key; Lightning keeps logged values as float32 tensors, hence rel=1e-6
    per_epoch = trainer.global_step // 3
    logged = [(m.get("epoch"), step) for m, step in logger.calls if any(k.startswith("collapse/") for k in m)]
    assert logged == [(None, 0), (0, per_epoch - 1), (2, 3 * per_epoch - 1)]
    first = next(m for m, _ in logger.calls if "collapse/train/penultimate/nc1" in m)
    assert first == {f"collapse/{t.split}/{t.layer}/{t.metric}": t.value for t in table if t.epoch == 0}
    last = next(m for m, _ in reversed(logger.calls) if "collapse/train/penultimate/nc1" in m)
    for (split, layer, metric), v in got.items():
        assert last[f"collapse/{split}/{layer}/{metric}"] == pytest.approx(v, rel=1e-6, abs=1e-7)
    nc1 = got[("train", "penultimate", "nc1")]
    assert float(trainer.callback_metrics["collapse/train/penultimate/nc1"]) == pytest.approx(nc1, rel=1e-6)


def test_validation_split_is_measured_from_epoch_0_without_sanity_check(tmp_path):
    """No sanity check and validation every second epoch: Lightning has not loaded the val dataloader at the start
    of training, the callback loads it (as Lightning does for its progress bar) and measures it at epochs 0 and 1
    too; epoch 0's held-out rows equal a direct measurement of the initial weights."""
    from nclab.data import load
    from nclab.integrations.lightning import CollapseCallback
    from nclab.monitor import CollapseMonitor

    torch.manual_seed(0)
    tr, te = load("digits", "train", per_class=15), load("digits", "test", per_class=5)
    train_dl = DataLoader(TensorDataset(tr.x.flatten(1), tr.y), batch_size=50)
    val_dl = DataLoader(TensorDataset(te.x.flatten(1), te.y), batch_size=50)
    cb = CollapseCallback(10, out=tmp_path / "run")
    trainer = pl.Trainer(
        max_epochs=2,
        callbacks=[cb],
        logger=Recorder(),
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tmp_path,
        accelerator="cpu",
        num_sanity_val_steps=0,
        check_val_every_n_epoch=2,
    )
    model = Tiny()
    initial = CollapseMonitor(model, 10)
    initial.measure(train_dl, epoch=0)
    held = initial.measure(val_dl, split="test", epoch=0)
    trainer.fit(model, train_dl, val_dl)
    table = read_metrics(tmp_path / "run")
    assert sorted({(r.epoch, r.split) for r in table}) == [(e, s) for e in (0, 1, 2) for s in ("test", "train")]
    got = {(r.layer, r.metric): r.value for r in table if (r.epoch, r.split) == (0, "test")}
    assert got == pytest.approx({(r.layer, r.metric): r.value for r in held.rows}, rel=1e-12, abs=1e-14)
    assert trainer.fit_loop.epoch_loop.val_loop.batch_progress.total.completed == 1  # validation ran once, epoch 2
