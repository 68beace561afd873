"""NC2 / NC3 geometry of class means and classifier rows: ETF Gram errors, PNAS statistics, self-duality.

Every function takes class means either as a :class:`~nclab.stats.ClassStats` (its class means, centred about
``global_mean(weighting)`` where the metric centres) or as a ``(K, d)`` array (numpy or torch) whose rows are
the vectors (e.g. the classifier ``W`` in ``nn.Linear`` layout, or precomputed means). All arithmetic is
float64.

Conventions (``docs/conventions.md``; rows drafted in ``docs/_rows_geometry.md``)
---------------------------------------------------------------------------------
* NC2 primary form: :func:`etf_gram_error` (= PFC2 of [Wang et al. 2024] = NC2_ETF of [Tirer & Bruna 2022]), with its
  spectral
  closed form :func:`etf_gram_error_spectral`; :func:`orthogonal_frame_error` (NC2_OF of [Tirer & Bruna 2022],
  uncentred).
* PNAS / [Han et al. 2022] diagnostics: :func:`equinorm`, :func:`equiangularity` (``ddof=1`` by default, as
  ``torch.std`` in the reference Colab; the spread is over the K(K-1) off-diagonal entries, each pair twice),
  :func:`max_angle`.
* ``weighting`` (where the global mean matters) applies to ClassStats inputs; arrays are centred, where a
  metric centres, by their plain mean row.
* NC3: :func:`self_duality` (the [Han et al. 2022] squared Frobenius form with centred means by default).

Degenerate inputs (never a silent NaN)
--------------------------------------
* A vector whose direction is needed (a cosine, a Frobenius normalisation) but whose norm is zero returns
  ``nan`` and emits :class:`DegenerateMetricWarning` naming the rows. "Zero" is relative: a norm
  ``<= 1e-12 * scale`` where ``scale`` is the largest norm of the *uncentred* input, because centring
  identical vectors leaves rounding noise (~1e-17 relative), not exact zeros. All-identical features, or all
  class means equal, therefore give ``nan`` + warning for every centred metric.
* Exactly one unordered pair (K = 2) has no spread: :func:`equiangularity` returns ``0.0`` for any ``ddof``.
* Targets that the dimension cannot reach (``d < K - 1`` for the simplex ETF, ``d < K`` for the orthogonal
  frame): the metrics are still well-defined Gram distances (their minimum is then > 0, e.g.
  ``sqrt(2 - 2 sqrt(d / (K - 1)))`` for :func:`etf_gram_error`) and a :class:`TargetUnattainableWarning` is
  emitted.
* An empty class: :class:`~nclab.stats.EmptyClassError` from the ClassStats (use ``stats.drop_empty()``).
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Iterator
from typing import Any, Literal

import numpy as np

from nclab.metrics import pair_sweeps
from nclab.metrics._linalg import SB_ZERO_RTOL, feature_scale_sq, pow2_scale
from nclab.metrics._registry import REGISTRY, metric
from nclab.metrics.common import (
    ZERO_RTOL,
    StatsLike,
    TargetUnattainableWarning,
    degenerate,
    is_stats,
    moments_of,
    row_norms,
    unit_directions,
    zero_rows,
)
from nclab.stats.moments import ClassMoments, MomentKey, Weighting
from nclab.validation import as_rows, check_bool, check_choice, check_finite

__all__ = [
    "angle_statistics",
    "classifier_accuracy_on_means",
    "equiangularity",
    "equinorm",
    "etf_gram_error",
    "etf_gram_error_from_eigvals",
    "etf_gram_error_spectral",
    "max_angle",
    "orthogonal_frame_error",
    "self_duality",
]

SelfDualityVariant = Literal["frobenius", "gram", "cosine"]


# ---------------------------------------------------------------------------------------------- helpers
def _vectors(X: StatsLike | Any, center: bool, weighting: Weighting, name: str = "X") -> tuple[np.ndarray, float]:
    """Rows to measure and the scale (largest uncentred row norm) that defines "zero" for them."""
    if is_stats(X):
        # shared by the geometry metrics of one view (read-only, cached until the statistics change)
        view = moments_of(X)
        compute = lambda: _stats_vectors(view, center, weighting)  # noqa: E731
        return view.memo(MomentKey.GEOMETRY_ROWS, center, weighting, compute=compute)
    raw = as_rows(X, name=name)
    V = raw - raw.mean(axis=0) if center else raw
    return V, float(row_norms(raw).max())


def _stats_vectors(stats: ClassMoments, center: bool, weighting: Weighting) -> tuple[np.ndarray, float]:
    # the cached arrays themselves (read-only): no K x d copies; raises EmptyClassError if a class is empty
    raw = stats.class_means(copy=False)
    V = stats.centered_means(weighting, copy=False) if center else raw
    return V, float(row_norms(raw).max())


def _etf_pair_moments(X: StatsLike | Any, U: np.ndarray, weighting: Weighting) -> tuple[int, float, float, float]:
    """:func:`_pair_cosine_moments` of the unit rows ``U`` of ``X`` shifted by the simplex-ETF cosine 1/(K-1);
    shared by equiangularity and max_angle when ``X`` is a ClassStats (or its view)."""
    shift = 1.0 / (U.shape[0] - 1)
    if is_stats(X):
        sweep = stats_pair_sweep(X, weighting) if U.shape[0] >= pair_sweeps.ENGINE_MIN_K else None
        if sweep is not None:  # one tiled sweep shared with the CDNV and the uniformity kernel
            m = sweep["cos"]
            return m.n, m.mean, m.m2, m.abs_sum
        compute = lambda: _pair_cosine_moments(U, shift)  # noqa: E731
        return moments_of(X).memo(MomentKey.ETF_PAIR_MOMENTS, weighting, compute=compute)
    return _pair_cosine_moments(U, shift)


def stats_pair_sweep(X: StatsLike, weighting: Weighting, exponent: float = 1) -> dict[str, Any] | None:
    """The one tiled sweep (:func:`nclab.metrics.pair_sweeps.class_pair_sweep`) of the class means of ``X`` centred
    about ``global_mean(weighting)``, on the statistics' device, cached in the view: the shifted cosines of
    equiangularity / max_angle, the log kernel of the uniformity and the CDNV sum for ``exponent`` (another
    exponent adds a CDNV sweep of its own to the cached entry). ``None`` (nothing cached) when a centred mean
    is zero: the cosines are then undefined."""
    view = moments_of(X)
    dev = pair_sweeps.stats_device(X)

    def scaled() -> tuple[np.ndarray, float, np.ndarray, float]:
        """The centred means, the power of two c that scales them to O(1), the class variances on that scale and
        the CDNV's threshold of coincident means."""
        V = _vectors(X, center=True, weighting=weighting)[0]
        f2 = feature_scale_sq(view)
        c = pow2_scale(np.sqrt(f2)) if f2 > 0 else 1.0
        return V, c, view.class_ss / view.counts / (c * c), SB_ZERO_RTOL * (f2 / (c * c))

    def compute() -> dict[str, Any] | None:
        # the unit rows exist only while the sweep runs (one K x d array less for the rest of the report)
        V, scale = _vectors(X, center=True, weighting=weighting)
        n = row_norms(V)
        if scale <= 0 or bool((n <= ZERO_RTOL * scale).any()):  # zero_rows: no direction (the metrics warn)
            return None
        _, c, var, thresh = scaled()
        shift = 1.0 / (V.shape[0] - 1)
        U = V / n[:, None]
        return pair_sweeps.class_pair_sweep(U, n / c, var, shift=shift, exponent=exponent, thresh=thresh, device=dev)

    sweep: dict[str, Any] | None = view.memo(MomentKey.PAIR_SWEEP, weighting, compute=compute)
    if sweep is not None and exponent not in sweep["cdnv"]:
        V, c, var, thresh = scaled()
        sweep["cdnv"][exponent] = pair_sweeps.means_pair_sweep(V / c, var, exponent=exponent, thresh=thresh, device=dev)
    return sweep


def _sweep_moments(X: StatsLike | Any, weighting: Weighting) -> tuple[int, float, float, float] | None:
    """The cosine moments of :func:`_etf_pair_moments` from the shared sweep of a ClassStats of at least
    ``ENGINE_MIN_K`` classes, without forming the unit rows again; None otherwise (arrays, fewer classes, or a
    zero centred mean, which the caller's :func:`unit_directions` reports)."""
    if not is_stats(X) or X.K < pair_sweeps.ENGINE_MIN_K:
        return None
    sweep = stats_pair_sweep(X, weighting)
    if sweep is None:
        return None
    m = sweep["cos"]
    return m.n, m.mean, m.m2, m.abs_sum


def _spread_from_moments(count: int, m2: float, ddof: int) -> float:
    """Standard deviation with ``ddof`` from a count and a sum of squared deviations."""
    if isinstance(ddof, bool) or not isinstance(ddof, int | np.integer) or ddof < 0:
        raise ValueError(f"ddof must be a non-negative int, got {ddof!r}")
    if count == 1:
        return 0.0  # a single value has no spread (K = 2 equiangularity), whatever ddof
    if ddof >= count:
        raise ValueError(f"ddof={ddof} needs more than {ddof} values, got {count}")
    return float(np.sqrt(max(m2, 0.0) / (count - ddof)))


def _spread(values: np.ndarray, ddof: int) -> float:
    mean = values.mean() if values.size else 0.0
    return _spread_from_moments(values.size, float(((values - mean) ** 2).sum()), ddof)


# Entries of one row tile of a K x K matrix (32 MB of float64): the metrics never form K x K at once.
_TILE_ENTRIES = 1 << 22


def _pair_cosine_tiles(U: np.ndarray, tile_entries: int = _TILE_ENTRIES) -> Iterator[np.ndarray]:
    """The cosines ``u_k . u_l`` of all pairs ``k < l``, in row tiles of ``U U^T`` (about ``tile_entries``
    values each, 32 MB): never the K(K-1)/2 x d pair arrays, nor the whole K x K Gram."""
    K = U.shape[0]
    rows = max(1, tile_entries // max(K, 1))
    for start in range(0, K - 1, rows):
        block = U[start : start + rows] @ U[start + 1 :].T  # row r is class start + r, column c is start + 1 + c
        keep = np.arange(block.shape[1])[None, :] >= np.arange(block.shape[0])[:, None]
        yield block[keep]


def _pair_cosine_moments(U: np.ndarray, shift: float) -> tuple[int, float, float, float]:
    """Over all pairs: count, mean of ``c + shift``, sum of squared deviations (Chan-merged over tiles, so the
    spread of nearly equiangular vectors keeps its digits) and the sum of ``|c + shift|``."""
    if U.shape[0] >= pair_sweeps.ENGINE_MIN_K:
        m = pair_sweeps.unit_pair_sweep(U, shift=shift)["cos"]
        return m.n, m.mean, m.m2, m.abs_sum
    n, mean, m2, abs_sum = 0, 0.0, 0.0, 0.0
    for c in _pair_cosine_tiles(U):
        c = c + shift
        nb, mb = c.size, float(c.mean())
        m2b = float(((c - mb) ** 2).sum())
        delta = mb - mean
        tot = n + nb
        mean += delta * nb / tot
        m2 += m2b + delta * delta * n * nb / tot
        n = tot
        abs_sum += float(np.abs(c).sum())
    return n, mean, m2, abs_sum


def _warn_unattainable(metric_name: str, K: int, d: int, need: int, target: str) -> None:
    if d < need:
        warnings.warn(
            f"{metric_name}: a {target} of K={K} vectors needs d >= {need}, but d={d}; the metric is a "
            f"well-defined distance but cannot reach 0",
            TargetUnattainableWarning,
            stacklevel=3,
        )


#: Entries of one row tile of a K x K Gram (32 MB of float64): the Gram metrics never hold the whole K x K matrix.
_GRAM_TILE_ENTRIES = 1 << 22


def _unit_scaled(V: np.ndarray) -> np.ndarray:
    """``V`` divided by the power of two just above its largest entry (exact; the Gram metrics are scale-free):
    products and squares of the scaled rows are O(1), so features of any float64 magnitude (1e-150 ... 1e150)
    neither overflow nor underflow."""
    return V / pow2_scale(float(np.abs(V).max()))


#: Rows per block of the row-wise passes over K x d arrays (~4 MiB of float64 at d = 768): no K x d temporary.
_BLOCK_ENTRIES = 1 << 19


def _unit_frobenius_distance(A: np.ndarray, B: np.ndarray) -> float:
    """``|| A/||A||_F - B/||B||_F ||_F`` of nonzero ``A``, ``B`` (same shape), on rows divided by a power of two
    near their largest entry (exact: no overflow in the norms), in row blocks: no K x d temporary (the four of
    the whole-array form were the report's largest allocations at a vocabulary's K)."""
    pa = pow2_scale(max(float(A.max()), -float(A.min())))
    pb = pow2_scale(max(float(B.max()), -float(B.min())))
    rows = max(1, _BLOCK_ENTRIES // max(A.shape[1], 1))
    blocks = range(0, A.shape[0], rows)
    na = np.sqrt(sum(float(np.sum(np.square(A[a : a + rows] / pa))) for a in blocks))
    nb = np.sqrt(sum(float(np.sum(np.square(B[a : a + rows] / pb))) for a in blocks))
    total = 0.0
    for a in blocks:
        diff = A[a : a + rows] / pa
        diff /= na
        diff -= B[a : a + rows] / pb / nb
        total += float(np.sum(diff * diff))
    return float(np.sqrt(total))


def _cross_gram_norm(A: np.ndarray, B: np.ndarray) -> float:
    """``||A B^T||_F`` of O(1)-scaled rows, summed over row tiles (never the K x K product at once)."""
    rows = max(1, _GRAM_TILE_ENTRIES // A.shape[0])
    return float(np.sqrt(sum(float(np.sum((A[a : a + rows] @ B.T) ** 2)) for a in range(0, A.shape[0], rows))))


def _gram_distance(A: np.ndarray, B: np.ndarray, target: Literal["etf", "identity"]) -> float:
    """``|| G / ||G||_F - T ||_F`` for ``G = A B^T`` (K, K) and ``T`` the simplex-ETF Gram
    ``(I - 11^T/K) / sqrt(K-1)`` or ``I / sqrt(K)`` (both of unit norm), in row tiles of ``G`` (O(tile K)
    memory, never K x K for large K) and on rows scaled to unit size (:func:`_unit_scaled`). The caller has
    checked that ``A`` and ``B`` are nonzero."""
    K, d = A.shape
    same = A is B
    A = _unit_scaled(A)
    B = A if same else _unit_scaled(B)
    if target == "etf":
        diag, off = 1.0 / np.sqrt(K - 1), -1.0 / (K * np.sqrt(K - 1))  # T = diag I + off 11^T
    else:
        diag, off = 1.0 / np.sqrt(K), 0.0
    if same and d < K and K >= pair_sweeps.ENGINE_MIN_K:
        # ||G/g - T||^2 = 2 - 2 <G, T>/g (both of unit norm) with <G, T> = diag tr G + off ||1^T A||^2 and
        # g = ||A^T A||_F: O(K d^2), no K x K tile. The subtraction keeps >= 12 digits while the result is
        # >= 1e-3 (always when d << K: the minimum is then sqrt(2 - 2 sqrt(d/(K-1))) for the ETF); else the tiles
        g = float(np.linalg.norm(A.T @ A))
        col = A.sum(axis=0)
        r2 = 2.0 - 2.0 * (diag * float(np.einsum("kd,kd->", A, A)) + off * float(col @ col)) / g
        if r2 >= 1e-3:
            return float(np.sqrt(r2))
    rows = max(1, _GRAM_TILE_ENTRIES // K)
    if rows >= K:
        G = A @ B.T
        g = float(np.linalg.norm(G))
        tiles: Iterator[tuple[int, np.ndarray]] = iter([(0, G)])
    else:
        # ||A A^T||_F = ||A^T A||_F (d x d, d < K here); a cross Gram needs one extra pass over the tiles
        g = float(np.linalg.norm(A.T @ A)) if same and d < K else _cross_gram_norm(A, B)
        tiles = ((a, A[a : a + rows] @ B.T) for a in range(0, K, rows))
    total = 0.0
    for a, block in tiles:
        block = block / g - off
        idx = np.arange(block.shape[0])
        block[idx, a + idx] -= diag
        total += float(np.sum(block * block))
    return float(np.sqrt(total))


# ---------------------------------------------------------------------------------------------- PNAS NC2
@metric("equinorm", "lower", "[Han et al. 2022, Fig. 3] / [Papyan et al. 2020] (NC2 equinorm)")
def equinorm(vectors_or_stats: StatsLike | Any, ddof: int = 1, *, weighting: Weighting = "balanced") -> float:
    r"""``std_k(||v_k||) / mean_k(||v_k||)`` (coefficient of variation of the norms).

    .. math::

        \mathrm{equinorm} = \frac{\operatorname{std}_k \lVert v_k \rVert}{\operatorname{mean}_k \lVert v_k \rVert}

    where :math:`v_k = \mu_k - \mu_G` (class means about their mean) or the classifier's rows :math:`w_k`.

    Parameters
    ----------
    vectors_or_stats : ClassStats or array_like, shape (K, d)
        A ClassStats (``v_k = mu_k - mu_G``, centred about ``global_mean(weighting)``) or a ``(K, d)`` array used
        as given (classifier rows ``w_k``: not centred, bias excluded, as in [Han et al. 2022]).
    ddof : int, default 1
        Delta degrees of freedom of the standard deviation: 1 is ``torch.std`` (the reference Colab of
        [Han et al. 2022]), 0 the population std (numpy's default).
    weighting : {"balanced", "empirical"}, default "balanced"
        The global mean of a ClassStats input (ignored for arrays).

    Returns
    -------
    float
        The coefficient of variation, >= 0, lower is more collapsed (0 iff all norms are equal); nan with
        :class:`DegenerateMetricWarning` when every norm is zero.

    See Also
    --------
    equiangularity, max_angle : the angle statistics of the same vectors.

    Examples
    --------
    >>> from nclab.geometry import simplex_etf
    >>> round(equinorm(3.0 * simplex_etf(4, 3)), 12)
    0.0
    >>> equinorm(np.array([[1.0, 0.0], [0.0, 3.0]]))  # norms 1 and 3: std sqrt(2) (ddof=1) over mean 2
    0.7071067811865476
    """
    V, scale = _vectors(vectors_or_stats, center=is_stats(vectors_or_stats), weighting=weighting)
    norms = row_norms(V)
    if zero_rows(V, scale).size == V.shape[0]:
        return degenerate("equinorm", "every vector has zero norm")
    return _spread(norms / float(norms.mean()), ddof)  # relative norms: no overflow in the squared deviations


@metric("equiangularity", "lower", "[Han et al. 2022, Fig. 4] / [Papyan et al. 2020] (NC2 equiangularity)")
def equiangularity(vectors_or_stats: StatsLike | Any, ddof: int = 1, *, weighting: Weighting = "balanced") -> float:
    r"""Standard deviation of the off-diagonal cosines ``cos(v_k, v_l)``, ``k != l``.

    .. math::

        \mathrm{equiangularity} = \operatorname{std}_{k \neq l} \cos(v_k, v_l)

        \cos(v_k, v_l) = \frac{v_k^\top v_l}{\lVert v_k \rVert \lVert v_l \rVert}

    over the :math:`K (K - 1)` ordered pairs, :math:`v_k` as in :func:`equinorm`.

    The K(K-1) entries count each pair twice, as ``torch.std`` over the off-diagonal of the cosine matrix in the
    [Han et al. 2022] reference code.

    Parameters
    ----------
    vectors_or_stats : ClassStats or array_like, shape (K, d)
        A ClassStats (``v_k = mu_k - mu_G``, centred about ``global_mean(weighting)``) or a ``(K, d)`` array used
        as given (classifier rows ``w_k``: not centred, bias excluded, as in [Han et al. 2022]).
    ddof : int, default 1
        Delta degrees of freedom of the standard deviation: 1 is ``torch.std`` (the reference Colab of
        [Han et al. 2022]), 0 the population std (numpy's default).
    weighting : {"balanced", "empirical"}, default "balanced"
        The global mean of a ClassStats input (ignored for arrays).

    Returns
    -------
    float
        The spread of the cosines, >= 0, lower is more collapsed. K = 2 (a single pair) returns ``0.0``: one
        angle has no spread. A zero-norm vector makes its cosines undefined: nan with
        :class:`DegenerateMetricWarning`.

    See Also
    --------
    equinorm, max_angle

    Examples
    --------
    >>> from nclab.geometry import simplex_etf
    >>> round(equiangularity(simplex_etf(5, 4)), 12)  # every cosine is -1/4
    0.0
    """
    moments = _sweep_moments(vectors_or_stats, weighting)
    if moments is None:
        V, scale = _vectors(vectors_or_stats, center=is_stats(vectors_or_stats), weighting=weighting)
        U = unit_directions(V, scale, "equiangularity")
        if U is None:
            return float("nan")
        # shift by the simplex-ETF cosine so that nearly equiangular vectors keep the digits of their spread
        moments = _etf_pair_moments(vectors_or_stats, U, weighting)
    count, _, m2, _ = moments
    # the K(K-1) off-diagonal entries of the cosine matrix are each unordered pair twice (torch.std over the
    # off-diagonal entries in the reference code of [Han et al. 2022]): same mean, twice the count and the squares
    return _spread_from_moments(2 * count, 2 * m2, ddof)


@metric("max_angle", "lower", "[Han et al. 2022, Fig. 5] / [Papyan et al. 2020] (NC2 maximal angle, shifted cosine)")
def max_angle(vectors_or_stats: StatsLike | Any, *, weighting: Weighting = "balanced") -> float:
    r"""``mean_{k<l} |cos(v_k, v_l) + 1/(K-1)|`` (the mean over ordered pairs ``k != l`` is the same number).

    .. math::

        \mathrm{max\_angle} = \frac{2}{K (K - 1)} \sum_{k < l} \left| \cos(v_k, v_l) + \frac{1}{K - 1} \right|

    the mean distance of the cosines from the simplex ETF's :math:`-1/(K - 1)`.

    Parameters
    ----------
    vectors_or_stats : ClassStats or array_like, shape (K, d)
        A ClassStats (``v_k = mu_k - mu_G``, centred about ``global_mean(weighting)``) or a ``(K, d)`` array used
        as given (classifier rows ``w_k``: not centred, bias excluded, as in [Han et al. 2022]).
    weighting : {"balanced", "empirical"}, default "balanced"
        The global mean of a ClassStats input (ignored for arrays).

    Returns
    -------
    float
        >= 0, lower is more collapsed; 0 iff the vectors are pairwise at the simplex-ETF angle, which needs
        ``d >= K - 1`` (:class:`TargetUnattainableWarning` otherwise). A zero-norm vector: nan with
        :class:`DegenerateMetricWarning`.

    See Also
    --------
    equinorm, equiangularity

    Examples
    --------
    >>> round(max_angle(np.eye(3)), 12)  # cosines 0 instead of -1/2
    0.5
    """
    V, scale = _vectors(vectors_or_stats, center=is_stats(vectors_or_stats), weighting=weighting)
    K, d = V.shape
    _warn_unattainable("max_angle", K, d, K - 1, "simplex ETF")
    moments = _sweep_moments(vectors_or_stats, weighting)
    if moments is None:
        U = unit_directions(V, scale, "max_angle")
        if U is None:
            return float("nan")
        moments = _etf_pair_moments(vectors_or_stats, U, weighting)
    count, _, _, abs_sum = moments
    return abs_sum / count


def angle_statistics(
    vectors_or_stats: StatsLike | Any, ddof: int = 1, *, weighting: Weighting = "balanced"
) -> dict[str, float]:
    """:func:`equiangularity` and :func:`max_angle` of the same vectors from one pass over their pairs (the
    report's classifier rows: one tiled sweep at vocabulary scale instead of two).

    Parameters
    ----------
    vectors_or_stats : ClassStats or array_like, shape (K, d)
        As :func:`equiangularity`.
    ddof : int, default 1
        As :func:`equiangularity`.
    weighting : {"balanced", "empirical"}, default "balanced"
        The global mean of a ClassStats input.

    Returns
    -------
    dict
        ``{"equiangularity": float, "max_angle": float}``, the numbers of the two functions.

    Examples
    --------
    >>> out = angle_statistics(np.eye(3))
    >>> round(out["max_angle"], 12), round(out["equiangularity"], 12)
    (0.5, 0.0)
    """
    V, scale = _vectors(vectors_or_stats, center=is_stats(vectors_or_stats), weighting=weighting)
    K, d = V.shape
    _warn_unattainable("max_angle", K, d, K - 1, "simplex ETF")
    U = unit_directions(V, scale, "equiangularity")
    if U is None:
        return {"equiangularity": float("nan"), "max_angle": float("nan")}
    count, _, m2, abs_sum = _etf_pair_moments(vectors_or_stats, U, weighting)
    return {"equiangularity": _spread_from_moments(2 * count, 2 * m2, ddof), "max_angle": abs_sum / count}


# ---------------------------------------------------------------------------------------------- Gram forms
@metric("etf_gram_error", "lower", "002 PFC2 eq. (8) / [Tirer & Bruna 2022] NC2_ETF eq. (27)")
def etf_gram_error(X: StatsLike | Any, center: bool = True, *, weighting: Weighting = "balanced") -> float:
    r"""``|| G / ||G||_F - (I - 11^T/K) / sqrt(K-1) ||_F`` with ``G = X X^T``, ``(K, K)``.

    .. math::

        \mathrm{ETF\ error} = \left\lVert \frac{G}{\lVert G \rVert_F}
        - \frac{I_K - \frac{1}{K} \mathbf{1} \mathbf{1}^\top}{\sqrt{K - 1}} \right\rVert_F

        G = X X^\top

    where the rows of :math:`X` are the vectors (centred about their mean with ``center=True``) and
    :math:`\lVert \cdot \rVert_F` is the Frobenius norm.

    Registered also as ``pfc2`` (PFC2 of [Wang et al. 2024] = NC2_ETF of [Tirer & Bruna 2022]).

    Parameters
    ----------
    X : ClassStats or array_like, shape (K, d)
        Rows (numpy or torch), or a ClassStats (its class means).
    center : bool, default True
        Subtract the mean row first (for ClassStats: ``global_mean(weighting)``), which is PFC2 / NC2_ETF; it is
        then invariant to rotation, scaling and translation. ``False`` measures the uncentred Gram.
    weighting : {"balanced", "empirical"}, default "balanced"
        The global mean of a ClassStats input.

    Returns
    -------
    float
        Lower is more collapsed; centred, in ``[0, sqrt(2 (1 - 1/sqrt(K-1)))]``, 0 iff the centred rows form a
        simplex ETF. Uncentred, an orthogonal frame gives ``sqrt(2 - 2 sqrt((K-1)/K))``. ``d < K - 1``: defined,
        minimum ``sqrt(2 - 2 sqrt(d/(K-1)))`` when centred, with :class:`TargetUnattainableWarning`. ``G = 0``
        (all rows zero, e.g. identical class means when centred): nan with :class:`DegenerateMetricWarning`.

    See Also
    --------
    etf_gram_error_spectral : the same number from the singular values.
    orthogonal_frame_error : the distance to an orthogonal frame.

    Examples
    --------
    >>> from nclab.geometry import simplex_etf
    >>> round(etf_gram_error(5.0 * simplex_etf(4, 6) + 1.0), 12)  # scaled and translated ETF
    0.0
    >>> round(etf_gram_error(np.eye(3), center=False), 6)  # sqrt(2 - 2 sqrt(2/3))
    0.605811
    """
    V, scale = _vectors(X, center=center, weighting=weighting)
    K, d = V.shape
    _warn_unattainable("etf_gram_error", K, d, K - 1, "simplex ETF")
    if zero_rows(V, scale).size == K:
        return degenerate("etf_gram_error", "every (centred) row is zero, so G = 0 has no direction")
    return _gram_distance(V, V, "etf")


REGISTRY["pfc2"] = dataclasses.replace(REGISTRY["etf_gram_error"], name="pfc2")
pfc2 = etf_gram_error  # [Wang et al. 2024] name: the same function, not a copy


def etf_gram_error_from_eigvals(eigvals: Any, K: int) -> float:
    """Spectral closed form of the centred :func:`etf_gram_error` (derived from [Wang et al. 2024, eq. (8)]).

    ``eigvals``: the eigenvalues of the centred Gram ``G`` (= squared singular values of the centred means),
    or of ``Sigma_B`` (any positive multiple: the form is scale-free); at most ``K - 1`` are nonzero. With
    ``s`` the top ``K - 1`` of them (zero-padded when fewer are given),

        PFC2 = sqrt(2 - 2 sum(s) / (sqrt(K-1) ||s||_2)) = || s/||s||_2 - 1_{K-1}/sqrt(K-1) ||_2,

    and the second expression is evaluated (no cancellation near 0). Centring makes ``G (I - 11^T/K) = G``,
    which is what reduces the Frobenius inner product with the ETF Gram to a trace.
    """
    if isinstance(K, bool) or not isinstance(K, int | np.integer) or K < 2:
        raise ValueError(f"K must be an int >= 2, got {K!r}")
    lam = np.sort(np.asarray(eigvals, dtype=np.float64).ravel())[::-1]
    if not np.all(np.isfinite(lam)):
        raise ValueError("eigvals contain NaN or inf")
    if lam.size and lam[0] > 0 and np.any(lam < -1e-10 * lam[0]):
        raise ValueError("eigvals must be those of a PSD matrix (got clearly negative values)")
    s = np.zeros(K - 1)
    top = np.clip(lam[: K - 1], 0.0, None)
    s[: top.size] = top
    if s.size and s[0] > 0:
        s = s / pow2_scale(float(s[0]))  # scale-free form: no underflow or overflow in the norm
    norm = np.linalg.norm(s)
    if norm == 0:
        return degenerate("etf_gram_error", "all eigenvalues are zero, so G = 0 has no direction")
    return float(np.linalg.norm(s / norm - 1.0 / np.sqrt(K - 1)))


def etf_gram_error_spectral(X: StatsLike | Any, *, weighting: Weighting = "balanced") -> float:
    """The centred :func:`etf_gram_error` from the singular values of the centred rows (the [Wang et al. 2024]
    closed form).

    Agrees with ``etf_gram_error(X, center=True)`` to rounding (a test oracle); see
    :func:`etf_gram_error_from_eigvals` for the formula.

    Parameters
    ----------
    X : ClassStats or array_like, shape (K, d)
        Rows (numpy or torch), or a ClassStats (its class means).
    weighting : {"balanced", "empirical"}, default "balanced"
        The global mean of a ClassStats input.

    Returns
    -------
    float
        As :func:`etf_gram_error` with ``center=True``; nan with :class:`DegenerateMetricWarning` when every
        centred row is zero.

    See Also
    --------
    etf_gram_error, etf_gram_error_from_eigvals

    Examples
    --------
    >>> X = np.array([[1.0, 0.0], [0.0, 2.0], [3.0, 1.0]])
    >>> bool(np.isclose(etf_gram_error_spectral(X), etf_gram_error(X)))
    True
    """
    V, scale = _vectors(X, center=True, weighting=weighting)
    K, d = V.shape
    _warn_unattainable("etf_gram_error", K, d, K - 1, "simplex ETF")
    if zero_rows(V, scale).size == K:
        return degenerate("etf_gram_error", "every centred row is zero, so G = 0 has no direction")
    sv = np.linalg.svd(_unit_scaled(V), compute_uv=False)
    return etf_gram_error_from_eigvals(sv**2, K)


@metric("orthogonal_frame_error", "lower", "001 NC2_OF eq. (27), uncentred means")
def orthogonal_frame_error(X: StatsLike | Any) -> float:
    r"""``|| G / ||G||_F - I / sqrt(K) ||_F``, ``G = X X^T`` of the *uncentred* rows (or ClassStats means).

    .. math::

        \mathrm{OF\ error} = \left\lVert \frac{G}{\lVert G \rVert_F} - \frac{I_K}{\sqrt{K}} \right\rVert_F

        G = X X^\top

    with the uncentred rows of :math:`X`.

    Parameters
    ----------
    X : ClassStats or array_like, shape (K, d)
        Rows (numpy or torch), or a ClassStats (its uncentred class means).

    Returns
    -------
    float
        Lower is more collapsed; 0 iff the rows are orthogonal with equal norms (needs ``d >= K``;
        :class:`TargetUnattainableWarning` otherwise). A simplex ETF with zero mean gives
        ``sqrt(2 - 2 sqrt((K-1)/K))``. All rows zero: nan with :class:`DegenerateMetricWarning`.

    See Also
    --------
    etf_gram_error

    Examples
    --------
    >>> round(orthogonal_frame_error(3.0 * np.eye(4)), 12)
    0.0
    """
    V, scale = _vectors(X, center=False, weighting="balanced")
    K, d = V.shape
    _warn_unattainable("orthogonal_frame_error", K, d, K, "orthogonal frame")
    if zero_rows(V, scale).size == K:
        return degenerate("orthogonal_frame_error", "every row is zero, so G = 0 has no direction")
    return _gram_distance(V, V, "identity")


# ---------------------------------------------------------------------------------------------- NC3
@metric(
    "self_duality",
    "lower",
    "[Han et al. 2022, Fig. 6] (frobenius); [Tirer & Bruna 2022] NC3 (uncentred); public code (gram, cosine)",
    needs=("stats", "W"),
)
def self_duality(
    stats: StatsLike | Any,
    variant: SelfDualityVariant = "frobenius",
    *,
    W: Any,
    center_w: bool = False,
    squared: bool | None = None,
    center_means: bool = True,
    weighting: Weighting = "balanced",
) -> float:
    r"""Distance between the classifier ``W (K, d)`` and the class means ``M (K, d)``.

    .. math::

        \mathrm{NC3} = \left\lVert \frac{W}{\lVert W \rVert_F} - \frac{M}{\lVert M \rVert_F} \right\rVert_F^2
        \quad (\texttt{"frobenius"})

        \frac{1}{K} \sum_{k=1}^{K} \left(1 - \cos(w_k, m_k)\right) \quad (\texttt{"cosine"})

    where :math:`W` is the classifier ``(K, d)`` and :math:`M` has rows :math:`m_k = \mu_k - \mu_G` (``"gram"``: the
    ETF error of :math:`G = W M^\top`, as :func:`etf_gram_error`).

    The bias is never used.

    Parameters
    ----------
    stats : ClassStats or array_like, shape (K, d)
        A ClassStats (its means) or a ``(K, d)`` array of class means.
    variant : {"frobenius", "gram", "cosine"}, default "frobenius"
        ``"frobenius"``: ``|| W/||W||_F - M/||M||_F ||_F^2`` ([Han et al. 2022, Fig. 6]; squared by default,
        ``squared=False`` gives the distance, in ``[0, 2]``, = the [Tirer & Bruna 2022] NC3 with
        ``center_means=False``).
        ``"gram"``: the ETF Gram error of the cross-Gram ``G = W M^T``,
        ``|| G/||G||_F - (I - 11^T/K)/sqrt(K-1) ||_F`` ([neural-collapse (rhubarbwu)], [Neural-Collapse (tding1)],
        [Guiding-Neural-Collapse (evanmarkou)]; unsquared by default). It is 0 only when ``W ∝ M`` *and* ``M`` is
        a simplex ETF: it mixes NC2 into NC3.
        ``"cosine"``: ``mean_k (1 - cos(w_k, m_k))`` (in ``[0, 2]``; per-class directions only, PNAS's
        definition of NC3 before Frobenius normalisation). ``squared`` must be left ``None``.
    W : array_like, shape (K, d)
        Classifier rows (``nn.Linear`` layout).
    center_w : bool, default False
        Subtract the mean row of ``W`` first (MSE fork of tding1/Neural-Collapse).
    squared : bool or None, default None
        Square the distance; None is the variant's default (squared for ``"frobenius"``, not for ``"gram"``).
    center_means : bool, default True
        ``True`` uses ``M = mu_k - mu_G`` ([Han et al. 2022], trained heads with bias); ``False`` the uncentred
        means (the [Tirer & Bruna 2022] NC3, needed at bias-free and regularised-bias optima where ``W ∝``
        uncentred means).
    weighting : {"balanced", "empirical"}, default "balanced"
        The global mean of a ClassStats input.

    Returns
    -------
    float
        Lower is more collapsed: ``"frobenius"`` is 0 iff ``W`` is a positive multiple of ``M``, ``"cosine"`` iff
        each ``w_k`` is a positive multiple of ``m_k``, ``"gram"`` iff ``W M^T`` has the simplex-ETF Gram's shape.
        Zero ``W``, zero (centred) means, or (cosine) any zero row: nan with :class:`DegenerateMetricWarning`.

    Examples
    --------
    >>> from nclab.geometry import simplex_etf
    >>> M = simplex_etf(4, 3)
    >>> round(self_duality(M, W=2.0 * M), 12)
    0.0
    >>> round(self_duality(M, W=-M, squared=False), 12)  # opposite directions: the largest distance
    2.0
    """
    check_choice(variant, SelfDualityVariant, name="variant")
    center_w = check_bool(center_w, name="center_w")
    center_means = check_bool(center_means, name="center_means")
    if squared is not None and not isinstance(squared, bool):
        raise TypeError(f"squared must be a bool or None, got {squared!r}")
    if variant == "cosine" and squared is not None:
        raise ValueError("squared applies to the 'frobenius' and 'gram' variants only")
    M, m_scale = _vectors(stats, center=center_means, weighting=weighting, name="means")
    Wr = as_rows(W, name="W")
    if Wr.shape != M.shape:
        raise ValueError(f"W has shape {Wr.shape}, but the class means have shape {M.shape}")
    w_scale = float(row_norms(Wr).max())
    if center_w:
        Wr = Wr - Wr.mean(axis=0)
    name = f"self_duality[{variant}]"
    if variant == "cosine":
        Uw = unit_directions(Wr, w_scale, name)
        Um = unit_directions(M, m_scale, name) if Uw is not None else None
        if Uw is None or Um is None:
            return float("nan")
        return float(np.mean(1.0 - np.einsum("kd,kd->k", Uw, Um)))
    if zero_rows(Wr, w_scale).size == Wr.shape[0]:
        return degenerate(name, "W is zero")
    if zero_rows(M, m_scale).size == M.shape[0]:
        return degenerate(name, "the (centred) class means are all zero")
    if variant == "frobenius":
        dist = _unit_frobenius_distance(Wr, M)
        return dist**2 if (squared is None or squared) else dist
    Ws, Ms = _unit_scaled(Wr), _unit_scaled(M)
    if _cross_gram_norm(Ws, Ms) <= ZERO_RTOL * np.linalg.norm(Ws) * np.linalg.norm(Ms):
        return degenerate(name, "the cross-Gram W M^T is zero (W orthogonal to every class mean)")
    dist = _gram_distance(Ws, Ms, "etf")
    return dist**2 if squared else dist


# ---------------------------------------------------------------------------------------------- NC4
@metric(
    "classifier_accuracy_on_means",
    "higher",
    "NC4 [Papyan et al. 2020] at the class means: argmax_j(w_j . mu_k + b_j) = k; bias included "
    "([Han et al. 2022], [nc-toolbox (felixsh)], [NC notebooks (Han, Papyan & Donoho)])",
    needs=("stats", "W"),
)
def classifier_accuracy_on_means(stats: StatsLike | Any, *, W: Any, b: Any = None) -> float:
    r"""Fraction of classes whose mean the affine classifier assigns to its own class:
    ``(1/K) #{k : argmax_j (w_j . mu_k + b_j) = k}``.

    .. math::

        \frac{1}{K} \#\left\{k : \arg\max_j \left(w_j^\top \mu_k + b_j\right) = k\right\}

    The nearest-class-mean rule classifies every class mean correctly, so this is the agreement of the
    classifier's decision ``argmax(W h + b)`` with NCC at the points ``h = mu_k`` (NC4 of [Papyan et al. 2020],
    evaluated where the class's features collapse under NC1). It needs no pass over the samples;
    :class:`~nclab.metrics.NCCAccumulator` measures the same agreement sample by sample. Memory: row tiles of the
    K x K logits (32 MB each), never the whole matrix.

    Parameters
    ----------
    stats : ClassStats or array_like, shape (K, d)
        Its uncentred class means (the classifier acts on raw features), or the means themselves.
    W : array_like, shape (K, d)
        Classifier rows (``nn.Linear`` layout).
    b : array_like, shape (K,), optional
        Bias; None for a bias-free head. It matters: with features far from the origin, ``W mu_G`` is a
        class-dependent offset that only the bias cancels (``b = -W mu_G`` for ``W`` proportional to the
        centred means).

    Returns
    -------
    float
        In [0, 1], higher is more collapsed; 1 at collapse (K = 2 with an exactly collapsed, self-dual classifier
        gives 1). Ties go to the lowest class index (as ``torch.argmax`` in the NCC accumulator).

    Examples
    --------
    >>> M = np.array([[1.0, 0.0], [-1.0, 0.0]]) + 10.0
    >>> classifier_accuracy_on_means(M, W=M - M.mean(0), b=-(M - M.mean(0)) @ M.mean(0))
    1.0
    >>> classifier_accuracy_on_means(M, W=M - M.mean(0), b=[0.0, 100.0])  # a bias that overrides class 0
    0.5
    """
    M = moments_of(stats).class_means(copy=False) if is_stats(stats) else as_rows(stats, name="means")
    Wr = as_rows(W, name="W")
    if Wr.shape != M.shape:
        raise ValueError(f"W has shape {Wr.shape}, but the class means have shape {M.shape}")
    K: int = M.shape[0]
    bias = None
    if b is not None:
        bias = check_finite(b, name="b")
        if bias.shape != (K,):
            raise ValueError(f"b must have shape (K,) = ({K},), got {bias.shape}")
    if K >= pair_sweeps.ENGINE_MIN_K:  # float32 tiles on the statistics' device, near-ties decided again in float64
        dev = pair_sweeps.stats_device(stats) if is_stats(stats) else None
        return pair_sweeps.decisions_at_means(M, Wr, bias, device=dev) / K
    # row tiles of the K x K logits (about _TILE_ENTRIES each; whole at K = 20,000 they were 3.2 GB, twice with
    # the bias): each class's decision depends on its own row only
    rows = max(1, _TILE_ENTRIES // K)
    hits = 0
    for start in range(0, K, rows):
        logits = M[start : start + rows] @ Wr.T
        if bias is not None:
            logits += bias
        hits += int(np.count_nonzero(np.argmax(logits, axis=1) == np.arange(start, start + logits.shape[0])))
        del logits  # before the next tile exists
    return hits / K
