"""The one pseudo-inverse policy of nclab, for symmetric positive semi-definite matrices.

Policy (``docs/conventions.md``, row "pseudo-inverse"): symmetric eigendecomposition in float64; eigenvalues
``<= rtol * lambda_max`` count as zero (``rtol`` = 1e-12 by default: the statistics are float64); the kept
eigenvalues are further capped at ``max_rank`` (e.g. ``min(d, K - 1)`` for a centred Sigma_B), keeping the
largest. [Xu & Liu 2023] (Sec. 4) shows why both the default ``np.linalg.pinv`` threshold and a bare top-(K-1)
truncation are unreliable for Sigma_B; the tolerance guard is what makes exactly collapsed data give 0.

The same code runs on either backend of :mod:`nclab.stats.backend` (numpy on the host, or torch on the device the
statistics live on): matrices and eigenvectors stay where they were computed, eigenvalues come to the host, and
every decision on them (the ``rtol`` cut, the caps) is the same numpy code on both.

This module is also the one place of the "zero" tolerances of the metrics (``SB_ZERO_RTOL``, ``ZERO_RTOL``) and
of the feature scale they are relative to (:func:`feature_scale_sq`): every test of "Sigma_B = 0" or "two class
means coincide" compares with the second moment of the raw features, so the decision does not change when the
features are scaled, and class means at the origin are judged against the spread, not against their own norm.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal

import numpy as np
from scipy.linalg import lapack

from nclab.stats.backend import LinalgBackend, backend_of
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
        All eigenvalues of ``A``, descending, clipped at 0 (on the host, whatever the backend).
    basis : numpy.ndarray or torch.Tensor, shape (d, rank)
        The kept eigenvectors (columns), where they were computed (a torch tensor on the device of a torch
        ``A``).

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
    basis: Any

    @property
    def backend(self) -> LinalgBackend:
        """The backend of :attr:`basis` (:mod:`nclab.stats.backend`)."""
        return backend_of(self.basis)

    @cached_property
    def pinv(self) -> Any:
        """``A^+`` ``(d, d)``, an array of the backend of :attr:`basis`."""
        be = self.backend
        return (self.basis / be.asarray(self.eigvals[: self.rank])) @ self.basis.T

    def trace_with(self, B: Any) -> float:
        """``Tr(A^+ B)`` for a symmetric ``B: (d, d)`` of the basis' backend, without forming ``A^+``."""
        V, be = self.basis, self.backend
        quad = be.to_host(be.xp.einsum("ij,ij->j", V, B @ V))  # v_i^T B v_i: r values to the host
        return float(quad @ (1.0 / self.eigvals[: self.rank]))


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
        mu = moments_of(stats).class_means(copy=False)  # the cached means, no K x d copy
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


def sym_eig(A: Any, *, symmetric: bool = False) -> tuple[np.ndarray, Any]:
    """Eigenvalues (descending, on the host) and eigenvectors (columns) of the symmetric part of ``A: (d, d)``,
    float64. A torch ``A`` is decomposed by torch.linalg on its device (the eigenvectors stay there).

    ``symmetric=True``: ``A`` is known to be exactly symmetric (ClassStats' cached matrices), skip forming
    ``(A + A^T) / 2``."""
    be = backend_of(A)
    A = be.as_float64(A)
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"expected a square matrix, got shape {tuple(A.shape)}")
    if not be.all_finite(A):
        raise ValueError("matrix contains NaN or inf")
    return be.descending(*be.xp.linalg.eigh(A if symmetric else (A + A.T) / 2))


def _between_eig(stats: ClassMoments, weighting: Weighting) -> tuple[np.ndarray, Any]:
    """Eigenvalues ``(d,)`` (descending, on the host) and the ``min(K, d)`` leading eigenvectors ``(d, k)`` (on the
    view's backend) of ``Sigma_B = A^T A`` from the thin SVD of its K x d factor ``A``
    (``ClassMoments.between_factor``): O(K^2 d) instead of the O(d^3) of a d x d eigendecomposition, and the
    eigenvalues are the squared singular values, accurate far below ``eps * lambda_max`` (a d x d eigh resolves
    them only to that level). Every eigenvector of a nonzero eigenvalue is among them, so the pseudo-inverse needs
    no more."""
    be = stats.backend
    A = stats.between_factor(weighting)
    if not np.all(np.isfinite(A)):
        raise ValueError("class means contain NaN or inf")
    _, s, Vt = be.xp.linalg.svd(be.asarray(A), full_matrices=False)
    s = be.to_host(s)
    lam = np.zeros(stats.d)
    lam[: s.size] = s * s
    return lam, Vt.T


def stats_between_eig(stats: ClassStats | ClassMoments, weighting: Weighting = "balanced") -> tuple[np.ndarray, Any]:
    """Sigma_B's eigenvalues ``(d,)`` and leading ``min(K, d)`` eigenvectors ``(d, k)`` (:func:`_between_eig`),
    once per state, cached in the view ``stats``; enough for ``psd_pinv`` (its rank never exceeds k)."""
    check_weighting(weighting)
    stats = moments_of(stats)
    compute = lambda: _between_eig(stats, weighting)  # noqa: E731
    return stats.memo(MomentKey.BETWEEN_EIG, weighting, compute=compute, backend=True)


def _complete_basis(V: Any) -> Any:
    """``[V, V_perp]`` ``(d, d)`` for orthonormal columns ``V (d, k)``: a complete QR gives the orthogonal
    complement to working precision (``within_class_split`` sums Sigma_W over it)."""
    if V.shape[1] == V.shape[0]:
        return V
    xp = backend_of(V).xp
    Q = xp.linalg.qr(V, mode="complete")[0]  # Q[:, :k] spans the columns of V; Q[:, k:] their complement
    return xp.hstack([V, Q[:, V.shape[1] :]])


def stats_eig(
    stats: ClassStats | ClassMoments, which: str, weighting: Weighting = "balanced"
) -> tuple[np.ndarray, Any]:
    """Eigenvalues (descending, on the host) and eigenvectors (columns, on the view's backend) of Sigma_W, Sigma_T
    or Sigma_B(weighting) (``which`` "within", "total", "between"; the latter from the SVD of its K x d factor,
    :func:`_between_eig`), computed once per state, cached in the view ``stats``
    (:class:`~nclab.stats.ClassMoments`): the metrics of one report share each decomposition."""
    if which not in ("within", "total", "between"):
        raise ValueError(f"which must be one of ['between', 'total', 'within'], got {which!r}")
    stats = moments_of(stats)
    if which == "between":

        def complete() -> tuple[np.ndarray, Any]:
            lam, V = stats_between_eig(stats, weighting)
            return lam, _complete_basis(V)

        return stats.memo(MomentKey.EIG, which, weighting, compute=complete, backend=True)
    compute = lambda: sym_eig(stats.matrix(which), symmetric=True)  # noqa: E731
    return stats.memo(MomentKey.EIG, which, None, compute=compute, backend=True)


def stats_eigvals(stats: ClassStats | ClassMoments, which: str, weighting: Weighting = "balanced") -> np.ndarray:
    """Eigenvalues (descending, on the host) of the matrix of :func:`stats_eig`; reuses a cached full
    decomposition, else computes (and caches) the eigenvalues alone, which is about twice as cheap."""
    if which == "between":  # the K x d SVD is cheap: always with its vectors, shared with the pseudo-inverse
        return stats_between_eig(stats, weighting)[0]
    if which not in ("within", "total"):
        raise ValueError(f"which must be one of ['between', 'total', 'within'], got {which!r}")
    stats = moments_of(stats)
    full = stats.peek(MomentKey.EIG, which, None, backend=True)
    if full is not None:
        w: np.ndarray = full[0]
        return w
    be = stats.backend

    def compute() -> np.ndarray:
        return be.descending(be.xp.linalg.eigvalsh(stats.matrix(which)))[0].copy()

    return stats.memo(MomentKey.EIGVALS, which, compute=compute, backend=True)


def psd_cholesky(A: Any, rtol: float = DEFAULT_RTOL) -> tuple[Any, float] | None:
    """The lower Cholesky factor of the symmetric PSD ``A: (d, d)`` and LAPACK's estimate of its reciprocal
    condition number, or ``None`` when ``A`` is numerically singular by this module's policy.

    Why the estimate and not only a failed factorisation: rounding often lets the Cholesky of an exactly singular
    PSD matrix run to the end on a pivot of roundoff size (seen with OpenBLAS 0.3.31), and a solve with that factor
    returns a huge wrong answer. ``cond_1`` is within a factor d of ``cond_2 = lambda_max / lambda_min``, so the
    test matches the pseudo-inverse's eigenvalue cut to that factor at a fraction of an eigendecomposition's cost.

    A torch ``A`` is factorised by torch.linalg on its device, and the estimate is LAPACK's own algorithm
    (``dpocon``: Higham's ``dlacn2`` 1-norm estimator of ``A^{-1}``, :func:`_pocon`) with triangular solves on the
    device and the d-vectors on the host: the same decisions as on the numpy backend, to roundoff in the solves.

    Parameters
    ----------
    A : numpy.ndarray or torch.Tensor, shape (d, d)
        Symmetric positive semi-definite, float64.
    rtol : float, default 1e-12
        ``rcond <= rtol`` counts as singular.

    Returns
    -------
    tuple of (numpy.ndarray or torch.Tensor (d, d), float) or None
        ``(L, rcond)``: ``L`` lower triangular with ``L L^T = A`` (of ``A``'s backend), ``rcond`` the estimate of
        ``1 / cond_1(A)`` (O(d^2) after the O(d^3 / 3) factorisation); ``None`` when the factorisation fails or
        ``rcond <= rtol``.

    Examples
    --------
    >>> import numpy as np
    >>> L, rcond = psd_cholesky(np.diag([4.0, 1.0]))
    >>> L.tolist(), rcond
    ([[2.0, 0.0], [0.0, 1.0]], 0.25)
    >>> print(psd_cholesky(np.diag([1.0, 1e-20])))  # positive definite in float64, singular by the policy
    None
    """
    be = backend_of(A)
    A = be.as_float64(A)
    L = be.cholesky(A)
    if L is None:
        return None
    anorm = float(abs(A).sum(axis=0).max())
    if be.key is None:
        rcond, info = lapack.dpocon(L, anorm, uplo="L")
        if info != 0:
            return None
    else:

        def solve(x: np.ndarray) -> np.ndarray:  # A^{-1} x = L^{-T} L^{-1} x, on the device
            y = be.solve_lower(L, be.solve_lower(L, be.asarray(x)), transpose=True)
            return be.to_host(y)

        rcond = _pocon(solve, A.shape[0], anorm)
    if not rcond > rtol:
        return None
    return L, float(rcond)


def _pocon(solve: Callable[[np.ndarray], np.ndarray], n: int, anorm: float) -> float:
    """LAPACK ``dpocon``'s estimate of ``1 / cond_1(A)`` for a symmetric positive definite ``A (n, n)`` with
    ``||A||_1 = anorm``, given ``solve(x) = A^{-1} x`` (host vectors): Higham's 1-norm estimator ``dlacn2``
    (N. J. Higham, "FORTRAN codes for estimating the one-norm of a real or complex matrix", ACM TOMS 14, 1988,
    Algorithm 4.1), step for step as LAPACK runs it, ``A^{-1}`` being symmetric (both of its products are
    solves). Used where LAPACK's own routine cannot run (the torch backend: the factor lives on a device), so
    that both backends make the same singularity and conditioning decisions."""
    if n == 0:
        return 1.0
    if anorm == 0.0:
        return 0.0
    itmax = 5
    x = solve(np.full(n, 1.0 / n))
    if n == 1:
        est = abs(float(x[0]))
    else:
        est = float(np.sum(np.abs(x)))
        sgn = np.where(x >= 0, 1.0, -1.0)
        x = solve(sgn)
        j = int(np.argmax(np.abs(x)))  # IDAMAX: the first largest
        it = 2
        while True:
            e = np.zeros(n)
            e[j] = 1.0
            x = solve(e)
            estold, est = est, float(np.sum(np.abs(x)))
            xs = np.where(x >= 0, 1.0, -1.0)
            if np.array_equal(xs, sgn) or est <= estold:  # repeated sign vector (converged), or cycling
                break
            sgn = xs
            x = solve(sgn)
            jlast, j = j, int(np.argmax(np.abs(x)))
            if not (x[jlast] != abs(x[j]) and it < itmax):
                break
            it += 1
        # the alternating-sign test vector, which guards against the estimate's rare underestimates
        alt = (1.0 + np.arange(n) / (n - 1)) * np.where(np.arange(n) % 2 == 0, 1.0, -1.0)
        temp = 2.0 * (float(np.sum(np.abs(solve(alt)))) / (3 * n))
        est = max(est, temp)
    if not est > 0:
        return 0.0
    return (1.0 / est) / anorm


def psd_pinv(
    A: Any = None,
    *,
    rank: RankPolicy = None,
    max_rank: int | None = None,
    rtol: float = DEFAULT_RTOL,
    eig: tuple[Any, Any] | None = None,
) -> PsdPinv:
    """Pseudo-inverse of a symmetric PSD matrix ``A: (d, d)`` (or of its eigendecomposition ``eig``).

    Eigenvalues ``<= rtol * lambda_max`` count as zero (the policy of this module).

    Parameters
    ----------
    A : numpy.ndarray or torch.Tensor, shape (d, d), optional
        The matrix (its symmetric part is used); give exactly one of ``A`` and ``eig``. A torch tensor is
        decomposed by torch.linalg on its device (the basis stays there, the eigenvalues come to the host).
    rank : None, "numerical" or int, default None
        None: numerical rank capped at ``max_rank`` (the default policy). "numerical": the numerical rank alone
        (eigenvalues > ``rtol * lambda_max``), no cap. int r: the top ``r`` eigenvalues, still dropping those
        below the tolerance (a requested rank above the numerical rank is not an error: exact zeros are never
        inverted).
    max_rank : int, optional
        The cap of ``rank=None`` (e.g. ``min(d, K - 1)`` for a centred Sigma_B).
    rtol : float, default 1e-12
        Relative eigenvalue tolerance, in ``[0, 1)``.
    eig : tuple of (numpy.ndarray (d,), numpy.ndarray or torch.Tensor (d, k)), optional
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
    w = np.asarray(backend_of(w).to_host(w))  # the eigenvalues on the host: one rank decision for every backend
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
