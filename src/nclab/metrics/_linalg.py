"""The one pseudo-inverse policy of nclab, for symmetric positive semi-definite matrices.

Policy (``docs/conventions.md``, row "pseudo-inverse"): symmetric eigendecomposition in float64; eigenvalues
``<= rtol * lambda_max`` count as zero (``rtol`` = 1e-12 by default: the statistics are float64); the kept
eigenvalues are further capped at ``max_rank`` (e.g. ``min(d, K - 1)`` for a centred Sigma_B), keeping the
largest. [Xu & Liu 2023] (Sec. 4) shows why both the default ``np.linalg.pinv`` threshold and a bare top-(K-1)
truncation are unreliable for Sigma_B; the tolerance guard is what makes exactly collapsed data give 0.

This module is also the one place of the "zero" tolerances of the metrics (``SB_ZERO_RTOL``, ``ZERO_RTOL``) and
of the feature scale they are relative to (:func:`feature_scale_sq`): every test of "Sigma_B = 0" or "two class
means coincide" compares with the second moment of the raw features, so the decision does not change when the
features are scaled, and class means at the origin are judged against the spread, not against their own norm.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

import numpy as np
from scipy.linalg import lapack

from nclab.stats.class_stats import ClassStats
from nclab.stats.moments import ClassMoments, MomentKey, Weighting, check_weighting

DEFAULT_RTOL = 1e-12

# Sigma_B counts as zero when Tr Sigma_B <= SB_ZERO_RTOL * feature_scale_sq(stats): a class mean is computed to a
# few ulps of the raw features' magnitude, so equal class means leave roundoff of that size (e.g. Tr Sigma_B =
# 1e-32 for features of norm 1, also when the means are at the origin), which must not read as a separation.
SB_ZERO_RTOL = (8 * np.finfo(np.float64).eps) ** 2

# Squared feature norms below this (2^20 times the smallest normal float64, ~2e-302) have lost digits to
# underflow: the metrics built on second moments refuse them (features below ~1e-151 in norm).
MIN_FEATURE_SCALE_SQ = float(np.finfo(np.float64).tiny) * 2.0**20

ZERO_RTOL = 1e-12  # a (centred) vector is "zero" below ZERO_RTOL * (largest norm of the uncentred input)

RankPolicy = int | Literal["numerical"] | None


@dataclass(frozen=True)
class PsdPinv:
    """The pseudo-inverse of a symmetric PSD matrix ``A (d, d)`` as :func:`psd_pinv` returns it.

    Parameters
    ----------
    rank : int
        Number of eigenvalues kept (inverted).
    eigvals : numpy.ndarray, shape (d,)
        All eigenvalues of ``A``, descending, clipped at 0.
    basis : numpy.ndarray, shape (d, rank)
        The kept eigenvectors (columns).

    Notes
    -----
    ``pinv`` (d, d) is computed on first access: many metrics need only the basis and eigenvalues,
    ``Tr(A^+ B) = sum_i v_i^T B v_i / lambda_i`` (:meth:`trace_with`).

    Examples
    --------
    >>> import numpy as np
    >>> p = psd_pinv(np.diag([4.0, 2.0, 0.0]))
    >>> p.rank, p.pinv.diagonal().tolist(), p.trace_with(np.eye(3))
    (2, [0.25, 0.5, 0.0], 0.75)
    """

    rank: int
    eigvals: np.ndarray
    basis: np.ndarray

    @cached_property
    def pinv(self) -> np.ndarray:
        pinv: np.ndarray = (self.basis / self.eigvals[: self.rank]) @ self.basis.T
        return pinv

    def trace_with(self, B: np.ndarray) -> float:
        """``Tr(A^+ B)`` for a symmetric ``B: (d, d)``, without forming ``A^+``."""
        V = self.basis
        return float(np.einsum("ij,ij->j", V, B @ V) @ (1.0 / self.eigvals[: self.rank]))


def check_rtol(rtol: float, name: str = "rtol") -> float:
    """``rtol`` as a float in ``[0, 1)``: a relative eigenvalue tolerance >= 1 drops every eigenvalue (the
    pseudo-inverse would be 0 and the metric a meaningless inf or 1), so it is refused, naming the keyword."""
    if isinstance(rtol, bool) or not isinstance(rtol, int | float | np.integer | np.floating):
        raise TypeError(f"{name} must be a float in [0, 1), got {rtol!r}")
    if not 0.0 <= float(rtol) < 1.0:
        raise ValueError(f"{name} must be in [0, 1) (a relative eigenvalue tolerance), got {rtol!r}")
    return float(rtol)


def pow2_scale(x: float) -> float:
    """The power of two ``2**e`` with ``x / 2**e`` in ``[0.5, 1)`` (1.0 for ``x = 0`` or non-finite ``x``):
    dividing by it is exact, so rescaling features to O(1) before forming squares keeps every digit, also of
    differences of nearly equal means."""
    # math, not numpy: this runs a few dozen times per report on scalars, where numpy's ufunc overhead dominates
    if not (math.isfinite(x) and x > 0):
        return 1.0
    e = math.frexp(x)[1]
    return math.ldexp(1.0, e) if e < 1024 else math.inf  # 2**1024 overflows (numpy's ldexp gave inf too)


def moments_of(stats: ClassStats | ClassMoments) -> ClassMoments:
    """The view of ``stats`` that the metrics read and cache in: ``stats`` itself when it is a
    :class:`~nclab.stats.ClassMoments`, else ``stats.moments()`` (the cache a ClassStats keeps for itself)."""
    return stats if isinstance(stats, ClassMoments) else stats.moments()


def feature_scale_sq(stats: ClassStats | ClassMoments) -> float:
    """``max_k (||mu_k||^2 + var_k)``: the largest mean squared norm of one class's raw features (``var_k =
    class_ss_k / n_k``), the scale every "zero" decision about class means is relative to. A class mean carries
    roundoff of a few ulps of its class's raw features, whatever the mean itself is (means at the origin
    included). Needs only the O(K d) state (``track="light"`` too). Cached in the view ``stats``.

    Raises ``ValueError`` when the features are nonzero but their squares underflow (scale below
    ``sqrt(MIN_FEATURE_SCALE_SQ)``, about 1e-151): the documented refusal instead of a wrong value."""

    def compute() -> float:
        mu = stats.means
        second = float(np.max(np.einsum("kd,kd->k", mu, mu) + stats.class_ss / stats.counts))
        if second < MIN_FEATURE_SCALE_SQ and np.any(mu != 0):
            # squares of features this small are subnormal or 0 in float64: variances and traces have lost
            # their digits, and every ratio of them would be a confident wrong number
            raise ValueError(
                f"features are too small for float64 second moments (largest class mean norm "
                f"{float(np.max(np.abs(mu))):.3g}); multiply them by a constant (the metrics are scale-invariant)"
            )
        return second

    stats = moments_of(stats)
    return stats.memo(MomentKey.FEATURE_SCALE_SQ, compute=compute)


def sym_eig(A: np.ndarray, *, symmetric: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues (descending) and eigenvectors (columns) of the symmetric part of ``A: (d, d)``, float64.

    ``symmetric=True``: ``A`` is known to be exactly symmetric (ClassStats' cached matrices), skip forming
    ``(A + A^T) / 2``."""
    A = np.asarray(A, dtype=np.float64)
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"expected a square matrix, got shape {A.shape}")
    if not np.all(np.isfinite(A)):
        raise ValueError("matrix contains NaN or inf")
    w, V = np.linalg.eigh(A if symmetric else (A + A.T) / 2)
    return w[::-1], V[:, ::-1]


def _between_eig(stats: ClassMoments, weighting: Weighting) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues ``(d,)`` (descending) and the ``min(K, d)`` leading eigenvectors ``(d, k)`` of
    ``Sigma_B = A^T A`` from the thin SVD of its K x d factor ``A`` (``ClassStats.between_factor``): O(K^2 d)
    instead of the O(d^3) of a d x d eigendecomposition, and the eigenvalues are the squared singular values,
    accurate far below ``eps * lambda_max`` (a d x d eigh resolves them only to that level). Every eigenvector of
    a nonzero eigenvalue is among them, so the pseudo-inverse needs no more."""
    A = stats.between_factor(weighting)
    if not np.all(np.isfinite(A)):
        raise ValueError("class means contain NaN or inf")
    _, s, Vt = np.linalg.svd(A, full_matrices=False)
    lam = np.zeros(stats.d)
    lam[: s.size] = s * s
    return lam, Vt.T


def stats_between_eig(
    stats: ClassStats | ClassMoments, weighting: Weighting = "balanced"
) -> tuple[np.ndarray, np.ndarray]:
    """Sigma_B's eigenvalues ``(d,)`` and leading ``min(K, d)`` eigenvectors ``(d, k)`` (:func:`_between_eig`),
    once per state, cached in the view ``stats``; enough for ``psd_pinv`` (its rank never exceeds k)."""
    check_weighting(weighting)
    stats = moments_of(stats)
    return stats.memo(MomentKey.BETWEEN_EIG, weighting, compute=lambda: _between_eig(stats, weighting))


def _complete_basis(V: np.ndarray) -> np.ndarray:
    """``[V, V_perp]`` ``(d, d)`` for orthonormal columns ``V (d, k)``: a complete QR gives the orthogonal
    complement to working precision (``within_class_split`` sums Sigma_W over it)."""
    if V.shape[1] == V.shape[0]:
        return V
    Q = np.linalg.qr(V, mode="complete")[0]  # Q[:, :k] spans the columns of V; Q[:, k:] their complement
    return np.hstack([V, Q[:, V.shape[1] :]])


def stats_eig(
    stats: ClassStats | ClassMoments, which: str, weighting: Weighting = "balanced"
) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues (descending) and eigenvectors (columns) of ``stats.sigma_w()``, ``stats.sigma_t()`` or
    ``stats.sigma_b(weighting)`` (the latter from the SVD of its K x d factor, :func:`_between_eig`), computed
    once per state, cached in the view ``stats`` (:class:`~nclab.stats.ClassMoments`): the metrics of one report
    share each decomposition."""
    if which not in ("within", "total", "between"):
        raise ValueError(f"which must be one of ['between', 'total', 'within'], got {which!r}")
    stats = moments_of(stats)
    if which == "between":

        def complete() -> tuple[np.ndarray, np.ndarray]:
            lam, V = stats_between_eig(stats, weighting)
            return lam, _complete_basis(V)

        return stats.memo(MomentKey.EIG, which, weighting, compute=complete)
    return stats.memo(MomentKey.EIG, which, None, compute=lambda: sym_eig(_stats_matrix(stats, which), symmetric=True))


def _stats_matrix(stats: ClassMoments, which: str) -> np.ndarray:
    """The cached, exactly symmetric Sigma_W or Sigma_T of ``stats`` (read-only, no copy)."""
    return stats.sigma_w(copy=False) if which == "within" else stats.sigma_t(copy=False)


def stats_eigvals(stats: ClassStats | ClassMoments, which: str, weighting: Weighting = "balanced") -> np.ndarray:
    """Eigenvalues (descending) of the matrix of :func:`stats_eig`; reuses a cached full decomposition, else
    computes (and caches) the eigenvalues alone, which is about twice as cheap."""
    if which == "between":  # the K x d SVD is cheap: always with its vectors, shared with the pseudo-inverse
        return stats_between_eig(stats, weighting)[0]
    if which not in ("within", "total"):
        raise ValueError(f"which must be one of ['between', 'total', 'within'], got {which!r}")
    stats = moments_of(stats)
    full = stats.peek(MomentKey.EIG, which, None)
    if full is not None:
        w: np.ndarray = full[0]
        return w
    compute = lambda: np.linalg.eigvalsh(_stats_matrix(stats, which))[::-1].copy()  # noqa: E731
    return stats.memo(MomentKey.EIGVALS, which, compute=compute)


def psd_cholesky(A: np.ndarray, rtol: float = DEFAULT_RTOL) -> tuple[np.ndarray, float] | None:
    """The lower Cholesky factor of the symmetric PSD ``A: (d, d)`` and LAPACK's estimate of its reciprocal
    condition number, or ``None`` when ``A`` is numerically singular by this module's policy.

    Why the estimate and not only a failed factorisation: rounding often lets the Cholesky of an exactly singular
    PSD matrix run to the end on a pivot of roundoff size (seen with OpenBLAS 0.3.31), and a solve with that factor
    returns a huge wrong answer. ``cond_1`` is within a factor d of ``cond_2 = lambda_max / lambda_min``, so the
    test matches the pseudo-inverse's eigenvalue cut to that factor at a fraction of an eigendecomposition's cost.

    Parameters
    ----------
    A : numpy.ndarray, shape (d, d)
        Symmetric positive semi-definite, float64.
    rtol : float, default 1e-12
        ``rcond <= rtol`` counts as singular.

    Returns
    -------
    tuple of (numpy.ndarray (d, d), float) or None
        ``(L, rcond)``: ``L`` lower triangular with ``L L^T = A``, ``rcond`` the estimate of ``1 / cond_1(A)``
        (O(d^2) after the O(d^3 / 3) factorisation); ``None`` when the factorisation fails or ``rcond <= rtol``.

    Examples
    --------
    >>> import numpy as np
    >>> L, rcond = psd_cholesky(np.diag([4.0, 1.0]))
    >>> L.tolist(), rcond
    ([[2.0, 0.0], [0.0, 1.0]], 0.25)
    >>> print(psd_cholesky(np.diag([1.0, 1e-20])))  # positive definite in float64, singular by the policy
    None
    """
    L, info = lapack.dpotrf(A, lower=1, clean=1)
    if info != 0:
        return None
    rcond, info = lapack.dpocon(L, float(np.abs(A).sum(axis=0).max()), uplo="L")
    if info != 0 or not rcond > rtol:
        return None
    return L, float(rcond)


def psd_pinv(
    A: np.ndarray | None = None,
    *,
    rank: RankPolicy = None,
    max_rank: int | None = None,
    rtol: float = DEFAULT_RTOL,
    eig: tuple[np.ndarray, np.ndarray] | None = None,
) -> PsdPinv:
    """Pseudo-inverse of a symmetric PSD matrix ``A: (d, d)`` (or of its eigendecomposition ``eig``).

    Eigenvalues ``<= rtol * lambda_max`` count as zero (the policy of this module).

    Parameters
    ----------
    A : numpy.ndarray, shape (d, d), optional
        The matrix (its symmetric part is used); give exactly one of ``A`` and ``eig``.
    rank : None, "numerical" or int, default None
        None: numerical rank capped at ``max_rank`` (the default policy). "numerical": the numerical rank alone
        (eigenvalues > ``rtol * lambda_max``), no cap. int r: the top ``r`` eigenvalues, still dropping those
        below the tolerance (a requested rank above the numerical rank is not an error: exact zeros are never
        inverted).
    max_rank : int, optional
        The cap of ``rank=None`` (e.g. ``min(d, K - 1)`` for a centred Sigma_B).
    rtol : float, default 1e-12
        Relative eigenvalue tolerance, in ``[0, 1)``.
    eig : tuple of (numpy.ndarray (d,), numpy.ndarray (d, k)), optional
        Eigenvalues (descending) and eigenvectors (columns), instead of ``A``.

    Returns
    -------
    PsdPinv
        The kept rank, all eigenvalues and the kept eigenvectors; rank 0 (pseudo-inverse 0) for the zero matrix.

    Raises
    ------
    ValueError
        Both or neither of ``A`` and ``eig``; a bad ``rank`` or ``rtol``; ``A`` not square or not finite.

    Examples
    --------
    >>> import numpy as np
    >>> A = np.diag([1.0, 1e-14, 0.0])  # 1e-14 is below the tolerance: not inverted
    >>> p = psd_pinv(A)
    >>> p.rank, p.pinv.diagonal().tolist()
    (1, [1.0, 0.0, 0.0])
    >>> psd_pinv(np.diag([3.0, 2.0, 1.0]), rank=2).rank
    2
    """
    rtol = check_rtol(rtol)
    if eig is None:
        if A is None:
            raise ValueError("give exactly one of A or eig=(eigenvalues descending, eigenvectors)")
        eig = sym_eig(A)
    elif A is not None:
        raise ValueError("give exactly one of A or eig=(eigenvalues descending, eigenvectors)")
    w, V = eig
    top = w[0] if w.size else 0.0
    numerical = int(np.sum(w > rtol * top)) if top > 0 else 0
    if rank is None:
        r = numerical if max_rank is None else min(numerical, int(max_rank))
    elif rank == "numerical":
        r = numerical
    elif isinstance(rank, int | np.integer) and not isinstance(rank, bool):
        if rank < 0:
            raise ValueError(f"rank must be >= 0, got {rank}")
        r = min(int(rank), numerical)
    else:
        raise ValueError(f"rank must be None, 'numerical' or an int, got {rank!r}")
    return PsdPinv(rank=r, eigvals=np.maximum(w, 0.0), basis=V[:, :r])
