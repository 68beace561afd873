"""
Collapse layer by layer
=======================

Collapse is strongest at the penultimate layer and weaker, but present, in the layers before it: NC1 decreases
from layer to layer through the depth of a trained network: the progressive feedforward collapse that [Wang et al.
2024] measure and model with a multilayer UFM. Here a six-layer MLP learns the embedded digits with
cross-entropy, and :class:`nclab.CollapseMonitor` measures every hidden layer at a few epochs.

Layers other than the penultimate one are measured ``"light"`` by default (O(K d) statistics, no NC1); ``track=
"full"`` asks for the d x d statistics, and with them NC1, at every listed layer.
"""

# %%
import tempfile

import matplotlib.pyplot as plt
import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from nclab import CollapseMonitor
from nclab.data import load
from nclab.io import read_metrics

torch.manual_seed(0)
torch.set_num_threads(1)
train = load("digits", "train", per_class=40)
train_dl = DataLoader(TensorDataset(train.x.flatten(1), train.y), batch_size=50, shuffle=True)

depth, width = 6, 48
blocks: list[nn.Module] = []
for i in range(depth):
    blocks += [nn.Linear(64 if i == 0 else width, width), nn.ReLU()]
model = nn.Sequential(*blocks, nn.Linear(width, 10))
# the outputs of the ReLUs: "1", "3", ..., "11" (the last one is the penultimate layer)
layers = [str(2 * i + 1) for i in range(depth)]

epochs, measured = 200, [0, 10, 40, 200]
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
out = tempfile.mkdtemp(prefix="nclab-gallery-")
monitor = CollapseMonitor(model, num_classes=10, layers=layers, track="full", schedule=measured, out=out)
for epoch in range(epochs + 1):
    monitor.maybe_measure(train_dl, epoch=epoch)  # the training split, when the schedule says so
    if epoch == epochs:
        break
    for x, y in train_dl:
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
monitor.close()

# %%
# NC1 against depth, one line per epoch
# -------------------------------------
# At initialisation the random layers carry the input's class structure forward with little change; as training
# proceeds NC1 falls at every layer, most at the deepest ones, so that it decreases with depth.
rows = read_metrics(out)
value = {(r.epoch, r.layer, r.metric): r.value for r in rows}
fig, axes = plt.subplots(1, 2, figsize=(10, 4), layout="constrained")
colors = plt.cm.viridis(np.linspace(0.1, 0.9, len(measured)))
for epoch, color in zip(measured, colors, strict=True):
    nc1 = [value[(epoch, layer, "nc1")] for layer in layers]
    ncc = [value[(epoch, layer, "ncc_accuracy")] for layer in layers]
    axes[0].plot(range(1, depth + 1), nc1, marker="o", color=color, label=f"epoch {epoch}")
    axes[1].plot(range(1, depth + 1), ncc, marker="o", color=color, label=f"epoch {epoch}")
axes[0].set(yscale="log", xlabel="hidden layer", ylabel="NC1  tr(Σ_W Σ_B⁺)/K", title="within-class variability")
axes[1].set(xlabel="hidden layer", ylabel="NCC accuracy (PFC3)", title="nearest-class-mean accuracy")
axes[0].legend()
plt.show()

# %%
# The numbers behind the last line:
for layer, i in zip(layers, range(1, depth + 1), strict=True):
    print(f"layer {i} (module {layer:>2}): NC1 {value[(epochs, layer, 'nc1')]:.3g}")
