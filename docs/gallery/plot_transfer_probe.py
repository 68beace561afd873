"""
Collapse and transfer: a linear probe on new classes
====================================================

Does a network whose features collapse more on its own classes transfer better or worse to new ones? [Xu & Liu
2023] answer with linear probes of the frozen penultimate features, following [Kornblith et al. 2019]:
multinomial logistic regression with its L2 strength chosen on a validation split. Here an MLP learns the digits
0-4 (the *source* classes); at a few epochs its penultimate features are

* measured on the source training data (NC1 and VCI from :class:`nclab.stats.ClassStats`), and
* probed on the digits 5-9, which the network never saw (:func:`nclab.transfer.linear_probe`).

At this scale it is an illustration of the protocol, not evidence either way: see :doc:`/transfer` for the
study runner and the CPU-scale reproduction.
"""

# %%
import matplotlib.pyplot as plt
import numpy as np
import torch
from torch import nn

from nclab.data import load
from nclab.metrics import nc1, vci
from nclab.stats import ClassStats
from nclab.transfer import linear_probe

torch.manual_seed(0)
torch.set_num_threads(1)
train, test = load("digits", "train"), load("digits", "test")
x_train, y_train = train.x.flatten(1), train.y
x_test, y_test = test.x.flatten(1), test.y
source = y_train < 5
target_train, target_test = ~source, y_test >= 5

body = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU())
head = nn.Linear(32, 5)
opt = torch.optim.SGD([*body.parameters(), *head.parameters()], lr=0.05, momentum=0.9, weight_decay=5e-4)
xs, ys = x_train[source], y_train[source]
checkpoints, epochs = [0, 2, 5, 20, 100], 100
lams = np.logspace(-5, 1, 13)  # the probe's L2 grid (the default has 97 strengths)


def features(x: torch.Tensor) -> np.ndarray:
    with torch.no_grad():
        return body(x).double().numpy()


records = []
for epoch in range(epochs + 1):
    if epoch in checkpoints:
        stats = ClassStats(K=5, d=32)
        stats.update(features(xs), ys.numpy())
        probe = linear_probe(
            (features(x_train[target_train]), y_train[target_train].numpy() - 5),
            (features(x_test[target_test]), y_test[target_test].numpy() - 5),
            lams=lams,
        )
        records.append((epoch, nc1(stats), vci(stats), probe.accuracy))
    if epoch == epochs:
        break
    for batch in torch.randperm(len(xs)).split(50):
        opt.zero_grad()
        nn.functional.cross_entropy(head(body(xs[batch])), ys[batch]).backward()
        opt.step()

epoch_, nc1_, vci_, acc_ = map(np.array, zip(*records, strict=True))
for row in records:
    print("epoch {:3d}: source NC1 {:.3g}, VCI {:.3f}, probe accuracy on digits 5-9 {:.3f}".format(*row))

# %%
# Source collapse against target accuracy
# ---------------------------------------
# Left: the collapse of the source classes' features as training proceeds. Right: how well the same features
# separate the five classes the network never saw, by the linear probe's test accuracy. Epochs on a symmetric-log
# axis, so that epoch 0 (the random network) shows.
fig, axes = plt.subplots(1, 2, figsize=(10, 4), layout="constrained")
axes[0].plot(epoch_, nc1_, "o-", label="NC1")
axes[0].plot(epoch_, vci_, "s-", label="VCI")
axes[0].set(yscale="log", ylabel="collapse on the source classes (train)", title="digits 0-4: the training task")
axes[1].plot(epoch_, acc_, "o-", color="C2")
axes[1].set(ylabel="linear-probe test accuracy", title="digits 5-9: new classes, frozen features")
for ax in axes:
    ax.set_xscale("symlog", linthresh=1)
    ax.set_xlim(left=0)
    ax.set_xlabel("epoch of training on digits 0-4")
axes[0].legend()
plt.show()
