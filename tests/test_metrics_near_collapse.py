"""Accuracy near collapse: quantities that are differences of nearly equal numbers in the textbook form."""

import numpy as np
import pytest

from nclab.geometry import simplex_etf
from nclab.metrics import probe_mse_lstsq, probe_mse_optimal, vci, within_class_split
from nclab.stats import ClassStats


@pytest.mark.parametrize("eps", [1e-2, 1e-4, 1e-6])
def test_probe_identity_holds_to_relative_precision_near_collapse(eps):
    # paper 000 Thm 5.1: VCI = 2K L* / (K-1) on balanced data; both sides ~ eps^2, compared relatively
    rng = np.random.default_rng(0)
    K, d, n = 6, 9, 50
    y = np.repeat(np.arange(K), n)
    H = simplex_etf(K, d)[y] + eps * rng.normal(size=(K * n, d))
    s = ClassStats.from_arrays(H, y)
    L = probe_mse_optimal(s)
    assert 0.1 * eps**2 < L < 10 * eps**2  # L* scales like the within-class variance
    assert 2 * K * L / (K - 1) == pytest.approx(vci(s), rel=1e-9)
    assert L == pytest.approx(probe_mse_lstsq(H, y), rel=1e-6)


def test_probe_closed_form_near_collapse_on_imbalanced_classes():
    rng = np.random.default_rng(1)
    K, d = 6, 9
    y = rng.choice(K, size=400, p=np.arange(1, K + 1) / 21)
    H = simplex_etf(K, d)[y] + 1e-5 * rng.normal(size=(400, d))
    assert probe_mse_optimal(ClassStats.from_arrays(H, y)) == pytest.approx(probe_mse_lstsq(H, y), rel=1e-6)


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
    assert out["in_span"] == pytest.approx(((D @ U) ** 2).sum() / len(y), rel=1e-12)
    assert out["rank"] == K - 1


def test_vci_is_zero_not_negative_when_d_exceeds_n():
    # d >= N - 1: the fitted probe interpolates, VCI = 0 exactly (spec 000, P5); roundoff must not go below 0
    rng = np.random.default_rng(0)
    H = rng.normal(size=(512, 512)).astype(np.float32)
    y = rng.integers(0, 10, 512)
    v = vci(ClassStats.from_arrays(H, y))
    assert v == 0.0 or 0.0 < v < 1e-9
