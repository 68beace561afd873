"""Building blocks shared by the metric modules: the ClassStats check and the view of its derived statistics, the
"zero" thresholds, the degenerate-value warnings, the unit directions of class vectors, and the whitened
between-class factor of VCI and the probe loss.

Public so that every metric module imports them by name (none reaches into another module's private helpers).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from nclab.metrics._linalg import (
    SB_ZERO_RTOL,
    ZERO_RTOL,
    feature_scale_sq,
    moments_of,
    pow2_scale,
    psd_cholesky,
    stats_eigvals,
)
from nclab.stats.class_stats import ClassStats
from nclab.stats.moments import ClassMoments, MomentKey, Weighting

__all__ = [
    "SB_ZERO_RTOL",
    "WHITEN_ALWAYS_COND",
    "ZERO_RTOL",
    "DegenerateMetricWarning",
    "StatsLike",
    "TargetUnattainableWarning",
    "as_moments",
    "between_is_zero",
    "check_stats",
    "degenerate",
    "direction_norms",
    "is_stats",
    "moments_of",
    "row_norms",
    "rows_str",
    "total_condition",
    "unit_directions",
    "whitened_between",
    "zero_rows",
]


class DegenerateMetricWarning(RuntimeWarning):
    """A metric is undefined for these inputs (e.g. a zero vector whose direction is needed): it is nan."""


class TargetUnattainableWarning(UserWarning):
    """The reference frame (simplex ETF, orthogonal frame) does not fit in dimension d: the metric is > 0."""


#: What the metrics read: a ClassStats, or a view of its derived statistics that caches them
#: (:class:`~nclab.stats.ClassMoments`; ``collapse_report`` passes one view to all its metrics).
StatsLike = ClassStats | ClassMoments


def is_stats(x: object) -> bool:
    """Whether ``x`` is class statistics (a ClassStats or its ClassMoments view) rather than an array."""
    return isinstance(x, (ClassStats, ClassMoments))


def as_moments(stats: StatsLike, *, name: str = "stats") -> ClassMoments:
    """:func:`moments_of` after :func:`check_stats`."""
    check_stats(stats, name=name)
    return moments_of(stats)


def check_stats(stats: StatsLike, *, name: str = "stats") -> None:
    """Raise unless ``stats`` is a :class:`~nclab.stats.ClassStats` (or its :class:`~nclab.stats.ClassMoments`
    view) that has seen samples in every class.

    Raises ``TypeError`` (not a ClassStats), ``ValueError`` (no sample) or
    :class:`~nclab.stats.class_stats.EmptyClassError` (naming the empty classes), each naming ``name``.
    """
    if not is_stats(stats):
        raise TypeError(f"{name} must be a ClassStats, got {type(stats).__name__}")
    if stats.N == 0:
        raise ValueError(f"{name}: these ClassStats have seen no sample")
    # what ``stats.means`` checks (EmptyClassError naming the empty classes), without its copy: every metric of a
    # report calls this
    stats.require_nonempty("class means")


def between_is_zero(stats: StatsLike, weighting: Weighting) -> bool:
    """All class means equal up to roundoff: ``Tr Sigma_B <= SB_ZERO_RTOL * feature_scale_sq(stats)``, the
    largest mean squared norm of a class's raw features (``nclab.metrics._linalg``: means at the origin with
    residuals of 1e-16 of the spread count as equal, and the decision is invariant to scaling the features)."""
    return bool(stats.trace_b(weighting) <= SB_ZERO_RTOL * feature_scale_sq(stats))


def row_norms(V: np.ndarray) -> np.ndarray:
    """Euclidean norms of the rows of the float64 ``V (K, d)``, ``(K,)``, at any float64 magnitude.

    When the largest entry lies in ``(1e-140, 1e140)`` the squares cannot overflow or underflow to a loss of
    digits, and this is the same sums as ``np.linalg.norm(V, axis=1)`` (bit for bit) without its argument
    handling, which costs more than the sums at the K x d sizes of a report (a dozen row norms per geometry
    metric). Outside that range the rows are divided by a power of two near the largest entry (exact) first.
    """
    if V.size == 0:
        return np.zeros(V.shape[0])
    # the largest |entry| from the extremes (no |V| array); the methods: np.max's dispatch costs more than the
    # reduction at K x d
    top = max(float(V.max()), -float(V.min()))
    if 1e-140 < top < 1e140:
        # the squares in row blocks of ~4 MiB: the same sums per row, without a K x d temporary (each fresh one
        # costs its page faults, more than the sums at a vocabulary's K)
        rows = max(1, (1 << 19) // V.shape[1])
        if V.shape[0] <= rows:
            norms: np.ndarray = np.sqrt(np.add.reduce(V * V, axis=1))
            return norms
        norms = np.empty(V.shape[0])
        for a in range(0, V.shape[0], rows):
            block = V[a : a + rows]
            np.add.reduce(block * block, axis=1, out=norms[a : a + rows])
        return np.sqrt(norms, out=norms)
    if top == 0.0:
        return np.zeros(V.shape[0])
    p = pow2_scale(top)
    U = V / p
    norms = np.sqrt(np.add.reduce(U * U, axis=1)) * p
    return norms


def zero_rows(V: np.ndarray, scale: float) -> np.ndarray:
    """Indices of the rows of ``V`` with norm ``<= ZERO_RTOL * scale`` (all rows when ``scale = 0``)."""
    norms = row_norms(V)
    return np.flatnonzero(norms <= ZERO_RTOL * scale) if scale > 0 else np.arange(V.shape[0])


def degenerate(metric_name: str, why: str) -> float:
    """Warn (:class:`DegenerateMetricWarning`) that ``metric_name`` is undefined because ``why``; return nan."""
    warnings.warn(f"{metric_name} is undefined: {why}; returning nan", DegenerateMetricWarning, stacklevel=3)
    return float("nan")


def rows_str(idx: np.ndarray) -> str:
    """The first ten indices of ``idx`` for a message."""
    return ", ".join(map(str, idx[:10])) + (" ..." if idx.size > 10 else "")


def unit_directions(V: np.ndarray, scale: float, metric_name: str) -> np.ndarray | None:
    """The unit rows of the validated float64 ``V (K, d)``, or None after a :class:`DegenerateMetricWarning`
    naming the rows with norm ``<= ZERO_RTOL * scale`` (all rows when ``scale = 0``): a metric of directions is
    then nan. The policy of :func:`nclab.validation.unit_rows` with ``zero="nan"``, computed from one norm pass
    (this runs several times per collapse report, so it skips the general helper's argument handling)."""
    norms = row_norms(V)
    zero = np.flatnonzero(norms <= (ZERO_RTOL * scale if scale > 0 else np.inf))
    if zero.size:
        degenerate(metric_name, f"rows {rows_str(zero)} have zero norm, so their cosines are undefined")
        return None
    unit: np.ndarray = V / norms[:, None]
    return unit


def direction_norms(V: np.ndarray, scale: float | None, metric_name: str) -> np.ndarray | None:
    """The row norms of the validated float64 ``V (K, d)`` when every row has a direction, else None after the
    :class:`DegenerateMetricWarning` of :func:`unit_directions` (the same rule; ``scale`` None: the largest of
    these norms). For metrics of each row's own cosine, ``w_k . m_k / (||w_k|| ||m_k||)``, without the K x d unit
    rows."""
    norms = row_norms(V)
    top = float(norms.max()) if scale is None else scale
    zero = np.flatnonzero(norms <= (ZERO_RTOL * top if top > 0 else np.inf))
    if zero.size:
        degenerate(metric_name, f"rows {rows_str(zero)} have zero norm, so their cosines are undefined")
        return None
    return norms


# Below this (estimated) condition number of Sigma_W the whitened form keeps ~13 digits (relative errors ~ eps *
# sqrt(cond) through the Cholesky factor) and is used whatever Sigma_T's conditioning: it costs a Cholesky
# factorisation, where the Sigma_T form needs a full eigendecomposition of Sigma_T.
WHITEN_ALWAYS_COND = 1e6


def total_condition(stats: StatsLike, rtol: float) -> float:
    """cond_2(Sigma_T) as the Sigma_T forms see it: ``inf`` when the tolerance drops any eigenvalue.

    A dropped eigenvalue is evidence against the Sigma_T forms, not a reason to ignore its direction: Sigma_W is
    positive definite whenever this is asked (Sigma_T >= Sigma_W), so the dropped directions are real
    within-class variance that the truncated pseudo-inverse discards (near collapse with anisotropic noise the
    whole of V_W can fall under ``rtol * lambda_max``). The eigenvalues are the ones the rank metrics need anyway.
    """
    wt = stats_eigvals(stats, "total")
    if not wt[-1] > rtol * wt[0]:
        return float("inf")
    return float(wt[0] / wt[-1])


def whitened_between(stats: StatsLike, rtol: float) -> tuple[Any, np.ndarray] | None:
    """``(U, s)`` of the thin SVD of ``B = Pi^{1/2} M L^{-T}`` (K, d) (U on the view's backend, s on the host), M the
    empirically centred class means, Pi = diag(n_k / N), ``Sigma_W = L L^T`` (Cholesky; ``B B^T = Pi^{1/2} M
    Sigma_W^{-1} M^T Pi^{1/2}``, so U and s are those of the symmetric whitening ``Pi^{1/2} M Sigma_W^{-1/2}``); or
    None when Sigma_W is numerically singular (Cholesky fails, or LAPACK's estimate of cond_1(Sigma_W) exceeds
    1 / rtol), or conditioned worse than both 1e6 and Sigma_T (then the Sigma_T forms are the accurate ones; a
    Sigma_T that loses an eigenvalue to the ``rtol`` cut counts as infinitely conditioned, :func:`total_condition`).

    Shared by :func:`vci` and :func:`nclab.metrics.probe_mse_optimal`. With S = B B^T, Woodbury gives
    ``Pi^{1/2} M Sigma_T^{-1} M^T Pi^{1/2} = S (I + S)^{-1}``, so Tr(Sigma_T^+ Sigma_B) = sum_j s_j^2 / (1 + s_j^2)
    and the residual terms are sums of positive 1 / (1 + s_j^2): no cancellation near collapse, where Sigma_T
    has noise-only eigenvalues next to O(1) ones. ``B^T sqrt(pi) = 0``, so U is orthogonal to sqrt(pi).
    """

    def compute() -> tuple[Any, np.ndarray] | None:
        # the Cholesky factor and LAPACK's condition estimate (an eigendecomposition just for the condition number
        # would cost as much as the rest of the report); the choice of form only matters when the two condition
        # numbers are orders of magnitude apart, so cond_1's factor-d slack is harmless
        be = view.backend
        chol = psd_cholesky(view.matrix("within"), rtol)
        if chol is None:  # not numerically positive definite
            return None
        L, rcond = chol
        if 1.0 / rcond > WHITEN_ALWAYS_COND and 1.0 / rcond >= total_condition(view, rtol):
            return None  # ill-conditioned Sigma_W, and Sigma_T no better: the Sigma_T forms are the accurate ones
        # whiten with the Cholesky factor Sigma_W = L L^T: B = A L^{-T} has the same B B^T (hence the same U and
        # singular values) as A Sigma_W^{-1/2}, at a fraction of an eigendecomposition's cost
        A = be.asarray(view.between_factor("empirical"))  # Pi^{1/2} M
        B = be.solve_lower(L, A.T).T
        U, sv, _ = be.xp.linalg.svd(B, full_matrices=False)
        return U, be.to_host(sv)

    view = moments_of(stats)
    return view.memo(MomentKey.WHITENED_BETWEEN, rtol, compute=compute, backend=True)
