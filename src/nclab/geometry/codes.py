"""Softmax Codes and Tammes codes [Jiang et al. 2024, Def. 2.1 and eq. (11)]: a global search and an exact local polish.

Rows are classes: a code ``W`` is ``(K, d)`` with unit rows ([Jiang et al. 2024] writes columns).

**Problems.** Both are max-min problems over products of unit spheres, ``max_X min_c f_c(X)``, with bilinear
pieces ``f_c``:

* Tammes: ``X = W``, ``f_ij = -<w_i, w_j>`` for ``i < j`` (maximising the minimum angle; the chordal minimum
  distance is ``sqrt(2 - 2 max_ij <w_i, w_j>)``);
* Softmax Code: ``X = (W, H)`` with one unit feature ``h_k`` per class, ``f_kj = <w_k - w_j, h_k>`` for
  ``j != k``; ``max_H min_{k, j} f_kj = rho_one_vs_rest(W)`` ([Jiang et al. 2024], Lemma C.4), so the joint problem is
  ``max_W rho_one_vs_rest(W)``, the HardMax problem (5) with ``n = 1`` (Thm 3.2).

**Algorithm.**

1. *Coarse phase* (numpy, batched over starts): Adam on the smoothed maximum ``tau LSE_c (-f_c)/tau`` with the
   Riemannian gradient and the renormalising retraction. Starts are random, structured (a generalised spiral on
   ``S^2``, the regular polygon on ``S^1``) and, in later rounds, perturbations of the best code so far (basin
   hopping). The temperature is *fixed and small*: a continuation from a large ``tau`` behaves like a Riesz
   energy and funnels every start into the energy minimiser, which for e.g. Tammes ``K = 13, 14`` on ``S^2`` is
   not the max-min optimum.
2. *Polish*: the epigraph form ``max t`` s.t. ``f_c(X) >= t``, ``||x_a|| = 1`` is solved by SQP (SciPy
   SLSQP, analytic Jacobians) from the best distinct coarse codes, then refined by Newton's method on the KKT
   equations of the active set (``sum_c lam_c grad f_c = 2 mu_a x_a``, ``sum lam = 1``, ``f_c = t`` on the
   active set, unit rows; minimum-norm least-squares steps, so rotations and rattlers do not make it singular).
   Problems with more than ``POLISH_MAX_VARS`` variables skip the polish (dense SQP would be too slow); their
   results carry no KKT certificate.

**Certificate** (:class:`KKTCertificate`): for the active set ``A = {c : f_c - min f <= active_tol}``, the
first-order (Clarke) stationarity residual ``dist(0, conv{P_T grad f_c : c in A})`` (``P_T`` the projection
onto the tangent space of the spheres) is computed exactly by Wolfe's algorithm
(:func:`nclab.geometry.dist_to_hull`); its simplex weights are the KKT multipliers (``>= 0``, sum 1). A residual
``<= 1e-9`` certifies that the returned code is a KKT point, i.e. *locally* stationary. What is certified:

* the margin of the returned code: ``rho_one_vs_rest`` by the exact hull QPs with their duality gaps
  (:func:`nclab.geometry.one_vs_rest`), the minimum angle exactly;
* first-order local optimality (KKT, residual and multipliers reported) when ``kkt.ok``;
* the Thm 3.9 bounds only bracket the optimum; ``within_bounds`` checks the returned margin against them.

What is **not** certified: global optimality. The search is a heuristic over many basins; the tests compare it
with the best known Tammes codes on ``S^2`` for ``K = 4..24`` [Sloane 2000] and closed forms.

References (full citations in docs/references.md): [Tammes 1930] (the problem), [Sloane 2000] (the table),
[Jiang et al. 2024] (Softmax Codes, HardMax).
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import minimize
from threadpoolctl import threadpool_limits

from nclab.geometry.bounds import CodeBounds, softmax_code_bounds
from nclab.geometry.hull import dist_to_hull, hardmax_value, one_vs_one, one_vs_rest
from nclab.memory import check_allocation
from nclab.validation import as_rows, check_int, unit_rows

__all__ = [
    "CERTIFIES",
    "POLISH_MAX_VARS",
    "CodeSearch",
    "KKTCertificate",
    "code_kkt",
    "softmax_code",
    "softmax_code_search",
    "tammes",
    "tammes_search",
]

#: largest number of variables (``M d + 1``) the dense SQP polish is run on by default
POLISH_MAX_VARS = 200
#: KKT residual below which a code is reported as a certified KKT point
KKT_TOL = 1e-9

#: what a :class:`CodeSearch` certifies, in words
CERTIFIES = (
    "Certified: the margin of the returned code (exact hull QPs with duality gaps; exact minimum angle) and, "
    "when kkt.ok, that the code is a first-order (KKT) point of the max-min problem, i.e. locally stationary "
    "(residual, active set and multipliers >= 0 reported). Not certified: global optimality; the search is a "
    "multi-start heuristic, and the Thm 3.9 bounds only bracket the optimum."
)
_UNPOLISHED = (
    "Certified: the margin of the returned code (exact hull QPs with duality gaps; exact minimum angle). Not "
    "certified: local or global optimality; the problem exceeded the polish size, so the code is the end of a "
    "smoothed first-order search with no KKT check."
)


# ----------------------------------------------------------------------------------------------------------
# the max-min problems: bilinear pieces f_c(X) = sum_t s_ct <x_{a_ct}, x_{b_ct}>
# ----------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Pieces:
    """``f_c(X) = sum_t s[c, t] <x_{a[c, t]}, x_{b[c, t]}>`` over ``X (M, d)``; ``pairs (C, 2)`` names each piece
    (``(i, j)`` for Tammes, ``(k, j)`` for Softmax Codes)."""

    a: np.ndarray
    b: np.ndarray
    s: np.ndarray
    M: int
    pairs: np.ndarray

    def values(self, X: np.ndarray) -> np.ndarray:
        """``(..., C)`` for ``X (..., M, d)``."""
        G = X @ np.swapaxes(X, -1, -2)
        v: np.ndarray = np.sum(self.s * G[..., self.a, self.b], axis=-1)
        return v

    def grad(self, X: np.ndarray, P: np.ndarray) -> np.ndarray:
        """``sum_c P_c grad f_c(X)`` for weights ``P (B, C)`` and ``X (B, M, d)``: ``(S + S^T) X`` with the
        coefficient matrices ``S_ab = sum_{c, t: (a, b)} P_c s_ct`` (bincount: ``np.add.at`` is 10x slower)."""
        B, M = X.shape[0], self.M
        base = (np.arange(B) * M * M)[:, None]
        S = np.zeros(B * M * M)
        for t in range(self.a.shape[1]):
            S += np.bincount((base + self.a[:, t] * M + self.b[:, t]).ravel(), (P * self.s[:, t]).ravel(), B * M * M)
        S = S.reshape(B, M, M)
        grad: np.ndarray = (S + S.transpose(0, 2, 1)) @ X
        return grad

    def jacobian(self, X: np.ndarray) -> np.ndarray:
        """``(C, M, d)``: the Euclidean gradient of every piece."""
        C = self.a.shape[0]
        J = np.zeros((C, self.M, X.shape[-1]))
        rows = np.arange(C)
        for t in range(self.a.shape[1]):
            s = self.s[:, t, None]
            np.add.at(J, (rows, self.a[:, t]), s * X[self.b[:, t]])
            np.add.at(J, (rows, self.b[:, t]), s * X[self.a[:, t]])
        return J

    def hessian(self, lam: np.ndarray, d: int) -> np.ndarray:
        """``(M d, M d)``: ``sum_c lam_c Hess f_c`` (constant: the pieces are bilinear)."""
        Hs = np.zeros((self.M, self.M))
        for t in range(self.a.shape[1]):
            w = lam * self.s[:, t]
            np.add.at(Hs, (self.a[:, t], self.b[:, t]), w)
            np.add.at(Hs, (self.b[:, t], self.a[:, t]), w)
        return np.kron(Hs, np.eye(d))


@dataclass(frozen=True)
class _SoftmaxPieces(_Pieces):
    """The Softmax Code pieces with dense ``(K, K)`` values and gradient: ``f_kj = <w_k, h_k> - <w_j, h_k>`` for
    ``X = [W; H]``. Same numbers as :class:`_Pieces` (to rounding), without the ``K^2``-long gathers and bincounts
    (5.1x faster at ``K = 1000``, ``d = 8``, where the generic path dominated ``gnc-bounds-vs-d``:
    ``benchmarks/bench_geometry.py --pieces``)."""

    def values(self, X: np.ndarray) -> np.ndarray:
        K = self.M // 2
        W, H = X[..., :K, :], X[..., K:, :]
        V = np.sum(W * H, axis=-1)[..., None] - H @ np.swapaxes(W, -1, -2)
        out: np.ndarray = V[..., ~np.eye(K, dtype=bool)]  # row-major (k, j), j != k: the order of ``pairs``
        return out

    def grad(self, X: np.ndarray, P: np.ndarray) -> np.ndarray:
        """``d/dw_m = (sum_j P_mj) h_m - sum_k P_km h_k``, ``d/dh_k = (sum_j P_kj) w_k - sum_j P_kj w_j``."""
        K = self.M // 2
        W, H = X[..., :K, :], X[..., K:, :]
        Pm = np.zeros((*P.shape[:-1], K, K))
        Pm[..., ~np.eye(K, dtype=bool)] = P
        rows = Pm.sum(axis=-1)[..., None]
        grad: np.ndarray = np.concatenate([rows * H - np.swapaxes(Pm, -1, -2) @ H, rows * W - Pm @ W], axis=-2)
        return grad


def _tammes_pieces(K: int) -> _Pieces:
    i, j = np.triu_indices(K, k=1)
    return _Pieces(i[:, None], j[:, None], -np.ones((i.size, 1)), K, np.stack([i, j], axis=1))


def _softmax_pieces(K: int) -> _Pieces:
    k, j = np.nonzero(~np.eye(K, dtype=bool))
    a = np.stack([k, j], axis=1)  # w_k and w_j against h_k = X[K + k]
    b = np.stack([K + k, K + k], axis=1)
    s = np.tile([1.0, -1.0], (k.size, 1))
    return _SoftmaxPieces(a, b, s, 2 * K, np.stack([k, j], axis=1))


# ----------------------------------------------------------------------------------------------------------
# coarse phase: batched Adam on the smoothed maximum at a fixed temperature
# ----------------------------------------------------------------------------------------------------------


def _unit(X: np.ndarray) -> np.ndarray:
    U: np.ndarray = X / np.linalg.norm(X, axis=-1, keepdims=True)
    return U


def _coarse(
    pieces: _Pieces,
    X: np.ndarray,
    *,
    steps: int,
    tau: tuple[float, float],
    lr: tuple[float, float],
) -> np.ndarray:
    """Adam with the Riemannian gradient and retraction on ``tau LSE_c (-f_c / tau)`` for a batch ``X (B, M, d)``;
    ``tau`` and the step size decay geometrically from the first to the second value over ``steps``."""
    m = np.zeros_like(X)
    v = np.zeros_like(X)
    b1, b2, eps = 0.9, 0.999, 1e-12
    for s in range(steps):
        frac = s / max(1, steps - 1)
        t = tau[0] * (tau[1] / tau[0]) ** frac
        step = lr[0] * (lr[1] / lr[0]) ** frac
        F = -pieces.values(X) / t
        P = np.exp(F - F.max(axis=-1, keepdims=True))
        P /= P.sum(axis=-1, keepdims=True)
        G = -pieces.grad(X, P)
        G -= np.sum(G * X, axis=-1, keepdims=True) * X
        m = b1 * m + (1 - b1) * G
        v = b2 * v + (1 - b2) * G * G
        mh = m / (1 - b1 ** (s + 1))
        vh = v / (1 - b2 ** (s + 1))
        X = _unit(X - step * mh / (np.sqrt(vh) + eps))
    return X


def _spiral(K: int) -> np.ndarray:
    """Generalised spiral points on ``S^2`` [Rakhmanov et al. 1994], ``(K, 3)``."""
    z = 1.0 - (2.0 * np.arange(K) + 1.0) / K
    phi = np.pi * (3.0 - math.sqrt(5.0)) * np.arange(K)
    r = np.sqrt(np.maximum(0.0, 1.0 - z * z))
    return np.stack([r * np.cos(phi), r * np.sin(phi), z], axis=1)


def _structured_starts(d: int, K: int) -> list[np.ndarray]:
    if d == 2:
        a = 2 * np.pi * np.arange(K) / K
        return [np.stack([np.cos(a), np.sin(a)], axis=1)]
    if d == 3:
        return [_spiral(K)]
    return []


# ----------------------------------------------------------------------------------------------------------
# polish: SQP on the epigraph form, Newton on the active-set KKT equations, and the certificate
# ----------------------------------------------------------------------------------------------------------


def _slsqp(pieces: _Pieces, X0: np.ndarray, maxiter: int = 200, margin: float = 0.1) -> np.ndarray:
    """``max t`` s.t. ``f_c(X) >= t``, ``||x_a||^2 = 1`` by SLSQP from ``X0 (M, d)``; returns the unit rows.

    Only a working set of pieces enters the SQP: those within ``margin`` of the smallest (the far pairs cannot
    become active in a local step, and the dense QP subproblem costs ``O(n^2 m)``). Pieces that end below the
    new minimum are added and the solve repeated, so the answer is that of the full problem."""
    f = pieces.values(X0)
    work = np.flatnonzero(f <= f.min() + margin)
    X, best, best_v = X0, X0, float(f.min())
    for _ in range(5):
        X = _slsqp_on(_subset(pieces, work), X, maxiter)
        f = pieces.values(X)
        if np.isfinite(f).all() and f.min() > best_v:
            best, best_v = X, float(f.min())
        missing = np.setdiff1d(np.flatnonzero(f <= f.min() + margin), work)
        if missing.size == 0:
            break
        work = np.union1d(work, missing)
    # SQP is not monotone: from a poor start on a large problem it can leave the basin for a worse point
    return best


def _subset(pieces: _Pieces, idx: np.ndarray) -> _Pieces:
    return _Pieces(pieces.a[idx], pieces.b[idx], pieces.s[idx], pieces.M, pieces.pairs[idx])


def _slsqp_on(pieces: _Pieces, X0: np.ndarray, maxiter: int) -> np.ndarray:
    M, d = X0.shape
    n = M * d

    def split(z: np.ndarray) -> tuple[np.ndarray, float]:
        return z[:n].reshape(M, d), float(z[n])

    def ineq(z: np.ndarray) -> np.ndarray:
        X, t = split(z)
        return pieces.values(X) - t

    def ineq_jac(z: np.ndarray) -> np.ndarray:
        X, _ = split(z)
        J = pieces.jacobian(X).reshape(-1, n)
        return np.hstack([J, -np.ones((J.shape[0], 1))])

    def eq(z: np.ndarray) -> np.ndarray:
        X, _ = split(z)
        r: np.ndarray = np.sum(X * X, axis=1) - 1.0
        return r

    def eq_jac(z: np.ndarray) -> np.ndarray:
        X, _ = split(z)
        J = np.zeros((M, M, d))
        J[np.arange(M), np.arange(M)] = 2.0 * X
        return np.hstack([J.reshape(M, n), np.zeros((M, 1))])

    c = np.zeros(n + 1)
    c[n] = -1.0
    z0 = np.append(X0.ravel(), pieces.values(X0).min())
    # a box trust region around the start keeps the SQP steps local (one point moves at most ~0.3 per solve)
    box = [(v - 0.3, v + 0.3) for v in X0.ravel()] + [(None, None)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = minimize(
            lambda z: -z[n],
            z0,
            jac=lambda z: c,
            method="SLSQP",
            bounds=box,
            constraints=[
                {"type": "ineq", "fun": ineq, "jac": ineq_jac},
                {"type": "eq", "fun": eq, "jac": eq_jac},
            ],
            options={"maxiter": maxiter, "ftol": 1e-15},
        )
    return _unit(split(res.x)[0])


def _newton(pieces: _Pieces, X: np.ndarray, active_tol: float, iters: int = 8) -> np.ndarray:
    """Newton's method (minimum-norm least-squares steps) on the KKT equations of the active set of ``X``:
    ``sum_{c in A} lam_c grad f_c = 2 mu * X``, ``sum lam = 1``, ``f_c = t`` (``c in A``), ``||x_a||^2 = 1``.
    Returns ``X`` unchanged when the step does not lower the residual or leaves the multipliers negative."""
    X0 = X
    M, d = X.shape
    n = M * d
    f = pieces.values(X)
    t = float(f.min())
    A = np.flatnonzero(f - t <= active_tol)
    sub = _subset(pieces, A)
    JA = sub.jacobian(X).reshape(A.size, n)
    lam, *_ = np.linalg.lstsq(np.vstack([JA.T, np.ones((1, A.size))]), np.append(np.zeros(n), 1.0), rcond=None)
    mu = np.zeros(M)

    def residual(X: np.ndarray, t: float, lam: np.ndarray, mu: np.ndarray) -> np.ndarray:
        JA = sub.jacobian(X).reshape(A.size, n)
        return np.concatenate(
            [
                JA.T @ lam - 2.0 * (mu[:, None] * X).ravel(),
                [lam.sum() - 1.0],
                sub.values(X) - t,
                np.sum(X * X, axis=1) - 1.0,
            ]
        )

    # the tangent part of the stationarity equation fixes lam; mu_a = <x_a, grad_a> / 2 then holds exactly
    G = (JA.T @ lam).reshape(M, d)
    mu = 0.5 * np.sum(G * X, axis=1)
    best = (X, np.linalg.norm(residual(X, t, lam, mu)))
    for _ in range(iters):
        JA = sub.jacobian(X).reshape(A.size, n)
        D = np.zeros((M, n))
        D[np.repeat(np.arange(M), d), np.arange(n)] = X.ravel()
        jac = np.zeros((n + 1 + A.size + M, n + 1 + A.size + M))
        jac[:n, :n] = sub.hessian(lam, d) - 2.0 * np.kron(np.diag(mu), np.eye(d))
        jac[:n, n + 1 : n + 1 + A.size] = JA.T
        jac[:n, n + 1 + A.size :] = -2.0 * D.T
        jac[n, n + 1 : n + 1 + A.size] = 1.0
        jac[n + 1 : n + 1 + A.size, :n] = JA
        jac[n + 1 : n + 1 + A.size, n] = -1.0
        jac[n + 1 + A.size :, :n] = 2.0 * D
        r = residual(X, t, lam, mu)
        step, *_ = np.linalg.lstsq(jac, -r, rcond=None)
        X = X + step[:n].reshape(M, d)
        t += step[n]
        lam = lam + step[n + 1 : n + 1 + A.size]
        mu = mu + step[n + 1 + A.size :]
        norm = np.linalg.norm(residual(X, t, lam, mu))
        if norm < best[1]:
            best = (X, norm)
        if norm < 1e-14:
            break
    Xn = _unit(best[0])
    return Xn if pieces.values(Xn).min() >= f.min() - 1e-12 else X0


@dataclass(frozen=True)
class KKTCertificate:
    """First-order certificate of a code ``X (M, d)`` for ``max_X min_c f_c(X)`` (see the module docstring).

    Parameters
    ----------
    residual : float
        ``dist(0, conv{P_T grad f_c : c in active})`` (0 at a KKT point).
    active : ndarray of shape (m, 2)
        The active pieces (pairs ``(i, j)`` for Tammes, ``(k, j)`` = "``w_j`` against class ``k``" for Softmax
        Codes), those with ``f_c - min f <= active_tol``.
    multipliers : ndarray of shape (m,)
        The KKT multipliers, ``>= 0`` and summing to 1 (Wolfe's simplex weights).
    active_tol : float
        Tolerance defining the active pieces.
    tol : float
        Tolerance on the residual.
    ok : bool
        ``residual <= tol``.

    Examples
    --------
    The simplex ETF is a KKT point of the Softmax Code problem; all ``K (K - 1) = 12`` pieces are active:

    >>> from nclab.geometry import simplex_etf
    >>> from nclab.geometry.codes import code_kkt
    >>> cert = code_kkt(simplex_etf(4, 3))
    >>> cert.ok, cert.active.shape, round(float(cert.multipliers.sum()), 12)
    (True, (12, 2), 1.0)
    """

    residual: float
    active: np.ndarray
    multipliers: np.ndarray
    active_tol: float
    tol: float
    ok: bool


def _kkt(pieces: _Pieces, X: np.ndarray, active_tol: float = 1e-9, tol: float = KKT_TOL) -> KKTCertificate:
    f = pieces.values(X)
    A = np.flatnonzero(f - f.min() <= active_tol)
    J = pieces.jacobian(X)[A]
    J -= np.sum(J * X, axis=-1, keepdims=True) * X  # tangent parts
    hd = dist_to_hull(np.zeros(J[0].size), J.reshape(A.size, -1))
    return KKTCertificate(hd.distance, pieces.pairs[A], hd.weights, active_tol, tol, bool(hd.distance <= tol))


def code_kkt(W: Any, problem: str = "softmax", *, active_tol: float = 1e-9, tol: float = KKT_TOL) -> KKTCertificate:
    """First-order (KKT) certificate of a code ``W (K, d)`` for the Softmax Code or the Tammes problem.

    For ``problem="tammes"`` the pieces are ``f_ij = -<w_i, w_j>``; for ``"softmax"`` ``f_kj = <w_k - w_j, h_k>``
    with the optimal features ``h_k`` of ``W`` (:func:`nclab.geometry.optimal_features`). The residual is
    ``dist(0, conv{P_T grad f_c : f_c - min f <= active_tol})``, solved exactly (Wolfe); ``ok`` when it is
    ``<= tol``. A KKT point is locally stationary; this says nothing about global optimality.

    Examples
    --------
    >>> from nclab.geometry import icosahedron
    >>> code_kkt(icosahedron(), "tammes").ok
    True
    """
    from nclab.geometry.hull import optimal_features

    W = unit_rows(as_rows(W, name="W"), zero="raise")
    if problem == "tammes":
        return _kkt(_tammes_pieces(W.shape[0]), W, active_tol, tol)
    if problem == "softmax":
        return _kkt(_softmax_pieces(W.shape[0]), np.concatenate([W, optimal_features(W)]), active_tol, tol)
    raise ValueError(f"problem must be 'softmax' or 'tammes', got {problem!r}")


# ----------------------------------------------------------------------------------------------------------
# the search
# ----------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CodeSearch:
    """Best code of a search, its exact margins and what is certified about it.

    Parameters
    ----------
    W : ndarray of shape (K, d)
        The best code found, by the exact objective ``value``.
    value : float
        ``rho_one_vs_rest`` for Softmax Codes, ``rho_one_vs_one`` (the minimum chordal distance) for Tammes.
    values : ndarray
        The exact value of every polished candidate (or coarse start when not polished), best first.
    rho_one_vs_rest, rho_one_vs_one, max_cos, min_angle_deg : float
        Margins of ``W``.
    hardmax : float
        ``hardmax_value(W, optimal_features(W))``, which equals ``-rho_one_vs_rest`` (Lemma C.4, a check on the
        hull solver).
    max_gap : float
        Largest duality gap of the one-vs-rest QPs.
    rattlers : ndarray of int
        Rattler classes (Def 3.4).
    bounds : CodeBounds or None
        Thm 3.9 (``None`` for ``d < 2``).
    within_bounds : bool or None
        Whether ``rho_one_vs_rest`` lies in them (a check on the margin, not a certificate of optimality).
    kkt : KKTCertificate or None
        The first-order certificate (``None`` when not polished).
    certifies : str
        What is and what is not certified, in words.
    info : dict
        Objective, seed, numbers of starts and hops, wall time.

    Examples
    --------
    >>> from nclab.geometry import softmax_code_search
    >>> res = softmax_code_search(2, 5, restarts=2, hops=0)  # the regular pentagon
    >>> print(res.W.shape, f"{res.value:.6f} {res.hardmax:.6f}", res.kkt.ok)
    (5, 2) 0.690983 -0.690983 True
    """

    W: np.ndarray
    value: float
    values: np.ndarray
    rho_one_vs_rest: float
    rho_one_vs_one: float
    max_cos: float
    min_angle_deg: float
    hardmax: float
    max_gap: float
    rattlers: np.ndarray
    bounds: CodeBounds | None
    within_bounds: bool | None
    kkt: KKTCertificate | None
    certifies: str
    info: dict[str, Any] = field(default_factory=dict)


def _check(d: int, K: int, restarts: int, hops: int, steps: int | None = None) -> None:
    if check_int(d, name="d") < 1 or check_int(K, name="K") < 2:
        raise ValueError(f"need d >= 1 and K >= 2, got d={d}, K={K}")
    check_int(restarts, name="restarts", low=1)
    check_int(hops, name="hops", low=0)
    if steps is not None:  # 0 steps would report the random start as the optimised code
        check_int(steps, name="steps", low=1)


def _distinct(vals: np.ndarray, k: int, rtol: float = 1e-7) -> list[int]:
    """Indices of the ``k`` best values, skipping near-duplicates (same basin, most likely)."""
    out: list[int] = []
    for i in np.argsort(-vals, kind="stable"):
        if all(abs(vals[i] - vals[j]) > rtol * abs(vals[j]) for j in out):
            out.append(int(i))
        if len(out) == k:
            break
    return out


def _search(
    kind: str,
    d: int,
    K: int,
    *,
    restarts: int,
    hops: int,
    seed: int,
    steps: int | None,
    tau: tuple[float, float] | None,
    lr: tuple[float, float],
    polish: bool | None,
) -> CodeSearch:
    _check(d, K, restarts, hops, steps)
    d, K = int(d), int(K)
    # every search step forms the K^2 pairwise differences in d dimensions (a lower estimate of its memory)
    check_allocation(
        8.0 * K * K * (d + 1),
        what=f"the {kind} code search with K={K}, d={d} (K^2 pairs x d)",
        alternative="use a smaller K (the searches are meant for codes of up to a few hundred vectors)",
    )
    t0 = time.perf_counter()
    pieces = _tammes_pieces(K) if kind == "tammes" else _softmax_pieces(K)
    M = pieces.M
    do_polish = (M * d + 1 <= POLISH_MAX_VARS) if polish is None else bool(polish)
    gen = np.random.default_rng(int(seed))
    # fixed small temperature when polishing (diversity; the polish removes the smoothing bias); the old
    # continuation from a large temperature when not (its single basin is a good one for large K)
    if tau is None:
        tau = (0.02, 0.02) if do_polish else (0.2, 1e-4)
    n_steps = int(steps) if steps is not None else (300 if do_polish else 1500 + 5 * K)

    def lift(W: np.ndarray) -> np.ndarray:
        return W if kind == "tammes" else np.concatenate([W, W], axis=-2)

    def exact(W: np.ndarray) -> float:
        return one_vs_one(W).chordal if kind == "tammes" else one_vs_rest(W).rho

    starts = [lift(S) for S in _structured_starts(d, K)][:restarts]
    B = restarts - len(starts)
    X0 = _unit(gen.normal(size=(B, M, d)))
    if kind == "softmax":
        X0[:, K:] = X0[:, :K]
    X0 = np.concatenate([np.stack(starts), X0]) if starts else X0
    X = _coarse(pieces, X0, steps=n_steps, tau=tau, lr=lr)
    coarse_vals = np.array([exact(x[:K]) for x in X])
    if not do_polish:
        r = int(np.argmax(coarse_vals))
        W = unit_rows(X[r][:K], zero="raise")
        info = {"objective": _objective(kind), "seed": seed, "starts": restarts, "hops": 0, "polished": False}
        return _result(W, float(coarse_vals[r]), np.sort(coarse_vals)[::-1], None, _UNPOLISHED, info, t0)

    def polish_one(x: np.ndarray) -> tuple[np.ndarray, float]:
        xp = _slsqp(pieces, x)
        if kind == "softmax":  # exact optimal features of the polished code: the SQP's H may lag
            xp = np.concatenate([xp[:K], one_vs_rest(xp[:K]).features])
        return xp, exact(xp[:K])

    polished = [polish_one(X[i]) for i in _distinct(coarse_vals, 8)]
    best_x, best_v = max(polished, key=lambda p: p[1])
    vals = [v for _, v in polished]
    scale = 0.3 * best_v / math.sqrt(2.0)  # perturbations of about a third of the minimum distance
    for h in range(hops):
        P = best_x[None] + scale * (0.5 ** (h % 3)) * gen.normal(size=(max(2, restarts // 4), M, d))
        P = _coarse(pieces, _unit(P), steps=n_steps // 2, tau=tau, lr=(lr[0] / 4, lr[1]))
        pv = np.array([exact(x[:K]) for x in P])
        x, v = polish_one(P[int(np.argmax(pv))])
        vals.append(v)
        if v > best_v * (1 + 1e-12):
            best_x, best_v = x, v
    best_x = _newton(pieces, best_x, active_tol=1e-6)
    if kind == "softmax":
        best_x = np.concatenate([best_x[:K], one_vs_rest(best_x[:K]).features])
    kkt = _kkt(pieces, best_x)
    W = unit_rows(best_x[:K], zero="raise")
    info = {"objective": _objective(kind), "seed": seed, "starts": restarts, "hops": hops, "polished": True}
    return _result(W, exact(W), np.sort(np.array(vals))[::-1], kkt, CERTIFIES, info, t0)


def _search_1thread(*args: Any, **kwargs: Any) -> CodeSearch:
    """:func:`_search` with single-threaded BLAS: its matrices are tiny, and on a loaded 2-core machine threaded
    BLAS made the search 5x slower (measured, Tammes K = 6: 3.8 s vs 0.7 s)."""
    import scipy.linalg  # noqa: F401 - scipy's own OpenBLAS must be loaded for threadpoolctl to limit it

    with threadpool_limits(limits=1, user_api="blas"):
        return _search(*args, **kwargs)


def _objective(kind: str) -> str:
    return "rho_one_vs_one" if kind == "tammes" else "rho_one_vs_rest"


def _result(
    W: np.ndarray,
    value: float,
    values: np.ndarray,
    kkt: KKTCertificate | None,
    certifies: str,
    info: dict[str, Any],
    t0: float,
) -> CodeSearch:
    K, d = W.shape
    ovr = one_vs_rest(W)
    ovo = one_vs_one(W)
    hm = hardmax_value(W, ovr.features)
    bounds = softmax_code_bounds(d, K) if d >= 2 else None
    within = None
    if bounds is not None and bounds.valid:
        within = bool(bounds.lower <= ovr.rho <= bounds.upper)
    info = {**info, "seconds": time.perf_counter() - t0}
    return CodeSearch(
        W, value, values, ovr.rho, ovo.chordal, ovo.max_cos, ovo.min_angle_deg, hm, float(ovr.gaps.max()),
        ovr.rattlers, bounds, within, kkt, certifies, info,
    )  # fmt: skip


def softmax_code_search(
    d: int,
    K: int,
    *,
    restarts: int = 16,
    hops: int = 8,
    seed: int = 0,
    steps: int | None = None,
    tau: tuple[float, float] | None = None,
    lr: tuple[float, float] = (0.05, 1e-4),
    polish: bool | None = None,
) -> CodeSearch:
    """Softmax Code [Jiang et al. 2024, Def. 2.1]: ``max_{W in OB(d, K)} rho_one_vs_rest(W)``, with a KKT certificate.

    The joint max-min problem ``max_{W, H} min_{k != j} <w_k - w_j, h_k>`` over unit rows (HardMax with
    ``n = 1``, Thm 3.2) is searched from ``restarts`` starts (random and structured) by a smoothed coarse phase,
    the best distinct candidates are polished exactly (SQP on the epigraph form, then Newton on the active-set
    KKT equations), and ``hops`` basin-hopping rounds perturb the best code so far (see the module docstring).

    Parameters
    ----------
    d, K : int
        Dimension (``>= 1``) and number of classes (``>= 2``).
    restarts : int
        Starts of the coarse phase (batched).
    hops : int
        Basin-hopping rounds after the first polish (each: ``max(2, restarts // 4)`` perturbed starts).
    seed : int
        Seed of every random choice; results are reproducible.
    steps : int, optional
        Coarse Adam steps (default 300 when polishing, ``1500 + 5K`` otherwise).
    tau, lr : (float, float)
        Temperature and step size, decaying geometrically from the first to the second value (default ``tau``:
        fixed ``0.02`` when polishing, ``0.2 -> 1e-4`` otherwise).
    polish : bool, optional
        Run the exact polish (default: when ``2 K d + 1 <= POLISH_MAX_VARS``). Without it there is no hopping
        and no KKT certificate.

    Returns
    -------
    CodeSearch
        ``W (K, d)`` with unit rows, ``value = rho_one_vs_rest(W)`` (exact), the KKT certificate ``kkt`` and
        ``certifies``: the margin and local (KKT) optimality are certified, global optimality is not.

    See Also
    --------
    tammes_search : the one-vs-one (minimum distance) problem.
    nclab.geometry.one_vs_rest : the exact margin and its duality certificate.
    nclab.geometry.softmax_code_bounds : Thm 3.9 bounds on the optimum.

    Examples
    --------
    >>> res = softmax_code_search(3, 4, restarts=2, hops=0)
    >>> round(res.value, 9), res.kkt.ok        # the simplex: rho = K / (K - 1)
    (1.333333333, True)
    """
    return _search_1thread(
        "softmax", d, K, restarts=restarts, hops=hops, seed=seed, steps=steps, tau=tau, lr=lr, polish=polish
    )


def softmax_code(d: int, K: int, *, restarts: int = 16, seed: int = 0, **kwargs: Any) -> NDArray[np.float64]:
    """``(K, d)``: the best Softmax Code of :func:`softmax_code_search` (unit rows).

    Parameters
    ----------
    d : int
        Dimension, ``>= 1``.
    K : int
        Number of classes, ``>= 2``.
    restarts : int, default=16
        Starts of the coarse phase.
    seed : int, default=0
        Seed of every random choice.
    **kwargs
        Further options of :func:`softmax_code_search` (``hops``, ``steps``, ``tau``, ``lr``, ``polish``).

    Returns
    -------
    ndarray of shape (K, d)
        The code, unit rows.

    See Also
    --------
    softmax_code_search : the search with its certificates.

    Examples
    --------
    >>> from nclab.geometry import rho_one_vs_rest, softmax_code
    >>> W = softmax_code(3, 4, restarts=2, hops=0)
    >>> print(W.shape, f"{rho_one_vs_rest(W):.6f}")  # the tetrahedron, K/(K-1)
    (4, 3) 1.333333
    """
    return softmax_code_search(d, K, restarts=restarts, seed=seed, **kwargs).W


def tammes_search(
    d: int,
    K: int,
    *,
    restarts: int = 16,
    hops: int = 16,
    seed: int = 0,
    steps: int | None = None,
    tau: tuple[float, float] | None = None,
    lr: tuple[float, float] = (0.05, 1e-4),
    polish: bool | None = None,
) -> CodeSearch:
    """Tammes code [Jiang et al. 2024, eq. (11)]: ``max_{W in OB(d, K)} min_{i != j} ||w_i - w_j||``, with a KKT
    certificate.

    Same search as :func:`softmax_code_search` on the pieces ``f_ij = -<w_i, w_j>`` (minimising the largest
    cosine). ``value`` is the exact minimum chordal distance ``2 sin(theta_min / 2)``; ``min_angle_deg`` the
    minimum angle. With the defaults it reaches the best known codes on ``S^2`` for ``K = 4..24`` [Sloane 2000] to
    ``1e-4`` degrees (tested). ``hops`` defaults to 16 here (8 for Softmax Codes): with 8, ``K = 21`` stopped at a
    certified local optimum 3e-4 degrees short for 2 of 126 (K, seed, BLAS build) searches, with 16 for none
    (``K = 4..24``, seeds 0-2, OpenBLAS with AVX-512 and with Haswell kernels), at 1.6x the time.

    Parameters
    ----------
    d : int
        Dimension, ``>= 1``.
    K : int
        Number of classes, ``>= 2``.
    restarts : int, default=16
        Starts of the coarse phase (batched).
    hops : int, default=16
        Basin-hopping rounds after the first polish.
    seed : int, default=0
        Seed of every random choice; results are reproducible.
    steps : int, optional
        Coarse Adam steps.
    tau, lr : (float, float), optional
        Temperature and step size schedules, as in :func:`softmax_code_search`.
    polish : bool, optional
        Run the exact polish (default: when the problem is small enough).

    Returns
    -------
    CodeSearch
        ``W (K, d)`` with unit rows, ``value`` the exact minimum chordal distance and the KKT certificate ``kkt``.

    See Also
    --------
    softmax_code_search : parameters, result and certificate.
    nclab.geometry.one_vs_one : the exact minimum distance.

    Examples
    --------
    >>> res = tammes_search(3, 6, restarts=2, hops=0)  # the octahedron
    >>> round(res.min_angle_deg, 6), res.kkt.ok
    (90.0, True)
    """
    return _search_1thread(
        "tammes", d, K, restarts=restarts, hops=hops, seed=seed, steps=steps, tau=tau, lr=lr, polish=polish
    )


def tammes(d: int, K: int, *, restarts: int = 16, seed: int = 0, **kwargs: Any) -> NDArray[np.float64]:
    """``(K, d)``: the best Tammes code of :func:`tammes_search` (unit rows).

    Parameters
    ----------
    d : int
        Dimension, ``>= 1``.
    K : int
        Number of classes, ``>= 2``.
    restarts : int, default=16
        Starts of the coarse phase.
    seed : int, default=0
        Seed of every random choice.
    **kwargs
        Further options of :func:`tammes_search` (``hops``, ``steps``, ``tau``, ``lr``, ``polish``).

    Returns
    -------
    ndarray of shape (K, d)
        The code, unit rows.

    See Also
    --------
    tammes_search : the search with its certificates.

    Examples
    --------
    >>> from nclab.geometry import one_vs_one, tammes
    >>> W = tammes(2, 5, restarts=2, hops=0)
    >>> print(W.shape, f"{one_vs_one(W).min_angle_deg:.4f}")  # the pentagon, 72 degrees
    (5, 2) 72.0000
    """
    return tammes_search(d, K, restarts=restarts, seed=seed, **kwargs).W
