"""Generalized neural collapse [Jiang et al. 2024]: GNC1 and GNC3 on L2-normalised features, GNC2 on the classifier.

[Jiang et al. 2024] works on the sphere: features ``h / ||h||`` and classifier rows ``w_k / ||w_k||``. Its GNC1 is
``(1/K) tr(Sigma_W Sigma_B^+)`` with the **uncentred** ``Sigma_B = (1/K) sum_k hbar_k hbar_k^T``, and its
GNC3 is ``mean_k (1 - w_k^T hbar_k)`` with ``hbar_k`` the mean of the unit-norm features of class ``k`` (not
re-normalised, so GNC3 -> 0 needs both within-class collapse and alignment).

Feature normalisation
---------------------
The within-class covariance of normalised features cannot be recovered from statistics of raw features, so
:func:`gnc1` expects a :class:`~nclab.stats.ClassStats` **built on L2-normalised features**::

    stats = ClassStats.from_arrays(normalize_features(H), y)      # or stats.update(normalize_features(h), y)

and checks this cheaply (:func:`check_normalized_stats`). :func:`gnc3` needs only the per-class sums of unit
vectors, which every ClassStats keeps (``unit_sums``), so it works on stats of raw or of normalised features.

GNC2 is a property of the classifier alone: the one-vs-rest margin ``rho_one_vs_rest`` of its unit rows
(:func:`gnc2`, higher is better, at most the Softmax Code optimum ``rho*``), and that margin over the best known
``rho*`` for ``(K, d)`` (:func:`gnc2_ratio`, 1 on the best known code). ``rho*`` comes from
:func:`nclab.geometry.best_known_margin`: closed forms, a table, or a cached search for small ``K d`` only.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from nclab.geometry.best_known import SEARCH_MAX_KD, BestKnownMargin, best_known_margin
from nclab.geometry.hull import rho_one_vs_rest
from nclab.metrics._linalg import DEFAULT_RTOL, SB_ZERO_RTOL, check_rtol, feature_scale_sq, psd_pinv
from nclab.metrics._registry import metric
from nclab.metrics.common import StatsLike, as_moments, direction_norms, is_stats, row_norms, unit_directions
from nclab.metrics.variability import nc1
from nclab.stats.moments import Weighting, check_weighting
from nclab.validation import as_rows, check_unmasked, unit_rows

__all__ = [
    "GNC2",
    "GNC2_REPORT_MAX_K",
    "MetricOmittedWarning",
    "check_normalized_stats",
    "gnc1",
    "gnc2",
    "gnc2_entries",
    "gnc2_margin",
    "gnc2_ratio",
    "gnc3",
    "normalize_features",
]

NORMALIZED_TOL = 1e-3


#: :func:`gnc2_entries` (``collapse_report``) computes GNC2 up to this many classes. ``rho_one_vs_rest`` grows
#: faster than the rest of a report, and with the data (measured on one loaded core: K = 1000, d = 32: 3.0 s
#: against 0.15 s for the whole light report; K = 5000, d = 128: 23 s against 2.1 s; K = 1,426 token classes of a
#: GPT-2-shaped model, d = 768: 6-160 s, against 1 s for the rest of the report), so a report over the tokens of
#: a language model leaves it out; call :func:`gnc2` directly for it.
GNC2_REPORT_MAX_K = 1_000


class MetricOmittedWarning(UserWarning):
    """A report left a metric out: its reference value is not known cheaply (``gnc2_ratio``), or it would cost
    far more than the rest of the report (``gnc2`` beyond :data:`GNC2_REPORT_MAX_K` classes)."""


def normalize_features(H: Any) -> Any:
    """Divide every row (last axis) of ``H`` by its L2 norm; numpy in, numpy out; torch in, torch out.

    Parameters
    ----------
    H : array_like or torch.Tensor, shape (N, d) (or any (..., d))
        Features, one row per sample; a numeric (numpy) or floating (torch) dtype.

    Returns
    -------
    numpy.ndarray or torch.Tensor, same shape as ``H``
        The unit rows. The dtype and device are kept (norms of half-precision inputs are computed in float32, of
        numpy inputs in float64; integer numpy input gives float64). A zero row has no direction and stays zero
        (as ``torch.nn.functional.normalize``); statistics of such features fail :func:`check_normalized_stats`.

    Raises
    ------
    TypeError
        A non-numeric numpy array or a non-floating tensor.

    Examples
    --------
    >>> normalize_features(np.array([[3.0, 4.0], [0.0, 0.0]])).tolist()
    [[0.6, 0.8], [0.0, 0.0]]
    """
    if isinstance(H, torch.Tensor):
        if not H.is_floating_point():
            raise TypeError(f"features must have a floating dtype, got {H.dtype}")
        return unit_rows(H, zero="keep", name="H")
    A = np.asarray(check_unmasked(H, name="features"))
    if A.dtype.kind not in "fiu":
        raise TypeError(f"features must be a numeric array, got dtype {A.dtype}")
    out_dtype = A.dtype if A.dtype.kind == "f" else np.dtype(np.float64)
    return unit_rows(A, zero="keep", name="H").astype(out_dtype)


def check_normalized_stats(stats: StatsLike, tol: float = NORMALIZED_TOL) -> None:
    """Raise ``ValueError`` unless ``stats`` look like statistics of L2-normalised features.

    Two necessary conditions, O(K d) from the accumulators: per class, the mean squared norm
    ``(class_ss_k + n_k ||mu_k||^2) / n_k`` is 1, and the mean of the re-normalised features
    ``unit_sums_k / n_k`` equals the mean ``mu_k`` (normalising a unit vector changes nothing). Raw features
    essentially never pass both; a pathological set could (the check cannot see individual samples).

    Parameters
    ----------
    stats : ClassStats
        The statistics to check (every class nonempty).
    tol : float, default 1e-3
        Tolerance of both conditions, loose enough for features normalised in half precision.

    Raises
    ------
    TypeError
        ``stats`` is not a ClassStats.
    ValueError
        A class fails a condition; the message names it and how to build the statistics.

    Examples
    --------
    >>> from nclab.stats import ClassStats
    >>> H, y = np.array([[3.0, 4.0], [0.0, 2.0]]), np.array([0, 1])
    >>> check_normalized_stats(ClassStats.from_arrays(normalize_features(H), y, K=2))  # passes
    >>> check_normalized_stats(ClassStats.from_arrays(H, y, K=2))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    ValueError: these ClassStats do not look built on L2-normalised features: class 0 has mean squared ...
    """
    if not is_stats(stats):
        raise TypeError(f"expected ClassStats, got {type(stats).__name__}")
    counts = stats.require_nonempty("check_normalized_stats")
    mu = stats.means
    n = counts.astype(np.float64)
    msq = (as_moments(stats).class_ss + n * np.einsum("kd,kd->k", mu, mu)) / n
    gap = row_norms(stats.unit_sums / n[:, None] - mu)
    bad = np.flatnonzero((np.abs(msq - 1.0) > tol) | (gap > tol))
    if bad.size:
        k = int(bad[0])
        raise ValueError(
            f"these ClassStats do not look built on L2-normalised features: class {k} has mean squared "
            f"feature norm {msq[k]:.6g} (should be 1) and |mean(h/||h||) - mean(h)| = {gap[k]:.3g} "
            f"(should be 0); {bad.size} of {stats.K} classes fail (tol={tol:g}). Build them with "
            "ClassStats.from_arrays(normalize_features(H), y), or update(normalize_features(h), y). Zero "
            "feature vectors cannot be normalised and also fail this check; call gnc1(..., check=False) to skip it"
        )


@metric("gnc1", "lower", "003 GNC1 (uncentred Sigma_B as written; center=True: Papyan's centred NC1)")
def gnc1(
    stats: StatsLike,
    center: bool = False,
    *,
    weighting: Weighting = "balanced",
    check: bool = True,
    tol: float = NORMALIZED_TOL,
    rtol: float = DEFAULT_RTOL,
) -> float:
    r"""``(1/K) tr(Sigma_W Sigma_B^+)`` on **L2-normalised** features [Jiang et al. 2024].

    .. math::

        \mathrm{GNC1} = \frac{1}{K} \operatorname{Tr}\left(\Sigma_W \Sigma_B^{+}\right)

        \Sigma_B = \frac{1}{K} \sum_{k=1}^{K} \bar h_k \bar h_k^\top

    on the unit features :math:`\tilde h_i = h_i / \lVert h_i \rVert`, with :math:`\bar h_k` the mean of class
    :math:`k`'s unit features and :math:`\Sigma_W = \frac{1}{N} \sum_i (\tilde h_i - \bar h_{y_i})(\tilde h_i -
    \bar h_{y_i})^\top` (``center=False``: :math:`\Sigma_B` is not centred, as the paper writes it).

    Pseudo-inverse: ``psd_pinv`` (eigenvalues ``<= rtol * lambda_max`` dropped). Needs ``track="full"``.

    Parameters
    ----------
    stats : ClassStats
        Statistics built on normalised features (:func:`normalize_features`), ``track="full"``.
    center : bool, default False
        ``False`` ([Jiang et al. 2024] as written): ``Sigma_B = (1/K) sum_k mu_k mu_k^T`` (empirical weighting:
        ``sum_k (n_k/N) mu_k mu_k^T``), pseudo-inverse capped at rank ``min(d, K)``; ``True``: the centred
        ``stats.sigma_b(weighting)`` capped at ``min(d, K - 1)`` (Papyan's NC1 of the normalised features).
    weighting : {"balanced", "empirical"}, default "balanced"
        Weights of the classes in ``Sigma_B``.
    check : bool, default True
        Verify that ``stats`` are of normalised features (:func:`check_normalized_stats`).
    tol : float, default 1e-3
        Tolerance of that check.
    rtol : float, default 1e-12
        Relative eigenvalue tolerance of the pseudo-inverse, in ``[0, 1)``.

    Returns
    -------
    float
        >= 0, lower is more collapsed. ``Sigma_B = 0`` (every class mean zero, or, centred, all class means equal;
        up to roundoff: ``tr Sigma_B <= (8 eps)^2 max_k (||mu_k||^2 + var_k)``, the feature scale of ``nc1``):
        ``inf`` (no class separation, whatever Sigma_W is), the convention of ``nc1``. ``Sigma_W = 0`` with
        ``Sigma_B != 0``: 0.

    Raises
    ------
    TypeError
        ``stats`` is not a ClassStats.
    ValueError
        ``check=True`` and the statistics are not of normalised features.

    See Also
    --------
    nc1 : the centred NC1 of raw features.
    gnc3

    Examples
    --------
    >>> from nclab.geometry import simplex_etf
    >>> from nclab.stats import ClassStats
    >>> y = np.repeat(np.arange(3), 2)
    >>> H = 5.0 * simplex_etf(3, 2)[y]  # every class collapsed to one point
    >>> gnc1(ClassStats.from_arrays(normalize_features(H), y, K=3))
    0.0
    """
    if not is_stats(stats):
        raise TypeError(f"gnc1 expects ClassStats (built on L2-normalised features), got {type(stats).__name__}")
    rtol = check_rtol(rtol)
    if check:
        check_normalized_stats(stats, tol)
    counts = stats.require_nonempty("gnc1")
    stats = as_moments(stats)
    if center:  # Papyan's NC1 of the normalised features: the one nc1
        return nc1(stats, weighting=weighting, rtol=rtol)
    check_weighting(weighting)
    K, d = stats.K, stats.d
    be = stats.backend  # Sigma_B and its eigendecomposition where the view computes (the statistics' device)
    mu = be.asarray(stats.means)
    w = be.asarray(np.full(K, 1.0 / K) if weighting == "balanced" else counts / counts.sum())
    sb = (mu * w[:, None]).T @ mu
    # Sigma_B = 0 up to roundoff (nc1's threshold): no class separation, inf, as nc1
    p = psd_pinv(sb, max_rank=min(d, K), rtol=rtol)
    if p.rank == 0 or float(sb.trace()) <= SB_ZERO_RTOL * feature_scale_sq(stats):
        return float("inf")
    return p.trace_with(stats.matrix("within")) / K


@metric(
    "gnc3",
    "lower",
    "003 GNC3: mean_k (1 - w_k^T hbar_k), unit w_k, hbar_k = mean of unit features",
    needs=("stats", "W"),
)
def gnc3(stats: StatsLike, *, W: Any, normalize_w: bool = True, renormalize_means: bool = False) -> float:
    r"""``mean_k (1 - w_k^T hbar_k)`` [Jiang et al. 2024], in ``[0, 2]``.

    .. math::

        \mathrm{GNC3} = \frac{1}{K} \sum_{k=1}^{K} \left(1 - \frac{w_k^\top}{\lVert w_k \rVert} \bar h_k\right)

        \bar h_k = \frac{1}{n_k} \sum_{i:\, y_i = k} \frac{h_i}{\lVert h_i \rVert}

    where :math:`w_k` is row :math:`k` of the classifier :math:`W` and :math:`\bar h_k` the mean of class
    :math:`k`'s unit features (not re-normalised).

    Works on ClassStats of raw or of normalised features (it reads ``unit_sums`` only).

    Parameters
    ----------
    stats : ClassStats, K classes, dimension d
        Every class nonempty.
    W : array_like, shape (K, d)
        Classifier rows ``w_k``.
    normalize_w : bool, default True
        L2-normalise the rows of ``W`` ([Jiang et al. 2024] keeps them on the sphere, where this changes nothing).
    renormalize_means : bool, default False
        ``hbar_k = unit_sums_k / n_k`` is the mean of the L2-normalised features of class ``k``, **not**
        re-normalised [Jiang et al. 2024], so ``||hbar_k|| <= 1`` and the metric sees within-class spread;
        ``True`` divides ``hbar_k`` by its norm (then it is ``mean_k (1 - cos(w_k, hbar_k))`` on normalised
        features, the public GNC code's form without centring).

    Returns
    -------
    float
        In ``[0, 2]``, lower is more collapsed: 0 iff every class is collapsed to the direction of its ``w_k``. A
        zero row of ``W`` (or a zero ``hbar_k`` with ``renormalize_means``): nan and a warning.

    See Also
    --------
    self_duality : NC3 on class means.

    Examples
    --------
    >>> from nclab.stats import ClassStats
    >>> H = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0]])
    >>> stats = ClassStats.from_arrays(H, np.array([0, 0, 1, 1]), K=2)
    >>> W = np.array([[1.0, 1.0], [-1.0, -1.0]])
    >>> round(gnc3(stats, W=W), 12)  # hbar_k has norm 1/sqrt(2) along w_k: 1 - 1/sqrt(2)
    0.292893218813
    >>> round(gnc3(stats, W=W, renormalize_means=True), 12)
    0.0
    """
    if not is_stats(stats):
        raise TypeError(f"gnc3 expects ClassStats, got {type(stats).__name__}")
    counts = stats.require_nonempty("gnc3").astype(np.float64)
    sums = stats.raw("unit_sums")  # read-only, no copy (ValueError when not kept)
    Wr = as_rows(W, name="W")
    if Wr.shape != sums.shape:
        raise ValueError(f"W has shape {Wr.shape}, but the ClassStats have (K, d) = {sums.shape}")
    dots = np.einsum("kd,kd->k", Wr, sums) / counts  # w_k . hbar_k without the K x d hbar
    if normalize_w:  # w_k / ||w_k|| . hbar_k from the row norms: no K x d unit rows
        nw = direction_norms(Wr, None, "gnc3")
        if nw is None:
            return float("nan")
        dots /= nw
    if renormalize_means:
        nh = direction_norms(sums / counts[:, None], 1.0, "gnc3")  # hbar_k is a mean of unit vectors: its scale is 1
        if nh is None:
            return float("nan")
        dots /= nh
    return float(np.mean(1.0 - dots))


@metric(
    "gnc2",
    "higher",
    "003 GNC2: rho_one_vs_rest of the L2-normalised classifier rows (eq. (3)); the Softmax Code maximises it",
    needs=("W",),
)
def gnc2(W: Any) -> float:
    r"""``rho_one_vs_rest(W / ||W||)`` [Jiang et al. 2024, Sec. 3, eq. (3)]: the smallest distance from a unit
    classifier row ``w_k`` to the convex hull of the other rows, ``min_k dist(w_k, conv{w_j : j != k})``.

    .. math::

        \mathrm{GNC2} = \rho_\text{one-vs-rest}(\tilde W)
        = \min_{k} \operatorname{dist}\left(\tilde w_k, \operatorname{conv}\{\tilde w_j : j \neq k\}\right)

        \tilde w_k = \frac{w_k}{\lVert w_k \rVert}

    where :math:`\operatorname{conv}` is the convex hull and :math:`\operatorname{dist}` the Euclidean distance.

    Invariant to rotations and to positive rescaling of each row. Exact (hull QPs,
    :func:`nclab.geometry.rho_one_vs_rest`); measured 0.1 s at ``(K, d) = (100, 10)`` and 9-15 s at
    ``(1000, 64)`` on one core.

    Parameters
    ----------
    W : array_like, shape (K, d)
        Classifier rows, ``K >= 2``.

    Returns
    -------
    float
        In ``[0, 2]``, higher is more collapsed: GNC2 rises to ``rho* = max_{W in OB(d, K)} rho_one_vs_rest(W)``,
        reached by a Softmax Code (``K / (K - 1)`` for ``K <= d + 1``, the simplex ETF; see :func:`gnc2_ratio`); 0
        exactly when two rows point the same way (a unit vector lies in the hull of other unit vectors only if it
        is one of them). A zero row: nan and a :class:`~nclab.metrics.DegenerateMetricWarning`.

    See Also
    --------
    gnc2_ratio : GNC2 over the best known ``rho*``.
    nclab.geometry.one_vs_rest : per-class distances, optimal features, rattlers.

    Examples
    --------
    >>> from nclab.geometry import regular_polygon
    >>> round(gnc2(3.0 * regular_polygon(6)), 12)        # 1 - cos(2 pi / 6), whatever the row lengths
    0.5
    """
    Wr = as_rows(W, name="W")
    U = unit_directions(Wr, float(row_norms(Wr).max()), "gnc2")
    return float("nan") if U is None else rho_one_vs_rest(U)


@dataclass(frozen=True)
class GNC2:
    """GNC2 of a classifier with its reference, as :func:`gnc2_margin` returns it.

    Parameters
    ----------
    value : float
        :func:`gnc2` of the classifier.
    reference : BestKnownMargin or None
        The best known margin ``rho*`` for ``(K, d)`` (``None`` when none is known cheaply).
    ratio : float or None
        ``value / reference.rho`` (``None`` without a usable reference).
    note : str or None
        Why ``ratio`` is missing (``None`` when it is present).

    Examples
    --------
    >>> from nclab.geometry import regular_polygon
    >>> g = gnc2_margin(regular_polygon(6))
    >>> round(g.value, 12), round(g.ratio, 12), g.note
    (0.5, 1.0, None)
    """

    value: float
    reference: BestKnownMargin | None
    ratio: float | None
    note: str | None


def gnc2_margin(W: Any, *, search: bool = True) -> GNC2:
    """GNC2 of ``W (K, d)`` and its ratio to the best known Softmax Code margin.

    ``rho*`` is :func:`nclab.geometry.best_known_margin` ``(d, K)``: a closed form, a table entry, or (``search``
    and ``K d <= SEARCH_MAX_KD``) a code search run once per process and cached.

    Parameters
    ----------
    W : array_like, shape (K, d)
        Classifier rows, ``K >= 2``.
    search : bool, default True
        Allow the cached code search when no closed form or table entry is known.

    Returns
    -------
    GNC2
        The value, the reference, the ratio and a note. Without a reference, or with ``rho* = 0``
        (``d = 1, K >= 3``), ``ratio`` is None and ``note`` says why.

    See Also
    --------
    gnc2, gnc2_ratio

    Examples
    --------
    >>> from nclab.geometry import regular_polygon
    >>> g = gnc2_margin(regular_polygon(6))
    >>> round(g.reference.rho, 12), g.reference.proven
    (0.5, True)
    """
    Wr = as_rows(W, name="W")
    value = gnc2(Wr)
    K, d = Wr.shape
    ref = best_known_margin(d, K, search=search)
    if ref is None:
        why = f"K d = {K * d} > {SEARCH_MAX_KD}" if search else "search=False"
        note = (
            f"gnc2_ratio omitted: no best known Softmax Code margin for (K, d) = ({K}, {d}) (no closed form or table "
            f"entry, and {why}, so no code search is run); compare gnc2 with softmax_code_search({d}, {K}) yourself"
        )
        return GNC2(value, None, None, note)
    if ref.rho == 0.0:
        return GNC2(value, ref, None, f"gnc2_ratio omitted: the optimal margin for (K, d) = ({K}, {d}) is 0")
    return GNC2(value, ref, value / ref.rho, None)


def gnc2_entries(W: Any, *, stacklevel: int = 2) -> dict[str, float]:
    """The GNC2 entries of a report for the classifier ``W (K, d)``: ``{"gnc2", "gnc2_ratio"}``
    (:func:`gnc2_margin`), with a :class:`MetricOmittedWarning` for each left out.

    Parameters
    ----------
    W : array_like, shape (K, d)
        Classifier rows.
    stacklevel : int, default 2
        As for ``warnings.warn``, counted from this function: 2 names its caller; ``collapse_report`` passes 4,
        its own caller.

    Returns
    -------
    dict of str to float
        Both entries; without ``gnc2_ratio`` when no reference margin is known cheaply; empty when
        ``K > GNC2_REPORT_MAX_K`` (then nothing is computed).

    Examples
    --------
    >>> from nclab.geometry import regular_polygon
    >>> {k: round(v, 12) for k, v in gnc2_entries(regular_polygon(6)).items()}
    {'gnc2': 0.5, 'gnc2_ratio': 1.0}
    """
    Wr = as_rows(W, name="W")
    K = Wr.shape[0]
    if K > GNC2_REPORT_MAX_K:
        warnings.warn(
            f"gnc2 and gnc2_ratio omitted: K = {K} > GNC2_REPORT_MAX_K = {GNC2_REPORT_MAX_K} classes, where the "
            "exact margin costs minutes; call nclab.metrics.gnc2(W) directly if you need it",
            MetricOmittedWarning,
            stacklevel=stacklevel,
        )
        return {}
    g = gnc2_margin(Wr)
    if g.ratio is None:
        warnings.warn(g.note or "gnc2_ratio is undefined", MetricOmittedWarning, stacklevel=stacklevel)
        return {"gnc2": g.value}
    return {"gnc2": g.value, "gnc2_ratio": g.ratio}


@metric(
    "gnc2_ratio",
    "higher",
    "003 GNC2 / rho*, rho* the margin of the best known Softmax Code for (K, d); 1 on that code",
    needs=("W",),
)
def gnc2_ratio(W: Any, *, search: bool = True) -> float:
    r"""``gnc2(W) / rho*`` [Jiang et al. 2024, Sec. 3 and Fig. 2's "Optimal" line]: how close the classifier's
    margin is to the best known Softmax Code for its ``(K, d)``.

    .. math::

        \frac{\mathrm{GNC2}(W)}{\rho^*}

        \rho^* = \max_{W \in \mathrm{OB}(d, K)} \rho_\text{one-vs-rest}(W)

    with :math:`\mathrm{OB}(d, K)` the :math:`K \times d` matrices with unit rows and :math:`\rho^*` the margin of
    the best known Softmax Code (:func:`gnc2`).

    Parameters
    ----------
    W : array_like, shape (K, d)
        Classifier rows.
    search : bool, default True
        Allow the cached code search for ``rho*`` (see :func:`gnc2_margin`).

    Returns
    -------
    float
        1 on the best known code (and on any code with its margin); below 1 short of it; above 1 only if ``W``
        beats the best known value (possible where ``rho*`` is numerical, ``BestKnownMargin.proven`` False).
        ``rho*`` from :func:`nclab.geometry.best_known_margin`.

    Raises
    ------
    ValueError
        No reference margin is known for ``(K, d)`` without a search beyond ``SEARCH_MAX_KD`` (the message says
        what to do), or the optimal margin is 0.

    See Also
    --------
    gnc2 : the margin itself.
    nclab.geometry.best_known_margin : where ``rho*`` comes from.

    Examples
    --------
    >>> from nclab.geometry import cross_polytope_subset
    >>> gnc2_ratio(cross_polytope_subset(7, 4))            # rho = rho* = 1 for d + 1 < K <= 2d
    1.0
    """
    g = gnc2_margin(W, search=search)
    if g.ratio is None:
        raise ValueError(g.note)
    return g.ratio
