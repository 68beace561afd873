"""The SNR matrix of [Han et al. 2022] (Sec. 3.2), its singular values omega, and the central-path loss in omega.

[Han et al. 2022] writes C (classes), N (samples per class) and P (dimension); here they are K, n and d (N = K n rows
in total).

Rows convention: the paper's ``SNR = Sigma_W^{-1/2} Mbar`` (d x K, columns = centred class means) is returned
transposed, ``snr = Mbar_rows Sigma_W^{-1/2}`` of shape ``(K, d)``; its singular values are the same. The
renormalised features are ``X = (H - mu_G) Sigma_W^{-1/2}`` (rows), whose within-class covariance is I and
whose centred class means are the SNR matrix.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from nclab.stats import ClassStats
from nclab.validation import check_choice, check_features, check_int, check_labels

__all__ = [
    "SNR",
    "central_path_terms",
    "inv_sqrt_psd",
    "nc1_from_omega",
    "renormalize",
    "snr_matrix",
]


@dataclass(frozen=True)
class SNR:
    """The SNR matrix of :func:`snr_matrix` and its singular value decomposition.

    Parameters
    ----------
    matrix : ndarray of shape (K, d)
        ``Mbar Sigma_W^{-1/2}`` (rows = classes).
    omega : ndarray of shape (K-1,)
        Its nonzero singular values, descending.
    left : ndarray of shape (K, K-1)
        Left singular vectors (the paper's V-hat).
    right : ndarray of shape (d, K-1)
        Right singular vectors (the paper's U-hat); ``matrix ~= left diag(omega) right^T``.
    sigma_w_rank : int
        Numerical rank of Sigma_W.

    Examples
    --------
    >>> import numpy as np
    >>> from nclab.stats import ClassStats
    >>> from nclab.theory import snr_matrix
    >>> H = np.array([[-3.0], [-1.0], [1.0], [3.0]])  # class means -2, 2; Sigma_W = 1
    >>> snr = snr_matrix(ClassStats.from_arrays(H, [0, 0, 1, 1], K=2))
    >>> print(snr.matrix.ravel(), np.round(snr.omega, 6), snr.sigma_w_rank)
    [-2.  2.] [2.828427] 1
    """

    matrix: np.ndarray
    omega: np.ndarray
    left: np.ndarray
    right: np.ndarray
    sigma_w_rank: int


def inv_sqrt_psd(A: np.ndarray, *, rtol: float = 1e-12, singular: Literal["raise", "pinv"] = "raise") -> np.ndarray:
    """Symmetric ``A^{-1/2}`` by ``eigh`` in float64 [Han et al. 2022].

    Eigenvalues ``<= rtol * max`` count as zero: ``singular="raise"`` rejects them (naming the rank),
    ``"pinv"`` returns the pseudo-inverse square root (those directions dropped).
    """
    check_choice(singular, ("raise", "pinv"), name="singular")
    A = np.asarray(A, dtype=np.float64)
    w, V = np.linalg.eigh((A + A.T) / 2)
    top = w.max() if w.size else 0.0
    keep = w > rtol * top if top > 0 else np.zeros_like(w, dtype=bool)
    if not np.all(keep):
        if singular == "raise":
            raise ValueError(
                f"Sigma_W is singular (numerical rank {int(keep.sum())} < {A.shape[0]}): the SNR matrix needs a "
                f"full-rank within-class covariance (N - K >= d for N samples); pass singular='pinv' to drop null "
                "directions"
            )
    Vk = V[:, keep]
    return (Vk / np.sqrt(w[keep])) @ Vk.T


def snr_matrix(stats: ClassStats, *, rtol: float = 1e-12, singular: Literal["raise", "pinv"] = "raise") -> SNR:
    """SNR matrix ``Sigma_W^{-1/2} Mbar`` of [Han et al. 2022, Def. 2] (rows form, ``(K, d)``) and its singular values.

    ``Mbar`` = class means centred by the mean of class means (balanced: the paper's setting). Needs
    ``track="full"`` and a full-rank Sigma_W (see :func:`inv_sqrt_psd` for ``singular``). The omega_j are
    invariant under ``H -> H A^T + c`` for any invertible A [Han et al. 2022, Sec. 3.1].

    Parameters
    ----------
    stats : ClassStats
        Class statistics of ``H (N, d)`` with ``track="full"``.
    rtol : float, default=1e-12
        Eigenvalues of Sigma_W below ``rtol`` times the largest count as zero.
    singular : {"raise", "pinv"}, default="raise"
        What a singular Sigma_W does: raise, or drop its null directions.

    Returns
    -------
    SNR
        The ``(K, d)`` matrix, its ``K - 1`` singular values ``omega`` and singular vectors.

    Raises
    ------
    ValueError
        If Sigma_W is singular and ``singular="raise"``.

    Examples
    --------
    Two classes at ``-2`` and ``2`` with unit within-class variance: ``omega = ||(-2, 2)|| = 2 sqrt(2)``.

    >>> import numpy as np
    >>> from nclab.stats import ClassStats
    >>> from nclab.theory import snr_matrix
    >>> H = np.array([[-3.0], [-1.0], [1.0], [3.0]])  # class means -2, 2; Sigma_W = 1
    >>> snr = snr_matrix(ClassStats.from_arrays(H, [0, 0, 1, 1], K=2))
    >>> print(np.round(snr.omega, 6))
    [2.828427]
    """
    if not isinstance(stats, ClassStats):
        raise TypeError(f"snr_matrix needs ClassStats, got {type(stats).__name__}")
    view = stats.moments()
    sw = view.sigma_w()
    isq = inv_sqrt_psd(sw, rtol=rtol, singular=singular)
    S = view.centered_means("balanced") @ isq
    K = stats.K
    U, s, Vt = np.linalg.svd(S, full_matrices=False)
    r = min(K - 1, s.size)
    ev = np.linalg.eigvalsh(sw)
    rank_w = int(np.sum(ev > rtol * max(ev.max(), 0.0)))
    return SNR(matrix=S, omega=s[:r].copy(), left=U[:, :r], right=Vt[:r].T, sigma_w_rank=rank_w)


def renormalize(H: Any, y: Any, K: int | None = None) -> np.ndarray:
    """Renormalised features ``X = (H - mu_G) Sigma_W^{-1/2}``, ``(N, d)`` ([Han et al. 2022, Sec. 3.1] / App. D.1).

    ``mu_G`` is the sample mean (the paper's global mean); afterwards ``Sigma_W(X) = I`` and the centred class
    means of X are the SNR matrix.

    Parameters
    ----------
    H : array-like of shape (N, d)
        Features.
    y : array-like of shape (N,)
        Labels in ``0..K-1``.
    K : int, optional
        Number of classes (default: ``max(y) + 1``).

    Returns
    -------
    ndarray of shape (N, d)
        The renormalised features.

    Examples
    --------
    >>> from nclab.theory import renormalize
    >>> print(renormalize([[-6.0], [-2.0], [2.0], [6.0]], [0, 0, 1, 1]).ravel())  # Sigma_W = 4
    [-3. -1.  1.  3.]
    """
    H = check_features(H, name="H")
    stats = ClassStats.from_arrays(H, check_labels(y, K=K, name="y", num_rows=H.shape[0]), K=K)
    view = stats.moments()
    return (H - view.global_mean("empirical")) @ inv_sqrt_psd(view.sigma_w())


def central_path_terms(omega: Any, K: int) -> dict[str, float]:
    """Spectral form of the loss on the central path, lambda = 0 [Han et al. 2022, Lemma 1]:

        L = 1/2 sum_j 1/(omega_j^2 + K),  L_NC1 = 1/2 sum_j omega_j^2/(K + omega_j^2)^2,
        L_NC23 = 1/2 sum_j K/(K + omega_j^2)^2,

    over the K - 1 nonzero singular values (pad with zeros if fewer are given: ``L(omega = 0) = (K-1)/(2C)``).

    Parameters
    ----------
    omega : array-like of shape (J,)
        Nonzero singular values of the SNR matrix, ``J <= K - 1``.
    K : int
        Number of classes, ``>= 2``.

    Returns
    -------
    dict of str to float
        ``"L"``, ``"L_NC1"`` and ``"L_NC23"``, with ``L = L_NC1 + L_NC23``.

    Examples
    --------
    >>> from nclab.theory import central_path_terms
    >>> central_path_terms([1.0, 1.0], K=3)
    {'L': 0.25, 'L_NC1': 0.0625, 'L_NC23': 0.1875}
    >>> round(central_path_terms([], K=3)["L"], 12)  # omega = 0: (K-1)/(2K)
    0.333333333333
    """
    K = check_int(K, name="K", low=2)
    w = np.zeros(K - 1)
    om = np.asarray(omega, dtype=np.float64).ravel()
    if om.size > K - 1:
        raise ValueError(f"at most K - 1 = {K - 1} nonzero singular values, got {om.size}")
    w[: om.size] = om
    w2 = w * w
    return {
        "L": float(0.5 * np.sum(1.0 / (w2 + K))),
        "L_NC1": float(0.5 * np.sum(w2 / (K + w2) ** 2)),
        "L_NC23": float(0.5 * np.sum(K / (K + w2) ** 2)),
    }


def nc1_from_omega(omega: Any) -> float:
    """``sum_j 1/omega_j^2``: equals ``Tr(Sigma_W Sigma_B^+)/K`` (``nclab.metrics.nc1``) on renormalised features.

    [Han et al. 2022], App. D.6 drops the factor K [[Han et al. 2022, App. D.6], derived]: the correct statement is
    ``Tr(Sigma_B^+ Sigma_W)/K = sum 1/omega^2`` when Sigma_W = I; in general coordinates ``nc1 >= sum 1/omega^2``.

    Parameters
    ----------
    omega : array-like
        Singular values of the SNR matrix.

    Returns
    -------
    float
        ``sum_j 1/omega_j^2``; ``inf`` when some ``omega_j <= 0``.

    Examples
    --------
    >>> from nclab.theory import nc1_from_omega
    >>> nc1_from_omega([2.0, 1.0]), nc1_from_omega([1.0, 0.0])
    (1.25, inf)
    """
    om = np.asarray(omega, dtype=np.float64)
    if np.any(om <= 0):
        return float("inf")
    return float(np.sum(1.0 / om**2))
