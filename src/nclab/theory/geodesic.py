"""The geodesic (straight-line) model of progressive feedforward collapse, [Wang et al. 2024] (Sec. III, Thms 1-2).

Every sample moves on the straight line ``h_i(t) = (1 - t) h0_i + t h1_i``, t in [0, 1], between its layer-0
and last-layer features (the displacement interpolation of the Wasserstein-2 geodesic, [Wang et al. 2024] Assumption 1).
Class means move on the same lines, so with centred class means ``Ht(t) = (1 - t) Ht0 + t Ht1`` (rows (K, d)):

    Tr Sigma_W(t) = (1-t)^2 A0 + 2 t (1-t) A01 + t^2 A1,     A01 = (1/N) sum_k cross_k
    G(t)          = (1-t)^2 G00 + t (1-t) (G01 + G10) + t^2 G11,     G_ab = Ht_a Ht_b^T
    Tr Sigma_B(t) = sum_k w_k G(t)_kk     (w_k = 1/K balanced, n_k/N empirical)
    PFC1(t) = Tr Sigma_W(t) / Tr Sigma_B(t),   PFC2(t) = || G(t)/||G(t)||_F - (I - 11^T/K)/sqrt(K-1) ||_F

([Wang et al. 2024, Fig. 3]; the same functions as ``nclab.metrics.trace_ratio`` and ``etf_gram_error`` at
every t). PFC3(t), the NCC accuracy, is *not* a function of second moments: it is computed exactly by a second
pass over the paired samples (:class:`~nclab.stats.GeodesicNCC`, built by :func:`geodesic_ncc`), from the three
per-sample, per-class scalars ``a = ||h0 - mu0_c||^2``, ``b = <h0 - mu0_c, h1 - mu1_c>``, ``c = ||h1 - mu1_c||^2``
whose quadratic ``(1-t)^2 a + 2t(1-t) b + t^2 c`` is the squared distance to class c's mean at time t.
No Gaussian or other approximation is used.

End variants ([Wang et al. 2024, Sec. 3.2] "transparent model"): ``end="measured"`` (the paper's blue curve),
``"class_means"`` (each sample's end replaced by its class mean: exact NC1 at t = 1), ``"etf"`` (collapsed onto
the simplex ETF nearest to the centred start means by orthogonal Procrustes, scaled to the measured end's
``||Ht1||_F``, centred at the measured end's global mean).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch

from nclab.geometry import simplex_etf
from nclab.metrics import etf_gram_error
from nclab.stats import GeodesicNCC, PairedClassStats, PathStats
from nclab.stats.class_stats import check_labels_dtype, to_tensor

__all__ = [
    "EndVariant",
    "GeodesicPrediction",
    "GeodesicProfile",
    "endpoint_means",
    "geodesic_ncc",
    "geodesic_profile",
    "pfc1_slope_at_start",
    "predict",
    "procrustes_etf",
    "s01",
]

EndVariant = Literal["measured", "class_means", "etf"]
Weighting = Literal["balanced", "empirical"]


def _check_end(end: str) -> None:
    if end not in ("measured", "class_means", "etf"):
        raise ValueError(f"end must be 'measured', 'class_means' or 'etf', got {end!r}")


def procrustes_etf(centered_means: Any, scale: float | None = None) -> np.ndarray:
    """The simplex ETF ``(K, d)`` nearest to ``centered_means (K, d)`` among rotations: ``E = s E0 R`` with
    ``E0 = simplex_etf(K)`` and ``R = polar(E0^T M)`` (orthogonal Procrustes; [Wang et al. 2024, Thm. 2]).

    ``scale`` fixes ``||E||_F`` (default ``||M||_F``). Its inner product with ``M`` is ``s * (nuclear norm of
    E0^T M) >= 0``, so a Procrustes end always satisfies Thm 1's condition S01 >= 0. Needs ``d >= K - 1``.

    Parameters
    ----------
    centered_means : array-like of shape (K, d)
        Centred class means ``M``, ``d >= K - 1``.
    scale : float, optional
        ``||E||_F`` (default ``||M||_F``).

    Returns
    -------
    ndarray of shape (K, d)
        The simplex ETF ``E``.

    Raises
    ------
    ValueError
        If ``d < K - 1``.

    Examples
    --------
    >>> import numpy as np
    >>> from nclab.theory import procrustes_etf
    >>> E = procrustes_etf([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0]])
    >>> G = E @ E.T
    >>> print(np.round(G / G[0, 0], 6), round(float(np.linalg.norm(E)), 6))
    [[ 1.  -0.5 -0.5]
     [-0.5  1.  -0.5]
     [-0.5 -0.5  1. ]] 2.0
    """
    M = np.asarray(centered_means, dtype=np.float64)
    K, d = M.shape
    if d < K - 1:
        raise ValueError(f"a simplex ETF of K={K} vectors needs d >= K - 1 = {K - 1}, got d={d}")
    E0 = simplex_etf(K)  # (K, K-1), unit rows, ||E0||_F = sqrt(K)
    U, _, Vt = np.linalg.svd(E0.T @ M, full_matrices=False)
    R = U @ Vt  # (K-1, d), orthonormal rows
    s = float(np.linalg.norm(M)) if scale is None else float(scale)
    return (s / np.sqrt(K)) * (E0 @ R)


def endpoint_means(
    paired: PairedClassStats, end: EndVariant = "measured", weighting: Weighting = "balanced"
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(Ht0, Ht1, mu1)``: centred start means, centred end means and uncentred end means ``(K, d)`` of ``end``."""
    _check_end(end)
    Ht0 = paired.start.moments().centered_means(weighting)
    Ht1 = paired.end.moments().centered_means(weighting)
    mu1 = paired.end.means
    if end == "etf":
        g1 = paired.end.moments().global_mean(weighting)
        scale = float(np.linalg.norm(Ht1)) or float(np.linalg.norm(Ht0))
        E = procrustes_etf(Ht0, scale)
        # an ETF is centred for balanced weights; re-centre for the empirical ones so Ht1 is consistent
        w = _weights(paired, weighting)
        Ht1 = E - w @ E
        mu1 = E + g1
    return Ht0, Ht1, mu1


def _weights(paired: PairedClassStats, weighting: Weighting) -> np.ndarray:
    if weighting == "balanced":
        return np.full(paired.K, 1.0 / paired.K)
    if weighting == "empirical":
        c = paired.counts
        return c / c.sum()
    raise ValueError(f"weighting must be 'balanced' or 'empirical', got {weighting!r}")


def s01(paired: PairedClassStats, end: EndVariant = "measured", weighting: Weighting = "balanced") -> float:
    """Thm 1's condition ``S01 = sum_k <Ht0_k, Ht1_k>`` ([Wang et al. 2024, Thm. 1]; >= 0 gives monotone PFC1(t)).

    Parameters
    ----------
    paired : PairedClassStats
        First pass over the paired start and end features ``(h0, h1, y)``.
    end : {"measured", "class_means", "etf"}, default="measured"
        End variant (module docstring).
    weighting : {"balanced", "empirical"}, default="balanced"
        Class weights of the global mean and of Tr Sigma_B.

    Returns
    -------
    float
        ``S01``; ``>= 0`` means PFC1 decreases monotonically along the line.

    Examples
    --------
    >>> import numpy as np
    >>> from nclab.stats import PairedClassStats
    >>> h0 = np.array([[-1.0, 1.0], [-1.0, -1.0], [1.0, 1.0], [1.0, -1.0]])
    >>> h1 = np.array([[-2.0, 0.0], [-2.0, 0.0], [2.0, 0.0], [2.0, 0.0]])  # collapsed
    >>> y = np.array([0, 0, 1, 1])
    >>> paired = PairedClassStats(2, 2).update(h0, h1, y)
    >>> from nclab.theory import s01
    >>> s01(paired)  # centred means (-1, 0), (1, 0) at the start, (-2, 0), (2, 0) at the end
    4.0
    """
    Ht0, Ht1, _ = endpoint_means(paired, end, weighting)
    return float(np.einsum("kd,kd->", Ht0, Ht1))


@dataclass(frozen=True)
class GeodesicPrediction:
    """The geodesic model's predictions along the straight line, from :func:`predict`.

    Parameters
    ----------
    t : ndarray of shape (T,)
        Times in [0, 1].
    pfc1, pfc2 : ndarray of shape (T,)
        The closed forms ``Tr Sigma_W / Tr Sigma_B`` and the ETF Gram error.
    pfc3 : ndarray of shape (T,) or None
        Exact NCC accuracy when a :class:`~nclab.stats.GeodesicNCC` pass was given, else None.
    trace_w, trace_b : ndarray of shape (T,)
        Tr Sigma_W(t) and Tr Sigma_B(t).
    coefficients : dict of str to float
        The quadratic coefficients ``A0, A01, A1`` (Tr Sigma_W) and ``B0, B01, B1`` (Tr Sigma_B).
    end : str
        The end variant.
    weighting : str
        The class weighting.

    Examples
    --------
    >>> import numpy as np
    >>> from nclab.stats import PairedClassStats
    >>> h0 = np.array([[-1.0, 1.0], [-1.0, -1.0], [1.0, 1.0], [1.0, -1.0]])
    >>> h1 = np.array([[-2.0, 0.0], [-2.0, 0.0], [2.0, 0.0], [2.0, 0.0]])  # collapsed
    >>> y = np.array([0, 0, 1, 1])
    >>> paired = PairedClassStats(2, 2).update(h0, h1, y)
    >>> from nclab.theory import predict
    >>> pred = predict(paired, [0.0, 0.5, 1.0])
    >>> print(pred.trace_w, pred.trace_b, pred.pfc3)
    [1.   0.25 0.  ] [1.   2.25 4.  ] None
    """

    t: np.ndarray
    pfc1: np.ndarray
    pfc2: np.ndarray
    pfc3: np.ndarray | None
    trace_w: np.ndarray
    trace_b: np.ndarray
    coefficients: dict[str, float]
    end: str
    weighting: str

    @property
    def ncc_error(self) -> np.ndarray | None:
        """``1 - PFC3``: the "decreasing" form (the [Wang et al. 2024] PFC3 is an accuracy, [Wang et al. 2024])."""
        return None if self.pfc3 is None else 1.0 - self.pfc3


def _quadratic(t: np.ndarray, q0: float, q01: float, q1: float) -> np.ndarray:
    return (1 - t) ** 2 * q0 + 2 * t * (1 - t) * q01 + t**2 * q1


def _coefficients(paired: PairedClassStats, end: EndVariant, weighting: Weighting) -> tuple[dict[str, float], tuple]:
    if paired.N == 0:
        raise ValueError("PairedClassStats are empty")
    Ht0, Ht1, _ = endpoint_means(paired, end, weighting)
    w = _weights(paired, weighting)
    A0 = paired.start.moments().trace_w()
    if end == "measured":
        A01, A1 = paired.trace_w_cross(), paired.end.moments().trace_w()
    else:  # collapsed ends: no within-class deviation at t = 1
        A01, A1 = 0.0, 0.0
    coef = {
        "A0": float(A0),
        "A01": float(A01),
        "A1": float(A1),
        "B0": float(w @ np.einsum("kd,kd->k", Ht0, Ht0)),
        "B01": float(w @ np.einsum("kd,kd->k", Ht0, Ht1)),
        "B1": float(w @ np.einsum("kd,kd->k", Ht1, Ht1)),
    }
    return coef, (Ht0, Ht1)


def predict(
    paired: PairedClassStats,
    t_grid: Any,
    *,
    end: EndVariant = "measured",
    weighting: Weighting = "balanced",
    ncc: GeodesicNCC | None = None,
) -> GeodesicPrediction:
    """PFC1(t), PFC2(t) (closed forms) and PFC3(t) (exact, from ``ncc``) along the straight line
    ([Wang et al. 2024, Sec. III]; [Wang et al. 2024, Fig. 3]).

    ``paired``: the first pass over ``(h0, h1, y)``; ``t_grid``: times in [0, 1]; ``end``: see the module doc;
    ``ncc``: a :class:`~nclab.stats.GeodesicNCC` second pass from :func:`geodesic_ncc` with the same ``paired``,
    ``t_grid``, ``end`` and ``weighting`` (else
    ``pfc3`` is None). PFC1 is ``inf`` where Tr Sigma_B(t) = 0 and PFC2 nan where G(t) = 0 (degenerate).

    Parameters
    ----------
    paired : PairedClassStats
        First pass over the paired start and end features ``(h0, h1, y)``.
    t_grid : array-like of shape (T,)
        Times in [0, 1].
    end : {"measured", "class_means", "etf"}, default="measured"
        End variant (module docstring).
    weighting : {"balanced", "empirical"}, default="balanced"
        Class weights of the global mean and of Tr Sigma_B.
    ncc : GeodesicNCC, optional
        The second pass of :func:`geodesic_ncc` (same ``paired``, ``t_grid``, ``end``, ``weighting``).

    Returns
    -------
    GeodesicPrediction
        PFC1-3 and the traces at each ``t``; ``pfc1 = inf`` where Tr Sigma_B(t) = 0, ``pfc2 = nan`` where
        G(t) = 0, ``pfc3 = None`` without ``ncc``.

    Examples
    --------
    Two classes moving from spread start features to collapsed end features: at ``t = 1/2``
    ``Tr Sigma_W = (1/2)^2`` and ``Tr Sigma_B = (3/2)^2``, so ``PFC1 = 1/9``.

    >>> import numpy as np
    >>> from nclab.stats import PairedClassStats
    >>> h0 = np.array([[-1.0, 1.0], [-1.0, -1.0], [1.0, 1.0], [1.0, -1.0]])
    >>> h1 = np.array([[-2.0, 0.0], [-2.0, 0.0], [2.0, 0.0], [2.0, 0.0]])  # collapsed
    >>> y = np.array([0, 0, 1, 1])
    >>> paired = PairedClassStats(2, 2).update(h0, h1, y)
    >>> from nclab.theory import geodesic_ncc, predict
    >>> ncc = geodesic_ncc(paired, [0.0, 0.5, 1.0]).update(h0, h1, y)
    >>> pred = predict(paired, [0.0, 0.5, 1.0], ncc=ncc)
    >>> print(np.round(pred.pfc1, 6), pred.pfc3)
    [1.       0.111111 0.      ] [1. 1. 1.]
    """
    _check_end(end)
    t = np.asarray(t_grid, dtype=np.float64).ravel()
    if t.size == 0 or np.any(~np.isfinite(t)):
        raise ValueError("t_grid must be a non-empty array of finite times")
    coef, (Ht0, Ht1) = _coefficients(paired, end, weighting)
    tw = _quadratic(t, coef["A0"], coef["A01"], coef["A1"])
    tb = _quadratic(t, coef["B0"], coef["B01"], coef["B1"])
    with np.errstate(divide="ignore", invalid="ignore"):
        pfc1 = np.where(tb > 0, tw / np.where(tb > 0, tb, 1.0), np.inf)
    # G(t) = Ht(t) Ht(t)^T with Ht(t) = (1-t) Ht0 + t Ht1 (already centred): the metric's own code on the
    # interpolated means is the quadratic Gram form (1-t)^2 G00 + t(1-t)(G01 + G10) + t^2 G11.
    pfc2 = np.array([etf_gram_error((1 - s) * Ht0 + s * Ht1, center=False) for s in t])
    pfc3 = None
    if ncc is not None:
        _, _, mu1 = endpoint_means(paired, end, weighting)
        same_end = ncc.collapsed_end == (end != "measured") and np.array_equal(ncc.end_means, mu1)
        if not same_end or not np.array_equal(ncc.t, t):
            raise ValueError(
                "the GeodesicNCC pass was built for a different end variant or t_grid (build it with geodesic_ncc)"
            )
        pfc3 = ncc.accuracy()
    return GeodesicPrediction(
        t=t, pfc1=pfc1, pfc2=pfc2, pfc3=pfc3, trace_w=tw, trace_b=tb, coefficients=coef, end=end, weighting=weighting
    )


def pfc1_slope_at_start(
    paired: PairedClassStats, end: EndVariant = "measured", weighting: Weighting = "balanced"
) -> float:
    """``dPFC1/dt`` at ``t = 0``: ``2 [(A01 - A0) B0 - A0 (B01 - B0)] / B0^2``; for a collapsed end
    ``-2 A0 B01 / B0^2`` (= ``-2 A0 S01 / (K B0^2)`` balanced): positive iff S01 < 0 [Wang et al. 2024, Thm. 1]."""
    coef, _ = _coefficients(paired, end, weighting)
    A0, A01, B0, B01 = coef["A0"], coef["A01"], coef["B0"], coef["B01"]
    if B0 <= 0:
        return float("nan")
    return 2.0 * ((A01 - A0) * B0 - A0 * (B01 - B0)) / B0**2


def geodesic_ncc(
    paired: PairedClassStats, t_grid: Any, *, end: EndVariant = "measured", weighting: Weighting = "balanced"
) -> GeodesicNCC:
    """The second pass of end variant ``end``: an empty :class:`~nclab.stats.GeodesicNCC` against the start
    means of ``paired`` and the end means of :func:`endpoint_means` (``weighting`` places the ETF's centre),
    with each sample's end at its class's end mean for the collapsed variants. Feed it the same ``(h0, h1, y)``
    batches again, then pass it to :func:`predict`.

    Parameters
    ----------
    paired : PairedClassStats
        First pass over the paired start and end features ``(h0, h1, y)``.
    t_grid : array-like of shape (T,)
        Times in [0, 1].
    end : {"measured", "class_means", "etf"}, default="measured"
        End variant (module docstring).
    weighting : {"balanced", "empirical"}, default="balanced"
        Class weights of the global mean and of Tr Sigma_B.

    Returns
    -------
    GeodesicNCC
        An empty accumulator; ``update`` it with the same batches, then pass it to :func:`predict`.

    Examples
    --------
    >>> import numpy as np
    >>> from nclab.stats import PairedClassStats
    >>> h0 = np.array([[-1.0, 1.0], [-1.0, -1.0], [1.0, 1.0], [1.0, -1.0]])
    >>> h1 = np.array([[-2.0, 0.0], [-2.0, 0.0], [2.0, 0.0], [2.0, 0.0]])  # collapsed
    >>> y = np.array([0, 0, 1, 1])
    >>> paired = PairedClassStats(2, 2).update(h0, h1, y)
    >>> from nclab.theory import geodesic_ncc
    >>> ncc = geodesic_ncc(paired, [0.0, 1.0]).update(h0, h1, y)
    >>> print(ncc.accuracy())
    [1. 1.]
    """
    _check_end(end)
    _, _, mu1 = endpoint_means(paired, end, weighting)
    return GeodesicNCC(paired.start.means, mu1, t_grid, collapsed_end=end != "measured")


@dataclass
class GeodesicProfile:
    """The geodesic model at the measured layers of one network, from :func:`geodesic_profile`.

    Parameters
    ----------
    relative_depth : ndarray of shape (L+1,)
        ``t_l`` from unsquared step norms [Wang et al. 2024, Fig. 3].
    predictions : dict of str to GeodesicPrediction
        Per end variant, PFC1-3 of the straight line *at those t_l*, so predicted and measured values pair up
        layer by layer.
    s01 : float
        Thm 1 condition.
    straightness_index : float
        Straightness of the path, 1 for a straight line.
    kinetic_energy : ndarray of shape (L,)
        Per-block transport.

    Examples
    --------
    >>> import numpy as np
    >>> from nclab.theory import geodesic_profile
    >>> h0 = np.array([[-1.0, 1.0], [-1.0, -1.0], [1.0, 1.0], [1.0, -1.0]])
    >>> h2 = np.array([[-2.0, 0.0], [-2.0, 0.0], [2.0, 0.0], [2.0, 0.0]])
    >>> prof = geodesic_profile([h0, (h0 + h2) / 2, h2], [0, 0, 1, 1], K=2)
    >>> print(prof.relative_depth, prof.straightness_index, prof.kinetic_energy)
    [0.  0.5 1. ] 1.0 [0.5 0.5]
    """

    relative_depth: np.ndarray
    predictions: dict[str, GeodesicPrediction]
    s01: float
    straightness_index: float
    kinetic_energy: np.ndarray


def geodesic_profile(
    layers: Sequence[Any],
    y: Any,
    K: int,
    *,
    ends: Sequence[EndVariant] = ("measured",),
    t_grid: Any = None,
    batch_size: int = 512,
) -> GeodesicProfile:
    """Relative depths and geodesic predictions for the features ``layers = [h^0 .. h^L]`` (each ``(N, d)``, the
    same samples and dimension; numpy or torch) with labels ``y (N,)`` -- [Wang et al. 2024, Fig. 3].

    Streams ``batch_size`` rows at a time through :class:`~nclab.stats.PathStats` and
    :class:`~nclab.stats.PairedClassStats` (pass 1), then :class:`~nclab.stats.GeodesicNCC` (pass 2): float64 work
    memory O(batch_size (L+1) d), whatever N. Predictions are evaluated at the layers' relative depths, or on
    ``t_grid`` when given (e.g. a fine grid for a plot).

    Parameters
    ----------
    layers : sequence of array-like of shape (N, d)
        Features ``h^0 .. h^L`` of the same samples, numpy or torch, at least 2.
    y : array-like of shape (N,)
        Labels in ``0..K-1``.
    K : int
        Number of classes.
    ends : sequence of {"measured", "class_means", "etf"}, default=("measured",)
        End variants to predict.
    t_grid : array-like of shape (T,), optional
        Times of the predictions (default: the layers' relative depths).
    batch_size : int, default=512
        Rows streamed at a time.

    Returns
    -------
    GeodesicProfile
        Relative depths, predictions per end variant, S01, straightness index and kinetic energy.

    Raises
    ------
    ValueError
        If fewer than 2 layers are given or a layer's rows do not match the labels.

    Examples
    --------
    Features moving on straight lines, measured at ``t = 0, 1/2, 1``: the prediction reproduces the middle layer.

    >>> import numpy as np
    >>> from nclab.theory import geodesic_profile
    >>> h0 = np.array([[-1.0, 1.0], [-1.0, -1.0], [1.0, 1.0], [1.0, -1.0]])
    >>> h2 = np.array([[-2.0, 0.0], [-2.0, 0.0], [2.0, 0.0], [2.0, 0.0]])
    >>> prof = geodesic_profile([h0, (h0 + h2) / 2, h2], [0, 0, 1, 1], K=2)
    >>> print(np.round(prof.predictions["measured"].pfc1, 6), prof.s01)
    [1.       0.111111 0.      ] 4.0
    """
    if len(layers) < 2:
        raise ValueError(f"need at least 2 measured layers (h^0 and h^L), got {len(layers)}")
    yt = to_tensor(y, "labels")
    check_labels_dtype(yt)
    yt = yt.to(torch.int64)
    N = int(yt.shape[0])
    if any(int(h.shape[0]) != N for h in layers):
        raise ValueError(f"every layer needs one row per label ({N}); got {[int(h.shape[0]) for h in layers]}")
    path = PathStats(len(layers))
    paired = PairedClassStats(K, int(layers[0].shape[1]))
    rows = [slice(s, s + batch_size) for s in range(0, N, batch_size)]
    for r in rows:
        chunk = [h[r] for h in layers]
        path.update(chunk)
        paired.update(chunk[0], chunk[-1], yt[r])
    t = path.relative_depth() if t_grid is None else np.asarray(t_grid, dtype=np.float64)
    preds: dict[str, GeodesicPrediction] = {}
    for end in ends:
        ncc = geodesic_ncc(paired, t, end=end)
        for r in rows:
            ncc.update(layers[0][r], layers[-1][r], yt[r])
        preds[end] = predict(paired, t, end=end, ncc=ncc)
    return GeodesicProfile(
        relative_depth=path.relative_depth(),
        predictions=preds,
        s01=s01(paired),
        straightness_index=path.straightness_index(),
        kinetic_energy=path.kinetic_energy(),
    )
