"""Distances to convex hulls and the margins of [Jiang et al. 2024]: one-vs-rest (Softmax Code) and one-vs-one (Tammes).

Rows are classes: a code or classifier ``W`` is ``(K, d)`` ([Jiang et al. 2024] writes columns; transposed here).

``dist(w, A) = min_{v in simplex} ||w - A^T v||`` (``A (m, d)``, one point per row) is solved exactly by Wolfe's
minimum-norm-point algorithm [Wolfe 1976] on the shifted points ``a_j - w``, with an incrementally updated
Cholesky factor of ``G_S + 1 1^T`` (``G_S`` the Gram matrix of the support), so each step is ``O(m d + s^2)``.
Every answer carries the weak-duality certificate of [Jiang et al. 2024], Lemma C.4/C.6:

* upper bound: ``||w - A^T v||`` for the returned simplex weights ``v``;
* lower bound: ``min_j <w - a_j, h>`` for the returned unit feature ``h = (w - p)/||w - p||``;

``gap = upper - lower >= 0`` and both equal ``dist`` at the optimum.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.linalg import solve_triangular

from nclab.validation import as_rows, check_labels, unit_rows

__all__ = [
    "HullDistance",
    "OneVsOne",
    "OneVsRest",
    "dist_to_hull",
    "hardmax_value",
    "one_vs_one",
    "one_vs_rest",
    "one_vs_rest_distances",
    "optimal_features",
    "rho_one_vs_one",
    "rho_one_vs_rest",
]

#: relative optimality tolerance of Wolfe's major cycle: stop when ``||x||^2 - min_j <x, p_j>`` is below
#: ``OPT_RTOL * max_j ||p_j||^2`` (the duality gap is then ``<= OPT_RTOL * max ||p||^2 / dist``).
OPT_RTOL = 1e-15
#: a weight below this (relative) leaves the support in the minor cycle
WEIGHT_TOL = 1e-12


@dataclass(frozen=True)
class HullDistance:
    """Result of :func:`dist_to_hull` for a point ``w (d,)`` and points ``A (m, d)``.

    Parameters
    ----------
    distance : float
        ``||w - p||``, the distance from ``w`` to the hull.
    weights : ndarray of shape (m,)
        Simplex weights ``v`` with ``p = A^T v``.
    point : ndarray of shape (d,)
        The nearest point ``p`` of the hull.
    feature : ndarray of shape (d,)
        The unit vector ``h = (w - p)/||w - p||`` (Lemma C.4's optimal feature); when the distance is 0,
        ``w/||w||``, which is optimal for unit ``w``.
    lower, upper : float
        The weak-duality bounds ``min_j <w - a_j, h>`` and ``||w - p||``.
    gap : float
        ``upper - lower >= 0``.
    support : ndarray of int
        Indices with positive weight (at most ``d + 1``, Caratheodory).
    iterations : int
        Wolfe major cycles.

    Examples
    --------
    >>> import numpy as np
    >>> from nclab.geometry import dist_to_hull
    >>> res = dist_to_hull([0.0, 1.0], [[-1.0, 0.0], [1.0, 0.0]])
    >>> print(res.distance, np.round(res.weights, 6), np.round(res.feature, 6) + 0.0)
    1.0 [0.5 0.5] [0. 1.]
    """

    distance: float
    weights: np.ndarray
    point: np.ndarray
    feature: np.ndarray
    lower: float
    upper: float
    gap: float
    support: np.ndarray
    iterations: int


def _cholesky_append(R: np.ndarray, col: np.ndarray, diag: float) -> np.ndarray | None:
    """Extend the upper Cholesky factor ``R`` (``M = R^T R``) by one row/column; ``None`` if the new matrix is
    numerically singular (the new point is affinely dependent on the support)."""
    s = R.shape[0]
    r = solve_triangular(R, col, trans="T", lower=False, check_finite=False) if s else np.zeros(0)
    rho2 = diag - r @ r
    if rho2 <= 1e-24 * diag:
        return None
    out = np.zeros((s + 1, s + 1))
    out[:s, :s] = R
    out[:s, s] = r
    out[s, s] = np.sqrt(rho2)
    return out


def _cholesky_delete(R: np.ndarray, i: int) -> np.ndarray:
    """Upper Cholesky factor of ``M`` with row and column ``i`` removed: drop column ``i`` of ``R`` (an upper
    Hessenberg matrix remains) and re-triangularise with Givens rotations, ``O(s^2)``."""
    H = np.delete(R, i, axis=1)
    s = H.shape[1]
    for l in range(i, s):
        a, b = H[l, l], H[l + 1, l]
        r = np.hypot(a, b)
        if r == 0.0:
            continue
        c, sn = a / r, b / r
        rows = H[[l, l + 1], l:]
        H[l, l:] = c * rows[0] + sn * rows[1]
        H[l + 1, l:] = -sn * rows[0] + c * rows[1]
    return H[:s, :]


def _wolfe(
    P: np.ndarray, *, start: int | None = None, max_iter: int | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Minimum-norm point of ``conv(rows of P)`` [Wolfe 1976]. Returns (support indices, their weights, x, iters).

    ``M_S = P_S P_S^T + 1 1^T`` is positive definite iff the support is affinely independent; its solution of
    ``M_S a = 1``, normalised to sum 1, is the affine minimiser of the support (the ``1 1^T`` term turns the
    equality-constrained problem into one linear solve).
    """
    m = P.shape[0]
    sq = np.einsum("md,md->m", P, P)
    scale = float(sq.max()) if m else 1.0
    j0 = int(np.argmin(sq)) if start is None else int(start)
    S = [j0]
    lam = np.array([1.0])
    R = np.array([[np.sqrt(sq[j0] + 1.0)]])
    x = P[j0].copy()
    max_iter = 50 * (P.shape[1] + 1) + 100 if max_iter is None else max_iter
    it = 0
    for it in range(1, max_iter + 1):  # noqa: B007 - the count is returned
        dots = P @ x
        j = int(np.argmin(dots))
        xx = float(x @ x)
        if xx - dots[j] <= OPT_RTOL * scale or j in S:
            break
        Rn = _cholesky_append(R, P[S] @ P[j] + 1.0, sq[j] + 1.0)
        if Rn is None:  # numerically dependent: x is optimal to working precision
            break
        # a major cycle strictly decreases ||x||^2 in exact arithmetic; on a degenerate optimal face (e.g. the
        # cross-polytope) roundoff makes it cycle instead, so a cycle that does not decrease it is undone
        prev = (list(S), lam.copy(), R, x.copy())
        R = Rn
        S.append(j)
        lam = np.append(lam, 0.0)
        while True:  # minor cycle: move towards the affine minimiser, dropping points whose weight hits 0
            ones = np.ones(len(S))
            a = solve_triangular(R, solve_triangular(R, ones, trans="T", check_finite=False), check_finite=False)
            a /= a.sum()
            if np.all(a > WEIGHT_TOL):
                lam = a
                break
            neg = a <= WEIGHT_TOL
            theta = float(np.min(lam[neg] / (lam[neg] - a[neg])))
            lam = lam + theta * (a - lam)
            drop = np.flatnonzero(lam <= WEIGHT_TOL)
            if drop.size == 0:  # roundoff: drop the most negative affine coefficient
                drop = np.array([int(np.argmin(a))])
            for i in sorted(drop.tolist(), reverse=True):
                R = _cholesky_delete(R, i)
                del S[i]
            lam = np.delete(lam, drop)
            lam = np.clip(lam, 0.0, None)
            lam /= lam.sum()
        x = lam @ P[S]
        if float(x @ x) >= xx:
            S, lam, R, x = prev
            break
    return np.asarray(S, dtype=np.intp), lam, x, it


def _as_point(w: Any, name: str, d: int | None = None) -> np.ndarray:
    a = np.asarray(w, dtype=np.float64)
    if a.ndim != 1:
        raise ValueError(f"{name} must be a vector (d,), got shape {a.shape}")
    if d is not None and a.shape[0] != d:
        raise ValueError(f"{name} has dimension {a.shape[0]}, expected {d}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} contains non-finite values")
    return a


def _certify(w: np.ndarray, A: np.ndarray, S: np.ndarray, lam: np.ndarray, x: np.ndarray, it: int) -> HullDistance:
    m, d = A.shape
    weights = np.zeros(m)
    weights[S] = lam
    point = w + x
    dist = float(np.linalg.norm(x))
    if dist > 0.0:
        h = -x / dist
    else:
        nw = float(np.linalg.norm(w))
        h = w / nw if nw > 0 else np.zeros(d)
    lower = float(np.min((w - A) @ h))
    return HullDistance(dist, weights, point, h, lower, dist, dist - lower, S[lam > 0], it)


def dist_to_hull(w: Any, A: Any) -> HullDistance:
    """Distance from ``w (d,)`` to the convex hull of the rows of ``A (m, d)`` [Jiang et al. 2024, Sec. 2.1].

    Solves the simplex-constrained QP ``min_{v >= 0, 1^T v = 1} ||w - A^T v||^2`` (the dual (C.22) of Lemma
    C.6) exactly with Wolfe's minimum-norm-point algorithm, and certifies it by weak duality: for the unit
    ``h = (w - p)/||w - p||``, ``min_j <w - a_j, h> <= dist <= ||w - p||`` (see :class:`HullDistance`); the gap
    is at roundoff level for well-scaled problems, up to ~1e-7 when a point lies within ~sqrt(eps) of the affine
    hull of the optimal support (optimised codes have such near-ties: Wolfe's step is then numerically singular and
    stops, the distance itself exact to roundoff, the certificate's lower bound short by that much). ``m = 1``
    gives ``||w - a_1||``.

    Parameters
    ----------
    w : array-like of shape (d,)
        The point.
    A : array-like of shape (m, d)
        The points spanning the hull, one per row, ``m >= 1``.

    Returns
    -------
    HullDistance
        The distance, the simplex weights and nearest point, the optimal unit feature and the weak-duality
        bounds; ``distance = 0`` (and ``feature = w/||w||``) when ``w`` lies in the hull.

    Raises
    ------
    ValueError
        If ``w`` is not a finite vector of ``A``'s dimension.

    See Also
    --------
    one_vs_rest : the distance of every class of a code to the hull of the others.

    Examples
    --------
    The unit square's corner ``(1, 1)`` is at distance ``sqrt(2)/2`` from the segment between its neighbours
    ``(1, 0)`` and ``(0, 1)``:

    >>> import numpy as np
    >>> from nclab.geometry import dist_to_hull
    >>> res = dist_to_hull([1.0, 1.0], [[1.0, 0.0], [0.0, 1.0]])
    >>> print(f"{res.distance:.6f}", np.round(res.point, 6), res.gap < 1e-12)
    0.707107 [0.5 0.5] True
    """
    A = as_rows(A, name="A", min_rows=1)
    w = _as_point(w, "w", A.shape[1])
    S, lam, x, it = _wolfe(A - w)
    return _certify(w, A, S, lam, x, it)


@dataclass(frozen=True)
class OneVsRest:
    """Per-class one-vs-rest results of :func:`one_vs_rest` for ``W (K, d)``.

    Parameters
    ----------
    distances : ndarray of shape (K,)
        ``dist(w_k, conv{w_j : j != k})``.
    rho : float
        Their minimum, the one-vs-rest margin (eq. (3)).
    features : ndarray of shape (K, d)
        The optimal unit features ``h_k`` (Lemma C.4 / eq. (9)).
    gaps : ndarray of shape (K,)
        Duality gaps of the per-class QPs.
    rattlers : ndarray of int
        Classes with ``distances_k > rho (1 + rattler_rtol)`` (Def 3.4, with a tolerance).
    support_sizes : ndarray of shape (K,)
        Number of other classes in the support of each nearest point.

    Examples
    --------
    >>> from nclab.geometry import one_vs_rest, regular_polygon
    >>> res = one_vs_rest(regular_polygon(4))  # the square: rho = 1 - cos(pi/2) = 1
    >>> print(f"{res.rho:.6f}", res.support_sizes.tolist())
    1.000000 [2, 2, 2, 2]
    """

    distances: np.ndarray
    rho: float
    features: np.ndarray
    gaps: np.ndarray
    rattlers: np.ndarray
    support_sizes: np.ndarray


def _class_distance(W: np.ndarray, k: int, cand: np.ndarray | None) -> HullDistance:
    """``dist(w_k, conv(others))`` for row ``k`` of ``W``.

    With ``cand`` (indices of other classes): column generation. Solve on the candidates, then test every class
    with the optimality condition of the min-norm point (``p`` is optimal iff ``max_j <w_j, w_k - p> <=
    <p, w_k - p>``, i.e. ``min_j <w_j - w_k, x> >= ||x||^2`` for ``x = p - w_k``), add the violators and re-solve,
    until none violates. Memory ``O(|cand| d + K)``; one ``K x d`` product per round.
    """
    K = W.shape[0]
    w = W[k]
    others = np.delete(np.arange(K), k)
    active = others if cand is None else np.asarray(cand, dtype=np.intp)
    start: int | None = None
    iters = 0
    scale = None
    while True:
        P = W[active] - w
        S, lam, x, it = _wolfe(P, start=start)
        iters += it
        if scale is None:
            scale = float(np.einsum("md,md->m", P, P).max())
        dots = W @ x - w @ x  # <w_j - w_k, x> for every class, never a K x d temporary
        dots[k] = np.inf
        if active.size == K - 1:
            break
        viol = np.flatnonzero(x @ x - dots > 10 * OPT_RTOL * scale)
        viol = np.setdiff1d(viol, active)
        if viol.size == 0:
            break
        # add the worst violators (at most as many as there are active points), warm start at the heaviest
        worst = viol[np.argsort(dots[viol])[: max(1, active.size)]]
        start = int(S[np.argmax(lam)])
        active = np.concatenate([active, worst])
    weights = np.zeros(K)
    weights[active[S]] = lam
    dist = float(np.linalg.norm(x))
    if dist > 0:
        h = -x / dist
    else:  # w_k in the hull of the others: w_k/||w_k|| is optimal for unit rows (value 0)
        h = w / max(float(np.linalg.norm(w)), np.finfo(float).tiny)
    lower = float(np.min(np.delete(w @ h - W @ h, k)))
    return HullDistance(dist, weights, w + x, h, lower, dist, dist - lower, active[S][lam > 0], iters)


def _scan(W: np.ndarray, num: int | None, block: int = 256) -> tuple[np.ndarray, np.ndarray | None]:
    """One blocked pass over ``W W^T`` (memory ``O(block K)``): the weak-duality lower bound of every class
    with ``h = w_k/||w_k||``, ``lb_k = min_{j != k} <w_k - w_j, w_k>/||w_k||``, and (``num`` not None) the
    ``num`` nearest other classes of each class, ``(K, num)``."""
    K = W.shape[0]
    sq = np.einsum("kd,kd->k", W, W)
    norms = np.sqrt(sq)
    lb = np.empty(K)
    cand = None if num is None else np.empty((K, num), dtype=np.intp)
    for start in range(0, K, block):
        rows = np.arange(start, min(K, start + block))
        G = W[rows] @ W.T
        G[np.arange(rows.size), rows] = -np.inf
        lb[rows] = (sq[rows] - G.max(axis=1)) / np.where(norms[rows] > 0, norms[rows], 1.0)
        if cand is not None and num is not None:  # both or neither
            D = sq[None, :] - 2.0 * G  # ||w_k - w_j||^2 - ||w_k||^2 (same order per row); diagonal +inf
            cand[rows] = np.argpartition(D, num - 1, axis=1)[:, :num]
    return lb, cand


def _num_candidates(K: int, d: int, candidates: int | None) -> int | None:
    if candidates == -1:
        # the support has at most d + 1 points (Caratheodory); the d + 1 nearest classes usually hold most of it
        # and the violator check adds the rest. Small problems are solved on all classes directly.
        return None if K <= 512 else min(K - 1, d + 1)
    if candidates is not None and candidates < 1:
        raise ValueError(f"candidates must be >= 1, None or -1, got {candidates}")
    return None if candidates is None or candidates >= K - 1 else int(candidates)


def one_vs_rest(
    W: Any, *, normalize: bool = False, rattler_rtol: float = 1e-4, candidates: int | None = -1
) -> OneVsRest:
    """One-vs-rest distances of every class of ``W (K, d)``, ``K >= 2`` [Jiang et al. 2024, Sec. 2.1 and eq. (3)].

    ``dist_k = min_{v in simplex} ||w_k - sum_{j != k} v_j w_j||``, ``rho = min_k dist_k``. Rows are used as
    given (``normalize=True`` first puts them on the sphere, as GNC2 does). ``candidates``: the number of
    nearest classes each QP starts from (column generation with an exact violator check, so the answer does
    not depend on it; ``-1``: automatic, all classes for ``K <= 512``, ``d + 1`` otherwise; ``None``: all).
    Memory ``O(K d + K candidates)``. Rattlers (Def 3.4): ``dist_k > rho (1 + rattler_rtol)``.

    Parameters
    ----------
    W : array-like of shape (K, d)
        The classifier or code, one row per class, ``K >= 2``.
    normalize : bool, default=False
        Put the rows on the unit sphere first (zero rows raise).
    rattler_rtol : float, default=1e-4
        Relative tolerance above ``rho`` beyond which a class counts as a rattler.
    candidates : int or None, default=-1
        Nearest classes each QP starts from (``-1``: automatic; ``None``: all); the answer does not depend on it.

    Returns
    -------
    OneVsRest
        Per-class distances, ``rho``, optimal features, duality gaps, rattlers and support sizes; ``rho = 0``
        when two rows coincide or one lies in the hull of the others.

    See Also
    --------
    rho_one_vs_rest : the minimum alone, with pruning.
    one_vs_one : the Tammes (minimum pairwise distance) counterpart.

    Examples
    --------
    The regular tetrahedron (a simplex ETF, ``K = 4`` in ``d = 3``): every class has margin ``4/3``.

    >>> from nclab.geometry import one_vs_rest, simplex_etf
    >>> res = one_vs_rest(simplex_etf(4, 3))
    >>> print(f"{res.rho:.6f}", res.support_sizes.tolist(), res.rattlers.tolist())
    1.333333 [3, 3, 3, 3] []
    """
    W = as_rows(W, name="W")
    if normalize:
        W = unit_rows(W, zero="raise", name="W")
    K, d = W.shape
    num = _num_candidates(K, d, candidates)
    _, cand = _scan(W, num)
    dist = np.empty(K)
    gaps = np.empty(K)
    feats = np.empty((K, d))
    supp = np.empty(K, dtype=np.intp)
    for k in range(K):
        r = _class_distance(W, k, None if cand is None else cand[k])
        dist[k], gaps[k], feats[k], supp[k] = r.distance, r.gap, r.feature, r.support.size
    rho = float(dist.min())
    ratt = np.flatnonzero(dist > rho * (1.0 + rattler_rtol))
    return OneVsRest(dist, rho, feats, gaps, ratt, supp)


def one_vs_rest_distances(W: Any, *, normalize: bool = False, candidates: int | None = -1) -> NDArray[np.float64]:
    """``(K,)``: ``dist(w_k, conv{w_j : j != k})`` for each row of ``W (K, d)`` [Jiang et al. 2024, Sec. 2.1]; see
    :func:`one_vs_rest`.

    Parameters
    ----------
    W : array-like of shape (K, d)
        The classifier or code, one row per class, ``K >= 2``.
    normalize : bool, default=False
        Put the rows on the unit sphere first.
    candidates : int or None, default=-1
        As in :func:`one_vs_rest`.

    Returns
    -------
    ndarray of shape (K,)
        ``dist(w_k, conv{w_j : j != k})``; 0 for a class in the hull of the others.

    Examples
    --------
    The orthogonal frame ``I_3``: each class is at ``sqrt(K/(K-1)) = sqrt(3/2)`` from the others' hull.

    >>> import numpy as np
    >>> from nclab.geometry import one_vs_rest_distances
    >>> print(np.round(one_vs_rest_distances(np.eye(3)), 6))
    [1.224745 1.224745 1.224745]
    """
    return one_vs_rest(W, normalize=normalize, candidates=candidates).distances


def _project_simplex(V: np.ndarray) -> np.ndarray:
    """Row-wise Euclidean projection onto the probability simplex (sort-based, [Held et al. 1974])."""
    U = -np.sort(-V, axis=1)
    css = np.cumsum(U, axis=1) - 1.0
    idx = np.arange(1, V.shape[1] + 1)
    r = np.count_nonzero(U - css / idx > 0, axis=1)
    theta = css[np.arange(V.shape[0]), r - 1] / r
    P: np.ndarray = np.maximum(V - theta[:, None], 0.0)
    return P


def _batched_bounds(
    W: np.ndarray, rows: np.ndarray, cand: np.ndarray, iters: int, rounds: int = 3
) -> tuple[np.ndarray, np.ndarray]:
    """Certified bounds on ``dist_k`` for a block of classes at once.

    Each round solves the simplex QP restricted to each class's candidates by FISTA (in weight space, with the
    candidates' Gram matrix, so an iteration is a batched ``c x c`` product), giving the upper bound
    ``ub = ||x||``, and the weak-duality lower bound ``lb = min_{j != k} <w_k - w_j, h>`` over **all** classes
    for ``h = -x/||x||`` (one block product). The next round's candidates are the classes with the largest
    ``<w_j, h>``: at the optimum the support is exactly where this score is maximal (Lemma C.6), so this is
    column generation with the dual as the pricing rule. Bounds are kept across rounds (all are valid)."""
    c = cand.shape[1]
    b = rows.size
    best_lb = np.full(b, -np.inf)
    best_ub = np.full(b, np.inf)
    wk = W[rows]
    for r in range(rounds):
        P = W[cand] - wk[:, None, :]  # (b, c, d)
        G = P @ P.transpose(0, 2, 1)  # (b, c, c)
        step = 1.0 / (2.0 * np.maximum(np.linalg.norm(G, axis=(1, 2)), np.finfo(float).tiny))  # 1/L, L >= 2 lmax
        v = np.full((b, c), 1.0 / c)
        y, t = v.copy(), 1.0
        for _ in range(iters):
            grad = 2.0 * (G @ y[:, :, None])[:, :, 0]
            vn = _project_simplex(y - step[:, None] * grad)
            tn = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * t * t))
            y = vn + ((t - 1.0) / tn) * (vn - v)
            v, t = vn, tn
        x = (v[:, None, :] @ P)[:, 0, :]
        ub = np.linalg.norm(x, axis=1)
        h = -x / np.maximum(ub, np.finfo(float).tiny)[:, None]
        M = h @ W.T  # <w_j, h_k>
        M[np.arange(b), rows] = -np.inf
        lb = np.einsum("kd,kd->k", wk, h) - M.max(axis=1)
        best_lb = np.maximum(best_lb, np.minimum(lb, ub))
        best_ub = np.minimum(best_ub, ub)
        if r + 1 < rounds:
            cand = np.argpartition(-M, c - 1, axis=1)[:, :c]
    return best_lb, best_ub


def rho_one_vs_rest(W: Any, *, normalize: bool = False, candidates: int | None = -1) -> float:
    """``rho_one-vs-rest(W) = min_k dist(w_k, conv{w_j : j != k})`` ([Jiang et al. 2024, eq. (3)]; GNC2 on unit rows).

    Exact, with pruning by certified bounds. Small ``K`` (``<= 512``): every class has the weak-duality lower
    bound ``min_{j != k} <w_k - w_j, w_k>/||w_k||`` (``h = w_k/||w_k||`` in Lemma C.4); classes are solved
    exactly in increasing order of it until it reaches the smallest distance found. Large ``K``: in blocks of
    64 classes, a batched first-order solve on 96 candidates (nearest classes, then three rounds of column
    generation priced by the dual) gives an upper bound ``ub_k`` and a lower bound ``lb_k`` (weak duality over
    all classes) for every class; only classes with
    ``lb_k < min ub`` are then solved exactly (Wolfe with candidates and violator checks, see
    :func:`one_vs_rest`), and ``rho = min(min ub, their distances)``. Memory ``O(K d + 64 K)``.
    0 when two rows coincide (or one is in the hull of the others).

    Parameters
    ----------
    W : array-like of shape (K, d)
        The classifier or code, one row per class, ``K >= 2``.
    normalize : bool, default=False
        Put the rows on the unit sphere first.
    candidates : int or None, default=-1
        As in :func:`one_vs_rest`.

    Returns
    -------
    float
        The margin ``rho``; 0 when two rows coincide or one is in the hull of the others.

    See Also
    --------
    one_vs_rest : every class's distance, feature and certificate.

    Examples
    --------
    >>> from nclab.geometry import rho_one_vs_rest, simplex_etf
    >>> print(f"{rho_one_vs_rest(simplex_etf(5, 4)):.6f}")  # K/(K-1)
    1.250000
    """
    W = as_rows(W, name="W")
    if normalize:
        W = unit_rows(W, zero="raise", name="W")
    K, d = W.shape
    num = _num_candidates(K, d, candidates)
    if num is None:
        lb, _ = _scan(W, None)
        best = np.inf
        for k in np.argsort(lb, kind="stable"):
            if lb[k] >= best:
                break
            best = min(best, _class_distance(W, int(k), None).distance)
        return float(best)
    c = min(K - 1, 96)
    lb = np.empty(K)
    ub = np.empty(K)
    sq = np.einsum("kd,kd->k", W, W)
    for start in range(0, K, 64):
        rows = np.arange(start, min(K, start + 64))
        D = sq[None, :] - 2.0 * (W[rows] @ W.T)  # ||w_k - w_j||^2 - ||w_k||^2
        D[np.arange(rows.size), rows] = np.inf
        cand = np.argpartition(D, c - 1, axis=1)[:, :c]
        lb[rows], ub[rows] = _batched_bounds(W, rows, cand, iters=150, rounds=3)
    best = float(ub.min())
    for k in np.argsort(lb, kind="stable"):
        if lb[k] >= best:
            break
        d2 = sq - 2.0 * (W @ W[k])
        d2[k] = np.inf
        best = min(best, _class_distance(W, int(k), np.argpartition(d2, num - 1)[:num]).distance)
    return best


@dataclass(frozen=True)
class OneVsOne:
    """Tammes quantities of :func:`one_vs_one` for unit rows.

    Parameters
    ----------
    chordal : float
        ``min_{j != k} ||w_j - w_k||``, rows as given.
    max_cos : float
        Largest off-diagonal cosine.
    min_angle_deg : float
        ``degrees(arccos(max_cos))``.
    pair : tuple of int
        The closest pair ``(j, k)``.

    Examples
    --------
    >>> from nclab.geometry import one_vs_one, octahedron
    >>> res = one_vs_one(octahedron())
    >>> print(f"{res.chordal:.6f} {res.min_angle_deg:.1f}", res.pair)
    1.414214 90.0 (0, 2)
    """

    chordal: float
    max_cos: float
    min_angle_deg: float
    pair: tuple[int, int]


def one_vs_one(W: Any, *, block: int = 1024) -> OneVsOne:
    """One-vs-one separation of ``W (K, d)``, ``K >= 2`` [Jiang et al. 2024, eq. (11)]: the minimum pairwise chordal
    distance (rows as given), the maximum pairwise cosine and the minimum angle (rows normalised; zero rows
    raise). Memory ``O(block K)``.

    Parameters
    ----------
    W : array-like of shape (K, d)
        The classifier or code, one row per class, ``K >= 2``; no zero row.
    block : int, default=1024
        Rows of the Gram matrix computed at a time.

    Returns
    -------
    OneVsOne
        The minimum chordal distance, maximum cosine, minimum angle and the closest pair.

    See Also
    --------
    rho_one_vs_one : the chordal distance alone.
    one_vs_rest : the one-vs-rest margin.

    Examples
    --------
    The regular hexagon: neighbours are 60 degrees apart, at chordal distance 1.

    >>> from nclab.geometry import one_vs_one, regular_polygon
    >>> res = one_vs_one(regular_polygon(6))
    >>> print(f"{res.chordal:.6f} {res.max_cos:.6f} {res.min_angle_deg:.4f}")
    1.000000 0.500000 60.0000
    """
    W = as_rows(W, name="W")
    U = unit_rows(W, zero="raise", name="W")
    sq = np.einsum("kd,kd->k", W, W)
    best_d2, best_cos, pair = np.inf, -np.inf, (0, 1)
    K = W.shape[0]
    for start in range(0, K, block):
        rows = np.arange(start, min(K, start + block))
        D = sq[rows, None] + sq[None, :] - 2.0 * (W[rows] @ W.T)
        D[np.arange(rows.size), rows] = np.inf
        C = U[rows] @ U.T
        C[np.arange(rows.size), rows] = -np.inf
        i = np.unravel_index(np.argmin(D), D.shape)
        if D[i] < best_d2:
            best_d2, pair = float(D[i]), (int(rows[i[0]]), int(i[1]))
        best_cos = max(best_cos, float(C.max()))
    best_cos = min(1.0, best_cos)
    chordal = float(np.sqrt(max(best_d2, 0.0)))
    return OneVsOne(chordal, best_cos, float(np.degrees(np.arccos(best_cos))), pair)


def rho_one_vs_one(W: Any) -> float:
    """``rho_one-vs-one(W) = min_{k != k'} ||w_k - w_k'||`` ([Jiang et al. 2024, eq. (11)], the Tammes objective); for
    unit
    rows ``= 2 sin(theta_min / 2)``. Always ``>= rho_one_vs_rest(W)`` (each ``w_k'`` is in the hull of the
    others).

    Parameters
    ----------
    W : array-like of shape (K, d)
        The classifier or code, one row per class, ``K >= 2``.

    Returns
    -------
    float
        The minimum pairwise distance; 0 when two rows coincide.

    Examples
    --------
    >>> from nclab.geometry import rho_one_vs_one, simplex_etf
    >>> print(f"{rho_one_vs_one(simplex_etf(3, 2)):.6f}")  # sqrt(3) for the unit triangle
    1.732051
    """
    return one_vs_one(W).chordal


def optimal_features(W: Any, *, normalize: bool = False) -> NDArray[np.float64]:
    """``H*(W) (K, d)``: for each class the unit feature minimising ``max_{k' != k} <w_k' - w_k, h>`` over the
    sphere ([Jiang et al. 2024], Lemma C.4 and eq. (9)): ``h_k = P_S(w_k - P_{conv(others)}(w_k))``; the minimum is
    ``-dist_k``. When ``w_k`` lies in the hull of the others, ``w_k/||w_k||`` (optimal for unit rows, value 0).
    For an ETF or a regular polygon ``H*(W) = W`` (Thm 3.8).

    Parameters
    ----------
    W : array-like of shape (K, d)
        The classifier or code, one row per class, ``K >= 2``.
    normalize : bool, default=False
        Put the rows on the unit sphere first.

    Returns
    -------
    ndarray of shape (K, d)
        Unit rows ``h_k``.

    Examples
    --------
    >>> import numpy as np
    >>> from nclab.geometry import optimal_features, simplex_etf
    >>> W = simplex_etf(4, 3)
    >>> bool(np.allclose(optimal_features(W), W))
    True
    """
    return one_vs_rest(W, normalize=normalize).features


def hardmax_value(W: Any, H: Any, y: Any = None) -> float:
    """HardMax loss ``max_i max_{k' != y_i} <w_k' - w_{y_i}, h_i>`` [Jiang et al. 2024, eq. (5)], ``W (K, d)``,
    ``H (N, d)`` with labels ``y (N,)`` (default: ``N = K`` and ``y_i = i``, one feature per class).
    ``min_H hardmax_value(W, H) = -rho_one_vs_rest(W)`` on unit ``H`` (Lemma C.4); computed in blocks.

    Parameters
    ----------
    W : array-like of shape (K, d)
        The classifier, one row per class.
    H : array-like of shape (N, d)
        Features, one per row.
    y : array-like of shape (N,), optional
        Labels in ``0..K-1``; default ``y_i = i``, which needs ``N = K``.

    Returns
    -------
    float
        The HardMax loss, negative when every feature is strictly closest to its own class.

    Raises
    ------
    ValueError
        If the dimensions of ``H`` and ``W`` differ, or there are no labels and ``N != K``.

    Examples
    --------
    For a simplex ETF with ``H = W`` the loss is ``-K/(K-1)``, the negative margin:

    >>> from nclab.geometry import hardmax_value, simplex_etf
    >>> W = simplex_etf(4, 3)
    >>> print(f"{hardmax_value(W, W):.6f}")
    -1.333333
    """
    W = as_rows(W, name="W")
    H = as_rows(H, name="H", min_rows=1)
    if H.shape[1] != W.shape[1]:
        raise ValueError(f"H has dimension {H.shape[1]}, W has {W.shape[1]}")
    K = W.shape[0]
    if y is None:
        if H.shape[0] != K:
            raise ValueError(f"without labels H must have one row per class (K={K}), got {H.shape[0]} rows")
        y = np.arange(K)
    y = check_labels(y, K=K, name="y", num_rows=H.shape[0])
    best = -np.inf
    for s in range(0, H.shape[0], 4096):
        Z = H[s : s + 4096] @ W.T  # logits <w_j, h_i>
        yi = y[s : s + 4096]
        own = Z[np.arange(yi.size), yi]
        Z[np.arange(yi.size), yi] = -np.inf
        best = max(best, float(np.max(Z.max(axis=1) - own)))
    return best
