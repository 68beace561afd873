"""[Han et al. 2022, Sec. 3]: SNR matrix, renormalised manifold, projections, rates, closed forms, simulator."""

import numpy as np
import pytest
from scipy.special import wrightomega

from nclab.metrics import nc1
from nclab.stats import ClassStats
from nclab.theory import central_path_terms, nc1_from_omega, renormalize, snr_matrix
from nclab.theory.central_path import (
    FlowOptions,
    closed_form_omega,
    flow_potential,
    initial_features,
    ls_loss_grad,
    omega_of,
    omega_rate,
    project,
    renormalized_step,
    simulate,
)

K, n, d = 4, 5, 6


@pytest.fixture
def X():
    return initial_features(K, n, d, mean_scale=1.0, seed=3)


def test_renormalized_manifold_and_corrected_nc1_identity(rng):
    y = np.repeat(np.arange(K), 25)
    H = 2 * rng.normal(size=(K, d))[y] + rng.normal(size=(len(y), d)) @ rng.normal(size=(d, d)) + 7.0
    Xr = renormalize(H, y)
    st = ClassStats.from_arrays(Xr, y)
    assert np.abs(st.sigma_w() - np.eye(d)).max() <= 1e-10
    snr = snr_matrix(st)
    assert np.allclose(snr.matrix, st.centered_means(), atol=1e-10)  # SNR = class means of X
    assert np.allclose(snr.omega, snr_matrix(ClassStats.from_arrays(H, y)).omega, rtol=1e-10)  # invariance
    # corrected App. D.6 (factor K): Tr(Sigma_W Sigma_B^+)/K = sum 1/omega^2 on the manifold ...
    assert nc1(st) == pytest.approx(nc1_from_omega(snr.omega), rel=1e-10)
    # ... and the uncorrected statement (no /K) is off by exactly K
    assert nc1(st, normalize=False) == pytest.approx(K * nc1_from_omega(snr.omega), rel=1e-10)
    assert snr.sigma_w_rank == d


def test_nc1_bounds_sum_inv_omega2_off_manifold(rng):
    y = np.repeat(np.arange(K), 20)
    for _ in range(25):
        H = rng.normal(size=(K, d))[y] + rng.normal(size=(len(y), d)) @ rng.normal(size=(d, d))
        st = ClassStats.from_arrays(H, y)
        assert nc1(st) >= nc1_from_omega(snr_matrix(st).omega) * (1 - 1e-12)


def test_snr_singular_sigma_w_is_a_clear_error(rng):
    y = np.repeat(np.arange(K), 2)  # N - K = 4 < d = 6
    H = rng.normal(size=(len(y), d))
    with pytest.raises(ValueError, match="Sigma_W is singular"):
        snr_matrix(ClassStats.from_arrays(H, y))
    assert snr_matrix(ClassStats.from_arrays(H, y), singular="pinv").sigma_w_rank == 4


@pytest.mark.parametrize("projection", ["oblique", "orthogonal"])
def test_projections_tangent_and_idempotent(X, rng, projection):
    Z = rng.normal(size=X.shape)
    PZ = project(X, Z, K, projection)
    D = X - np.repeat(X.reshape(K, n, d).mean(1), n, axis=0)
    S = D.T @ PZ / X.shape[0]
    assert np.abs(S + S.T).max() <= 1e-12  # tangent: X Cm Z^T + Z Cm X^T = 0
    assert np.abs(project(X, PZ, K, projection) - PZ).max() <= 1e-12 * np.abs(PZ).max()


def test_gradient_matches_finite_differences(X, rng):
    L, G = ls_loss_grad(X, K)
    assert np.abs(G.sum(axis=0)).max() <= 1e-14  # G 1 = 0
    assert np.abs(G.T @ X).max() <= 1e-13  # G X^T = 0: orthogonal to the fibres
    E = rng.normal(size=X.shape)
    eps = 1e-5
    fd = (ls_loss_grad(X + eps * E, K)[0] - ls_loss_grad(X - eps * E, K)[0]) / (2 * eps)
    assert fd == pytest.approx(float(np.sum(G * E)), rel=1e-6)
    assert L == pytest.approx(central_path_terms(omega_of(X, K)[0], K)["L"], rel=1e-12)  # Lemma 1


@pytest.mark.parametrize("projection", ["oblique", "orthogonal"])
def test_instantaneous_rates_by_finite_differences(X, projection):
    om, _, _ = omega_of(X, K)
    D = -project(X, ls_loss_grad(X, K)[1], K, projection)
    eps = 1e-6
    fd = (omega_of(X + eps * D, K)[0] - omega_of(X - eps * D, K)[0]) / (2 * eps)
    expect = omega_rate(om, K, n, projection)
    assert np.max(np.abs(fd - expect) / expect) <= 1e-5
    other = omega_rate(om, K, n, "orthogonal" if projection == "oblique" else "oblique")
    assert np.min(np.abs(fd - other) / other) > 0.1  # the two flows really differ [Han et al. 2022]


def test_unprojected_gradient_has_the_oblique_rate(X):
    # the paper's Lemma 4 direction (no projection) moves omega exactly like the oblique flow
    om, _, _ = omega_of(X, K)
    D = -ls_loss_grad(X, K)[1]
    eps = 1e-6
    fd = (omega_of(X + eps * D, K)[0] - omega_of(X - eps * D, K)[0]) / (2 * eps)
    assert np.allclose(fd, omega_rate(om, K, n, "oblique"), rtol=1e-5)


def test_renormalized_step_is_second_order(X):
    # Lemma 2: renormalize(X - eta G) = X - eta Pi(G) + O(eta^2)
    G = ls_loss_grad(X, K)[1]

    def err(eta):
        return np.linalg.norm(renormalized_step(X, eta, K, "oblique") - (X - eta * project(X, G, K, "oblique")))

    for eta in (1e-1, 3e-2):
        assert 3.5 <= err(eta) / err(eta / 2) <= 4.5


def test_closed_forms_reproduce_spec_regression_values():
    w0 = [5.10704077, 1.91722675, 0.34961332]
    t = [1e3, 1e4, 1e5, 1e6]
    orth = closed_form_omega(w0, t, 4, 5, "orthogonal")
    obl = closed_form_omega(w0, t, 4, 5, "oblique")
    # oblique, independently: with u = w^2, F = (K^2 n / 2) log u + (K n / 2) u, so (u / K) e^{u / K} = e^z with
    # z = 2 (F(w0) + t) / (K^2 n) - log K, i.e. u = K W(e^z) = K omega(z) (Wright omega; K = 4, n = 5)
    F0 = np.array([float(flow_potential(w, 4, 5, "oblique")) for w in w0])
    z = 2 * (F0[None, :] + np.array(t)[:, None]) / (16 * 5) - np.log(4)
    np.testing.assert_allclose(obl, np.sqrt(4 * np.real(wrightomega(z))), rtol=1e-12)
    # orthogonal (no closed form): the defining equation F(omega(t)) = F(omega(0)) + t holds to roundoff
    F0o = np.array([float(flow_potential(w, 4, 5, "orthogonal")) for w in w0])
    Ft = np.array([[float(flow_potential(v, 4, 5, "orthogonal")) for v in row] for row in orth])
    np.testing.assert_allclose(Ft - F0o[None, :], np.broadcast_to(np.array(t)[:, None], Ft.shape), rtol=1e-9)
    # the spec's 3-decimal values (Han et al. 2022 setting) agree with both
    assert np.allclose(orth[:, 0], [6.014, 9.355, 16.636, 29.783], atol=6e-4)
    assert np.allclose(orth[:, 2], [4.308, 8.980, 16.569, 29.771], atol=6e-4)
    assert np.allclose(obl[:, 0], [10.953, 31.803, 100.011, 316.217], atol=6e-4)
    assert np.allclose(obl[:, 2], [8.630, 31.052, 99.774, 316.142], atol=6e-4)
    # asymptotics: (4t/n)^{1/4} (Prop. 2 / Cor. 1) and sqrt(2t/(K n)) (oblique)
    assert orth[-1, 0] / (4 * 1e6 / 5) ** 0.25 == pytest.approx(1, abs=0.01)
    assert obl[-1, 0] / np.sqrt(2e6 / 20) == pytest.approx(1, abs=1e-3)


@pytest.mark.parametrize("projection", ["oblique", "orthogonal"])
def test_integrated_flow_matches_closed_form(projection):
    run = simulate(K, n, d, 1e4, projection, options=FlowOptions(num_checkpoints=6), seed=1)
    assert run.max_relative_error() <= 1e-6
    assert run.offdiag.max() <= 1e-8  # singular vectors constant (Lemma 6)
    assert run.drift.max() <= 1e-8
    assert np.all(np.diff(run.ratio) < 0) and run.ratio[-1] < run.ratio[0]
    assert np.all(np.diff(run.etf_distance) < 0)
    assert np.all(np.diff(run.loss) < 0)
    assert np.all(np.diff(run.metrics["nc1"]) < 0)
    wrong = run.omega_orthogonal if projection == "oblique" else run.omega_oblique
    assert np.max(np.abs(run.omega[-1] - wrong[-1]) / wrong[-1]) > 0.5  # the other ODE is far off


def test_discrete_renormalized_gd_follows_the_oblique_flow():
    errs = []
    for eta in (0.1, 0.05):
        options = FlowOptions(method="gd", eta=eta, num_checkpoints=3, t_first=5)
        run = simulate(3, 6, 4, 30.0, "oblique", options=options, seed=2)
        errs.append(np.max(np.abs(run.omega - run.omega_oblique) / run.omega_oblique))
        # and not the paper's Prop. 2 ODE
        assert np.max(np.abs(run.omega[-1] - run.omega_orthogonal[-1]) / run.omega_orthogonal[-1]) > 0.1
    assert errs[0] <= 2e-4
    ratio = errs[0] / errs[1]  # first-order (Euler) convergence to the oblique closed form: halving the step
    assert ratio == pytest.approx(2.0, abs=0.2)


def test_simulate_input_errors():
    with pytest.raises(ValueError, match="K n - K >= d"):
        simulate(4, 2, 6, 1.0)
    with pytest.raises(ValueError, match="projection must be"):
        simulate(4, 5, 6, 1.0, "paper")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="omega\\(0\\) > 0"):
        closed_form_omega([0.0], [1.0], 4, 5)


def test_flow_settings_are_one_options_value_the_old_keywords_warn():
    """``simulate`` takes its numerical settings as one :class:`FlowOptions`; the keyword form of its fields still
    works for one release, with a DeprecationWarning, and gives the same run; both at once are refused."""
    new = simulate(3, 4, 4, 1.0, options=FlowOptions(num_checkpoints=3), nc_metrics=False)
    with pytest.warns(DeprecationWarning, match="options=FlowOptions"):
        old = simulate(3, 4, 4, 1.0, num_checkpoints=3, nc_metrics=False)
    np.testing.assert_array_equal(new.omega, old.omega)
    with pytest.raises(TypeError, match="not also"):
        simulate(3, 4, 4, 1.0, options=FlowOptions(), num_checkpoints=3)
    with pytest.raises(TypeError, match="unexpected keyword"):
        simulate(3, 4, 4, 1.0, checkpoints=3)
    with pytest.raises(TypeError):
        FlowOptions("gd")  # keyword-only: a positional value cannot land in the wrong field
