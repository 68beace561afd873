"""Accuracy near collapse: quantities that are differences of nearly equal numbers in the textbook form."""

from fractions import Fraction

import numpy as np
import pytest

from nclab.geometry import simplex_etf
from nclab.metrics import probe_mse_lstsq, probe_mse_optimal, vci, within_class_split
from nclab.stats import ClassStats
from tests.conftest import brute_stats


@pytest.mark.parametrize("eps", [1e-2, 1e-4, 1e-6])
def test_probe_identity_holds_to_relative_precision_near_collapse(eps):
    # [Xu & Liu 2023, Thm. 5.1]: VCI = 2K L* / (K-1) on balanced data; both sides ~ eps^2, compared relatively
    rng = np.random.default_rng(0)
    K, d, n = 6, 9, 50
    y = np.repeat(np.arange(K), n)
    H = simplex_etf(K, d)[y] + eps * rng.normal(size=(K * n, d))
    s = ClassStats.from_arrays(H, y)
    L = probe_mse_optimal(s)
    assert 0.1 * eps**2 < L < 10 * eps**2  # L* scales like the within-class variance
    assert 2 * K * L / (K - 1) == pytest.approx(vci(s), rel=1e-9, abs=0)
    assert L == pytest.approx(probe_mse_lstsq(H, y), rel=1e-6, abs=0)


def test_probe_closed_form_near_collapse_on_imbalanced_classes():
    rng = np.random.default_rng(1)
    K, d = 6, 9
    y = rng.choice(K, size=400, p=np.arange(1, K + 1) / 21)
    H = simplex_etf(K, d)[y] + 1e-5 * rng.normal(size=(400, d))
    assert probe_mse_optimal(ClassStats.from_arrays(H, y)) == pytest.approx(probe_mse_lstsq(H, y), rel=1e-6, abs=0)


def test_within_class_split_keeps_the_digits_of_a_tiny_orthogonal_part():
    # within-class variance 1 inside V_B and 1e-7 outside: the small part is summed directly, not subtracted
    rng = np.random.default_rng(1)
    K, d, n = 4, 10, 400
    mu = np.zeros((K, d))
    mu[:, :3] = 5 * rng.normal(size=(K, 3))
    y = np.repeat(np.arange(K), n)
    noise = rng.normal(size=(K * n, d))
    noise[:, 3:] *= np.sqrt(1e-7)
    H = mu[y] + noise
    out = within_class_split(ClassStats.from_arrays(H, y))
    means = np.stack([H[y == k].mean(0) for k in range(K)])
    U = np.linalg.svd((means - means.mean(0)).T, full_matrices=False)[0][:, : K - 1]
    D = H - means[y]
    perp = D - (D @ U) @ U.T
    assert out["orthogonal"] == pytest.approx((perp**2).sum() / len(y), rel=1e-9)
    assert out["in_span"] == pytest.approx(((D @ U) ** 2).sum() / len(y), rel=1e-12, abs=0)
    assert out["rank"] == K - 1


def test_vci_is_zero_not_negative_when_d_exceeds_n():
    # d >= N - 1: the fitted probe interpolates, VCI = 0 exactly [Xu & Liu 2023]; roundoff must not go below 0
    rng = np.random.default_rng(0)
    H = rng.normal(size=(512, 512)).astype(np.float32)
    y = rng.integers(0, 10, 512)
    v = vci(ClassStats.from_arrays(H, y))
    assert v == 0.0 or 0.0 < v < 1e-9


# ---------------- relative accuracy against an exact rational reference
def _exact_traces(A, *Bs):
    """Tr(A^{-1} B) for each B, in exact rational arithmetic (Gaussian elimination on Fractions), A nonsingular."""
    d = len(A)
    M = [[Fraction(a) for a in row] + [Fraction(b) for B in Bs for b in B[i]] for i, row in enumerate(A)]
    for i in range(d):
        p = next(r for r in range(i, d) if M[r][i] != 0)
        M[i], M[p] = M[p], M[i]
        for r in range(i + 1, d):
            f = M[r][i] / M[i][i]
            if f:
                M[r] = [a - f * b for a, b in zip(M[r], M[i], strict=True)]
    diag = [Fraction(0)] * len(Bs)
    for c in range(d * len(Bs)):
        x = [Fraction(0)] * d
        for i in reversed(range(d)):
            x[i] = (M[i][d + c] - sum(M[i][j] * x[j] for j in range(i + 1, d))) / M[i][i]
        diag[c // d] += x[c % d]
    return diag


def exact_vci_and_probe(H, y, K):
    """VCI (empirical weighting, rank min(d, K-1)) and L* of the float64 features H, exactly.

    Every float64 is an integer multiple of a power of two, so X = H * 2^s is an integer matrix; N^2 4^s Sigma_T =
    N X^T X - S S^T (S the column sums) is an integer matrix and the class-mean terms are rational: no rounding
    anywhere until the final conversion to float. Needs a nonsingular Sigma_T.
    """
    ratios = [v.as_integer_ratio() for v in np.asarray(H, dtype=np.float64).ravel().tolist()]
    den = max(q for _, q in ratios)
    X = np.array([p * (den // q) for p, q in ratios], dtype=object).reshape(H.shape)
    N, d = X.shape
    counts = [int(c) for c in np.bincount(y, minlength=K)]
    sums = [X[y == k].sum(axis=0) for k in range(K)]
    total = X.sum(axis=0)
    A = N * (X.T @ X) - np.outer(total, total)

    def mean_outer(power):  # N^2 4^s sum_k pi_k^power m_k m_k^T, m_k the centred class means
        out = np.zeros((d, d), dtype=object)
        for k in range(K):
            m = np.array(
                [Fraction(int(a), counts[k]) - Fraction(int(b), N) for a, b in zip(sums[k], total, strict=True)]
            )
            out += Fraction(counts[k], N) ** power * N * N * np.outer(m, m)
        return out

    trace_b, trace_q = _exact_traces(A, mean_outer(1), mean_outer(2))
    value_vci = 1 - trace_b / min(d, K - 1)
    value_probe = (1 - sum(Fraction(c, N) ** 2 for c in counts) - trace_q) / 2
    return float(value_vci), float(value_probe)


def anisotropic_near_collapse(seed, K, d, counts, spread, cond):
    """Class means 3 + N(0, 1); within-class noise of scale `spread` with cond(Sigma_W) ~ `cond`, rotated."""
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(K), counts)
    mu = 3.0 + rng.normal(size=(K, d))
    Q = np.linalg.qr(rng.normal(size=(d, d)))[0]
    noise = (rng.normal(size=(y.size, d)) * np.logspace(0, -0.5 * np.log10(cond), d)) @ Q.T
    return mu[y] + spread * noise, y


def test_exact_reference_matches_textbook_vci_away_from_collapse():
    # the rational reference itself, where float64 textbook formulas are accurate (spread 1, cond 1)
    H, y = anisotropic_near_collapse(0, 4, 6, 30, 1.0, 1.0)
    ref = brute_stats(H, y, 4)
    textbook = 1 - np.trace(np.linalg.solve(ref["st"], ref["sb_emp"])) / 3
    assert exact_vci_and_probe(H, y, 4)[0] == pytest.approx(textbook, rel=1e-12, abs=0)


@pytest.mark.parametrize("cond", [1.0, 1e3, 1e6, 1e8])
def test_vci_and_probe_relative_accuracy_near_collapse(cond):
    # near collapse: with cond(Sigma_W) >~ 1e6 and spread <~ 1e-6 the whole of V_W falls under Sigma_T's 1e-12
    # eigenvalue cut, and the Sigma_T form (which discards it) was chosen: VCI off by 10^3, then by 100%
    K, d = 5, 12
    for e in range(2, 10):
        spread = 10.0**-e
        H, y = anisotropic_near_collapse(e, K, d, 40, spread, cond)
        s = ClassStats.from_arrays(H, y)
        exact_vci, exact_probe = exact_vci_and_probe(H, y, K)
        assert 0 < exact_vci < 10 * spread**2  # the exact value is tiny, positive: a relative test
        assert vci(s) == pytest.approx(exact_vci, rel=1e-6, abs=0), spread
        assert probe_mse_optimal(s) == pytest.approx(exact_probe, rel=1e-6, abs=0), spread


def test_vci_and_probe_issue_17_configuration():
    # K = 5, d = 12, n = 300, cond(Sigma_W) ~ 3e6, spread 1e-6; imbalanced counts exercise the general probe form
    for counts in (300, [150, 220, 300, 380, 450]):
        H, y = anisotropic_near_collapse(17, 5, 12, counts, 1e-6, 3e6)
        s = ClassStats.from_arrays(H, y)
        assert 1e6 < np.linalg.cond(s.sigma_w()) < 1e7
        exact_vci, exact_probe = exact_vci_and_probe(H, y, 5)
        assert vci(s) == pytest.approx(exact_vci, rel=1e-6, abs=0)
        assert probe_mse_optimal(s) == pytest.approx(exact_probe, rel=1e-6, abs=0)


def test_row_norms_are_numpy_norms_bit_for_bit():
    from nclab.metrics.common import row_norms

    rng = np.random.default_rng(3)
    # near-collapse magnitudes and a zero row: the same sums in the same order, so equal, not merely close
    V = np.vstack([1e6 + 1e-3 * rng.standard_normal((5, 37)), np.zeros((1, 37)), rng.standard_normal((4, 37))])
    assert np.array_equal(row_norms(V), np.linalg.norm(V, axis=1))
    assert row_norms(V)[5] == 0.0
