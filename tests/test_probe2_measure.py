"""Rows of the second reliability probe (docs/reliability.md) handled in the measurement engine and the monitor:
what a layer, a batch, the data or an argument can be, and the error each wrong one gets (naming the problem),
with the numbers of the accepted forms checked against a direct computation."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from nclab.metrics import collapse_report
from nclab.monitor import CollapseMonitor
from nclab.stats import ClassStats

K, D, N = 3, 5, 60


@pytest.fixture()
def data():
    g = torch.Generator().manual_seed(7)
    y = torch.arange(N) % K
    x = 2.0 * torch.randn(K, D, generator=g)[y] + torch.randn(N, D, generator=g)
    return x, y


def _mlp() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(D, 8), nn.Tanh(), nn.Linear(8, K))


def _batches(x, y, size=20):
    return [(x[i : i + size], y[i : i + size]) for i in range(0, len(y), size)]


class _TupleBody(nn.Module):
    """Returns ``(constant, features)``: the features are not the first element."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(D, 8)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.zeros(x.shape[0], 1), torch.tanh(self.lin(x))


class _TupleNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(1)
        self.body, self.fc = _TupleBody(), nn.Linear(8, K)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.body(x)[1])


def test_p2_row_005_tuple_output_needs_an_explicit_select(data):
    x, y = data
    net = _TupleNet()
    with pytest.raises(TypeError, match=r"layer 'body' returned a tuple of 2 \(Tensor \(20, 1\), Tensor \(20, 8\)\)"):
        CollapseMonitor(net, K, layers=["body"]).measure(_batches(x, y))
    with torch.no_grad():
        H = torch.tanh(net.body.lin(x))
    ref = collapse_report(ClassStats.from_arrays(H.double().numpy(), y.numpy(), K))["nc1"]
    by_index = CollapseMonitor(net, K, layers=["body"], select={"body": 1}, track="full").measure(_batches(x, y))
    by_fn = CollapseMonitor(net, K, layers=["body"], select=lambda out: out[1], track="full").measure((x, y))
    assert by_index.value("body", "nc1") == pytest.approx(ref, rel=1e-10)
    assert by_fn.value("body", "nc1") == pytest.approx(ref, rel=1e-10)
    with pytest.raises(KeyError, match="select names"):
        CollapseMonitor(net, K, layers=["body"], select={"fc": 0}).measure((x, y))


class _Recurrent(nn.Module):
    """Batch-first data ``(B, T, D)`` through an ``nn.LSTM`` without ``batch_first``: its output is ``(T, B, H)``."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(2)
        self.rnn, self.fc = nn.LSTM(D, 16), nn.Linear(16, K)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.rnn(x.transpose(0, 1))
        return self.fc(out[-1])


def test_p2_row_008_batch_dimension_not_first_is_named(data):
    x, y = data
    seq = x[:, None, :].expand(N, 4, D).contiguous()  # T = 4 steps
    net = _Recurrent()
    mon = CollapseMonitor(net, K, layers=["rnn"], select={"rnn": 0})
    with pytest.raises(ValueError, match=r"layer 'rnn' output has shape \(4, 30, 16\), but the batch has 30 samples"):
        mon.measure(_batches(seq, y, 30))
    # the last step's hidden state (B, H), batch first: the classifier's input, measured with it
    fixed = CollapseMonitor(net, K, layers=["rnn"], select={"rnn": lambda o: o[0][-1]}, track="full")
    res = fixed.measure(_batches(seq, y, 30))
    with torch.no_grad():
        H = net.rnn(seq.transpose(0, 1))[0][-1]
    ref = collapse_report(ClassStats.from_arrays(H.double().numpy(), y.numpy(), K))
    assert res.stats["rnn"].N == N
    assert res.value("rnn", "nc1") == pytest.approx(ref["nc1"], rel=1e-9)


def test_p2_row_010_empty_data_is_named(data):
    mon = CollapseMonitor(_mlp(), K)
    for empty in ([], iter([])):
        with pytest.raises(ValueError, match="the data yielded no batch"):
            mon.measure(empty)


def test_p2_row_016_one_hot_labels_are_named(data):
    x, y = data
    with pytest.raises(ValueError, match=r"labels have shape \(20, 3\), one-hot rows \(n, K\): pass class indices"):
        CollapseMonitor(_mlp(), K).measure(_batches(x, F.one_hot(y, K)))


def test_p2_row_017_labels_on_the_meta_device_are_named(data):
    x, y = data
    with pytest.raises(ValueError, match="labels are on the 'meta' device"):
        CollapseMonitor(_mlp(), K).measure([(x, y.to("meta"))])


def test_p2_row_021_monitor_is_bound_to_its_model(data):
    x, y = data
    net, other = _mlp(), _mlp()
    mon = CollapseMonitor(net, K)
    mon.model = net  # the same model: nothing changes
    with pytest.raises(AttributeError, match="bound to the model it was built with"):
        mon.model = other
    assert mon.model is net
    direct = CollapseMonitor(net, K).measure((x, y)).reports
    assert mon.measure((x, y)).reports == direct


def test_p2_row_022_replaced_classifier_is_named(data):
    x, y = data
    net = _mlp()
    mon = CollapseMonitor(net, K)
    net[2] = nn.Linear(8, K)  # a new head, as in fine-tuning
    with pytest.raises(
        RuntimeError, match=r"the classifier '2' was replaced by another Linear in Sequential.*build a new"
    ):
        mon.measure((x, y))
    renewed = CollapseMonitor(net, K).measure((x, y))  # the fix the message gives
    assert renewed.missing == () and "self_duality" in renewed.reports["penultimate"]


class _Tied(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(3)
        self.inp, self.blk, self.fc = nn.Linear(D, 4), nn.Linear(4, 4), nn.Linear(4, K)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.blk(torch.tanh(self.blk(self.inp(x)))))  # the block applied twice


def test_p2_row_023_module_run_twice_per_forward_is_named(data):
    x, y = data
    with pytest.raises(ValueError, match=r"layer 'blk' \(Linear\) ran 2 times in one forward pass"):
        CollapseMonitor(_Tied(), K, layers=["blk"]).measure(_batches(x, y))


def test_p2_row_027_schedule_as_text_or_bool_is_refused():
    net = _mlp()
    for bad in ("10", "5", True, np.True_):
        with pytest.raises(TypeError, match="schedule must be a Schedule, an int"):
            CollapseMonitor(net, K, schedule=bad)
    every3 = CollapseMonitor(net, K, schedule=3)
    assert [e for e in range(10) if every3.due(e)] == [0, 3, 6, 9]
    at = CollapseMonitor(net, K, schedule=[2, np.int64(7)])
    assert [e for e in range(10) if at.due(e)] == [2, 7]
    again = CollapseMonitor(net, K, schedule=at.schedule)
    assert again.schedule is at.schedule


def test_p2_row_028_schedule_as_float_or_phrase_is_refused():
    net = _mlp()
    for bad in (2.5, "every 5", np.float64(3.0)):
        with pytest.raises(TypeError, match="schedule"):
            CollapseMonitor(net, K, schedule=bad)
    with pytest.raises(TypeError, match=r"schedule\[1\] must be an int, got 1.5"):
        CollapseMonitor(net, K, schedule=[1, 1.5])
    with pytest.raises(ValueError, match=r"schedule\[0\] must be an int >= 0, got -2"):
        CollapseMonitor(net, K, schedule=[-2])
    with pytest.raises(ValueError, match="schedule must be an int >= 1, got 0"):
        CollapseMonitor(net, K, schedule=0)


def test_p2_row_029_epoch_must_be_a_non_negative_int(data):
    x, y = data
    mon = CollapseMonitor(_mlp(), K)
    for bad, err in ((2.7, TypeError), ("3", TypeError), (True, TypeError), (-1, ValueError)):
        with pytest.raises(err, match="epoch must be an int"):
            mon.measure((x, y), epoch=bad)
        with pytest.raises(err, match="epoch must be an int"):
            mon.maybe_measure((x, y), epoch=bad)
    assert mon.rows == []  # nothing was measured or written
    res = mon.measure((x, y), epoch=np.int64(3))
    assert res.epoch == 3 and type(res.epoch) is int and {r.epoch for r in res.rows} == {3}


def test_p2_row_034_one_shot_iterator_is_read_once_and_refused_past_the_cache(data):
    x, y = data
    net = _mlp()
    calls = []
    net.register_forward_hook(lambda *_: calls.append(1))
    want = CollapseMonitor(net, K).measure(_batches(x, y, 10)).reports
    calls.clear()
    got = CollapseMonitor(net, K).measure(b for b in _batches(x, y, 10))  # a generator: one pass
    assert got.reports == want and len(calls) == 6  # the model ran once per batch: NCC read the kept features

    drawn = []

    def endless():  # a long stream (itertools.cycle would be endless): it must never be held in a list
        for i, batch in enumerate(itertools.islice(itertools.cycle(_batches(x, y, 10)), 200)):
            drawn.append(i)
            yield batch

    one_batch_mb = 10 * 8 * 4 / 2**20  # the penultimate features of one batch (10 rows, d = 8, float32)
    with pytest.raises(ValueError, match=r"one-shot iterator.*outgrew cache_mb=.*re-iterable"):
        CollapseMonitor(net, K, cache_mb=2.5 * one_batch_mb).measure(endless())
    assert len(drawn) == 3  # refused at the batch that did not fit
    with pytest.raises(ValueError, match="cache_mb=0 MiB in its first batch"):
        CollapseMonitor(net, K, cache_mb=0).measure(b for b in _batches(x, y))


def test_p2_row_038_num_classes_must_be_an_int_of_at_least_two():
    net = _mlp()
    for bad, err in ((2.7, TypeError), (3.0, TypeError), (True, TypeError), (1, ValueError), (-3, ValueError)):
        with pytest.raises(err, match="K must be an int"):
            CollapseMonitor(net, bad)
    assert CollapseMonitor(net, np.int64(3)).K == 3
