"""Reference frames for class means and classifiers: rows are classes, ``(K, d)``.

Every frame is built in a canonical position (first coordinates) and optionally moved by a uniformly random
orthogonal map of ``R^d`` (``seed=`` or ``rng=``), which changes no Gram matrix and no margin. Each docstring
gives the Gram matrix ``W W^T`` (unit ``scale``) and the one-vs-rest margin ``rho`` of [Jiang et al. 2024, eq. (3)]
(:func:`nclab.geometry.rho_one_vs_rest`).
"""

from __future__ import annotations

import math

import numpy as np

RngLike = np.random.Generator | int | None


def _check_kd(K: int, d: int | None, need: int) -> int:
    if K < 2:
        raise ValueError(f"K must be >= 2, got {K}")
    d = need if d is None else int(d)
    if d < need:
        raise ValueError(f"this frame of K={K} vectors needs d >= {need}, got d={d}")
    return d


def random_orthogonal(d: int, rng: RngLike = None) -> np.ndarray:
    """A Haar-distributed orthogonal matrix ``(d, d)`` (QR of a Gaussian matrix with the sign fix of Mezzadri
    2007); ``rng`` is a ``numpy.random.Generator`` or a seed.

    Parameters
    ----------
    d : int
        Dimension.
    rng : numpy.random.Generator or int, optional
        Generator or seed.

    Returns
    -------
    ndarray of shape (d, d)
        An orthogonal matrix ``Q`` (``Q^T Q = I``).

    Examples
    --------
    >>> import numpy as np
    >>> from nclab.geometry import random_orthogonal
    >>> Q = random_orthogonal(4, rng=0)
    >>> bool(np.allclose(Q.T @ Q, np.eye(4)))
    True
    """
    if d < 1:
        raise ValueError(f"d must be >= 1, got {d}")
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    Q, R = np.linalg.qr(gen.normal(size=(d, d)))
    return Q * np.sign(np.diag(R))


def _embed(
    X: np.ndarray, d: int, rotation: np.ndarray | None, seed: int | None, rng: np.random.Generator | None = None
) -> np.ndarray:
    K, r = X.shape
    out = np.zeros((K, d))
    out[:, :r] = X
    if rotation is not None:
        out = out @ rotation.T
    elif rng is not None:
        if seed is not None:
            raise ValueError("pass either seed= or rng=, not both")
        out = out @ random_orthogonal(d, rng).T
    elif seed is not None:
        out = out @ random_orthogonal(d, seed).T
    return out


def simplex_etf(
    K: int,
    d: int | None = None,
    *,
    scale: float = 1.0,
    seed: int | None = None,
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """Simplex equiangular tight frame, ``(K, d)``: unit-norm rows (times ``scale``) summing to zero, with
    pairwise cosines ``-1/(K-1)``; needs ``d >= K - 1`` (``K = d + 1`` included: the frame is built in the
    ``(K-1)``-dimensional subspace orthogonal to ``1``, which [Jiang et al. 2024] leaves implicit). ``seed`` or ``rng``
    applies a random rotation.

    Gram: ``K/(K-1) (I - 11^T/K)``. Margin [Jiang et al. 2024, Thm. 3.3]: ``rho = K/(K-1)``, the nearest point of the
    hull
    of the others being their centroid ``-w_k/(K-1)``; this is the Softmax Code for ``K <= d + 1``.

    Parameters
    ----------
    K : int
        Number of classes, ``>= 2``.
    d : int, optional
        Dimension, ``>= K - 1`` (default ``K - 1``).
    scale : float, default=1.0
        Norm of every row.
    seed : int, optional
        Seed of a uniformly random rotation of ``R^d`` applied to the frame (no Gram matrix changes).
    rng : numpy.random.Generator, optional
        The same, from a generator; pass ``seed`` or ``rng``, not both.

    Returns
    -------
    ndarray of shape (K, d)
        The frame, one class per row.

    Raises
    ------
    ValueError
        If ``K < 2`` or ``d < K - 1``.

    Examples
    --------
    >>> import numpy as np
    >>> from nclab.geometry import simplex_etf
    >>> E = simplex_etf(4, 3)
    >>> print(np.round(E @ E.T, 4) + 0.0)
    [[ 1.     -0.3333 -0.3333 -0.3333]
     [-0.3333  1.     -0.3333 -0.3333]
     [-0.3333 -0.3333  1.     -0.3333]
     [-0.3333 -0.3333 -0.3333  1.    ]]
    >>> print(np.round(E.sum(axis=0), 12) + 0.0)
    [0. 0. 0.]
    """
    d = _check_kd(K, d, K - 1)
    # The rows of sqrt(K/(K-1)) (I - 11^T/K) (unit norm, cosines -1/(K-1)) expressed in the Helmert basis of the
    # (K-1)-dim subspace orthogonal to 1, so that the frame fits in d = K-1. A closed form, not an SVD: the SVD of
    # that matrix has a (K-1)-fold singular value, so its basis (hence the canonical frame) would depend on the
    # LAPACK build.
    return scale * _embed(np.sqrt(K / (K - 1)) * _helmert(K), d, None, seed, rng)


def _helmert(K: int) -> np.ndarray:
    """Orthonormal basis ``(K, K-1)`` of the vectors orthogonal to ``1``: column ``j`` (1-based) is
    ``(1, ..., 1, -j, 0, ..., 0) / sqrt(j (j+1))`` with ``j`` ones (the Helmert contrasts)."""
    j = np.arange(1, K)
    V = np.triu(np.ones((K, K - 1)))  # row i, column j-1: 1 for i < j
    V[j, j - 1] = -j
    return V / np.sqrt(j * (j + 1.0))


def orthogonal_frame(
    K: int,
    d: int | None = None,
    *,
    scale: float = 1.0,
    seed: int | None = None,
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """Orthogonal frame, ``(K, d)``: orthonormal rows (times ``scale``); needs ``d >= K``.

    Gram: ``I_K``. Margin: ``rho = sqrt(K/(K-1))`` (the nearest point of the hull of the others is their
    centroid, at distance ``sqrt(1 + 1/(K-1))``).

    Parameters
    ----------
    K : int
        Number of classes, ``>= 2``.
    d : int, optional
        Dimension, ``>= K`` (default ``K``).
    scale : float, default=1.0
        Norm of every row.
    seed : int, optional
        Seed of a uniformly random rotation of ``R^d`` applied to the frame (no Gram matrix changes).
    rng : numpy.random.Generator, optional
        The same, from a generator; pass ``seed`` or ``rng``, not both.

    Returns
    -------
    ndarray of shape (K, d)
        The frame, one class per row.

    Examples
    --------
    >>> from nclab.geometry import orthogonal_frame, rho_one_vs_rest
    >>> W = orthogonal_frame(3, 5, seed=0)
    >>> print(W.shape, f"{rho_one_vs_rest(W):.6f}")  # sqrt(3/2)
    (3, 5) 1.224745
    """
    d = _check_kd(K, d, K)
    return scale * _embed(np.eye(K), d, None, seed, rng)


def regular_polygon(
    K: int,
    d: int = 2,
    *,
    scale: float = 1.0,
    phase: float = 0.0,
    seed: int | None = None,
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """Regular ``K``-gon on the unit circle, ``(K, d)``: row ``k`` is ``(cos(2 pi k/K + phase), sin(...))`` in
    the first two coordinates; ``K >= 2``, ``d >= 2``.

    Gram: ``cos(2 pi (j - k)/K)``. Margin ([Jiang et al. 2024, Thm. 3.3], d = 2): ``rho = 1 - cos(2 pi / K)``, the
    nearest
    point of the hull of the others being the midpoint of the two neighbours (``K = 2``: the antipodal pair,
    ``rho = 2``). This is the Softmax Code and the Tammes optimum (minimum angle ``2 pi / K``) for ``d = 2``.

    Parameters
    ----------
    K : int
        Number of classes (vertices), ``>= 2``.
    d : int, default=2
        Dimension, ``>= 2``.
    phase : float, default=0.0
        Angle of the first vertex, in radians.
    scale : float, default=1.0
        Norm of every row.
    seed : int, optional
        Seed of a uniformly random rotation of ``R^d`` applied to the frame (no Gram matrix changes).
    rng : numpy.random.Generator, optional
        The same, from a generator; pass ``seed`` or ``rng``, not both.

    Returns
    -------
    ndarray of shape (K, d)
        The vertices, one class per row.

    Examples
    --------
    >>> import numpy as np
    >>> from nclab.geometry import regular_polygon, rho_one_vs_rest
    >>> W = regular_polygon(4)
    >>> print(np.round(W, 6) + 0.0)
    [[ 1.  0.]
     [ 0.  1.]
     [-1.  0.]
     [ 0. -1.]]
    >>> print(f"{rho_one_vs_rest(regular_polygon(6)):.6f}")  # 1 - cos(pi/3)
    0.500000
    """
    d = _check_kd(K, d, 2)
    t = 2.0 * np.pi * np.arange(K) / K + phase
    return scale * _embed(np.stack([np.cos(t), np.sin(t)], axis=1), d, None, seed, rng)


def cross_polytope_subset(
    K: int,
    d: int | None = None,
    *,
    scale: float = 1.0,
    seed: int | None = None,
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """``K <= 2d`` vertices of the cross-polytope ``{+-e_i}``, antipodal pairs first:
    ``e_1, -e_1, e_2, -e_2, ...`` (an odd ``K`` ends with the unpaired ``e_{(K+1)/2}``); needs
    ``d >= ceil(K/2)`` (default).

    Gram: entries in ``{1, 0, -1}``, ``-1`` exactly on the pairs ``(2i, 2i+1)``. Margin: ``rho = 1`` for
    ``K >= 3`` (on the hull of the others ``<w_k, v> <= 0``, so ``dist >= 1``, and ``0`` is in that hull since
    the others contain a complete antipodal pair, so ``dist <= 1``); ``K = 2``: ``rho = 2``. For
    ``d + 1 < K <= 2d`` this is a Softmax Code [Jiang et al. 2024, Thm. 3.3], with minimum angle 90 degrees (Tammes,
    Rankin's bound).

    Parameters
    ----------
    K : int
        Number of classes, ``>= 2``.
    d : int, optional
        Dimension, ``>= ceil(K/2)`` (default ``ceil(K/2)``).
    scale : float, default=1.0
        Norm of every row.
    seed : int, optional
        Seed of a uniformly random rotation of ``R^d`` applied to the frame (no Gram matrix changes).
    rng : numpy.random.Generator, optional
        The same, from a generator; pass ``seed`` or ``rng``, not both.

    Returns
    -------
    ndarray of shape (K, d)
        The vertices, one class per row.

    Examples
    --------
    >>> from nclab.geometry import cross_polytope_subset, rho_one_vs_rest
    >>> W = cross_polytope_subset(5, 3)
    >>> print(W)
    [[ 1.  0.  0.]
     [-1.  0.  0.]
     [ 0.  1.  0.]
     [ 0. -1.  0.]
     [ 0.  0.  1.]]
    >>> print(f"{rho_one_vs_rest(W):.6f}")
    1.000000
    """
    if K < 2:
        raise ValueError(f"K must be >= 2, got {K}")
    need = math.ceil(K / 2)
    d = need if d is None else int(d)
    if d < need:
        raise ValueError(f"a cross-polytope subset of K={K} vertices needs d >= ceil(K/2) = {need}, got d={d}")
    X = np.zeros((K, need))
    k = np.arange(K)
    X[k, k // 2] = np.where(k % 2 == 0, 1.0, -1.0)
    return scale * _embed(X, d, None, seed, rng)


def octahedron(*, scale: float = 1.0, seed: int | None = None, rng: np.random.Generator | None = None) -> np.ndarray:
    """The 6 vertices ``+-e_i`` of the regular octahedron in ``R^3``, ``(6, 3)``: the Softmax Code and Tammes
    optimum for ``(d, K) = (3, 6)``. Gram in ``{1, 0, -1}``; ``rho = 1``; minimum angle 90 degrees.

    Parameters
    ----------
    scale : float, default=1.0
        Norm of every row.
    seed : int, optional
        Seed of a uniformly random rotation of ``R^d`` applied to the frame (no Gram matrix changes).
    rng : numpy.random.Generator, optional
        The same, from a generator; pass ``seed`` or ``rng``, not both.

    Returns
    -------
    ndarray of shape (6, 3)
        The vertices, one class per row.

    Examples
    --------
    >>> from nclab.geometry import octahedron, one_vs_one, rho_one_vs_rest
    >>> W = octahedron(seed=0)
    >>> print(f"{rho_one_vs_rest(W):.6f} {one_vs_one(W).min_angle_deg:.4f}")
    1.000000 90.0000
    """
    return cross_polytope_subset(6, 3, scale=scale, seed=seed, rng=rng)


def icosahedron(*, scale: float = 1.0, seed: int | None = None, rng: np.random.Generator | None = None) -> np.ndarray:
    """The 12 vertices of the regular icosahedron on the unit sphere, ``(12, 3)``: the cyclic permutations of
    ``(0, +-1, +-phi) / sqrt(1 + phi^2)``, ``phi`` the golden ratio.

    Gram: off-diagonal entries ``+-1/sqrt(5)`` (5 of each per row) and ``-1`` (the antipode). Margin:
    ``rho = 1 - 1/sqrt(5) = 0.5527864``, attained at the centroid ``w_k/sqrt(5)`` of the 5 neighbours (the icosahedron
    of
    [Jiang et al. 2024, Sec. 4]); the Tammes optimum for ``(3, 12)``, minimum angle ``arccos(1/sqrt(5)) = 63.435``
    degrees.

    Parameters
    ----------
    scale : float, default=1.0
        Norm of every row.
    seed : int, optional
        Seed of a uniformly random rotation of ``R^d`` applied to the frame (no Gram matrix changes).
    rng : numpy.random.Generator, optional
        The same, from a generator; pass ``seed`` or ``rng``, not both.

    Returns
    -------
    ndarray of shape (12, 3)
        The vertices, one class per row.

    Examples
    --------
    >>> from nclab.geometry import icosahedron, one_vs_one, rho_one_vs_rest
    >>> W = icosahedron()
    >>> print(f"{rho_one_vs_rest(W):.7f} {one_vs_one(W).min_angle_deg:.3f}")
    0.5527864 63.435
    """
    phi = (1.0 + math.sqrt(5.0)) / 2.0
    rows = []
    for s1 in (1.0, -1.0):
        for s2 in (phi, -phi):
            base = (0.0, s1, s2)
            rows += [base, (base[2], base[0], base[1]), (base[1], base[2], base[0])]
    X = np.array(rows) / math.sqrt(1.0 + phi * phi)
    return scale * _embed(X, 3, None, seed, rng)
