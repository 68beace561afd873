"""Optimal unregularised MSE linear probe with bias on one-hot targets [Xu & Liu 2023, Sec. 5, Thm 5.1].

The loss is the [Xu & Liu 2023] ``L(W, b) = (1 / (2 N)) sum_i ||W h_i + b - e_{y_i}||^2`` (N = K n samples in the
balanced case, i.e. its 1/(2KN)), minimised over W (K x d) and b (K) with no regularisation. It is the closed-form
counterpart of the usual linear-probe
protocol (an L2-regularised L-BFGS fit with the strength chosen on a validation split, [Kornblith et al. 2019]).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nclab.metrics._linalg import DEFAULT_RTOL, check_rtol, pow2_scale, psd_pinv, stats_eig
from nclab.metrics._registry import metric
from nclab.metrics.common import StatsLike, as_moments, whitened_between
from nclab.validation import check_features, check_int, check_labels

__all__ = ["probe_mse_lstsq", "probe_mse_optimal"]


@metric("probe_mse_optimal", "lower", "[Xu & Liu 2023, Thm. 5.1] (optimal MSE linear-probe loss, closed form)")
def probe_mse_optimal(stats: StatsLike, rtol: float = DEFAULT_RTOL) -> float:
    r"""Optimal MSE linear-probe loss L* = min_{W, b} (1/(2N)) sum_i ||W h_i + b - e_{y_i}||^2, in closed form.

    .. math::

        L^* = \min_{W \in \mathbb{R}^{K \times d},\, b \in \mathbb{R}^K}
        \frac{1}{2N} \sum_{i=1}^{N} \lVert W h_i + b - e_{y_i} \rVert^2

    where :math:`e_{y_i}` is the one-hot vector of the label :math:`y_i`.

    Balanced classes [Xu & Liu 2023, Thm. 5.1]: ``L* = 1/2 - 1/(2K) - Tr(Sigma_T^+ Sigma_B) / (2K)``.
    This function evaluates the exact form for any class counts [Xu & Liu 2023],

        L* = (1/2) [ (1 - sum_k pi_k^2) - sum_k pi_k^2 (mu_k - mu_G)^T Sigma_T^+ (mu_k - mu_G) ],

    with pi_k = n_k / N and mu_G the sample mean; it reduces to Thm 5.1 when pi_k = 1/K. On balanced data
    ``vci(stats) = 2 K L* / (K - 1)`` when rank(Sigma_B) = K - 1.

    Parameters
    ----------
    stats : ClassStats or ClassMoments, K classes, dimension d
        Statistics of the features, ``track="full"``.
    rtol : float, default 1e-12
        Relative eigenvalue tolerance of ``psd_pinv`` for Sigma_T^+, in ``[0, 1)``.

    Returns
    -------
    float
        Range [0, (1 - sum_k pi_k^2) / 2]: 0 for collapsed features with class means in general position, the
        upper end (the constant predictor, 1/2 - 1/(2K) when balanced) when Sigma_B = 0. Lower = more collapsed
        (relative to the probe). Clipped at 0 against roundoff (a squared loss is >= 0).

    See Also
    --------
    probe_mse_lstsq : the reference implementation by least squares.
    vci

    Examples
    --------
    >>> from nclab.stats import ClassStats
    >>> H = np.array([[2.0, 0.0], [0.0, 0.0], [-2.0, 0.0], [0.0, 0.0]])
    >>> stats = ClassStats.from_arrays(H, np.array([0, 0, 1, 1]), K=2)
    >>> round(probe_mse_optimal(stats), 12)  # vci = 1/2 = 2 K L* / (K - 1)
    0.125
    """
    stats = as_moments(stats)
    rtol = check_rtol(rtol)
    pi = stats.counts / stats.N
    M = stats.centered_means("empirical")
    whitened = whitened_between(stats, rtol)
    if whitened is not None:
        # 2 L* = tr(Pi (P_c - U U^T)) + sum_j ||Pi^{1/2} u_j||^2 / (1 + s_j^2) (P_c: projector orthogonal to
        # sqrt(pi)), sums of non-negative terms, accurate near collapse (see whitened_between).
        U, sv = whitened
        be = stats.backend
        r = int(np.sum(sv * sv > rtol * sv[0] * sv[0])) if sv.size and sv[0] > 0 else 0
        weights = be.to_host(be.asarray(pi) @ (U[:, :r] ** 2))  # K x r on the backend, r values to the host
        rest = 0.0 if r >= stats.K - 1 else max((1.0 - float(pi @ pi)) - float(weights.sum()), 0.0)
        return 0.5 * (rest + float(weights @ (1.0 / (1.0 + sv[:r] ** 2))))
    pt = psd_pinv(eig=stats_eig(stats, "total"), rank="numerical", rtol=rtol)
    be = stats.backend
    P = be.asarray(M) @ pt.basis  # q_k = m_k^T Sigma_T^+ m_k, through the kept eigenvectors
    q = be.to_host((P * P) @ be.asarray(1.0 / pt.eigvals[: pt.rank]))  # K values to the host
    loss = 0.5 * ((1.0 - float(pi @ pi)) - float((pi * pi) @ q))
    return max(loss, 0.0)


@metric(
    "probe_mse_lstsq",
    "lower",
    "[Xu & Liu 2023, Thm. 5.1] (optimal MSE linear-probe loss, direct least squares)",
    needs=("features", "labels"),
)
def probe_mse_lstsq(H: Any, y: Any, K: int | None = None) -> float:
    r"""Optimal MSE linear-probe loss by direct least squares (reference for :func:`probe_mse_optimal`).

    .. math::

        L^* = \min_{W,\, b} \frac{1}{2N} \sum_{i=1}^{N} \lVert W h_i + b - e_{y_i} \rVert^2

    solved by least squares on the features themselves.

    Solves ``min_{W, b} (1/(2N)) sum_i ||W h_i + b - e_{y_i}||^2`` ([Xu & Liu 2023, Sec. 5], its 1/(2KN) with
    N = K n) with ``numpy.linalg.lstsq`` on the design ``[H - mean(H), 1]`` (centring changes only b, and
    helps conditioning) against one-hot targets, in float64; rank-deficient designs get the minimum-norm
    solution, which attains the minimum. Memory O(N (d + K)): for moderate N only.

    Parameters
    ----------
    H : array_like, shape (N, d)
        Features, one row per sample.
    y : array_like of int, shape (N,)
        Labels in [0, K).
    K : int, optional
        Number of classes; default ``max(y) + 1``.

    Returns
    -------
    float
        The loss, >= 0; lower = more collapsed. Constant features give the constant predictor's
        ``(1 - sum_k pi_k^2) / 2``.

    See Also
    --------
    probe_mse_optimal

    Examples
    --------
    >>> y = np.array([0, 0, 1, 1])
    >>> probe_mse_lstsq(np.array([[2.0, 0.0], [0.0, 0.0], [-2.0, 0.0], [0.0, 0.0]]), y)
    0.125
    >>> probe_mse_lstsq(np.zeros((4, 2)), y)  # constant features: 1/2 - 1/(2K)
    0.25
    """
    H = check_features(H, name="H")
    y = check_labels(y, K=None, name="y", num_rows=H.shape[0])
    K = check_int(int(y.max()) + 1 if K is None else K, name="K", low=2)
    y = check_labels(y, K=K, name="y")
    N = H.shape[0]
    Hc = H - H.mean(axis=0)
    # the loss is scale-invariant; an exact power-of-two rescaling puts the features on the scale of the
    # constant column, so lstsq's relative rank cut-off sees both (features at 1e-50 would otherwise read as 0)
    Hc = Hc / pow2_scale(float(np.max(np.abs(Hc))) if Hc.size else 0.0)
    X = np.hstack([Hc, np.ones((N, 1))])
    Y = np.zeros((N, K))
    Y[np.arange(N), y] = 1.0
    beta, *_ = np.linalg.lstsq(X, Y, rcond=None)
    R = X @ beta - Y
    return float(np.sum(R * R) / (2 * N))
