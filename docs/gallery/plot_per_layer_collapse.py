"""
Collapse layer by layer
=======================

Collapse is strongest at the penultimate layer and weaker, but present, in the layers before it: NC1 decreases
from layer to layer through the depth of a trained network, the progressive feedforward collapse that
[Wang et al. 2024] measure and model with a multilayer UFM. Here a six-layer MLP learns the embedded digits with
cross-entropy, and :class:`nclab.CollapseMonitor` measures every hidden layer at a few epochs.

Every listed layer up to :data:`~nclab.measure.FULL_TRACK_MAX_DIM` (1,024) wide gets the d x d statistics, and
with them NC1, by default; a wider one would be measured ``"light"`` (O(K d) statistics, no NC1) with a warning
saying so, and ``track={layer: "full"}`` would ask for the full statistics there.
"""

# %%
import tempfile

import matplotlib.pyplot as plt
import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import nclab
from nclab import CollapseMonitor
from nclab.data import load
from nclab.nets import MLP

torch.manual_seed(0)
torch.set_num_threads(1)
train = load("digits", "train", per_class=40)
train_dl = DataLoader(TensorDataset(train.x.flatten(1), train.y), batch_size=50, shuffle=True)

# nclab's MLP: blocks of Linear -> BatchNorm -> ReLU, then the classifier `head`; any model works the same way
depth, width = 6, 64
model = MLP((64,), 10, widths=(width,) * depth, batchnorm=True)
layers = [f"blocks.{i}" for i in range(depth)]  # module names; the last block's output is the penultimate layer

epochs, measured = 100, [0, 3, 10, 30, 100]
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-3)
out = tempfile.mkdtemp(prefix="nclab-gallery-")
monitor = CollapseMonitor(model, K=10, layers=layers, schedule=measured, out=out)
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
# At initialisation NC1 *grows* with depth: random layers blur the class structure of the input, and the
# nearest-class-mean accuracy falls from layer to layer. Training reverses the order: NC1 falls at every layer, most
# at the deepest ones, until it decreases steadily with depth and the last layers separate the training classes by
# their means alone.
rows = nclab.read_metrics(out)
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
# The numbers behind the first and the last line:
for i, layer in enumerate(layers, 1):
    start, end = value[(0, layer, "nc1")], value[(epochs, layer, "nc1")]
    print(f"layer {i} ({layer}): NC1 {start:.3g} at epoch 0, {end:.3g} at epoch {epochs}")
