"""Class-distance normalised variance (CDNV) [Galanti et al. 2022], computed tile-wise in bounded memory.

Not a metric of [Xu & Liu 2023] (which only cites it); included as the standard
extra NC1 baseline ([neural-collapse (rhubarbwu)] ``variability_cdnv``, [Galanti et al. 2022]).
"""

from __future__ import annotations

import numpy as np

from nclab.metrics import pair_sweeps
from nclab.metrics._linalg import SB_ZERO_RTOL, feature_scale_sq, pow2_scale
from nclab.metrics._registry import metric
from nclab.metrics.common import StatsLike, as_moments
from nclab.metrics.means_geometry import stats_pair_sweep
from nclab.validation import check_int

__all__ = ["cdnv"]

# Elements of one (tile, K) block; the default tile keeps each block array at ~32 MiB.
_TILE_BUDGET = 1 << 22
# Squared distances from the Gram expansion ||a||^2 + ||b||^2 - 2 a.b are recomputed directly as ||a - b||^2
# when they fall below this fraction of ||a||^2 + ||b||^2 (there the expansion loses > ~3 digits).
_CANCEL_RATIO = 1e-3


@metric("cdnv", "lower", "[Galanti et al. 2022] (CDNV); not in [Xu & Liu 2023]")
def cdnv(stats: StatsLike, exponent: float = 1, tile: int | None = None) -> float:
    r"""CDNV = mean over unordered class pairs i < j of (var_i + var_j) / (2 ||mu_i - mu_j||^(2 exponent)).

    .. math::

        \mathrm{CDNV} = \binom{K}{2}^{-1} \sum_{i < j}
        \frac{\sigma_i^2 + \sigma_j^2}{2 \lVert \mu_i - \mu_j \rVert^{2p}}

        \sigma_k^2 = \frac{1}{n_k} \sum_{i:\, y_i = k} \lVert h_i - \mu_k \rVert^2

    with :math:`p` = ``exponent`` (1: [Galanti et al. 2022]).

    ``var_k = class_ss_k / n_k`` is the mean squared distance of the class-k features to their class mean
    (biased, population normalisation, as [Galanti et al. 2022] and [neural-collapse (rhubarbwu)]; a few codes use
    n_k - 1). Invariant under rotations and translation; with ``exponent=1`` also under global scaling.

    Parameters
    ----------
    stats : ClassStats or ClassMoments, K classes, dimension d
        Statistics of the features; works with ``track="light"``.
    exponent : float, default 1
        1: Galanti et al.'s squared-distance denominator ``2 ||mu_i - mu_j||^2``. 2: the quartic
        denominator ``2 ||mu_i - mu_j||^4`` of the linguistic-collapse code (rhubarbwu ``dist_exp=2``,
        declared "not a bug" by its maintainers); not scale invariant. Any exponent > 0 is accepted.
    tile : int, optional
        Rows of the K x K pair grid handled at once; memory is O(tile * K) (never K x K, so K = 100,000 is
        fine). Default: ``max(1, 2**22 // K)``. The result does not depend on it (up to summation order).

    Returns
    -------
    float
        Range [0, inf); lower = more collapsed. ``inf`` if two class means coincide (those classes are not
        separated), whatever their variances; hence ``inf`` when Sigma_B = 0. "Coincide" is up to roundoff:
        ``||mu_i - mu_j||^2 <= (8 eps)^2 max_k (||mu_k||^2 + var_k)``, eps the float64 machine epsilon, relative to
        the largest mean squared norm of a class's raw features (so means at the origin with residuals of 1e-16 of
        the spread coincide, and scaling the features never changes the decision).

    See Also
    --------
    nc1, trace_ratio

    Examples
    --------
    >>> import numpy as np
    >>> from nclab.geometry import simplex_etf
    >>> from nclab.stats import ClassStats
    >>> K, n, d = 3, 20, 4
    >>> y = np.repeat(np.arange(K), n)
    >>> H = 4 * simplex_etf(K, d)[y] + 0.5 * np.random.default_rng(0).standard_normal((K * n, d))
    >>> stats = ClassStats.from_arrays(H, y, K=K)

    >>> from nclab.metrics import cdnv
    >>> print(f"{cdnv(stats):.4f}")
    0.0199

    Closed form: variances 1 and 1, means 2 apart: (1 + 1) / (2 * 2^2).

    >>> H = np.array([[2.0, 0.0], [0.0, 0.0], [-2.0, 0.0], [0.0, 0.0]])
    >>> cdnv(ClassStats.from_arrays(H, np.array([0, 0, 1, 1]), K=2))
    0.25
    """
    stats = as_moments(stats)
    if isinstance(exponent, bool) or not np.isfinite(exponent) or exponent <= 0:
        raise ValueError(f"exponent must be a positive number, got {exponent!r}")
    K = stats.K
    tile_given = tile
    if tile is None:
        tile = max(1, _TILE_BUDGET // K)
    tile = check_int(tile, name="tile", low=1)
    # Computed on features divided by c, the power of two nearest above sqrt(feature_scale_sq) (exact): the
    # squared distances and variances are then O(1) whatever the scale of the features (no overflow at 1e150,
    # no underflow at 1e-150), and the result is rescaled by c^(2 - 2 exponent) (1 for exponent 1).
    f2 = feature_scale_sq(stats)
    if f2 == 0.0:  # every feature is 0: all class means coincide
        return float("inf")
    c = pow2_scale(np.sqrt(f2))
    c2 = c * c
    thresh = SB_ZERO_RTOL * (f2 / c2)

    def centred() -> np.ndarray:
        mu: np.ndarray = stats.means / c
        centred_mu: np.ndarray = mu - mu.mean(axis=0)  # only differences enter; centring shrinks the cancellation
        return centred_mu

    var = stats.class_ss / stats.counts / c2
    if K >= pair_sweeps.ENGINE_MIN_K and tile_given is None:  # one tiled sweep on the statistics' device
        # shared with equiangularity, max_angle and the uniformity of a report (balanced centring: any centring
        # leaves the distances as they are)
        sweep = stats_pair_sweep(stats, "balanced", exponent)
        if sweep is not None:
            total = float(sweep["cdnv"][exponent])
        else:  # a zero centred mean: no directions to share, the distances alone
            total = pair_sweeps.means_pair_sweep(
                centred(), var, exponent=exponent, thresh=thresh, device=pair_sweeps.stats_device(stats)
            )
        if not np.isfinite(total):
            return float("inf")
        if exponent != 1:
            total *= c2 ** (1.0 - exponent)
        return total / (K * (K - 1) / 2)
    mu = centred()
    sq = np.einsum("kd,kd->k", mu, mu)
    total = 0.0
    for a in range(0, K - 1, int(tile)):
        b = min(a + int(tile), K - 1)  # rows i in [a, b), columns j in [a + 1, K), kept where j > i
        rows, cols = np.arange(a, b), np.arange(a + 1, K)
        scale = sq[rows, None] + sq[None, cols]
        d2 = scale - 2.0 * (mu[rows] @ mu[cols].T)
        keep = cols[None, :] > rows[:, None]
        bad = keep & (d2 <= _CANCEL_RATIO * scale)
        if bad.any():
            ri, ci = np.nonzero(bad)
            step = max(1, _TILE_BUDGET // max(1, stats.d))
            for s in range(0, ri.size, step):
                diff = mu[rows[ri[s : s + step]]] - mu[cols[ci[s : s + step]]]
                d2[ri[s : s + step], ci[s : s + step]] = np.einsum("pd,pd->p", diff, diff)
        # coincident means (up to the roundoff of means of features of this scale): classes not separated
        if np.any(keep & (d2 <= thresh)):
            return float("inf")
        d2 = np.where(keep, d2, 1.0)
        num = var[rows, None] + var[None, cols]
        total += float(np.sum(np.where(keep, num / (2.0 * d2**exponent), 0.0)))
    if exponent != 1:
        total *= c2 ** (1.0 - exponent)
    return total / (K * (K - 1) / 2)
