"""[Han et al. 2022, Sec. 2]: the LS classifier, the exact loss decomposition, lambda conventions, streaming form."""

import numpy as np
import pytest
import torch

from nclab.stats import ClassStats
from nclab.theory import (
    DECOMPOSITION_KEYS,
    central_path_terms,
    decomposition_table,
    ls_classifier,
    mse_decomposition,
    mse_decomposition_from_stats,
    mse_loss_from_stats,
    paper_lambda,
    snr_matrix,
)


def _data(rng, K=4, n_per=(12, 9, 15, 10), d=6, offset=0.0):
    y = np.concatenate([np.full(n, k) for k, n in enumerate(n_per[:K])])
    H = 2.0 * rng.normal(size=(K, d))[y] + rng.normal(size=(len(y), d)) + offset
    return H, y


def _ridge_lstsq(H, y, lam, bias):
    """Reference: lstsq on the stacked system [H~/sqrt(n); sqrt(lam) I] W~^T = [Y/sqrt(n); 0]."""
    n, _ = H.shape
    K = y.max() + 1
    A = np.hstack([H, np.ones((n, 1))]) if bias else H
    Y = np.eye(K)[y]
    A_aug = np.vstack([A / np.sqrt(n), np.sqrt(lam) * np.eye(A.shape[1])])
    Y_aug = np.vstack([Y / np.sqrt(n), np.zeros((A.shape[1], K))])
    Wt, *_ = np.linalg.lstsq(A_aug, Y_aug, rcond=None)
    Wt = Wt.T
    return (Wt[:, :-1], Wt[:, -1]) if bias else (Wt, np.zeros(K))


@pytest.mark.parametrize("lam", [0.0, 0.05, 1.3])
@pytest.mark.parametrize("bias", [True, False])
def test_ls_closed_form_equals_ridge_lstsq(rng, lam, bias):
    H, y = _data(rng, offset=3.0)  # imbalanced classes, features off the origin
    W, b = ls_classifier(H, y, lam, bias=bias)
    W_ref, b_ref = _ridge_lstsq(H, y, lam, bias)
    ref = np.hstack([W_ref, b_ref[:, None]])
    got = np.hstack([W, b[:, None]])
    assert np.linalg.norm(got - ref) <= 1e-10 * np.linalg.norm(ref)


def test_ls_lambda0_balanced_matches_paper_eq6(rng):
    # Eq. (6): W_LS = K^{-1} Mbar^T Sigma_T^{-1}, b_LS = K^{-1} 1 - W_LS mu_G (columns transposed to rows)
    H, y = _data(rng, n_per=(10, 10, 10, 10))
    K = 4
    W, b = ls_classifier(H, y, 0.0)
    mu = H.mean(axis=0)
    means = np.stack([H[y == k].mean(axis=0) for k in range(K)])
    st = (H - mu).T @ (H - mu) / len(y)
    W6 = np.linalg.solve(st, (means - mu).T / K).T
    assert np.allclose(W, W6, rtol=0, atol=1e-12)
    assert np.allclose(b, 1.0 / K - W6 @ mu, rtol=0, atol=1e-12)


@pytest.mark.parametrize("lam", [0.0, 0.01, 0.7])
@pytest.mark.parametrize("bias", [True, False])
def test_decomposition_identities(rng, lam, bias):
    H, y = _data(rng, offset=-2.0)
    for _ in range(3):
        W = rng.normal(size=(4, 6)) * 0.3
        b = rng.normal(size=4) if bias else None
        out = mse_decomposition(H, y, W, b, lam)
        assert tuple(out) == DECOMPOSITION_KEYS
        scale = max(1.0, out["L"])
        assert out["identity_residual"] <= 1e-10 * scale  # Thm 1 + Thm 2
        assert out["ls_residual"] <= 1e-10 * scale  # Thm 2
        assert abs(out["L"] - (out["L_LS"] + out["L_perp"])) <= 1e-10 * scale
        assert out["L_perp"] > 0 and out["L_NC1"] > 0 and out["L_NC23"] > 0
        assert out["proximity_ratio"] == pytest.approx(out["L_perp"] / out["L_LS"], rel=1e-14)


@pytest.mark.parametrize("lam", [0.0, 0.2])
def test_l_perp_vanishes_at_independent_ls_solution(rng, lam):
    H, y = _data(rng)
    W, b = _ridge_lstsq(H, y, lam, True)  # not the code under test
    out = mse_decomposition(H, y, W, b, lam)
    assert 0 <= out["L_perp"] <= 1e-14 * out["L"]
    assert out["L"] == pytest.approx(out["L_LS"], rel=1e-12)
    # and the LS classifier is the minimiser: perturbing it increases L by exactly L_perp
    dW = 1e-3 * rng.normal(size=W.shape)
    out2 = mse_decomposition(H, y, W + dW, b, lam)
    assert out2["L"] > out["L"]
    assert out2["L"] - out["L_LS"] == pytest.approx(out2["L_perp"], rel=1e-6)


def test_l_ls_affine_invariance_only_without_weight_decay(rng):
    H, y = _data(rng)
    A = rng.normal(size=(6, 6)) + 2 * np.eye(6)
    c = rng.normal(size=6) * 5
    H2 = H @ A.T + c
    W = rng.normal(size=(4, 6))
    b = rng.normal(size=4)
    l0 = mse_decomposition(H, y, W, b, 0.0)["L_LS"]
    l0b = mse_decomposition(H2, y, W, b, 0.0)["L_LS"]
    assert abs(l0 - l0b) <= 1e-9 * l0
    l1 = mse_decomposition(H, y, W, b, 0.1)["L_LS"]
    l1b = mse_decomposition(H2, y, W, b, 0.1)["L_LS"]
    assert abs(l1 - l1b) > 1e-3 * l1


def test_lemma1_spectral_form_on_central_path(rng):
    # balanced, lambda = 0, W = W_LS: L, L_NC1, L_NC2/3 are functions of the SNR singular values only
    K, n, d = 5, 20, 7
    y = np.repeat(np.arange(K), n)
    H = 1.5 * rng.normal(size=(K, d))[y] + rng.normal(size=(K * n, d)) @ rng.normal(size=(d, d))
    W, b = ls_classifier(H, y, 0.0)
    out = mse_decomposition(H, y, W, b, 0.0)
    omega = snr_matrix(ClassStats.from_arrays(H, y)).omega
    spec = central_path_terms(omega, K)
    for key in ("L", "L_NC1", "L_NC23"):
        assert out[key] == pytest.approx(spec[key], rel=1e-10)
    assert central_path_terms([], K)["L"] == pytest.approx((K - 1) / (2 * K))


@pytest.mark.parametrize("convention,factor", [("mse_mean", "K/2"), ("mse_sum", "1/2"), ("paper", "1")])
def test_lambda_conventions_match_training_objectives(rng, convention, factor):
    K, d, n = 4, 5, 32
    wd = 5e-3
    H = rng.normal(size=(n, d))
    y = np.arange(n) % K
    W = rng.normal(size=(K, d))
    b = rng.normal(size=K)
    lam = paper_lambda(wd, K, convention)
    assert lam == pytest.approx({"K/2": K * wd / 2, "1/2": wd / 2, "1": wd}[factor])
    Ht, Wt, bt = (torch.tensor(a) for a in (H, W, b))
    out = Ht @ Wt.T + bt
    target = torch.nn.functional.one_hot(torch.tensor(y), K).double()
    penalty = 0.5 * wd * (Wt.square().sum() + bt.square().sum())
    if convention == "mse_mean":
        J, scale = torch.nn.MSELoss()(out, target) + penalty, 2.0 / K
    elif convention == "mse_sum":
        J, scale = torch.nn.MSELoss(reduction="sum")(out, target) / n + penalty, 2.0
    else:
        J, scale = 0.5 * torch.nn.MSELoss(reduction="sum")(out, target) / n + penalty, 1.0
    L = mse_decomposition(H, y, W, b, weight_decay=wd, convention=convention)["L"]
    # the training objective is a fixed multiple of the paper's L exactly when lambda is mapped this way
    assert float(J) == pytest.approx(scale * L, rel=1e-12)


def test_streaming_form_matches_arrays(rng):
    H, y = _data(rng, offset=1e3)  # far from the origin: the shifted moments must keep the digits
    W = rng.normal(size=(4, 6)) * 1e-3
    b = rng.normal(size=4)
    ref = mse_decomposition(H, y, W, b, 0.05)
    stats = ClassStats(4, 6)
    for s in range(0, len(y), 7):
        stats.update(H[s : s + 7], y[s : s + 7])
    got = mse_decomposition_from_stats(stats, W, b, 0.05)
    for key in ("L", "L_LS", "L_NC1", "L_NC23", "L_perp"):
        assert got[key] == pytest.approx(ref[key], rel=1e-9)
    assert mse_loss_from_stats(stats, W, b, 0.05) == pytest.approx(ref["L"], rel=1e-9)
    R = H @ W.T + b - np.eye(4)[y]
    data_loss = 0.5 * np.sum(R * R) / len(y)
    got2 = mse_decomposition_from_stats(stats, W, b, 0.05, data_loss=data_loss)
    assert got2["identity_residual"] <= 1e-9 * got2["L"]


def test_decomposition_table_rows(rng):
    H, y = _data(rng)
    stats = ClassStats.from_arrays(H, y)
    W, b = ls_classifier(H, y, 0.01)
    recs = [
        {"epoch": 1, "stats": stats, "W": W + 0.1, "b": b, "train_error": 0.3},
        {"epoch": 2, "H": H, "y": y, "W": W, "b": b},
    ]
    rows = decomposition_table(recs, weight_decay=0.005, convention="mse_mean")
    assert [r["epoch"] for r in rows] == [1.0, 2.0]
    assert rows[0]["train_error"] == 0.3 and "train_error" not in rows[1]
    assert rows[1]["L_perp"] <= 1e-14 and rows[0]["L_perp"] > 0.01
    assert rows[0]["lambda"] == pytest.approx(4 * 0.005 / 2)


def test_errors(rng):
    H, y = _data(rng)
    W = np.zeros((4, 6))
    with pytest.raises(ValueError, match="exactly one of lam"):
        mse_decomposition(H, y, W, np.zeros(4), 0.1, weight_decay=0.1)
    with pytest.raises(ValueError, match="exactly one of lam"):
        mse_decomposition(H, y, W, np.zeros(4))
    with pytest.raises(ValueError, match=r"W must have shape \(K, d\)"):
        mse_decomposition(H, y, W.T, np.zeros(4), 0.1)
    with pytest.raises(ValueError, match="unknown lambda convention"):
        paper_lambda(0.1, 4, "bogus")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="lam must be >= 0"):
        ls_classifier(H, y, -1.0)
    with pytest.raises(ValueError, match="track='full'"):
        mse_decomposition_from_stats(ClassStats.from_arrays(H, y, track="light"), W, np.zeros(4), 0.1)


@pytest.mark.parametrize("lam", [0.0, 0.3])
@pytest.mark.parametrize("bias", [True, False])
def test_empty_class_against_ridge_lstsq_and_direct_loss(rng, lam, bias):
    """num_classes = 5 with class 3 never seen: its one-hot column is all zeros, so the LS classifier is still the
    ridge least-squares solution (with 5 target columns) and the loss is the per-sample mean; the decomposition
    identities hold with pi_3 = 0."""
    H, y = _data(rng, offset=1.5)
    y = np.where(y == 3, 4, y)  # labels {0, 1, 2, 4}
    K, d = 5, H.shape[1]
    W, b = ls_classifier(H, y, lam, bias=bias, K=K)
    W_ref, b_ref = _ridge_lstsq(H, y, lam, bias)
    assert W_ref.shape == (K, d)
    np.testing.assert_allclose(np.hstack([W, b[:, None]]), np.hstack([W_ref, b_ref[:, None]]), rtol=0, atol=1e-10)
    W2 = rng.normal(size=(K, d)) * 0.3
    b2 = rng.normal(size=K) if bias else None
    bb = np.zeros(K) if b2 is None else b2
    Y = np.eye(K)[y]
    direct = 0.5 * np.mean(np.sum((H @ W2.T + bb - Y) ** 2, axis=1)) + 0.5 * lam * (np.sum(W2**2) + np.sum(bb**2))
    stats = ClassStats.from_arrays(H, y, K=K)
    assert mse_loss_from_stats(stats, W2, b2, lam) == pytest.approx(direct, rel=1e-12)
    out = mse_decomposition(H, y, W2, b2, lam, K=K)
    assert out["L"] == pytest.approx(direct, rel=1e-12)
    assert out["identity_residual"] <= 1e-10 * out["L"] and out["ls_residual"] <= 1e-10 * out["L"]


@pytest.mark.parametrize("bias", [True, False])
def test_singular_second_moments_give_minimum_norm_interpolator(rng, bias):
    """lam = 0 with N < d: the Cholesky solve fails and the pseudo-inverse gives the minimum-norm solution. Without
    bias that is lstsq's H^+ Y; with bias it is the minimum-norm W of the centred system (b then fixed by the means).
    With N <= d generic features are interpolated: H W^T + b = Y exactly."""
    K, d = 3, 10
    y = np.array([0, 1, 2, 0, 1, 2, 0])
    H = rng.normal(size=(y.size, d)) + 2.0
    W, b = ls_classifier(H, y, 0.0, bias=bias)
    Y = np.eye(K)[y]
    if bias:
        mu = H.mean(axis=0)
        pi = Y.mean(axis=0)
        Wt, *_ = np.linalg.lstsq(H - mu, Y - pi, rcond=None)
        W_ref, b_ref = Wt.T, pi - Wt.T @ mu
    else:
        Wt, *_ = np.linalg.lstsq(H, Y, rcond=None)
        W_ref, b_ref = Wt.T, np.zeros(K)
    np.testing.assert_allclose(W, W_ref, rtol=0, atol=1e-9)
    np.testing.assert_allclose(b, b_ref, rtol=0, atol=1e-9)
    np.testing.assert_allclose(H @ W.T + b, Y, rtol=0, atol=1e-9)


def test_numerically_singular_second_moments_follow_the_pseudo_inverse_policy(rng):
    """A second moment that is positive definite in float64 but conditioned beyond 1 / rtol (here one feature
    direction 1e-11 the scale of the others: eigenvalue ratio ~1e-22) lets the Cholesky factorisation succeed on a
    roundoff-sized pivot; the solve must still take the pseudo-inverse (that direction counts as zero, the
    conventions' policy) instead of a weight of ~1e11 fitted to roundoff."""
    K, d = 3, 4
    y = np.tile(np.arange(K), 10)
    H = rng.normal(size=(y.size, d)) + 2.0
    H[:, -1] = 1e-11 * rng.normal(size=y.size)
    W, _ = ls_classifier(H, y, 0.0, bias=False)
    Wt, *_ = np.linalg.lstsq(H[:, :-1], np.eye(K)[y], rcond=None)  # the fit without the roundoff direction
    np.testing.assert_allclose(W[:, :-1], Wt.T, rtol=0, atol=1e-9)
    assert np.abs(W[:, -1]).max() < 1e-6
