"""Regularisation-weight (lambda) conventions of the UFM papers and the one mapping between them.

Canonical convention (``"penalty_sum"``: each penalty is summed over the rows it counts;
[Tirer & Bruna 2022, eqs. (3)-(5), (23), (24)]; also [Jiang et al. 2024; Han et al. 2022]):

    L = 1/(2Kn) ||W H^T + 1 b^T - Y||_F^2 + lam_W/2 ||W||_F^2 + lam_H/2 ||H - X||_F^2 + lam_b/2 ||b||^2

i.e. a sample-averaged data term and un-normalised ridge terms. Every closed form in :mod:`nclab.ufm.closed_forms`
is stated in it.

Normalised convention (``"penalty_mean"``: each penalty is averaged over the rows it counts, like the data term;
[Wang et al. 2024, eq. (13)] and the follow-up of [Tirer & Bruna 2022], [Tirer et al. 2023]):

    lam'_W/(2K) ||W||^2,  lam'_H/(2Kn) ||H||^2,  lam'/(2Kn) ||H - X||^2  (the [Wang et al. 2024] transport term)

so ``lam_W = lam'_W / K`` (per-class parameters: ``W``, ``W1``, ``W2``, ..., ``b``) and
``lam_H = lam'_H / (Kn)`` (per-sample parameters: ``H``, ``H1`` and the MUFM transport weight). The [Tirer & Bruna 2022]
threshold ``c = K sqrt(n lam_H lam_W)`` reads ``sqrt(lam'_H lam'_W)`` in it [Tirer & Bruna 2022].
The bias weight is mapped like ``W`` (``lam'_b/(2K) ||b||^2``): a project choice, the papers that use this
convention have no bias.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Literal

__all__ = ["CONVENTIONS", "Convention", "check_lams", "from_canonical", "is_per_sample", "to_canonical"]

Convention = Literal["penalty_sum", "penalty_mean"]
CONVENTIONS: tuple[str, ...] = ("penalty_sum", "penalty_mean")
#: The names the conventions had before they were named by what they mean (internal numbers): refused with the
#: new name, so that no old script silently picks the other scaling.
_OLD_NAMES = {"001": "penalty_sum", "002": "penalty_mean"}

# Per-sample parameters (features and the transport term): their ridge term is divided by Kn in "penalty_mean".
_PER_SAMPLE = ("H", "H1", "transport")


def is_per_sample(key: str) -> bool:
    """True for feature-type weights (``H``, ``H1``, ``transport``), False for classifier/layer/bias weights."""
    return key in _PER_SAMPLE


def _check_convention(convention: str) -> None:
    if convention in _OLD_NAMES:
        raise ValueError(f"lambda convention {convention!r} is now called {_OLD_NAMES[convention]!r}")
    if convention not in CONVENTIONS:
        raise ValueError(f"unknown lambda convention {convention!r}; known: {', '.join(CONVENTIONS)}")


def check_lams(lams: Mapping[str, float]) -> dict[str, float]:
    """Float copy of ``lams``; raises ``ValueError`` naming any negative, NaN or infinite weight."""
    if not isinstance(lams, Mapping):
        raise TypeError(f"lams must be a mapping such as {{'W': 0.01, 'H': 0.01}}, got {type(lams).__name__}")
    out: dict[str, float] = {}
    for key, value in lams.items():
        try:
            v = float(value)
        except (TypeError, ValueError):
            raise TypeError(f"lambda {key!r} must be a number, got {value!r}") from None
        if not math.isfinite(v) or v < 0:
            raise ValueError(f"lambda {key!r} must be finite and >= 0, got {value!r}")
        out[str(key)] = v
    return out


def _factor(key: str, K: int, n: int) -> float:
    return float(K * n) if is_per_sample(key) else float(K)


def to_canonical(lams: Mapping[str, float], convention: str, *, K: int, n: int) -> dict[str, float]:
    """Map weights written in ``convention`` to the [Tirer & Bruna 2022] (``lam = lam' / K`` or ``lam' / (Kn)``).

    Parameters
    ----------
    lams : mapping of str to float
        Weights keyed by parameter (``"W"``, ``"H"``, ``"W1"``, ``"H1"``, ``"b"``, ``"transport"``), finite,
        ``>= 0``.
    convention : {"penalty_sum", "penalty_mean"}
        The convention ``lams`` are written in (``to_canonical``) or wanted in (``from_canonical``).
    K : int
        Number of classes.
    n : int
        Samples per class.

    Returns
    -------
    dict of str to float
        The weights in the other convention (a copy, unchanged for ``"penalty_sum"``).

    Raises
    ------
    ValueError
        If the convention is unknown (old names are refused with the new one) or a weight is negative or not finite.

    Examples
    --------
    >>> from nclab.ufm import to_canonical
    >>> to_canonical({"W": 0.03, "H": 0.06}, "penalty_mean", K=3, n=2)  # W / K, H / (K n)
    {'W': 0.01, 'H': 0.01}
    """
    _check_convention(convention)
    out = check_lams(lams)
    if convention == "penalty_sum":
        return out
    return {k: v / _factor(k, K, n) for k, v in out.items()}


def from_canonical(lams: Mapping[str, float], convention: str, *, K: int, n: int) -> dict[str, float]:
    """Inverse of :func:`to_canonical`.

    Parameters
    ----------
    lams : mapping of str to float
        Weights keyed by parameter (``"W"``, ``"H"``, ``"W1"``, ``"H1"``, ``"b"``, ``"transport"``), finite,
        ``>= 0``.
    convention : {"penalty_sum", "penalty_mean"}
        The convention ``lams`` are written in (``to_canonical``) or wanted in (``from_canonical``).
    K : int
        Number of classes.
    n : int
        Samples per class.

    Returns
    -------
    dict of str to float
        The weights in the other convention (a copy, unchanged for ``"penalty_sum"``).

    Raises
    ------
    ValueError
        If the convention is unknown (old names are refused with the new one) or a weight is negative or not finite.

    Examples
    --------
    >>> from nclab.ufm import from_canonical
    >>> from_canonical({"W": 0.01, "H": 0.01}, "penalty_mean", K=3, n=2)
    {'W': 0.03, 'H': 0.06}
    """
    _check_convention(convention)
    out = check_lams(lams)
    if convention == "penalty_sum":
        return out
    return {k: v * _factor(k, K, n) for k, v in out.items()}
