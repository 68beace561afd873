"""The oblique manifold ``OB(d, K)``: ``K`` unit vectors in ``R^d``, stored as the rows of a ``(K, d)`` array
(paper 003 writes the columns of a ``d x K`` matrix)."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["normalize_rows", "random_oblique", "retract", "tangent"]


def normalize_rows(X: Any) -> np.ndarray:
    """``X`` with every row divided by its L2 norm (last axis); zero rows raise (they have no direction)."""
    X = np.asarray(X, dtype=np.float64)
    n = np.linalg.norm(X, axis=-1, keepdims=True)
    if np.any(n == 0):
        raise ValueError(f"{int(np.sum(n == 0))} zero rows cannot be put on the sphere")
    return X / n


def tangent(X: Any, G: Any) -> np.ndarray:
    """Riemannian gradient on ``OB``: the row-wise projection ``g - <x, g> x`` of ``G`` onto the tangent space
    at the unit rows ``X``."""
    X = np.asarray(X, dtype=np.float64)
    G = np.asarray(G, dtype=np.float64)
    return G - np.sum(X * G, axis=-1, keepdims=True) * X


def retract(X: Any, V: Any, step: float = 1.0) -> np.ndarray:
    """Retraction by renormalisation: ``normalize_rows(X + step V)``."""
    return normalize_rows(np.asarray(X, dtype=np.float64) + step * np.asarray(V, dtype=np.float64))


def random_oblique(K: int, d: int, rng: np.random.Generator | int | None = None) -> np.ndarray:
    """``(K, d)`` independent uniform unit vectors (normalised Gaussians); ``rng`` a Generator or a seed."""
    if K < 1 or d < 1:
        raise ValueError(f"K and d must be >= 1, got K={K}, d={d}")
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    return normalize_rows(gen.normal(size=(K, d)))
