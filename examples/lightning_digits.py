"""Collapse during Lightning training: nclab.integrations.lightning.CollapseCallback on the embedded digits.

A LightningModule whose classifier is ``self.fc`` (found automatically), trained with the MSE loss on one-hot
targets [Han et al. 2022]. The callback measures the training and validation dataloaders before training
(epoch 0) and on a log-spaced schedule, logs through ``pl_module.log_dict`` (here to a CSV logger) and writes
the run table. Checks: zero training error, NC1 falls by over an order of magnitude, the validation NCC
accuracy tracks the network's validation accuracy (NC4 on held-out data), and the logger received the values.

    pip install nclab[lightning]
    python examples/lightning_digits.py [RUN_DIR]
"""

from __future__ import annotations

import csv
import sys
import tempfile
from pathlib import Path

import lightning.pytorch as pl
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import nclab
from nclab.data import load
from nclab.integrations.lightning import CollapseCallback
from nclab.measure import Schedule

EPOCHS = 100


class DigitsMLP(pl.LightningModule):
    def __init__(self, width: int = 64) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(64, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU())
        self.fc = nn.Linear(width, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.body(x.flatten(1)))

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], _: int) -> torch.Tensor:
        x, y = batch
        return nn.functional.mse_loss(self(x), nn.functional.one_hot(y, 10).float())

    def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], _: int) -> None:
        x, y = batch
        self.log("val_error", (self(x).argmax(1) != y).float().mean())

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.2, momentum=0.9, weight_decay=1e-4)


def main(out: Path) -> None:
    torch.set_num_threads(1)  # tiny matrices: more threads only wait on each other
    pl.seed_everything(0, verbose=False)
    train, test = load("digits", "train", per_class=40), load("digits", "test")
    train_dl = DataLoader(TensorDataset(train.x, train.y), batch_size=40, shuffle=True)
    val_dl = DataLoader(TensorDataset(test.x, test.y), batch_size=512)
    callback = CollapseCallback(10, schedule=Schedule.log(EPOCHS, 6), out=out / "collapse")
    trainer = pl.Trainer(
        max_epochs=EPOCHS,
        callbacks=[callback],
        logger=pl.loggers.CSVLogger(out, name="lightning"),
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        log_every_n_steps=10,
        accelerator="cpu",
    )
    trainer.fit(DigitsMLP(), train_dl, val_dl)

    value = {(r.epoch, r.split, r.layer, r.metric): r.value for r in nclab.read_metrics(out / "collapse")}
    first, last = value[(0, "train", "penultimate", "nc1")], value[(EPOCHS, "train", "penultimate", "nc1")]
    ncc_error = 1 - value[(EPOCHS, "test", "penultimate", "ncc_accuracy")]
    net_error = value[(EPOCHS, "test", "output", "error")]
    print(f"NC1 {first:.3g} -> {last:.3g}; validation error: network {net_error:.3f}, NCC {ncc_error:.3f}")
    assert value[(EPOCHS, "train", "output", "error")] == 0.0
    assert last < first / 10, (first, last)
    assert abs(ncc_error - net_error) < 0.02, (ncc_error, net_error)

    with open(Path(trainer.logger.log_dir) / "metrics.csv") as f:
        logged = [row for row in csv.DictReader(f) if row.get("collapse/train/penultimate/nc1")]
    assert abs(float(logged[-1]["collapse/train/penultimate/nc1"]) - last) <= 1e-6 * last
    print("lightning_digits: ok")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="nclab-lightning-")))
