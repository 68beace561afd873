"""The one pseudo-inverse policy of nclab, for symmetric positive semi-definite matrices.

Policy (``docs/conventions.md``, row "pseudo-inverse"): symmetric eigendecomposition in float64; eigenvalues
``<= rtol * lambda_max`` count as zero (``rtol`` = 1e-12 by default: the statistics are float64); the kept
eigenvalues are further capped at ``max_rank`` (e.g. ``min(d, K - 1)`` for a centred Sigma_B), keeping the
largest. Paper 000 (Sec. 4) shows why both the default ``np.linalg.pinv`` threshold and a bare top-(K-1)
truncation are unreliable for Sigma_B; the tolerance guard is what makes exactly collapsed data give 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

DEFAULT_RTOL = 1e-12
RankPolicy = int | Literal["numerical"] | None


@dataclass(frozen=True)
class PsdPinv:
    """``pinv`` (d, d); ``rank`` kept; ``eigvals`` (d,) all eigenvalues, descending; ``basis`` (d, rank)."""

    pinv: np.ndarray
    rank: int
    eigvals: np.ndarray
    basis: np.ndarray


def psd_pinv(
    A: np.ndarray,
    *,
    rank: RankPolicy = None,
    max_rank: int | None = None,
    rtol: float = DEFAULT_RTOL,
) -> PsdPinv:
    """Pseudo-inverse of a symmetric PSD matrix ``A: (d, d)``.

    rank : None, "numerical" or int
        None: numerical rank capped at ``max_rank`` (the default policy). "numerical": the numerical rank alone
        (eigenvalues > ``rtol * lambda_max``), no cap. int r: the top ``r`` eigenvalues, still dropping those
        below the tolerance (a requested rank above the numerical rank is not an error: exact zeros are never
        inverted).
    """
    A = np.asarray(A, dtype=np.float64)
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"expected a square matrix, got shape {A.shape}")
    if not np.all(np.isfinite(A)):
        raise ValueError("matrix contains NaN or inf")
    if not (rtol >= 0):
        raise ValueError(f"rtol must be >= 0, got {rtol}")
    w, V = np.linalg.eigh((A + A.T) / 2)
    w, V = w[::-1], V[:, ::-1]
    top = w[0] if w.size else 0.0
    numerical = int(np.sum(w > rtol * top)) if top > 0 else 0
    if rank is None:
        r = numerical if max_rank is None else min(numerical, int(max_rank))
    elif rank == "numerical":
        r = numerical
    elif isinstance(rank, int | np.integer) and not isinstance(rank, bool):
        if rank < 0:
            raise ValueError(f"rank must be >= 0, got {rank}")
        r = min(int(rank), numerical)
    else:
        raise ValueError(f"rank must be None, 'numerical' or an int, got {rank!r}")
    Vr = V[:, :r]
    pinv = (Vr / w[:r]) @ Vr.T
    return PsdPinv(pinv=pinv, rank=r, eigvals=np.maximum(w, 0.0), basis=Vr)
