"""Validation of the matrices that nclab's functions take: one row per class or per sample, ``(K, d)``."""

from __future__ import annotations

from typing import Any

import numpy as np


def as_rows(X: Any, name: str = "X", min_rows: int = 2) -> np.ndarray:
    """A float64 numpy copy of ``X (K, d)`` (numpy array, list or torch tensor, any device), checked: 2-D, at least
    ``min_rows`` rows and one column, all finite. Errors name the argument."""
    if hasattr(X, "detach"):  # torch tensors, also with requires_grad or on an accelerator
        X = X.detach().cpu().double().numpy()
    A = np.array(X, dtype=np.float64)
    if A.ndim != 2:
        raise ValueError(f"{name} must be 2-D (K, d) with one row per class, got shape {A.shape}")
    if A.shape[0] < min_rows:
        raise ValueError(f"{name} needs at least {min_rows} rows, got {A.shape[0]}")
    if A.shape[1] < 1:
        raise ValueError(f"{name} needs at least one column, got shape {A.shape}")
    if not np.all(np.isfinite(A)):
        raise ValueError(f"{name} contains NaN or inf (non-finite values)")
    return A
