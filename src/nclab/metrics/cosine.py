"""Cosine-similarity collapse metrics of Kornblith et al. (2021), as used by [Xu & Liu 2023, Sec. 3.2].

All three are computed on the raw (uncentred) features from the per-class sums of L2-normalised features
``U_k = sum_{y_i = k} h_i / ||h_i||`` (``ClassStats.unit_sums``) in O(K d), with no pairwise loop:

    sum_{i, j in class k} sim(h_i, h_j) = ||U_k||^2          (ordered pairs, the n_k diagonal terms included)
    sum_{i in k, j in l}  sim(h_i, h_j) = U_k . U_l

and the diagonal terms sum to n_k (each ``sim(h, h) = 1``), which ``include_self=False`` subtracts.
A feature vector that is exactly zero has no direction: it enters ``U_k`` as the zero vector, i.e. it has
similarity 0 with everything, itself included (``include_self=False`` is exact only without zero features).

Weighting: "balanced" (default) averages per-class (and per-class-pair) mean similarities with equal class
weights; "empirical" averages over all sample pairs. Both equal the formulas of [Xu & Liu 2023] / Kornblith et al.
on balanced data (n_k = n):

    d_within = sum_k sum_{i,j} (1 - sim(h_ki, h_kj)) / (K n^2),
    d_total  = sum_{k,l} sum_{i,j} (1 - sim(h_ki, h_lj)) / (K^2 n^2).

Functions: :func:`within_class_cosine` = 1 - d_within (mean within-class cosine similarity, higher = more
collapsed; Kornblith's "simplified quantity", and what [Xu & Liu 2023, Table 2] "Cos Sim" column behaves like,
[Xu & Liu 2023]), :func:`within_class_cosine_distance` = d_within (what the [Xu & Liu 2023] text calls "Cosine
Similarity"; lower = more collapsed), :func:`class_separation` = R^2 = 1 - d_within / d_total (higher = more
collapsed). All work with ``track="light"`` statistics.
"""

from __future__ import annotations

import numpy as np

from nclab.metrics._registry import metric
from nclab.metrics.common import StatsLike, check_stats
from nclab.stats.moments import Weighting, check_weighting

__all__ = ["class_separation", "within_class_cosine", "within_class_cosine_distance"]

# d_total below this counts as 0: every feature points the same way (1 - ||U||^2 / N^2 is pure roundoff).
_DTOTAL_TOL = 1e-12


def _within_sims(stats: StatsLike, include_self: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per class: sum of similarities over the counted pairs, number of counted pairs; and U."""
    check_stats(stats)
    n = stats.counts.astype(np.float64)
    U = stats.raw("unit_sums")  # read-only, no K x d copy (ValueError when the statistics do not keep them)
    sq = np.einsum("kd,kd->k", U, U)
    if include_self:
        return sq, n * n, U
    single = np.flatnonzero(n < 2)
    if single.size:
        raise ValueError(
            f"include_self=False needs >= 2 samples per class; classes {single[:10].tolist()} have 1 "
            f"(no pair of distinct samples)"
        )
    return sq - n, n * (n - 1), U


def _mean_within(sums: np.ndarray, pairs: np.ndarray, weighting: Weighting) -> float:
    check_weighting(weighting)
    if weighting == "balanced":
        return float(np.mean(sums / pairs))
    return float(sums.sum() / pairs.sum())


@metric("within_class_cosine", "higher", "[Xu & Liu 2023, Sec. 3.2] (1 - d_within, [Kornblith et al. 2021])")
def within_class_cosine(stats: StatsLike, weighting: Weighting = "balanced", include_self: bool = True) -> float:
    r"""Mean within-class cosine similarity = 1 - d_within ([Xu & Liu 2023, Sec. 3.2]; [Kornblith et al. 2021]).

    .. math::

        \bar c = \frac{1}{K} \sum_{k=1}^{K} \frac{1}{n_k^2} \sum_{i, j:\, y_i = y_j = k}
        \frac{h_i^\top h_j}{\lVert h_i \rVert \lVert h_j \rVert}
        = \frac{1}{K} \sum_{k=1}^{K} \frac{\lVert U_k \rVert^2}{n_k^2}

        U_k = \sum_{i:\, y_i = k} \frac{h_i}{\lVert h_i \rVert}

    where :math:`n_k` is the number of samples of class :math:`k` and :math:`U_k` the sum of its unit features.

    ``(1/K) sum_k (1/n_k^2) sum_{i,j in k} sim(h_i, h_j)`` on raw features (balanced weighting; "empirical":
    ``sum_k ||U_k||^2 / sum_k n_k^2``). Invariant under per-sample positive scaling and orthogonal maps, not under
    general linear maps nor translation ([Xu & Liu 2023] Obs. 4.4).

    Parameters
    ----------
    stats : ClassStats or ClassMoments, K classes, dimension d
        Statistics of the raw features (their ``unit_sums``); works with ``track="light"``.
    weighting : {"balanced", "empirical"}, default "balanced"
        "balanced" averages per-class mean similarities with equal class weights; "empirical" averages over all
        sample pairs (the same on balanced data).
    include_self : bool, default True
        Count the i = j pairs (as [Xu & Liu 2023] and Kornblith et al. write d_within); False averages over
        the n_k (n_k - 1) ordered pairs of distinct samples (needs n_k >= 2).

    Returns
    -------
    float
        Range [-1, 1] (>= 0 with ``include_self=True``, as the i = j terms give ||U_k||^2 >= 0); 1 iff the
        features of each class share one direction. Higher = more collapsed.

    Raises
    ------
    ValueError
        ``include_self=False`` with a class of one sample.

    See Also
    --------
    within_class_cosine_distance, class_separation

    Examples
    --------
    >>> import numpy as np
    >>> from nclab.stats import ClassStats
    >>> y = np.array([0, 0, 1, 1])
    >>> tight = ClassStats.from_arrays(np.array([[1.0, 0], [2, 0], [0, 1], [0, 3]]), y, K=2)  # one direction each
    >>> wide = ClassStats.from_arrays(np.array([[1.0, 1], [1, -1], [-1, 1], [-1, -1]]), y, K=2)  # spread
    >>> within_class_cosine(tight)
    1.0
    >>> round(within_class_cosine(wide), 12)
    0.5
    >>> abs(within_class_cosine(wide, include_self=False)) < 1e-12  # the two samples of a class are orthogonal
    True
    """
    sums, pairs, _ = _within_sims(stats, include_self)
    return _mean_within(sums, pairs, weighting)


@metric("within_class_cosine_distance", "lower", "[Xu & Liu 2023, Sec. 3.2] (d_within, [Kornblith et al. 2021])")
def within_class_cosine_distance(
    stats: StatsLike, weighting: Weighting = "balanced", include_self: bool = True
) -> float:
    r"""Within-class cosine distance d_within = 1 - :func:`within_class_cosine` [Xu & Liu 2023, Sec. 3.2].

    .. math::

        d_\mathrm{within} = 1 - \frac{1}{K} \sum_{k=1}^{K} \frac{\lVert U_k \rVert^2}{n_k^2}

        U_k = \sum_{i:\, y_i = k} \frac{h_i}{\lVert h_i \rVert}

    the mean cosine distance :math:`1 - \cos(h_i, h_j)` over the pairs of samples of one class.

    Parameters
    ----------
    stats : ClassStats or ClassMoments, K classes, dimension d
        Statistics of the raw features (their ``unit_sums``); works with ``track="light"``.
    weighting : {"balanced", "empirical"}, default "balanced"
        "balanced" averages per-class mean similarities with equal class weights; "empirical" averages over all
        sample pairs (the same on balanced data).
    include_self : bool, default True
        Count the i = j pairs (as [Xu & Liu 2023] and Kornblith et al. write d_within); False averages over
        the n_k (n_k - 1) ordered pairs of distinct samples (needs n_k >= 2).

    Returns
    -------
    float
        Range [0, 2] ([0, 1] with ``include_self=True``); lower = more collapsed.

    See Also
    --------
    within_class_cosine, class_separation

    Examples
    --------
    >>> import numpy as np
    >>> from nclab.stats import ClassStats
    >>> y = np.array([0, 0, 1, 1])
    >>> tight = ClassStats.from_arrays(np.array([[1.0, 0], [2, 0], [0, 1], [0, 3]]), y, K=2)  # one direction each
    >>> wide = ClassStats.from_arrays(np.array([[1.0, 1], [1, -1], [-1, 1], [-1, -1]]), y, K=2)  # spread
    >>> within_class_cosine_distance(tight)
    0.0
    >>> round(within_class_cosine_distance(wide), 12)
    0.5
    """
    return 1.0 - within_class_cosine(stats, weighting=weighting, include_self=include_self)


@metric("class_separation", "higher", "[Xu & Liu 2023, Sec. 3.2]; [Kornblith et al. 2021] (R^2 = 1 - d_within/d_total)")
def class_separation(stats: StatsLike, weighting: Weighting = "balanced", include_self: bool = True) -> float:
    r"""Kornblith et al.'s class separation R^2 = 1 - d_within / d_total [Xu & Liu 2023, Sec. 3.2].

    .. math::

        R^2 = 1 - \frac{d_\mathrm{within}}{d_\mathrm{total}}

        d_\mathrm{total} = 1 - \frac{1}{K^2} \Big\lVert \sum_{k=1}^{K} \frac{U_k}{n_k} \Big\rVert^2

    with :math:`d_\mathrm{within}` and :math:`U_k` as in :func:`within_class_cosine_distance` (balanced weighting).

    d_within as in :func:`within_class_cosine_distance`; d_total is the mean cosine distance over all pairs
    (same-class pairs included): with balanced weighting the mean over all K^2 ordered class pairs (k, l) of
    the mean distance between classes k and l, ``1 - ||sum_k U_k / n_k||^2 / K^2`` (the diagonal blocks taken
    as in d_within); with empirical weighting the mean over all ordered sample pairs, ``1 - ||sum_k U_k||^2 /
    N^2``.

    Parameters
    ----------
    stats : ClassStats or ClassMoments, K classes, dimension d
        Statistics of the raw features (their ``unit_sums``); works with ``track="light"``.
    weighting : {"balanced", "empirical"}, default "balanced"
        "balanced" averages per-class mean similarities with equal class weights; "empirical" averages over all
        sample pairs (the same on balanced data).
    include_self : bool, default True
        Count the i = j pairs (as [Xu & Liu 2023] and Kornblith et al. write d_within); False averages over
        the n_k (n_k - 1) ordered pairs of distinct samples (needs n_k >= 2).

    Returns
    -------
    float
        Range (-inf, 1]; higher = more collapsed (classes tight relative to the spread of all features). 0.0 when
        d_total = 0 (every feature points the same way: no class is separated from another).

    See Also
    --------
    within_class_cosine, within_class_cosine_distance

    Examples
    --------
    >>> import numpy as np
    >>> from nclab.stats import ClassStats
    >>> y = np.array([0, 0, 1, 1])
    >>> tight = ClassStats.from_arrays(np.array([[1.0, 0], [2, 0], [0, 1], [0, 3]]), y, K=2)  # one direction each
    >>> wide = ClassStats.from_arrays(np.array([[1.0, 1], [1, -1], [-1, 1], [-1, -1]]), y, K=2)  # spread
    >>> class_separation(tight)  # d_within = 0, d_total = 1/2
    1.0
    >>> same = ClassStats.from_arrays(np.array([[1.0, 0], [2, 0], [3, 0], [4, 0]]), y, K=2)
    >>> class_separation(same)  # d_total = 0
    0.0
    """
    sums, pairs, U = _within_sims(stats, include_self)
    s_within = _mean_within(sums, pairs, weighting)
    if weighting == "balanced":
        K = stats.K
        n = stats.counts.astype(np.float64)
        V = (1.0 / n) @ U  # sum_k U_k / n_k without the K x d quotient
        cross = float(V @ V) - float(np.sum(np.einsum("kd,kd->k", U, U) / (n * n)))  # k != l blocks
        s_total = (cross + float(np.sum(sums / pairs))) / K**2
    else:
        Ut = U.sum(axis=0)
        N = float(stats.N)
        s_total = (float(Ut @ Ut) - (0.0 if include_self else N)) / (N * N - (0.0 if include_self else N))
    d_total = 1.0 - s_total
    if d_total <= _DTOTAL_TOL:
        return 0.0
    return 1.0 - (1.0 - s_within) / d_total
