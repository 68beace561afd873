"""Within-class variability (NC1-type) metrics: NC1 / Fuzziness, the trace ratio (PFC1, SqDist), VCI, and the
split of the within-class variance along V_B and its orthogonal complement.

All covariances follow ``ClassStats``: Sigma_W and Sigma_T divided by the total count N, Sigma_B by K
(``weighting="balanced"``) or weighted by n_k / N (``weighting="empirical"``). Every pseudo-inverse goes
through :func:`nclab.metrics._linalg.psd_pinv` (symmetric eigh, relative tolerance ``rtol``, optional rank
cap): the one pinv policy of nclab.

Degenerate inputs (documented values, never an unexplained NaN):

* Sigma_B = 0 (all class means equal, including all-identical features; "equal" up to roundoff:
  Tr Sigma_B <= (8 eps)^2 max_k (||mu_k||^2 + var_k), eps the float64 machine epsilon: relative to the largest
  mean squared norm of a class's raw features, so class means at the origin with roundoff residuals count as
  equal, and scaling the features never changes the decision): ``nc1``, ``fuzziness`` and
  ``trace_ratio`` return ``inf`` (no class separation, whatever Sigma_W is); ``vci`` returns 1 (the optimal
  linear probe cannot beat the constant predictor); ``within_class_split`` puts all within-class variance in
  the orthogonal part (``normalize=True`` raises ``ValueError``: nothing to normalise by).
* An empty class: :class:`nclab.stats.class_stats.EmptyClassError` naming the classes
  (use ``stats.drop_empty()``).
* ``track="light"`` statistics: ``nc1``, ``fuzziness``, ``vci`` and ``within_class_split`` need d x d
  matrices and raise ``ValueError``; ``trace_ratio`` works.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

import numpy as np

from nclab.metrics._linalg import (
    DEFAULT_RTOL,
    PsdPinv,
    RankPolicy,
    check_rtol,
    psd_pinv,
    stats_between_eig,
    stats_eig,
)
from nclab.metrics._registry import REGISTRY, metric
from nclab.metrics.common import StatsLike, as_moments, between_is_zero, whitened_between
from nclab.stats.moments import ClassMoments, Weighting, check_weighting
from nclab.validation import check_bool

__all__ = ["fuzziness", "nc1", "pfc1", "sq_dist", "trace_ratio", "vci", "within_class_split"]

VciRank = Literal["min", "numerical"] | int


def _check_rank(rank: RankPolicy) -> None:
    if isinstance(rank, int | np.integer) and not isinstance(rank, bool) and rank < 1:
        raise ValueError(f"rank must be >= 1, got {rank}")


def _pinv_b(stats: ClassMoments, weighting: Weighting, rank: RankPolicy, rtol: float) -> PsdPinv:
    _check_rank(rank)
    eig = stats_between_eig(stats, weighting)
    return psd_pinv(eig=eig, rank=rank, max_rank=min(stats.d, stats.K - 1), rtol=rtol)


@metric(
    "nc1",
    "lower",
    "[Papyan et al. 2020] NC1; [Xu & Liu 2023, Sec. 3.2] (Fuzziness); "
    "[Tirer & Bruna 2022; Jiang et al. 2024; Han et al. 2022]",
)
def nc1(
    stats: StatsLike,
    normalize: bool = True,
    weighting: Weighting = "balanced",
    rank: RankPolicy = None,
    rtol: float = DEFAULT_RTOL,
) -> float:
    r"""NC1 = Tr(Sigma_W Sigma_B^+) / K ([Papyan et al. 2020]; [Xu & Liu 2023, Sec. 3.2] calls it Fuzziness).

    .. math::

        \mathrm{NC1} = \frac{1}{K} \operatorname{Tr}\left(\Sigma_W \Sigma_B^{+}\right)

        \Sigma_W = \frac{1}{N} \sum_{i=1}^{N} (h_i - \mu_{y_i})(h_i - \mu_{y_i})^\top

        \Sigma_B = \frac{1}{K} \sum_{k=1}^{K} (\mu_k - \mu_G)(\mu_k - \mu_G)^\top

    where :math:`h_i \in \mathbb{R}^d` is the feature of sample :math:`i` with label :math:`y_i`,
    :math:`\mu_k` the mean of class :math:`k`, :math:`\mu_G = \frac{1}{K} \sum_k \mu_k` the mean of the class
    means, and :math:`\Sigma_B^{+}` the pseudo-inverse of ``rank`` (``weighting="empirical"``: :math:`\Sigma_B =
    \sum_k \frac{n_k}{N} (\mu_k - \mu_G)(\mu_k - \mu_G)^\top` about the sample mean).

    Invariant under rotations, global scaling and translation of the features, and under maps acting separately
    on V_B and V_B^perp ([Xu & Liu 2023] Obs. 4.2), but not under general invertible maps.

    Parameters
    ----------
    stats : ClassStats or ClassMoments, K classes, dimension d
        Statistics of the features, ``track="full"`` (the d x d matrices); every class nonempty.
    normalize : bool, default True
        Divide by K (Papyan's NC1); False is :func:`fuzziness`.
    weighting : {"balanced", "empirical"}, default "balanced"
        Sigma_B divided by K (balanced) or weighted by n_k / N (empirical).
    rank : None, "numerical" or int, default None
        Eigenvectors of Sigma_B kept by the pseudo-inverse: None, the numerical rank capped at
        ``min(d, K - 1)``; "numerical", the numerical rank alone; an int r, the top r (still dropping those under
        the tolerance).
    rtol : float, default 1e-12
        Relative eigenvalue tolerance of the pseudo-inverse, in ``[0, 1)`` (``docs/conventions.md``,
        "pseudo-inverse").

    Returns
    -------
    float
        Range [0, inf); lower = more collapsed (0 iff the within-class variance has no component in V_B, e.g.
        Sigma_W = 0). ``inf`` when Sigma_B = 0 (all class means equal: no class separation), whatever Sigma_W is.

    Raises
    ------
    ValueError
        ``track="light"`` statistics, or an invalid ``rank`` / ``rtol``.

    See Also
    --------
    fuzziness, trace_ratio, vci, cdnv

    Examples
    --------
    >>> import numpy as np
    >>> from nclab.geometry import simplex_etf
    >>> from nclab.stats import ClassStats
    >>> K, n, d = 3, 20, 4
    >>> y = np.repeat(np.arange(K), n)
    >>> H = 4 * simplex_etf(K, d)[y] + 0.5 * np.random.default_rng(0).standard_normal((K * n, d))
    >>> stats = ClassStats.from_arrays(H, y, K=K)

    >>> from nclab.metrics import nc1
    >>> print(f"{nc1(stats):.4f}")
    0.0172

    Exactly collapsed features (every sample at its class mean) give 0:

    >>> print(f"{nc1(ClassStats.from_arrays(simplex_etf(K, d)[y], y, K=K)):.4f}")
    0.0000

    Two classes with Sigma_B = Sigma_W = diag(1, 0): Tr(Sigma_W Sigma_B^+) / K = 1/2.

    >>> from nclab.stats import ClassStats
    >>> H = np.array([[2.0, 0.0], [0.0, 0.0], [-2.0, 0.0], [0.0, 0.0]])  # means (+-1, 0), spread 1 along x
    >>> stats = ClassStats.from_arrays(H, np.array([0, 0, 1, 1]), K=2)
    >>> round(nc1(stats), 12)
    0.5
    """
    stats = as_moments(stats)
    rtol = check_rtol(rtol)
    normalize = check_bool(normalize, name="normalize")
    sw = stats.matrix("within")
    pb = _pinv_b(stats, weighting, rank, rtol)
    if between_is_zero(stats, weighting) or pb.rank == 0:
        return float("inf")
    value = pb.trace_with(sw)
    return value / stats.K if normalize else value


@metric("fuzziness", "lower", "[Xu & Liu 2023, Sec. 3.2] (Fuzziness = Tr[Sigma_B^+ Sigma_W], no 1/K)")
def fuzziness(
    stats: StatsLike,
    normalize: bool = False,
    weighting: Weighting = "balanced",
    rank: RankPolicy = None,
    rtol: float = DEFAULT_RTOL,
) -> float:
    r"""Fuzziness = Tr(Sigma_B^+ Sigma_W) ([Xu & Liu 2023, Sec. 3.2], "Separation Fuzziness"): :func:`nc1` with
    ``normalize=False`` by default, as [Xu & Liu 2023] writes it.

    .. math::

        \mathrm{Fuzziness} = \operatorname{Tr}\left(\Sigma_B^{+} \Sigma_W\right) = K \cdot \mathrm{NC1}

    with :math:`\Sigma_W` and :math:`\Sigma_B` as in :func:`nc1`.

    Not invariant under general invertible maps ([Xu & Liu 2023] Obs. 4.2: Sigma_B = diag(1, 0), Sigma_W = I,
    U = [[1, 1], [0, 1]] maps 1 to 2).

    Parameters
    ----------
    stats : ClassStats or ClassMoments, K classes, dimension d
        Statistics of the features, ``track="full"`` (the d x d matrices); every class nonempty.
    normalize : bool, default False
        Divide by K (then it is :func:`nc1`).
    weighting : {"balanced", "empirical"}, default "balanced"
        Sigma_B divided by K (balanced) or weighted by n_k / N (empirical).
    rank : None, "numerical" or int, default None
        Eigenvectors of Sigma_B kept by the pseudo-inverse: None, the numerical rank capped at
        ``min(d, K - 1)``; "numerical", the numerical rank alone; an int r, the top r (still dropping those under
        the tolerance).
    rtol : float, default 1e-12
        Relative eigenvalue tolerance of the pseudo-inverse, in ``[0, 1)`` (``docs/conventions.md``,
        "pseudo-inverse").

    Returns
    -------
    float
        Range [0, inf), lower = more collapsed; ``inf`` when Sigma_B = 0.

    See Also
    --------
    nc1

    Notes
    -----
    The values of [Xu & Liu 2023, Table 2] fit the /K form (``normalize=True``).

    Examples
    --------
    >>> import numpy as np
    >>> from nclab.stats import ClassStats
    >>> H = np.array([[2.0, 0.0], [0.0, 0.0], [-2.0, 0.0], [0.0, 0.0]])  # means (+-1, 0), spread 1 along x
    >>> stats = ClassStats.from_arrays(H, np.array([0, 0, 1, 1]), K=2)
    >>> round(fuzziness(stats), 12)  # Sigma_B = Sigma_W = diag(1, 0)
    1.0
    """
    return nc1(stats, normalize=normalize, weighting=weighting, rank=rank, rtol=rtol)


@metric(
    "trace_ratio", "lower", "[Wang et al. 2024] PFC1; [Xu & Liu 2023, eq. (4)] (Squared Distance, [Hui et al. 2022])"
)
def trace_ratio(stats: StatsLike, weighting: Weighting = "balanced") -> float:
    r"""Trace ratio Tr(Sigma_W) / Tr(Sigma_B).

    .. math::

        \mathrm{PFC1} = \frac{\operatorname{Tr} \Sigma_W}{\operatorname{Tr} \Sigma_B}
        = \frac{\frac{1}{N} \sum_{i=1}^{N} \lVert h_i - \mu_{y_i} \rVert^2}
               {\frac{1}{K} \sum_{k=1}^{K} \lVert \mu_k - \mu_G \rVert^2}

    where :math:`\mu_k` are the class means and :math:`\mu_G = \frac{1}{K} \sum_k \mu_k` (``weighting="empirical"``:
    the denominator is :math:`\sum_k \frac{n_k}{N} \lVert \mu_k - \mu_G \rVert^2` about the sample mean).

    This one function is PFC1 [Wang et al. 2024] and the "Squared Distance" of [Xu & Liu 2023, eq. (4)],
    ``sum_{k,i} ||h_ki - mu_k||^2 / (n sum_k ||mu_k - mu_G||^2)`` with n the per-class count of [Xu & Liu 2023]
    (= Tr Sigma_W / Tr Sigma_B for balanced classes); ``pfc1`` and ``sq_dist`` are aliases of this function,
    not copies. Invariant under rotations, isotropic scaling and translation ([Xu & Liu 2023] Obs. 4.3), not
    under general invertible maps.

    Parameters
    ----------
    stats : ClassStats or ClassMoments, K classes, dimension d
        Statistics of the features; needs only O(K d) state: works with ``track="light"``.
    weighting : {"balanced", "empirical"}, default "balanced"
        Sigma_B divided by K (balanced) or weighted by n_k / N (empirical).

    Returns
    -------
    float
        Range [0, inf); lower = more collapsed. ``inf`` when Tr Sigma_B = 0 (all class means equal), whatever
        Sigma_W is.

    See Also
    --------
    nc1, cdnv

    Examples
    --------
    >>> import numpy as np
    >>> from nclab.geometry import simplex_etf
    >>> from nclab.stats import ClassStats
    >>> K, n, d = 3, 20, 4
    >>> y = np.repeat(np.arange(K), n)
    >>> H = 4 * simplex_etf(K, d)[y] + 0.5 * np.random.default_rng(0).standard_normal((K * n, d))
    >>> stats = ClassStats.from_arrays(H, y, K=K)

    >>> from nclab.metrics import trace_ratio
    >>> print(f"{trace_ratio(stats):.4f}")
    0.0598

    Closed form: Tr Sigma_W = Tr Sigma_B = 1.

    >>> from nclab.stats import ClassStats
    >>> H = np.array([[2.0, 0.0], [0.0, 0.0], [-2.0, 0.0], [0.0, 0.0]])  # means (+-1, 0), spread 1 along x
    >>> stats = ClassStats.from_arrays(H, np.array([0, 0, 1, 1]), K=2)
    >>> round(trace_ratio(stats), 12)
    1.0
    """
    stats = as_moments(stats)
    tw = stats.trace_w()
    tb = stats.trace_b(weighting)
    if between_is_zero(stats, weighting):
        return float("inf")
    return tw / tb


pfc1 = trace_ratio
sq_dist = trace_ratio
REGISTRY["pfc1"] = replace(REGISTRY["trace_ratio"], name="pfc1")
REGISTRY["sq_dist"] = replace(REGISTRY["trace_ratio"], name="sq_dist")


def _vci_rank(stats: ClassMoments, rank: VciRank, weighting: Weighting, rtol: float) -> int:
    if rank == "min":
        return min(stats.d, stats.K - 1)
    if rank == "numerical":
        return psd_pinv(eig=stats_between_eig(stats, weighting), rank="numerical", rtol=rtol).rank
    if isinstance(rank, int | np.integer) and not isinstance(rank, bool):
        if rank < 1:
            raise ValueError(f"rank must be >= 1, got {rank}")
        return int(rank)
    raise ValueError(f"rank must be 'min', 'numerical' or a positive int, got {rank!r}")


@metric("vci", "lower", "[Xu & Liu 2023, Def. 5.3] (Variability Collapse Index, [Xu & Liu 2023])")
def vci(
    stats: StatsLike,
    rank: VciRank = "min",
    weighting: Weighting = "empirical",
    rtol: float = DEFAULT_RTOL,
) -> float:
    r"""Variability Collapse Index VCI = 1 - Tr(Sigma_T^+ Sigma_B) / rank(Sigma_B) [Xu & Liu 2023, Def. 5.3].

    .. math::

        \mathrm{VCI} = 1 - \frac{\operatorname{Tr}\left(\Sigma_T^{+} \Sigma_B\right)}{\operatorname{rank}(\Sigma_B)}

        \Sigma_T = \frac{1}{N} \sum_{i=1}^{N} (h_i - \mu_G)(h_i - \mu_G)^\top = \Sigma_W + \Sigma_B

    with, by default (``weighting="empirical"``), :math:`\mu_G` the sample mean, :math:`\Sigma_B = \sum_k
    \frac{n_k}{N} (\mu_k - \mu_G)(\mu_k - \mu_G)^\top`, :math:`\Sigma_W` as in :func:`nc1`, and
    :math:`\operatorname{rank}(\Sigma_B) = \min(d, K - 1)` (``rank="min"``).

    VCI = 0 for fully collapsed features (Sigma_W = 0), and more generally iff V_B and V_W intersect only in 0
    [Xu & Liu 2023]. Invariant under every invertible linear map and translation of the features
    [Xu & Liu 2023, Cor. 5.4], also when Sigma_T is singular. Identity [Xu & Liu 2023, Thm. 5.1]: on balanced data
    with rank(Sigma_B) = K - 1, ``VCI = 2 K L* / (K - 1)``, L* the optimal unregularised MSE probe loss
    (:func:`probe_mse_optimal`), i.e. 1 - R^2 of the least-squares regression of the one-hot labels on the
    features; and Tr(Sigma_T^+ Sigma_B) is Pillai's trace (sum of squared canonical correlations between features
    and labels). It is a fitted R^2-type statistic: on pure noise E[VCI] = 1 - d (K - 1) / ((N - 1) min(d, K - 1)),
    and VCI = 0 as soon as d >= N - 1 [Xu & Liu 2023]: compare values at equal (N, d) only.

    Parameters
    ----------
    stats : ClassStats or ClassMoments, K classes, dimension d
        Statistics of the features, ``track="full"`` (the d x d matrices); every class nonempty.
    rank : "min", "numerical" or int, default "min"
        rank(Sigma_B) in the denominator: "min" is ``min(d, K - 1)``; "numerical" the numerical rank of
        Sigma_B; an int r >= 1 that value.
    weighting : {"empirical", "balanced"}, default "empirical"
        Weights of the classes in Sigma_B (and Sigma_T).
    rtol : float, default 1e-12
        Relative eigenvalue tolerance of the pseudo-inverse, in ``[0, 1)`` (``docs/conventions.md``,
        "pseudo-inverse").

    Returns
    -------
    float
        Range [0, 1] [Xu & Liu 2023, Thm. 5.2]; lower = more collapsed. 1.0 when Sigma_B = 0 (for
        ``rank="numerical"`` too). Roundoff below 0 (at most ``r * 1e-9`` in absolute terms, e.g. -1e-12 when
        d >= N - 1 and the exact value is 0) is clipped to 0; anything larger is returned as computed, so a real
        violation stays visible.

    See Also
    --------
    nc1, probe_mse_optimal

    Notes
    -----
    Two algebraically equal forms; the better conditioned one is used:

    * Sigma_T form: with the tolerance-truncated pseudo-inverse, Tr(Sigma_T^+ Sigma_T) = rank_tol(Sigma_T)
      exactly, so Tr(Sigma_T^+ Sigma_B) is evaluated as ``rank_tol(Sigma_T) - Tr(Sigma_T^+ Sigma_W)`` (minus
      ``Tr(Sigma_T^+ (Sigma_B^emp - Sigma_B^bal))`` for balanced weighting): exactly 0 for exactly collapsed
      data (Sigma_W = 0), and valid for singular Sigma_W and Sigma_T.
    * Whitened form (empirical weighting or balanced data, Sigma_W numerically full rank, and either well
      conditioned (estimate <= 1e6) or better conditioned than Sigma_T, where a Sigma_T with eigenvalues under
      the ``rtol`` cut counts as infinitely conditioned): ``r VCI = r - m + sum_{j <= m} 1 / (1 + phi_j)``,
      phi the top m = min(d, K - 1) eigenvalues of Sigma_W^{-1/2} Sigma_B Sigma_W^{-1/2}. Near collapse with
      d > K - 1, Sigma_T has noise-only eigenvalues ~ eps^2 next to O(1) ones, and the Sigma_T form loses
      ~ 1e-16 cond(Sigma_T) in absolute accuracy (VCI = -2e-5 instead of +5e-12 at within-class spread
      1e-6), or drops the within-class directions outright when they fall under the ``rtol`` cut (anisotropic
      noise with cond(Sigma_W) ~ 1e6 at spread 1e-6: VCI 10^3 times too large); this form keeps relative
      accuracy (1e-6 or better against exact rational arithmetic for spreads 1e-2 ... 1e-9 and cond(Sigma_W)
      up to 1e8).

    Examples
    --------
    >>> import numpy as np
    >>> from nclab.geometry import simplex_etf
    >>> from nclab.stats import ClassStats
    >>> K, n, d = 3, 20, 4
    >>> y = np.repeat(np.arange(K), n)
    >>> H = 4 * simplex_etf(K, d)[y] + 0.5 * np.random.default_rng(0).standard_normal((K * n, d))
    >>> stats = ClassStats.from_arrays(H, y, K=K)

    >>> from nclab.metrics import vci
    >>> print(f"{vci(stats):.4f}")
    0.0238

    Closed form: Sigma_B = Sigma_W = diag(1, 0), Sigma_T = diag(2, 0), so VCI = 1 - (1/2) / 1.

    >>> from nclab.stats import ClassStats
    >>> H = np.array([[2.0, 0.0], [0.0, 0.0], [-2.0, 0.0], [0.0, 0.0]])  # means (+-1, 0), spread 1 along x
    >>> stats = ClassStats.from_arrays(H, np.array([0, 0, 1, 1]), K=2)
    >>> round(vci(stats), 12)
    0.5
    """
    stats = as_moments(stats)
    rtol = check_rtol(rtol)
    check_weighting(weighting)
    r = _vci_rank(stats, rank, weighting, rtol)
    if r == 0 or between_is_zero(stats, weighting):
        return 1.0
    counts = stats.counts
    if weighting == "empirical" or np.all(counts == counts[0]):
        whitened = whitened_between(stats, rtol)
        if whitened is not None:
            # r VCI = r - m + sum_{j <= m} 1 / (1 + s_j^2), m = min(d, K - 1): a sum of positive terms
            sv = whitened[1]
            m = min(stats.d, stats.K - 1)
            phi = np.zeros(m)
            phi[: min(m, sv.size)] = sv[:m] ** 2
            return float((r - m) + np.sum(1.0 / (1.0 + phi))) / r
    pt = psd_pinv(eig=stats_eig(stats, "total"), rank="numerical", rtol=rtol)  # Sigma_T = Sigma_W + Sigma_B^emp
    trace = pt.rank - pt.trace_with(stats.matrix("within"))
    if weighting != "empirical":
        trace -= pt.trace_with(stats.matrix("between", "empirical") - stats.matrix("between", weighting))
    value = 1.0 - trace / r
    return 0.0 if -1e-9 < value < 0.0 else value


@metric("within_class_split", "none", "[Xu & Liu 2023, Sec. 4.1, Fig. 1] (within-class variance in V_B and V_B^perp)")
def within_class_split(
    stats: StatsLike,
    weighting: Weighting = "balanced",
    rank: RankPolicy = None,
    normalize: bool = False,
    rtol: float = DEFAULT_RTOL,
) -> dict[str, float | int]:
    r"""Split of the within-class variance along V_B = span{mu_k - mu_G} [Xu & Liu 2023, Sec. 4.1, Fig. 1].

    .. math::

        \mathrm{in\_span} = \operatorname{Tr}\left(P_B \Sigma_W\right)
        = \frac{1}{N} \sum_{i=1}^{N} \lVert P_B (h_i - \mu_{y_i}) \rVert^2

        \mathrm{orthogonal} = \operatorname{Tr}\left((I - P_B) \Sigma_W\right)

    where :math:`P_B` projects onto :math:`V_B = \operatorname{span}\{\mu_k - \mu_G\}` and :math:`\Sigma_W` is as in
    :func:`nc1`.

    P_B is the orthogonal projector onto the eigenvectors kept by the pseudo-inverse of Sigma_B (``psd_pinv``
    with ``rank``, ``rtol`` and the cap ``min(d, K - 1)``, exactly as in :func:`nc1`). Equivalently
    ``(1/N) sum_i ||P_B (h_i - mu_{y_i})||^2`` and its complement. A diagnostic (direction "none"):
    [Xu & Liu 2023, Fig. 1] shows the V_B part shrinking and the V_B^perp part growing during training.

    Parameters
    ----------
    stats : ClassStats or ClassMoments, K classes, dimension d
        Statistics of the features, ``track="full"`` (the d x d matrices); every class nonempty.
    weighting : {"balanced", "empirical"}, default "balanced"
        Sigma_B divided by K (balanced) or weighted by n_k / N (empirical).
    rank : None, "numerical" or int, default None
        Eigenvectors of Sigma_B kept by the pseudo-inverse: None, the numerical rank capped at
        ``min(d, K - 1)``; "numerical", the numerical rank alone; an int r, the top r (still dropping those under
        the tolerance).
    normalize : bool, default False
        Divide both parts by Tr Sigma_B.
    rtol : float, default 1e-12
        Relative eigenvalue tolerance of the pseudo-inverse, in ``[0, 1)`` (``docs/conventions.md``,
        "pseudo-inverse").

    Returns
    -------
    dict
        ``{"in_span": Tr(P_B Sigma_W), "orthogonal": Tr((I - P_B) Sigma_W), "rank": dim V_B}`` (floats and an
        int), with ``in_span + orthogonal = Tr Sigma_W``. With Sigma_B = 0, V_B = {0}: in_span = 0,
        orthogonal = Tr Sigma_W, rank = 0.

    Raises
    ------
    ValueError
        ``normalize=True`` with Sigma_B = 0 (nothing to normalise by), or ``track="light"`` statistics.

    See Also
    --------
    nc1

    Examples
    --------
    >>> import numpy as np
    >>> from nclab.stats import ClassStats
    >>> H = np.array([[2.0, 0.0], [0.0, 0.0], [-2.0, 0.0], [0.0, 0.0]])  # means (+-1, 0), spread 1 along x
    >>> stats = ClassStats.from_arrays(H, np.array([0, 0, 1, 1]), K=2)
    >>> split = within_class_split(stats)  # all within-class spread lies along V_B = the x axis
    >>> round(split["in_span"], 12), round(split["orthogonal"], 12), split["rank"]
    (1.0, 0.0, 1)
    """
    stats = as_moments(stats)
    rtol = check_rtol(rtol)
    normalize = check_bool(normalize, name="normalize")
    sw = stats.matrix("within")
    xp = stats.backend.xp
    pb = _pinv_b(stats, weighting, rank, rtol)
    r = 0 if between_is_zero(stats, weighting) else pb.rank
    V = pb.basis[:, :r]
    in_span = float(xp.einsum("ij,ij->", V, sw @ V))
    # The V_B^perp part is often orders of magnitude smaller than the V_B part ([Xu & Liu 2023, Fig. 1] plots it): the
    # difference from the trace is used only while it keeps >= 13 digits (it is >= 1e-3 Tr Sigma_W); below that
    # it is summed directly over an orthonormal basis of the complement, so no digit is lost either way.
    total = float(sw.trace())
    orthogonal = total - in_span
    if not orthogonal >= 1e-3 * total:
        V_all = stats_eig(stats, "between", weighting)[1]
        orthogonal = float(xp.einsum("ij,ij->", V_all[:, r:], sw @ V_all[:, r:]))
    if normalize:
        tb = stats.trace_b(weighting)
        if V.shape[1] == 0:
            raise ValueError("within_class_split(normalize=True): Tr Sigma_B = 0 (all class means are equal)")
        in_span, orthogonal = in_span / tb, orthogonal / tb
    return {"in_span": in_span, "orthogonal": orthogonal, "rank": int(V.shape[1])}
