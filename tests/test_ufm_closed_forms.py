"""Closed-form UFM optima ([Tirer & Bruna 2022] Thms 3.1, 3.2, 4.1, 4.2, 5.1; derived regularised-bias and CE forms)
against the float64 L-BFGS reference solver, regimes, structure of the minimisers and bad parameters."""

import math

import numpy as np
import pytest
from scipy.optimize import brentq, minimize_scalar

from nclab.ufm import closed_forms, evaluate, make_spec, solve
from nclab.ufm.models import class_labels

K = 4
L2 = dict(W=0.01, H=0.02)  # [Tirer & Bruna 2022] reference constants (c = 0.178885)
LX = dict(W1=0.005, W2=0.005, H1=0.005)


def class_means(H, K):
    return H.reshape(K, -1, H.shape[1]).mean(axis=1)


# ------------------------------------------------------------------ independently computed reference numbers
def test_spec_reference_values():
    # [Tirer & Bruna 2022, Sec. 6] defaults: K=4, d=20, n=50, all lambda = 5e-3
    lam = 5e-3
    o1 = closed_forms.optimum("mse-bias-free", K=4, n=50, d=20, lams=dict(W=lam, H=lam))
    # c = K sqrt(n lam_H lam_W) = 4 sqrt(50 * 25e-6) = sqrt(2) / 10 < 1: Thm 3.1's loss is c - c^2 / 2
    c = math.sqrt(2) / 10
    assert o1.loss == pytest.approx(c - c**2 / 2, rel=1e-14)  # 0.1314213562373095
    assert o1.constants["rho"] == pytest.approx(math.sqrt(1 / 50) * (1 - 0.1414213562373095), rel=1e-12)
    o2 = closed_forms.optimum("mse-bias", K=4, n=50, d=20, lams=dict(W=lam, H=lam))
    # Thm 3.2 (free bias): the bias absorbs the 1/K mean target, leaving (1 - 1/K) of the bias-free loss
    assert o2.loss == pytest.approx((1 - 1 / 4) * (c - c**2 / 2), rel=1e-14)  # 0.09856601717798213
    o3 = closed_forms.optimum("extended-linear", K=4, n=50, d=20, lams=dict(W1=lam, W2=lam, H1=lam))
    # Thm 4.1 reduces to one scalar per direction: with beta = (n lam_H1 lam_W1 lam_W2)^(1/3) (= lam n^(1/3) here)
    # and p = t^3 the product's singular value, L(t) = (1 - t^3)^2 / 2 + (3/2) K beta t^2; its nonzero stationary
    # point solves t^4 - t + K beta = 0, the larger root (the one in (4^(-1/3), 1]). Reference root by Brent's
    # method on that bracket (the code uses numpy.roots and Newton).
    Kbeta = 4 * lam * 50 ** (1 / 3)  # 0.0736806...
    t = brentq(lambda t: t**4 - t + Kbeta, 4 ** (-1 / 3), 1.0, xtol=1e-15, rtol=1e-15)
    assert o3.threshold == pytest.approx(Kbeta, rel=1e-14)
    assert o3.constants["t"] == pytest.approx(t, rel=1e-13)  # 0.974124
    assert o3.constants["p"] == pytest.approx(t**3, rel=1e-13)  # 0.924362
    loss3 = (1 - t**3) ** 2 / 2 + 1.5 * Kbeta * t**2
    assert o3.loss == pytest.approx(loss3, rel=1e-13)  # 0.10773571564864708
    # and the loss is the minimum of L(t) over t >= 0, by a bounded scalar search
    assert minimize_scalar(lambda t: (1 - t**3) ** 2 / 2 + 1.5 * Kbeta * t**2, bounds=(0, 2), method="bounded",
                           options={"xatol": 1e-10}).fun == pytest.approx(loss3, rel=1e-12)  # fmt: skip
    # the quartic's digits, independently: the objective evaluated at the minimiser built from t and p, and a
    # vanishing gradient there (the loss formula and the construction are separate code paths)
    spec3 = make_spec("extended-linear", K=4, n=50, d=20, lams=dict(W1=lam, W2=lam, H1=lam))
    ev3 = evaluate(spec3, o3.construct(seed=0))
    assert ev3.loss == pytest.approx(loss3, rel=1e-13)
    assert max(np.abs(g).max() for g in ev3.grads.values()) < 1e-12
    o4 = closed_forms.optimum("extended-relu", K=4, n=50, d=20, lams=dict(W1=lam, W2=lam, H1=lam))
    assert o4.loss == o3.loss
    # [Tirer & Bruna 2022]: Thm 4.1 with K=4, n=5, all lambda = 5e-3
    o5 = closed_forms.optimum("extended-linear", K=4, n=5, d=10, lams=LX)
    Kbeta5 = 4 * 5e-3 * 5 ** (1 / 3)  # the same reduction, n = 5
    t5 = brentq(lambda t: t**4 - t + Kbeta5, 4 ** (-1 / 3), 1.0, xtol=1e-15, rtol=1e-15)
    loss5 = (1 - t5**3) ** 2 / 2 + 1.5 * Kbeta5 * t5**2
    assert o5.loss == pytest.approx(loss5, rel=1e-13)  # 0.0507076242220576
    ev5 = evaluate(make_spec("extended-linear", K=4, n=5, d=10, lams=LX), o5.construct(seed=0))
    assert ev5.loss == pytest.approx(loss5, rel=1e-13)
    assert o5.constants["p"] == pytest.approx(t5**3, rel=1e-13)  # 0.965397
    # balanced layers: lam_W1 ||W1||^2 per direction = beta t^2, so ||W1|| per direction = (beta / lam_W1)^(1/2) t
    # = 5^(1/6) t (= 1.2924)
    assert math.sqrt(o5.constants["W1_sq"]) == pytest.approx(5 ** (1 / 6) * t5, rel=1e-13)


def test_quartic_root_and_first_order_jump():
    t = closed_forms.extended_root(0.2, 3)
    assert t**4 - t + 0.2 == pytest.approx(0, abs=1e-14)
    assert closed_forms.extended_root(3 * 4 ** (-4 / 3) + 1e-6, 3) is None
    crit = closed_forms.extended_threshold(3)
    assert crit == pytest.approx(2 ** (-4 / 3))
    # at the critical K beta the nonzero stationary value equals the zero value 1/2 (both global)
    tc = closed_forms.extended_root(crit, 3)
    assert (1 - tc**3) ** 2 / 2 + 1.5 * crit * tc**2 == pytest.approx(0.5, abs=1e-12)
    # the generic bisection reproduces both closed thresholds
    assert closed_forms._extended_loss(0.99, 2)[0] < 0.5 and closed_forms._extended_loss(1.01, 2)[1] is None
    # K^3 n lam^3 < 1/16  <=>  K beta < 2^(-4/3)
    n = 3
    lam_c = (1 / (16 * K**3 * n)) ** (1 / 3)
    below = closed_forms.optimum("extended-linear", K=K, n=n, d=8, lams=dict(W1=lam_c * 0.99, W2=lam_c, H1=lam_c))
    above = closed_forms.optimum("extended-linear", K=K, n=n, d=8, lams=dict(W1=lam_c * 1.01, W2=lam_c, H1=lam_c))
    assert below.nonzero and below.constants["p"] > 0.5 and below.loss < 0.5
    assert not above.nonzero and above.loss == 0.5
    assert below.constants["product"] < 1 / 16 < above.constants["product"]


def test_depth_two_chain_reduces_to_thm_3_1():
    # q = 2 factors of the generic quartic family is Thm 3.1: t^2 = 1 - c
    o = closed_forms.optimum("mse-bias-free", K=K, n=10, d=20, lams=L2)
    loss, t = closed_forms._extended_loss(o.constants["c"], 2)
    assert loss == pytest.approx(o.loss, abs=1e-15)
    assert t**2 == pytest.approx(1 - o.constants["c"], rel=1e-13)


# ------------------------------------------------------------------ explicit minimisers
CONSTRUCT = [
    ("mse-bias-free", L2, {}),
    ("mse-bias", L2, {}),
    ("mse-regbias", dict(L2, b=0.05), {}),
    ("mse-regbias", dict(L2, b=10.0), {}),
    ("extended-linear", LX, {}),
    ("extended-linear", dict(LX, W3=0.005), {"depth": 3}),
    ("extended-relu", LX, {}),
    ("ce-wd", L2, {}),
    ("ce-wd", dict(L2, b=0.1), {"bias": "ridge"}),
]


@pytest.mark.parametrize(("model", "lams", "kw"), CONSTRUCT)
def test_constructed_minimiser_is_stationary_with_value_L_star(model, lams, kw):
    opt = closed_forms.optimum(model, K=K, n=5, d=10, lams=lams, **kw)
    assert opt.nonzero
    for seed in (0, 1):
        params = opt.construct(seed=seed)
        spec = make_spec(model, K=K, n=5, d=10, lams=lams, **kw)
        ev = evaluate(spec, params)
        assert ev.loss == pytest.approx(opt.loss, abs=1e-13)
        assert max(np.abs(g).max() for g in ev.grads.values()) < 1e-12


def test_construct_rejects_non_orthonormal_frame():
    opt = closed_forms.optimum("mse-bias-free", K=K, n=5, d=10, lams=L2)
    with pytest.raises(ValueError, match="orthonormal"):
        opt.construct(np.ones((10, K)))


# ------------------------------------------------------------------ closed form vs L-BFGS
def _gap(model, lams, n=5, d=8, **kw):
    res = solve(model, K=K, n=n, d=d, lams=lams, **kw)
    return res, abs(res.loss - res.theory.loss)


@pytest.mark.parametrize(
    ("model", "lams"),
    [("mse-bias-free", L2), ("mse-bias", L2), ("extended-linear", LX), ("ce-wd", L2)],
)
def test_lbfgs_reaches_closed_form(model, lams):
    res, gap = _gap(model, lams)
    assert gap <= 1e-8
    assert res.theory.nonzero


@pytest.mark.parametrize("lam_b", [0.01, 0.1, 0.2, 1.0, 10.0, 1000.0])
def test_regularised_bias_both_sides_of_switch(lam_b):
    lams = dict(L2, b=lam_b)
    res, gap = _gap("mse-regbias", lams)
    opt = res.theory
    assert gap <= 1e-8
    c = opt.constants["c"]
    assert (opt.constants["a"] > 0) == (lam_b > c / (1 - c))  # the switch at lambda_b = c/(1 - c)
    np.testing.assert_allclose(res.params["b"], opt.bias, atol=1e-6)
    M = class_means(res.params["H"], K)
    np.testing.assert_allclose(M @ M.T, opt.grams["H"], atol=1e-6)
    # W aligned with the uncentred means, NC3 (uncentred) = 0
    np.testing.assert_allclose(res.params["W"], opt.constants["w_scale"] * M, atol=1e-5)


def test_regularised_bias_limits():
    lo = closed_forms.optimum("mse-regbias", K=K, n=10, d=20, lams=dict(L2, b=1e-12))
    hi = closed_forms.optimum("mse-regbias", K=K, n=10, d=20, lams=dict(L2, b=1e12))
    assert lo.loss == pytest.approx(closed_forms.optimum("mse-bias", K=K, n=10, d=20, lams=L2).loss, abs=1e-10)
    assert hi.loss == pytest.approx(closed_forms.optimum("mse-bias-free", K=K, n=10, d=20, lams=L2).loss, abs=1e-10)
    assert closed_forms.optimum("mse-regbias", K=K, n=10, d=20, lams=dict(L2, b=1.0)).loss == pytest.approx(
        0.158885438, abs=1e-9
    )  # [Tirer & Bruna 2022], lambda_b = 1


def test_relu_best_of_starts_and_structure():
    res, gap = _gap("extended-relu", LX, starts=4)
    assert gap <= 1e-7
    H2 = res.levels()["H2"]
    M2 = class_means(H2, K)
    assert M2.min() >= 0
    support = M2 > 1e-6 * M2.max()
    assert support.sum(axis=0).max() == 1  # disjoint supports: each coordinate active for one class at most
    np.testing.assert_allclose(M2 @ M2.T, res.theory.grams["H2"], rtol=1e-5, atol=1e-7)
    W2 = res.params["W2"]
    np.testing.assert_allclose(W2 @ W2.T, res.theory.grams["W"], rtol=1e-5, atol=1e-7)


def test_bias_free_structure():
    n = 5
    res = solve("mse-bias-free", K=K, n=n, d=8, lams=L2)
    opt = res.theory
    H, W = res.params["H"], res.params["W"]
    M = class_means(H, K)
    assert np.abs(H - np.repeat(M, n, axis=0)).max() < 1e-7  # within-class collapse
    np.testing.assert_allclose(M @ M.T, opt.constants["rho"] * np.eye(K), atol=1e-7)  # orthogonal frame
    np.testing.assert_allclose(W, math.sqrt(n * L2["H"] / L2["W"]) * M, atol=1e-7)
    np.testing.assert_allclose(W @ M.T, (1 - opt.constants["c"]) * np.eye(K), atol=1e-7)


def test_ce_minimiser_logits_and_feature_gram_match_lbfgs():
    res, gap = _gap("ce-wd", L2)
    assert gap <= 1e-8
    M = class_means(res.params["H"], K)
    np.testing.assert_allclose(res.params["W"] @ M.T, res.theory.grams["WH"], atol=1e-6)
    np.testing.assert_allclose(M @ M.T, res.theory.grams["H"], atol=1e-6)


def test_regularised_bias_past_the_switch_needs_an_orthogonal_frame():
    # lambda_b above c / (1 - c): the means gain a component a > 0 along the all-ones direction, so K (not K - 1)
    # dimensions are needed
    opt = closed_forms.optimum("mse-regbias", K=K, n=5, d=K, lams=dict(L2, b=10.0))
    assert 0 < opt.constants["a"]
    with pytest.raises(ValueError, match="orthogonal frame"):
        closed_forms.optimum("mse-regbias", K=K, n=5, d=K - 1, lams=dict(L2, b=10.0))


def test_free_bias_structure():
    n = 5
    res = solve("mse-bias", K=K, n=n, d=8, lams=L2)
    M = class_means(res.params["H"], K)
    np.testing.assert_allclose(res.params["b"], np.full(K, 1 / K), atol=1e-7)
    assert np.linalg.norm(M.mean(axis=0)) < 1e-7  # zero global mean
    J = np.eye(K) - 1 / K
    np.testing.assert_allclose(M @ M.T, res.theory.grams["H"], atol=1e-7)
    assert np.allclose(res.theory.grams["H"], res.theory.grams["H"][0, 0] / J[0, 0] * J)  # proportional to J


def test_linear_extended_structure():
    res = solve("extended-linear", K=K, n=5, d=8, lams=LX)
    opt = res.theory
    lv = res.levels()
    for name in ("H1", "H2"):
        M = class_means(lv[name], K)
        np.testing.assert_allclose(M @ M.T, opt.grams[name], rtol=1e-6, atol=1e-8)
    sv = np.linalg.svd(res.params["W1"], compute_uv=False)
    np.testing.assert_allclose(sv[:K], math.sqrt(opt.constants["W1_sq"]), rtol=1e-6)  # K equal singular values
    assert sv[K:].max() < 1e-6
    M2 = class_means(lv["H2"], K)
    np.testing.assert_allclose(M2 @ res.params["W2"].T, opt.constants["p"] * np.eye(K), atol=1e-7)


# ------------------------------------------------------------------ regimes
def test_above_threshold_zero_solutions():
    big = dict(W=0.5, H=0.5)  # c = 4 sqrt(5 * 0.25) > 1
    for model, L_zero in (("mse-bias-free", 0.5), ("mse-bias", (K - 1) / (2 * K))):
        res = solve(model, K=K, n=5, d=8, lams=big)
        assert not res.theory.nonzero and res.theory.loss == L_zero
        assert abs(res.loss - L_zero) < 1e-8
        assert np.linalg.norm(res.params["W"]) < 1e-4 and np.linalg.norm(res.params["H"]) < 1e-4
    ce = closed_forms.optimum("ce-wd", K=K, n=5, d=8, lams=big)
    assert not ce.nonzero and ce.loss == pytest.approx(math.log(K))


def test_three_factor_regimes_with_solver():
    n = 3
    for kb, nonzero in ((0.38, True), (0.41, False)):  # [Tirer & Bruna 2022] threshold runs
        lam = (kb / K) ** 3 / n
        lam = lam ** (1 / 3)
        lams = dict(W1=lam, W2=lam, H1=lam)
        res = solve("extended-linear", K=K, n=n, d=8, lams=lams, starts=4)
        assert res.theory.nonzero is nonzero
        assert res.theory.threshold == pytest.approx(kb, rel=1e-12)
        assert abs(res.loss - res.theory.loss) <= 1e-8
        if nonzero:
            assert res.theory.constants["p"] > 0.5  # first-order jump: p* never approaches 0
        else:
            assert res.theory.loss == 0.5


# ------------------------------------------------------------------ Thm 5.1
def test_thm_5_1_attenuation_rate():
    Kc, d, lam_W, nlam_H, sigma = 4, 20, 0.01, 0.02, 0.3
    f = closed_forms.attenuation_factor(Kc, 100, nlam_H / 100, lam_W, sigma)
    # f = 1 / (1 + K sigma^2 sqrt(n lam_H / lam_W)) = 1 / (1 + 4 * 0.09 * sqrt(0.02 / 0.01)) = 1 / 1.50912 = 0.66264
    assert f == pytest.approx(1 / (1 + 0.36 * math.sqrt(2)), rel=1e-14)
    assert f == pytest.approx(0.66264, abs=1e-5)  # [Tirer & Bruna 2022]
    ns = np.array([100, 400, 1600, 6400])
    errs = []
    for n in ns:
        opt = closed_forms.optimum("mse-bias-free", K=Kc, n=n, d=d, lams=dict(W=lam_W, H=nlam_H / n))
        e = []
        for seed in range(6):
            star = opt.construct(seed=100)
            noise = sigma * np.random.default_rng(seed).standard_normal(star["H"].shape)
            W_hat = closed_forms.ridge_solution(star["H"] + noise, K=Kc, n=int(n), lam_W=lam_W)
            e.append(np.linalg.norm(W_hat - f * star["W"]) / np.linalg.norm(star["W"]))
        errs.append(np.mean(e))
    slope = np.polyfit(np.log(ns), np.log(errs), 1)[0]
    assert abs(slope + 0.5) < 0.15
    assert errs[-1] < 0.03


# ------------------------------------------------------------------ bad parameters
def test_theory_bad_parameters():
    with pytest.raises(ValueError, match="needs d >= 4"):
        closed_forms.optimum("mse-bias-free", K=4, n=5, d=3, lams=L2)
    with pytest.raises(ValueError, match="needs d >= 4"):
        closed_forms.optimum("extended-linear", K=4, n=5, d=3, lams=LX)
    closed_forms.optimum("mse-bias", K=4, n=5, d=3, lams=L2)  # a simplex ETF fits in d = K - 1
    with pytest.raises(ValueError, match="lambda > 0"):
        closed_forms.optimum("mse-bias-free", K=4, n=5, d=8, lams=dict(W=0.0, H=0.1))
    with pytest.raises(ValueError, match=">= 0"):
        closed_forms.optimum("mse-bias-free", K=4, n=5, d=8, lams=dict(W=-1.0, H=0.1))
    with pytest.raises(ValueError, match="needs the fixed features"):
        closed_forms.optimum("ridge", K=4, n=5, d=8, lams=dict(W=0.1))
    ridge = make_spec("ridge", K=4, n=5, d=8, lams=dict(W=0.1), H=np.ones((20, 8)))
    assert closed_forms.optimum_for_spec(ridge) is None
    with pytest.raises(ValueError, match="no closed-form"):
        closed_forms.optimum_for_spec(ridge, strict=True)
    with pytest.raises(ValueError, match="depth 2 only"):
        closed_forms.optimum("extended-relu", K=4, n=5, d=8, lams=dict(LX, W3=0.1), depth=3)
    with pytest.raises(ValueError, match="c = K sqrt"):
        closed_forms.attenuation_factor(4, 5, 1.0, 1.0, 0.1)
    with pytest.raises(ValueError, match="K\\*n=20"):
        closed_forms.ridge_solution(np.zeros((19, 8)), K=4, n=5, lam_W=0.1)
    assert class_labels(3, 2).tolist() == [0, 0, 1, 1, 2, 2]
