"""Reference frames for class means and classifiers: rows are classes, ``(K, d)``."""

from __future__ import annotations

import numpy as np


def _check_kd(K: int, d: int | None, need: int) -> int:
    if K < 2:
        raise ValueError(f"K must be >= 2, got {K}")
    d = need if d is None else int(d)
    if d < need:
        raise ValueError(f"this frame of K={K} vectors needs d >= {need}, got d={d}")
    return d


def _embed(X: np.ndarray, d: int, rotation: np.ndarray | None, seed: int | None) -> np.ndarray:
    K, r = X.shape
    out = np.zeros((K, d))
    out[:, :r] = X
    if rotation is not None:
        out = out @ rotation.T
    elif seed is not None:
        Q, R = np.linalg.qr(np.random.default_rng(seed).normal(size=(d, d)))
        out = out @ (Q * np.sign(np.diag(R))).T
    return out


def simplex_etf(K: int, d: int | None = None, *, scale: float = 1.0, seed: int | None = None) -> np.ndarray:
    """Simplex equiangular tight frame, ``(K, d)``: unit-norm rows (times ``scale``) summing to zero, with
    pairwise cosines ``-1/(K-1)``; needs ``d >= K - 1``. ``seed`` applies a random rotation."""
    d = _check_kd(K, d, K - 1)
    E = np.sqrt(K / (K - 1)) * (np.eye(K) - 1.0 / K)  # rows: unit norm, cos = -1/(K-1), span K-1 dims
    # express in an orthonormal basis of the (K-1)-dim span so it fits in d = K-1
    U, _, _ = np.linalg.svd(E.T, full_matrices=False)
    X = E @ U[:, : K - 1]
    return scale * _embed(X, d, None, seed)


def orthogonal_frame(K: int, d: int | None = None, *, scale: float = 1.0, seed: int | None = None) -> np.ndarray:
    """Orthogonal frame, ``(K, d)``: orthonormal rows (times ``scale``); needs ``d >= K``."""
    d = _check_kd(K, d, K)
    return scale * _embed(np.eye(K), d, None, seed)
