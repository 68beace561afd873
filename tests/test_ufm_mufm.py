"""The [Wang et al. 2024] MUFM: exact alternating solver, Thm 4 identities, corrected Thm 3 (lambda/L), UFM limit."""

import numpy as np
import pytest

from nclab.metrics import etf_gram_error, trace_ratio
from nclab.stats import ClassStats
from nclab.ufm import closed_forms, mufm, solve, to_canonical

K, n, d = 3, 8, 6
MEAN = "penalty_mean"  # the [Wang et al. 2024] scaling of the lambdas


def stats(H):
    return ClassStats.from_arrays(H, np.repeat(np.arange(K), n), K=K)


@pytest.fixture(scope="module")
def solved():
    X = mufm.gaussian_data(K, n, d, seed=1)
    res = solve("mufm", K=K, n=n, d=d, lams=dict(W=0.005, transport=0.01), convention=MEAN, X=X, solver="alternating")
    return X, res


def test_alternating_fixed_point_and_contraction(solved):
    X, res = solved
    W, H = res.params["W"], res.params["H"]
    lam_T = to_canonical({"transport": 0.01}, "penalty_mean", K=K, n=n)["transport"]
    assert mufm.stationarity_residual(W, H, X, lam_T, K=K, n=n) < 1e-10
    assert res.grad_norm < 1e-9
    # within-class part: P H = P X (I + W^T W / lam)^{-1}, lam = N lam_T ([Wang et al. 2024] convention's lam)
    P = mufm.within_class_projector(K, n)
    lam = K * n * lam_T
    np.testing.assert_allclose(P @ H, P @ X @ np.linalg.inv(np.eye(d) + W.T @ W / lam), atol=1e-10)
    # more collapsed than the data, but not collapsed (Thm 4)
    assert 0 < trace_ratio(stats(H)) < trace_ratio(stats(X))
    assert etf_gram_error(stats(H)) < etf_gram_error(stats(X))
    # the solver agrees with the central-path and L-BFGS solvers
    for solver in ("central", "lbfgs"):
        other = solve("mufm", K=K, n=n, d=d, lams=dict(W=0.005, transport=0.01), convention=MEAN, X=X, solver=solver)
        assert other.loss == pytest.approx(res.loss, abs=1e-10)


def test_lambda_sweep_trends():
    X = mufm.gaussian_data(K, n, d, seed=2)
    pfc1, align = [], []
    for lam in (0.0005, 0.005, 0.05):
        H = solve(
            "mufm",
            K=K,
            n=n,
            d=d,
            lams=dict(W=0.005, transport=lam),
            convention="penalty_mean",
            X=X,
            solver="alternating",
        ).params["H"]
        pfc1.append(trace_ratio(stats(H)))
        align.append(mufm.alignment(H, X))
    assert pfc1[0] < pfc1[1] < pfc1[2] < trace_ratio(stats(X))  # larger lam: closer to the data
    assert align[0] > align[1] > align[2]


def test_zero_data_recovers_ufm():
    lams = dict(W=0.01, H=0.02)
    ufm = closed_forms.optimum("mse-bias-free", K=K, n=n, d=d, lams=lams)
    res = solve("mufm", K=K, n=n, d=d, lams=dict(W=0.01, transport=0.02), X=np.zeros((K * n, d)), solver="alternating")
    assert res.loss == pytest.approx(ufm.loss, abs=1e-10)
    assert trace_ratio(stats(res.params["H"])) < 1e-12  # exact NC


def test_multilayer_form_equals_reduced_form_with_lambda_over_L():
    # [Wang et al. 2024, eq. (12)]: K=3, d=6, n=4, L=4, lam=0.5, lam_W=0.05 ([Wang et al. 2024] convention)
    Kc, nc, dc, L = 3, 4, 6, 4
    X = mufm.gaussian_data(Kc, nc, dc, seed=0)
    lams = dict(W=0.05, transport=0.5)
    ml = mufm.solve_multilayer(K=Kc, n=nc, d=dc, lams=lams, X=X, layers=L, convention="penalty_mean")
    red = solve("mufm", K=Kc, n=nc, d=dc, lams=lams, convention=MEAN, X=X, layers=L, solver="alternating")
    np.testing.assert_allclose(ml["layers"][-1], red.params["H"], atol=1e-7)
    for got, want in zip(ml["layers"], red.info["layers"][1:], strict=True):  # equally spaced (eq. 15)
        np.testing.assert_allclose(got, want, atol=1e-7)
    assert ml["loss"] == pytest.approx(red.loss, abs=1e-10)
    wrong = solve("mufm", K=Kc, n=nc, d=dc, lams=lams, convention=MEAN, X=X, solver="alternating")
    assert np.linalg.norm(wrong.params["H"] - ml["layers"][-1]) > 0.1  # the paper's uncorrected lambda


def test_mufm_bad_inputs():
    with pytest.raises(ValueError, match="layers must be an int"):
        solve("mufm", K=K, n=n, d=d, lams=dict(W=0.1, transport=0.1), layers=0)
    with pytest.raises(ValueError, match="'mufm' model only"):
        solve("mse-bias-free", K=K, n=n, d=d, lams=dict(W=0.1, H=0.1), layers=2)
    with pytest.raises(ValueError, match="K\\*n=24"):
        solve("mufm", K=K, n=n, d=d, lams=dict(W=0.1, transport=0.1), X=np.zeros((23, d)))
