"""Multilayer unconstrained features model (MUFM) of [Wang et al. 2024] (eqs. (12)-(13), Thms 3-4).

In the [Tirer & Bruna 2022] convention (``lam_T = lam/(Kn)``, ``lam_W = lam'_W/K`` from the [Wang et al. 2024]
normalisation, see
:mod:`nclab.ufm.conventions`), the reduced MUFM (13) is

    L(W, H) = 1/(2Kn) ||H W^T - Y||^2 + lam_W/2 ||W||^2 + lam_T/2 ||H - X||^2          (the "mufm" model)

and the multilayer form (12), with layers ``H^0 = X, H^1, ..., H^L = H``, is

    L_ml = 1/(2Kn) ||H^L W^T - Y||^2 + lam_W/2 ||W||^2 + lam_T/2 sum_l ||H^{l+1} - H^l||^2.

Corrected [Wang et al. 2024, Thm. 3] (derived here, see docs/ufm.md, Errata): by Cauchy-Schwarz
``sum_l ||a_l||^2 >= ||sum_l a_l||^2 / L``
(the paper's (14) drops the 1/L), with equality iff the steps are equal, so (12) equals (13) with
``lam_T / L`` and the optimal layers are equally spaced on the segment from X to H^L.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from scipy.optimize import minimize

from nclab.ufm.conventions import to_canonical
from nclab.validation import unit_rows

__all__ = [
    "alignment",
    "equally_spaced_layers",
    "gaussian_data",
    "h_given_w",
    "multilayer_objective",
    "solve_multilayer",
    "stationarity_residual",
    "within_class_projector",
]


def gaussian_data(K: int, n: int, d: int, *, seed: int = 0) -> np.ndarray:
    """[Wang et al. 2024, Sec. IV-B] data: ``x_{k,i} ~ N(mu_k, I_d)`` with ``mu_k`` uniform on the unit sphere,
    ``(K n, d)`` class-major."""
    rng = np.random.default_rng(seed)
    mu = rng.standard_normal((K, d))
    mu = unit_rows(mu, zero="raise", name="mu")
    return np.repeat(mu, n, axis=0) + rng.standard_normal((K * n, d))


def equally_spaced_layers(X: np.ndarray, H_last: np.ndarray, L: int) -> list[np.ndarray]:
    """``H^l = X + (l/L)(H^L - X)``, l = 0..L: the optimal intermediate layers [Wang et al. 2024, eq. (15)]."""
    return [X + (l / L) * (H_last - X) for l in range(L + 1)]


def _targets(K: int, n: int) -> np.ndarray:
    return np.repeat(np.eye(K), n, axis=0)


def h_given_w(W: np.ndarray, X: np.ndarray, lam_T: float, *, K: int, n: int) -> np.ndarray:
    """Exact minimiser over H for fixed W (canonical ``lam_T``): ``H = (Y W + N lam_T X)(W^T W + N lam_T I)^{-1}``
    (the [Wang et al. 2024] ``(W^T W + lam I)^{-1}(W^T Y + lam X)``, transposed, with ``lam = N lam_T``)."""
    N = K * n
    G = W.T @ W + N * lam_T * np.eye(W.shape[1])
    return np.linalg.solve(G, (_targets(K, n) @ W + N * lam_T * X).T).T


def stationarity_residual(W: np.ndarray, H: np.ndarray, X: np.ndarray, lam_T: float, *, K: int, n: int) -> float:
    """``||H - h_given_w(W)||_F / ||H||_F``: 0 at every stationary point of the MSE-MUFM [Wang et al. 2024, Thm. 4]."""
    return float(np.linalg.norm(H - h_given_w(W, X, lam_T, K=K, n=n)) / max(float(np.linalg.norm(H)), 1e-300))


def within_class_projector(K: int, n: int) -> np.ndarray:
    """``P = I_N - I_K ⊗ (1 1^T / n)`` (``Y^T P = 0``); ``P H`` removes the class means of row features."""
    return np.eye(K * n) - np.kron(np.eye(K), np.full((n, n), 1.0 / n))


def alignment(H: np.ndarray, X: np.ndarray) -> float:
    """``|| H/||H||_F - X/||X||_F ||_F`` ([Wang et al. 2024, Fig. 5], third panel)."""
    return float(np.linalg.norm(H / np.linalg.norm(H) - X / np.linalg.norm(X)))


def multilayer_objective(
    W: np.ndarray, layers: list[np.ndarray], X: np.ndarray, lam_W: float, lam_T: float, *, K: int, n: int
) -> tuple[float, np.ndarray, list[np.ndarray]]:
    """``L_ml`` (module docstring, canonical weights) and its gradients in ``W`` and ``H^1..H^L``."""
    N = K * n
    H = [X, *layers]
    R = H[-1] @ W.T - _targets(K, n)
    steps = [H[l + 1] - H[l] for l in range(len(layers))]
    loss = 0.5 * float((R**2).sum()) / N + 0.5 * lam_W * float((W**2).sum())
    loss += 0.5 * lam_T * sum(float((s**2).sum()) for s in steps)
    gW = R.T @ H[-1] / N + lam_W * W
    gH = []
    for l in range(len(layers)):
        g = lam_T * steps[l]
        if l + 1 < len(layers):
            g = g - lam_T * steps[l + 1]
        else:
            g = g + R @ W / N
        gH.append(g)
    return loss, gW, gH


def solve_multilayer(
    *,
    K: int,
    n: int,
    d: int,
    lams: Mapping[str, float],
    X: Any,
    layers: int,
    seed: int = 0,
    convention: str = "penalty_sum",
    gtol: float = 1e-12,
    maxiter: int = 50_000,
) -> dict[str, Any]:
    """L-BFGS on the explicit multilayer form (12) (``lams``: ``"W"``, ``"transport"``). Returns
    ``{"W", "layers" (H^1..H^L), "loss"}``; used to verify the corrected Thm 3 against the reduced form."""
    lc = to_canonical(lams, convention, K=K, n=n)
    X = np.asarray(X, dtype=np.float64)
    rng = np.random.default_rng(seed)
    sizes = [K * d] + [K * n * d] * layers

    def unpack(x: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
        W = x[: K * d].reshape(K, d)
        Hs = [x[K * d + i * K * n * d : K * d + (i + 1) * K * n * d].reshape(K * n, d) for i in range(layers)]
        return W, Hs

    def fun(x: np.ndarray) -> tuple[float, np.ndarray]:
        W, Hs = unpack(x)
        f, gW, gH = multilayer_objective(W, Hs, X, lc["W"], lc["transport"], K=K, n=n)
        return f, np.concatenate([gW.ravel(), *(g.ravel() for g in gH)])

    x0 = rng.standard_normal(sum(sizes))
    res = minimize(
        fun,
        x0,
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": maxiter, "maxfun": 2 * maxiter, "gtol": gtol, "ftol": 1e-16, "maxcor": 30},
    )
    W, Hs = unpack(res.x)
    return {"W": W, "layers": Hs, "loss": float(res.fun)}
