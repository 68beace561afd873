"""Cosine metrics, CDNV (tiled), optimal MSE probe and rank/spectrum metrics: brute force, invariances and
degenerate inputs."""

import numpy as np
import pytest

from nclab.geometry.frames import simplex_etf
from nclab.metrics._registry import REGISTRY
from nclab.metrics.cdnv import cdnv
from nclab.metrics.cosine import class_separation, within_class_cosine, within_class_cosine_distance
from nclab.metrics.probe import probe_mse_lstsq, probe_mse_optimal
from nclab.metrics.spectra import rank_metrics, spectrum
from nclab.stats.class_stats import ClassStats, EmptyClassError

RTOL = 1e-10


def make_data(rng, K, n, d, sep=2.0, noise=1.0, counts=None, offset=0.0):
    counts = np.full(K, n) if counts is None else np.asarray(counts)
    y = np.repeat(np.arange(K), counts)
    mu = sep * rng.normal(size=(K, d)) + offset
    return mu[y] + noise * rng.normal(size=(y.size, d)), y


def stats_of(H, y, K=None, track="full"):
    return ClassStats.from_arrays(H, y, K=K, track=track)


# ---------------- cosine
def ref_cosine(H, y, K, weighting, include_self):
    """Explicit pairwise cosines: 1 - d_within and 1 - d_within / d_total (Kornblith et al.)."""
    norms = np.linalg.norm(H, axis=1)
    Z = H / np.where(norms > 0, norms, 1)[:, None]
    N = len(y)
    S = np.zeros((N, N))
    for i in range(N):
        for j in range(N):
            S[i, j] = Z[i] @ Z[j]
    ok = np.ones((N, N), bool) if include_self else ~np.eye(N, dtype=bool)
    same = (y[:, None] == y[None, :]) & ok
    if weighting == "empirical":
        s_within = S[same].mean()
        s_total = S[ok].mean()
    else:
        blocks = np.zeros((K, K))
        for k in range(K):
            for m in range(K):
                mask = (y[:, None] == k) & (y[None, :] == m) & ok
                blocks[k, m] = S[mask].mean()
        s_within = np.mean(np.diag(blocks))
        s_total = blocks.mean()
    return s_within, 1 - (1 - s_within) / (1 - s_total)


@pytest.mark.parametrize("counts", [[12, 12, 12], [5, 17, 9, 2]])
@pytest.mark.parametrize("weighting", ["balanced", "empirical"])
@pytest.mark.parametrize("include_self", [True, False])
def test_cosine_metrics_against_pairwise_brute_force(rng, counts, weighting, include_self):
    K = len(counts)
    H, y = make_data(rng, K, None, 5, sep=1.0, counts=counts, offset=0.5)
    H[3] = 0.0  # a zero feature: similarity 0 with everything (only include_self=True is exact then)
    s = stats_of(H, y, track="light")
    if not include_self:
        H[3] = rng.normal(size=5)
        s = stats_of(H, y, track="light")
    w_ref, r_ref = ref_cosine(H, y, K, weighting, include_self)
    kw = dict(weighting=weighting, include_self=include_self)
    assert within_class_cosine(s, **kw) == pytest.approx(w_ref, rel=RTOL)
    assert within_class_cosine_distance(s, **kw) == pytest.approx(1 - w_ref, rel=RTOL)
    assert class_separation(s, **kw) == pytest.approx(r_ref, rel=RTOL)


def test_cosine_paper_formula_balanced(rng):
    """[Xu & Liu 2023, Sec. 3.2] literally (balanced): d_within over K N^2 terms, d_total over K^2 N^2 terms."""
    K, n, d = 3, 6, 4
    H, y = make_data(rng, K, n, d, offset=1.0)
    Z = H / np.linalg.norm(H, axis=1, keepdims=True)
    dw = sum(1 - Z[i] @ Z[j] for i in range(K * n) for j in range(K * n) if y[i] == y[j]) / (K * n**2)
    dt = sum(1 - Z[i] @ Z[j] for i in range(K * n) for j in range(K * n)) / (K**2 * n**2)
    s = stats_of(H, y)
    for w in ("balanced", "empirical"):  # the same on balanced data
        assert within_class_cosine_distance(s, weighting=w) == pytest.approx(dw, rel=RTOL)
        assert class_separation(s, weighting=w) == pytest.approx(1 - dw / dt, rel=RTOL)


def test_cosine_invariances(rng):
    """[Xu & Liu 2023] Obs. 4.4: invariant to per-sample positive scaling and orthogonal maps, not general maps."""
    K, n, d = 4, 15, 6
    H, y = make_data(rng, K, n, d, offset=0.7)
    Q, _ = np.linalg.qr(rng.normal(size=(d, d)))
    H2 = np.exp(rng.normal(size=(K * n, 1))) * H @ Q.T
    s, s2, s3 = stats_of(H, y), stats_of(H2, y), stats_of(H @ rng.normal(size=(d, d)).T, y)
    for fn in (within_class_cosine, class_separation):
        assert fn(s2) == pytest.approx(fn(s), rel=1e-12)
        assert abs(fn(s3) - fn(s)) > 1e-3
    # not translation invariant
    assert abs(within_class_cosine(stats_of(H + 3.0, y)) - within_class_cosine(s)) > 1e-3


def test_cosine_exact_geometries():
    K = 4
    M = simplex_etf(K, 5, seed=2)
    y = np.repeat(np.arange(K), 5)
    s = stats_of(M[y] * np.linspace(1, 3, K * 5)[:, None], y)  # collapsed directions, varying norms
    assert within_class_cosine(s) == pytest.approx(1.0, abs=1e-14)
    assert within_class_cosine_distance(s) == pytest.approx(0.0, abs=1e-14)
    # d_total = 1 - ||sum_k U_k / n_k||^2 / K^2 = 1 (simplex means sum to 0), so R^2 = 1
    assert class_separation(s) == pytest.approx(1.0, abs=1e-14)
    same = stats_of(np.tile([1.0, 2.0, 0.0], (12, 1)) * np.arange(1, 13)[:, None], np.repeat(np.arange(3), 4))
    assert within_class_cosine(same) == pytest.approx(1.0, abs=1e-14)
    assert class_separation(same) == 0.0  # every feature points the same way: documented value


def test_cosine_degenerate_inputs(rng):
    H, y = make_data(rng, 3, 4, 3)
    with pytest.raises(EmptyClassError, match="classes 3"):
        within_class_cosine(stats_of(H, y, K=4))
    y1 = y.copy()
    y1[:4] = [0, 1, 1, 1]  # class 0 has a single sample
    with pytest.raises(ValueError, match=r"classes \[0\]"):
        class_separation(stats_of(H, y1), include_self=False)
    # a single-sample class has self-similarity 1: the balanced mean over classes of (1/n_k^2) sum_ij cos(h_i, h_j)
    U = H / np.linalg.norm(H, axis=1, keepdims=True)
    per_class = [sum(U[i] @ U[j] for i in np.flatnonzero(y1 == k) for j in np.flatnonzero(y1 == k)) for k in range(3)]
    want = np.mean([v / np.sum(y1 == k) ** 2 for k, v in enumerate(per_class)])
    assert within_class_cosine(stats_of(H, y1)) == pytest.approx(want, rel=1e-12)
    with pytest.raises(ValueError, match="weighting"):
        within_class_cosine(stats_of(H, y), weighting="uniform")
    zeros = stats_of(np.zeros((6, 3)), np.repeat([0, 1], 3))  # no direction at all: similarity 0
    assert within_class_cosine(zeros) == 0.0 and class_separation(zeros) == 0.0
    assert REGISTRY["within_class_cosine"].direction == "higher"
    assert REGISTRY["within_class_cosine_distance"].direction == "lower"
    assert REGISTRY["class_separation"].direction == "higher"


# ---------------- cdnv
def ref_cdnv(H, y, K, exponent=1):
    means = [H[y == k].mean(axis=0) for k in range(K)]
    var = [np.mean(np.sum((H[y == k] - means[k]) ** 2, axis=1)) for k in range(K)]
    vals = []
    for i in range(K):
        for j in range(i + 1, K):
            vals.append((var[i] + var[j]) / (2 * np.sum((means[i] - means[j]) ** 2) ** exponent))
    return np.mean(vals)


@pytest.mark.parametrize("exponent", [1, 2, 0.5])
@pytest.mark.parametrize("counts", [[20, 20, 20, 20, 20], [3, 40, 7, 11], [4, 9]])
def test_cdnv_against_pair_loop(rng, exponent, counts):
    K = len(counts)
    H, y = make_data(rng, K, None, 6, counts=counts, offset=5.0)
    s = stats_of(H, y, track="light")
    expected = ref_cdnv(H, y, K, exponent)
    assert cdnv(s, exponent=exponent) == pytest.approx(expected, rel=RTOL)
    assert cdnv(s, exponent=exponent, tile=1) == pytest.approx(expected, rel=RTOL)
    assert cdnv(s, exponent=exponent, tile=2) == pytest.approx(expected, rel=RTOL)


def test_cdnv_tiled_large_k_matches_untiled_brute_force(rng):
    K, d = 3000, 5
    means = rng.normal(size=(K, d))
    var = rng.uniform(0.1, 2.0, size=K)
    # two samples per class at mean +- sqrt(var) e: class variance var_k exactly
    e = rng.normal(size=(K, d))
    e /= np.linalg.norm(e, axis=1, keepdims=True)
    H = np.vstack([means + np.sqrt(var)[:, None] * e, means - np.sqrt(var)[:, None] * e])
    y = np.concatenate([np.arange(K), np.arange(K)])
    s = stats_of(H, y, track="light")
    mu = s.means
    v = s.class_ss / s.counts
    total = 0.0
    for i in range(K - 1):  # untiled brute force, direct differences
        d2 = np.sum((mu[i + 1 :] - mu[i]) ** 2, axis=1)
        total += np.sum((v[i] + v[i + 1 :]) / (2 * d2))
    expected = total / (K * (K - 1) / 2)
    assert cdnv(s, tile=7) == pytest.approx(expected, rel=RTOL)
    assert cdnv(s) == pytest.approx(expected, rel=RTOL)


def test_cdnv_cancellation_guard(rng):
    """Means far from the origin and close to each other: the Gram expansion alone would lose all digits."""
    K, d = 6, 4
    mu = 1e6 + 1e-3 * rng.normal(size=(K, d))
    mu[1] = mu[0] + 1e-7  # a nearly coincident pair
    y = np.repeat(np.arange(K), 3)
    H = mu[y] + 1e-4 * rng.normal(size=(3 * K, d))
    s = stats_of(H, y, track="light")
    m = s.means
    v = s.class_ss / s.counts
    expected = np.mean([(v[i] + v[j]) / (2 * np.sum((m[i] - m[j]) ** 2)) for i in range(K) for j in range(i + 1, K)])
    assert cdnv(s, tile=2) == pytest.approx(expected, rel=1e-9)


def test_cdnv_exact_and_degenerate(rng):
    K = 5
    M = simplex_etf(K, 4, scale=2.0)
    y = np.repeat(np.arange(K), 4)
    assert cdnv(stats_of(M[y], y)) == 0.0
    # Sigma_B = 0 (identical class contents) and all-identical features: inf
    base = rng.normal(size=(4, 3))
    assert cdnv(stats_of(np.tile(base, (3, 1)), np.repeat(np.arange(3), 4))) == float("inf")
    assert cdnv(stats_of(np.ones((6, 2)), np.repeat([0, 1], 3))) == float("inf")
    # ... also at the origin, where the relative test of coincidence compares 0 with 0 (and var / d2 is 0 / 0)
    assert cdnv(stats_of(np.zeros((6, 2)), np.repeat([0, 1], 3))) == float("inf")
    H, y2 = make_data(rng, 3, 4, 3)
    with pytest.raises(EmptyClassError, match="classes 3"):
        cdnv(stats_of(H, y2, K=4))
    for bad in (0, -1, float("nan"), True):
        with pytest.raises(ValueError, match="exponent"):
            cdnv(stats_of(H, y2), exponent=bad)
    with pytest.raises(ValueError, match="tile"):
        cdnv(stats_of(H, y2), tile=0)
    # exponent 1 is scale invariant, exponent 2 scales as 1 / a^2
    s, s3 = stats_of(H, y2), stats_of(3.0 * H, y2)
    assert cdnv(s3) == pytest.approx(cdnv(s), rel=1e-12)
    assert cdnv(s3, exponent=2) == pytest.approx(cdnv(s, exponent=2) / 9, rel=1e-12)


# ---------------- probe
def test_probe_thm51_reference_value():
    """[Xu & Liu 2023, Thm. 5.1] test: K=5, N=40 per class, p=8, means ~ 2 N(0, I), noise N(0, I). The reference is
    computed two independent ways: numpy's lstsq of the one-hot targets on [H, 1] (loss = ||residual||_F^2 / (2N)),
    and Thm. 5.1's closed form L* = (1 - 1/K - Tr(Sigma_T^-1 Sigma_B) / K) / 2 from loop-built covariances.
    (On this draw both give 0.1218864633160.)"""
    rng = np.random.default_rng(0)
    K, n, d = 5, 40, 8
    y = np.repeat(np.arange(K), n)
    H = 2 * rng.normal(size=(K, d))[y] + rng.normal(size=(K * n, d))
    N = K * n
    A = np.hstack([H, np.ones((N, 1))])
    Y = np.eye(K)[y]
    B, *_ = np.linalg.lstsq(A, Y, rcond=None)
    by_lstsq = float(np.sum((Y - A @ B) ** 2)) / (2 * N)
    means = np.stack([sum(H[i] for i in range(N) if y[i] == k) / n for k in range(K)])
    mu = H.mean(axis=0)
    st = sum(np.outer(h - mu, h - mu) for h in H) / N
    sb = sum(np.outer(m - means.mean(0), m - means.mean(0)) for m in means) / K
    by_thm = (1 - 1 / K - np.trace(np.linalg.solve(st, sb)) / K) / 2
    assert by_lstsq == pytest.approx(by_thm, rel=1e-12)
    assert probe_mse_lstsq(H, y) == pytest.approx(by_lstsq, rel=1e-12)
    assert probe_mse_optimal(stats_of(H, y)) == pytest.approx(by_thm, rel=1e-12)


@pytest.mark.parametrize("counts,d", [([30, 30, 30], 4), ([8, 50, 21, 5], 6), ([10, 10, 10, 10], 2), ([3, 4], 12)])
def test_probe_closed_form_matches_lstsq(rng, counts, d):
    K = len(counts)
    H, y = make_data(rng, K, None, d, counts=counts, offset=3.0)
    assert probe_mse_optimal(stats_of(H, y)) == pytest.approx(probe_mse_lstsq(H, y), rel=RTOL, abs=1e-14)


def test_probe_edge_cases(rng):
    K = 4
    M = simplex_etf(K, 6, seed=0)
    y = np.repeat(np.arange(K), 5)
    assert probe_mse_lstsq(M[y], y) == pytest.approx(0.0, abs=1e-14)
    assert probe_mse_optimal(stats_of(M[y], y)) == pytest.approx(0.0, abs=1e-14)
    base = rng.normal(size=(5, 3))
    H0 = np.tile(base, (K, 1))  # Sigma_B = 0
    assert probe_mse_lstsq(H0, y) == pytest.approx(0.5 - 0.5 / K, rel=1e-12)
    assert probe_mse_optimal(stats_of(H0, y)) == pytest.approx(0.5 - 0.5 / K, rel=1e-12)
    # Obs. 4.5: invariant under invertible maps (no regularisation)
    H, y2 = make_data(rng, 3, 10, 4)
    U = rng.normal(size=(4, 4))
    assert probe_mse_lstsq(H @ U.T + 1.0, y2) == pytest.approx(probe_mse_lstsq(H, y2), rel=1e-9)
    # two never-seen classes add constant-zero targets, fitted exactly by the bias: same loss
    assert probe_mse_lstsq(H, y2, K=5) == pytest.approx(probe_mse_lstsq(H, y2), rel=1e-12)
    with pytest.raises(ValueError, match=r"y: label 2 is out of range \[0, 2\)"):
        probe_mse_lstsq(H, y2, K=2)
    with pytest.raises(TypeError, match="integer"):
        probe_mse_lstsq(H, y2.astype(float))
    with pytest.raises(ValueError, match="2-D"):
        probe_mse_lstsq(H[:, 0], y2)
    with pytest.raises(ValueError, match=">= 2"):
        probe_mse_lstsq(H, np.zeros_like(y2))


# ---------------- spectra
def _entropy_rank(s):
    s = s[s > 0]
    p = s / s.sum()
    return np.exp(-np.sum(p * np.log(p)))


def test_rank_metrics_against_svd_of_embedding_matrix(rng):
    K, n, d = 4, 25, 7
    H, y = make_data(rng, K, n, d, offset=2.0)
    s = stats_of(H, y)
    N = H.shape[0]
    sv = np.linalg.svd(H - H.mean(axis=0), compute_uv=False)
    lam = sv**2 / N
    out = rank_metrics(s)
    assert out["effective_rank"] == pytest.approx(_entropy_rank(lam), rel=RTOL)
    assert out["stable_rank"] == pytest.approx(lam.sum() / lam.max(), rel=RTOL)
    assert out["numerical_rank"] == d
    # RankMe (Garrido et al.): singular values of the raw, uncentred embedding matrix
    sv_raw = np.linalg.svd(H, compute_uv=False)
    rm = rank_metrics(s, convention="singular_values", center=False)
    assert rm["effective_rank"] == pytest.approx(_entropy_rank(sv_raw), rel=RTOL)
    assert rank_metrics(s, convention="singular_values")["effective_rank"] == pytest.approx(_entropy_rank(sv), rel=RTOL)
    np.testing.assert_allclose(spectrum(s), lam, rtol=1e-10)
    between = spectrum(s, which="between")
    assert np.count_nonzero(between) == K - 1
    np.testing.assert_allclose(between.sum(), np.trace(s.sigma_b()), rtol=1e-12)
    np.testing.assert_allclose(spectrum(s, which="within").sum(), s.trace_w(), rtol=1e-12)
    assert rank_metrics(s, which="between")["numerical_rank"] == K - 1


def test_spectrum_zeroes_eigenvalues_below_rtol_times_the_largest():
    # axis-aligned within-class deviations (+-a e1, +-b e2, +-c e3 about each mean, 6 samples per class):
    # Sigma_W = diag(a^2, b^2, c^2) / 3 exactly = diag(1, 1e-3, 1e-13). The default rtol 1e-12 is relative to the
    # largest eigenvalue 1: 1e-13 is a numerical zero, 1e-3 is not
    a, b, c = np.sqrt(3.0), np.sqrt(3e-3), np.sqrt(3e-13)
    dev = np.array([[a, 0, 0], [-a, 0, 0], [0, b, 0], [0, -b, 0], [0, 0, c], [0, 0, -c]])
    means = np.array([[0.0, 0.0, 0.0], [4.0, 0.0, 0.0]])
    H = np.concatenate([means[k] + dev for k in range(2)])
    s = ClassStats.from_arrays(H, np.repeat([0, 1], 6))
    lam = spectrum(s, which="within")
    np.testing.assert_allclose(lam[:2], [1.0, 1e-3], rtol=1e-9)
    assert lam[2] == 0.0


def test_rank_metrics_degenerate(rng):
    K = 3
    M = simplex_etf(K, 5, seed=1)
    y = np.repeat(np.arange(K), 4)
    s = stats_of(M[y], y)
    assert rank_metrics(s, which="within") == {"effective_rank": 0.0, "stable_rank": 0.0, "numerical_rank": 0}
    tot = rank_metrics(s)  # Sigma_T = Sigma_B of a simplex: K - 1 equal eigenvalues
    assert tot["numerical_rank"] == K - 1
    assert tot["effective_rank"] == pytest.approx(K - 1, rel=1e-12)
    assert tot["stable_rank"] == pytest.approx(K - 1, rel=1e-12)
    with pytest.raises(ValueError, match="convention"):
        rank_metrics(s, convention="sigma")
    with pytest.raises(ValueError, match="which"):
        spectrum(s, which="all")
    with pytest.raises(ValueError, match="center=False"):
        spectrum(s, which="within", center=False)
    H, y2 = make_data(rng, 3, 5, 4)
    with pytest.raises(ValueError, match="track='full'"):
        rank_metrics(stats_of(H, y2, track="light"))
