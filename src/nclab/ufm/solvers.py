"""UFM solvers: float64 L-BFGS reference (multi-start), the papers' full-batch GD recipe, central-path
(W and b eliminated in closed form) and exact alternating minimisation (two-factor MSE models and the MUFM).

Entry point: :func:`solve` (``nclab.ufm.solve``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.optimize import minimize

from nclab.memory import check_allocation
from nclab.ufm.closed_forms import optimum_for_spec, ridge_step
from nclab.ufm.models import ModelSpec, as_spec, default_init_scale, evaluate, init_params

__all__ = [
    "SOLVERS",
    "UFMResult",
    "alternating",
    "balanced_start",
    "central_path",
    "gradient_descent",
    "lbfgs",
    "solve",
]

SOLVERS: tuple[str, ...] = ("lbfgs", "gd", "central", "alternating")

# Multipliers of the initial scale for successive L-BFGS starts: the 3-factor origin is a strict local
# minimum [Tirer & Bruna 2022, eq. (23)], so later starts also try larger inits.
_START_SCALES = (1.0, 3.0, 10.0, 0.3)


@dataclass
class UFMResult:
    """Output of :func:`solve`.

    Parameters
    ----------
    model : str
        The model name.
    solver : str
        The solver that produced it.
    spec : ModelSpec
        The solved instance.
    loss : float
        The full objective ([Tirer & Bruna 2022] convention).
    params : dict of str to ndarray
        ``"W"/"H"/"b"`` (two-factor, MUFM, ridge) or ``"H1", "W1", ..., "W{depth}"`` (extended; ``W{depth}`` is the
        classifier, ``"W2"`` for the paper's depth 2); features ``(K n, d)`` class-major, ``W (K, d)``.
    history : list of dict
        Rows of a table (``iter, loss, grad_norm, gap`` and, every ``metrics_every`` GD steps,
        ``<level>/<metric>`` entries).
    grad_norm : float
        Norm of the gradient at the returned point.
    theory : Optimum or None
        The closed-form :class:`~nclab.ufm.closed_forms.Optimum` when one exists, else None.
    info : dict
        Solver details.

    Examples
    --------
    >>> from nclab.ufm import solve
    >>> res = solve("mse-bias-free", K=3, n=2, d=4, lams={"W": 0.01, "H": 0.01})
    >>> sorted(res.params), res.params["H"].shape, abs(res.gap) < 1e-10
    (['H', 'W'], (6, 4), True)
    """

    model: str
    solver: str
    spec: ModelSpec
    loss: float
    params: dict[str, np.ndarray]
    history: list[dict[str, float]]
    grad_norm: float
    theory: Any = None
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def gap(self) -> float | None:
        """``loss - L*`` when the theory is known (>= 0 up to rounding at a correct closed form)."""
        return None if self.theory is None else self.loss - self.theory.loss

    def levels(self) -> dict[str, np.ndarray]:
        """Every feature level (``H``; or ``H1``, ``pre-ReLU``, ``H2`` ...), each ``(K n, d)``."""
        from nclab.ufm.analysis import feature_levels

        return feature_levels(self.spec, self.params)

    def collapse_reports(self, **kwargs: Any) -> dict[str, dict[str, float]]:
        """:func:`nclab.metrics.collapse_report` of every feature level (see :mod:`nclab.ufm.analysis`)."""
        from nclab.ufm.analysis import collapse_reports

        return collapse_reports(self.spec, self.params, **kwargs)


# ---------------------------------------------------------------------------------------------- helpers
def _flatten(params: Mapping[str, np.ndarray], keys: tuple[str, ...]) -> np.ndarray:
    return np.concatenate([np.asarray(params[k], dtype=np.float64).ravel() for k in keys])


def _unflatten(x: np.ndarray, spec: ModelSpec, keys: tuple[str, ...]) -> dict[str, np.ndarray]:
    shapes = spec.shapes()
    out: dict[str, np.ndarray] = dict(spec.fixed)
    i = 0
    for k in keys:
        size = int(np.prod(shapes[k]))
        out[k] = x[i : i + size].reshape(shapes[k])
        i += size
    return out


def _grad_norm(grads: Mapping[str, np.ndarray]) -> float:
    return float(np.sqrt(sum(float(np.vdot(g, g)) for g in grads.values())))


def _theory_loss(theory: Any) -> float | None:
    return None if theory is None else float(theory.loss)


def _row(it: int, loss: float, gnorm: float, theory: Any) -> dict[str, float]:
    L = _theory_loss(theory)
    return {"iter": float(it), "loss": loss, "grad_norm": gnorm, "gap": float("nan") if L is None else loss - L}


# ---------------------------------------------------------------------------------------------- L-BFGS
def lbfgs(
    spec: ModelSpec,
    *,
    seed: int = 0,
    starts: int | None = None,
    init_scale: float | Mapping[str, float] | None = None,
    gtol: float = 1e-12,
    ftol: float = 1e-16,
    maxiter: int = 20000,
    maxcor: int = 10,
    init: Mapping[str, np.ndarray] | None = None,
    theory: Any = None,
) -> tuple[dict[str, np.ndarray], list[dict[str, float]], dict[str, Any]]:
    """Reference solver: scipy L-BFGS-B (``jac=True``, float64) on the flattened free parameters.

    ``starts`` starts (default 1 for two-factor models, 4 for extended ones), start ``s`` using seed
    ``seed + s`` and init scale ``init_scale * (1, 3, 10, 0.3)[s % 4]`` (papers' scales by default); the best
    final objective wins. For the extended models with ``starts >= 2`` the last start is a *balanced
    collapsed* point (:func:`balanced_start`): near the first-order threshold the all-directions-nonzero
    basin is small and random starts end in minima with fewer active directions [Tirer & Bruna 2022, Thm. 4.1].
    ``init`` replaces the first start. Returns (params, history, info); history has one row per start.
    """
    keys = spec.free_keys
    if starts is None:
        starts = 1 if spec.depth == 1 else 4
    if starts < 1:
        raise ValueError(f"starts must be >= 1, got {starts}")
    base = default_init_scale(spec)
    if isinstance(init_scale, Mapping):
        base.update({k: float(v) for k, v in init_scale.items()})
    elif init_scale is not None:
        base = dict.fromkeys(base, float(init_scale))

    def fun(x: np.ndarray) -> tuple[float, np.ndarray]:
        ev = evaluate(spec, _unflatten(x, spec, keys))
        return ev.loss, _flatten(ev.grads, keys)

    best: tuple[float, np.ndarray] | None = None
    history: list[dict[str, float]] = []
    nit_total = 0
    for s in range(starts):
        if s == 0 and init is not None:
            p0 = {k: np.asarray(init[k], dtype=np.float64) for k in keys}
        elif spec.depth > 1 and starts >= 2 and s == starts - 1:
            p0 = balanced_start(spec, np.random.default_rng(seed + s))
        else:
            mult = _START_SCALES[s % len(_START_SCALES)]
            p0 = init_params(spec, np.random.default_rng(seed + s), {k: v * mult for k, v in base.items()})
        res = minimize(
            fun,
            _flatten(p0, keys),
            jac=True,
            method="L-BFGS-B",
            options={"maxiter": maxiter, "maxfun": 2 * maxiter, "gtol": gtol, "ftol": ftol, "maxcor": maxcor},
        )
        nit_total += int(res.nit)
        gnorm = float(np.linalg.norm(res.jac))
        row = _row(int(res.nit), float(res.fun), gnorm, theory)
        row["start"] = float(s)
        history.append(row)
        if best is None or res.fun < best[0]:
            best = (float(res.fun), res.x)
    assert best is not None
    return _unflatten(best[1], spec, keys), history, {"starts": starts, "iterations": nit_total}


def balanced_start(spec: ModelSpec, rng: np.random.Generator, noise: float = 0.01) -> dict[str, np.ndarray]:
    """Collapsed, balanced start for the chain models: random orthonormal frames ``R_l`` (coordinate frames
    after a ReLU, so the features are non-negative), ``H1 = h R_0^T`` per class, ``W_l = w_l R_l R_{l-1}^T``,
    classifier ``w R^T``, with the per-direction product ``h prod w_l = 1`` (the unregularised fit, not the
    theory's p*) split so that ``n lam_H h^2 = lam_l w_l^2``; plus ``noise`` N(0, 1) entries."""
    K, n, d, L = spec.K, spec.n, spec.d, spec.depth
    if d < K:
        return init_params(spec, rng)
    keys = ("H1", *spec.weight_keys)
    weights = np.array([n * spec.lam("H1")] + [spec.lam(k) for k in spec.weight_keys])
    weights = np.where(weights > 0, weights, 1.0)
    # a_i^2 = g / weights_i with prod a_i = 1  =>  g = prod(weights)^(1/q)
    g = float(np.exp(np.mean(np.log(weights))))
    scales = np.sqrt(g / weights)
    frames = []
    for i in range(L):
        if spec.activation == "relu" and i >= 1:
            frames.append(np.eye(d)[:, rng.permutation(d)[:K]])
        else:
            frames.append(np.linalg.qr(rng.standard_normal((d, K)))[0])
    out = {"H1": np.repeat(scales[0] * frames[0].T, n, axis=0)}
    for i in range(1, L):
        out[keys[i]] = scales[i] * frames[i] @ frames[i - 1].T
    out[keys[L]] = scales[L] * frames[-1].T
    out = {k: v + noise * rng.standard_normal(v.shape) for k, v in out.items()}
    if spec.bias != "none":
        out["b"] = np.zeros(K)
    return out


# ---------------------------------------------------------------------------------------------- GD
def gradient_descent(
    spec: ModelSpec,
    *,
    seed: int = 0,
    lr: float = 0.1,
    iters: int = 100_000,
    init_scale: float | Mapping[str, float] | None = None,
    init: Mapping[str, np.ndarray] | None = None,
    log_every: int = 100,
    metrics_every: int = 5000,
    stop_gap: float | None = None,
    theory: Any = None,
) -> tuple[dict[str, np.ndarray], list[dict[str, float]], dict[str, Any]]:
    """Plain full-batch GD, the papers' recipe ([Tirer & Bruna 2022, Sec. 6]: lr 0.1, N(0,1) or 0.1 N(0,1) init,
    NC metrics every 5e3 iterations; [Wang et al. 2024, Sec. IV-B]: lr 0.1, N(0,1) init).

    Logs ``iter, loss, grad_norm, gap`` every ``log_every`` steps (1 = the papers' per-iteration objective)
    and NC metrics of every feature level every ``metrics_every`` steps (0 disables). Stops early when
    ``|loss - L*| <= stop_gap`` (needs the theory) or when the iterate is no longer finite (``info["diverged"]``).
    """
    if lr <= 0 or iters < 0 or log_every < 1 or metrics_every < 0:
        raise ValueError("need lr > 0, iters >= 0, log_every >= 1, metrics_every >= 0")
    keys = spec.free_keys
    params = (
        {**spec.fixed, **{k: np.array(init[k], dtype=np.float64) for k in keys}}
        if init is not None
        else init_params(spec, np.random.default_rng(seed), init_scale)
    )
    info: dict[str, Any] = {"diverged": False, "stopped_at": iters}
    with np.errstate(over="ignore", invalid="ignore"):  # divergence is detected and reported, not warned
        history = _gd_loop(spec, params, keys, lr, iters, log_every, metrics_every, stop_gap, theory, info)
    return params, history, info


def _gd_loop(
    spec: ModelSpec,
    params: dict[str, np.ndarray],
    keys: tuple[str, ...],
    lr: float,
    iters: int,
    log_every: int,
    metrics_every: int,
    stop_gap: float | None,
    theory: Any,
    info: dict[str, Any],
) -> list[dict[str, float]]:
    """The GD iterations of :func:`gradient_descent` (updates ``params`` and ``info`` in place)."""
    from nclab.ufm.analysis import quick_metrics

    ev = evaluate(spec, params)
    L_star = _theory_loss(theory)
    history: list[dict[str, float]] = []
    for it in range(iters + 1):
        gnorm = _grad_norm(ev.grads)
        if not (np.isfinite(ev.loss) and np.isfinite(gnorm)):
            info["diverged"] = True
            info["stopped_at"] = it
            break
        done = it == iters or (stop_gap is not None and L_star is not None and abs(ev.loss - L_star) <= stop_gap)
        if it % log_every == 0 or done:
            row = _row(it, ev.loss, gnorm, theory)
            if metrics_every and (it % metrics_every == 0 or done):
                row.update(quick_metrics(spec, params))
            history.append(row)
        if done:
            info["stopped_at"] = it
            break
        for k in keys:
            params[k] = params[k] - lr * ev.grads[k]
        ev = evaluate(spec, params)
    return history


# ---------------------------------------------------------------------------------------------- closed-form blocks
def _check_two_factor_mse(spec: ModelSpec, what: str) -> None:
    if spec.depth != 1 or spec.loss != "mse" or spec.fixed:
        raise ValueError(f"the {what} solver needs a two-factor MSE model (mse-*, mufm), got {spec.name!r}")


def _h_step(spec: ModelSpec, W: np.ndarray, b: np.ndarray | None) -> np.ndarray:
    """Exact minimiser over ``H`` for fixed ``(W, b)``: ``H = ((Y - 1 b^T) W + N lam X)(W^T W + N lam I)^{-1}``
    ([Wang et al. 2024, Sec. 3.7] in its convention: ``(W^T W + lam I)^{-1}(W^T Y + lam X)``, transposed)."""
    N, lam = spec.N, spec.lam(spec.feature_key)
    T = spec.targets if b is None else spec.targets - b
    rhs = T @ W
    if spec.X is not None:
        rhs = rhs + N * lam * spec.X
    G = W.T @ W + N * lam * np.eye(spec.d)
    return np.linalg.solve(G, rhs.T).T


def alternating(
    spec: ModelSpec,
    *,
    seed: int = 0,
    iters: int = 200_000,
    gtol: float = 1e-11,
    patience: int = 2000,
    init: Mapping[str, np.ndarray] | None = None,
    init_scale: float | None = None,
    theory: Any = None,
    log_every: int = 100,
) -> tuple[dict[str, np.ndarray], list[dict[str, float]], dict[str, Any]]:
    """Exact block-coordinate minimisation ([Wang et al. 2024, Thm. 4]): ``(W, b) <- ridge_step(H)``, then
    ``H <- _h_step(W, b)``; each step minimises a strictly convex quadratic, so the objective never increases.

    Starts at ``H = X`` for the MUFM (as [Wang et al. 2024, Sec. IV-B] prescribes) and at ``H ~ N(0,1)`` otherwise
    (``H = 0`` is a
    fixed point of the UFM). Stops when the gradient norm (after an H step only the W/b part is nonzero)
    is <= ``gtol``, when it has not decreased by 1% in ``patience`` sweeps, or after ``iters`` sweeps.
    Convergence is linear and can be slow (about 3e4 sweeps for the [Wang et al. 2024] K=5, n=100, d=20 configuration).
    """
    _check_two_factor_mse(spec, "alternating")
    if init is not None:
        H = np.array(init[spec.feature_key], dtype=np.float64)
    elif spec.X is not None and np.any(spec.X):
        H = spec.X.copy()
    else:
        H = (1.0 if init_scale is None else init_scale) * np.random.default_rng(seed).standard_normal((spec.N, spec.d))
    history: list[dict[str, float]] = []
    best_g, best_it, it = np.inf, 0, 0
    W, b = ridge_step(spec, H)
    for it in range(1, iters + 1):
        W, b = ridge_step(spec, H)
        H = _h_step(spec, W, b)
        ev = evaluate(spec, _pack(spec, H, W, b))
        gnorm = _grad_norm(ev.grads)
        if gnorm < 0.99 * best_g:
            best_g, best_it = gnorm, it
        # stop at gtol, or when the gradient has stalled (rounding floor) for `patience` sweeps
        stop = gnorm <= gtol or it - best_it >= patience
        if it % log_every == 0 or it == 1 or stop:
            history.append(_row(it, ev.loss, gnorm, theory))
        if stop:
            break
    # last sweep's (W, b) with H = argmin_H given them: the H-stationarity identity holds to rounding
    return _pack(spec, H, W, b), history, {"sweeps": it}


def _pack(spec: ModelSpec, H: np.ndarray, W: np.ndarray, b: np.ndarray | None) -> dict[str, np.ndarray]:
    out = {spec.feature_key: H, "W": W}
    if b is not None:
        out["b"] = b
    return out


# L-BFGS history length of the central-path solver; its workspace dominates that solver's memory
_CENTRAL_MAXCOR = 30


def central_path(
    spec: ModelSpec,
    *,
    seed: int = 0,
    init: Mapping[str, np.ndarray] | None = None,
    init_scale: float | None = None,
    gtol: float = 1e-12,
    ftol: float = 1e-16,
    maxiter: int = 20000,
    theory: Any = None,
) -> tuple[dict[str, np.ndarray], list[dict[str, float]], dict[str, Any]]:
    """L-BFGS over ``H`` alone on the reduced objective ``L(W*(H), b*(H), H)`` ([Tirer & Bruna 2022] App. A.1 "central
    path"; [Wang et al. 2024, eq. (20)]). By the envelope theorem its gradient is ``dL/dH`` at ``(W*(H), b*(H))``."""
    _check_two_factor_mse(spec, "central-path")
    fk = spec.feature_key
    if init is not None:
        H0 = np.array(init[fk], dtype=np.float64)
    else:
        H0 = (1.0 if init_scale is None else init_scale) * np.random.default_rng(seed).standard_normal((spec.N, spec.d))

    def fun(x: np.ndarray) -> tuple[float, np.ndarray]:
        H = x.reshape(spec.N, spec.d)
        ev = evaluate(spec, _pack(spec, H, *ridge_step(spec, H)))
        return ev.loss, ev.grads[fk].ravel()

    res = minimize(
        fun,
        H0.ravel(),
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": maxiter, "maxfun": 2 * maxiter, "gtol": gtol, "ftol": ftol, "maxcor": _CENTRAL_MAXCOR},
    )
    H = res.x.reshape(spec.N, spec.d)
    params = _pack(spec, H, *ridge_step(spec, H))
    return params, [_row(int(res.nit), float(res.fun), float(np.linalg.norm(res.jac)), theory)], {"iterations": res.nit}


# ---------------------------------------------------------------------------------------------- entry point
_SPEC_OPTIONS = ("convention", "loss", "depth", "bias", "X", "H")


def _problem(problem: ModelSpec | str, seed: int, solver: str, options: dict[str, Any]) -> tuple[ModelSpec, int | None]:
    """The spec of ``problem`` and the MUFM's ``layers``; pops the problem's keywords from ``options`` (what is left
    goes to the solver)."""
    layers = options.pop("layers", None)
    if isinstance(problem, ModelSpec):
        given = sorted(k for k in ("K", "n", "d", "lams", *_SPEC_OPTIONS) if k in options)
        if given or layers is not None:
            raise TypeError(f"a ModelSpec carries its own problem; got {given or ['layers']} as well")
        _check_size(problem.K, problem.n, problem.d, solver, options)
        return problem, None
    K, n, d = options.pop("K", None), options.pop("n", None), options.pop("d", None)
    lams = dict(options.pop("lams", {}) or {})
    _check_size(K, n, d, solver, options)
    spec_kw = {k: options.pop(k) for k in _SPEC_OPTIONS if k in options}
    if problem == "mufm":
        if spec_kw.get("X") is None and all(isinstance(v, int) for v in (K, n, d)):
            from nclab.ufm.mufm import gaussian_data

            spec_kw["X"] = gaussian_data(K, n, d, seed=seed)
        if layers is not None:
            if isinstance(layers, bool) or not isinstance(layers, int) or layers < 1:
                raise ValueError(f"layers must be an int >= 1, got {layers!r}")
            if "transport" in lams:
                lams["transport"] = float(lams["transport"]) / layers
    elif layers is not None:
        raise ValueError("layers applies to the 'mufm' model only")
    return as_spec(problem, K=K, n=n, d=d, lams=lams, **spec_kw), layers


def _check_size(K: Any, n: Any, d: Any, solver: str, options: Mapping[str, Any]) -> None:
    """Refuse a UFM that does not fit before building it. Measured peaks (tracemalloc) are about 5 arrays of
    the one-hot targets' size (K, K n) -- targets, scores, residual, gradients -- plus copies of the variables
    H (d, K n), W (K, d), b (K): L-BFGS-B keeps ``2 maxcor + 5`` in its workspace and about 17 more in the
    objective, line search and best start (42 at ``maxcor=10``; 81 for ``central``, whose ``maxcor`` is 30);
    gradient descent and the alternating solver about 7."""
    if not all(isinstance(v, int | np.integer) and not isinstance(v, bool) and v >= 1 for v in (K, n, d)):
        return  # make_spec names the bad size
    if solver == "lbfgs":
        maxcor = options.get("maxcor", 10)
        copies = 2 * (maxcor if isinstance(maxcor, int) and maxcor >= 1 else 10) + 22
    elif solver == "central":
        copies = 2 * _CENTRAL_MAXCOR + 22
    else:
        copies = 10
    variables = float(d) * K * n + float(K) * d + K
    check_allocation(
        8.0 * (6.0 * K * K * n + copies * variables),
        what=f"a UFM solve with K={K}, n={n}, d={d} (targets K x Kn, features d x Kn, {solver} solver copies)",
        alternative="use a smaller K, n or d; the closed-form optimum (nclab.ufm.closed_forms) needs no solve",
    )


def solve(problem: ModelSpec | str, *, solver: str = "lbfgs", seed: int = 0, **options: Any) -> UFMResult:
    """Solve a UFM numerically.

    Parameters
    ----------
    problem : ModelSpec or str
        The UFM problem: a spec built by :func:`nclab.ufm.models.make_spec`, or a model name of
        :data:`nclab.ufm.models.UFM_MODELS` with ``make_spec``'s keywords among ``options``: ``mse-bias-free``
        [Tirer & Bruna 2022, eq. (5)], ``mse-bias`` (eq. (14), free bias), ``mse-regbias`` (eq. (3), ridge bias),
        ``extended-linear`` (eq. (23)), ``extended-relu`` (eq. (24)), ``ce-wd`` (CE with weight decay), ``mufm``
        [Wang et al. 2024, eq. (13)], ``ridge`` (eq. (25), fixed features ``H=``).
    solver : {"lbfgs", "gd", "central", "alternating"}
        ``lbfgs``: float64 multi-start reference (:func:`lbfgs`); ``gd``: the papers' recipe
        (:func:`gradient_descent`); ``central``: W (and b) eliminated (:func:`central_path`);
        ``alternating``: exact block minimisation (:func:`alternating`; the MUFM's exact solver).
    seed : int
        Seeds the initialisation (and the MUFM data when ``X`` is not given).
    **options
        With a model name, the problem: ``K, n, d, lams`` (ridge weights keyed as in ``make_spec``, in the
        [Tirer & Bruna 2022] convention unless ``convention="penalty_mean"``) and ``convention, loss, depth,
        bias, X, H``; ``layers`` (MUFM: ``lams["transport"]`` is the weight of the multilayer form (12) with that
        many layers; it is solved as the reduced form (13) with ``transport / layers``, the corrected Thm 3 of
        [Wang et al. 2024], and the equally spaced intermediate layers are returned in ``info["layers"]``).
        Always: ``theory=False`` skips the closed form; the rest go to the solver.

    Returns
    -------
    UFMResult

    Examples
    --------
    A tiny UFM with a free (unregularised) bias: the exact alternating solver reaches the closed-form optimum.

    >>> from nclab.ufm import make_spec, solve
    >>> res = solve("mse-bias", K=3, n=2, d=4, lams={"W": 5e-3, "H": 5e-3}, solver="alternating")
    >>> print(f"{res.loss:.8f} {res.theory.loss:.8f}")
    0.01399214 0.01399214

    The same problem as a value:

    >>> spec = make_spec("mse-bias", K=3, n=2, d=4, lams={"W": 5e-3, "H": 5e-3})
    >>> solve(spec, solver="alternating").loss == res.loss
    True
    """
    if solver not in SOLVERS:
        raise ValueError(f"unknown solver {solver!r}; known: {', '.join(SOLVERS)}")
    want_theory = options.pop("theory", True)
    spec, layers = _problem(problem, seed, solver, options)
    theory = None
    if want_theory:
        theory = optimum_for_spec(spec)
    t0 = time.perf_counter()
    if solver == "lbfgs":
        params, history, info = lbfgs(spec, seed=seed, theory=theory, **options)
    elif solver == "gd":
        params, history, info = gradient_descent(spec, seed=seed, theory=theory, **options)
    elif solver == "central":
        params, history, info = central_path(spec, seed=seed, theory=theory, **options)
    else:
        params, history, info = alternating(spec, seed=seed, theory=theory, **options)
    info["seconds"] = time.perf_counter() - t0
    with np.errstate(over="ignore", invalid="ignore"):  # a diverged GD run is reported in info, not warned
        ev = evaluate(spec, params)
    if spec.name == "mufm" and layers is not None:
        from nclab.ufm.mufm import equally_spaced_layers

        assert spec.X is not None  # a mufm spec always has its data (the spec refuses one without)
        info["layers"] = equally_spaced_layers(spec.X, params["H"], layers)
    return UFMResult(spec.name, solver, spec, ev.loss, params, history, _grad_norm(ev.grads), theory, info)
