"""nclab.measure's small parts: the loss and error counts as an accumulator (against plain Python sums, merged,
saved, all-reduced over 2 gloo processes), the one classifier finder's rules, and eval_mode's per-module
restore."""

from __future__ import annotations

import math
import os

import pytest
import torch
import torch.multiprocessing as mp
from torch import nn

from nclab.measure import PassCounts, eval_mode, find_classifier
from nclab.stats import Accumulator
from tests._distributed import free_port, gloo_group

K = 4


def _batches():
    g = torch.Generator().manual_seed(11)
    out = []
    for n in (7, 13, 1, 9):
        out.append((torch.randn(n, K, generator=g), torch.randint(0, K, (n,), generator=g)))
    return out


def _reference(batches):
    """The sums as the measurement kept them before: Python ints and floats, batch by batch."""
    wrong = scored = seen = 0
    loss_sum = 0.0
    for out, y in batches:
        n = len(y)
        seen += n
        wrong += int((out.argmax(1) != y).sum())
        scored += n
        loss_sum += float(nn.functional.cross_entropy(out, y)) * n
    return wrong, scored, seen, loss_sum


def _feed(counts, batches):
    for out, y in batches:
        counts.update(out, y, nn.functional.cross_entropy(out, y))
    return counts


def test_pass_counts_equal_python_sums_bit_for_bit():
    batches = _batches()
    wrong, scored, seen, loss_sum = _reference(batches)
    c = _feed(PassCounts(), batches)
    assert (c.seen, c.scored) == (seen, scored)
    assert c.error == wrong / scored
    assert c.loss == loss_sum / seen  # float64 products and sums in the same order: the same digits
    not_logits = PassCounts().update(torch.zeros(5), torch.arange(5) % K)  # outputs that are no logit rows
    assert (not_logits.seen, not_logits.scored) == (5, 0) and math.isnan(not_logits.error)
    assert math.isnan(PassCounts().loss)


def test_pass_counts_merge_and_files_round_trip(tmp_path):
    batches = _batches()
    whole = _feed(PassCounts(), batches)
    halves = _feed(PassCounts(), batches[:2]).merge(_feed(PassCounts(), batches[2:]))
    assert (halves.seen, halves.scored, halves.error) == (whole.seen, whole.scored, whole.error)
    assert halves.loss == pytest.approx(whole.loss, rel=1e-15)
    back = Accumulator.load(whole.save(tmp_path / "counts.npz"))
    assert isinstance(back, PassCounts) and back.state_dict()["state"].keys() == whole.state_dict()["state"].keys()
    assert (back.seen, back.error, back.loss) == (whole.seen, whole.error, whole.loss)
    sd = whole.state_dict()
    sd["state"]["wrong"] = sd["state"]["scored"] + 1
    with pytest.raises(ValueError, match="wrong <= scored <= seen"):
        PassCounts().load_state_dict(sd)


def _worker(rank, world, port, out_dir):
    with gloo_group(rank, world, port):
        batches = _batches()
        c = _feed(PassCounts(), batches[rank::world]).all_reduce()
        with open(os.path.join(out_dir, f"rank{rank}.txt"), "w") as fh:
            fh.write(repr((c.seen, c.scored, c.error, c.loss)))


@pytest.mark.distributed
def test_pass_counts_all_reduce_equals_one_process(tmp_path):
    mp.spawn(_worker, args=(2, free_port(), str(tmp_path)), nprocs=2, join=True)
    whole = _feed(PassCounts(), _batches())
    for rank in range(2):
        seen, scored, error, loss = eval((tmp_path / f"rank{rank}.txt").read_text())
        assert (seen, scored, error) == (whole.seen, whole.scored, whole.error)
        assert loss == pytest.approx(whole.loss, rel=1e-15)


class _Headed(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body, self.fc, self.head = nn.Linear(3, 5), nn.Linear(5, K), nn.Linear(5, 2)


def test_find_classifier_rules():
    net = nn.Sequential(nn.Linear(3, K), nn.ReLU(), nn.Linear(K, K))
    assert find_classifier(net, K).name == "2"  # the last Linear with K outputs
    assert find_classifier(net) is None  # without K only a head counts
    assert find_classifier(net, K, False) is None
    headed = _Headed()
    assert find_classifier(headed, K).name == "head"  # model.head first, whatever K
    by_param = find_classifier(headed, K, "fc.weight")
    assert by_param.name == "fc" and by_param.module is headed.fc
    assert (by_param.W == headed.fc.weight.detach().double().numpy()).all()
    pair = find_classifier(headed, K, (torch.ones(K, 5), None))
    assert pair.name == "(W, b)" and pair.b is None and pair.refreshed() is pair
    assert find_classifier(headed, K, headed.fc).name == "fc"
    with pytest.raises(KeyError, match="neither a module nor a parameter"):
        find_classifier(headed, K, "nope")
    with pytest.raises(TypeError, match="classifier must be"):
        find_classifier(headed, K, 3)
    with torch.no_grad():
        headed.fc.weight.add_(1.0)
    assert (by_param.refreshed().W == headed.fc.weight.detach().double().numpy()).all()


def test_eval_mode_restores_each_module_and_survives_errors():
    net = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2), nn.Dropout(0.5))
    net[1].eval()  # a frozen batch norm inside a training model
    with pytest.raises(RuntimeError, match="inside"), eval_mode(net):
        assert not any(m.training for m in net.modules())
        raise RuntimeError("inside")
    assert net.training and net[2].training and not net[1].training


class _Pair(nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x[:, :1], 2.0 * x


class _PairNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.pair, self.fc = _Pair(), nn.Linear(3, K)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.pair(x)[1])


def test_select_picks_a_tuple_element_and_refuses_what_it_cannot_pick():
    from nclab.measure import collect_features

    net, x = _PairNet(), torch.randn(6, 3)
    assert torch.equal(collect_features(net, x, ["pair"], select={"pair": 1})["pair"], 2.0 * x)
    assert torch.equal(collect_features(net, x, ["pair"], select=-2)["pair"], x[:, :1])  # one selector for all
    assert torch.equal(collect_features(net, x, ["pair"], select=lambda o: o[0] + o[1])["pair"], x[:, :1] + 2 * x)
    with pytest.raises(TypeError, match=r"returned a tuple of 2 \(Tensor \(6, 1\), Tensor \(6, 3\)\)"):
        collect_features(net, x, ["pair"])
    with pytest.raises(ValueError, match=r"select=\{'pair': 2\} indexes a tuple output that has an element 2"):
        collect_features(net, x, ["pair"], select={"pair": 2})
    with pytest.raises(TypeError, match=r"must be an int .* or a callable"):
        collect_features(net, x, ["pair"], select={"pair": True})
    with pytest.raises(TypeError, match=r"gave a str at layer 'pair', not a tensor"):
        collect_features(net, x, ["pair"], select=lambda o: "no")
    with pytest.raises(KeyError, match="select names"):
        collect_features(net, x, ["pair"], select={"fc": 0})
