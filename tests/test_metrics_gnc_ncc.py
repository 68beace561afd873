"""GNC1/GNC3 on normalised features, GNC2 of the classifier [Jiang et al. 2024] and the streaming NCC / NC4 accumulator
([Wang et al. 2024; Han et al. 2022])."""

import warnings

import numpy as np
import pytest
import torch
from scipy.optimize import nnls

from nclab.geometry import codes
from nclab.geometry.frames import (
    cross_polytope_subset,
    icosahedron,
    octahedron,
    random_orthogonal,
    regular_polygon,
    simplex_etf,
)
from nclab.metrics import DegenerateMetricWarning, MetricOmittedWarning, collapse_report
from nclab.metrics._registry import REGISTRY, collapse_direction
from nclab.metrics.gnc import (
    check_normalized_stats,
    gnc1,
    gnc2,
    gnc2_margin,
    gnc2_ratio,
    gnc3,
    normalize_features,
)
from nclab.metrics.ncc import ncc_metrics
from nclab.stats import ClassStats, EmptyClassError, NCCAccumulator


def _data(rng, K=4, d=6, n=25, spread=1.0, offset=0.0, imbalanced=False):
    mu = rng.normal(size=(K, d)) * 2 + offset
    y = np.concatenate([np.full(n + (5 * k if imbalanced else 0), k) for k in range(K)])
    rng.shuffle(y)
    return mu[y] + spread * rng.normal(size=(len(y), d)), y


# ---------------------------------------------------------------------------------------------- normalisation


def test_normalize_features_numpy_and_torch(rng):
    H = rng.normal(size=(10, 5)) * 7
    H[3] = 0.0
    for arr in (H, H.astype(np.float32)):
        out = normalize_features(arr)
        assert isinstance(out, np.ndarray) and out.dtype == arr.dtype
        norms = np.linalg.norm(out.astype(np.float64), axis=1)
        np.testing.assert_allclose(np.delete(norms, 3), 1.0, rtol=1e-6)
        assert norms[3] == 0.0  # a zero row has no direction and stays zero
    for dt in (torch.float64, torch.float32, torch.float16, torch.bfloat16):
        t = torch.from_numpy(H).to(dt)
        out = normalize_features(t)
        assert isinstance(out, torch.Tensor) and out.dtype == dt and out.shape == t.shape
        norms = torch.linalg.vector_norm(out.double(), dim=1).numpy()
        np.testing.assert_allclose(np.delete(norms, 3), 1.0, rtol=1e-2)
        assert norms[3] == 0.0
    np.testing.assert_allclose(normalize_features(np.array([[3, 4]])), [[0.6, 0.8]])
    with pytest.raises(TypeError, match="floating"):
        normalize_features(torch.ones(2, 2, dtype=torch.int64))


# ---------------------------------------------------------------------------------------------- GNC1


def _brute_gnc1(Hn, y, K, center, weighting="balanced"):
    N, d = Hn.shape
    mu = np.stack([Hn[y == k].mean(0) for k in range(K)])
    sw = np.zeros((d, d))
    for h, k in zip(Hn, y, strict=True):
        sw += np.outer(h - mu[k], h - mu[k])
    sw /= N
    w = np.full(K, 1 / K) if weighting == "balanced" else np.bincount(y, minlength=K) / N
    B = mu - w @ mu if center else mu
    sb = sum(wk * np.outer(m, m) for wk, m in zip(w, B, strict=True))
    return np.trace(sw @ np.linalg.pinv(sb, rcond=1e-10, hermitian=True)) / K


@pytest.mark.parametrize("center", [False, True])
def test_gnc1_weighting_on_imbalanced_normalised_features(center, rng):
    # class sizes 40, 10, 25, 5: balanced (1/K) and empirical (n_k/N) weights of Sigma_B differ
    K, d = 4, 6
    y = np.repeat(np.arange(K), [40, 10, 25, 5])
    Hn = normalize_features(3 * rng.normal(size=(K, d))[y] + rng.normal(size=(y.size, d)))
    stats = ClassStats.from_arrays(Hn, y, K=K)
    got = {wt: gnc1(stats, center=center, weighting=wt) for wt in ("balanced", "empirical")}
    for wt, value in got.items():
        assert value == pytest.approx(_brute_gnc1(Hn, y, K, center, wt), rel=1e-10), wt
    assert abs(got["balanced"] / got["empirical"] - 1) > 0.05


@pytest.mark.parametrize("K,d", [(4, 6), (10, 3), (3, 3)])
@pytest.mark.parametrize("center", [False, True])
def test_gnc1_matches_brute_force_on_normalised_features(K, d, center, rng):
    H, y = _data(rng, K=K, d=d, spread=0.7)
    Hn = normalize_features(H)
    stats = ClassStats.from_arrays(Hn, y)
    assert gnc1(stats, center=center) == pytest.approx(_brute_gnc1(Hn, y, K, center), rel=1e-10)
    # streaming in float32 torch batches gives the same statistics of the same (float32) features
    Ht = torch.from_numpy(Hn.astype(np.float32))
    s32 = ClassStats(K, d)
    for i in range(0, len(y), 17):
        s32.update(Ht[i : i + 17], torch.from_numpy(y[i : i + 17]))
    ref = _brute_gnc1(Ht.double().numpy(), y, K, center)
    assert gnc1(s32, center=center) == pytest.approx(ref, rel=1e-8)


def test_gnc1_uncentred_differs_from_centred_unless_means_average_to_zero(rng):
    H, y = _data(rng, K=4, d=6, offset=1.0)
    stats = ClassStats.from_arrays(normalize_features(H), y)
    assert abs(gnc1(stats) - gnc1(stats, center=True)) > 1e-3
    # a regular K-gon of class directions (mean zero) with symmetric noise: both forms agree
    K = 5
    t = 2 * np.pi * np.arange(K) / K
    dirs = np.stack([np.cos(t), np.sin(t)], axis=1)
    rot = np.array([[np.cos(0.1), -np.sin(0.1)], [np.sin(0.1), np.cos(0.1)]])
    pts = np.concatenate([dirs, dirs @ rot.T, dirs @ rot])  # +-0.1 rad jitter: class means stay on the K-gon
    yy = np.tile(np.arange(K), 3)
    s = ClassStats.from_arrays(pts, yy)
    assert gnc1(s) == pytest.approx(gnc1(s, center=True), rel=1e-10)
    assert gnc1(s) > 0


def test_gnc1_zero_when_collapsed_and_grows_with_noise(rng):
    K, d = 12, 3  # GNC regime: K > d + 1
    W = normalize_features(rng.normal(size=(K, d)))
    y = np.repeat(np.arange(K), 4)
    assert gnc1(ClassStats.from_arrays(W[y], y)) == pytest.approx(0.0, abs=1e-12)
    vals = []
    for sigma in (1e-3, 1e-2):
        Hn = normalize_features(W[y] + sigma * rng.normal(size=(len(y), d)))
        vals.append(gnc1(ClassStats.from_arrays(Hn, y)))
    assert 0 < vals[0] < vals[1]
    assert vals[1] / vals[0] == pytest.approx(100, rel=0.5)  # ~ sigma^2


def test_gnc1_rejects_raw_features(rng):
    H, y = _data(rng)
    raw = ClassStats.from_arrays(H, y)
    with pytest.raises(ValueError, match="L2-normalised features"):
        gnc1(raw)
    with pytest.raises(ValueError, match="normalize_features"):
        check_normalized_stats(raw)
    # features with unit norm on average but varying norms are caught by the unit-sum condition
    Hn = normalize_features(H) * rng.choice([0.5, np.sqrt(1.75)], size=(len(y), 1))
    with pytest.raises(ValueError, match="do not look"):
        gnc1(ClassStats.from_arrays(Hn, y))
    # check=False computes the formula anyway: the brute-force value on the raw features
    assert gnc1(raw, check=False) == pytest.approx(_brute_gnc1(H, y, int(y.max()) + 1, center=False), rel=1e-8)
    # normalised stats pass, also when normalised in half precision
    check_normalized_stats(ClassStats.from_arrays(normalize_features(torch.from_numpy(H).half()), y))
    with pytest.raises(TypeError, match="ClassStats"):
        gnc1(H)


def test_gnc1_degenerate_and_light(rng):
    # every class mean is zero (antipodal pairs): Sigma_B = 0, no class separation: inf (as nc1)
    H = np.array([[1.0, 0], [-1.0, 0], [0, 1.0], [0, -1.0]])
    y = np.array([0, 0, 1, 1])
    assert gnc1(ClassStats.from_arrays(H, y)) == np.inf
    assert gnc1(ClassStats.from_arrays(H, y), center=True) == np.inf
    # all features identical: uncentred GNC1 = 0 (no within-class spread); centred Sigma_B is rounding noise
    same = ClassStats.from_arrays(np.tile([[0.6, 0.8]], (6, 1)), np.arange(6) % 3)
    assert gnc1(same) == pytest.approx(0.0, abs=1e-14)
    assert gnc1(same, center=True) == np.inf
    Hn = normalize_features(rng.normal(size=(9, 3)))
    light = ClassStats.from_arrays(Hn, np.arange(9) % 3, track="light")
    with pytest.raises(ValueError, match="track='full'"):
        gnc1(light)
    empty = ClassStats.from_arrays(Hn, np.arange(9) % 3, K=4)
    with pytest.raises(EmptyClassError, match="drop_empty"):
        gnc1(empty)


# ---------------------------------------------------------------------------------------------- GNC3


def test_gnc3_matches_brute_force(rng):
    K, d = 5, 4
    H, y = _data(rng, K=K, d=d, offset=0.5)
    W = rng.normal(size=(K, d)) * 3
    ref = 0.0
    for k in range(K):
        hb = np.mean([h / np.linalg.norm(h) for h in H[y == k]], axis=0)  # mean of unit features, not renormalised
        ref += 1 - W[k] @ hb / np.linalg.norm(W[k])
    ref /= K
    raw = ClassStats.from_arrays(H, y)
    unit = ClassStats.from_arrays(normalize_features(H), y)
    assert gnc3(raw, W=W) == pytest.approx(ref, rel=1e-10)
    assert gnc3(unit, W=W) == pytest.approx(ref, rel=1e-10)  # same from raw or normalised statistics
    assert gnc3(raw, W=torch.from_numpy(W)) == pytest.approx(ref, rel=1e-10)
    cos = np.mean(
        [1 - W[k] @ raw.unit_sums[k] / (np.linalg.norm(W[k]) * np.linalg.norm(raw.unit_sums[k])) for k in range(K)]
    )
    assert gnc3(raw, W=W, renormalize_means=True) == pytest.approx(cos, rel=1e-10)
    Wn = normalize_features(W)
    assert gnc3(raw, W=Wn, normalize_w=False) == pytest.approx(ref, rel=1e-10)
    assert gnc3(raw, W=W, normalize_w=False) != pytest.approx(ref, rel=1e-3)


def test_gnc3_zero_when_collapsed_and_aligned(rng):
    K, d = 9, 3
    W = normalize_features(rng.normal(size=(K, d)))
    y = np.repeat(np.arange(K), 3)
    stats = ClassStats.from_arrays(4.0 * W[y], y)  # raw features: any positive scale
    assert gnc3(stats, W=W) == pytest.approx(0.0, abs=1e-14)
    assert gnc3(stats, W=10 * W) == pytest.approx(0.0, abs=1e-14)
    assert gnc3(stats, W=-W) == pytest.approx(2.0)
    # within-class spread keeps GNC3 > 0 even with aligned directions (hbar_k is not renormalised)
    Hs = np.concatenate([W[y] + 0.3 * rng.normal(size=(len(y), d)) for _ in range(4)])
    ys = np.tile(y, 4)
    s2 = ClassStats.from_arrays(Hs, ys)
    hb = s2.unit_sums / s2.counts[:, None]
    assert gnc3(s2, W=hb) == pytest.approx(np.mean(1 - np.linalg.norm(hb, axis=1)), rel=1e-10)
    assert gnc3(s2, W=hb) > 1e-3
    assert gnc3(s2, W=hb, renormalize_means=True) == pytest.approx(0.0, abs=1e-14)


def test_gnc3_degenerate(rng):
    stats = ClassStats.from_arrays(rng.normal(size=(9, 3)), np.arange(9) % 3)
    W = rng.normal(size=(3, 3))
    W[1] = 0
    with pytest.warns(DegenerateMetricWarning, match="rows 1"):
        assert np.isnan(gnc3(stats, W=W))
    with pytest.raises(ValueError, match="shape"):
        gnc3(stats, W=np.ones((3, 2)))
    with pytest.raises(EmptyClassError):
        gnc3(ClassStats.from_arrays(rng.normal(size=(9, 3)), np.arange(9) % 3, K=4), W=np.ones((4, 3)))


# ---------------------------------------------------------------------------------------------- GNC2


def _brute_rho(W):
    """min_k dist(u_k, conv{u_j : j != k}) of the unit rows u, each by NNLS with the simplex constraint appended
    as a heavily weighted row (an independent method: no Wolfe, no pruning)."""
    U = W / np.linalg.norm(W, axis=1, keepdims=True)
    big = 1e4
    dists = []
    for k in range(len(U)):
        A = np.delete(U, k, axis=0)
        v, _ = nnls(np.vstack([A.T, big * np.ones(len(A))]), np.append(U[k], big))
        dists.append(np.linalg.norm(U[k] - v @ A))
    return min(dists)


def test_gnc2_is_the_margin_of_the_unit_rows(rng):
    for K, d in ((9, 3), (12, 4), (6, 5)):
        W = rng.normal(size=(K, d)) * rng.uniform(0.1, 10.0, size=(K, 1))
        ref = _brute_rho(W)
        assert gnc2(W) == pytest.approx(ref, rel=1e-7)
        # invariant to rotations and to positive rescaling of each row; torch in, the same number out
        Q = random_orthogonal(d, rng)
        assert gnc2(3.0 * W @ Q.T) == pytest.approx(gnc2(W), rel=1e-12)
        assert gnc2(torch.from_numpy(W)) == gnc2(W)
    assert gnc2(np.vstack([np.eye(3), np.eye(3)[:1]])) == 0.0  # two classes share a direction
    Wz = rng.normal(size=(5, 3))
    Wz[2] = 0.0
    with pytest.warns(DegenerateMetricWarning, match="rows 2"):
        assert np.isnan(gnc2(Wz))


@pytest.mark.parametrize(
    "W, rho",
    [
        (simplex_etf(4, 3), 4 / 3),  # K = d + 1
        (regular_polygon(5), 1 - np.cos(2 * np.pi / 5)),
        (regular_polygon(30), 1 - np.cos(2 * np.pi / 30)),
        (octahedron(), 1.0),  # d + 1 < K <= 2d
        (cross_polytope_subset(7, 4), 1.0),
        (icosahedron(), 1 - 1 / np.sqrt(5)),  # the best known (3, 12) code
    ],
)
def test_gnc2_ratio_is_one_on_the_best_known_codes(W, rho):
    W = 2.5 * W @ random_orthogonal(W.shape[1], 0).T
    assert gnc2(W) == pytest.approx(rho, abs=1e-12)
    assert gnc2_ratio(W) == pytest.approx(1.0, abs=1e-12)
    # off the code: a smaller margin, and the ratio is gnc2 / rho* exactly
    V = W + 0.05 * np.random.default_rng(1).normal(size=W.shape)
    g = gnc2_margin(V)
    assert g.ratio == gnc2(V) / rho and g.ratio < 1 - 1e-3 and g.note is None and g.reference.rho == rho


def test_gnc2_ratio_of_a_searched_code_searches_once(monkeypatch):
    # (d, K) = (4, 9): no closed form (K > 2d), small enough (K d = 36) for the cached search
    calls = []
    real = codes.softmax_code_search

    def counted(d, K, **kw):
        calls.append((d, K))
        return real(d, K, **kw)

    monkeypatch.setattr(codes, "softmax_code_search", counted)
    W = counted(4, 9).W  # the code the cached search finds (same seed, same settings)
    assert gnc2_ratio(W) == pytest.approx(1.0, abs=1e-9)
    assert gnc2_ratio(W @ random_orthogonal(4, 2).T) == pytest.approx(1.0, abs=1e-9)
    g = gnc2_margin(W)
    assert g.reference.proven is False and "softmax_code_search(4, 9)" in g.reference.source
    assert calls == [(4, 9), (4, 9)]  # ours, then the cache's once; every later ratio reads the cache


def test_gnc2_ratio_is_omitted_with_a_note_beyond_the_search_bound(rng, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a measurement ran the code search")

    monkeypatch.setattr(codes, "softmax_code_search", refuse)
    W = rng.normal(size=(60, 5))  # K d = 300: no closed form, no table entry
    g = gnc2_margin(W)
    assert g.value == pytest.approx(_brute_rho(W), rel=1e-7) and g.ratio is None and g.reference is None
    assert "(K, d) = (60, 5)" in g.note and "K d = 300 > 40" in g.note
    with pytest.raises(ValueError, match=r"gnc2_ratio omitted: .*\(60, 5\)"):
        gnc2_ratio(W)
    # search=False never searches, even for small problems
    assert gnc2_margin(rng.normal(size=(9, 4)), search=False).ratio is None
    # d = 1: the optimum is 0, so the ratio is undefined
    g1 = gnc2_margin(np.array([[1.0], [-1.0], [2.0]]))
    assert g1.value == 0.0 and g1.ratio is None and "is 0" in g1.note


@pytest.mark.filterwarnings("ignore::nclab.metrics.TargetUnattainableWarning")  # K > d + 1, as intended
def test_gnc2_in_collapse_report_only_when_K_exceeds_d(rng):
    K, d = 7, 3
    y = np.repeat(np.arange(K), 5)
    W = rng.normal(size=(K, d))
    stats = ClassStats.from_arrays(W[y] + 0.1 * rng.normal(size=(len(y), d)), y, track="light")
    rep = collapse_report(stats, W=W)
    assert rep["gnc2"] == gnc2(W)
    assert rep["gnc2_ratio"] == gnc2_ratio(W)
    assert rep["gnc2_ratio"] == pytest.approx(rep["gnc2"] / 0.7898616872693967, rel=1e-9)  # Softmax Code (3, 7)
    assert "gnc2" not in collapse_report(stats)  # no classifier
    y4 = np.repeat(np.arange(4), 5)
    small = ClassStats.from_arrays(rng.normal(size=(20, 4)), y4, track="light")
    assert not {"gnc2", "gnc2_ratio"} & set(collapse_report(small, W=rng.normal(size=(4, 4))))  # K <= d


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::nclab.metrics.TargetUnattainableWarning")  # K > d + 1, as intended
def test_measurement_at_large_K_and_d_never_searches(rng, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a measurement ran the code search")

    monkeypatch.setattr(codes, "softmax_code_search", refuse)
    K, d = 1000, 64
    y = np.repeat(np.arange(K), 2)
    W = rng.normal(size=(K, d))
    stats = ClassStats.from_arrays(W[y] + 0.1 * rng.normal(size=(len(y), d)), y, track="light")
    with pytest.warns(MetricOmittedWarning, match=r"\(K, d\) = \(1000, 64\)") as record:
        rep = collapse_report(stats, W=W)
    assert "gnc2_ratio" not in rep and 0.0 < rep["gnc2"] <= 2.0
    assert [w.filename for w in record if w.category is MetricOmittedWarning] == [__file__]  # names the caller


def test_gnc2_is_left_out_of_reports_beyond_its_class_bound(rng, monkeypatch):
    import nclab.metrics.gnc as gnc_module

    def refuse(*args, **kwargs):
        raise AssertionError("the margin was computed")

    monkeypatch.setattr(gnc_module, "GNC2_REPORT_MAX_K", 8)
    monkeypatch.setattr(gnc_module, "rho_one_vs_rest", refuse)
    W = rng.normal(size=(9, 2))
    with pytest.warns(MetricOmittedWarning, match="K = 9 > GNC2_REPORT_MAX_K = 8") as record:
        assert gnc_module.gnc2_entries(W) == {}
    assert record[0].filename == __file__
    monkeypatch.undo()
    assert gnc_module.gnc2_entries(W) == {"gnc2": gnc2(W), "gnc2_ratio": gnc2_ratio(W)}  # d = 2: closed form


# ---------------------------------------------------------------------------------------------- NCC


def _brute_ncc(H, y, means, W=None, b=None):
    """Per-sample loops: explicit distances to every class mean, argmin; argmax of W h + b."""
    H = np.asarray(H, dtype=np.float64)
    ncc, clf, clf0 = [], [], []
    for h in H:
        dist = [np.sqrt(np.sum((h - m) ** 2)) for m in means]
        ncc.append(int(np.argmin(dist)))
        if W is not None:
            logits = [float(w @ h) for w in W]
            clf0.append(int(np.argmax(logits)))
            clf.append(int(np.argmax([lg + (0.0 if b is None else b[k]) for k, lg in enumerate(logits)])))
    ncc, clf, clf0 = map(np.array, (ncc, clf, clf0))
    out = {"ncc_accuracy": np.mean(ncc == y)}
    if W is not None:
        out["ncc_mismatch"] = np.mean(clf != ncc)
        out["ncc_mismatch_nobias"] = np.mean(clf0 != ncc)
        out["classifier_accuracy"] = np.mean(clf == y)
    return out, ncc


@pytest.mark.parametrize("dtype", ["float64", "torch32"])
def test_ncc_matches_per_sample_brute_force(dtype, rng):
    K, d = 6, 5
    H, y = _data(rng, K=K, d=d, spread=2.5, offset=3.0, imbalanced=True)  # heavy overlap: many errors
    W = rng.normal(size=(K, d))
    b = rng.normal(size=K) * 3
    if dtype == "torch32":
        Hb = torch.from_numpy(H.astype(np.float32))
        Href = Hb.double().numpy()
        yb = torch.from_numpy(y)
    else:
        Hb, Href, yb = H, H, y
    stats = ClassStats.from_arrays(Hb, yb)
    ref, ref_ncc = _brute_ncc(Href, y, stats.means, W, b)
    assert 0.2 < ref["ncc_accuracy"] < 0.95 and ref["ncc_mismatch"] > 0.05  # a non-trivial case
    acc = NCCAccumulator(stats, W=W, b=b)
    for i in range(0, len(y), 23):  # many uneven batches
        acc.update(Hb[i : i + 23], yb[i : i + 23])
    out = acc.compute()
    for key, val in ref.items():
        assert out[key] == pytest.approx(val, abs=1e-15), key
    assert out["ncc_error"] == pytest.approx(1 - ref["ncc_accuracy"], abs=1e-15)
    assert out["num_samples"] == len(y)
    np.testing.assert_array_equal(out["class_counts"], np.bincount(y, minlength=K))
    np.testing.assert_array_equal(acc.ncc_predict(Hb).cpu().numpy(), ref_ncc)
    pc = acc.per_class()
    np.testing.assert_array_equal(pc["ncc_correct"], np.bincount(y[ref_ncc == y], minlength=K))
    # without a classifier: only the NCC accuracy
    only = ncc_metrics(stats, Hb, yb, batch_size=50)
    assert set(only) == {"ncc_accuracy", "ncc_error", "num_samples", "class_counts", "ncc_index"}
    assert only["ncc_index"] == "exact"
    assert only["ncc_accuracy"] == pytest.approx(ref["ncc_accuracy"], abs=1e-15)
    # without a bias: mismatch is argmax(W h) vs NCC and no separate nobias entry
    nob = ncc_metrics(stats, Hb, yb, W=W)
    assert "ncc_mismatch_nobias" not in nob
    assert nob["ncc_mismatch"] == pytest.approx(ref["ncc_mismatch_nobias"], abs=1e-15)


def test_ncc_held_out_split_uses_train_means(rng):
    K, d = 4, 3
    H, y = _data(rng, K=K, d=d, spread=1.5)
    train = ClassStats.from_arrays(H[:60], y[:60])
    test_out = ncc_metrics(train, H[60:], y[60:])
    ref, _ = _brute_ncc(H[60:], y[60:], train.means)
    assert test_out["ncc_accuracy"] == pytest.approx(ref["ncc_accuracy"], abs=1e-15)


def test_ncc_exactly_collapsed_and_etf_classifier(rng):
    K, d = 10, 12
    E = simplex_etf(K, d, scale=3.0, seed=4)
    y = np.repeat(np.arange(K), 7)
    stats = ClassStats.from_arrays(E[y], y)
    out = ncc_metrics(stats, E[y], y, W=2.0 * E, b=np.zeros(K))  # W = ETF-aligned means, b = 0
    assert out["ncc_accuracy"] == 1.0
    assert out["ncc_mismatch"] == 0.0
    assert out["ncc_mismatch_nobias"] == 0.0
    assert out["classifier_accuracy"] == 1.0
    # translated features: NCC is unchanged; the classifier needs the bias b = -W mu_G that absorbs the shift
    offset = rng.normal(size=d) * 5
    st2 = ClassStats.from_arrays(E[y] + offset, y)
    out2 = ncc_metrics(st2, E[y] + offset, y, W=2.0 * E, b=-2.0 * E @ offset)
    assert out2["ncc_accuracy"] == 1.0
    assert out2["ncc_mismatch"] == 0.0
    assert out2["ncc_mismatch_nobias"] > 0  # this offset makes the bias-free head disagree with NCC


def test_bias_changes_nc4():
    # d = 1, K = 2: means -1 and +1, W aligned with the means; a bias of 5 on class 0 flips every class-1
    # sample
    H = np.array([[-1.0], [-1.0], [1.0], [1.0]])
    y = np.array([0, 0, 1, 1])
    stats = ClassStats.from_arrays(H, y)
    W = np.array([[-1.0], [1.0]])
    out = ncc_metrics(stats, H, y, W=W, b=np.array([5.0, 0.0]))
    assert out["ncc_accuracy"] == 1.0
    assert out["ncc_mismatch"] == 0.5  # with the bias: argmax(W h + b) = 0 everywhere
    assert out["ncc_mismatch_nobias"] == 0.0
    assert out["classifier_accuracy"] == 0.5
    assert ncc_metrics(stats, H, y, W=W, b=np.zeros(2))["ncc_mismatch"] == 0.0


def test_ncc_precision_with_huge_common_offset(rng):
    # features 1e8 * c + O(1) class structure: the expanded ||h||^2 - 2 h.mu + ||mu||^2 in raw coordinates
    # loses every digit of the class signal (eps * 1e16 ~ 1); shifting by the global mean first keeps it
    K, d = 5, 4
    H, y = _data(rng, K=K, d=d, spread=0.8)
    H = H + 1e8 * np.ones(d)
    stats = ClassStats.from_arrays(H, y)
    ref, ref_ncc = _brute_ncc(H, y, stats.means)
    acc = NCCAccumulator(stats).update(H, y)
    np.testing.assert_array_equal(acc.ncc_predict(H).numpy(), ref_ncc)
    assert acc.compute()["ncc_accuracy"] == pytest.approx(ref["ncc_accuracy"], abs=1e-15)
    naive = np.argmin((H**2).sum(1)[:, None] - 2 * H @ stats.means.T + (stats.means**2).sum(1), axis=1)
    assert np.mean(naive != ref_ncc) > 0.05  # the failure this design avoids


def test_ncc_ties_go_to_lowest_index():
    # classes 0 and 1 share the same mean exactly: every sample of either is predicted 0
    H = np.array([[1.0, 0], [1.0, 0], [1.0, 0], [1.0, 0], [-1.0, 0], [-1.0, 0]])
    y = np.array([0, 0, 1, 1, 2, 2])
    stats = ClassStats.from_arrays(H, y)
    acc = NCCAccumulator(stats, W=np.array([[1.0, 0], [1.0, 0], [-1.0, 0]])).update(H, y)
    np.testing.assert_array_equal(acc.ncc_predict(H).numpy(), [0, 0, 0, 0, 2, 2])
    out = acc.compute()
    assert out["ncc_accuracy"] == pytest.approx(4 / 6)
    assert out["classifier_accuracy"] == pytest.approx(4 / 6)  # argmax ties also go to the lowest index
    assert out["ncc_mismatch"] == 0.0


def test_ncc_merge(rng):
    K, d = 4, 3
    H, y = _data(rng, K=K, d=d, spread=1.5)
    stats = ClassStats.from_arrays(H, y)
    W, b = rng.normal(size=(K, d)), rng.normal(size=K)
    whole = NCCAccumulator(stats, W, b).update(H, y).compute()
    a = NCCAccumulator(stats, W, b).update(H[:40], y[:40])
    c = NCCAccumulator(stats, W, b).update(torch.from_numpy(H[40:]), torch.from_numpy(y[40:]))
    merged = a.merge(c).compute()
    for key in ("ncc_accuracy", "ncc_mismatch", "ncc_mismatch_nobias", "classifier_accuracy", "num_samples"):
        assert merged[key] == whole[key]
    fresh = NCCAccumulator(stats, W, b).merge(NCCAccumulator(stats, W, b).update(H, y))
    assert fresh.compute()["ncc_accuracy"] == whole["ncc_accuracy"]
    other_stats = ClassStats.from_arrays(H + 1, y)
    with pytest.raises(ValueError, match="different class means"):
        a.merge(NCCAccumulator(other_stats, W, b))
    with pytest.raises(ValueError, match="classifier b"):
        a.merge(NCCAccumulator(stats, W))
    with pytest.raises(ValueError, match="classifier W"):
        a.merge(NCCAccumulator(stats, 2 * W, b))
    with pytest.raises(TypeError):
        a.merge(stats)


def test_ncc_validation(rng):
    K, d = 3, 4
    H, y = _data(rng, K=K, d=d)
    stats = ClassStats.from_arrays(H, y)
    acc = NCCAccumulator(stats)
    with pytest.raises(ValueError, match="no sample has been seen"):
        acc.compute()
    with pytest.raises(ValueError, match="features have 3 columns, but these statistics were built for d = 4"):
        acc.update(H[:, :3], y)
    with pytest.raises(ValueError, match="2-D"):
        acc.update(H[0], y[:1])
    with pytest.raises(ValueError, match="one entry per feature row"):
        acc.update(H, y[:-1])
    with pytest.raises(TypeError, match="integer dtype"):
        acc.update(H, y.astype(float))
    with pytest.raises(TypeError, match="floating dtype"):
        acc.update(H.astype(np.int64), y)
    with pytest.raises(ValueError, match=r"label 3 is out of range \[0, 3\)"):
        acc.update(H, np.where(y == 0, 3, y))
    with pytest.raises(ValueError, match=r"label -1 is out of range"):
        acc.update(H, y - 1)
    bad = H.copy()
    bad[5, 1] = np.nan
    with pytest.raises(ValueError, match=r"NaN or inf \(first bad rows of this batch: \[5\]\)"):
        acc.update(bad, y)
    assert acc.N == 0  # nothing was counted by the failed updates
    acc.update(H[:0], y[:0])
    assert acc.N == 0
    with pytest.raises(ValueError, match=r"W must have shape \(K, d\)"):
        NCCAccumulator(stats, W=np.ones((d, K)))
    with pytest.raises(ValueError, match=r"b must have shape"):
        NCCAccumulator(stats, W=np.ones((K, d)), b=np.ones(K + 1))
    with pytest.raises(ValueError, match="without W"):
        NCCAccumulator(stats, b=np.ones(K))
    with pytest.raises(ValueError, match="NaN or inf"):
        NCCAccumulator(stats, W=np.full((K, d), np.inf))
    with pytest.raises(EmptyClassError, match="drop_empty"):
        NCCAccumulator(ClassStats.from_arrays(H, y, K=K + 1))
    with pytest.raises(TypeError, match="ClassStats"):
        NCCAccumulator(H)


def test_registry_directions():
    assert collapse_direction("ncc_accuracy") == collapse_direction("pfc3") == "higher"
    assert collapse_direction("ncc_mismatch") == collapse_direction("ncc_mismatch_nobias") == "lower"
    assert collapse_direction("gnc1") == collapse_direction("gnc3") == "lower"
    assert collapse_direction("gnc2") == collapse_direction("gnc2_ratio") == "higher"
    assert REGISTRY["gnc2"].needs == REGISTRY["gnc2_ratio"].needs == ("W",)
    assert REGISTRY["classifier_accuracy"].direction == "none"


def test_no_warnings_on_regular_inputs(rng):
    H, y = _data(rng)
    stats = ClassStats.from_arrays(normalize_features(H), y)
    W, b = rng.normal(size=(4, 6)), rng.normal(size=4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        g1 = gnc1(stats)
        g3 = gnc3(stats, W=W)
        out = ncc_metrics(stats, H, y, W=W, b=b)
    # and the values are the brute-force ones (no warning raised by a silently wrong branch either)
    assert g1 == pytest.approx(_brute_gnc1(normalize_features(H), y, 4, center=False), rel=1e-8)
    assert np.isfinite(g3) and g3 == gnc3(stats, W=torch.from_numpy(W))
    ref, _ = _brute_ncc(H, y, stats.means, W, b)
    for key, val in ref.items():
        assert out[key] == pytest.approx(val, abs=1e-15), key
