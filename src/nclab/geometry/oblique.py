"""The oblique manifold ``OB(d, K)``: ``K`` unit vectors in ``R^d``, stored as the rows of a ``(K, d)`` array
([Jiang et al. 2024] writes the columns of a ``d x K`` matrix)."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from nclab.validation import unit_rows

__all__ = ["random_oblique", "retract", "tangent"]


def tangent(X: Any, G: Any) -> NDArray[np.float64]:
    """Riemannian gradient on ``OB``: the row-wise projection ``g - <x, g> x`` of ``G`` onto the tangent space
    at the unit rows ``X``.

    Parameters
    ----------
    X : array-like of shape (K, d)
        Unit rows, a point of ``OB(d, K)``.
    G : array-like of shape (K, d)
        Euclidean gradient.

    Returns
    -------
    ndarray of shape (K, d)
        The tangent vector, each row orthogonal to the matching row of ``X``.

    Examples
    --------
    >>> from nclab.geometry import tangent
    >>> print(tangent([[1.0, 0.0]], [[2.0, 3.0]]))
    [[0. 3.]]
    """
    Xa = np.asarray(X, dtype=np.float64)
    Ga = np.asarray(G, dtype=np.float64)
    T: NDArray[np.float64] = Ga - np.sum(Xa * Ga, axis=-1, keepdims=True) * Xa
    return T


def retract(X: Any, V: Any, step: float = 1.0) -> NDArray[np.float64]:
    """Retraction by renormalisation: ``unit_rows(X + step V)``; a zero row raises (it has no direction).

    Parameters
    ----------
    X : array-like of shape (K, d)
        Unit rows, a point of ``OB(d, K)``.
    V : array-like of shape (K, d)
        Step direction (a tangent vector).
    step : float, default=1.0
        Step length.

    Returns
    -------
    ndarray of shape (K, d)
        Unit rows.

    Raises
    ------
    ValueError
        If a row of ``X + step V`` is zero.

    Examples
    --------
    >>> from nclab.geometry import retract
    >>> print(retract([[1.0, 0.0]], [[0.0, 1.0]]).round(6))
    [[0.707107 0.707107]]
    """
    U: NDArray[np.float64] = unit_rows(
        np.asarray(X, dtype=np.float64) + step * np.asarray(V, dtype=np.float64), zero="raise"
    )
    return U


def random_oblique(K: int, d: int, rng: np.random.Generator | int | None = None) -> NDArray[np.float64]:
    """``(K, d)`` independent uniform unit vectors (normalised Gaussians); ``rng`` a Generator or a seed.

    Parameters
    ----------
    K : int
        Number of vectors (classes), ``>= 1``.
    d : int
        Dimension, ``>= 1``.
    rng : numpy.random.Generator or int, optional
        Generator or seed.

    Returns
    -------
    ndarray of shape (K, d)
        Unit rows.

    Examples
    --------
    >>> import numpy as np
    >>> from nclab.geometry import random_oblique
    >>> X = random_oblique(5, 3, rng=0)
    >>> print(X.shape, np.round(np.linalg.norm(X, axis=1), 12))
    (5, 3) [1. 1. 1. 1. 1.]
    """
    if K < 1 or d < 1:
        raise ValueError(f"K and d must be >= 1, got K={K}, d={d}")
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    U: NDArray[np.float64] = unit_rows(gen.normal(size=(K, d)), zero="raise")
    return U
