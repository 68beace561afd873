"""Spherical UFM solvers of [Jiang et al. 2024]: HardMax, CE-UFM on the sphere, WD-UFM (the codes:
test_geometry_codes.py)."""

import math

import numpy as np
import pytest

from nclab.geometry import hardmax_value, octahedron, one_vs_one, optimal_features, rho_one_vs_rest, simplex_etf
from nclab.ufm.spherical import ce_ufm_sphere, hardmax_ufm, log_mean_ce, smoothed_hardmax, wd_ufm


def _unit_batch(rng, *shape):
    import torch

    X = torch.tensor(rng.normal(size=shape))
    return X / X.norm(dim=-1, keepdim=True)


def _usual_mean_ce(W, H, tau):
    """The textbook float64 form LSE_j(z_j / tau) - z_k / tau, averaged: what log_mean_ce replaces."""
    import torch

    Z = torch.einsum("...kid,...jd->...kij", H, W) / tau
    own = torch.diagonal(Z, dim1=-3, dim2=-1).transpose(-1, -2)
    return (torch.logsumexp(Z, dim=-1) - own).mean(dim=(-1, -2))


def _mp_log_mean_ce(W, H, tau):
    """log of the mean CE at 60 digits from the margins (mpmath: no underflow at any tau)."""
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 60
    K, n = H.shape[0], H.shape[1]
    total = mpmath.mpf(0)
    for k in range(K):
        for i in range(n):
            m = [mpmath.mpf(float((W[k] - W[j]) @ H[k, i])) for j in range(K) if j != k]  # margins, exact doubles
            total += mpmath.log1p(mpmath.fsum(mpmath.exp(-mj / mpmath.mpf(tau)) for mj in m))
    return float(mpmath.log(total / (K * n)))


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


def test_log_mean_ce_equals_the_usual_ce_where_that_is_representable():
    rng = np.random.default_rng(0)
    W, H = _unit_batch(rng, 3, 7, 3), _unit_batch(rng, 3, 7, 4, 3)
    for tau in (2.0, 1.0, 0.5, 0.1, 0.05):
        usual = _usual_mean_ce(W, H, tau).numpy()
        ours = np.exp(log_mean_ce(W, H, tau).numpy())
        # the usual form's rounding: a few eps of the logits' size 1 / tau, per term
        np.testing.assert_allclose(ours, usual, rtol=1e-13, atol=8 * np.finfo(float).eps / tau)


def test_log_mean_ce_is_exact_where_the_usual_ce_rounds_to_zero():
    import torch

    rng = np.random.default_rng(1)
    W = torch.tensor(octahedron())  # margins about 1 for features near their class vector
    H = W.unsqueeze(-2) + 0.05 * _unit_batch(rng, 6, 2, 3)
    H = H / H.norm(dim=-1, keepdim=True)
    for tau in (0.02, 1e-3, 1e-5):
        assert float(_usual_mean_ce(W, H, tau)) == 0.0  # the catastrophe: exactly 0, and no gradient
        assert float(log_mean_ce(W, H, tau)) == pytest.approx(_mp_log_mean_ce(W.numpy(), H.numpy(), tau), rel=1e-13)
    # closed form: the simplex with h_k = w_k has every margin 1 + 1/(K-1), so the mean CE is
    # log(1 + (K - 1) exp(-m / tau)) and its log is log(K - 1) - m / tau to rounding at tau = 1e-3
    E = torch.tensor(simplex_etf(4, 3))
    m = 1 + 1 / 3
    assert float(log_mean_ce(E, E.unsqueeze(-2), 1e-3)) == pytest.approx(math.log(3) - m / 1e-3, rel=1e-15)
    # the gradient of tau * log(mean CE) is a convex combination of margin gradients: order 1, finite
    Wg = W.clone().requires_grad_(True)
    (1e-5 * log_mean_ce(Wg, H, 1e-5)).backward()
    g = Wg.grad
    assert torch.isfinite(g).all() and 0.1 < float(g.norm()) < 10.0


def test_ce_ufm_sphere_d2_equals_polygon_at_every_tau():
    res = ce_ufm_sphere(2, 6, 2, taus=(1.0, 0.1, 0.02), restarts=2, steps=300, seed=0)
    np.testing.assert_allclose(res.max_cos, 0.5, atol=1e-3)
    np.testing.assert_allclose(res.rho, 0.5, atol=1e-3)
    assert np.all(np.diff(res.losses) < 0)  # smaller tau, smaller CE at a separated optimum
    np.testing.assert_allclose(np.exp(res.log_losses), res.losses, rtol=1e-15)
    # features collapse onto the classifier (GNC1 + GNC3)
    H = res.Hs[-1]
    np.testing.assert_allclose(H, np.repeat(res.Ws[-1][:, None, :], 2, axis=1), atol=1e-2)


def test_ce_ufm_sphere_approaches_the_softmax_code_linearly_in_tau():
    # (3, 7), far below the tau where the usual CE rounds to 0: the margin gap to the Softmax Code
    # (rho* = 0.7898616873) shrinks in proportion to tau, so the solver converges at every stage
    res = ce_ufm_sphere(3, 7, 1, taus=(1.0, 0.05, 0.01, 0.002, 5e-4), restarts=1, steps=300, seed=0)
    gap = 0.7898616872693967 - res.rho[2:]
    np.testing.assert_allclose(gap / res.taus[2:], gap[0] / res.taus[2], rtol=0.02)
    assert res.losses[-1] == 0.0 and np.isfinite(res.log_losses).all()  # the mean CE itself is below 1e-308
    assert res.max_cos[-1] - 0.2101383127306 < 0.002 * 0.2101383127306


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
