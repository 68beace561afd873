"""Spherical UFM solvers of [Jiang et al. 2024]: HardMax, CE-UFM on the sphere, WD-UFM (the codes:
test_geometry_codes.py)."""

import math

import numpy as np
import pytest

from nclab.geometry import hardmax_value, one_vs_one, optimal_features, rho_one_vs_rest
from nclab.ufm.spherical import ce_ufm_sphere, hardmax_ufm, smoothed_hardmax, wd_ufm


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
    # [Jiang et al. 2024], Fig. B.1(c)/B.2 (K = 30, d = 2, n = 1): with weight decay the class means have unequal
    # lengths
    # and the ratios ||w_k|| / ||hbar_k|| vary by class, while w_k stays parallel to hbar_k
    res = wd_ufm(2, 30, 1, lam=5e-3, seed=0)
    assert res.cosines.min() > 0.999
    assert np.std(res.mean_norms) / np.mean(res.mean_norms) > 0.01
    assert np.ptp(res.length_ratio) > 0.01
    # a small K keeps the regular polygon: the WD geometry changes only when many classes crowd the circle
    small = wd_ufm(2, 12, 1, lam=5e-3, seed=0)
    assert one_vs_one(small.W).min_angle_deg == pytest.approx(30.0, abs=1e-3)
