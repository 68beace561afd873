"""Two layer names for the same features (``layers=["layer3", "penultimate"]`` where the classifier's input is
layer3's output) are measured once, with a warning, and both names keep their rows."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from nclab import CollapseMonitor


class Net(nn.Module):
    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.layer1 = nn.Sequential(nn.Linear(6, 12), nn.ReLU())
        self.layer2 = nn.Sequential(nn.Linear(12, 10), nn.ReLU())
        self.layer3 = nn.Sequential(nn.Linear(10, 8), nn.ReLU(inplace=inplace))
        self.fc = nn.Linear(8, 3)

    def forward(self, x):
        return self.fc(self.layer3(self.layer2(self.layer1(x))))


def _data():
    g = torch.Generator().manual_seed(1)
    y = torch.arange(90) % 3
    return [(2.0 * torch.randn(3, 6, generator=g)[y] + torch.randn(90, 6, generator=g), y)]


def test_the_same_tensor_under_two_names_is_measured_once_and_reported_under_both():
    net = Net()
    mon = CollapseMonitor(net, K=3, layers=["layer2", "layer3", "penultimate"])
    with pytest.warns(UserWarning, match="'layer3' and 'penultimate' hold the same features"):
        first = mon.measure(_data(), epoch=0)
    assert mon.aliases == {"layer3": "penultimate"}
    assert "layer3" not in mon.plan().layers and "layer2" in mon.plan().layers  # measured once from now on
    second = mon.measure(_data(), epoch=1)
    for res in (first, second):
        pen = {r.metric: r.value for r in res.rows if r.layer == "penultimate"}
        three = {r.metric: r.value for r in res.rows if r.layer == "layer3"}
        assert three and set(three) <= set(pen)
        assert all(three[m] == pen[m] for m in three)
        assert "nc1" in three and "ncc_mismatch" not in three  # only the metrics layer3 has of its own
    assert {r.metric for r in first.rows if r.layer == "layer3"} == {
        r.metric for r in second.rows if r.layer == "layer3"
    }
    assert second.stats["layer3"] is second.stats["penultimate"]


def test_distinct_features_are_no_aliases_even_when_they_share_memory():
    # an in-place ReLU overwrites the Linear's output: same storage, different features at each hook
    mon = CollapseMonitor(Net(inplace=True), K=3, layers=["layer3.0", "layer3.1", "penultimate"])
    with pytest.warns(UserWarning, match="'layer3.1' and 'penultimate'"):
        res = mon.measure(_data(), epoch=0)
    assert mon.aliases == {"layer3.1": "penultimate"}  # the ReLU's output is the classifier's input; not the Linear's
    lin = {r.metric: r.value for r in res.rows if r.layer == "layer3.0"}
    relu = {r.metric: r.value for r in res.rows if r.layer == "layer3.1"}
    assert lin["nc1"] != relu["nc1"]
