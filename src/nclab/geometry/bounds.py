"""Theorem 3.9 of [Jiang et al. 2024]: bounds on the optimal one-vs-rest margin of K unit vectors in R^d."""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy.special import gammaln

__all__ = ["CodeBounds", "softmax_code_bounds"]


@dataclass(frozen=True)
class CodeBounds:
    """``lower <= max_{W in OB(d, K)} rho_one_vs_rest(W) <= upper`` when ``valid`` (``K >= min_K``).

    Parameters
    ----------
    d : int
        Dimension.
    K : int
        Number of classes.
    lower, upper : float
        The bounds on the optimal margin.
    valid : bool
        Whether the theorem's condition ``K >= min_K`` holds.
    min_K : float
        The threshold ``sqrt(2 pi sqrt(e) d)``.

    Examples
    --------
    >>> from nclab.geometry import softmax_code_bounds
    >>> b = softmax_code_bounds(10, 100)
    >>> print(f"{b.lower:.5f} {b.upper:.5f} {b.valid} {b.min_K:.4f}")
    0.16970 1.50488 True 10.1780
    """

    d: int
    K: int
    lower: float
    upper: float
    valid: bool
    min_K: float


def softmax_code_bounds(d: int, K: int) -> CodeBounds:
    """Bounds of [Jiang et al. 2024, Thm. 3.9 / eq. (13)], evaluated in log-gamma form (no overflow for d in the
    thousands):

    ``lower = (1/2) [ (sqrt(pi)/K) Gamma((d+1)/2) / Gamma(d/2 + 1) ]^(2/(d-1))``,
    ``upper = 2 [ (2 sqrt(pi)/K) Gamma((d+1)/2) / Gamma(d/2) ]^(1/(d-1))``,

    stated under ``K >= sqrt(2 pi sqrt(e) d)`` (``valid``; ``min_K`` is that threshold). ``d >= 2``, ``K >= 2``.
    Example: ``(d, K) = (10, 100)`` gives ``[0.16970, 1.50488]``. The values are returned also when the
    condition fails (e.g. ``(2, 4)``), flagged invalid.

    Parameters
    ----------
    d : int
        Dimension, ``>= 2``.
    K : int
        Number of classes, ``>= 2``.

    Returns
    -------
    CodeBounds
        The bounds, ``valid`` false (values still given) when ``K < min_K``.

    Examples
    --------
    >>> from nclab.geometry import softmax_code_bounds
    >>> bounds = softmax_code_bounds(3, 12)
    >>> print(f"{bounds.lower:.4f} {bounds.upper:.4f} {bounds.valid}")
    0.0556 1.1547 True
    """
    d, K = int(d), int(K)
    if d < 2:
        raise ValueError(f"Thm 3.9 needs d >= 2 (the exponents divide by d - 1), got d={d}")
    if K < 2:
        raise ValueError(f"K must be >= 2, got {K}")
    half_log_pi = 0.5 * math.log(math.pi)
    log_lo = half_log_pi - math.log(K) + gammaln((d + 1) / 2) - gammaln(d / 2 + 1)
    log_up = math.log(2.0) + half_log_pi - math.log(K) + gammaln((d + 1) / 2) - gammaln(d / 2)
    lower = 0.5 * math.exp(2.0 * log_lo / (d - 1))
    upper = 2.0 * math.exp(log_up / (d - 1))
    min_K = math.sqrt(2.0 * math.pi * math.sqrt(math.e) * d)
    return CodeBounds(d, K, lower, upper, K >= min_K, min_K)
