"""Closed-form UFM optima ([Tirer & Bruna 2022], reconstructed and derived in [Tirer & Bruna 2022]), pure functions of
``(K, n, d, lambdas)`` in the [Tirer & Bruna 2022] convention (``convention="penalty_mean"`` maps the [Wang et al. 2024]
normalisation).

Row layout: class means ``M (K, d)`` (row k = h̄_k), so the papers' ``H̄^T H̄`` is ``M M^T`` here; the logit
matrix of the class means is ``M W^T + 1 b^T`` (row k = logits of class k). ``J = I_K - 11^T/K``.

* Thm 3.1 (bias-free, eq. (5)): ``c = K sqrt(n lam_H lam_W)``; c < 1: ``M M^T = rho I``,
  ``rho = sqrt(lam_W/(n lam_H)) (1 - c)``, ``W = sqrt(n lam_H/lam_W) M``, ``L* = c - c^2/2``; else 0, ``1/2``.
* Thm 3.2 (free bias, eq. (14)): ``b = 1/K``, ``M M^T = sqrt(lam_W/(n lam_H)) (1-c) J``,
  ``L* = (K-1)(2c - c^2)/(2K)``; else ``(K-1)/(2K)``.
* Regularised bias [Tirer & Bruna 2022]: switch at ``lam_b = c/(1-c)``.
* Thm 4.1/4.2 (extended, eqs. (23)/(24); [derived] quartic): ``beta = (n lam_H1 lam_W1 lam_W2)^(1/3)``,
  ``t^4 - t + K beta = 0``, nonzero iff ``K^3 n lam_H1 lam_W1 lam_W2 < 1/16``,
  ``L* = (1-p)^2/2 + (3/2) K beta t^2`` with ``p = t^3``. Depth ``L`` (``q = L + 1`` factors) generalises
  it: ``beta = (n lam_H1 prod lam_Wl)^(1/q)``, ``t^(2q-2) - t^(q-2) + K beta = 0``, ``p = t^q``,
  ``L* = (1-p)^2/2 + (q/2) K beta t^2`` (three-term AM-GM becomes q-term; [derived], linear chain only).
* CE with weight decay (derived here from the ETF theorem of [Zhu et al. 2021]): with ``x = w_k . h̄_k``,
  ``g(x) = log(1 + (K-1) e^{-K x/(K-1)}) + c x``; nonzero iff ``c < 1``, ``e^{-Kx/(K-1)} = c/(K - (K-1)c)``.
* Thm 5.1 (fixed perturbed features): :func:`attenuation_factor`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nclab.ufm.models import ModelSpec, as_spec, make_spec

__all__ = [
    "Optimum",
    "attenuation_factor",
    "extended_root",
    "extended_threshold",
    "optimum",
    "optimum_for_spec",
    "ridge_solution",
    "ridge_step",
    "threshold_c",
]


def threshold_c(K: int, n: int, lam_H: float, lam_W: float) -> float:
    """The [Tirer & Bruna 2022] threshold ``c = K sqrt(n lam_H lam_W)`` (Thm 3.1/3.2): the optimum is nonzero iff c <
    1."""
    return K * math.sqrt(n * lam_H * lam_W)


@dataclass(frozen=True)
class Optimum:
    """Predicted global optimum of a UFM.

    ``loss``: L*. ``nonzero``: whether the minimiser is nonzero. ``threshold`` / ``critical``: the
    dimensionless control parameter and its critical value (``c`` vs 1; ``K beta`` vs ``2^(-4/3)`` for the
    3-factor model). ``grams``: ``(K, K)`` matrices ``"H"`` (or ``"H1"``, ``"H2"``...: class-mean Grams
    ``M M^T``), ``"W"`` (classifier ``W W^T``), ``"WH"`` (class-mean logits without bias, ``M W^T``).
    ``bias``: ``b*`` or None. ``constants``: the named scalars (c, rho, beta, t, p, per-factor squared
    scales ...). :meth:`construct` builds an explicit minimiser.
    """

    model: str
    K: int
    n: int
    d: int
    lams: dict[str, float]
    loss: float
    nonzero: bool
    threshold: float
    critical: float
    grams: dict[str, np.ndarray]
    bias: np.ndarray | None = None
    constants: dict[str, float] = field(default_factory=dict)
    depth: int = 1
    activation: str = "linear"

    def construct(self, R: Any = None, *, seed: int | None = 0) -> dict[str, np.ndarray]:
        """An explicit global minimiser (parameters as in :func:`nclab.ufm.solve`).

        ``R``: an orthonormal ``(d, K)`` frame (``R^T R = I``), or a list of one frame per feature level for
        the extended models (``R1``, ``R2``, ...); drawn at random from ``seed`` when None. All minimisers
        are of this form up to the choice of ``R`` (compare invariants, never raw matrices). For the ReLU
        model the deeper frames are coordinate frames (non-negative features, disjoint supports), as in
        the proof of Thm 4.2.
        """
        K, n, d = self.K, self.n, self.d
        rng = np.random.default_rng(seed)
        levels = self.depth
        frames: list[np.ndarray | None] = list(R) if isinstance(R, list | tuple) else [R] + [None] * (levels - 1)
        if len(frames) != levels:
            raise ValueError(f"{self.model} needs {levels} frame(s), got {len(frames)}")
        checked: list[np.ndarray] = []
        for i, given in enumerate(frames):
            if given is None:
                if self.activation == "relu" and i >= 1:
                    given = np.eye(d)[:, rng.permutation(d)[:K]]
                else:
                    given = np.linalg.qr(rng.standard_normal((d, K)))[0]
            F = np.asarray(given, dtype=np.float64)
            if F.shape != (d, K) or not np.allclose(F.T @ F, np.eye(K), atol=1e-10):
                raise ValueError(f"frame {i} must be (d, K) = ({d}, {K}) with orthonormal columns")
            checked.append(F)
        if self.depth == 1:
            M = _factor_from_gram(self.grams["H"], checked[0])
            H = np.repeat(M, n, axis=0)
            W = self.constants["w_scale"] * M if self.nonzero else np.zeros((K, d))
            out = {"H": H, "W": W}
            if self.bias is not None:
                out["b"] = self.bias.copy()
            return out
        c = self.constants
        h = math.sqrt(c["H1_sq"])
        out = {"H1": np.repeat(h * checked[0].T, n, axis=0)}
        for i in range(1, self.depth):
            out[f"W{i}"] = math.sqrt(c[f"W{i}_sq"]) * checked[i] @ checked[i - 1].T
        out[f"W{self.depth}"] = math.sqrt(c[f"W{self.depth}_sq"]) * checked[-1].T
        return out


def _factor_from_gram(G: np.ndarray, R: np.ndarray) -> np.ndarray:
    """``M (K, d)`` with ``M M^T = G`` (PSD), ``M = V sqrt(Lambda) R_r^T`` on G's range (``r = rank G``)."""
    lam, V = np.linalg.eigh(G)
    keep = lam > 1e-14 * max(float(lam.max()), 1e-300)
    r = int(keep.sum())
    if r == 0:
        return np.zeros((G.shape[0], R.shape[0]))
    return (V[:, keep] * np.sqrt(lam[keep])) @ R[:, :r].T


def _need_positive(lams: Mapping[str, float], keys: tuple[str, ...], model: str) -> None:
    bad = [k for k in keys if not lams.get(k, 0.0) > 0]
    if bad:
        raise ValueError(f"the closed form of {model!r} needs lambda > 0 for {bad}")


def _need_dim(model: str, d: int, need: int, K: int, why: str) -> None:
    if d < need:
        raise ValueError(f"{model!r}: {why} needs d >= {need} (K={K}), got d={d}")


# ---------------------------------------------------------------------------------------------- two-factor MSE
def _two_factor(spec: ModelSpec) -> Optimum:
    K, n, d, lams, model = spec.K, spec.n, spec.d, spec.lams, spec.name
    _need_positive(lams, ("W", "H") + (("b",) if spec.bias == "ridge" else ()), model)
    lw, lh = lams["W"], lams["H"]
    c = threshold_c(K, n, lh, lw)
    s = math.sqrt(lw / (n * lh))  # M M^T = s * (logit Gram): W = M / s
    I, J, one = np.eye(K), np.eye(K) - 1.0 / K, np.ones((K, K)) / K
    u = max(1.0 - c, 0.0)
    consts: dict[str, float] = {"c": c, "w_scale": 1.0 / s}
    if spec.bias == "none":  # Thm 3.1
        logit = u * I
        loss = 0.5 - 0.5 * u**2
        bias = None
        consts["rho"] = s * u
        need = K
    elif spec.bias == "free":  # Thm 3.2
        logit = u * J
        loss = (K - 1) / (2 * K) * (1.0 - u**2)
        bias = np.full(K, 1.0 / K)
        consts["rho_E"] = (K - 1) / K * s * u
        need = K - 1
    else:  # regularised bias, [Tirer & Bruna 2022]
        lb = lams["b"]
        if c < 1 and lb > c / (1 - c):
            a = 1 - c - c / lb
            b0 = c / (K * lb)
            phi = 2 * c - c**2 - c**2 / lb
        else:
            a = 0.0
            b0 = 1.0 / (K * (1 + lb))
            phi = lb / (1 + lb)
        logit = u * J + a * one
        loss = ((K - 1) * (1.0 - u**2) + phi) / (2 * K)
        bias = np.full(K, b0)
        consts.update(a=a, b0=b0, switch=c / (1 - c) if c < 1 else math.inf)
        need = K if a > 0 else K - 1
    nonzero = c < 1
    if nonzero:
        _need_dim(model, d, need, K, "this optimum (an orthogonal frame)" if need == K else "a simplex ETF")
    grams = {"H": s * logit, "W": logit / s, "WH": logit.copy()}
    return Optimum(model, K, n, d, dict(lams), loss, nonzero, c, 1.0, grams, bias, consts)


# ---------------------------------------------------------------------------------------------- extended
def extended_root(Kbeta: float, q: int = 3) -> float | None:
    """Largest positive root ``t`` of ``t^(2q-2) - t^(q-2) + K beta = 0`` (q = 3: the quartic
    ``t^4 - t + K beta``), or None when there is none (``K beta > 3 * 4^(-4/3)`` for q = 3)."""
    coeffs = np.zeros(2 * q - 1)
    coeffs[0] = 1.0
    coeffs[q] -= 1.0  # t^(q-2) sits at index (2q-2) - (q-2) = q
    coeffs[-1] += Kbeta
    roots = np.roots(coeffs)
    real = roots[(np.abs(roots.imag) <= 1e-9 * np.maximum(1.0, np.abs(roots))) & (roots.real > 0)].real
    if real.size == 0:
        return None
    t = float(real.max())
    for _ in range(3):  # Newton polish of the numpy.roots value (companion-matrix roots lose a few digits)
        f = t ** (2 * q - 2) - t ** (q - 2) + Kbeta
        df = (2 * q - 2) * t ** (2 * q - 3) - ((q - 2) * t ** (q - 3) if q > 2 else 0.0)
        if df != 0:
            t -= f / df
    return t


def _extended_loss(Kbeta: float, q: int) -> tuple[float, float | None]:
    t = extended_root(Kbeta, q)
    if t is None:
        return 0.5, None
    p = t**q
    return (1 - p) ** 2 / 2 + q / 2 * Kbeta * t**2, t


def extended_threshold(q: int = 3) -> float:
    """Critical ``K beta`` above which zero is the global minimiser (q = 2: 1; q = 3: ``2^(-4/3)``,
    i.e. ``K^3 n lam_H1 lam_W1 lam_W2 = 1/16``); found by bisection on ``L*(K beta) = 1/2`` for q > 3."""
    if q == 2:
        return 1.0
    if q == 3:
        return 2.0 ** (-4.0 / 3.0)
    lo, hi = 0.0, 1.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if _extended_loss(mid, q)[0] < 0.5:
            lo = mid
        else:
            hi = mid
    return lo


def _extended(spec: ModelSpec) -> Optimum:
    K, n, d, lams, model, L = spec.K, spec.n, spec.d, spec.lams, spec.name, spec.depth
    if spec.activation == "relu" and L != 2:
        raise ValueError("the ReLU closed form (Thm 4.2) is for depth 2 only; deeper ReLU optima may not be OFs")
    keys = ("H1", *spec.weight_keys)
    _need_positive(lams, keys, model)
    q = L + 1
    beta = (n * math.prod(lams[k] for k in keys)) ** (1.0 / q)
    Kbeta = K * beta
    crit = extended_threshold(q)
    loss, t = _extended_loss(Kbeta, q)
    nonzero = t is not None and Kbeta < crit
    consts: dict[str, float] = {"beta": beta, "K_beta": Kbeta, "product": K**3 * n * math.prod(lams[k] for k in keys)}
    if not nonzero:
        t, loss = 0.0, 0.5
    else:
        _need_dim(model, d, K, K, "an orthogonal frame at every level")
    assert t is not None
    p = t**q
    consts.update(t=t, p=p)
    unit = beta * t**2  # per-direction balanced share: lam_H n h^2 = lam_Wl w_l^2 = beta t^2
    consts["H1_sq"] = unit / (n * lams["H1"])
    for k in spec.weight_keys:
        consts[f"{k}_sq"] = unit / lams[k]
    I = np.eye(K)
    grams = {"H1": consts["H1_sq"] * I}
    level = consts["H1_sq"]
    for i in range(1, L):
        level *= consts[f"W{i}_sq"]
        grams[f"H{i + 1}"] = level * I
    grams["W"] = consts[f"W{L}_sq"] * I
    grams["WH"] = p * I
    return Optimum(model, K, n, d, dict(lams), loss, nonzero, Kbeta, crit, grams, None, consts, L, spec.activation)


# ---------------------------------------------------------------------------------------------- CE
def _ce(spec: ModelSpec) -> Optimum:
    K, n, d, lams, model = spec.K, spec.n, spec.d, spec.lams, spec.name
    _need_positive(lams, ("W", "H"), model)
    if spec.bias == "ridge":
        _need_positive(lams, ("b",), model)
    c = threshold_c(K, n, lams["H"], lams["W"])
    s = math.sqrt(lams["W"] / (n * lams["H"]))
    if c < 1:
        e = c / (K - (K - 1) * c)
        x = -(K - 1) / K * math.log(e)
        loss = math.log(K / (K - (K - 1) * c)) + c * x
        _need_dim(model, d, K - 1, K, "a simplex ETF")
    else:
        x, loss = 0.0, math.log(K)
    logit = x * K / (K - 1) * (np.eye(K) - 1.0 / K)
    grams = {"H": s * logit, "W": logit / s, "WH": logit}
    bias = None if spec.bias == "none" else np.zeros(K)  # free bias: any constant vector is optimal
    consts = {"c": c, "x": x, "w_scale": 1.0 / s}
    return Optimum(model, K, n, d, dict(lams), loss, c < 1, c, 1.0, grams, bias, consts)


# ---------------------------------------------------------------------------------------------- entry points
def optimum_for_spec(spec: ModelSpec, *, strict: bool = False) -> Optimum | None:
    """Closed form for a :class:`ModelSpec`, or None when there is none (MUFM, ridge, CE extended models,
    zero lambdas, d too small); ``strict=True`` raises instead of returning None."""
    try:
        if spec.name in ("mufm", "ridge"):
            raise ValueError(
                f"{spec.name!r} has no closed-form optimum here: use the exact solver "
                "(nclab.ufm.solve(..., solver='alternating')) or nclab.ufm.closed_forms.ridge_solution"
            )
        if spec.loss == "ce":
            if spec.depth != 1:
                raise ValueError(
                    "no closed form for the CE extended models ([Tirer & Bruna 2022] reports ETFs empirically)"
                )
            return _ce(spec)
        if spec.depth == 1:
            return _two_factor(spec)
        return _extended(spec)
    except ValueError:
        if strict:
            raise
        return None


def optimum(problem: ModelSpec | str, **spec_options: Any) -> Optimum:
    """Predicted global optimum of a UFM problem (see the module docstring for the formulas and sources).

    Parameters
    ----------
    problem : ModelSpec or str
        A spec built by :func:`~nclab.ufm.models.make_spec`, or a model name with ``make_spec``'s keywords.
    **spec_options
        With a model name: ``K``, ``n``, ``d``, ``lams``, ``convention``, ``depth``, ``bias`` (as
        :func:`~nclab.ufm.models.make_spec`).

    Returns
    -------
    Optimum

    Raises
    ------
    ValueError
        An unknown model, negative or zero lambdas, or ``d`` below what the theorem needs (``d >= K`` for
        orthogonal frames, ``d >= K - 1`` for simplex ETFs) when the optimum is nonzero.

    Examples
    --------
    >>> from nclab.ufm.closed_forms import optimum
    >>> opt = optimum("mse-bias", K=4, n=5, d=8, lams={"W": 5e-3, "H": 5e-3})
    >>> print(f"{opt.loss:.6f} {opt.nonzero} {opt.threshold:.6f}")
    0.032791 True 0.044721
    >>> from nclab.ufm import make_spec
    >>> optimum(make_spec("mse-bias", K=4, n=5, d=8, lams={"W": 5e-3, "H": 5e-3})).loss == opt.loss
    True
    """
    out = optimum_for_spec(as_spec(problem, **spec_options), strict=True)
    assert out is not None
    return out


def attenuation_factor(K: int, n: int, lam_H: float, lam_W: float, sigma: float) -> float:
    """Thm 5.1 [Tirer & Bruna 2022, Sec. 5]: ``W_hat -> f W*`` with ``f = 1 / (1 + K sigma^2 sqrt(n lam_H / lam_W))``
    for features ``H* + E`` (i.i.d. noise of variance ``sigma^2``), n -> inf with ``n lam_H`` fixed."""
    if not (lam_H > 0 and lam_W > 0 and sigma >= 0):
        raise ValueError("attenuation_factor needs lam_H > 0, lam_W > 0, sigma >= 0")
    if threshold_c(K, n, lam_H, lam_W) >= 1:
        raise ValueError("Thm 5.1 needs c = K sqrt(n lam_H lam_W) < 1 (otherwise W* = 0)")
    return 1.0 / (1.0 + K * sigma**2 * math.sqrt(n * lam_H / lam_W))


def ridge_solution(H: Any, *, K: int, n: int, lam_W: float) -> np.ndarray:
    """Exact minimiser of [Tirer & Bruna 2022, eq. (25)] over ``W`` for fixed class-major features ``H (K n, d)``:
    ``W = Y^T H (H^T H + K n lam_W I)^{-1}`` (eq. (36), transposed)."""
    H = np.asarray(H, dtype=np.float64)
    d = H.shape[1] if H.ndim == 2 else 1
    spec = make_spec("ridge", K=K, n=n, d=d, lams={"W": lam_W}, H=H)
    if not lam_W > 0:
        raise ValueError("ridge_solution needs lam_W > 0")
    return ridge_step(spec, spec.fixed["H"])[0]


def ridge_step(spec: ModelSpec, H: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """Exact minimiser of the objective over ``(W, b)`` for fixed features ``H (N, d)`` (MSE).

    ``W = Y^T H (H^T H + N lam_W I)^{-1}`` without bias ([Tirer & Bruna 2022, eq. (36)], transposed;
    [Wang et al. 2024, Thm. 4](b)
    reads ``n lam_W`` in its convention); with a bias, the same ridge regression on ``[H, 1]`` with penalty
    ``N diag(lam_W I, lam_b)`` (``lam_b = 0`` for the free bias, eqs. (46)-(47)).
    """
    N, d = H.shape
    Y = spec.targets
    if spec.bias == "none":
        A, pen = H, np.full(d, N * spec.lam("W"))
    else:
        A = np.hstack([H, np.ones((N, 1))])
        pen = np.append(np.full(d, N * spec.lam("W")), N * spec.lam("b"))
    G = A.T @ A + np.diag(pen)
    Wa = np.linalg.solve(G, A.T @ Y).T  # (K, d [+1]); G is SPD when lam_W > 0 (and N > 0 for the bias column)
    if spec.bias == "none":
        return Wa, None
    return Wa[:, :d], Wa[:, d]
