"""Hyperspherical uniformity of the class means (GNC2 of [Liu et al. 2023]), tiled in bounded memory.

With more classes than dimensions (K > d + 1) no simplex ETF exists; Liu et al. (2023) replace NC2 by the
requirement that the normalised centred class means spread uniformly over the sphere, measured by the pair
statistics of a potential kernel. The K(K-1)/2 pairs are visited in row blocks of the pair grid (memory
O(tile * K), never K x K), so K = 100,000 needs ~32 MiB per block.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from nclab.metrics import pair_sweeps
from nclab.metrics._registry import metric
from nclab.metrics.common import StatsLike, as_moments, check_stats, is_stats, row_norms, unit_directions
from nclab.metrics.means_geometry import stats_pair_sweep
from nclab.stats.moments import Weighting
from nclab.validation import as_rows

__all__ = ["hyperspherical_uniformity"]

Kernel = Literal["log", "riesz", "distance"]

# Entries of one (tile, K) block of the pair grid: ~32 MiB of float64.
_TILE_BUDGET = 1 << 22
# ||u_i - u_j||^2 = 2 - 2 u_i.u_j loses digits for nearby directions; below this it is recomputed directly.
_NEAR = 1e-3


def _kernel_values(d2: np.ndarray, kernel: Kernel, s: float) -> np.ndarray:
    with np.errstate(divide="ignore", over="ignore"):
        if kernel == "distance":
            values: np.ndarray = np.sqrt(d2)
        elif kernel == "log" or s == 0:
            values = -0.5 * np.log(d2)
        else:
            values = np.sign(s) * d2 ** (-0.5 * s)
    return values


@metric(
    "hyperspherical_uniformity",
    "none",
    "[Liu et al. 2023] (GNC2, hyperspherical uniformity gap); [neural-collapse (rhubarbwu)] kernel_stats",
)
def hyperspherical_uniformity(
    X: StatsLike | Any,
    kernel: Kernel = "log",
    *,
    s: float | None = None,
    center: bool = True,
    weighting: Weighting = "balanced",
    tile: int | None = None,
) -> dict[str, float]:
    """Mean and variance over class pairs of a potential kernel on the normalised centred class means (GNC2).

    .. math::

        u_k = \\frac{\\mu_k - \\mu_G}{\\lVert \\mu_k - \\mu_G \\rVert}, \\qquad
        \\text{mean} = \\binom{K}{2}^{-1} \\sum_{i < j} \\kappa(\\lVert u_i - u_j \\rVert), \\qquad
        \\text{var} = \\binom{K}{2}^{-1} \\sum_{i < j} (\\kappa(\\lVert u_i - u_j \\rVert) - \\text{mean})^2

    where the kernel ``kappa(r)`` is

    * ``"log"`` (default): ``log(1 / r)``, the logarithmic energy;
    * ``"riesz"``: ``sign(s) r^(-s)``, the Riesz s-energy with ``s = d - 2`` unless given (``s = 0`` is the
      logarithmic energy, the s -> 0 limit);
    * ``"distance"``: ``r`` itself.

    Parameters
    ----------
    X : ClassStats or array_like (K, d)
        Class means (a ClassStats, centred about ``global_mean(weighting)``) or ``K >= 2`` vectors as rows
        (centred about their mean row), e.g. classifier rows ``W``.
    kernel : {"log", "riesz", "distance"}
    s : float, optional
        Riesz exponent; default ``d - 2`` (d the feature dimension, as Liu et al. and rhubarbwu).
    center : bool
        Subtract the global mean first (default, GNC2). ``False`` normalises the raw rows.
    weighting : {"balanced", "empirical"}
        Global mean of a ClassStats: mean of class means or sample mean.
    tile : int, optional
        Rows of the pair grid per block; memory O(tile * K). Default ``max(1, 2**22 // K)``. The result does
        not depend on it (up to summation order).

    Returns
    -------
    dict
        ``{"mean": float, "var": float}`` (population variance over the K(K-1)/2 pairs). For the energies
        (``"log"``, ``"riesz"``) lower means more uniform, and a spread of means closer to GNC2; for
        ``"distance"`` higher. ``var = 0`` when every pair is equidistant (a simplex ETF, for any kernel), so the
        variance is the collapse indicator when K <= d + 1 (direction "none" in the registry: it depends on the
        key and the kernel).

    Degenerate values: two classes with the same direction give ``r = 0``: ``mean = var = inf`` for the
    energies (distance: finite). A zero centred mean (no direction): ``nan`` for both and a
    :class:`~nclab.metrics.DegenerateMetricWarning`. Riesz energies at large d overflow float64 for pairs closer
    than about ``10^(-308/s)`` and are then ``inf``: prefer the log kernel there.

    See Also
    --------
    equiangularity, max_angle : the NC2 statistics of the pair cosines (``r^2 = 2 - 2 cos``).
    etf_gram_error : distance of the centred Gram matrix to the simplex ETF (K <= d + 1).

    References
    ----------
    Liu, Yu, Weller, Schölkopf (2023), "Generalizing and decoupling neural collapse via hyperspherical
    uniformity gap", ICLR 2023, arXiv:2303.06484.

    Examples
    --------
    >>> import numpy as np
    >>> from nclab.geometry import simplex_etf
    >>> out = hyperspherical_uniformity(simplex_etf(4, 3))  # all 6 pairs at distance sqrt(8/3)
    >>> round(out["mean"], 10), round(out["var"], 12)
    (-0.4904146265, 0.0)
    """
    if kernel not in ("log", "riesz", "distance"):
        raise ValueError(f"kernel must be 'log', 'riesz' or 'distance', got {kernel!r}")
    if is_stats(X):
        check_stats(X, name="X")
        view = as_moments(X)
        raw = view.class_means(copy=False)  # the cached arrays themselves (read-only): no K x d copies
        V = view.centered_means(weighting, copy=False) if center else raw
    else:
        raw = as_rows(X, name="X")
        V = raw - raw.mean(axis=0) if center else raw
    K, d = V.shape
    if s is None:
        s = float(d - 2)
    elif not np.isfinite(s):
        raise ValueError(f"s must be a finite number, got {s!r}")
    tile_given = tile
    if tile is None:
        tile = max(1, _TILE_BUDGET // K)
    if isinstance(tile, bool) or not isinstance(tile, int | np.integer) or tile < 1:
        raise ValueError(f"tile must be a positive int, got {tile!r}")
    engine = K >= pair_sweeps.ENGINE_MIN_K and tile_given is None  # one tiled sweep on the statistics' device
    sweep = None
    if engine and is_stats(X) and center and (kernel == "log" or (kernel == "riesz" and s == 0)):
        sweep = stats_pair_sweep(X, weighting)  # shared with the CDNV, equiangularity and max_angle
    U = None
    if sweep is None:  # (a zero centred mean leaves no sweep: unit_directions says which)
        U = unit_directions(V, float(row_norms(raw).max()), "hyperspherical_uniformity")
        if U is None:
            return {"mean": float("nan"), "var": float("nan")}
    if engine:
        if sweep is not None:
            km = sweep["kernel"]
        else:
            assert U is not None
            dev = pair_sweeps.stats_device(X) if is_stats(X) else None
            km = pair_sweeps.unit_pair_sweep(U, shift=0.0, kernel=kernel, s=float(s), device=dev)["kernel"]
        if km.inf:
            return {"mean": float("inf"), "var": float("inf")}
        return {"mean": km.mean, "var": km.m2 / km.n}
    assert U is not None
    # Chan's merge of (count, mean, sum of squared deviations) over blocks: no digit lost to one large sum
    n, mean, m2 = 0, 0.0, 0.0
    for a in range(0, K - 1, int(tile)):
        rows, cols = np.arange(a, min(a + int(tile), K - 1)), np.arange(a + 1, K)
        keep = cols[None, :] > rows[:, None]
        d2 = np.maximum(2.0 - 2.0 * (U[rows] @ U[cols].T), 0.0)
        ri, ci = np.nonzero(keep & (d2 < _NEAR))
        if ri.size:
            diff = U[rows[ri]] - U[cols[ci]]
            d2[ri, ci] = np.einsum("pd,pd->p", diff, diff)
        values = _kernel_values(d2[keep], kernel, s)
        if not np.all(np.isfinite(values)):
            return {"mean": float("inf"), "var": float("inf")}
        nb, mb = values.size, float(values.mean())
        m2b = float(((values - mb) ** 2).sum())
        delta, tot = mb - mean, n + nb
        mean += delta * nb / tot
        m2 += m2b + delta * delta * n * nb / tot
        n = tot
    return {"mean": mean, "var": m2 / n}
