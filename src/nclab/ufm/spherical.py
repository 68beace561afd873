"""Spherical UFMs of [Jiang et al. 2024]: the HardMax problem, the CE-UFM on the sphere and the weight-decay CE UFM.

Layout: a classifier ``W (K, d)`` has one unit row per class; features ``H (K, n, d)`` are ``n`` unit rows per
class (class-major; ``H.reshape(K * n, d)`` is the usual ``(N, d)``). [Jiang et al. 2024] writes columns.

All problems live on products of spheres (the oblique manifold). They are solved with Adam steps on the
Euclidean gradient of ``f(X / ||X||)`` followed by the renormalising retraction (at unit rows this gradient is
the Riemannian gradient ``g - <x, g> x``), batched over independent restarts, with a geometric continuation of
the temperature ``tau`` and of the step size ([Jiang et al. 2024]: plain GD at small ``tau`` stalls because CE
gradients scale like ``exp(-margin/tau)``; continuation and normalised steps fix it).

* HardMax (eq. (5)) with ``n`` features per class, via the smoothed HardMax
  ``tau LSE_{k, i, k' != k} <w_k' - w_k, h_ki> / tau``, ``tau -> 0`` (Lemma 3.1 and Thm 3.2: its minimisers tend
  to HardMax optima, whose ``W`` are Softmax Codes, value ``-rho*``).
* CE-UFM on the sphere (eq. (2)), with ``tau`` continuation and warm starts, through the CE in its margin form
  (:func:`log_mean_ce`), which stays exact in float64 where the usual ``LSE(z / tau) - z_k / tau`` rounds to 0.
* WD CE-UFM (eq. (B.1)): delegated to the UFM zoo (``nclab.ufm.solvers.solve("ce-wd", ...)``).

The codes themselves (Softmax Codes, Tammes codes, with an exact polish and a KKT certificate) are geometry:
:mod:`nclab.geometry.codes`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from scipy.optimize import minimize

from nclab.geometry.hull import hardmax_value, one_vs_one, one_vs_rest
from nclab.validation import unit_rows

__all__ = [
    "CESphereResult",
    "WDResult",
    "ce_ufm_sphere",
    "hardmax_ufm",
    "log_mean_ce",
    "smoothed_hardmax",
    "wd_ufm",
]


def _check_dk(d: int, K: int, restarts: int) -> None:
    if int(d) < 1 or int(K) < 2:
        raise ValueError(f"need d >= 1 and K >= 2, got d={d}, K={K}")
    if int(restarts) < 1:
        raise ValueError(f"restarts must be >= 1, got {restarts}")


def _unit(X: torch.Tensor) -> torch.Tensor:
    # random Gaussian starts and optimiser iterates: a zero row is a divergence, left visible as nan
    return unit_rows(X, zero="nan")


def _geometric(a: float, b: float, t: float) -> float:
    return a * (b / a) ** t


@contextmanager
def _threads_for(work: int) -> Iterator[None]:
    """Run small problems single-threaded: each step is microseconds of work, and intra-op threads only add
    synchronisation (15x slower measured on a loaded 2-core machine). The global setting is restored."""
    old = torch.get_num_threads()
    if work < 2_000_000 and old > 1:
        torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(old)


def _optimize(
    params: list[torch.Tensor],
    loss_fn: Callable[[list[torch.Tensor], float], torch.Tensor],
    *,
    steps: int,
    tau: tuple[float, float],
    lr: tuple[float, float],
) -> list[torch.Tensor]:
    """Adam + renormalising retraction on unit rows; ``tau`` and ``lr`` decay geometrically from the first to
    the second value over ``steps``. ``loss_fn`` must sum independent restarts (so their gradients separate)."""
    ps = [p.detach().clone().requires_grad_(True) for p in params]
    opt = torch.optim.Adam(ps, lr=lr[0])
    # the loss touches about (K n) x K logits per restart: the size of the work per step
    work = sum(p.numel() for p in ps) * ps[0].shape[-2]
    with _threads_for(work):
        _run(ps, opt, loss_fn, steps, tau, lr)
    return [p.detach() for p in ps]


def _run(
    ps: list[torch.Tensor],
    opt: torch.optim.Optimizer,
    loss_fn: Callable[[list[torch.Tensor], float], torch.Tensor],
    steps: int,
    tau: tuple[float, float],
    lr: tuple[float, float],
) -> None:
    for s in range(steps):
        t = s / max(1, steps - 1)
        for g in opt.param_groups:
            g["lr"] = _geometric(lr[0], lr[1], t)
        opt.zero_grad(set_to_none=True)
        loss = loss_fn([_unit(p) for p in ps], _geometric(tau[0], tau[1], t))
        loss.backward()
        opt.step()
        with torch.no_grad():
            for p in ps:
                p.copy_(_unit(p))


def _polish(
    params: list[torch.Tensor],
    loss_fn: Callable[[list[torch.Tensor], float], torch.Tensor],
    tau: float,
    maxiter: int = 5000,
) -> list[torch.Tensor]:
    """L-BFGS (SciPy, float64) on ``loss_fn([p / ||p|| for p in params], tau)`` from ``params``; returns unit rows.

    Adam with a decaying step ends within about its last step size of the minimiser; at small ``tau`` the
    objective is nearly flat along directions that move only the slack margins, and a displacement ``delta``
    there costs ``O(delta^2)`` in the margin but ``O(delta)`` in, e.g., the largest cosine. L-BFGS converges in
    those directions (measured at ``(3, 7)``, ``tau = 5e-4``: the largest cosine 0.2103 after the polish vs 0.2106
    after 1000 Adam steps alone; at ``tau >= 0.005`` the polish stops at once, the Adam point already having a
    gradient below ``1e-14``)."""
    shapes = [p.shape for p in params]
    sizes = [p.numel() for p in params]

    def unpack(x: torch.Tensor) -> list[torch.Tensor]:
        return [_unit(c.reshape(s)) for c, s in zip(torch.split(x, sizes), shapes, strict=True)]

    def fun(x: np.ndarray) -> tuple[float, np.ndarray]:
        t = torch.from_numpy(x).requires_grad_(True)
        value = loss_fn(unpack(t), tau)
        value.backward()
        assert t.grad is not None  # t requires grad
        return value.item(), t.grad.numpy()

    x0 = torch.cat([p.detach().reshape(-1) for p in params]).numpy()
    work = sum(sizes) * shapes[0][-2]
    with _threads_for(work):
        res = minimize(
            fun, x0, jac=True, method="L-BFGS-B",
            options={"maxiter": maxiter, "maxfun": 2 * maxiter, "gtol": 1e-14, "ftol": 1e-16, "maxcor": 30},
        )  # fmt: skip
    return [p.detach() for p in unpack(torch.from_numpy(res.x))]


def smoothed_hardmax(W: torch.Tensor, H: torch.Tensor, tau: float) -> torch.Tensor:
    """``tau * LSE_{k, i, k' != k} (<w_k', h_ki> - <w_k, h_ki>) / tau`` per batch element ([Jiang et al. 2024];
    Lemma A.1: within ``[L_HardMax, L_HardMax + tau log(n K (K-1))]``). ``W (..., K, d)``, ``H (..., K, n, d)``.

    Parameters
    ----------
    W : torch.Tensor of shape (..., K, d)
        Classifiers.
    H : torch.Tensor of shape (..., K, n, d)
        Features, ``n`` per class.
    tau : float
        Temperature, ``> 0``.

    Returns
    -------
    torch.Tensor of shape (...)
        The smoothed HardMax loss.

    Examples
    --------
    For a simplex ETF with ``H = W`` every margin is ``-K/(K-1)``, so the value is ``-3/2 + tau log 6``:

    >>> import torch
    >>> from nclab.geometry import simplex_etf
    >>> from nclab.ufm import smoothed_hardmax
    >>> W = torch.tensor(simplex_etf(3, 2))
    >>> print(f"{float(smoothed_hardmax(W, W[:, None, :], 0.01)):.6f}")
    -1.482082
    """
    Z = torch.einsum("...kid,...jd->...kij", H, W)  # <w_j, h_ki>
    own = torch.diagonal(Z, dim1=-3, dim2=-1)  # (..., n, K): <w_k, h_ki>
    A = Z - own.transpose(-1, -2).unsqueeze(-1)
    K = W.shape[-2]
    mask = torch.eye(K, dtype=torch.bool, device=W.device).unsqueeze(-2)  # (K, 1, K)
    A = A.masked_fill(mask, -math.inf)
    return tau * torch.logsumexp((A / tau).flatten(-3), dim=-1)


def _init(restarts: int, K: int, d: int, gen: torch.Generator, extra: tuple[int, ...] = ()) -> torch.Tensor:
    return _unit(torch.randn((restarts, K, *extra, d), generator=gen, dtype=torch.float64))


def _schedule(steps: int | None, K: int) -> int:
    return int(steps) if steps is not None else 1500 + 5 * K


def hardmax_ufm(
    d: int,
    K: int,
    n: int = 1,
    *,
    restarts: int = 4,
    seed: int = 0,
    steps: int | None = None,
    tau: tuple[float, float] = (0.2, 1e-4),
    lr: tuple[float, float] = (0.05, 1e-4),
) -> tuple[np.ndarray, np.ndarray, float]:
    """The HardMax problem [Jiang et al. 2024, eq. (5)] with ``n`` features per class, by the smoothed HardMax with
    ``tau`` continuation over ``restarts`` random starts (see the module docstring).

    Returns ``(W (K, d), H (K, n, d), L)``: the restart with the smallest exact ``L_HardMax(W, H)``. The optimal
    value is ``-max rho_one_vs_rest`` (Thm 3.2); ``H`` of a rattler class is not unique (Thm 3.5).

    Parameters
    ----------
    d : int
        Dimension.
    K : int
        Number of classes.
    n : int, default=1
        Features per class.
    restarts : int, default=4
        Random starts, optimised as one batch.
    seed : int, default=0
        Seed of the starts.
    steps : int, optional
        Adam steps (default ``1500 + 5 K``).
    tau : (float, float), default=(0.2, 1e-4)
        Temperature, decaying geometrically from the first to the second value.
    lr : (float, float), default=(0.05, 1e-4)
        Step size, decaying likewise.

    Returns
    -------
    W : ndarray of shape (K, d)
        Unit classifier rows.
    H : ndarray of shape (K, n, d)
        Unit features.
    L : float
        The exact HardMax loss ``L_HardMax(W, H)``.

    Examples
    --------
    In ``d = 2`` the optimum is the triangle, with value ``-rho = -(1 - cos(2 pi/3)) = -3/2``:

    >>> from nclab.ufm import hardmax_ufm
    >>> W, H, L = hardmax_ufm(2, 3, restarts=1, steps=100)
    >>> print(W.shape, H.shape, f"{L:.3f}")
    (3, 2) (3, 1, 2) -1.500
    """
    _check_dk(d, K, restarts)
    if int(n) < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    gen = torch.Generator().manual_seed(int(seed))
    W0 = _init(restarts, K, d, gen)
    H0 = W0.unsqueeze(-2) + 0.1 * torch.randn((restarts, K, n, d), generator=gen, dtype=torch.float64)
    W, H = _optimize(
        [W0, _unit(H0)],
        lambda p, t: smoothed_hardmax(p[0], p[1], t).sum(),
        steps=_schedule(steps, K),
        tau=tau,
        lr=lr,
    )
    Wn, Hn = W.numpy(), H.numpy()
    y = np.repeat(np.arange(K), n)
    vals = np.array([hardmax_value(Wn[r], Hn[r].reshape(K * n, d), y) for r in range(restarts)])
    r = int(np.argmin(vals))
    return unit_rows(Wn[r], zero="raise"), unit_rows(Hn[r], zero="raise"), float(vals[r])


@dataclass(frozen=True)
class CESphereResult:
    """CE-UFM on the sphere along a temperature path, from :func:`ce_ufm_sphere`.

    Parameters
    ----------
    taus : ndarray of shape (T,)
        The temperatures, in the order solved.
    Ws : list of ndarray of shape (K, d)
        The solution's classifier at each ``taus[i]``.
    Hs : list of ndarray of shape (K, n, d)
        Its features.
    losses : ndarray of shape (T,)
        Mean CE (0 once it is below the float64 range, around ``tau = 1e-3`` at ``(3, 7)``).
    max_cos : ndarray of shape (T,)
        Largest pairwise cosine of ``W``.
    rho : ndarray of shape (T,)
        ``rho_one_vs_rest(W)``.
    hardmax : ndarray of shape (T,)
        ``L_HardMax(W, H)``.
    log_losses : ndarray of shape (T,)
        The log of the mean CE (finite at any ``tau``; :func:`log_mean_ce`).

    Examples
    --------
    >>> from nclab.ufm import ce_ufm_sphere
    >>> res = ce_ufm_sphere(2, 3, taus=(0.5, 0.1), restarts=1, steps=20)
    >>> print(res.rho, res.max_cos, res.log_losses.round(4))  # the triangle: rho = 3/2, cosines -1/2
    [1.5 1.5] [-0.5 -0.5] [ -2.3547 -14.3069]
    """

    taus: np.ndarray
    Ws: list[np.ndarray]
    Hs: list[np.ndarray]
    losses: np.ndarray
    max_cos: np.ndarray
    rho: np.ndarray
    hardmax: np.ndarray
    log_losses: np.ndarray


#: below this ``s = log sum_j exp(-m_j / tau)`` the log of ``softplus(s)`` is ``s - e^s / 2`` to rounding (the next
#: term, ``e^(2s) / 24``, is below 1e-27 there); above it ``log(softplus(s))`` is computed directly
_LOG_SOFTPLUS_SWITCH = -30.0


def _log_softplus(s: torch.Tensor) -> torch.Tensor:
    """``log(log(1 + e^s))`` at any ``s``: ``softplus(s)`` underflows (to 0, a log of -inf) for ``s < -745``, but
    its log is ``s + log1p(-e^s / 2 + ...)``. Both branches get clamped inputs, so neither has an infinite or nan
    gradient (``torch.where`` multiplies the unused branch's gradient by 0, and ``0 * nan`` is nan)."""
    hi = s.clamp(min=_LOG_SOFTPLUS_SWITCH)
    lo = s.clamp(max=_LOG_SOFTPLUS_SWITCH)
    # logaddexp(s, 0) = log(1 + e^s) to rounding (torch's softplus returns s itself above s = 20, off by e^-s)
    softplus = torch.logaddexp(hi, torch.zeros_like(hi))
    return torch.where(s > _LOG_SOFTPLUS_SWITCH, torch.log(softplus), lo - 0.5 * torch.exp(lo))


def log_mean_ce(W: torch.Tensor, H: torch.Tensor, tau: float) -> torch.Tensor:
    """``log((1/(nK)) sum_{k,i} CE(W h_ki / tau, k))`` per batch element, in the margin form: exact in float64 at any
    ``tau`` [Jiang et al. 2024, eq. (1)-(2) and (C.2)].

    With the margins ``m_kij = <w_k - w_j, h_ki>`` (``j != k``), ``CE(W h_ki / tau, k) = log(1 + sum_{j != k}
    exp(-m_kij / tau)) = softplus(s_ki)``, ``s_ki = LSE_{j != k}(-m_kij / tau)``; so ``log CE_ki =
    log softplus(s_ki)`` (``~ s_ki``, of order ``-m / tau``, when the CE is tiny) and the result is
    ``LSE_{k,i}(log CE_ki) - log(nK)``. The usual form ``LSE_j(z_j / tau) - z_k / tau`` subtracts two numbers of
    size ``1 / tau``: once ``e^(-m / tau)`` is below ``eps / tau`` it rounds to exactly 0 (at ``(3, 7)``:
    ``tau <= 0.02``), and with it the gradients of the mean CE (``~ e^(-m / tau)``, far below Adam's ``eps``).
    ``tau * log_mean_ce`` is the surrogate ``L_0`` of (C.2) up to the constant ``tau log(nK)``: the same
    minimisers as the mean CE, and gradients that are convex combinations of margin gradients, of order 1 at any
    ``tau``. Where the usual form is representable the two agree to rounding (tested).

    ``W (..., K, d)``, ``H (..., K, n, d)``; returns ``(...)``.

    Parameters
    ----------
    W : torch.Tensor of shape (..., K, d)
        Classifiers.
    H : torch.Tensor of shape (..., K, n, d)
        Features, ``n`` per class.
    tau : float
        Temperature, ``> 0``.

    Returns
    -------
    torch.Tensor of shape (...)
        The log of the mean CE, finite even where the CE itself underflows to 0.

    Examples
    --------
    For a simplex ETF with ``H = W``, every CE is ``log(1 + 2 exp(-1.5/tau))``; at ``tau = 0.1``,
    ``log(log(1 + 2 e^-15)) = -14.30685``:

    >>> import torch
    >>> from nclab.geometry import simplex_etf
    >>> from nclab.ufm import log_mean_ce
    >>> W = torch.tensor(simplex_etf(3, 2))
    >>> print(f"{float(log_mean_ce(W, W[:, None, :], 0.1)):.5f}")
    -14.30685
    """
    Z = torch.einsum("...kid,...jd->...kij", H, W)  # <w_j, h_ki>
    own = torch.diagonal(Z, dim1=-3, dim2=-1).transpose(-1, -2).unsqueeze(-1)  # (..., K, n, 1): <w_k, h_ki>
    own_class = torch.eye(W.shape[-2], dtype=torch.bool, device=W.device).unsqueeze(-2)  # (K, 1, K): j == k
    s = torch.logsumexp(((Z - own) / tau).masked_fill(own_class, -math.inf), dim=-1)  # (..., K, n)
    return torch.logsumexp(_log_softplus(s).flatten(-2), dim=-1) - math.log(s.shape[-1] * s.shape[-2])


def ce_ufm_sphere(
    d: int,
    K: int,
    n: int = 1,
    *,
    taus: Sequence[float] = (1.0, 0.5, 0.2, 0.1, 0.05, 0.02),
    restarts: int = 4,
    seed: int = 0,
    steps: int = 1500,
    lr: tuple[float, float] = (0.05, 1e-4),
    polish: bool = True,
) -> CESphereResult:
    """UFM with the spherical constraint [Jiang et al. 2024, eq. (2)] at each temperature of ``taus`` (in the given
    order, each warm-started from the previous one: the continuation of [Jiang et al. 2024]).

    ``min_{W in OB(d,K), H in OB(d,nK)} (1/(nK)) sum_{k,i} CE(W h_ki / tau, k)``, solved as the minimisation of
    ``tau * log_mean_ce(W, H, tau)`` (the surrogate ``L_0`` of [Jiang et al. 2024, (C.2)]: a monotone function of the
    mean CE, so the same minimisers, but exact in float64 and with gradients of order 1 at any ``tau``; see
    :func:`log_mean_ce`). ``restarts`` random starts are carried along the whole path and the best by CE is kept
    at each ``tau``. Each stage runs ``steps`` Adam steps with the step size decaying from ``lr[0]`` to ``lr[1]``,
    then (``polish``) L-BFGS on every restart to the stage's minimiser: without it the solution at small ``tau``
    is converged in the margin but not in the directions that move only slack margins (see ``_polish``).

    Parameters
    ----------
    d : int
        Dimension.
    K : int
        Number of classes.
    n : int, default=1
        Features per class.
    taus : sequence of float, default=(1.0, 0.5, 0.2, 0.1, 0.05, 0.02)
        Temperatures, solved in this order.
    restarts : int, default=4
        Random starts carried along the path.
    seed : int, default=0
        Seed of the starts.
    steps : int, default=1500
        Adam steps per temperature.
    lr : (float, float), default=(0.05, 1e-4)
        Step size, decaying geometrically within each stage.
    polish : bool, default=True
        Finish each stage with L-BFGS.

    Returns
    -------
    CESphereResult
        The solution, its CE, margins and HardMax value at each temperature.

    Examples
    --------
    In ``d = 2`` with ``K = 3`` the solution is the triangle, a simplex ETF, at every temperature:

    >>> from nclab.ufm import ce_ufm_sphere
    >>> res = ce_ufm_sphere(2, 3, taus=(0.5, 0.1), restarts=1, steps=20)
    >>> print(res.rho, res.hardmax)
    [1.5 1.5] [-1.5 -1.5]
    """
    _check_dk(d, K, restarts)
    if int(n) < 1 or len(taus) == 0 or min(taus) <= 0:
        raise ValueError(f"need n >= 1 and positive taus, got n={n}, taus={list(taus)}")
    gen = torch.Generator().manual_seed(int(seed))
    W = _init(restarts, K, d, gen)
    H = _unit(W.unsqueeze(-2) + 0.5 * torch.randn((restarts, K, n, d), generator=gen, dtype=torch.float64))
    out: dict[str, list[Any]] = {k: [] for k in ("W", "H", "log_loss", "max_cos", "rho", "hardmax")}
    y = np.repeat(np.arange(K), n)

    def objective(p: list[torch.Tensor], tau: float) -> torch.Tensor:
        return tau * log_mean_ce(p[0], p[1], tau).sum()  # restarts summed: their gradients separate

    for tau in taus:
        W, H = _optimize([W, H], objective, steps=steps, tau=(tau, tau), lr=lr)
        if polish:
            W, H = _polish([W, H], objective, tau)
        log_losses = log_mean_ce(W, H, tau).numpy()
        r = int(np.argmin(log_losses))
        Wr, Hr = unit_rows(W[r].numpy(), zero="raise"), unit_rows(H[r].numpy(), zero="raise")
        out["W"].append(Wr)
        out["H"].append(Hr)
        out["log_loss"].append(float(log_losses[r]))
        out["max_cos"].append(one_vs_one(Wr).max_cos)
        out["rho"].append(one_vs_rest(Wr).rho)
        out["hardmax"].append(hardmax_value(Wr, Hr.reshape(K * n, d), y))
    log_loss = np.array(out["log_loss"])
    return CESphereResult(
        np.asarray(taus, dtype=np.float64), out["W"], out["H"], np.exp(log_loss), np.array(out["max_cos"]),
        np.array(out["rho"]), np.array(out["hardmax"]), log_loss,
    )  # fmt: skip


@dataclass(frozen=True)
class WDResult:
    """Weight-decay CE-UFM solution ([Jiang et al. 2024], eq. (B.1)), from :func:`wd_ufm`.

    Parameters
    ----------
    W : ndarray of shape (K, d)
        Classifier.
    H : ndarray of shape (K, n, d)
        Features.
    loss : float
        The objective.
    length_ratio : ndarray of shape (K,)
        ``||w_k|| / ||hbar_k||`` per class (Fig. B.2).
    mean_norms : ndarray of shape (K,)
        ``||hbar_k||``.
    cosines : ndarray of shape (K,)
        ``cos(w_k, hbar_k)``.

    Examples
    --------
    >>> from nclab.ufm import wd_ufm
    >>> res = wd_ufm(2, 3)
    >>> print(res.W.shape, res.H.shape, res.cosines.round(6), res.length_ratio.round(6))
    (3, 2) (3, 1, 2) [1. 1. 1.] [1. 1. 1.]
    """

    W: np.ndarray
    H: np.ndarray
    loss: float
    length_ratio: np.ndarray
    mean_norms: np.ndarray
    cosines: np.ndarray


def wd_ufm(d: int, K: int, n: int = 1, *, lam: float = 5e-3, seed: int = 0, starts: int = 1) -> WDResult:
    """Weight-decay CE UFM ([Jiang et al. 2024], eq. (B.1)):
    ``min (1/(nK)) sum CE(W h_ki, k) + (lam/2)(||W||^2 + ||H||^2)``
    (no temperature, no norm constraint; ``lam`` is unspecified in the paper, 5e-3 by default). This is the
    ``ce-wd`` model of the UFM zoo in its canonical [Tirer & Bruna 2022] lambda convention, solved there by L-BFGS.

    Parameters
    ----------
    d : int
        Dimension.
    K : int
        Number of classes.
    n : int, default=1
        Features per class.
    lam : float, default=5e-3
        Weight decay of both ``W`` and ``H``.
    seed : int, default=0
        Seed of the starts.
    starts : int, default=1
        Random starts; the best objective is kept.

    Returns
    -------
    WDResult
        The solution, its objective and the per-class norm ratios and cosines of ``W`` and the class means.

    Examples
    --------
    With equal weight decay the solution is self-dual: ``w_k`` parallel to, and as long as, its class mean.

    >>> from nclab.ufm import wd_ufm
    >>> res = wd_ufm(2, 3)
    >>> print(res.cosines.round(6), res.length_ratio.round(6), res.mean_norms.round(4))
    [1. 1. 1.] [1. 1. 1.] [1.8776 1.8776 1.8776]
    """
    from nclab.ufm.solvers import solve

    res = solve("ce-wd", K=K, n=n, d=d, lams={"W": lam, "H": lam}, solver="lbfgs", seed=seed, starts=starts)
    W = np.asarray(res.params["W"], dtype=np.float64)
    H = np.asarray(res.params["H"], dtype=np.float64).reshape(K, n, d)
    hbar = H.mean(axis=1)
    hn = np.linalg.norm(hbar, axis=1)
    wn = np.linalg.norm(W, axis=1)
    cos = np.einsum("kd,kd->k", W, hbar) / np.maximum(wn * hn, np.finfo(float).tiny)
    return WDResult(W, H, float(res.loss), wn / np.maximum(hn, np.finfo(float).tiny), hn, cos)
