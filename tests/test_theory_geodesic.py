"""[Wang et al. 2024, Sec. III]: paired statistics, the geodesic closed forms, Thms 1-2, relative depth, transport."""

import warnings

import numpy as np
import pytest

from nclab.metrics import etf_gram_error, trace_ratio
from nclab.stats import ClassStats, NCCAccumulator, PairedClassStats, PathStats, relative_depth
from nclab.theory import geodesic_ncc, predict, procrustes_etf, s01
from nclab.theory.geodesic import endpoint_means, pfc1_slope_at_start

K, D = 4, 6


def _pair(rng, counts=(30, 30, 30, 30), sep0=1.0, sep1=2.5, offset=0.0):
    y = np.concatenate([np.full(n, k) for k, n in enumerate(counts)])
    rng.shuffle(y)
    H0 = sep0 * rng.normal(size=(K, D))[y] + rng.normal(size=(len(y), D)) + offset
    H1 = sep1 * rng.normal(size=(K, D))[y] + 0.6 * rng.normal(size=(len(y), D)) + 0.5 * H0 - offset
    return H0, H1, y


def _end_features(H0, H1, y, paired, end):
    if end == "measured":
        return H1
    _, _, mu1 = endpoint_means(paired, end)
    return mu1[y]


def _brute(H0, H1, y, t, weighting="balanced"):
    Ht = (1 - t) * H0 + t * H1
    st = ClassStats.from_arrays(Ht, y, K=K, track="light")
    acc = NCCAccumulator(st).update(Ht, y).compute()["ncc_accuracy"]
    return trace_ratio(st, weighting), etf_gram_error(st, weighting=weighting), acc


@pytest.mark.parametrize("end", ["measured", "class_means", "etf"])
def test_closed_forms_equal_brute_force_interpolation(rng, end):
    H0, H1, y = _pair(rng)
    paired = PairedClassStats(K, D)
    for s in range(0, len(y), 17):  # streamed in batches
        paired.update(H0[s : s + 17], H1[s : s + 17], y[s : s + 17])
    t = np.linspace(0, 1, 9)
    ncc = geodesic_ncc(paired, t, end=end)
    for s in range(0, len(y), 23):
        ncc.update(H0[s : s + 23], H1[s : s + 23], y[s : s + 23])
    pred = predict(paired, t, end=end, ncc=ncc)
    H1e = _end_features(H0, H1, y, paired, end)
    accs = []
    for i, ti in enumerate(t):
        p1, p2, p3 = _brute(H0, H1e, y, ti)
        if end != "measured" and ti == 1:
            assert p1 == 0 and pred.pfc1[i] == 0
        else:
            assert pred.pfc1[i] == pytest.approx(p1, rel=1e-10)
        assert pred.pfc2[i] == pytest.approx(p2, rel=1e-9, abs=1e-12)
        assert pred.pfc3[i] == p3  # exact counts
        accs.append(p3)
    assert min(accs) < 1.0  # the NCC check is not vacuous on these overlapping classes
    assert np.allclose(pred.ncc_error, 1 - pred.pfc3)


def test_empirical_weighting_on_imbalanced_classes(rng):
    H0, H1, y = _pair(rng, counts=(10, 40, 25, 15))
    paired = PairedClassStats.from_arrays(H0, H1, y)
    t = np.array([0.0, 0.3, 0.8, 1.0])
    pred = predict(paired, t, weighting="empirical")
    for i, ti in enumerate(t):
        p1, p2, _ = _brute(H0, H1, y, ti, weighting="empirical")
        assert pred.pfc1[i] == pytest.approx(p1, rel=1e-10)
        assert pred.pfc2[i] == pytest.approx(p2, rel=1e-9)


def test_paired_stats_cross_terms_merge_and_cancellation(rng):
    # nearly collapsed features far from the origin: raw second moments would lose every digit
    H0, H1, y = _pair(rng, offset=0.0)
    H0 = 1e6 + 1e-3 * H0
    H1 = -3e6 + 1e-3 * H1
    D0, D1 = H0 - 1e6, H1 + 3e6  # exact (Sterbenz): the reference works on the stored values, offset removed
    means0 = np.stack([D0[y == k].mean(0) for k in range(K)])
    means1 = np.stack([D1[y == k].mean(0) for k in range(K)])
    ref = np.array([np.sum((D0[y == k] - means0[k]) * (D1[y == k] - means1[k])) for k in range(K)])
    whole = PairedClassStats.from_arrays(H0, H1, y)
    assert np.allclose(whole.cross_within(), ref, rtol=1e-10, atol=0)
    a = PairedClassStats.from_arrays(H0[:50], H1[:50], y[:50], K=K)
    b = PairedClassStats.from_arrays(H0[50:], H1[50:], y[50:], K=K)
    a.merge(b)
    assert np.allclose(a.cross_within(), ref, rtol=1e-10, atol=0)
    assert a.N == len(y)
    assert a.coupling_cost() == pytest.approx(np.mean(np.sum((H1 - H0) ** 2, 1)), rel=1e-12)
    assert whole.trace_w_cross() == pytest.approx(ref.sum() / len(y), rel=1e-10)


def test_paired_stats_reject_bad_batches_without_side_effects(rng):
    H0, H1, y = _pair(rng)
    p = PairedClassStats.from_arrays(H0, H1, y)
    before = p.cross_within().copy()
    with pytest.raises(ValueError, match="same shape"):
        p.update(H0[:5], H1[:4], y[:5])
    bad = H1[:5].copy()
    bad[2, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        p.update(H0[:5], bad, y[:5])
    assert p.N == len(y) and p.end.N == len(y)
    assert np.array_equal(p.cross_within(), before)


def _collapsed_end_pair(rng, flip=False):
    """Random start, end = the Procrustes ETF (S01 > 0) or its negative (S01 < 0), collapsed."""
    y = np.repeat(np.arange(K), 20)
    H0 = rng.normal(size=(K, D))[y] + rng.normal(size=(len(y), D))
    st = ClassStats.from_arrays(H0, y)
    E = procrustes_etf(st.centered_means(), scale=3.0)
    E = -E if flip else E
    return H0, E[y] + 5.0, y


def test_theorem1_monotone_pfc1_when_s01_nonnegative(rng):
    for _ in range(10):
        H0, H1, y = _collapsed_end_pair(rng)
        paired = PairedClassStats.from_arrays(H0, H1, y)
        assert s01(paired) > 0
        t = np.linspace(0, 1, 201)
        pred = predict(paired, t)
        assert np.all(np.diff(pred.pfc1) < 0) and pred.pfc1[-1] == 0.0
        # Thm 1's derivative at t=0: -2 A0 S01 / (K B0^2) = the finite difference of the closed form
        c = pred.coefficients
        slope = pfc1_slope_at_start(paired)
        assert slope == pytest.approx(-2 * c["A0"] * s01(paired) / (K * c["B0"] ** 2), rel=1e-12)
        h = 1e-6
        fd = (predict(paired, [h]).pfc1[0] - predict(paired, [0.0]).pfc1[0]) / h
        assert fd == pytest.approx(slope, rel=1e-4)


def test_theorem1_converse_s01_negative_increases_near_start(rng):
    H0, H1, y = _collapsed_end_pair(rng, flip=True)
    paired = PairedClassStats.from_arrays(H0, H1, y)
    assert s01(paired) < 0
    assert pfc1_slope_at_start(paired) > 0
    pred = predict(paired, [0.0, 0.01, 0.05])
    assert pred.pfc1[1] > pred.pfc1[0] and pred.pfc1[2] > pred.pfc1[0]


def test_theorem2_procrustes_etf_end_gives_monotone_pfc2(rng):
    t = np.linspace(0, 1, 201)
    for _ in range(30):
        y = np.repeat(np.arange(K), 10)
        H0 = rng.normal(size=(K, D))[y] + rng.normal(size=(len(y), D))
        H1 = rng.normal(size=(len(y), D))  # measured end irrelevant: replaced by the ETF
        paired = PairedClassStats.from_arrays(H0, H1, y)
        pred = predict(paired, t, end="etf")
        assert np.all(np.diff(pred.pfc2) <= 1e-12)
        assert pred.pfc2[-1] <= 1e-7
        assert s01(paired, end="etf") > 0  # Procrustes ends satisfy Thm 1 automatically


def test_procrustes_etf_is_the_nearest_rotated_etf(rng):
    M = rng.normal(size=(K, D))
    M -= M.mean(0)
    E = procrustes_etf(M)
    assert etf_gram_error(E) <= 1e-12 and np.linalg.norm(E) == pytest.approx(np.linalg.norm(M))
    best = np.linalg.norm(M - E)
    for _ in range(50):
        Q, _ = np.linalg.qr(rng.normal(size=(D, D)))
        assert np.linalg.norm(M - E @ Q) >= best - 1e-12
    with pytest.raises(ValueError, match="d >= K - 1"):
        procrustes_etf(rng.normal(size=(6, 3)))


def test_relative_depth_and_path_stats(rng):
    L, n = 5, 40
    h0 = rng.normal(size=(n, D))
    h_end = rng.normal(size=(n, D))
    layers = [h0 + (l / L) * (h_end - h0) for l in range(L + 1)]  # equal steps on straight lines
    ps = PathStats(L + 1).update(layers[:]).merge(PathStats(L + 1))
    assert np.allclose(ps.relative_depth(), np.arange(L + 1) / L, atol=1e-14)
    assert ps.straightness_index() == pytest.approx(1.0, rel=1e-12)
    assert np.allclose(ps.kinetic_energy(), np.mean(np.sum((h_end - h0) ** 2, 1)) / L**2)
    # uneven speed: relative depth follows the path length, straightness drops below 1
    ts = np.array([0, 0.5, 0.6, 0.7, 0.9, 1.0])
    uneven = [h0 + s * (h_end - h0) for s in ts]
    ps2 = PathStats(L + 1).update(uneven)
    assert np.allclose(ps2.relative_depth(), ts, atol=1e-12)
    assert ps2.straightness_index() < 0.9
    # a detour: same ends, longer path
    bent = [*layers[:3], layers[3] + 1.0, *layers[4:]]
    assert PathStats(L + 1).update(bent).straightness_index() < 1.0
    assert np.allclose(relative_depth(np.ones((3, 7))), [0, 1 / 3, 2 / 3, 1])
    with pytest.raises(ValueError, match="undefined"):
        relative_depth([0.0, 0.0])
    with pytest.raises(ValueError, match=">= 0"):
        relative_depth([1.0, -1.0])


def test_predict_errors(rng):
    H0, H1, y = _pair(rng)
    paired = PairedClassStats.from_arrays(H0, H1, y)
    with pytest.raises(ValueError, match="end must be"):
        predict(paired, [0.5], end="ideal")  # type: ignore[arg-type]
    ncc = geodesic_ncc(paired, [0.0, 1.0]).update(H0, H1, y)
    with pytest.raises(ValueError, match="different end variant or t_grid"):
        predict(paired, [0.0, 0.5], ncc=ncc)
    with pytest.raises(ValueError, match="no sample"):
        geodesic_ncc(paired, [0.0]).accuracy()
    with pytest.raises(ValueError, match="empty"):
        predict(PairedClassStats(K, D), [0.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert predict(paired, [0.0]).pfc3 is None
