"""NC2/NC3 geometry metrics: exact frames, closed forms, brute-force references, degenerate inputs."""

import warnings

import numpy as np
import pytest
import torch

from nclab.geometry.frames import orthogonal_frame, simplex_etf
from nclab.metrics import DegenerateMetricWarning, TargetUnattainableWarning, collapse_report
from nclab.metrics._registry import REGISTRY, collapse_direction
from nclab.metrics.means_geometry import (
    classifier_accuracy_on_means,
    equiangularity,
    equinorm,
    etf_gram_error,
    etf_gram_error_from_eigvals,
    etf_gram_error_spectral,
    max_angle,
    orthogonal_frame_error,
    self_duality,
)
from nclab.stats import ClassStats, EmptyClassError

# ---------------------------------------------------------------------------------------------- brute force


def _norm(v):
    return sum(float(x) ** 2 for x in v) ** 0.5


def _dot(u, v):
    return sum(float(a) * float(b) for a, b in zip(u, v, strict=True))


def _std(vals, ddof):
    m = sum(vals) / len(vals)
    return (sum((v - m) ** 2 for v in vals) / (len(vals) - ddof)) ** 0.5


def _brute_means(H, y, K, weighting="balanced", center=True):
    """Class means by explicit per-sample loops, centred about the balanced or sample global mean."""
    d = H.shape[1]
    sums = [[0.0] * d for _ in range(K)]
    counts = [0] * K
    for h, k in zip(H, y, strict=True):
        counts[k] += 1
        for j in range(d):
            sums[k][j] += float(h[j])
    mu = np.array([[s / counts[k] for s in sums[k]] for k in range(K)])
    if not center:
        return mu
    if weighting == "balanced":
        g = mu.mean(axis=0)
    else:
        g = np.array([sum(float(h[j]) for h in H) / len(H) for j in range(d)])
    return mu - g


def _brute_pairs_cos(V):
    K = len(V)
    return [_dot(V[i], V[j]) / (_norm(V[i]) * _norm(V[j])) for i in range(K) for j in range(i + 1, K)]


def _brute_offdiag_cos(V):
    # every off-diagonal entry of the cosine matrix (each pair twice): what equiangularity's std runs over
    K = len(V)
    return [_dot(V[i], V[j]) / (_norm(V[i]) * _norm(V[j])) for i in range(K) for j in range(K) if i != j]


def _brute_gram_error(G, target):
    K = len(G)
    nG = sum(G[i][j] ** 2 for i in range(K) for j in range(K)) ** 0.5
    return sum((G[i][j] / nG - target(i, j)) ** 2 for i in range(K) for j in range(K)) ** 0.5


def _etf_entry(K):
    return lambda i, j: ((1.0 if i == j else 0.0) - 1.0 / K) / (K - 1) ** 0.5


def _gram(A, B):
    return [[_dot(a, b) for b in B] for a in A]


def _data(rng, K=5, d=7, n=30, imbalanced=False, offset=0.0):
    mu = rng.normal(size=(K, d)) * 3 + offset
    if imbalanced:
        y = np.concatenate([np.full(n + 7 * k, k) for k in range(K)])
    else:
        y = np.repeat(np.arange(K), n)
    rng.shuffle(y)
    H = mu[y] + rng.normal(size=(len(y), d))
    return H, y


def _collapsed_stats(M, n=3, offset=None):
    """ClassStats of n copies of each row of M (zero within-class spread), optionally translated."""
    K = M.shape[0]
    y = np.repeat(np.arange(K), n)
    H = M[y] + (0.0 if offset is None else offset)
    return ClassStats.from_arrays(H, y, K=K)


# ---------------------------------------------------------------------------------------------- exact frames


@pytest.mark.parametrize("K", [2, 3, 5, 10])
@pytest.mark.parametrize("extra", [0, 4])
@pytest.mark.parametrize("scale", [0.01, 1.0, 250.0])
def test_simplex_etf_is_exactly_collapsed(K, extra, scale, rng):
    d = K - 1 + extra
    E = simplex_etf(K, d, scale=scale, seed=int(rng.integers(1000)))
    offset = rng.normal(size=d) * 10 * scale  # a common translation must not matter for centred metrics
    stats = _collapsed_stats(E, offset=offset)
    for X in (stats, E):
        assert etf_gram_error(X) == pytest.approx(0.0, abs=1e-12)
        assert etf_gram_error_spectral(X) == pytest.approx(0.0, abs=1e-12)
        assert max_angle(X) == pytest.approx(0.0, abs=1e-12)
        assert equinorm(X) == pytest.approx(0.0, abs=1e-12)
        assert equinorm(X, ddof=0) == pytest.approx(0.0, abs=1e-12)
        assert equiangularity(X) == pytest.approx(0.0, abs=1e-12)
    # a translated ETF passed as an array is not centred by the array path of etf_gram_error(center=False)
    assert etf_gram_error(E + offset, center=True) == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("K", [2, 3, 4, 5, 10])
def test_orthogonal_frame_closed_forms(K):
    # by hand: G = I, ||G||_F = sqrt(K), <I/sqrt(K), (I - 11^T/K)/sqrt(K-1)> = (K-1)/sqrt(K(K-1)) =
    # sqrt((K-1)/K), so ||G/||G|| - E||^2 = 1 + 1 - 2 sqrt((K-1)/K)
    closed = np.sqrt(2 - 2 * np.sqrt((K - 1) / K))
    O = orthogonal_frame(K, K + 2, scale=3.0, seed=K)
    assert orthogonal_frame_error(O) == pytest.approx(0.0, abs=1e-12)
    assert orthogonal_frame_error(_collapsed_stats(O)) == pytest.approx(0.0, abs=1e-12)
    assert etf_gram_error(O, center=False) == pytest.approx(closed, rel=1e-12)
    assert etf_gram_error(O, center=True) == pytest.approx(0.0, abs=1e-12)  # centred OF = simplex ETF
    # the symmetric statement of [Tirer & Bruna 2022]: NC2_OF of a zero-mean simplex ETF
    E = simplex_etf(K, K + 2, seed=K)
    assert orthogonal_frame_error(E) == pytest.approx(closed, rel=1e-12)
    if K == 4:
        assert closed == pytest.approx(0.5176, abs=1e-4)  # independently computed reference value


@pytest.mark.parametrize("K", [2, 4, 7])
def test_self_duality_zero_for_aligned_classifier(K, rng):
    d = K + 3
    H, y = _data(rng, K=K, d=d)
    stats = ClassStats.from_arrays(H, y)
    M = stats.centered_means()
    for alpha in (1e-3, 1.0, 42.0):
        assert self_duality(stats, W=alpha * M) == pytest.approx(0.0, abs=1e-12)
        assert self_duality(stats, W=alpha * M, squared=False) == pytest.approx(0.0, abs=1e-7)
        assert self_duality(stats, "cosine", W=alpha * M) == pytest.approx(0.0, abs=1e-12)
        # uncentred means ([Tirer & Bruna 2022], bias-free models)
        assert self_duality(stats, W=alpha * stats.means, center_means=False) == pytest.approx(0.0, abs=1e-12)
        # a classifier with a common row offset, centred first
        assert self_duality(stats, W=alpha * M + rng.normal(size=d), center_w=True) == pytest.approx(0.0, abs=1e-12)
    # the gram variant is 0 only when, in addition, the means are a simplex ETF
    E = simplex_etf(K, d, scale=2.0, seed=1)
    sE = _collapsed_stats(E, offset=rng.normal(size=d))
    for variant in ("frobenius", "gram", "cosine"):
        assert self_duality(sE, variant, W=5.0 * E) == pytest.approx(0.0, abs=1e-12)
    if K > 2:
        assert self_duality(stats, "gram", W=M) > 1e-3  # random means: not an ETF


def test_self_duality_opposite_and_bounds():
    E = simplex_etf(4, 5, seed=0)
    assert self_duality(E, W=-E) == pytest.approx(4.0)  # ||a - (-a)||^2 with unit-Frobenius a
    assert self_duality(E, W=-E, squared=False) == pytest.approx(2.0)
    assert self_duality(E, "cosine", W=-E) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="variant"):
        self_duality(E, "nope", W=E)
    with pytest.raises(ValueError, match="squared"):
        self_duality(E, "cosine", W=E, squared=True)
    with pytest.raises(ValueError, match="shape"):
        self_duality(E, W=E[:, :3])


# ---------------------------------------------------------------------------------------------- closed forms


@pytest.mark.parametrize("K,d", [(3, 5), (6, 4), (10, 30), (10, 3), (5, 1), (2, 3)])
def test_spectral_closed_form_matches_direct(K, d, rng):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TargetUnattainableWarning)
        for _ in range(5):
            X = rng.normal(size=(K, d)) * rng.uniform(0.1, 10) + rng.normal(size=d) * 5
            direct = etf_gram_error(X)
            assert etf_gram_error_spectral(X) == pytest.approx(direct, rel=1e-12, abs=1e-12)
            # PFC2 from Sigma_B alone: the eigenvalues of the centred between-class covariance
            H, y = _data(rng, K=K, d=d, n=4)
            stats = ClassStats.from_arrays(H, y)
            lam = np.linalg.eigvalsh(stats.sigma_b())
            assert etf_gram_error_from_eigvals(lam, K) == pytest.approx(etf_gram_error(stats), rel=1e-10)
            # and the trace form of [Wang et al. 2024, eq. (8)]
            Mc = stats.centered_means()
            G = Mc @ Mc.T
            trace_form = np.sqrt(2 - 2 * np.trace(G) / (np.sqrt(K - 1) * np.linalg.norm(G)))
            assert etf_gram_error(stats) == pytest.approx(trace_form, rel=1e-9)


@pytest.mark.parametrize("K,expected", [(5, 1.0), (10, 1.155), (100, 1.341)])
def test_pfc2_maximum_at_rank_one(K, expected):
    X = np.outer(np.arange(K) - 1.0, [1.0, 2.0])  # rank 1 after centring
    top = np.sqrt(2 * (1 - 1 / np.sqrt(K - 1)))
    with pytest.warns(TargetUnattainableWarning):
        assert etf_gram_error(X) == pytest.approx(top, rel=1e-12)
    assert top == pytest.approx(expected, abs=5e-4)


def test_pfc2_alias_and_directions():
    assert REGISTRY["pfc2"].name == "pfc2"
    assert REGISTRY["pfc2"].direction == REGISTRY["etf_gram_error"].direction == "lower"
    assert REGISTRY["pfc2"].source == etf_gram_error.info.source
    for name in ("equinorm", "equiangularity", "max_angle", "orthogonal_frame_error", "self_duality"):
        assert collapse_direction(name) == "lower"


def test_invariances_of_etf_gram_error(rng):
    X = rng.normal(size=(6, 9))
    Q, _ = np.linalg.qr(rng.normal(size=(9, 9)))
    base = etf_gram_error(X)
    assert etf_gram_error(3.7 * X @ Q.T + rng.normal(size=9)) == pytest.approx(base, rel=1e-11)
    assert max_angle(3.7 * (X - X.mean(0)) @ Q.T) == pytest.approx(max_angle(X - X.mean(0)), rel=1e-11)


# ---------------------------------------------------------------------------------------------- brute force


@pytest.mark.parametrize(("weighting", "imbalanced"), [("balanced", False), ("balanced", True), ("empirical", True)])
def test_every_metric_matches_brute_force(weighting, imbalanced, rng):
    K, d = 5, 7
    H, y = _data(rng, K=K, d=d, imbalanced=imbalanced, offset=4.0)
    stats = ClassStats.from_arrays(H, y)
    if imbalanced:
        # the two centrings differ on this data, so a metric that ignored ``weighting`` fails one of the cases
        other = "empirical" if weighting == "balanced" else "balanced"
        assert etf_gram_error(stats, weighting=other) != pytest.approx(etf_gram_error(stats, weighting=weighting))
    M = _brute_means(H, y, K, weighting)
    mu = _brute_means(H, y, K, center=False)
    W = rng.normal(size=(K, d))
    kw = dict(weighting=weighting)

    # equinorm / equiangularity / max_angle, on centred means (stats) and raw rows (W)
    for X, V in ((stats, M), (W, W)):
        norms = [_norm(v) for v in V]
        for ddof in (0, 1):
            assert equinorm(X, ddof, **kw) == pytest.approx(_std(norms, ddof) / (sum(norms) / K), rel=1e-10)
            assert equiangularity(X, ddof, **kw) == pytest.approx(_std(_brute_offdiag_cos(V), ddof), rel=1e-10)
        shifted = [abs(c + 1 / (K - 1)) for c in _brute_pairs_cos(V)]
        assert max_angle(X, **kw) == pytest.approx(sum(shifted) / len(shifted), rel=1e-10)
    # ordered-pair mean of the shifted cosine (the reference Colab's form) is the same number
    G = _gram(M, M)
    colab = sum(
        abs(G[i][j] / (G[i][i] * G[j][j]) ** 0.5 + 1 / (K - 1)) for i in range(K) for j in range(K) if i != j
    ) / (K * (K - 1))
    assert max_angle(stats, **kw) == pytest.approx(colab, rel=1e-10)

    # Gram errors
    assert etf_gram_error(stats, **kw) == pytest.approx(_brute_gram_error(G, _etf_entry(K)), rel=1e-10)
    Gu = _gram(mu, mu)
    assert etf_gram_error(stats, center=False) == pytest.approx(_brute_gram_error(Gu, _etf_entry(K)), rel=1e-10)
    of = _brute_gram_error(Gu, lambda i, j: (1.0 if i == j else 0.0) / K**0.5)
    assert orthogonal_frame_error(stats) == pytest.approx(of, rel=1e-10)
    Wc = W - W.mean(0)
    assert etf_gram_error(W) == pytest.approx(_brute_gram_error(_gram(Wc, Wc), _etf_entry(K)), rel=1e-10)

    # self-duality, every variant and switch
    def frob(A, B):
        nA, nB = sum(_norm(a) ** 2 for a in A) ** 0.5, sum(_norm(b) ** 2 for b in B) ** 0.5
        return sum((A[k][j] / nA - B[k][j] / nB) ** 2 for k in range(K) for j in range(d))

    assert self_duality(stats, W=W, **kw) == pytest.approx(frob(W, M), rel=1e-10)
    assert self_duality(stats, W=W, squared=False, **kw) == pytest.approx(frob(W, M) ** 0.5, rel=1e-10)
    assert self_duality(stats, W=W, center_means=False) == pytest.approx(frob(W, mu), rel=1e-10)
    assert self_duality(stats, W=W, center_w=True, **kw) == pytest.approx(frob(Wc, M), rel=1e-10)
    gram = _brute_gram_error(_gram(W, M), _etf_entry(K))
    assert self_duality(stats, "gram", W=W, **kw) == pytest.approx(gram, rel=1e-10)
    assert self_duality(stats, "gram", W=W, squared=True, **kw) == pytest.approx(gram**2, rel=1e-10)
    cos = sum(1 - _dot(W[k], M[k]) / (_norm(W[k]) * _norm(M[k])) for k in range(K)) / K
    assert self_duality(stats, "cosine", W=W, **kw) == pytest.approx(cos, rel=1e-10)
    # means given as an array instead of ClassStats
    assert self_duality(mu, W=W, **kw) == pytest.approx(frob(W, mu - mu.mean(0)), rel=1e-10)


def test_torch_inputs(rng):
    W = rng.normal(size=(4, 6)).astype(np.float32)
    Wt = torch.from_numpy(W)
    for fn in (equinorm, equiangularity, max_angle, etf_gram_error, orthogonal_frame_error):
        assert fn(Wt) == pytest.approx(fn(W.astype(np.float64)), rel=1e-12)
    assert self_duality(W.astype(np.float64) * 2, W=Wt, center_means=False) == pytest.approx(0.0, abs=1e-12)
    assert self_duality(W.astype(np.float64), W=Wt) > 1e-3  # array means are centred by default


# ------------------------------------------------------------------------------------------ degenerate inputs


def test_two_classes():
    X = np.array([[1.0, 2.0], [-3.0, 0.5]])
    # one pair: no spread, whatever ddof (documented), never nan
    assert equiangularity(X) == 0.0
    assert equiangularity(X, ddof=0) == 0.0
    c = _dot(X[0], X[1]) / (_norm(X[0]) * _norm(X[1]))
    assert max_angle(X) == pytest.approx(abs(c + 1))
    # centred two means are antipodal: an exact 2-class ETF
    stats = _collapsed_stats(X)
    assert max_angle(stats) == pytest.approx(0.0, abs=1e-15)
    assert etf_gram_error(stats) == pytest.approx(0.0, abs=1e-15)
    n = [_norm(v) for v in X]
    assert equinorm(X) == pytest.approx(_std(n, 1) / np.mean(n))
    with pytest.raises(ValueError, match="ddof"):
        equinorm(X, ddof=2)
    with pytest.raises(ValueError, match="ddof"):
        equinorm(X, ddof=-1)


def test_d_equals_one():
    K = 4
    X = np.array([[0.0], [1.0], [3.0], [-2.0]])
    with pytest.warns(TargetUnattainableWarning, match="d >= 3"):
        v = etf_gram_error(X)
    # centred rank one: the maximum sqrt(2 (1 - 1/sqrt(K-1)))
    assert v == pytest.approx(np.sqrt(2 * (1 - 1 / np.sqrt(K - 1))), rel=1e-12)
    with pytest.warns(TargetUnattainableWarning):
        assert etf_gram_error_spectral(X) == pytest.approx(v, rel=1e-12)
    Xc = X - X.mean(0)
    cos = np.sign(Xc[:, 0])[:, None] * np.sign(Xc[:, 0])[None, :]
    pairs = cos[np.triu_indices(K, 1)]
    assert equiangularity(Xc) == pytest.approx(np.std(cos[~np.eye(K, dtype=bool)], ddof=1), rel=1e-12)
    with pytest.warns(TargetUnattainableWarning):
        assert max_angle(Xc) == pytest.approx(np.abs(pairs + 1 / 3).mean(), rel=1e-12)


@pytest.mark.parametrize("K,d", [(4, 2), (6, 2), (7, 3)])
def test_etf_unattainable_when_d_below_k_minus_1(K, d, rng):
    # the best a rank-d configuration can do has d equal Gram eigenvalues: sqrt(2 - 2 sqrt(d/(K-1)))
    floor = np.sqrt(2 - 2 * np.sqrt(d / (K - 1)))
    if d == 2:  # a regular K-gon reaches the floor
        t = 2 * np.pi * np.arange(K) / K
        X = 5 * np.stack([np.cos(t), np.sin(t)], axis=1) + np.array([1.0, -2.0])
        with pytest.warns(TargetUnattainableWarning, match="cannot reach 0"):
            assert etf_gram_error(X) == pytest.approx(floor, rel=1e-12)
        assert equinorm(X - X.mean(0)) == pytest.approx(0.0, abs=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TargetUnattainableWarning)
        for _ in range(20):
            assert etf_gram_error(rng.normal(size=(K, d))) >= floor - 1e-12
    with pytest.warns(TargetUnattainableWarning, match="orthogonal frame"):
        orthogonal_frame_error(rng.normal(size=(K, K - 1)))


def test_empty_class_raises_clear_error(rng):
    H = rng.normal(size=(20, 3))
    y = np.arange(20) % 3  # class 3 of 4 never seen
    stats = ClassStats.from_arrays(H, y, K=4)
    W = rng.normal(size=(4, 3))
    for call in (
        lambda: equinorm(stats),
        lambda: equiangularity(stats),
        lambda: max_angle(stats),
        lambda: etf_gram_error(stats),
        lambda: etf_gram_error_spectral(stats),
        lambda: orthogonal_frame_error(stats),
        lambda: self_duality(stats, W=W),
    ):
        with pytest.raises(EmptyClassError, match="drop_empty"):
            call()
    # the documented way out
    # the documented way out: the 3 classes seen, as if class 3 had never existed
    M3 = _brute_means(H, y, 3)
    assert etf_gram_error(stats.drop_empty()) == pytest.approx(
        _brute_gram_error(_gram(M3, M3), _etf_entry(3)), rel=1e-10
    )


def test_zero_norm_centred_mean(rng):
    a = rng.normal(size=4)
    stats = _collapsed_stats(np.stack([a, 0 * a, -a]) + 10.0)  # the middle class sits on the global mean
    with pytest.warns(DegenerateMetricWarning, match=r"rows 1 have zero norm"):
        assert np.isnan(equiangularity(stats))
    with pytest.warns(DegenerateMetricWarning):
        assert np.isnan(max_angle(stats))
    with pytest.warns(DegenerateMetricWarning):
        assert np.isnan(self_duality(stats, "cosine", W=rng.normal(size=(3, 4))))
    # norms and Gram distances are still defined
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert equinorm(stats) == pytest.approx(_std([1.0, 0.0, 1.0], 1) / (2 / 3))
        G = np.array([[1.0, 0, -1], [0, 0, 0], [-1, 0, 1]])
        expected = np.linalg.norm(G / np.linalg.norm(G) - (np.eye(3) - 1 / 3) / np.sqrt(2))
        assert etf_gram_error(stats) == pytest.approx(expected, rel=1e-10)
        # M = mu_k - mu_G = (a, 0, -a): || W/||W|| - M/||M|| ||^2 by hand
        Wd = rng.normal(size=(3, 4))
        M = np.stack([a, 0 * a, -a])
        want = np.sum((Wd / np.linalg.norm(Wd) - M / np.linalg.norm(M)) ** 2)
        assert self_duality(stats, W=Wd) == pytest.approx(want, rel=1e-10)
    # a zero classifier row
    W = rng.normal(size=(3, 4))
    W[2] = 0
    with pytest.warns(DegenerateMetricWarning, match="rows 2"):
        assert np.isnan(equiangularity(W))


@pytest.mark.parametrize("value", [0.1, 0.0, 1e6])
def test_all_identical_features(value):
    K, d = 3, 4
    H = np.full((12, d), value)
    y = np.arange(12) % K
    stats = ClassStats.from_arrays(H, y)
    # centring leaves (at most) rounding noise: treated as zero, never as a direction
    for fn in (equinorm, equiangularity, max_angle, etf_gram_error, etf_gram_error_spectral):
        with pytest.warns(DegenerateMetricWarning, match="undefined"):
            assert np.isnan(fn(stats))
    with pytest.warns(DegenerateMetricWarning):
        assert np.isnan(self_duality(stats, W=np.eye(K, d)))
    with pytest.warns(DegenerateMetricWarning):
        assert np.isnan(self_duality(stats, "gram", W=np.eye(K, d)))
    if value == 0.0:
        with pytest.warns(DegenerateMetricWarning):
            assert np.isnan(orthogonal_frame_error(stats))
        with pytest.warns(DegenerateMetricWarning):
            assert np.isnan(self_duality(stats, W=np.eye(K, d), center_means=False))
    else:
        # uncentred Gram = c 11^T: ||11^T/K - I/sqrt(K)||^2 = 2 - 2/sqrt(K)
        assert orthogonal_frame_error(stats) == pytest.approx(np.sqrt(2 - 2 / np.sqrt(K)), rel=1e-12)
        assert etf_gram_error(stats, center=False) == pytest.approx(np.sqrt(2), rel=1e-12)  # <11^T, E> = 0
    with pytest.warns(DegenerateMetricWarning):
        assert np.isnan(self_duality(np.eye(K, d), W=np.zeros((K, d))))
    with pytest.warns(DegenerateMetricWarning):
        assert np.isnan(etf_gram_error_from_eigvals(np.zeros(3), K))


def test_nearly_collapsed_with_huge_offset_is_not_degenerate(rng):
    # centred signal 1e-3 on top of a 1e6 offset: well above the 1e-12 relative zero threshold
    E = simplex_etf(5, 6, scale=1e-3, seed=3)
    stats = _collapsed_stats(E, offset=1e6 * rng.normal(size=6))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert etf_gram_error(stats) < 1e-6
        assert equiangularity(stats) < 1e-6


def test_input_validation():
    with pytest.raises(ValueError, match="2-D"):
        equinorm(np.ones(3))
    with pytest.raises(ValueError, match="at least 2 rows"):
        etf_gram_error(np.ones((1, 3)))
    with pytest.raises(ValueError, match="NaN or inf"):
        max_angle(np.array([[1.0, np.nan], [0.0, 1.0]]))
    with pytest.raises(ValueError, match="PSD"):
        etf_gram_error_from_eigvals([1.0, -1.0], 3)


def test_pair_cosine_tiles_cover_all_pairs_across_tiles():
    # K large enough for several row tiles of U U^T: tiled moments equal the all-pairs brute force
    from nclab.metrics.means_geometry import _pair_cosine_moments, equiangularity, max_angle

    rng = np.random.default_rng(3)
    K = 3000
    V = rng.normal(size=(K, 5))
    U = V / np.linalg.norm(V, axis=1, keepdims=True)
    G = U @ U.T
    c = G[np.triu_indices(K, k=1)]
    count, mean, m2, abs_sum = _pair_cosine_moments(U, 1.0 / (K - 1))
    assert count == K * (K - 1) // 2
    assert mean == pytest.approx(c.mean() + 1.0 / (K - 1), rel=1e-12)
    assert m2 == pytest.approx(((c - c.mean()) ** 2).sum(), rel=1e-10)
    assert abs_sum == pytest.approx(np.abs(c + 1.0 / (K - 1)).sum(), rel=1e-10)
    assert equiangularity(V) == pytest.approx(np.std(G[~np.eye(K, dtype=bool)], ddof=1), rel=1e-10)
    with pytest.warns(TargetUnattainableWarning):
        assert max_angle(V) == pytest.approx(np.abs(c + 1.0 / (K - 1)).mean(), rel=1e-10)


# ---------------------------------------------------------------------------------------------- NC4 at the means
def test_classifier_accuracy_on_means_brute_force(rng):
    K, d = 6, 8
    H, y = _data(rng, K=K, d=d)
    stats = ClassStats.from_arrays(H, y, K=K)
    W, b = rng.normal(size=(K, d)), rng.normal(size=K)
    M = np.stack([H[y == k].mean(axis=0) for k in range(K)])
    expect = np.mean([int(np.argmax([W[j] @ M[k] + b[j] for j in range(K)]) == k) for k in range(K)])
    assert classifier_accuracy_on_means(stats, W=W, b=b) == expect
    assert classifier_accuracy_on_means(M, W=torch.tensor(W), b=torch.tensor(b)) == expect
    assert REGISTRY["classifier_accuracy_on_means"].direction == "higher"
    with pytest.raises(ValueError, match=r"b must have shape \(K,\) = \(6,\)"):
        classifier_accuracy_on_means(stats, W=W, b=b[:3])
    with pytest.raises(ValueError, match="b contains NaN or inf"):
        classifier_accuracy_on_means(stats, W=W, b=np.full(K, np.nan))


def test_collapse_report_uses_the_bias():
    # collapsed features far from the origin, a self-dual head W = centred means: only the bias -W mu_G makes
    # argmax(W mu_k + b) = k; without it W mu_G (a class-dependent offset) decides for every class alike
    K, d = 4, 5
    M = simplex_etf(K, d, seed=0)
    offset = np.array([40.0, -25.0, 10.0, 5.0, 30.0])
    stats = _collapsed_stats(M, offset=offset)
    W = M.copy()  # = the centred class means (the ETF rows sum to zero)
    b = -W @ offset
    with_bias = collapse_report(stats, W=W, b=b)
    assert with_bias["classifier_accuracy_on_means"] == 1.0
    logits = (M + offset) @ W.T  # no bias: every class mean goes to argmax_j w_j . offset
    assert np.all(np.argmax(logits, axis=1) == np.argmax(W @ offset))
    assert collapse_report(stats, W=W)["classifier_accuracy_on_means"] == 1.0 / K
    # b touches nothing else: the NC2/NC3 statistics of W are bias-free by definition
    without = collapse_report(stats, W=W, b=np.zeros(K))
    assert without["classifier_accuracy_on_means"] == 1.0 / K
    assert {k: v for k, v in with_bias.items() if k != "classifier_accuracy_on_means"} == {
        k: v for k, v in without.items() if k != "classifier_accuracy_on_means"
    }
    with pytest.raises(ValueError, match="a bias b needs its classifier W"):
        collapse_report(stats, b=b)
