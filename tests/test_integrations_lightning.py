"""Lightning callback: a tiny module fitted a few epochs on the embedded digits; the logged rows exist and the
last ones equal a direct CollapseMonitor.measure of the final model."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from nclab.io.run_table import read_metrics

pl = pytest.importorskip("lightning.pytorch", reason="lightning is not installed (pip install nclab[lightning])")


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
    cb = CollapseCallback(10, schedule=[1, 3], out=tmp_path / "run")
    trainer = pl.Trainer(
        max_epochs=3,
        callbacks=[cb],
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tmp_path,
        accelerator="cpu",
    )
    model = Tiny()
    trainer.fit(model, train_dl, val_dl)
    table = read_metrics(tmp_path / "run")
    assert sorted({(r.epoch, r.split) for r in table}) == [(1, "test"), (1, "train"), (3, "test"), (3, "train")]
    direct = CollapseMonitor(model, 10)
    ref_train = direct.measure(train_dl, epoch=3)
    ref_test = direct.measure(val_dl, split="test", epoch=3)
    got = {(r.split, r.layer, r.metric): r.value for r in table if r.epoch == 3}
    for res in (ref_train, ref_test):
        for r in res.rows:
            assert got[(r.split, r.layer, r.metric)] == pytest.approx(r.value, rel=1e-12, abs=1e-14), r
    assert "self_duality" in ref_train.reports["penultimate"]
