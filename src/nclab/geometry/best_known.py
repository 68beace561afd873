"""The margin ``rho*`` of the best known Softmax Code of ``K`` unit vectors in ``R^d`` [Jiang et al. 2024, Def. 2.1]:
the reference line of GNC2.

``rho* = max_{W in OB(d, K)} rho_one_vs_rest(W)`` is known in closed form in three regimes ([Jiang et al. 2024,
Thm. 3.3]; ``proven=True``):

* ``K <= d + 1``: the simplex ETF, ``rho* = K / (K - 1)``;
* ``d = 2``: the regular ``K``-gon, ``rho* = 1 - cos(2 pi / K)``;
* ``d + 1 < K <= 2 d``: a cross-polytope subset, ``rho* = 1``;

and ``d = 1, K >= 3`` has ``rho* = 0`` (two of the vectors ``+-1`` coincide). Elsewhere it is a numerical
best-known value (``proven=False``): the icosahedron for ``(3, 12)``, the values of :data:`KNOWN_MARGINS` (certified
margins of codes found by nclab's searches), and, for small problems only (``K d <= SEARCH_MAX_KD``), a
:func:`nclab.geometry.softmax_code_search` run once per process and cached. Beyond that bound nothing is searched:
:func:`best_known_margin` returns ``None``, so a measurement at large ``K`` and ``d`` never pays for a search.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from nclab.geometry import codes
from nclab.validation import check_int

__all__ = ["KNOWN_MARGINS", "SEARCH_MAX_KD", "BestKnownMargin", "best_known_margin"]

#: Largest ``K d`` for which :func:`best_known_margin` runs the (polished, KKT-certified) code search. Measured with
#: the defaults (16 restarts, 8 hops, seed 0) on the shared 2-core machine at load 8: (3, 7) 3.4 s, (4, 10) 4.8 s,
#: (3, 13) 8.9 s; past the bound (5, 12) took 21 s and (4, 24) 87 s.
SEARCH_MAX_KD = 40

#: ``(d, K) -> (rho, source)``: best known margins that no closed form gives and the cheap search does not reach,
#: each the exact margin (hull QPs, duality gaps <= 8e-16) of a code found by nclab's searches (docs/geometry.md).
KNOWN_MARGINS: dict[tuple[int, int], tuple[float, str]] = {
    (10, 100): (0.66397, "best of nclab's searches (softmax_code_search, 4 restarts; docs/geometry.md)"),
    (10, 200): (0.54617, "best of nclab's searches (nclab codes softmax --restarts 4; docs/geometry.md)"),
    (20, 100): (0.84871, "best of nclab's searches (nclab codes softmax --restarts 4; docs/geometry.md)"),
}


@dataclass(frozen=True)
class BestKnownMargin:
    """The margin of the best known Softmax Code for ``(d, K)``, as returned by :func:`best_known_margin`.

    Parameters
    ----------
    d : int
        Dimension.
    K : int
        Number of classes.
    rho : float
        The one-vs-rest margin of the best known Softmax Code for ``(d, K)``.
    proven : bool
        It is the optimum (a closed form of [Jiang et al. 2024, Thm. 3.3]), not only the best known value.
    source : str
        Where it comes from, in words.

    Examples
    --------
    >>> from nclab.geometry import best_known_margin
    >>> m = best_known_margin(2, 6)  # the regular hexagon, 1 - cos(pi/3)
    >>> print(f"{m.rho:.6f}", m.proven)
    0.500000 True
    """

    d: int
    K: int
    rho: float
    proven: bool
    source: str


def best_known_margin(d: int, K: int, *, search: bool = True) -> BestKnownMargin | None:
    """``rho*``, the margin of the best known Softmax Code of ``K`` unit vectors in ``R^d``, or ``None``.

    Closed forms first (module docstring), then the icosahedron ``(3, 12)`` (``1 - 1/sqrt(5)``), then
    :data:`KNOWN_MARGINS`, then, when ``search`` and ``K d <= SEARCH_MAX_KD``, the margin of
    ``softmax_code_search(d, K)`` (default settings, seed 0; computed once per process and cached). Otherwise
    ``None``: no reference is known cheaply, and none is computed.

    Parameters
    ----------
    d, K : int
        Dimension (``>= 1``) and number of vectors (``>= 2``).
    search : bool
        Allow the cached search for small problems.

    Returns
    -------
    BestKnownMargin or None

    See Also
    --------
    nclab.geometry.softmax_code_search : the search and its certificate.
    nclab.geometry.softmax_code_bounds : Thm 3.9 bounds on ``rho*``.
    nclab.metrics.gnc2_ratio : a classifier's margin over ``rho*``.

    Examples
    --------
    >>> from nclab.geometry import best_known_margin
    >>> ref = best_known_margin(3, 6)           # the octahedron regime d + 1 < K <= 2d
    >>> ref.rho, ref.proven
    (1.0, True)
    >>> best_known_margin(64, 1000) is None      # no closed form, no table entry, too large to search
    True
    """
    d, K = check_int(d, name="d", low=1), check_int(K, name="K", low=2)
    closed = _closed_form(d, K)
    if closed is not None:
        return closed
    if (d, K) == (3, 12):
        return BestKnownMargin(d, K, 1.0 - 1.0 / math.sqrt(5.0), False, "icosahedron (the Tammes optimum)")
    if (d, K) in KNOWN_MARGINS:
        rho, source = KNOWN_MARGINS[(d, K)]
        return BestKnownMargin(d, K, rho, False, source)
    if search and K * d <= SEARCH_MAX_KD:
        return BestKnownMargin(d, K, _searched(d, K), False, f"softmax_code_search({d}, {K}), seed 0 (cached)")
    return None


def _closed_form(d: int, K: int) -> BestKnownMargin | None:
    if K <= d + 1:
        return BestKnownMargin(d, K, K / (K - 1), True, "simplex ETF, K <= d + 1 (Thm 3.3)")
    if d == 1:
        return BestKnownMargin(d, K, 0.0, True, "d = 1, K >= 3: two of the vectors +-1 coincide")
    if d == 2:
        return BestKnownMargin(d, K, 1.0 - math.cos(2.0 * math.pi / K), True, "regular K-gon, d = 2 (Thm 3.3)")
    if K <= 2 * d:
        return BestKnownMargin(d, K, 1.0, True, "cross-polytope subset, d + 1 < K <= 2d (Thm 3.3)")
    return None


@functools.cache
def _searched(d: int, K: int) -> float:
    # looked up on the module at call time, so that tests can replace the search
    return float(codes.softmax_code_search(d, K).value)
