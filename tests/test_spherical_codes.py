"""Spherical UFM solvers of paper 003: Softmax Codes, Tammes codes, HardMax, CE-UFM on the sphere, WD-UFM."""

import math

import numpy as np
import pytest

from nclab.geometry import hardmax_value, one_vs_one, optimal_features, rho_one_vs_rest
from nclab.ufm.spherical import (
    ce_ufm_sphere,
    hardmax_ufm,
    smoothed_hardmax,
    softmax_code,
    softmax_code_search,
    tammes_search,
    wd_ufm,
)

FAST = {"restarts": 2, "steps": 600}


@pytest.mark.parametrize("K", [5, 7, 8])
def test_softmax_code_d2_is_regular_polygon(K):
    res = softmax_code_search(2, K, seed=0, **FAST)
    assert res.value == pytest.approx(1 - math.cos(2 * math.pi / K), abs=1e-4)
    ang = np.sort(np.mod(np.arctan2(res.W[:, 1], res.W[:, 0]), 2 * np.pi))
    gaps = np.diff(np.append(ang, ang[0] + 2 * np.pi))
    np.testing.assert_allclose(gaps, 2 * np.pi / K, atol=1e-2)
    assert res.rattlers.size == 0  # Thm 3.6


@pytest.mark.parametrize(("d", "K"), [(3, 4), (5, 6), (3, 3)])
def test_softmax_code_small_K_is_simplex_etf(d, K):
    res = softmax_code_search(d, K, seed=1, **FAST)
    assert res.value == pytest.approx(K / (K - 1), abs=1e-4)
    G = res.W @ res.W.T
    np.testing.assert_allclose(G[~np.eye(K, dtype=bool)], -1 / (K - 1), atol=1e-3)
    # GNC3 at the optimum (Thm 3.8): the optimal features are the code itself
    np.testing.assert_allclose(optimal_features(res.W), res.W, atol=1e-3)


def test_softmax_code_cross_polytope_regime_and_icosahedron():
    assert softmax_code_search(4, 7, seed=0, **FAST).value == pytest.approx(1.0, abs=1e-3)
    res = softmax_code_search(3, 12, seed=0, **FAST)
    assert res.value == pytest.approx(1 - 1 / math.sqrt(5), abs=1e-3)
    assert res.min_angle_deg == pytest.approx(63.435, abs=0.25)
    # certificate: exact QPs and the HardMax identity of Lemma C.4
    assert res.max_gap < 1e-8
    assert res.hardmax == pytest.approx(-res.rho_one_vs_rest, abs=1e-10)
    assert res.within_bounds is True


def test_softmax_code_d3_k7_k8_and_bounds():
    for K, best in ((7, 0.785), (8, 0.735)):
        res = softmax_code_search(3, K, seed=0, restarts=3, steps=600)
        assert res.value >= best
        assert res.bounds.lower <= res.value <= res.bounds.upper
        assert res.values.shape == (3,) and res.value == res.values.max()


def test_softmax_code_beats_the_spec_numerical_optimum_d20_k100():
    """Spec 003 lists rho >~ 0.696 (min angle 67.4 deg) for (d, K) = (20, 100); one certified restart reaches
    0.848 (81.3 deg; 4 restarts: 0.8487), so the spec's value is a weak local optimum (docs/geometry.md)."""
    res = softmax_code_search(20, 100, seed=0, restarts=1)
    assert res.value > 0.84 and res.min_angle_deg > 81.0
    assert res.max_gap < 1e-8 and res.hardmax == pytest.approx(-res.rho_one_vs_rest, abs=1e-10)
    assert res.within_bounds is True


def test_softmax_code_is_seeded_and_returns_unit_rows():
    W1 = softmax_code(3, 5, seed=4, restarts=1, steps=100)
    W2 = softmax_code(3, 5, seed=4, restarts=1, steps=100)
    np.testing.assert_array_equal(W1, W2)
    np.testing.assert_allclose(np.linalg.norm(W1, axis=1), 1.0)
    with pytest.raises(ValueError, match="restarts"):
        softmax_code(3, 5, restarts=0)


@pytest.mark.parametrize(("K", "angle"), [(4, 109.4712), (5, 90.0), (6, 90.0), (7, 77.87), (8, 74.8585), (12, 63.435)])
def test_tammes_d3_known_angles(K, angle):
    res = tammes_search(3, K, seed=0, **FAST)
    assert res.min_angle_deg == pytest.approx(angle, abs=0.25)
    assert res.value == pytest.approx(2 * math.sin(math.radians(res.min_angle_deg) / 2), abs=1e-12)
    assert res.rho_one_vs_rest <= res.rho_one_vs_one


def test_smoothed_hardmax_sandwich():
    import torch

    rng = np.random.default_rng(0)
    W = torch.tensor(rng.normal(size=(6, 3))).div_(1.0)
    W = W / W.norm(dim=-1, keepdim=True)
    H = torch.tensor(rng.normal(size=(6, 2, 3)))
    H = H / H.norm(dim=-1, keepdim=True)
    hm = hardmax_value(W.numpy(), H.numpy().reshape(12, 3), np.repeat(np.arange(6), 2))
    for tau in (1.0, 0.1, 0.01):
        s = float(smoothed_hardmax(W, H, tau))
        assert hm <= s <= hm + tau * math.log(2 * 6 * 5) + 1e-12  # Lemma A.1


def test_hardmax_ufm_value_is_minus_rho():
    W, _H, L = hardmax_ufm(2, 5, 2, seed=0, restarts=2, steps=600)
    rho = rho_one_vs_rest(W)
    assert rho == pytest.approx(1 - math.cos(2 * math.pi / 5), abs=1e-4)
    assert L >= -rho - 1e-12  # min_H L_HardMax(W, H) = -rho(W)
    assert L == pytest.approx(-rho, abs=1e-3)
    assert hardmax_value(W, optimal_features(W)) == pytest.approx(-rho, abs=1e-12)


def test_ce_ufm_sphere_d2_equals_polygon_at_every_tau():
    res = ce_ufm_sphere(2, 6, 2, taus=(1.0, 0.1, 0.02), restarts=2, steps=300, seed=0)
    np.testing.assert_allclose(res.max_cos, 0.5, atol=1e-3)
    np.testing.assert_allclose(res.rho, 0.5, atol=1e-3)
    assert np.all(np.diff(res.losses) < 0)  # smaller tau, smaller CE at a separated optimum
    # features collapse onto the classifier (GNC1 + GNC3)
    H = res.Hs[-1]
    np.testing.assert_allclose(H, np.repeat(res.Ws[-1][:, None, :], 2, axis=1), atol=1e-2)


def test_wd_ufm_self_dual_in_direction_not_in_length():
    # paper 003, Fig. B.1(c)/B.2 (K = 30, d = 2, n = 1): with weight decay the class means have unequal lengths
    # and the ratios ||w_k|| / ||hbar_k|| vary by class, while w_k stays parallel to hbar_k
    res = wd_ufm(2, 30, 1, lam=5e-3, seed=0)
    assert res.cosines.min() > 0.999
    assert np.std(res.mean_norms) / np.mean(res.mean_norms) > 0.01
    assert np.ptp(res.length_ratio) > 0.01
    # a small K keeps the regular polygon: the WD geometry changes only when many classes crowd the circle
    small = wd_ufm(2, 12, 1, lam=5e-3, seed=0)
    assert one_vs_one(small.W).min_angle_deg == pytest.approx(30.0, abs=1e-3)
