"""Collapse in your own PyTorch loop: an MLP on the embedded digits trained with the MSE loss on one-hot targets
[Han et al. 2022], measured with nclab.CollapseMonitor.

The monitor finds the classifier (``model.fc``: NC3 / NC4 included, no argument needed), hooks its input (the
penultimate features) and measures the training split and the held-out split (NCC against the training class
means) on a log-spaced schedule, writing ``metrics.csv`` in the run directory. Checks: the network reaches zero
training error, NC1 [Papyan et al. 2020] falls by over an order of magnitude, and the monitor's NC1 equals
``tr(Sigma_W Sigma_B^+) / K`` computed directly from the features.

    python examples/own_loop.py [RUN_DIR]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import nclab
from nclab import CollapseMonitor
from nclab.data import load
from nclab.measure import Schedule


class MLP(nn.Module):
    def __init__(self, d_in: int = 64, width: int = 64, K: int = 10) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(d_in, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU())
        self.fc = nn.Linear(width, K)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.body(x.flatten(1)))


def main(out: Path, epochs: int = 150) -> None:
    torch.manual_seed(0)
    torch.set_num_threads(1)  # tiny matrices: more threads only wait on each other
    train, test = load("digits", "train", per_class=40), load("digits", "test")
    train_dl = DataLoader(TensorDataset(train.x, train.y), batch_size=40, shuffle=True)
    test_dl = DataLoader(TensorDataset(test.x, test.y), batch_size=256)
    model = MLP()
    opt = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9, weight_decay=1e-4)

    # the five lines for any loop: build once, then measure when due
    monitor = CollapseMonitor(model, K=10, schedule=Schedule.log(epochs, 8), out=out)
    for epoch in range(epochs + 1):
        if monitor.due(epoch):
            monitor.measure(train_dl, split="train", epoch=epoch)
            monitor.measure(test_dl, split="test", epoch=epoch)
        if epoch == epochs:
            break
        for x, y in train_dl:
            opt.zero_grad()
            nn.functional.mse_loss(model(x), nn.functional.one_hot(y, 10).float()).backward()
            opt.step()
    monitor.close()

    rows = nclab.read_metrics(out)  # typed rows of the run directory (to_frame(): pandas)
    value = {(r.epoch, r.split, r.layer, r.metric): r.value for r in rows}
    first, last = value[(0, "train", "penultimate", "nc1")], value[(epochs, "train", "penultimate", "nc1")]
    print(f"classifier found: {monitor.classifier.name}; NC1 {first:.3g} -> {last:.3g}")
    print(
        "final train error {:.3f}, test error {:.3f}, NC3 self_duality {:.3f}, NC4 ncc_mismatch {:.3f}".format(
            value[(epochs, "train", "output", "error")],
            value[(epochs, "test", "output", "error")],
            value[(epochs, "train", "penultimate", "self_duality")],
            value[(epochs, "train", "penultimate", "ncc_mismatch")],
        )
    )
    assert monitor.classifier.name == "fc" and not monitor.missing
    assert value[(epochs, "train", "output", "error")] == 0.0
    assert last < first / 10, (first, last)

    # the same NC1 from the features directly: tr(Sigma_W Sigma_B^+) / K
    model.eval()
    with torch.no_grad():
        h = model.body(train.x.flatten(1)).double().numpy()
    y = train.y.numpy()
    mu = np.stack([h[y == c].mean(0) for c in range(10)])
    centred = h - mu[y]
    sigma_w = centred.T @ centred / len(h)
    m = mu - h.mean(0)
    sigma_b = m.T @ m / 10
    direct = np.trace(sigma_w @ np.linalg.pinv(sigma_b, rcond=1e-10, hermitian=True)) / 10
    assert abs(direct - last) <= 1e-8 * abs(direct), (direct, last)
    print("own_loop: ok")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="nclab-own-loop-")))
