"""nc1 / fuzziness / trace_ratio (pfc1, sq_dist) / vci / within_class_split: brute force, exact geometries,
invariances, [Xu & Liu 2023] identities and degenerate inputs."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nclab.geometry.frames import simplex_etf
from nclab.metrics._registry import REGISTRY
from nclab.metrics.probe import probe_mse_lstsq, probe_mse_optimal
from nclab.metrics.variability import fuzziness, nc1, pfc1, sq_dist, trace_ratio, vci, within_class_split
from nclab.stats.class_stats import ClassStats, EmptyClassError

RTOL = 1e-10


# ---------------- helpers
def make_data(rng, K, n, d, sep=2.0, noise=1.0, counts=None):
    counts = np.full(K, n) if counts is None else np.asarray(counts)
    y = np.repeat(np.arange(K), counts)
    mu = sep * rng.normal(size=(K, d))
    H = mu[y] + noise * rng.normal(size=(y.size, d))
    return H, y


def ref_covs(H, y, K):
    """Per-sample loops: class means, Sigma_W, Sigma_B (balanced / empirical), Sigma_T."""
    N, d = H.shape
    means = np.zeros((K, d))
    counts = np.zeros(K)
    for h, k in zip(H, y, strict=True):
        means[k] += h
        counts[k] += 1
    means /= counts[:, None]
    mg_emp = H.sum(axis=0) / N
    sw = np.zeros((d, d))
    st_ = np.zeros((d, d))
    for h, k in zip(H, y, strict=True):
        sw += np.outer(h - means[k], h - means[k])
        st_ += np.outer(h - mg_emp, h - mg_emp)
    mg_bal = means.mean(axis=0)
    sb_bal = sum(np.outer(m - mg_bal, m - mg_bal) for m in means) / K
    sb_emp = sum(c / N * np.outer(m - mg_emp, m - mg_emp) for m, c in zip(means, counts, strict=True))
    return dict(means=means, counts=counts, sw=sw / N, st=st_ / N, balanced=sb_bal, empirical=sb_emp)


def ref_pinv(A, r, rtol=1e-12):
    """SVD pseudo-inverse keeping the top r singular values above rtol * s_max."""
    U, s, _ = np.linalg.svd(A)
    keep = min(r, int(np.sum(s > rtol * s[0]))) if s[0] > 0 else 0
    return (U[:, :keep] / s[:keep]) @ U[:, :keep].T


def stats_of(H, y, K=None, track="full"):
    return ClassStats.from_arrays(H, y, K=K, track=track)


def collapsed_stats_zero_sb(K=3, d=4, n=5, seed=0):
    """Every class holds the same samples (in the same order): class means exactly equal, Sigma_B = 0."""
    base = np.random.default_rng(seed).normal(size=(n, d))
    H = np.tile(base, (K, 1))
    y = np.repeat(np.arange(K), n)
    return stats_of(H, y, K)


CONFIGS = [  # K, counts, d
    (4, [30, 30, 30, 30], 6),
    (5, [12, 40, 7, 25, 9], 7),  # imbalanced
    (6, [20] * 6, 3),  # d < K - 1
    (2, [15, 22], 1),  # K = 2, d = 1
    (3, [10, 10, 10], 40),  # d > N (Sigma_T singular)
]


# ---------------- brute force
@pytest.mark.parametrize("K,counts,d", CONFIGS)
@pytest.mark.parametrize("weighting", ["balanced", "empirical"])
def test_nc1_against_brute_force(rng, K, counts, d, weighting):
    H, y = make_data(rng, K, None, d, counts=counts)
    ref = ref_covs(H, y, K)
    s = stats_of(H, y)
    raw = np.trace(ref["sw"] @ ref_pinv(ref[weighting], min(d, K - 1)))
    assert nc1(s, weighting=weighting) == pytest.approx(raw / K, rel=RTOL)
    assert nc1(s, normalize=False, weighting=weighting) == pytest.approx(raw, rel=RTOL)
    assert fuzziness(s, weighting=weighting) == pytest.approx(raw, rel=RTOL)
    assert fuzziness(s, normalize=True, weighting=weighting) == pytest.approx(raw / K, rel=RTOL)
    raw_num = np.trace(ref["sw"] @ ref_pinv(ref[weighting], d))
    assert nc1(s, weighting=weighting, rank="numerical") == pytest.approx(raw_num / K, rel=RTOL)
    raw1 = np.trace(ref["sw"] @ ref_pinv(ref[weighting], 1))
    assert nc1(s, weighting=weighting, rank=1) == pytest.approx(raw1 / K, rel=RTOL)


@pytest.mark.parametrize("K,counts,d", CONFIGS)
def test_trace_ratio_is_paper_eq4(rng, K, counts, d):
    H, y = make_data(rng, K, None, d, counts=counts)
    ref = ref_covs(H, y, K)
    s = stats_of(H, y)
    for w in ("balanced", "empirical"):
        assert trace_ratio(s, weighting=w) == pytest.approx(np.trace(ref["sw"]) / np.trace(ref[w]), rel=RTOL)
    if len(set(counts)) == 1:  # [Xu & Liu 2023, eq. (4)], literally
        n = counts[0]
        num = sum(np.sum((h - ref["means"][k]) ** 2) for h, k in zip(H, y, strict=True))
        mg = H.mean(axis=0)
        den = n * sum(np.sum((m - mg) ** 2) for m in ref["means"])
        assert trace_ratio(s) == pytest.approx(num / den, rel=RTOL)


def test_trace_ratio_aliases_are_the_same_function():
    assert pfc1 is trace_ratio and sq_dist is trace_ratio
    assert REGISTRY["pfc1"].name == "pfc1" and REGISTRY["sq_dist"].name == "sq_dist"
    for alias in ("pfc1", "sq_dist"):
        assert REGISTRY[alias].direction == "lower" == REGISTRY["trace_ratio"].direction
        assert REGISTRY[alias].source == REGISTRY["trace_ratio"].source
    assert REGISTRY["vci"].direction == "lower" and REGISTRY["within_class_split"].direction == "none"


@pytest.mark.parametrize("K,counts,d", CONFIGS)
@pytest.mark.parametrize("weighting", ["balanced", "empirical"])
def test_vci_against_brute_force(rng, K, counts, d, weighting):
    H, y = make_data(rng, K, None, d, counts=counts)
    ref = ref_covs(H, y, K)
    s = stats_of(H, y)
    r = min(d, K - 1)
    expected = 1 - np.trace(ref_pinv(ref["st"], d) @ ref[weighting]) / r
    assert vci(s, weighting=weighting) == pytest.approx(expected, rel=RTOL, abs=1e-12)
    rnum = np.linalg.matrix_rank(ref[weighting], tol=1e-12 * np.linalg.norm(ref[weighting], 2))
    expected_num = 1 - np.trace(ref_pinv(ref["st"], d) @ ref[weighting]) / rnum
    assert vci(s, rank="numerical", weighting=weighting) == pytest.approx(expected_num, rel=RTOL, abs=1e-12)
    assert vci(s, rank=7, weighting=weighting) == pytest.approx(
        1 - np.trace(ref_pinv(ref["st"], d) @ ref[weighting]) / 7, rel=RTOL
    )


@pytest.mark.parametrize("K,counts,d", CONFIGS)
def test_within_class_split_against_projections(rng, K, counts, d):
    H, y = make_data(rng, K, None, d, counts=counts)
    ref = ref_covs(H, y, K)
    s = stats_of(H, y)
    M = ref["means"] - ref["means"].mean(axis=0)
    U, sv, _ = np.linalg.svd(M.T, full_matrices=False)  # V_B = column space of M^T
    B = U[:, : int(np.sum(sv > 1e-8 * sv[0]))]
    P = B @ B.T
    N = H.shape[0]
    in_span = sum(np.sum((P @ (h - ref["means"][k])) ** 2) for h, k in zip(H, y, strict=True)) / N
    orth = sum(np.sum(((np.eye(d) - P) @ (h - ref["means"][k])) ** 2) for h, k in zip(H, y, strict=True)) / N
    out = within_class_split(s)
    tw = np.trace(ref["sw"])
    assert out["rank"] == B.shape[1] == min(d, K - 1)
    assert out["in_span"] == pytest.approx(in_span, rel=RTOL, abs=1e-13 * tw)
    assert out["orthogonal"] == pytest.approx(orth, rel=RTOL, abs=1e-12 * tw)
    assert out["in_span"] + out["orthogonal"] == pytest.approx(tw, rel=1e-12)
    norm = within_class_split(s, normalize=True)
    assert norm["in_span"] + norm["orthogonal"] == pytest.approx(trace_ratio(s), rel=1e-12)


def test_within_class_split_exact_value_on_a_constructed_example():
    """K = 3 means in the (x, y) plane, deviations +-s along y (in V_B) and +-t along w (in V_B^perp), d = 4:
    per sample, ||P_B dev||^2 is s^2 or 0, so in_span = s^2 / 2 and orthogonal = t^2 / 2, exactly."""
    s_, t_ = 0.75, 3.0
    mu = np.array([[2.0, 0, 0, 0], [-1.0, np.sqrt(3.0), 0, 0], [-1.0, -np.sqrt(3.0), 0, 0]])
    dev = np.array([[0, s_, 0, 0], [0, -s_, 0, 0], [0, 0, 0, t_], [0, 0, 0, -t_]])
    H = np.vstack([m + dev for m in mu])
    y = np.repeat(np.arange(3), 4)
    out = within_class_split(stats_of(H, y))
    assert out["rank"] == 2
    assert out["in_span"] == pytest.approx(s_**2 / 2, rel=1e-14)
    assert out["orthogonal"] == pytest.approx(t_**2 / 2, rel=1e-14)
    # Tr Sigma_B = (4 + 4 + 4) / 3 = 4 (balanced): the normalised parts divide by it
    norm = within_class_split(stats_of(H, y), normalize=True)
    assert (norm["in_span"], norm["orthogonal"]) == pytest.approx((s_**2 / 8, t_**2 / 8), rel=1e-14)


@pytest.mark.parametrize("K,counts,d", CONFIGS)
def test_within_class_split_rotation_translation_invariant_and_quadratic_in_scale(rng, K, counts, d):
    H, y = make_data(rng, K, None, d, counts=counts)
    Q, _ = np.linalg.qr(rng.normal(size=(d, d)))
    base = within_class_split(stats_of(H, y))
    moved = within_class_split(stats_of(H @ Q.T + 5 * rng.normal(size=d), y))
    scaled = within_class_split(stats_of(3.0 * H, y))
    tw = base["in_span"] + base["orthogonal"]
    for part in ("in_span", "orthogonal"):
        assert moved[part] == pytest.approx(base[part], rel=1e-9, abs=1e-12 * tw)
        assert scaled[part] == pytest.approx(9.0 * base[part], rel=1e-9, abs=1e-12 * tw)
    assert moved["rank"] == scaled["rank"] == base["rank"]


# ---------------- exact geometries
@pytest.mark.parametrize("K,d", [(2, 1), (3, 2), (5, 4), (10, 16), (4, 50)])
def test_exact_etf_collapse(K, d):
    M = simplex_etf(K, d, scale=3.0, seed=1)
    y = np.repeat(np.arange(K), 7)
    s = stats_of(M[y], y)
    assert vci(s) == 0.0  # exactly, not -0.005 [Xu & Liu 2023]
    assert vci(s, weighting="balanced") == pytest.approx(0.0, abs=1e-13)
    assert nc1(s) == 0.0 and trace_ratio(s) == 0.0 and fuzziness(s) == 0.0
    assert probe_mse_optimal(s) == pytest.approx(0.0, abs=1e-13)
    split = within_class_split(s)
    assert split == {"in_span": 0.0, "orthogonal": 0.0, "rank": K - 1}


def test_etf_with_tiny_noise_gives_tiny_nc1(rng):
    K, d, n = 6, 9, 50
    M = simplex_etf(K, d, seed=3)
    y = np.repeat(np.arange(K), n)
    scaled = []
    for eps, bound in ((1e-3, 1e-4), (1e-6, 1e-10)):
        s = stats_of(M[y] + eps * rng.normal(size=(K * n, d)), y)
        # Sigma_B = I_(K-1 span) / (K - 1); Sigma_W ~ eps^2 I, so nc1 ~ (K - 1)^2 eps^2 / K
        assert 0 < nc1(s) < bound
        # VCI ~ (K - 1) eps^2 (its V_B part): keeps relative accuracy although cond(Sigma_T) ~ 1e11 at 1e-6
        # (the Sigma_T^+ form alone gives -2.4e-5 there)
        assert 0 < vci(s) < 1e3 * eps**2
        assert nc1(s) == pytest.approx((K - 1) ** 2 * eps**2 / K, rel=0.3)
        scaled.append(vci(s) / eps**2)
    assert scaled[1] == pytest.approx(scaled[0], rel=0.2)


def test_vci_collapsed_d_less_than_k_minus_1(rng):
    K, d = 10, 4  # [Xu & Liu 2023, Thm. 5.2] test (iv): Tr = p = rank, VCI = 0
    M = rng.normal(size=(K, d))
    y = np.repeat(np.arange(K), 3)
    s = stats_of(M[y], y)
    assert vci(s) == 0.0
    assert probe_mse_optimal(s) == pytest.approx(0.5 - 0.5 / K - d / (2 * K), abs=1e-13)


def test_vci_zero_without_collapse_when_noise_avoids_vb(rng):
    """[Xu & Liu 2023, Thm. 5.2] case (iii): VCI = 0 although Sigma_W is large (noise in a complement of V_B)."""
    K, d, n = 4, 10, 30
    M = simplex_etf(K, d, scale=2.0)  # spans the first K - 1 coordinates
    y = np.repeat(np.arange(K), n)
    noise = np.zeros((K * n, d))
    noise[:, K - 1 :] = 5 * rng.normal(size=(K * n, d - K + 1))
    G = np.eye(d) + 0.3 * np.triu(rng.normal(size=(d, d)), 1)  # generic complement of V_B
    s = stats_of(M[y] + noise @ G.T, y)
    assert np.linalg.norm(s.sigma_w()) > 10
    assert abs(vci(s)) < 1e-12
    assert within_class_split(s)["in_span"] > 1  # but NC1 sees the V_B part of the noise
    assert nc1(s) > 0.1


# ---------------- invariances
def _well_conditioned(rng, d):
    Q1, _ = np.linalg.qr(rng.normal(size=(d, d)))
    Q2, _ = np.linalg.qr(rng.normal(size=(d, d)))
    return (Q1 * np.exp(rng.uniform(-1, 1, size=d))) @ Q2


@settings(max_examples=25, deadline=None)
@given(
    K=st.integers(2, 5),
    n=st.integers(1, 6),
    d=st.integers(1, 7),
    mode=st.sampled_from(["full", "subspace", "wide"]),
    seed=st.integers(0, 2**32 - 1),
)
def test_vci_invariant_under_invertible_affine_maps(K, n, d, mode, seed):
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(K), n)
    N = y.size
    if mode == "wide":  # d > N: Sigma_T rank-deficient
        d = N + 1 + int(rng.integers(0, 3))
    H = 2 * rng.normal(size=(K, d))[y] + rng.normal(size=(N, d))
    if mode == "subspace" and d >= 2:  # features in a random (d - 1)-dim subspace
        H = H[:, : d - 1] @ rng.normal(size=(d - 1, d))
    U = _well_conditioned(rng, d)
    c = 3 * rng.normal(size=d)
    v0 = vci(stats_of(H, y, K))
    v1 = vci(stats_of(H @ U.T + c, y, K))
    assert 0 - 1e-9 <= v0 <= 1 + 1e-9
    assert v1 == pytest.approx(v0, abs=1e-8)
    assert vci(stats_of(H @ U.T + c, y, K), weighting="balanced") == pytest.approx(v0, abs=1e-8)


@settings(max_examples=25, deadline=None)
@given(K=st.integers(2, 5), n=st.integers(2, 6), d=st.integers(1, 7), seed=st.integers(0, 2**32 - 1))
def test_nc1_trace_ratio_invariant_under_rotation_scaling_translation(K, n, d, seed):
    rng = np.random.default_rng(seed)
    H, y = make_data(rng, K, n, d)
    Q, _ = np.linalg.qr(rng.normal(size=(d, d)))
    a = float(np.exp(rng.uniform(-3, 3)))
    H2 = a * H @ Q.T + 10 * rng.normal(size=d)
    s, s2 = stats_of(H, y), stats_of(H2, y)
    assert nc1(s2) == pytest.approx(nc1(s), rel=1e-7)
    assert trace_ratio(s2) == pytest.approx(trace_ratio(s), rel=1e-9)
    assert within_class_split(s2, normalize=True)["in_span"] == pytest.approx(
        within_class_split(s, normalize=True)["in_span"], rel=1e-7, abs=1e-12
    )


def _obs42_data():
    """K = 2, d = 2 features with Sigma_B = [[1, 0], [0, 0]] and Sigma_W = I (balanced), exactly."""
    r2 = np.sqrt(2.0)
    dev = np.array([[r2, 0], [-r2, 0], [0, r2], [0, -r2]])
    mu = np.array([[1.0, 0.0], [-1.0, 0.0]])
    H = np.vstack([mu[0] + dev, mu[1] + dev])
    y = np.repeat([0, 1], 4)
    return H, y


def test_fuzziness_obs42_counterexample():
    H, y = _obs42_data()
    s = stats_of(H, y)
    np.testing.assert_allclose(s.sigma_b(), [[1, 0], [0, 0]], atol=1e-15)
    np.testing.assert_allclose(s.sigma_w(), np.eye(2), atol=1e-15)
    U = np.array([[1.0, 1.0], [0.0, 1.0]])
    s2 = stats_of(H @ U.T, y)
    assert fuzziness(s) == pytest.approx(1.0, rel=1e-14)
    assert fuzziness(s2) == pytest.approx(2.0, rel=1e-14)
    assert nc1(s2) == pytest.approx(1.0, rel=1e-14)  # /K
    # VCI does not move: Tr(Sigma_T^+ Sigma_B) = 1 / (1 + 1) on both sides
    assert vci(s) == pytest.approx(0.5, rel=1e-14) and vci(s2) == pytest.approx(0.5, rel=1e-14)


def test_fuzziness_invariant_under_block_maps_but_not_general(rng):
    """[Xu & Liu 2023] Obs. 4.2: maps acting separately on V_B and V_B^perp keep Fuzziness."""
    K, n, d = 3, 30, 5
    H, y = make_data(rng, K, n, d)
    s = stats_of(H, y)
    Q = np.linalg.eigh(s.sigma_b())[1][:, ::-1]  # first K - 1 columns span V_B
    A, B = rng.normal(size=(K - 1, K - 1)), rng.normal(size=(d - K + 1, d - K + 1))
    blk = np.zeros((d, d))
    blk[: K - 1, : K - 1], blk[K - 1 :, K - 1 :] = A, B
    U_block = Q @ blk @ Q.T
    assert fuzziness(stats_of(H @ U_block.T, y)) == pytest.approx(fuzziness(s), rel=1e-8)
    assert abs(fuzziness(stats_of(H @ rng.normal(size=(d, d)).T, y)) - fuzziness(s)) > 1e-3
    assert vci(stats_of(H @ U_block.T, y)) == pytest.approx(vci(s), abs=1e-10)


def test_trace_ratio_not_invariant_under_general_linear_map(rng):
    H, y = make_data(rng, 4, 20, 6)
    U = rng.normal(size=(6, 6))
    assert abs(trace_ratio(stats_of(H @ U.T, y)) - trace_ratio(stats_of(H, y))) > 1e-3


def test_vci_changes_under_per_sample_scaling(rng):
    """[Xu & Liu 2023] Test E: per-sample scaling is not linear; VCI does not claim invariance to it."""
    H, y = make_data(rng, 4, 25, 6)
    scale = np.exp(rng.normal(size=(H.shape[0], 1)))
    assert abs(vci(stats_of(H * scale, y)) - vci(stats_of(H, y))) > 1e-3


# ---------------- [Xu & Liu 2023] identities
@pytest.mark.parametrize("K,n,d", [(5, 40, 8), (3, 10, 2), (2, 25, 1), (8, 6, 12)])
def test_vci_equals_scaled_optimal_probe_loss(rng, K, n, d):
    """[Xu & Liu 2023, Thm. 5.1] with rank(Sigma_B) = K - 1: VCI = 1 - Tr/(K-1) and L* = (1 - 1/K - Tr/K)/2,
    hence VCI = 2 K L* / (K - 1)."""
    H, y = make_data(rng, K, n, d)
    s = stats_of(H, y)
    L = probe_mse_lstsq(H, y)
    assert probe_mse_optimal(s) == pytest.approx(L, rel=RTOL)
    assert vci(s) == pytest.approx(2 * K * L / (K - 1), rel=1e-9)


def test_vci_empirical_weighting_is_balanced_target_probe_on_imbalanced_data(rng):
    """[derived] With weighting='empirical', VCI = 2 L~ / (K - 1), L~ the optimal MSE probe loss for targets
    e_k / sqrt(pi_k): exact on imbalanced data (Tr(Sigma_T^+ Sigma_B^emp) is Pillai's trace)."""
    K, d = 4, 6
    H, y = make_data(rng, K, None, d, counts=[50, 10, 25, 7])
    s = stats_of(H, y)
    N = H.shape[0]
    pi = np.bincount(y) / N
    X = np.hstack([H, np.ones((N, 1))])
    T = np.eye(K)[y] / np.sqrt(pi)
    beta = np.linalg.lstsq(X, T, rcond=None)[0]
    L_tilde = np.sum((X @ beta - T) ** 2) / (2 * N)
    assert vci(s) == pytest.approx(2 * L_tilde / (K - 1), rel=1e-9)
    # and the general closed form of the unweighted probe [Xu & Liu 2023]
    assert probe_mse_optimal(s) == pytest.approx(probe_mse_lstsq(H, y), rel=RTOL)
    # Pillai's trace: sum of squared canonical correlations between features and one-hot labels
    Xc = H - H.mean(axis=0)
    Yc = (np.eye(K)[y] - pi)[:, : K - 1]
    rho = np.linalg.svd(np.linalg.qr(Xc)[0].T @ np.linalg.qr(Yc)[0], compute_uv=False)
    assert (1 - vci(s)) * (K - 1) == pytest.approx(np.sum(rho**2), rel=1e-9)


def test_vci_bounds_and_jensen_bound(rng):
    """0 <= VCI <= 1 (Thm 5.2) and VCI <= F_raw / (r + F_raw) ([Xu & Liu 2023, Def. 5.3] (c))."""
    for _ in range(30):
        K, d, n = int(rng.integers(2, 7)), int(rng.integers(1, 9)), int(rng.integers(2, 9))
        H, y = make_data(rng, K, n, d, sep=float(rng.uniform(0.1, 3)))
        s = stats_of(H, y)
        v, F, r = vci(s), fuzziness(s), min(d, K - 1)
        assert -1e-12 <= v <= 1 + 1e-12
        assert v <= F / (r + F) + 1e-10


def test_vci_pure_noise_expectation():
    """Pure Gaussian noise (no class signal), d >= K - 1: Tr(Sigma_T^+ Sigma_B) is Pillai's trace under the
    null, E = d (K - 1) / (N - 1) exactly (exchangeability of the N - 1 Helmert rows), so E[VCI] =
    1 - d / (N - 1) (the [Xu & Liu 2023] 1 - p / (K N) up to the -1). Over 100 replicates with K = 10, N = 2000, d = 16
    the trace has mean 0.07204 and sd ~0.0085 (~ sqrt(2 d (K - 1)) / N), so the replicate mean has sd ~8.5e-4:
    tolerance 4e-3 (~4.7 sd)."""
    rng = np.random.default_rng(7)
    K, N, d = 10, 2000, 16
    y = np.repeat(np.arange(K), N // K)
    traces = [(1 - vci(stats_of(rng.normal(size=(N, d)), y))) * (K - 1) for _ in range(100)]
    expected = d * (K - 1) / (N - 1)
    assert np.mean(traces) == pytest.approx(expected, abs=4e-3)
    assert np.mean([1 - t / (K - 1) for t in traces]) == pytest.approx(1 - d / (N - 1), abs=5e-4)


@pytest.mark.parametrize("d", [19, 20, 40])
def test_vci_zero_when_d_at_least_n_minus_1(rng, d):
    """[Xu & Liu 2023]: with d >= N - 1 least squares interpolates the labels, VCI = 0 (K = 4, N = 20)."""
    K, n = 4, 5
    y = np.repeat(np.arange(K), n)
    s = stats_of(rng.normal(size=(K * n, d)), y)
    assert vci(s) == pytest.approx(0.0, abs=1e-9)
    assert probe_mse_optimal(s) == pytest.approx(0.0, abs=1e-9)


# ---------------- degenerate inputs
def test_sigma_b_zero_values():
    s = collapsed_stats_zero_sb(K=3, d=4)
    # class means equal up to roundoff: Tr Sigma_B ~ 1e-32, not 0; must still read as "no separation"
    assert s.trace_b() < 1e-30 and s.trace_w() > 0
    assert nc1(s) == float("inf") and fuzziness(s) == float("inf") and trace_ratio(s) == float("inf")
    assert nc1(s, rank="numerical") == float("inf")
    assert vci(s) == 1.0 and vci(s, rank="numerical") == 1.0 and vci(s, weighting="balanced") == 1.0
    split = within_class_split(s)
    assert split["in_span"] == 0.0 and split["rank"] == 0
    assert split["orthogonal"] == pytest.approx(s.trace_w(), rel=1e-14)
    with pytest.raises(ValueError, match="Tr Sigma_B = 0"):
        within_class_split(s, normalize=True)
    assert probe_mse_optimal(s) == pytest.approx(0.5 - 0.5 / 3, rel=1e-12)


def test_all_identical_features():
    K, n, d = 4, 3, 5
    H = np.tile(np.arange(1.0, d + 1), (K * n, 1))
    y = np.repeat(np.arange(K), n)
    s = stats_of(H, y)
    assert nc1(s) == float("inf") and trace_ratio(s) == float("inf") and fuzziness(s) == float("inf")
    assert vci(s) == 1.0
    assert within_class_split(s) == {"in_span": 0.0, "orthogonal": 0.0, "rank": 0}
    assert probe_mse_optimal(s) == pytest.approx(0.5 - 0.5 / K, rel=1e-12)
    assert probe_mse_lstsq(H, y) == pytest.approx(0.5 - 0.5 / K, rel=1e-12)


def test_k2_d1_closed_form():
    """K = 2, d = 1: Sigma_B = delta^2 / 4 (means +-delta/2), Sigma_W = sigma^2: nc1 = 2 sigma^2 / delta^2,
    VCI = 1 - (delta^2/4) / (sigma^2 + delta^2/4)."""
    H = np.array([[-2.0], [0.0], [2.0], [4.0]])  # class 0: mean -1, class 1: mean 3 -> delta = 4, sigma^2 = 1
    y = np.array([0, 0, 1, 1])
    s = stats_of(H, y)
    assert nc1(s) == pytest.approx(1.0 / 4 / 2, rel=1e-14)
    assert trace_ratio(s) == pytest.approx(1.0 / 4, rel=1e-14)
    assert vci(s) == pytest.approx(1 - 4 / 5, rel=1e-14)
    assert within_class_split(s) == {"in_span": pytest.approx(1.0), "orthogonal": 0.0, "rank": 1}


def test_empty_class_raises_naming_the_class(rng):
    H, y = make_data(rng, 3, 5, 4)
    s = stats_of(H, y, K=5)  # classes 3 and 4 never seen
    for fn in (nc1, fuzziness, trace_ratio, vci, within_class_split):
        with pytest.raises(EmptyClassError, match=r"classes 3, 4"):
            fn(s)
    assert vci(s.drop_empty()) == vci(stats_of(H, y))


def test_light_mode(rng):
    H, y = make_data(rng, 4, 10, 6)
    light, full = stats_of(H, y, track="light"), stats_of(H, y)
    assert trace_ratio(light) == pytest.approx(trace_ratio(full), rel=1e-13)
    for fn in (nc1, fuzziness, vci, within_class_split):
        with pytest.raises(ValueError, match="track='full'"):
            fn(light)


def test_bad_arguments(rng):
    H, y = make_data(rng, 3, 5, 4)
    s = stats_of(H, y)
    with pytest.raises(ValueError, match="rank must be"):
        vci(s, rank=0)
    with pytest.raises(ValueError, match="rank must be"):
        vci(s, rank="max")
    with pytest.raises(ValueError, match="rank must be"):
        nc1(s, rank=0)
    with pytest.raises(ValueError, match="weighting"):
        nc1(s, weighting="uniform")
    with pytest.raises(ValueError, match="weighting"):
        vci(s, weighting="uniform")
    with pytest.raises(TypeError, match="ClassStats"):
        trace_ratio(H)
    with pytest.raises(ValueError, match="no sample"):
        trace_ratio(ClassStats(3, 4))


@pytest.mark.parametrize("weighting", ["balanced", "empirical"])
def test_vci_ill_conditioned_within_class_covariance_uses_total_form(rng, weighting):
    """A within-class spread of 1e-4 along a direction the means vary in: cond(Sigma_W) ~ 1e8 while Sigma_T (lifted by
    Sigma_B there) is better conditioned, so vci takes the Sigma_T form (``whitened_between`` is None). Imbalanced
    classes, so the balanced case also runs its Sigma_B^emp - Sigma_B^bal correction."""
    from nclab.metrics.common import whitened_between

    K, d = 4, 5
    counts = np.array([9, 14, 21, 30])
    y = np.repeat(np.arange(K), counts)
    mu = np.zeros((K, d))
    mu[:, :3] = 3 * rng.normal(size=(K, 3))
    H = mu[y] + rng.normal(size=(y.size, d)) * np.array([1e-4, 1, 1, 1, 1])
    s = stats_of(H, y)
    assert whitened_between(s, 1e-12) is None
    ref = ref_covs(H, y, K)
    expected = 1 - np.trace(ref_pinv(ref["st"], d) @ ref[weighting]) / min(d, K - 1)
    # Sigma_T is well conditioned here (the means vary along the thin direction): both routes keep ~15 digits
    assert vci(s, weighting=weighting) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("rank", [None, "numerical", 2])
def test_psd_pinv_matrix_against_svd_pseudo_inverse(rng, rank):
    """PsdPinv.pinv (formed on demand) equals the SVD pseudo-inverse truncated at the same rank, satisfies the
    Moore-Penrose identities A A+ A = A, A+ A A+ = A+, and agrees with trace_with (which never forms it)."""
    from nclab.metrics import psd_pinv

    d, true_rank = 6, 4
    F = rng.normal(size=(d, true_rank)) * np.array([3.0, 1.0, 0.5, 0.1])
    A = F @ F.T  # PSD of rank 4; two eigenvalues are zero up to roundoff
    p = psd_pinv(A, rank=rank)
    r = {None: 4, "numerical": 4, 2: 2}[rank]
    assert p.rank == r
    U, sv, _ = np.linalg.svd(A)
    expected = (U[:, :r] / sv[:r]) @ U[:, :r].T
    np.testing.assert_allclose(p.pinv, expected, rtol=1e-9, atol=1e-9 * np.abs(expected).max())
    if r == true_rank:
        np.testing.assert_allclose(A @ p.pinv @ A, A, atol=1e-10 * np.abs(A).max())
        np.testing.assert_allclose(p.pinv @ A @ p.pinv, p.pinv, atol=1e-9 * np.abs(p.pinv).max())
        np.testing.assert_allclose(p.pinv, np.linalg.pinv(A, rcond=1e-12, hermitian=True), rtol=1e-8)
    B = rng.normal(size=(d, d))
    B = B @ B.T
    assert p.trace_with(B) == pytest.approx(float(np.trace(p.pinv @ B)), rel=1e-10)


@pytest.mark.parametrize("weighting", ["balanced", "empirical"])
def test_vci_roundoff_below_zero_is_clipped_when_features_interpolate(weighting):
    """d >= N - 1 (3 classes of 2 samples in R^8): the labels are an affine function of the features, so
    Tr(Sigma_T^+ Sigma_B) = rank exactly and VCI = 0 [Xu & Liu 2023, Thm. 5.2]; the float64 value lands ~1e-15 on
    either side of 0, and the documented clip returns exactly 0.0 for the negative side (never a negative VCI)."""
    K, n, d = 3, 2, 8
    y = np.repeat(np.arange(K), n)
    for seed in range(10):
        H = np.random.default_rng(seed).normal(size=(K * n, d))
        v = vci(stats_of(H, y, K), weighting=weighting)
        assert 0.0 <= v <= 1e-12
