"""
Collapse during training
========================

A small MLP learns the embedded digits (8 x 8 images, 10 classes) with the MSE loss on one-hot targets, well past
zero training error, while :class:`nclab.CollapseMonitor` measures every collapse metric at log-spaced epochs: the
terminal phase of training of [Papyan et al. 2020], at a scale that runs in seconds on one CPU core.

The monitor finds the classifier (``model.fc``), hooks its input (the penultimate features), and writes one row per
value to ``metrics.csv`` in its run directory. :func:`nclab.read_metrics` reads them back.
"""

# %%
# Train and measure
# -----------------
# Five lines of the loop concern nclab: build the monitor, ask whether an epoch is due, measure the training
# split, measure the held-out split (its NCC classifier uses the training split's class means), close.
import tempfile

import matplotlib.pyplot as plt
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import nclab
from nclab import CollapseMonitor
from nclab.data import load
from nclab.measure import Schedule

torch.manual_seed(0)
torch.set_num_threads(1)
train, test = load("digits", "train", per_class=40), load("digits", "test")
train_dl = DataLoader(TensorDataset(train.x, train.y), batch_size=40, shuffle=True)
test_dl = DataLoader(TensorDataset(test.x, test.y), batch_size=256)


class MLP(nn.Module):
    def __init__(self, width: int = 64) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(64, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU())
        self.fc = nn.Linear(width, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.body(x.flatten(1)))


def mse(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return nn.functional.mse_loss(logits, nn.functional.one_hot(y, 10).float())


epochs = 150
model = MLP()
opt = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9, weight_decay=1e-4)
out = tempfile.mkdtemp(prefix="nclab-gallery-")
# loss_fn adds the network's loss to the measured rows, next to its error
monitor = CollapseMonitor(model, K=10, schedule=Schedule.log(epochs, 16), loss_fn=mse, out=out)
for epoch in range(epochs + 1):
    if monitor.due(epoch):
        monitor.measure(train_dl, split="train", epoch=epoch)
        monitor.measure(test_dl, split="test", epoch=epoch)
    if epoch == epochs:
        break
    for x, y in train_dl:
        opt.zero_grad()
        mse(model(x), y).backward()
        opt.step()
monitor.close()

# %%
# Read the table back
# -------------------
# Each row is ``(epoch, split, layer, metric, value)``; the network-level rows (loss, error) have the layer
# ``"output"``.
rows = nclab.read_metrics(out)


def curve(metric: str, split: str = "train", layer: str = "penultimate") -> tuple[list[int], list[float]]:
    points = sorted((r.epoch, r.value) for r in rows if (r.metric, r.split, r.layer) == (metric, split, layer))
    return [e for e, _ in points], [v for _, v in points]


print(f"{len(rows)} rows; metrics at the penultimate layer:")
print(sorted({r.metric for r in rows if r.layer == "penultimate"}))

# %%
# The four collapse properties
# ----------------------------
# NC1: within-class variability relative to between-class, ``tr(Sigma_W Sigma_B^+) / K``. NC2: distance of the
# centred class means' normalised Gram matrix from a simplex ETF's. NC3: distance between the classifier rows and
# the centred class means (self-duality). NC4: how often the nearest class mean disagrees with the network.
# Epochs on a symmetric-log axis, so that epoch 0 (the initialisation) shows; the dotted line is the first epoch
# with zero training error.
zero_error = next(e for e, v in zip(*curve("error", layer="output"), strict=True) if v == 0.0)
panels = [
    ("nc1", "NC1  tr(Σ_W Σ_B⁺)/K", True),
    ("etf_gram_error", "NC2  ETF Gram error", False),
    ("self_duality", "NC3  self-duality", False),
    ("ncc_mismatch", "NC4  NCC mismatch", False),
    ("error", "error", False),
    ("loss", "MSE loss", True),
]
fig, axes = plt.subplots(2, 3, figsize=(11, 6), layout="constrained")
for ax, (metric, title, log) in zip(axes.flat, panels, strict=True):
    layer = "output" if metric in ("error", "loss") else "penultimate"
    for split, style in (("train", "-"), ("test", "--")):
        ax.plot(*curve(metric, split, layer), style, marker=".", label=split)
    ax.axvline(zero_error, color="0.5", ls=":", lw=1)
    ax.set_xscale("symlog", linthresh=1)
    ax.set_xlim(left=0)
    ax.set_yscale("log" if log else "linear")
    ax.set_title(title)
    ax.set_xlabel("epoch")
axes[0, 0].legend()
fig.suptitle("MLP on the digits, MSE loss: collapse past zero training error (dotted)")
plt.show()

# %%
# NC1 falls by about two orders of magnitude on the training split, and much less on the held-out split:
# collapse is a property of the training data first.
first, last = curve("nc1")[1][0], curve("nc1")[1][-1]
print(f"zero training error at epoch {zero_error}; train NC1 {first:.3g} -> {last:.3g}")
print(f"test NC1 at the end: {curve('nc1', 'test')[1][-1]:.3g}")
