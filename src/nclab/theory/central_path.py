"""Dynamics on the central path of [Han et al. 2022] (Sec. 3): the renormalised gradient flow and its closed forms.

[Han et al. 2022] writes C (classes), N (samples per class) and P (dimension); here they are K, n and d, and
N = K n is the total number of rows.

Unconstrained features, lambda = 0, balanced classes in class-major order (``y = repeat(arange(K), n)``; the
paper's "i then c" order), rows ``X (N, d)``. The loss is the central-path loss ``L_LS(X)`` (the MSE of the
LS classifier with bias), its gradient ``G = (1/N) (X W_LS^T + b_LS - Y) W_LS`` (envelope theorem, [Han et al. 2022]),
and the state lives on the renormalised manifold ``{X : Sigma_W(X) = I}``. Two tangent projections
([Han et al. 2022, App. D.2] and 3.7), written for rows with ``S = (X - M_X[y])^T Z / N``, ``Sym = S + S^T``:

* ``"oblique"`` (the paper's Prop. 4, and to first order the renormalise-after-each-step algorithm of
  App. D.1 it motivates): ``Pi(Z) = Z - 1/2 X Sym``. Its flow obeys ``domega/dt = omega / (K n (K + omega^2))``
  [derived; the paper's Prop. 2 is wrong for this flow], closed form ``K^2 n log w + (K n / 2) w^2 = a + t``.
* ``"orthogonal"`` (Frobenius-orthogonal): ``Pi(Z) = Z - 1/2 (X - M_X[y]) Sym``. Its flow is the paper's
  Lemma 5, ``domega/dt = omega / (n (K + omega^2)^2)``, closed form (Prop. 2)
  ``K^2 n log w + K n w^2 + (n/4) w^4 = a + t``.

Both keep the SNR singular vectors constant and drive max/min omega -> 1 (the ETF limit). Integration is adaptive
(DOP853) between checkpoints, with a retraction (renormalisation) at every checkpoint [Han et al. 2022].
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import scipy.integrate
import scipy.optimize

from nclab.memory import check_allocation
from nclab.theory.mse import Moments, ls_from_moments
from nclab.theory.snr import inv_sqrt_psd
from nclab.validation import check_choice, check_int, check_positive

__all__ = [
    "CentralPathRun",
    "FlowOptions",
    "Projection",
    "class_major_labels",
    "closed_form_omega",
    "flow_potential",
    "initial_features",
    "ls_loss_grad",
    "omega_of",
    "omega_rate",
    "project",
    "renormalize_features",
    "renormalized_step",
    "simulate",
]

Projection = Literal["oblique", "orthogonal"]


def _check_projection(projection: str) -> None:
    check_choice(projection, Projection, name="projection")


def class_major_labels(K: int, n: int) -> np.ndarray:
    """``y = [0]*n + [1]*n + ... + [K-1]*n`` (``Y = I_K (x) 1_n^T``)."""
    return np.repeat(np.arange(K), n)


def _class_means(X: np.ndarray, K: int) -> np.ndarray:
    return X.reshape(K, -1, X.shape[1]).mean(axis=1)


def _moments_rows(X: np.ndarray, K: int) -> Moments:
    N = X.shape[0]
    M = _class_means(X, K)
    D = X - np.repeat(M, N // K, axis=0)
    mu = M.mean(axis=0)
    sw = D.T @ D / N
    Mc = M - mu
    return Moments(pi=np.full(K, 1.0 / K), means=M, mu=mu, sigma_w=sw, sigma_t=sw + Mc.T @ Mc / K)


def ls_loss_grad(X: np.ndarray, K: int) -> tuple[float, np.ndarray]:
    """Central-path loss ``L_LS(X)`` (lambda = 0, with bias) and its gradient ``(N, d)`` [Han et al. 2022].

    The LS classifier is :func:`nclab.theory.mse.ls_classifier`'s solver; the gradient has zero column sums
    (the global mean does not move) and is orthogonal to the fibre directions ``X S``.
    """
    N = X.shape[0]
    W, b = ls_from_moments(_moments_rows(X, K), 0.0, True)
    R = X @ W.T + b
    R[np.arange(N), np.repeat(np.arange(K), N // K)] -= 1.0
    return 0.5 * float(np.sum(R * R)) / N, R @ W / N


def project(X: np.ndarray, Z: np.ndarray, K: int, projection: Projection = "oblique") -> np.ndarray:
    """Tangent projection of ``Z (N, d)`` at ``X`` on ``{Sigma_W = I}`` ([Han et al. 2022, Prop. 4];
    [Han et al. 2022, App. D.2])."""
    _check_projection(projection)
    N = X.shape[0]
    D = X - np.repeat(_class_means(X, K), N // K, axis=0)  # = N * Cm X in the paper's notation
    S = D.T @ Z / N
    Sym = S + S.T
    return Z - 0.5 * (X if projection == "oblique" else D) @ Sym


def renormalize_features(X: np.ndarray, K: int) -> np.ndarray:
    """Retraction onto the manifold: ``(X - mu_G) Sigma_W(X)^{-1/2}`` (a move along the fibre: omega unchanged)."""
    m = _moments_rows(X, K)
    return (X - m.mu) @ inv_sqrt_psd(m.sigma_w)


def omega_of(X: np.ndarray, K: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Singular values (K-1,) and singular vectors ``left (K, K-1)``, ``right (d, K-1)`` of the SNR of rows X."""
    m = _moments_rows(X, K)
    S = (m.means - m.mu) @ inv_sqrt_psd(m.sigma_w)
    U, s, Vt = np.linalg.svd(S, full_matrices=False)
    return s[: K - 1], U[:, : K - 1], Vt[: K - 1].T


# ---------------------------------------------------------------------------------------------- closed forms
def omega_rate(omega: Any, K: int, n: int, projection: Projection = "oblique") -> np.ndarray:
    """``domega/dt``: oblique ``w / (K n (K + w^2))`` [derived]; orthogonal ``w / (n (K + w^2)^2)`` (Lemma 5)."""
    _check_projection(projection)
    w = np.asarray(omega, dtype=np.float64)
    if projection == "oblique":
        return w / (K * n * (K + w * w))
    return w / (n * (K + w * w) ** 2)


def flow_potential(omega: Any, K: int, n: int, projection: Projection = "oblique") -> np.ndarray:
    """``F(w)`` with ``F(omega(t)) = F(omega(0)) + t``: orthogonal ``K^2 n log w + K n w^2 + (n/4) w^4``
    [Han et al. 2022, Prop. 2]; oblique ``K^2 n log w + (K n / 2) w^2`` (derived here, see docs/theory.md, Errata)."""
    _check_projection(projection)
    w = np.asarray(omega, dtype=np.float64)
    if projection == "oblique":
        return K * K * n * np.log(w) + 0.5 * K * n * w * w
    return K * K * n * np.log(w) + K * n * w * w + 0.25 * n * w**4


def closed_form_omega(omega0: Any, t: Any, K: int, n: int, projection: Projection = "oblique") -> np.ndarray:
    """``omega_j(t)`` solving ``F(omega) = F(omega_j(0)) + t`` (bracketed root finding), shape ``(T, J)``.

    Parameters
    ----------
    omega0 : array-like of shape (J,)
        Initial singular values, ``> 0``.
    t : array-like of shape (T,)
        Times, finite and ``>= 0``.
    K : int
        Number of classes.
    n : int
        Samples per class.
    projection : {"oblique", "orthogonal"}, default="oblique"
        Which flow.

    Returns
    -------
    ndarray of shape (T, J)
        ``omega_j(t_i)``, increasing in ``t``; row ``t = 0`` is ``omega0``.

    Raises
    ------
    ValueError
        If some ``omega0 <= 0`` (a zero singular value never moves) or some ``t`` is negative or not finite.

    Examples
    --------
    >>> import numpy as np
    >>> from nclab.theory import closed_form_omega
    >>> print(np.round(closed_form_omega([1.0, 2.0], [0.0, 1.0, 10.0], K=3, n=4), 6))
    [[1.       2.      ]
     [1.020941 2.023789]
     [1.217984 2.235682]]
    """
    w0 = np.atleast_1d(np.asarray(omega0, dtype=np.float64))
    ts = np.atleast_1d(np.asarray(t, dtype=np.float64))
    if np.any(w0 <= 0):
        raise ValueError("closed forms need omega(0) > 0 (a zero singular value never moves)")
    if np.any(ts < 0) or not np.all(np.isfinite(ts)):
        raise ValueError("t must be finite and >= 0")
    out = np.empty((ts.size, w0.size))
    for j, w in enumerate(w0):
        F0 = float(flow_potential(w, K, n, projection))
        for i, tt in enumerate(ts):
            if tt == 0:
                out[i, j] = w
                continue
            hi = 2.0 * w
            # F grows without bound, so a finite level is bracketed before hi overflows (2^1100 > float max)
            for _ in range(1100):
                if not flow_potential(hi, K, n, projection) < F0 + tt:
                    break
                hi *= 2.0
            else:
                raise ValueError(f"closed_form_omega: no bracket for t={tt} (omega beyond the float range)")
            level = F0 + float(tt)
            out[i, j] = scipy.optimize.brentq(
                lambda x, lv=level: float(flow_potential(x, K, n, projection)) - lv, w, hi, xtol=1e-300, rtol=1e-15
            )
    return out


# ---------------------------------------------------------------------------------------------- simulation
def initial_features(K: int, n: int, d: int, *, mean_scale: float = 1.0, seed: int = 0) -> np.ndarray:
    """Gaussian features around Gaussian class means, renormalised: rows ``(N, d)`` on the manifold."""
    if n * K - K < d:
        raise ValueError(f"Sigma_W needs K n - K >= d to be invertible; got K={K}, n={n}, d={d}")
    rng = np.random.default_rng(seed)
    means = mean_scale * rng.normal(size=(K, d))
    H = np.repeat(means, n, axis=0) + rng.normal(size=(K * n, d))
    return renormalize_features(H, K)


def renormalized_step(X: np.ndarray, eta: float, K: int, projection: Projection = "oblique") -> np.ndarray:
    """One discrete step. Oblique: [Han et al. 2022], App. D.1 literally, ``renormalize(X - eta G)``; orthogonal:
    ``renormalize(X - eta Pi_orth(G))``. Both agree with ``X - eta Pi(G)`` to ``O(eta^2)`` (Lemma 2)."""
    _, G = ls_loss_grad(X, K)
    step = G if projection == "oblique" else project(X, G, K, "orthogonal")
    return renormalize_features(X - eta * step, K)


@dataclass
class CentralPathRun:
    """Trajectory of :func:`simulate`.

    Parameters
    ----------
    K, n, d : int
        Classes, samples per class and feature dimension.
    projection : str
        ``"oblique"`` or ``"orthogonal"``.
    method : str
        ``"ode"`` or ``"gd"``.
    t : ndarray of shape (T,)
        Checkpoint times.
    omega : ndarray of shape (T, K-1)
        Measured singular values of the SNR matrix.
    omega_oblique, omega_orthogonal : ndarray of shape (T, K-1)
        The two closed forms from ``omega[0]``.
    ratio : ndarray of shape (T,)
        ``max omega / min omega``.
    etf_distance : ndarray of shape (T,)
        ``||SNR/omega_max - U0 V0^T||_F``.
    offdiag : ndarray of shape (T,)
        Max off-diagonal of ``U0^T SNR_t V0`` over omega_max (singular-vector drift).
    drift : ndarray of shape (T,)
        ``||Sigma_W(X) - I||_F`` before each retraction.
    loss : ndarray of shape (T,)
        ``L_LS(X)``.
    metrics : dict of str to ndarray of shape (T,)
        NC metrics of the renormalised features with ``W = W_LS`` (nc1, etf_gram_error, self_duality, equinorm).
    X : ndarray of shape (K n, d), optional
        Final features.

    Examples
    --------
    The measured omega follow the oblique closed form to roundoff:

    >>> from nclab.theory import simulate
    >>> run = simulate(3, 4, 4, 1.0, num_checkpoints=3)
    >>> run.omega.shape, run.max_relative_error() < 1e-9
    ((4, 2), True)
    """

    K: int
    n: int
    d: int
    projection: str
    method: str
    t: np.ndarray
    omega: np.ndarray
    omega_oblique: np.ndarray
    omega_orthogonal: np.ndarray
    ratio: np.ndarray
    etf_distance: np.ndarray
    offdiag: np.ndarray
    drift: np.ndarray
    loss: np.ndarray
    metrics: dict[str, np.ndarray] = field(default_factory=dict)
    X: np.ndarray | None = None

    @property
    def omega_closed(self) -> np.ndarray:
        """The closed form of this run's own projection."""
        return self.omega_oblique if self.projection == "oblique" else self.omega_orthogonal

    def max_relative_error(self) -> float:
        """max over checkpoints and j of ``|omega - omega_closed| / omega_closed``."""
        return float(np.max(np.abs(self.omega - self.omega_closed) / self.omega_closed))

    def table(self) -> list[dict[str, float]]:
        rows = []
        for i, t in enumerate(self.t):
            row = {"t": float(t), "loss": float(self.loss[i]), "ratio": float(self.ratio[i])}
            row["etf_distance"] = float(self.etf_distance[i])
            for j in range(self.omega.shape[1]):
                row[f"omega_{j + 1}"] = float(self.omega[i, j])
                row[f"omega_{j + 1}_oblique"] = float(self.omega_oblique[i, j])
                row[f"omega_{j + 1}_orthogonal"] = float(self.omega_orthogonal[i, j])
            for k, v in self.metrics.items():
                row[k] = float(v[i])
            rows.append(row)
        return rows


def _nc_metrics(X: np.ndarray, K: int) -> dict[str, float]:
    from nclab.metrics import equinorm, etf_gram_error, nc1, self_duality
    from nclab.stats import ClassStats

    stats = ClassStats.from_arrays(X, class_major_labels(K, X.shape[0] // K), K=K)
    W, _ = ls_from_moments(_moments_rows(X, K), 0.0, True)
    return {
        "nc1": nc1(stats),
        "etf_gram_error": etf_gram_error(stats),
        "self_duality": self_duality(stats, W=W),
        "equinorm": equinorm(stats),
    }


@dataclass(frozen=True, kw_only=True)
class FlowOptions:
    """How :func:`simulate` integrates the flow and where it records it (the numerical settings, apart from the
    problem: sizes, horizon, projection and start).

    Parameters
    ----------
    method : {"ode", "gd"}, default "ode"
        ``"ode"``: DOP853 with ``rtol``/``atol`` between checkpoints, retraction at each; ``"gd"``: discrete
        :func:`renormalized_step` with step ``eta`` (time = steps * eta; checkpoints rounded to steps).
    num_checkpoints : int, default 20
        Number of log-spaced checkpoints after ``0``.
    t_first : float, optional
        First checkpoint (default ``t_end / 10^3``).
    eta : float, default 1e-2
        Step of ``"gd"``.
    rtol, atol : float, default 1e-10, 1e-12
        Tolerances of ``"ode"``.
    max_steps, max_evals : int, default 1_000_000, 100_000
        Bounds on the work, so that no horizon makes the simulation run without end: ``"gd"`` refuses
        ``t_end / eta > max_steps`` gradient steps (``ValueError``, before any step); ``"ode"`` stops with
        ``RuntimeError`` after ``max_evals`` right-hand-side evaluations over all checkpoints (the default horizon
        1e4 at K=4, n=5, d=6 takes about 700; 1e5 of them about 90 s).

    Examples
    --------
    >>> FlowOptions(num_checkpoints=3).method
    'ode'
    """

    method: Literal["ode", "gd"] = "ode"
    num_checkpoints: int = 20
    t_first: float | None = None
    eta: float = 1e-2
    rtol: float = 1e-10
    atol: float = 1e-12
    max_steps: int = 1_000_000
    max_evals: int = 100_000

    def checked(self) -> FlowOptions:
        """These options validated (each check names its field)."""
        check_choice(self.method, ("ode", "gd"), name="method")
        return FlowOptions(
            method=self.method,
            num_checkpoints=check_int(self.num_checkpoints, name="num_checkpoints", low=1),
            t_first=self.t_first,
            eta=check_positive(self.eta, name="eta"),
            rtol=self.rtol,
            atol=self.atol,
            max_steps=check_int(self.max_steps, name="max_steps", low=1),
            max_evals=check_int(self.max_evals, name="max_evals", low=1),
        )


_FLOW_FIELDS = tuple(FlowOptions.__dataclass_fields__)


def simulate(
    K: int,
    n: int,
    d: int,
    t_end: float,
    projection: Projection = "oblique",
    *,
    options: FlowOptions | None = None,
    mean_scale: float = 1.0,
    seed: int = 0,
    X0: np.ndarray | None = None,
    nc_metrics: bool = True,
    **flow: Any,
) -> CentralPathRun:
    """Renormalised gradient flow of the central-path MSE on ``{Sigma_W = I}`` [Han et al. 2022, eq. (5), Thm 3].

    Parameters
    ----------
    K, n, d : int
        Classes, samples per class and feature dimension (``K n - K >= d``).
    t_end : float
        Final time, finite; checkpoints are ``0`` and ``num_checkpoints`` log-spaced times in ``[t_first, t_end]``.
    projection : {"oblique", "orthogonal"}, default="oblique"
        The paper's Prop. 4 / App. D.1 algorithm, or the flow of Prop. 2.
    options : FlowOptions, optional
        How the flow is integrated and recorded (method, checkpoints, step, tolerances, work bounds); default
        ``FlowOptions()``.
    mean_scale : float, default=1.0
        Scale of the Gaussian class means of the default start.
    seed : int, default=0
        Seed of the default start.
    X0 : ndarray of shape (K n, d), optional
        Initial rows (class-major); default :func:`initial_features` with ``seed``.
    nc_metrics : bool, default=True
        Record the NC metrics at each checkpoint.
    **flow
        Deprecated: the fields of :class:`FlowOptions` as keywords (``num_checkpoints=3``); pass ``options=``.

    Returns
    -------
    CentralPathRun
        The trajectory at ``0`` and the checkpoints: measured and closed-form omega, losses and NC metrics.

    Examples
    --------
    >>> from nclab.theory import FlowOptions, simulate
    >>> run = simulate(3, 4, 4, 1.0, options=FlowOptions(num_checkpoints=3))
    >>> print(run.t.round(4).tolist())
    [0.0, 0.001, 0.0316, 1.0]
    >>> print(f"{run.metrics['nc1'][0]:.4f} -> {run.metrics['nc1'][-1]:.4f}")
    1.9179 -> 1.8335
    """
    opts = _flow_options(options, flow)
    _check_projection(projection)
    K, n, d = check_int(K, name="K", low=2), check_int(n, name="n", low=1), check_int(d, name="d", low=1)
    t_end = check_positive(t_end, name="t_end")  # finite: an infinite horizon never ends
    if opts.method == "gd" and t_end / opts.eta > opts.max_steps:
        raise ValueError(
            f"t_end / eta = {t_end / opts.eta:.3g} gradient steps exceed max_steps={opts.max_steps}: "
            "raise eta or max_steps, or lower t_end"
        )
    # one-hot targets (K, K n) and a few copies of the features (K n, d) for the flow and its checkpoints
    check_allocation(
        8.0 * (float(K) * K * n + 8.0 * K * n * d),
        what=f"the central-path simulation with K={K}, n={n}, d={d} (K x Kn targets, Kn x d features)",
        alternative="use fewer classes K, samples n or dimensions d",
    )
    X = initial_features(K, n, d, mean_scale=mean_scale, seed=seed) if X0 is None else renormalize_features(X0, K)
    if X.shape != (K * n, d):
        raise ValueError(f"X0 must have shape (K n, d) = ({K * n}, {d}), got {X.shape}")
    t_first = t_end / 1e3 if opts.t_first is None else opts.t_first
    times = np.concatenate([[0.0], np.geomspace(t_first, t_end, opts.num_checkpoints)])
    if opts.method == "gd":
        times = np.unique(np.round(times / opts.eta).astype(np.int64)) * opts.eta
    frames = _flow_frames(X, times, K, projection, opts, t_end)
    return _trajectory(frames, times, K, n, projection, opts.method, nc_metrics)


def _flow_options(options: FlowOptions | None, flow: dict[str, Any]) -> FlowOptions:
    """``options``, or the deprecated keyword form of its fields (with a warning); both at once is refused."""
    unknown = sorted(set(flow) - set(_FLOW_FIELDS))
    if unknown:
        raise TypeError(f"simulate() got unexpected keyword arguments {unknown}")
    if flow:
        if options is not None:
            raise TypeError(f"pass the flow settings in options=FlowOptions(...), not also as {sorted(flow)}")
        import warnings

        warnings.warn(
            f"simulate({', '.join(f'{k}=' for k in sorted(flow))}...) is deprecated: pass options=FlowOptions(...)",
            DeprecationWarning,
            stacklevel=3,
        )
        options = FlowOptions(**flow)
    return (options or FlowOptions()).checked()


def _flow_frames(
    X: np.ndarray, times: np.ndarray, K: int, projection: Projection, opts: FlowOptions, t_end: float
) -> list[tuple[np.ndarray, float]]:
    """The renormalised rows at each of ``times`` (``X`` at ``times[0] = 0``) and the drift of ``Sigma_W`` from
    ``I`` before each renormalisation."""
    N, d = X.shape
    frames: list[tuple[np.ndarray, float]] = [(X, 0.0)]
    n_steps_done = 0
    evals = [0]  # right-hand-side evaluations of the ODE solver, over all checkpoints

    def rhs(_t: float, v: np.ndarray) -> np.ndarray:
        evals[0] += 1
        if evals[0] > opts.max_evals:
            raise RuntimeError(
                f"ODE integration stopped after max_evals={opts.max_evals} right-hand-side evaluations "
                f"(t={_t:.6g} of t_end={t_end:g}): lower t_end or raise max_evals"
            )
        Xv = v.reshape(N, d)
        return -project(Xv, ls_loss_grad(Xv, K)[1], K, projection).ravel()

    for k in range(1, times.size):
        if opts.method == "ode":
            sol = scipy.integrate.solve_ivp(
                rhs, (times[k - 1], times[k]), X.ravel(), method="DOP853", rtol=opts.rtol, atol=opts.atol
            )
            if not sol.success:
                raise RuntimeError(f"ODE integration failed at t={times[k - 1]}: {sol.message}")
            Xn = sol.y[:, -1].reshape(N, d)
        else:
            Xn = X
            target = round(times[k] / opts.eta)
            for _ in range(target - n_steps_done):
                Xn = renormalized_step(Xn, opts.eta, K, projection)
            n_steps_done = target
        m = _moments_rows(Xn, K)
        drift = float(np.linalg.norm(m.sigma_w - np.eye(d)))
        X = renormalize_features(Xn, K)
        frames.append((X, drift))
    return frames


def _trajectory(
    frames: list[tuple[np.ndarray, float]],
    times: np.ndarray,
    K: int,
    n: int,
    projection: Projection,
    method: Literal["ode", "gd"],
    nc_metrics: bool,
) -> CentralPathRun:
    """The measured and closed-form quantities of each frame, against the start's frame."""
    X0 = frames[0][0]
    om0, left0, right0 = omega_of(X0, K)
    T, J = times.size, K - 1
    omega, etf, off, loss = np.empty((T, J)), np.empty(T), np.empty(T), np.empty(T)
    metrics: dict[str, list[float]] = {}
    target_frame = left0 @ right0.T
    for i, (Xi, _) in enumerate(frames):
        om, _, _ = omega_of(Xi, K)
        m = _moments_rows(Xi, K)
        S = (m.means - m.mu) @ inv_sqrt_psd(m.sigma_w)
        omega[i] = om
        etf[i] = float(np.linalg.norm(S / om[0] - target_frame))
        A = left0.T @ S @ right0
        off[i] = float(np.max(np.abs(A - np.diag(np.diag(A)))) / om[0])
        loss[i] = ls_loss_grad(Xi, K)[0]
        if nc_metrics:
            for key, v in _nc_metrics(Xi, K).items():
                metrics.setdefault(key, []).append(v)
    return CentralPathRun(
        K=K,
        n=n,
        d=X0.shape[1],
        projection=projection,
        method=method,
        t=times,
        omega=omega,
        omega_oblique=closed_form_omega(om0, times, K, n, "oblique"),
        omega_orthogonal=closed_form_omega(om0, times, K, n, "orthogonal"),
        ratio=omega[:, 0] / omega[:, -1],
        etf_distance=etf,
        offdiag=off,
        drift=np.array([d for _, d in frames]),
        loss=loss,
        metrics={k: np.asarray(v) for k, v in metrics.items()},
        X=frames[-1][0],
    )
