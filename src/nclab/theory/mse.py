"""The least-squares (ridge) classifier and the exact MSE loss decomposition of [Han et al. 2022] (Sec. 2).

Conventions (rows are samples): features ``H (N, d)``, labels ``y (N,)`` in ``[0, K)``, classifier ``W (K, d)``,
bias ``b (K,)``; the paper's columns are transposed here and nowhere else. [Han et al. 2022] writes C (classes),
N (samples per class) and P (dimension); the code writes K, n and d, and N = K n for the total count. The loss
is [Han et al. 2022, eq. (2)-(3)],

    L(W, b, H) = (1/(2N)) sum_i ||W h_i + b - e_{y_i}||^2 + (lam/2) (||W||_F^2 + ||b||^2),

with ``N`` the total sample count (the paper's ``CN``) and the bias penalised too. ``lam`` is always the paper's
lambda; :func:`paper_lambda` maps a training weight decay to it (:data:`LAMBDA_CONVENTIONS`).

Everything is computed from :class:`~nclab.stats.ClassStats` (counts, class means, Sigma_W, all float64, the
within-class scatter without cancellation), so the same code serves arrays and the streaming pass of a training
run. Every term is a sum of non-negative pieces (no raw second moments are subtracted):

    loss(W, b)   = 1/2 [tr(W Sigma_W W^T) + sum_c pi_c ||W mu_c + b - e_c||^2] + lam/2 (||W||^2 + ||b||^2)
    L_NC1        = 1/2 [tr(W_LS (Sigma_W + lam I) W_LS^T) + lam ||b_LS||^2]               [Han et al. 2022, Thm. 2]
    L_NC23       = 1/2 sum_c pi_c ||W_LS mu_c + b_LS - e_c||^2                              (Thm 2)
    L_perp       = 1/2 [tr(dW Sigma_T dW^T) + ||dW mu_G + db||^2 + lam (||dW||^2 + ||db||^2)]  (Thm 1)

with ``pi_c = n_c / N`` and ``mu_G`` the sample mean. For balanced classes ``pi_c = 1/K`` and these are the
paper's formulas (L_NC23 = (1/(2C)) ||W~_LS M~ - I||_F^2); with the empirical weights the identities
L = L_LS + L_perp and L_LS = L_NC1 + L_NC23 stay exact on imbalanced data too (the spectral theory of Sec. 3
does not: it needs balance).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import scipy.linalg

from nclab.metrics import psd_cholesky, psd_pinv
from nclab.stats import ClassMoments, ClassStats
from nclab.validation import check_features, check_labels

__all__ = [
    "DECOMPOSITION_KEYS",
    "LAMBDA_CONVENTIONS",
    "LambdaConvention",
    "Moments",
    "decomposition_table",
    "ls_classifier",
    "ls_classifier_from_stats",
    "ls_from_moments",
    "mse_decomposition",
    "mse_decomposition_from_stats",
    "mse_loss_from_stats",
    "paper_lambda",
]

LambdaConvention = Literal["mse_mean", "mse_sum", "paper"]

#: Training objective -> [Han et al. 2022] lambda, for PyTorch-style coupled weight decay ``wd`` (= penalty
#: (wd/2)||theta||^2).
LAMBDA_CONVENTIONS: dict[str, str] = {
    "mse_mean": "nn.MSELoss() (mean over samples and the K outputs) + (wd/2)||theta||^2  ->  lam = K * wd / 2",
    "mse_sum": "nn.MSELoss(reduction='sum') / n (sum over outputs, mean over samples) + (wd/2)||theta||^2  ->  "
    "lam = wd / 2 (the reference Colab of [Han et al. 2022])",
    "paper": "(1/(2n)) sum ||f - y||^2 + (wd/2)||theta||^2, the paper's own objective  ->  lam = wd",
}

#: The keys every decomposition dict carries (in this order).
DECOMPOSITION_KEYS = (
    "L",
    "L_LS",
    "L_NC1",
    "L_NC23",
    "L_perp",
    "identity_residual",
    "ls_residual",
    "proximity_ratio",
    "lambda",
)


def paper_lambda(weight_decay: float, K: int, convention: LambdaConvention = "mse_mean") -> float:
    """The [Han et al. 2022] lambda for a network trained with weight decay ``weight_decay`` (see
    :data:`LAMBDA_CONVENTIONS`).

    ``"mse_mean"``: objective ``nn.MSELoss()`` + ``(wd/2)||theta||^2`` = ``(2/K) [L_paper]`` with
    ``lam = K wd / 2`` [Han et al. 2022]; ``"mse_sum"``: the Colab's loss summed over outputs, ``lam = wd/2``;
    ``"paper"``: ``lam = wd``. The decomposition identity holds for any lambda; only "L_perp ~ 0" depends on
    using the lambda that the classifier was actually trained with.

    Parameters
    ----------
    weight_decay : float
        The optimiser's weight decay, ``>= 0``.
    K : int
        Number of classes, ``>= 2``.
    convention : {"mse_mean", "mse_sum", "paper"}, default="mse_mean"
        How the training loss was normalised (docs/conventions.md).

    Returns
    -------
    float
        The lambda of [Han et al. 2022].

    Examples
    --------
    >>> from nclab.theory import paper_lambda
    >>> paper_lambda(5e-4, 10), paper_lambda(5e-4, 10, "mse_sum"), paper_lambda(5e-4, 10, "paper")
    (0.0025, 0.00025, 0.0005)
    """
    if not (weight_decay >= 0):
        raise ValueError(f"weight_decay must be >= 0, got {weight_decay}")
    if isinstance(K, bool) or not isinstance(K, int | np.integer) or K < 2:
        raise ValueError(f"K must be an int >= 2, got {K!r}")
    if convention == "mse_mean":
        return K * weight_decay / 2.0
    if convention == "mse_sum":
        return weight_decay / 2.0
    if convention == "paper":
        return float(weight_decay)
    raise ValueError(f"unknown lambda convention {convention!r}; known: {', '.join(LAMBDA_CONVENTIONS)}")


def _resolve_lambda(lam: float | None, weight_decay: float | None, convention: LambdaConvention, K: int) -> float:
    if (lam is None) == (weight_decay is None):
        raise ValueError("give exactly one of lam (the [Han et al. 2022] lambda) or weight_decay (with convention=)")
    if lam is None:
        assert weight_decay is not None  # exactly one of the two (checked above)
        return paper_lambda(float(weight_decay), K, convention)
    if not (lam >= 0):
        raise ValueError(f"lam must be >= 0, got {lam}")
    return float(lam)


# ---------------------------------------------------------------------------------------------- moments
@dataclass(frozen=True)
class Moments:
    """The second-order summary that the LS classifier and the decomposition read (all float64): class weights
    ``pi_c = n_c / N``, uncentred class means, the sample mean, Sigma_W and Sigma_T. Built from ClassStats here
    and from class-major rows by :mod:`nclab.theory.central_path`."""

    pi: np.ndarray  # (K,) n_c / N
    means: np.ndarray  # (K, d) uncentred class means
    mu: np.ndarray  # (d,) sample mean
    sigma_w: np.ndarray  # (d, d)
    sigma_t: np.ndarray  # (d, d) about the sample mean


def _view(stats: ClassStats | ClassMoments) -> ClassMoments:
    return stats if isinstance(stats, ClassMoments) else stats.moments()


def _moments(stats: ClassStats | ClassMoments) -> Moments:
    # a ClassMoments view (e.g. the one a collapse_report of the same statistics filled) shares its Sigma_W, Sigma_T
    if not isinstance(stats, ClassStats | ClassMoments):
        raise TypeError(f"expected ClassStats, got {type(stats).__name__}")
    if stats.track != "full":
        raise ValueError("the MSE decomposition needs Sigma_W: build the ClassStats with track='full'")
    counts = stats.counts
    if counts.sum() == 0:
        raise ValueError("ClassStats are empty: no sample has been seen")
    pi = counts / counts.sum()
    if np.any(counts == 0):
        # An empty class contributes nothing to the loss sums; its mean is irrelevant (pi_c = 0) but undefined.
        means = np.zeros((stats.K, stats.d))
        nz = counts > 0
        means[nz] = stats.drop_empty().means
        mu = pi @ means
        sw = _view(stats).sigma_w(copy=False)
        Mc = means - mu
        st = sw + (Mc * pi[:, None]).T @ Mc
        return Moments(pi=pi, means=means, mu=mu, sigma_w=sw, sigma_t=(st + st.T) / 2)
    # Sigma_T about the sample mean = Sigma_W + empirical Sigma_B: ClassStats' cached, read-only matrices (shared
    # with a collapse_report of the same statistics)
    means, view = stats.means, _view(stats)
    return Moments(
        pi=pi, means=means, mu=pi @ means, sigma_w=view.sigma_w(copy=False), sigma_t=view.sigma_t(copy=False)
    )


def _solve_psd(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """``A^{-1} B`` for symmetric PSD ``A`` by its Cholesky factor; the minimum-norm (pseudo-inverse) solution when
    ``A`` is numerically singular by the pseudo-inverse policy (:func:`nclab.metrics.psd_cholesky`: the
    factorisation fails, or the condition estimate says ``1 / cond_1(A) <= 1e-12``; e.g. lam = 0 with N < d).
    No ``scipy.linalg.solve``: its own condition estimate tripled the cost at d = 128."""
    chol = psd_cholesky(A)
    if chol is None:
        return psd_pinv(A).pinv @ B
    return scipy.linalg.cho_solve((chol[0], True), B, check_finite=False)


def ls_from_moments(m: Moments, lam: float, bias: bool) -> tuple[np.ndarray, np.ndarray]:
    """``(W_LS (K, d), b_LS (K,))`` of :func:`ls_classifier` from the :class:`Moments` (``lam >= 0`` unchecked)."""
    K, d = m.means.shape
    R = m.pi[:, None] * m.means  # (1/N) Y^T H, (K, d)
    if not bias:
        A = m.sigma_t + np.outer(m.mu, m.mu) + lam * np.eye(d)
        return _solve_psd(A, R.T).T, np.zeros(K)
    # Eliminating b from the normal equations W(S_T + mu mu^T + lam I) + b mu^T = R, W mu + (1 + lam) b = pi
    # leaves a system in the *centred* covariance (well conditioned even for features far from the origin):
    # W (S_T + lam/(1+lam) mu mu^T + lam I) = R - pi mu^T / (1 + lam)   ([Han et al. 2022, Prop. 1], unextended form).
    A = m.sigma_t + (lam / (1.0 + lam)) * np.outer(m.mu, m.mu) + lam * np.eye(d)
    rhs = R - np.outer(m.pi, m.mu) / (1.0 + lam)
    W = _solve_psd(A, rhs.T).T
    b = (m.pi - W @ m.mu) / (1.0 + lam)
    return W, b


def ls_classifier_from_stats(
    stats: ClassStats | ClassMoments, lam: float, bias: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """The LS classifier of [Han et al. 2022, Prop. 1], from ClassStats; see :func:`ls_classifier`.

    Parameters
    ----------
    stats : ClassStats or ClassMoments
        Class statistics of ``H (N, d)`` with ``track="full"``.
    lam : float
        The [Han et al. 2022] lambda, ``>= 0``.
    bias : bool, default=True
        Fit a bias ``b``; else ``b = 0``.

    Returns
    -------
    W : ndarray of shape (K, d)
        The LS classifier.
    b : ndarray of shape (K,)
        Its bias (zeros when ``bias=False``).

    Examples
    --------
    >>> import numpy as np
    >>> from nclab.geometry import simplex_etf
    >>> H, y = simplex_etf(3, 2), np.arange(3)  # one feature per class
    >>> from nclab.stats import ClassStats
    >>> from nclab.theory import ls_classifier_from_stats
    >>> W, b = ls_classifier_from_stats(ClassStats.from_arrays(H, y, K=3), lam=0.0)
    >>> print(np.round(H @ W.T + b, 6) + 0.0)  # the targets, fitted exactly
    [[1. 0. 0.]
     [0. 1. 0.]
     [0. 0. 1.]]
    """
    if not (lam >= 0):
        raise ValueError(f"lam must be >= 0, got {lam}")
    return ls_from_moments(_moments(stats), float(lam), bias)


def ls_classifier(
    H: Any, y: Any, lam: float, bias: bool = True, *, K: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Least-squares (ridge) classifier ``(W_LS (K, d), b_LS (K,))`` minimising the loss of [Han et al. 2022, eq. (3)].

    [Han et al. 2022, Prop. 1] [Webb & Lowe 1990]: ``W~_LS = ((1/N) Y H~^T)((1/N) H~ H~^T + lam I)^{-1}`` in extended
    coordinates ``h~ = [h; 1]``, ``W~ = [W, b]`` (bias penalised by lam). Solved (never inverted) in float64 in
    the centred unextended form. ``bias=False`` fits ``W`` alone (``b = 0``). With ``lam = 0`` and singular
    second moments (e.g. ``N < d``) the minimum-norm solution is returned.

    Parameters
    ----------
    H : array-like of shape (N, d)
        Features.
    y : array-like of shape (N,)
        Labels in ``0..K-1``.
    lam : float
        The [Han et al. 2022] lambda, ``>= 0``.
    bias : bool, default=True
        Fit a bias ``b``; else ``b = 0``.
    K : int, optional
        Number of classes (default: ``max(y) + 1``).

    Returns
    -------
    W : ndarray of shape (K, d)
        The LS classifier.
    b : ndarray of shape (K,)
        Its bias (zeros when ``bias=False``).

    See Also
    --------
    ls_classifier_from_stats : the same from streamed statistics.

    Examples
    --------
    With ``lam = 0`` the one-hot targets of a simplex ETF are fitted exactly:

    >>> import numpy as np
    >>> from nclab.geometry import simplex_etf
    >>> H, y = simplex_etf(3, 2), np.arange(3)  # one feature per class
    >>> from nclab.theory import ls_classifier
    >>> W, b = ls_classifier(H, y, lam=0.0)
    >>> print(np.round(H @ W.T + b, 6) + 0.0)
    [[1. 0. 0.]
     [0. 1. 0.]
     [0. 0. 1.]]
    """
    H = check_features(H, name="H")
    stats = ClassStats.from_arrays(H, check_labels(y, K=K, name="y", num_rows=H.shape[0]), K=K)
    return ls_classifier_from_stats(stats, lam, bias)


# ---------------------------------------------------------------------------------------------- losses
def _loss(m: Moments, W: np.ndarray, b: np.ndarray, lam: float) -> float:
    K = m.means.shape[0]
    fit = np.einsum("ij,ij->", W @ m.sigma_w, W)
    fit += float(m.pi @ np.sum((m.means @ W.T + b - np.eye(K)) ** 2, axis=1))
    return float(0.5 * fit + 0.5 * lam * (float(np.sum(W * W)) + float(b @ b)))


def _check_classifier(W: Any, b: Any, K: int, d: int) -> tuple[np.ndarray, np.ndarray, bool]:
    W = np.asarray(W, dtype=np.float64)
    if W.shape != (K, d):
        raise ValueError(f"W must have shape (K, d) = ({K}, {d}) (rows = classes), got {W.shape}")
    if not np.all(np.isfinite(W)):
        raise ValueError("W contains NaN or inf")
    if b is None:
        return W, np.zeros(K), False
    b = np.asarray(b, dtype=np.float64)
    if b.shape != (K,):
        raise ValueError(f"b must have shape (K,) = ({K},), got {b.shape}")
    if not np.all(np.isfinite(b)):
        raise ValueError("b contains NaN or inf")
    return W, b, True


def mse_loss_from_stats(stats: ClassStats | ClassMoments, W: Any, b: Any, lam: float) -> float:
    """The [Han et al. 2022] regularised MSE loss ``L(W, b, H)`` from ClassStats (Pythagoras form, no cancellation).

    Parameters
    ----------
    stats : ClassStats or ClassMoments
        Class statistics of ``H (N, d)`` with ``track="full"``.
    W : array-like of shape (K, d)
        Classifier.
    b : array-like of shape (K,) or None
        Bias (None: no bias).
    lam : float
        The [Han et al. 2022] lambda.

    Returns
    -------
    float
        ``(1/(2N)) sum_i ||W h_i + b - e_{y_i}||^2 + (lam/2)(||W||^2 + ||b||^2)``.

    Examples
    --------
    A zero classifier misses every one-hot target by 1: ``L = 1/2``.

    >>> import numpy as np
    >>> from nclab.geometry import simplex_etf
    >>> H, y = simplex_etf(3, 2), np.arange(3)  # one feature per class
    >>> from nclab.stats import ClassStats
    >>> from nclab.theory import mse_loss_from_stats
    >>> mse_loss_from_stats(ClassStats.from_arrays(H, y, K=3), np.zeros((3, 2)), np.zeros(3), lam=0.0)
    0.5
    """
    m = _moments(stats)
    W, b, _ = _check_classifier(W, b, *m.means.shape)
    return _loss(m, W, b, float(lam))


def _decompose(m: Moments, W: np.ndarray, b: np.ndarray, bias: bool, lam: float, L: float | None) -> dict[str, float]:
    K, d = m.means.shape
    W_ls, b_ls = ls_from_moments(m, lam, bias)
    sw_l = m.sigma_w + lam * np.eye(d)
    L_nc1 = 0.5 * (np.einsum("ij,ij->", W_ls @ sw_l, W_ls) + lam * float(b_ls @ b_ls))
    L_nc23 = 0.5 * float(m.pi @ np.sum((m.means @ W_ls.T + b_ls - np.eye(K)) ** 2, axis=1))
    dW, db = W - W_ls, b - b_ls
    L_perp = 0.5 * (
        np.einsum("ij,ij->", dW @ m.sigma_t, dW)
        + float(np.sum((dW @ m.mu + db) ** 2))
        + lam * (float(np.sum(dW * dW)) + float(db @ db))
    )
    L_ls = _loss(m, W_ls, b_ls, lam)  # evaluated independently of L_NC1 + L_NC23: Thm 2 is then a check
    if L is None:
        L = _loss(m, W, b, lam)
    L_nc1, L_nc23, L_perp = float(L_nc1), float(L_nc23), float(L_perp)
    return {
        "L": float(L),
        "L_LS": float(L_ls),
        "L_NC1": L_nc1,
        "L_NC23": L_nc23,
        "L_perp": L_perp,
        "identity_residual": abs(float(L) - (L_nc1 + L_nc23 + L_perp)),
        "ls_residual": abs(L_ls - (L_nc1 + L_nc23)),
        "proximity_ratio": float(L_perp / L_ls) if L_ls > 0 else (0.0 if L_perp == 0 else float("inf")),
        "lambda": lam,
    }


def mse_decomposition_from_stats(
    stats: ClassStats | ClassMoments,
    W: Any,
    b: Any,
    lam: float | None = None,
    *,
    weight_decay: float | None = None,
    convention: LambdaConvention = "mse_mean",
    data_loss: float | None = None,
) -> dict[str, float]:
    """Streaming form of :func:`mse_decomposition`: the same dict from ClassStats (``track="full"``), or from a
    :class:`~nclab.stats.ClassMoments` view of them (reusing the Sigma_W and Sigma_T a report computed in it).

    ``data_loss``: optionally the measured ``(1/(2N)) sum_i ||W h_i + b - e_{y_i}||^2`` of the same pass (e.g.
    accumulated by the training loop); then ``L = data_loss + (lam/2)(||W||^2 + ||b||^2)`` and the identity
    residual compares two independent computations. Without it, ``L`` is evaluated from the statistics.

    Parameters
    ----------
    stats : ClassStats or ClassMoments
        Class statistics of ``H (N, d)`` with ``track="full"``.
    W : array-like of shape (K, d)
        Classifier.
    b : array-like of shape (K,) or None
        Bias; None for a bias-free model.
    lam : float, optional
        The [Han et al. 2022] lambda; or ``weight_decay`` with ``convention``, not both.
    weight_decay : float, optional
        The optimiser's weight decay, converted by ``convention``.
    convention : {"mse_mean", "mse_sum", "paper"}, default="mse_mean"
        See :data:`LAMBDA_CONVENTIONS`.
    data_loss : float, optional
        The measured data term of the same pass.

    Returns
    -------
    dict of str to float
        The keys :data:`DECOMPOSITION_KEYS`, as :func:`mse_decomposition`.

    Examples
    --------
    >>> import numpy as np
    >>> from nclab.geometry import simplex_etf
    >>> from nclab.stats import ClassMoments, ClassStats
    >>> K, n, d = 3, 20, 4
    >>> y = np.repeat(np.arange(K), n)
    >>> H = 4 * simplex_etf(K, d)[y] + 0.5 * np.random.default_rng(0).standard_normal((K * n, d))
    >>> stats = ClassStats.from_arrays(H, y, K=K)

    >>> from nclab.theory import mse_decomposition_from_stats
    >>> out = mse_decomposition_from_stats(stats, simplex_etf(K, d) / 4, np.full(K, 1 / K), lam=1e-3)
    >>> print(f"{out['L']:.5f} = {out['L_NC1']:.5f} + {out['L_NC23']:.5f} + {out['L_perp']:.5f}")
    0.10405 = 0.00796 + 0.00019 + 0.09590
    """
    m = _moments(stats)
    W, b, bias = _check_classifier(W, b, *m.means.shape)
    lam_ = _resolve_lambda(lam, weight_decay, convention, m.means.shape[0])
    L = None
    if data_loss is not None:
        L = float(data_loss) + 0.5 * lam_ * (float(np.sum(W * W)) + float(b @ b))
    return _decompose(m, W, b, bias, lam_, L)


def mse_decomposition(
    H: Any,
    y: Any,
    W: Any,
    b: Any,
    lam: float | None = None,
    *,
    weight_decay: float | None = None,
    convention: LambdaConvention = "mse_mean",
    K: int | None = None,
) -> dict[str, float]:
    """Exact decomposition of the [Han et al. 2022] MSE loss, Thms 1-2: ``L = L_NC1 + L_NC23 + L_perp``.

    Parameters
    ----------
    H : array-like of shape (N, d)
        Features.
    y : array-like of shape (N,)
        Labels in ``0..K-1``.
    W : array-like of shape (K, d)
        Classifier.
    b : array-like of shape (K,) or None
        Bias; None for a bias-free model (the LS classifier is then fitted without bias too).
    lam : float, optional
        The [Han et al. 2022] lambda. Or ``weight_decay=`` with ``convention=`` (:func:`paper_lambda`), not both.
    weight_decay : float, optional
        The optimiser's weight decay, converted by ``convention``.
    convention : {"mse_mean", "mse_sum", "paper"}, default="mse_mean"
        See :data:`LAMBDA_CONVENTIONS`.
    K : int, optional
        Number of classes (default: ``max(y) + 1``).

    Returns
    -------
    dict of str to float
        The keys :data:`DECOMPOSITION_KEYS`: ``L`` (computed directly from the residuals ``H W^T + b - Y``),
        ``L_LS`` (the loss of the LS classifier, evaluated separately), ``L_NC1``, ``L_NC23`` (Thm 2), ``L_perp``
        (Thm 1, >= 0, = 0 iff ``(W, b) = (W_LS, b_LS)`` when ``lam > 0``),
        ``identity_residual = |L - (L_NC1 + L_NC23 + L_perp)|``, ``ls_residual = |L_LS - (L_NC1 + L_NC23)|``,
        ``proximity_ratio = L_perp / L_LS`` and ``lambda``.

    Examples
    --------
    A zero classifier on a simplex ETF, where the LS classifier fits exactly: all of ``L = 1/2`` is ``L_perp``.

    >>> import numpy as np
    >>> from nclab.geometry import simplex_etf
    >>> H, y = simplex_etf(3, 2), np.arange(3)  # one feature per class
    >>> from nclab.theory import mse_decomposition
    >>> out = mse_decomposition(H, y, np.zeros((3, 2)), np.zeros(3), lam=0.0)
    >>> print(f"{out['L']:.6f} {out['L_NC1']:.6f} {out['L_NC23']:.6f} {out['L_perp']:.6f}")
    0.500000 0.000000 0.000000 0.500000
    """
    H = check_features(H, name="H")
    y = check_labels(y, K=K, name="y", num_rows=H.shape[0])
    stats = ClassStats.from_arrays(H, y, K=K)
    m = _moments(stats)
    W, b, bias = _check_classifier(W, b, *m.means.shape)
    K = m.means.shape[0]
    lam_ = _resolve_lambda(lam, weight_decay, convention, K)
    R = H @ W.T + b
    R[np.arange(len(y)), y] -= 1.0
    L = 0.5 * float(np.sum(R * R)) / len(y) + 0.5 * lam_ * (float(np.sum(W * W)) + float(b @ b))
    return _decompose(m, W, b, bias, lam_, L)


def decomposition_table(
    records: Iterable[Mapping[str, Any]],
    lam: float | None = None,
    *,
    weight_decay: float | None = None,
    convention: LambdaConvention = "mse_mean",
) -> list[dict[str, float]]:
    """[Han et al. 2022, Fig. 2] table: one decomposition row per measured epoch of a training run.

    Each record is a mapping with ``"epoch"``, ``"W"``, ``"b"`` (None for a bias-free head) and either
    ``"stats"`` (ClassStats, ``track="full"``, of the penultimate features of the train split, eval mode) or
    ``"H"`` and ``"y"`` arrays; optional ``"data_loss"`` (see :func:`mse_decomposition_from_stats`) and
    ``"train_error"`` (copied through, for the zero-error line). Returns rows ``{"epoch", *DECOMPOSITION_KEYS}``.

    Parameters
    ----------
    records : iterable of mapping
        One mapping per measured epoch, as above.
    lam : float, optional
        The [Han et al. 2022] lambda; or ``weight_decay`` with ``convention``, not both.
    weight_decay : float, optional
        The optimiser's weight decay, converted by ``convention``.
    convention : {"mse_mean", "mse_sum", "paper"}, default="mse_mean"
        See :data:`LAMBDA_CONVENTIONS`.

    Returns
    -------
    list of dict
        One row per record, ``{"epoch", *DECOMPOSITION_KEYS}`` (plus ``"train_error"`` when given).

    Raises
    ------
    ValueError
        If a record has neither ``"stats"`` nor both ``"H"`` and ``"y"``.

    Examples
    --------
    >>> import numpy as np
    >>> from nclab.geometry import simplex_etf
    >>> H, y = simplex_etf(3, 2), np.arange(3)  # one feature per class
    >>> from nclab.theory import decomposition_table
    >>> rec = {"epoch": 3, "H": H, "y": y, "W": np.zeros((3, 2)), "b": np.zeros(3), "train_error": 0.0}
    >>> row = decomposition_table([rec], lam=0.0)[0]
    >>> print(row["epoch"], round(row["L"], 6), round(row["L_perp"], 6), row["train_error"])
    3.0 0.5 0.5 0.0
    """
    rows: list[dict[str, float]] = []
    for rec in records:
        if "stats" in rec:
            out = mse_decomposition_from_stats(
                rec["stats"],
                rec["W"],
                rec.get("b"),
                lam,
                weight_decay=weight_decay,
                convention=convention,
                data_loss=rec.get("data_loss"),
            )
        elif "H" in rec and "y" in rec:
            out = mse_decomposition(
                rec["H"], rec["y"], rec["W"], rec.get("b"), lam, weight_decay=weight_decay, convention=convention
            )
        else:
            raise ValueError("each record needs 'stats' or both 'H' and 'y'")
        row = {"epoch": float(rec.get("epoch", len(rows))), **out}
        if "train_error" in rec:
            row["train_error"] = float(rec["train_error"])
        rows.append(row)
    return rows
