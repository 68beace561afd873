"""UFM solvers: the papers' GD recipe within fixed iteration budgets, central-path and alternating
solvers against L-BFGS and theory, result layout and collapse reports of every feature level."""

import itertools
import math

import numpy as np
import pytest

from nclab.metrics import REGISTRY
from nclab.ufm import solve

LAM = 5e-3  # [Tirer & Bruna 2022, Sec. 6] default configuration: K=4, d=20, n=50, all lambda = 5e-3
DEFAULT = dict(K=4, n=50, d=20)


@pytest.mark.parametrize(
    ("model", "lams", "iters", "tol"),
    [
        ("mse-bias-free", dict(W=LAM, H=LAM), 30_000, 1e-6),  # N(0,1) init, lr 0.1: < 1e-6 by 3e4
        ("mse-bias", dict(W=LAM, H=LAM), 30_000, 1e-6),
        ("extended-linear", dict(W1=LAM, W2=LAM, H1=LAM), 40_000, 1e-8),  # 0.1 N(0,1) init: <= 1e-8 by 4e4
    ],
)
def test_gd_recipe_reaches_optimum_within_budget(model, lams, iters, tol):
    res = solve(model, lams=lams, solver="gd", iters=iters, log_every=5000, metrics_every=iters, **DEFAULT)
    assert abs(res.gap) < tol
    assert not res.info["diverged"]
    losses = [row["loss"] for row in res.history]
    assert all(b <= a + 1e-12 for a, b in itertools.pairwise(losses))  # monotone at lr 0.1 here
    assert res.history[0]["iter"] == 0 and res.history[-1]["iter"] == iters
    last = res.history[-1]
    deepest = "H" if model.startswith("mse") else "H2"
    assert last[f"{deepest}/nc1"] < 1e-6  # collapse measured with the metric suite
    assert last[f"{deepest}/nc3"] < 1e-4
    if model == "mse-bias":
        # exact ETF with zero global mean: NC2_OF plateaus at sqrt(2 - 2 sqrt((K-1)/K)) = 0.5176 (K=4)
        assert last["H/nc2_of"] == pytest.approx(math.sqrt(2 - 2 * math.sqrt(3 / 4)), abs=1e-4)
        assert last["H/nc2_etf"] < 1e-4


def test_gd_stop_gap_and_divergence_flag():
    res = solve("mse-bias-free", lams=dict(W=LAM, H=LAM), solver="gd", stop_gap=1e-4, metrics_every=0, **DEFAULT)
    assert res.info["stopped_at"] < 20_000 and abs(res.gap) <= 1e-4
    bad = solve(
        "extended-linear",
        K=4,
        n=10,
        d=20,
        lams=dict(W1=0.02, W2=0.02, H1=0.02),
        solver="gd",
        init_scale=1.0,
        iters=2000,
        metrics_every=0,
    )  # [Tirer & Bruna 2022]: scale 1.0 diverges
    assert bad.info["diverged"]


def test_gd_three_factor_init_scale_study():
    lams = dict(W1=0.02, W2=0.02, H1=0.02)  # K=4, n=10: K beta = 0.172, L* = 0.2427 [Tirer & Bruna 2022]
    small = solve(
        "extended-linear", K=4, n=10, d=20, lams=lams, solver="gd", init_scale=0.01, iters=3000, metrics_every=0
    )
    assert small.loss == pytest.approx(0.5, abs=1e-6)  # the origin is a strict local minimum
    good = solve(
        "extended-linear",
        K=4,
        n=10,
        d=20,
        lams=lams,
        solver="gd",
        init_scale=0.1,
        iters=20000,
        metrics_every=0,
        stop_gap=1e-9,
    )
    assert good.theory.loss == pytest.approx(0.2427, abs=1e-4)
    assert abs(good.gap) <= 1e-9


@pytest.mark.parametrize(
    ("model", "lams"),
    [
        ("mse-bias-free", dict(W=0.01, H=0.02)),
        ("mse-bias", dict(W=0.01, H=0.02)),
        ("mse-regbias", dict(W=0.01, H=0.02, b=1.0)),
    ],
)
@pytest.mark.parametrize("solver", ["central", "alternating"])
def test_closed_form_block_solvers(model, lams, solver):
    res = solve(model, K=4, n=5, d=8, lams=lams, solver=solver)
    assert abs(res.gap) <= 1e-8
    if solver == "alternating":
        losses = [row["loss"] for row in res.history]
        assert all(b <= a + 1e-14 for a, b in itertools.pairwise(losses))  # exact block steps


def test_block_solvers_reject_other_models():
    with pytest.raises(ValueError, match="two-factor MSE"):
        solve("extended-linear", K=4, n=5, d=8, lams=dict(W1=0.1, W2=0.1, H1=0.1), solver="central")
    with pytest.raises(ValueError, match="unknown solver"):
        solve("mse-bias-free", K=4, n=5, d=8, lams=dict(W=0.1, H=0.1), solver="adam")


def test_ridge_model_lbfgs_matches_closed_form():
    from nclab.ufm import closed_forms

    H = np.random.default_rng(0).standard_normal((12, 5))
    res = solve("ridge", K=3, n=4, d=5, lams=dict(W=0.1), H=H)
    np.testing.assert_allclose(res.params["W"], closed_forms.ridge_solution(H, K=3, n=4, lam_W=0.1), atol=1e-8)
    assert res.theory is None and np.array_equal(res.params["H"], H)


def test_result_layout_and_collapse_reports():
    res = solve("extended-relu", K=4, n=5, d=10, lams=dict(W1=LAM, W2=LAM, H1=LAM), starts=2)
    assert set(res.params) == {"H1", "W1", "W2"}
    assert res.params["H1"].shape == (20, 10) and res.params["W2"].shape == (4, 10)
    reports = res.collapse_reports()
    assert list(reports) == ["H1", "pre-ReLU", "H2"]
    for name, rep in reports.items():
        assert set(rep) <= set(REGISTRY)
        assert rep["nc1"] < 1e-6, name  # every level collapses at the global optimum
        assert rep["ncc_accuracy"] == 1.0
    deep = reports["H2"]
    assert deep["orthogonal_frame_error"] < 1e-5  # H2 is an orthogonal frame (Thm 4.2) ...
    assert deep["etf_gram_error"] < 1e-5  # ... whose centred version is a simplex ETF
    assert deep["self_duality"] < 1e-8  # NC3 against the uncentred means
    assert "self_duality" not in reports["H1"]
    two = solve("mse-bias", K=4, n=5, d=8, lams=dict(W=0.01, H=0.02)).collapse_reports()["H"]
    assert two["orthogonal_frame_error"] == pytest.approx(math.sqrt(2 - 2 * math.sqrt(3 / 4)), abs=1e-5)
    assert two["ncc_mismatch"] == 0.0 and two["classifier_accuracy"] == 1.0


def test_same_seed_same_numbers():
    kw = dict(K=3, n=4, d=5, lams=dict(W1=0.01, W2=0.01, H1=0.01), solver="gd", iters=200, metrics_every=0)
    a, b = solve("extended-relu", seed=3, **kw), solve("extended-relu", seed=3, **kw)
    assert a.loss == b.loss and all(np.array_equal(a.params[k], b.params[k]) for k in a.params)
    assert solve("extended-relu", seed=4, **kw).loss != a.loss


def test_a_dead_relu_sample_is_where_gd_stalls_above_the_closed_form():
    # [Tirer & Bruna 2022, eq. (24)]: ufm-figures' Fig. 4 run ends 2.1 % above L* because one sample's h1 has all its
    # pre-activations <= 0. Build that state exactly: the closed-form optimum with one sample's h1 reflected.
    from nclab.ufm.analysis import dead_relu_samples, revive
    from nclab.ufm.closed_forms import optimum_for_spec
    from nclab.ufm.models import evaluate, make_spec

    K, n, d, lam = 3, 10, 8, 5e-3
    lams = dict.fromkeys(("W1", "W2", "H1"), lam)
    spec = make_spec("extended-relu", K=K, n=n, d=d, lams=lams)
    theory = optimum_for_spec(spec)
    best = theory.construct(seed=0)
    assert evaluate(spec, best).loss == pytest.approx(theory.loss, rel=1e-13)
    i = n + 3  # class 1
    dead = {k: v.copy() for k, v in best.items()}
    dead["H1"][i] = -0.5 * best["H1"][i]  # W1 h1_i = -w1 h R1 e_k / 2 <= 0: the ReLU is off everywhere
    diag = dead_relu_samples(spec, dead, theory)
    assert diag.samples.tolist() == [i]
    # the excess: with h1_i = 0 and the rest at the optimum, exactly 1/(2N) minus the sample's share of L*
    p, h2 = theory.constants["p"], theory.constants["H1_sq"]
    assert diag.excess == pytest.approx(1 / (2 * K * n) - (1 - p) ** 2 / (2 * K * n) - lam * h2 / 2, rel=1e-14)
    zero = {**dead, "H1": dead["H1"].copy()}
    zero["H1"][i] = 0.0
    assert evaluate(spec, zero).loss - theory.loss == pytest.approx(diag.excess, rel=1e-10)
    # GD sees only the weight decay on h1_i (no data gradient through the ReLU) and stays above L* by about the
    # excess (the others re-adjust by a second-order amount); the sample stays dead
    ev = evaluate(spec, dead)
    data_grad = ev.grads["H1"][i] - lam * dead["H1"][i]
    assert np.linalg.norm(data_grad) < 1e-12 * np.linalg.norm(lam * dead["H1"][i])  # rounding of W1 h1_i = 0 only
    res = solve("extended-relu", K=K, n=n, d=d, lams=lams, solver="gd", init=dead, iters=4000, metrics_every=0)
    assert dead_relu_samples(spec, res.params).samples.tolist() == [i]
    assert 0.95 * diag.excess < res.gap < diag.excess
    # no local minimum: moving h1_i back to its class's mean is the optimum itself, and GD stays there
    revived = revive(spec, res.params, np.array([i]))
    again = solve("extended-relu", K=K, n=n, d=d, lams=lams, solver="gd", init=revived, iters=4000, metrics_every=0)
    assert again.gap < 1e-5 * res.gap and dead_relu_samples(spec, again.params).samples.size == 0
    with pytest.raises(ValueError, match="extended-relu"):
        dead_relu_samples(make_spec("extended-linear", K=K, n=n, d=d, lams=lams), best)


def test_a_problem_is_one_value_for_the_closed_forms_and_the_solvers():
    """``make_spec`` is the one spelling of a UFM problem: ``optimum`` and ``solve`` take its spec and give what
    the name-and-keywords form gives; a spec with problem keywords beside it is refused (they would be ignored)."""
    from nclab.ufm import make_spec, solve
    from nclab.ufm.closed_forms import optimum

    kw = {"K": 3, "n": 2, "d": 4, "lams": {"W": 5e-3, "H": 5e-3}}
    spec = make_spec("mse-bias", **kw)
    assert optimum(spec).loss == optimum("mse-bias", **kw).loss
    by_spec, by_name = solve(spec, solver="alternating"), solve("mse-bias", solver="alternating", **kw)
    assert by_spec.loss == by_name.loss and by_spec.model == "mse-bias"
    np.testing.assert_array_equal(by_spec.params["H"], by_name.params["H"])
    with pytest.raises(TypeError, match="carries its own"):
        solve(spec, K=3)
    with pytest.raises(TypeError, match="carries its own"):
        optimum(spec, d=8)
