"""Linear probes on frozen features: multinomial logistic regression by L-BFGS along an L2 path.

The protocol of [Kornblith et al. 2019, Sec. 3] that [Xu & Liu 2023, Sec. 6.3] uses for transfer: a multinomial
logistic regression on frozen penultimate features, trained with L-BFGS; the L2 strength is chosen on a
validation split from a log-spaced grid, then the probe is refit on train + validation with that strength and
scored on the test split.

Objective, for features ``X: (N, d)``, labels ``y: (N,)`` in ``[0, K)``, coefficients ``W: (K, d)`` and an
unpenalised intercept ``b: (K,)``:

    J(W, b) = (1/N) sum_i [ logsumexp_k (W x_i + b)_k - (W x_i + b)_{y_i} ] + (lam / 2) ||W||_F^2 .

This is scikit-learn's ``LogisticRegression(C=C, solver="lbfgs")`` objective divided by ``C N``, so the two
have the same minimiser when ``lam = 1 / (C N)`` (:func:`sklearn_c`). Everything is solved in float64, on the
CPU or a CUDA device, and a path of strengths is solved from the strongest to the weakest penalty, each fit
warm-started from the previous solutions (the secant through the last two in ``log lam``; the strongly penalised
problems are well conditioned and cheap, and the warm start then saves most of the iterations of the weakly
penalised ones).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import torch
import torch.nn.functional as F
from scipy import optimize

from nclab._threads import scipy_blas_threads

__all__ = [
    "DEFAULT_L2_GRID",
    "LogisticProbe",
    "ProbeResult",
    "Score",
    "fit_logistic",
    "linear_probe",
    "logistic_path",
    "mean_per_class_accuracy",
    "probe_options",
    "sklearn_c",
    "task_data_options",
    "top1_accuracy",
]

#: The grid of [Xu & Liu 2023, Sec. 6.3]: 97 log-spaced strengths in [1e-6, 1e6], 8 per decade (as ``lam``).
DEFAULT_L2_GRID: np.ndarray = np.logspace(-6, 6, 97)

Score = Literal["top1", "mean_per_class"]


def probe_options(probe: Mapping[str, Any]) -> dict[str, Any]:
    """A study's ``probe`` mapping as keyword arguments of :func:`linear_probe`: ``lams`` may be a list, or
    ``{start, stop, num}`` (log-spaced, ``np.logspace``), or absent (:data:`DEFAULT_L2_GRID`).

    Parameters
    ----------
    probe : mapping
        A study's ``probe`` section: ``lams`` and any other keyword of :func:`linear_probe` (``max_iter``, ...).

    Returns
    -------
    dict
        The keywords, ``lams`` as a float64 array of L2 strengths.

    See Also
    --------
    linear_probe : takes them.

    Examples
    --------
    >>> kw = probe_options({"lams": {"start": 1e-2, "stop": 1e2, "num": 5}, "max_iter": 50})
    >>> kw["lams"].tolist(), kw["max_iter"]
    ([0.01, 0.1, 1.0, 10.0, 100.0], 50)
    """
    kw = dict(probe)
    lams = kw.pop("lams", None)
    if lams is None:
        kw["lams"] = DEFAULT_L2_GRID
    elif isinstance(lams, Mapping):
        kw["lams"] = np.logspace(np.log10(lams["start"]), np.log10(lams["stop"]), int(lams["num"]))
    else:
        kw["lams"] = np.asarray(lams, dtype=np.float64)
    return kw


def task_data_options(task: Mapping[str, Any]) -> dict[str, Any]:
    """A study's downstream ``task`` mapping as the dataset options of its loader (``nclab.data.load`` /
    ``open_images``): its ``options``, with its ``classes`` (when given) as a list.

    Parameters
    ----------
    task : mapping
        One entry of a study's ``downstream`` list (``dataset``, ``options``, ``classes``, ...).

    Returns
    -------
    dict
        The keyword arguments for the dataset, a new dict.

    See Also
    --------
    probe_options : the ``probe`` section as keywords of :func:`linear_probe`.

    Examples
    --------
    >>> task_data_options({"dataset": "digits", "options": {"mode": "L"}, "classes": (3, 5)})
    {'mode': 'L', 'classes': [3, 5]}
    """
    opts = dict(task.get("options") or {})
    if task.get("classes") is not None:
        opts["classes"] = list(task["classes"])
    return opts


def _as_features(X: Any, name: str) -> torch.Tensor:
    t = torch.as_tensor(X)
    if t.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array (N, d), got shape {tuple(t.shape)}")
    if t.shape[0] == 0:
        raise ValueError(f"{name} has no rows")
    if not t.is_floating_point():
        t = t.to(torch.float64)
    if not bool(torch.isfinite(t).all()):
        raise ValueError(f"{name} contains NaN or infinite values")
    return t


def _as_labels(y: Any, n: int, name: str, K: int | None = None) -> torch.Tensor:
    t = torch.as_tensor(y)
    if t.ndim != 1 or t.shape[0] != n:
        raise ValueError(f"{name} must be a 1-D array of {n} labels, got shape {tuple(t.shape)}")
    if t.is_floating_point() or t.is_complex():
        raise ValueError(f"{name} must hold integer class labels, got dtype {t.dtype}")
    t = t.to(torch.int64)
    if n and int(t.min()) < 0:
        raise ValueError(f"{name} has negative labels")
    if K is not None and n and int(t.max()) >= K:
        raise ValueError(f"{name} has label {int(t.max())} >= K={K}")
    return t


def sklearn_c(lam: float, N: int) -> float:
    """scikit-learn's ``C`` with the same minimiser as strength ``lam`` on ``N`` rows: ``1/(lam N)``.

    Parameters
    ----------
    lam : float
        The L2 strength of the module objective, ``lam > 0``.
    N : int
        ``N``, the number of training rows, ``N >= 1``.

    Returns
    -------
    float
        ``C = 1 / (lam N)`` for ``LogisticRegression(C=C)``.

    Raises
    ------
    ValueError
        If ``lam <= 0`` or ``N < 1``.

    Examples
    --------
    >>> sklearn_c(1e-3, 500)
    2.0
    """
    if not lam > 0:
        raise ValueError(f"lam must be > 0, got {lam!r}")
    if N < 1:
        raise ValueError(f"N must be >= 1, got {N!r}")
    return 1.0 / (lam * N)


def top1_accuracy(y_true: Any, y_pred: Any) -> float:
    """Fraction of ``y_pred`` equal to ``y_true`` (both ``(N,)``).

    Parameters
    ----------
    y_true : array_like, shape (N,)
        True labels.
    y_pred : array_like, shape (N,)
        Predicted labels.

    Returns
    -------
    float
        Accuracy in [0, 1].

    Raises
    ------
    ValueError
        If the arrays are empty, not 1-D, or of different lengths.

    See Also
    --------
    mean_per_class_accuracy : the balanced accuracy.

    Examples
    --------
    >>> top1_accuracy([0, 0, 0, 1], [0, 0, 0, 0])
    0.75
    """
    t, p = np.asarray(y_true), np.asarray(y_pred)
    if t.shape != p.shape or t.ndim != 1 or t.size == 0:
        raise ValueError(f"y_true and y_pred must be non-empty 1-D arrays of one length, got {t.shape} and {p.shape}")
    return float(np.mean(t == p))


def mean_per_class_accuracy(y_true: Any, y_pred: Any) -> float:
    """Mean over the classes present in ``y_true`` of the per-class recall (balanced accuracy).

    Parameters
    ----------
    y_true : array_like, shape (N,)
        True labels; a class absent from ``y_true`` does not count.
    y_pred : array_like, shape (N,)
        Predicted labels.

    Returns
    -------
    float
        ``(1/K') sum_k recall_k`` over the ``K'`` classes present in ``y_true``, in [0, 1].

    Raises
    ------
    ValueError
        If the arrays are empty, not 1-D, or of different lengths.

    See Also
    --------
    top1_accuracy : the plain accuracy.

    Examples
    --------
    >>> mean_per_class_accuracy([0, 0, 0, 1], [0, 0, 0, 0])  # recalls 1 and 0
    0.5
    """
    t, p = np.asarray(y_true), np.asarray(y_pred)
    if t.shape != p.shape or t.ndim != 1 or t.size == 0:
        raise ValueError(f"y_true and y_pred must be non-empty 1-D arrays of one length, got {t.shape} and {p.shape}")
    classes = np.unique(t)
    return float(np.mean([np.mean(p[t == c] == c) for c in classes]))


_SCORES = {"top1": top1_accuracy, "mean_per_class": mean_per_class_accuracy}


@dataclass
class LogisticProbe:
    """A fitted multinomial logistic probe: ``coef (K, d)``, ``intercept (K,)`` (float64 tensors).

    Parameters
    ----------
    coef : torch.Tensor, shape (K, d)
        The coefficients ``W``, float64.
    intercept : torch.Tensor, shape (K,)
        The unpenalised intercept ``b``, float64.
    lam : float
        The L2 strength it was fitted at.
    n_iter : int
        L-BFGS iterations of the fit.
    grad_norm : float
        ``max |dJ/dtheta|`` at the solution.

    See Also
    --------
    fit_logistic : fits one.

    Examples
    --------
    >>> probe = LogisticProbe(torch.eye(2, dtype=torch.float64), torch.zeros(2, dtype=torch.float64), 1.0, 0, 0.0)
    >>> probe.decision_function(np.array([[2.0, 1.0]])).tolist(), probe.predict(np.array([[0.0, 3.0]])).tolist()
    ([[2.0, 1.0]], [1])
    """

    coef: torch.Tensor
    intercept: torch.Tensor
    lam: float
    n_iter: int
    grad_norm: float  # max |gradient| of J at the solution

    def decision_function(self, X: Any) -> torch.Tensor:
        """Logits ``X W^T + b``, ``(N, K)``."""
        x = _as_features(X, "X").to(self.coef.device, torch.float64)
        if x.shape[1] != self.coef.shape[1]:
            raise ValueError(f"X has {x.shape[1]} columns, the probe was fitted on {self.coef.shape[1]}")
        return torch.addmm(self.intercept, x, self.coef.T)

    def predict(self, X: Any) -> np.ndarray:
        """Predicted class of each row, ``(N,)``."""
        return self.decision_function(X).argmax(dim=1).cpu().numpy()


def _lbfgs(
    x: torch.Tensor, y: torch.Tensor, K: int, lam: float, theta: torch.Tensor, max_iter: int, tol: float
) -> tuple[torch.Tensor, int, float]:
    """Minimise J over ``theta = [W | b]`` (K, d + 1), starting at ``theta``.

    SciPy's L-BFGS-B drives the iterations (the solver scikit-learn uses, with a robust line search) on a flat
    float64 vector; the loss and its closed-form gradient ``((P - Y)^T [X | 1]) / N + lam [W | 0]`` are two
    matrix products, in numpy on the CPU and in torch on ``x``'s device otherwise (then only the K (d + 1)
    parameters cross to the host per evaluation).
    """
    N, d = x.shape
    if x.device.type == "cpu":
        # numpy on the CPU: the two products through OpenBLAS, without torch's intra-op pool (whose idle threads
        # spin against BLAS's: the torch version of this function ran 3-6x slower on 2 cores). The two (N, d) x
        # (d, K) products are nearly all of the time; the rest works in place in one buffer reused by every
        # evaluation (logits -> shifted -> exp -> P -> P - Y), takes z_{i y_i} by indexing instead of a one-hot
        # product, and scales by 1 / N on the (K, d) gradient instead of the (N, K) matrix. Row blocks whose
        # (rows, K) logits (~2 MB) stay in cache through those passes: on the whole (N, K) matrix they ran from
        # memory (~20% of an evaluation at 50,000 x 100).
        X, labels = x.numpy(), y.numpy()
        rows_per_block = max(1, min(N, (1 << 18) // K))
        rows = np.arange(rows_per_block)
        buf = np.empty((rows_per_block, K))
        part = np.empty((K, d))

        def fun(flat: np.ndarray) -> tuple[float, np.ndarray]:
            th = flat.reshape(K, d + 1)
            W, b = np.ascontiguousarray(th[:, :d]), th[:, d]
            gW, gb, total = np.zeros((K, d)), np.zeros(K), 0.0
            for start in range(0, N, rows_per_block):
                Xb, lab = X[start : start + rows_per_block], labels[start : start + rows_per_block]
                n, r = Xb.shape[0], rows[: Xb.shape[0]]
                Z = np.matmul(Xb, W.T, out=buf[:n])
                Z += b
                m = Z.max(axis=1)
                total -= float(Z[r, lab].sum())
                Z -= m[:, None]
                np.exp(Z, out=Z)
                s = Z.sum(axis=1)
                total += float(m.sum()) + float(np.log(s).sum())
                Z /= s[:, None]
                Z[r, lab] -= 1.0  # P - Y
                gW += np.matmul(Z.T, Xb, out=part)
                gb += Z.sum(axis=0)
            loss = total / N + 0.5 * lam * float(np.einsum("kj,kj->", W, W))
            grad = np.empty_like(th)
            grad[:, :d] = gW * (1.0 / N) + lam * W
            grad[:, d] = gb / N
            return loss, grad.ravel()

    else:
        onehot = F.one_hot(y, K).to(x.dtype)

        def fun(flat: np.ndarray) -> tuple[float, np.ndarray]:
            th = torch.from_numpy(flat).to(x.device).view(K, d + 1)
            W, b = th[:, :d], th[:, d]
            logits = torch.addmm(b, x, W.T)
            lse = torch.logsumexp(logits, dim=1)
            loss = (lse.sum() - (logits * onehot).sum()) / N + 0.5 * lam * (W * W).sum()
            G = (torch.exp(logits - lse[:, None]) - onehot) / N
            grad = torch.empty_like(th)
            grad[:, :d] = G.T @ x + lam * W
            grad[:, d] = G.sum(dim=0)
            return float(loss), grad.cpu().numpy().ravel()

    # L-BFGS-B's own vector work runs on scipy's BLAS, the loss's products on numpy's: scipy's pool on one
    # thread keeps its spinning threads off the cores numpy's products need (1.6-1.9x faster on 2 cores)
    with scipy_blas_threads(1):
        res = optimize.minimize(
            fun,
            theta.detach().cpu().numpy().ravel(),
            jac=True,
            method="L-BFGS-B",
            options={"maxiter": max_iter, "maxfun": 2 * max_iter, "gtol": tol, "ftol": 0.0, "maxls": 50},
        )
    grad = float(np.abs(res.jac).max())
    return torch.from_numpy(res.x).to(x.device).view(K, d + 1), int(res.nit), grad


def _prepare(X: Any, y: Any, K: int | None, device: Any) -> tuple[torch.Tensor, torch.Tensor, int]:
    x = _as_features(X, "X")
    labels = _as_labels(y, x.shape[0], "y", K)
    K = int(K) if K is not None else int(labels.max()) + 1
    if K < 2:
        raise ValueError(f"a probe needs at least 2 classes, got K={K}")
    dev = torch.device(device) if device is not None else x.device
    return x.to(dev, torch.float64), labels.to(dev), K


def logistic_path(
    X: Any,
    y: Any,
    lams: Sequence[float] | np.ndarray,
    *,
    K: int | None = None,
    init: LogisticProbe | None = None,
    max_iter: int = 500,
    tol: float = 1e-9,
    device: Any = None,
) -> list[LogisticProbe]:
    """Fit the probe at every strength of ``lams``, strongest first, each warm-started from the previous ones (the
    first at ``init``, else at a one-step estimate of its solution; the second at the first solution; later ones
    at the secant through the last two solutions in ``log lam``).

    Parameters
    ----------
    X : array_like or torch.Tensor, shape (N, d)
        Frozen features; solved in float64 on ``device`` (default: where ``X`` is).
    y : array_like, shape (N,)
        Integer labels in ``[0, K)``.
    lams : sequence of float
        Strengths ``lam > 0`` of the module objective (any order; the result follows this order).
    K : int, optional
        ``K``, the number of classes; default ``max(y) + 1``.
    init : LogisticProbe, optional
        A probe to start the strongest fit from (default: a one-step estimate).
    max_iter : int, default=500
        L-BFGS iterations per strength.
    tol : float, default=1e-9
        Stop when ``max |dJ/dtheta| <= tol``.
    device : str or torch.device, optional
        Where to solve (default: where ``X`` is).

    Returns
    -------
    list of LogisticProbe
        One per entry of ``lams``, in that order.

    Raises
    ------
    ValueError
        If ``lams`` is empty or holds a strength that is not finite and positive, ``max_iter < 1``, ``X`` or
        ``y`` is malformed (shape, NaN, negative or non-integer labels), fewer than 2 classes, or ``init`` has
        the wrong shape.

    See Also
    --------
    fit_logistic : one strength.
    linear_probe : the whole validation protocol.

    Examples
    --------
    >>> X = np.array([[0.0], [1.0], [2.0], [3.0]]); y = np.array([0, 0, 1, 1])
    >>> [p.predict(X).tolist() for p in logistic_path(X, y, [1e-3, 10.0])]
    [[0, 0, 1, 1], [0, 0, 1, 1]]
    """
    lam_arr = np.asarray(lams, dtype=np.float64).ravel()
    if lam_arr.size == 0 or not np.all(lam_arr > 0) or not np.all(np.isfinite(lam_arr)):
        raise ValueError("lams must be a non-empty sequence of finite strengths > 0")
    if max_iter < 1:
        raise ValueError(f"max_iter must be >= 1, got {max_iter!r}")
    x, labels, K = _prepare(X, y, K, device)
    d = x.shape[1]
    if init is not None:
        if tuple(init.coef.shape) != (K, d):
            raise ValueError(f"init has coef shape {tuple(init.coef.shape)}, expected {(K, d)}")
        theta = torch.cat([init.coef, init.intercept[:, None]], dim=1).to(x)
    else:
        theta = _cold_start(x, labels, K, float(lam_arr.max()))
    out: dict[int, LogisticProbe] = {}
    solved: list[tuple[float, torch.Tensor]] = []  # (lam, solution) in path order
    for i in np.argsort(-lam_arr, kind="stable"):
        lam = float(lam_arr[i])
        theta, n_iter, grad = _lbfgs(x, labels, K, lam, _path_start(solved, lam, theta), max_iter, tol)
        solved = [*solved[-1:], (lam, theta)]  # the secant needs the last two
        out[int(i)] = LogisticProbe(theta[:, :d].clone(), theta[:, d].clone(), lam, n_iter, grad)
    return [out[i] for i in range(lam_arr.size)]


def _cold_start(x: torch.Tensor, labels: torch.Tensor, K: int, lam: float) -> torch.Tensor:
    """``[W | b]`` to start the strongest penalty ``lam`` from: ``b = log`` of the class frequencies ``f`` (the
    exact optimum of the bias alone: there the bias gradient vanishes) and one gradient step from ``W = 0``,
    ``W = (S / N - f mean(x)^T) / (lam + c)`` (``S`` the class sums). With ``c = max_k f_k Tr Cov(x)``, a bound on
    the data term's curvature in ``W`` at that point, the step is the solution to first order in ``1 / lam`` when
    the penalty dominates and a short, safe gradient step when it does not. From zero, the first fit of a
    20-strength path (20,000 x 512, K = 100, lam = 10) took 32 L-BFGS iterations, from here 9. A class without
    samples starts at the bias of half a sample (its optimum is ``-inf``)."""
    N, d = x.shape
    counts = torch.bincount(labels, minlength=K).to(x.dtype)
    freq = counts / N
    mean = x.mean(dim=0)
    # Tr Cov(x) without an (N, d) temporary; only a damping scale, so the cancellation for far-off data is harmless
    spread = max(float(torch.linalg.matrix_norm(x)) ** 2 / N - float(mean @ mean), 0.0)
    sums = torch.zeros((K, d), dtype=x.dtype, device=x.device).index_add_(0, labels, x)
    W = (sums / N - freq[:, None] * mean) / (lam + float(freq.max()) * spread)
    b = torch.log(torch.where(counts > 0, freq, torch.full_like(freq, 0.5 / N)))
    return torch.cat([W, b[:, None]], dim=1)


def _path_start(solved: Sequence[tuple[float, torch.Tensor]], lam: float, last: torch.Tensor) -> torch.Tensor:
    """Where the path starts the fit at ``lam``: the secant through the last two solutions in ``log lam``,
    ``theta_1 + t (theta_1 - theta_0)`` with ``t = log(lam / lam_1) / log(lam_1 / lam_0)`` (at most one step
    further), else the last solution (``last``). On a geometric grid this cut the L-BFGS evaluations of a
    20-strength path by ~28% (the solutions move smoothly in ``log lam``); each fit still runs to the same
    gradient tolerance, so only the starting point changes."""
    if len(solved) < 2:
        return last
    (lam0, theta0), (lam1, theta1) = solved[-2], solved[-1]
    if not (lam < lam1 < lam0):  # repeated strengths: nothing to extrapolate
        return last
    t = min(float(np.log(lam / lam1) / np.log(lam1 / lam0)), 1.0)
    return theta1 + t * (theta1 - theta0)


def fit_logistic(
    X: Any,
    y: Any,
    lam: float,
    *,
    K: int | None = None,
    init: LogisticProbe | None = None,
    max_iter: int = 1000,
    tol: float = 1e-9,
    device: Any = None,
) -> LogisticProbe:
    """The probe minimising the module objective at strength ``lam`` (see :func:`logistic_path`).

    Parameters
    ----------
    X : array_like or torch.Tensor, shape (N, d)
        Frozen features.
    y : array_like, shape (N,)
        Integer labels in ``[0, K)``.
    lam : float
        The L2 strength, ``lam > 0``.
    K : int, optional
        ``K``, the number of classes; default ``max(y) + 1``.
    init : LogisticProbe, optional
        Where to start (default: a one-step estimate of the solution).
    max_iter : int, default=1000
        L-BFGS iterations.
    tol : float, default=1e-9
        Stop when ``max |dJ/dtheta| <= tol``.
    device : str or torch.device, optional
        Where to solve (default: where ``X`` is).

    Returns
    -------
    LogisticProbe
        The fitted probe, ``coef (K, d)`` and ``intercept (K,)`` in float64.

    See Also
    --------
    logistic_path : a path of strengths, warm-started.
    sklearn_c : the equivalent scikit-learn ``C``.

    Examples
    --------
    >>> X = np.array([[0.0], [1.0], [2.0], [3.0]]); y = np.array([0, 0, 1, 1])
    >>> probe = fit_logistic(X, y, 1e-2)
    >>> probe.predict(X).tolist(), tuple(probe.coef.shape), probe.grad_norm <= 1e-9
    ([0, 0, 1, 1], (2, 1), True)
    """
    return logistic_path(X, y, [lam], K=K, init=init, max_iter=max_iter, tol=tol, device=device)[0]


@dataclass
class ProbeResult:
    """Outcome of :func:`linear_probe`: the chosen strength, the validation curve and the test scores.

    Parameters
    ----------
    lam : float
        The strength chosen on validation.
    top1 : float
        Test top-1 accuracy of the refit probe.
    mean_per_class : float
        Test mean per-class accuracy of the refit probe.
    score : {"top1", "mean_per_class"}
        The accuracy the strength was chosen by (and the one to report, :attr:`accuracy`).
    lams : numpy.ndarray, shape (L,)
        The grid of strengths.
    val_scores : numpy.ndarray, shape (L,)
        The validation ``score`` at each strength.
    probe : LogisticProbe or None, default=None
        The refit probe, when ``linear_probe(keep_probe=True)``.
    notes : list of str, default=[]
        What the scores do not say by themselves, in words.

    Examples
    --------
    >>> r = ProbeResult(0.1, top1=0.9, mean_per_class=0.8, score="mean_per_class",
    ...                 lams=np.array([0.1]), val_scores=np.array([0.85]))
    >>> r.accuracy
    0.8
    """

    lam: float
    top1: float  # test top-1 accuracy of the refit probe
    mean_per_class: float  # test mean per-class accuracy of the refit probe
    score: Score  # the accuracy the strength was chosen by (and the one to report)
    lams: np.ndarray = field(repr=False)
    val_scores: np.ndarray = field(repr=False)
    probe: LogisticProbe | None = field(default=None, repr=False)
    #: What the scores do not say by themselves (test classes the probe never saw in training), in words.
    notes: list[str] = field(default_factory=list)

    @property
    def accuracy(self) -> float:
        """The reported accuracy: ``top1`` or ``mean_per_class``, as ``score`` says."""
        return self.top1 if self.score == "top1" else self.mean_per_class


def _stratified_split(y: np.ndarray, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    val: list[np.ndarray] = []
    for c in np.unique(y):
        idx = rng.permutation(np.flatnonzero(y == c))
        val.append(idx[: round(fraction * idx.size)])
    v = np.sort(np.concatenate(val))
    return np.setdiff1d(np.arange(y.size), v), v


def linear_probe(
    train: tuple[Any, Any],
    test: tuple[Any, Any],
    val: tuple[Any, Any] | None = None,
    *,
    lams: Sequence[float] | np.ndarray = DEFAULT_L2_GRID,
    score: Score = "top1",
    val_fraction: float = 0.2,
    seed: int = 0,
    K: int | None = None,
    max_iter: int = 500,
    tol: float = 1e-9,
    device: Any = None,
    keep_probe: bool = False,
) -> ProbeResult:
    """The transfer probe of [Kornblith et al. 2019, Sec. 3]: choose ``lam`` on validation, refit, test.

    The path over ``lams`` is fitted on the training split (warm-started); the strength with the best
    validation ``score`` wins (ties go to the stronger penalty); the probe is refit on train + validation at that
    strength, warm-started at the winning training-split solution, and scored on ``test``. Test classes that
    never occur in train + validation are scored (as errors: the probe cannot predict them) and named in
    :attr:`ProbeResult.notes`.

    Parameters
    ----------
    train, test : tuple of (array_like (N, d), array_like (N,))
        ``(X, y)`` pairs of features and integer labels.
    val : tuple of (array_like, array_like), optional
        The validation split. Default: a stratified ``val_fraction`` of ``train`` drawn with ``seed``.
    lams : sequence of float, default=DEFAULT_L2_GRID
        The grid of strengths (:data:`DEFAULT_L2_GRID`: 97 values in [1e-6, 1e6]).
    score : {"top1", "mean_per_class"}, default="top1"
        The accuracy used for the choice and reported as :attr:`ProbeResult.accuracy` ([Xu & Liu 2023,
        Sec. 6.3] reports mean per-class accuracy on Aircraft, Pets, Caltech-101 and Flowers, top-1 elsewhere).
    val_fraction : float, default=0.2
        Fraction of each training class held out for validation when ``val`` is not given, in (0, 1).
    seed : int, default=0
        Seed of that split.
    K : int, optional
        ``K``, the number of classes; default: the largest label of the three splits plus one.
    max_iter : int, default=500
        L-BFGS iterations per strength.
    tol : float, default=1e-9
        Stop when ``max |dJ/dtheta| <= tol``.
    device : str or torch.device, optional
        Where to solve (default: where the features are).
    keep_probe : bool, default=False
        Keep the refit probe in :attr:`ProbeResult.probe`.

    Returns
    -------
    ProbeResult
        The chosen ``lam`` (ties: the strongest), the validation curve, and the refit probe's test accuracies;
        a test class never seen in training counts as errors and is named in ``notes``.

    Raises
    ------
    ValueError
        If ``score`` or ``val_fraction`` is out of range, the splits' columns differ, or as
        :func:`logistic_path` raises.

    See Also
    --------
    logistic_path : the warm-started solver.
    nclab.transfer.scores.mlog : combine the downstream accuracies of one model.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> y = np.repeat(np.arange(3), 40); X = rng.normal(size=(120, 4)) + 3 * np.eye(4)[y]
    >>> r = linear_probe((X[::2], y[::2]), (X[1::2], y[1::2]), lams=np.logspace(-4, 0, 5))
    >>> r.top1 > 0.9
    True
    """
    if score not in _SCORES:
        raise ValueError(f"score must be 'top1' or 'mean_per_class', got {score!r}")
    Xtr, ytr = _as_features(train[0], "train X"), np.asarray(train[1])
    if val is None:
        if not 0 < val_fraction < 1:
            raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction!r}")
        fit_idx, val_idx = _stratified_split(ytr, val_fraction, seed)
        Xfit, yfit, Xval, yval = Xtr[fit_idx], ytr[fit_idx], Xtr[val_idx], ytr[val_idx]
    else:
        Xfit, yfit = Xtr, ytr
        Xval, yval = _as_features(val[0], "val X"), np.asarray(val[1])
    Xte, yte = _as_features(test[0], "test X"), np.asarray(test[1])
    for name, Xs in (("val X", Xval), ("test X", Xte)):
        if Xs.shape[1] != Xtr.shape[1]:
            raise ValueError(f"{name} has {Xs.shape[1]} columns, train X has {Xtr.shape[1]}")
    K = int(K) if K is not None else int(max(ytr.max(), yval.max(), yte.max())) + 1
    lam_arr = np.asarray(lams, dtype=np.float64).ravel()
    path = logistic_path(Xfit, yfit, lam_arr, K=K, max_iter=max_iter, tol=tol, device=device)
    fn = _SCORES[score]
    val_scores = np.array([fn(yval, p.predict(Xval)) for p in path])
    best = val_scores.max()
    i = max((j for j in range(lam_arr.size) if val_scores[j] == best), key=lambda j: lam_arr[j])
    Xall = torch.cat([torch.as_tensor(Xfit, dtype=torch.float64), torch.as_tensor(Xval, dtype=torch.float64)])
    yall = np.concatenate([yfit, yval])
    final = fit_logistic(Xall, yall, float(lam_arr[i]), K=K, init=path[i], max_iter=max_iter, tol=tol, device=device)
    pred = final.predict(Xte)
    # a test class absent from train + validation: its logit's optimum is -inf, so it is never predicted
    unseen = np.setdiff1d(np.unique(yte), yall)
    notes = []
    if unseen.size:
        count = int(np.isin(yte, unseen).sum())
        notes.append(
            f"test labels {unseen.tolist()} never occur in the training data: the probe cannot predict them, so "
            f"their {count} test sample(s) all count as errors"
        )
    return ProbeResult(
        lam=float(lam_arr[i]),
        top1=top1_accuracy(yte, pred),
        mean_per_class=mean_per_class_accuracy(yte, pred),
        score=score,
        lams=lam_arr,
        val_scores=val_scores,
        probe=final if keep_probe else None,
        notes=notes,
    )
