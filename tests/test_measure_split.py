"""nclab.measure.measure_split: the numbers of one measurement against a brute-force reference built from the same
features, and independence from how the pass is cut (cached vs streamed features, batch size)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nclab.data import load
from nclab.io.run_table import OUTPUT_LAYER
from nclab.measure import MeasurePlan, collect_features, measure_split
from nclab.metrics import collapse_report, ncc_metrics
from nclab.nets import build_model
from nclab.stats import ClassStats


@pytest.fixture(scope="module")
def setup():
    torch.manual_seed(0)
    data = load("digits", "train", per_class=30)
    test = load("digits", "test", per_class=12)
    model = build_model("mlp", data.input_shape, 10, widths=[24, 20, 16], batchnorm=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for _ in range(15):  # a few steps, so that BN running statistics and the head are not at initialisation
        loss = torch.nn.functional.cross_entropy(model(data.x), data.y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model, data, test


def _rows(res):
    return {(lay, met): v for lay, met, v in res.rows}


def _loss(out, y, h):
    return torch.nn.functional.cross_entropy(out, y)


def _measure(model, x, y, K=10, reference=None, **options):
    """measure_split of the plan MeasurePlan.of builds for ``model`` with ``options``."""
    plan = MeasurePlan.of(model, K, penultimate=model.penultimate_name, **options)
    return measure_split(model, (x, y), plan, reference=reference)


def test_measure_split_equals_a_brute_force_report(setup):
    model, data, _ = setup
    res = _measure(model, data.x, data.y, loss_fn=_loss)
    feats = collect_features(model, data.x)
    W = model.head.weight.detach().double().numpy()
    b = model.head.bias.detach().double().numpy()
    got = _rows(res)
    for name, H in feats.items():
        pen = name == model.penultimate_name
        track = "full" if pen else "light"
        ref_stats = ClassStats.from_arrays(H.double().numpy(), data.y.numpy(), 10, track=track)
        ncc = ncc_metrics(ref_stats, H, data.y, W=W if pen else None, b=b if pen else None)
        ref = collapse_report(ref_stats, W=W if pen else None, b=b if pen else None, ncc=ncc)
        assert set(ref) == {met for lay, met in got if lay == name}
        for met, v in ref.items():
            assert got[(name, met)] == pytest.approx(v, rel=1e-9, abs=1e-12), (name, met)
    with torch.no_grad():
        model.eval()
        out = model(data.x)
        model.train()
    assert got[(OUTPUT_LAYER, "error")] == pytest.approx(float((out.argmax(1) != data.y).double().mean()))
    assert got[(OUTPUT_LAYER, "loss")] == pytest.approx(float(_loss(out, data.y, None)), rel=1e-6)


def test_held_out_split_uses_the_training_means_for_ncc(setup):
    model, data, test = setup
    train_res = _measure(model, data.x, data.y)
    res = _measure(model, test.x, test.y, reference=train_res.stats)
    got = _rows(res)
    feats = collect_features(model, test.x)
    for name, H in feats.items():
        means = train_res.stats[name].means
        d2 = ((H.double().numpy()[:, None, :] - means[None]) ** 2).sum(-1)
        acc = float(np.mean(d2.argmin(1) == test.y.numpy()))
        assert got[(name, "ncc_accuracy")] == pytest.approx(acc, abs=1e-15)
        # variability metrics use the split's own statistics
        own = ClassStats.from_arrays(H.double().numpy(), test.y.numpy(), 10, track="light")
        assert got[(name, "trace_ratio")] == pytest.approx(collapse_report(own)["trace_ratio"], rel=1e-9)


@pytest.mark.parametrize(
    ("batch_size", "cache_mb"),
    [
        (1024, 0.0),  # every layer streamed, NCC by a second forward pass
        (1024, 30 * 24 * 4 * 10 / 2**20),  # room for the first layer only: overflow after batch one
        (7, 0.0),  # many batches streamed
        (7, 30 * 24 * 4 * 10 / 2**20),
    ],
)
def test_result_does_not_depend_on_caching(setup, batch_size, cache_mb):
    """Cached (one update per layer) and streamed (one per batch) statistics agree to float64 rounding. The
    batch size is the same on both sides: a different one changes the float32 features themselves."""
    model, data, _ = setup

    def rows(**kw):
        return _rows(_measure(model, data.x, data.y, loss_fn=_loss, batch_size=batch_size, **kw))

    ref, got = rows(), rows(cache_mb=cache_mb)
    assert set(got) == set(ref)
    for key, v in ref.items():
        assert got[key] == pytest.approx(v, rel=1e-9, abs=1e-12), key


def test_geodesic_rows_match_the_in_memory_profile_and_the_measured_ends():
    """measure_split(geodesic=True) on an FC ResNet: per layer relative depth and the straight line's PFC1-3 equal
    nclab.theory's in-memory profile of the same features, and at t = 0 and t = 1 the measured metrics."""
    from nclab.theory.geodesic import geodesic_profile

    torch.manual_seed(1)
    data = load("digits", "train", per_class=20)
    model = build_model("fc_resnet", data.input_shape, 10, width=12, num_blocks=3)
    res = _measure(model, data.x, data.y, geodesic=True)
    got = _rows(res)
    feats = collect_features(model, data.x)
    names = list(feats)
    prof = geodesic_profile([feats[n].double() for n in names], data.y, 10, batch_size=37)
    pred = prof.predictions["measured"]
    for i, n in enumerate(names):
        assert got[(n, "relative_depth")] == pytest.approx(prof.relative_depth[i], rel=1e-12)
        for k in ("pfc1", "pfc2", "pfc3"):
            assert got[(n, f"geodesic_{k}")] == pytest.approx(getattr(pred, k)[i], rel=1e-9, abs=1e-12)
    assert prof.relative_depth[0] == 0 and prof.relative_depth[-1] == pytest.approx(1.0)
    assert np.all(np.diff(prof.relative_depth) > 0)
    for n in (names[0], names[-1]):  # the line starts and ends at the measured features
        assert got[(n, "geodesic_pfc1")] == pytest.approx(got[(n, "trace_ratio")], rel=1e-9)
        assert got[(n, "geodesic_pfc2")] == pytest.approx(got[(n, "etf_gram_error")], rel=1e-9)
        assert got[(n, "geodesic_pfc3")] == pytest.approx(got[(n, "ncc_accuracy")], abs=1e-15)
    assert got[(OUTPUT_LAYER, "geodesic_s01")] == pytest.approx(prof.s01, rel=1e-12)
    assert got[(OUTPUT_LAYER, "straightness_index")] == pytest.approx(prof.straightness_index, rel=1e-12)
    assert 0 < prof.straightness_index <= 1


def test_geodesic_is_skipped_with_a_message_when_it_does_not_apply(setup):
    model, data, _ = setup  # MLP 24 / 20 / 16: no two leading layers share a dimension
    res = _measure(model, data.x, data.y, geodesic=True)
    assert not any(m.startswith("geodesic") for _, m, _ in res.rows)
    assert any("geodesic: skipped (needs at least two" in w for w in res.warnings)
    res = _measure(model, data.x, data.y, geodesic=True, cache_mb=0)
    assert any("geodesic: skipped (the split's features exceed" in w for w in res.warnings)


def test_geodesic_failure_is_a_warning_not_an_abort():
    """An empty class (labels 0..2 of K = 4) skips the geodesic rows with a message, as it skips other metrics."""
    torch.manual_seed(2)
    data = load("digits", "train", per_class=10)
    keep = data.y < 3
    model = build_model("fc_resnet", data.input_shape, 4, width=8, num_blocks=2)
    res = _measure(model, data.x[keep], data.y[keep], 4, geodesic=True)
    assert any(w.startswith("geodesic: skipped") for w in res.warnings)
    assert not any(m.startswith("geodesic") for _, m, _ in res.rows)
