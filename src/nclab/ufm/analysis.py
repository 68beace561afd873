"""Collapse measurements of UFM solutions with the project's metric suite (one definition of each metric).

Feature levels of a solution (all ``(K n, d)``, class-major, labels ``repeat(arange(K), n)``):
``"H"`` (two-factor models, MUFM); ``"H1", "H2", ...`` for the extended models, where ``H{l+1} = sigma(H{l}
W{l}^T)``; with ReLU also the pre-activations ``"pre-ReLU"`` (= ``H1 W1^T``, depth 2; ``"pre-ReLU{l+1}"``
deeper). The classifier (and bias) are attached to the deepest level only.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from nclab.metrics import (
    collapse_report,
    etf_gram_error,
    nc1,
    orthogonal_frame_error,
    self_duality,
)
from nclab.metrics.common import DegenerateMetricWarning, TargetUnattainableWarning
from nclab.stats import ClassStats, NCCAccumulator
from nclab.stats.class_stats import Track
from nclab.ufm.models import ModelSpec, evaluate

__all__ = [
    "UFM_CONVENTIONS",
    "DeadReLU",
    "collapse_reports",
    "dead_relu_samples",
    "feature_levels",
    "level_stats",
    "quick_metrics",
    "revive",
]

#: collapse_report conventions for UFM solutions: NC3 against the *uncentred* class means (the [Tirer & Bruna 2022] NC3,
#: the one that vanishes at bias-free and regularised-bias optima, where W is proportional to them).
UFM_CONVENTIONS: dict[str, Any] = {"center_means": False}


def feature_levels(spec: ModelSpec, params: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every feature level of ``params`` (module docstring), shallow to deep.

    Parameters
    ----------
    spec : ModelSpec
        The model.
    params : mapping of str to ndarray
        Its parameters (keys ``spec.param_keys``).

    Returns
    -------
    dict of str to ndarray of shape (K n, d_l)
        ``"H"`` for the two-factor models; ``"H1"``, (``"pre-ReLU"``,) ``"H2"``, ... for the extended ones.

    Examples
    --------
    >>> import numpy as np
    >>> from nclab.ufm import feature_levels, make_spec
    >>> spec = make_spec("extended-relu", K=3, n=2, d=4, lams={"W1": 0.01, "W2": 0.01, "H1": 0.01})
    >>> rng = np.random.default_rng(0)
    >>> params = {"H1": rng.normal(size=(6, 4)), "W1": rng.normal(size=(4, 4)), "W2": rng.normal(size=(3, 4))}
    >>> {key: level.shape for key, level in feature_levels(spec, params).items()}
    {'H1': (6, 4), 'pre-ReLU': (6, 4), 'H2': (6, 4)}
    """
    levels = evaluate(spec, params, grad=False).levels
    if spec.depth == 1:
        return {"H": levels[0]}
    out = {"H1": levels[0]}
    i = 1
    for l in range(2, spec.depth + 1):
        if spec.activation == "relu":
            out["pre-ReLU" if spec.depth == 2 else f"pre-ReLU{l}"] = levels[i]
            i += 1
        out[f"H{l}"] = levels[i]
        i += 1
    return out


def level_stats(spec: ModelSpec, H: np.ndarray, track: Track = "full") -> ClassStats:
    """ClassStats of one level with the class-major labels."""
    return ClassStats.from_arrays(H, spec.labels, K=spec.K, track=track)


def collapse_reports(
    spec: ModelSpec,
    params: Mapping[str, np.ndarray],
    *,
    conventions: Mapping[str, Any] | None = None,
    ncc: bool = True,
) -> dict[str, dict[str, float]]:
    """:func:`nclab.metrics.collapse_report` of every feature level; the deepest also gets the classifier
    (NC3 with :data:`UFM_CONVENTIONS` unless overridden) and, with ``ncc``, the NCC pass (``ncc_accuracy``,
    ``ncc_mismatch``). Includes both ``etf_gram_error`` (NC2_ETF, centred) and ``orthogonal_frame_error``
    (NC2_OF, uncentred; when d >= K). A zero solution gives the documented nan/inf values of the metrics.

    Parameters
    ----------
    spec : ModelSpec
        The model.
    params : mapping of str to ndarray
        Its parameters (keys ``spec.param_keys``).
    conventions : mapping, optional
        Keyword conventions of :func:`nclab.metrics.collapse_report` (default :data:`UFM_CONVENTIONS`).
    ncc : bool, default=True
        Add the NCC pass to the deepest level.

    Returns
    -------
    dict of str to dict of str to float
        One report per feature level (keys as :func:`feature_levels`).

    Examples
    --------
    The optimum of the bias-free MSE UFM is collapsed: ``nc1 ~ 0``, an exact ETF Gram and NCC accuracy 1.

    >>> from nclab.ufm import collapse_reports, solve
    >>> res = solve("mse-bias-free", K=3, n=2, d=4, lams={"W": 0.01, "H": 0.01})
    >>> rep = collapse_reports(res.spec, res.params)["H"]
    >>> rep["nc1"] < 1e-12, rep["etf_gram_error"] < 1e-6, rep["ncc_accuracy"]
    (True, True, 1.0)
    """
    conv = {**UFM_CONVENTIONS, **(conventions or {})}
    levels = feature_levels(spec, params)
    deepest = list(levels)[-1]
    W = params[spec.classifier_key]
    b = params.get("b")
    out: dict[str, dict[str, float]] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TargetUnattainableWarning)
        for name, H in levels.items():
            stats = level_stats(spec, H)
            Wl, bl = (W, b) if name == deepest else (None, None)
            acc = None
            if ncc:
                acc = NCCAccumulator(stats, W=Wl, b=bl)
                acc.update(H, spec.labels)
            out[name] = collapse_report(stats, W=Wl, b=bl, ncc=acc, conventions=conv)
    return out


def quick_metrics(spec: ModelSpec, params: Mapping[str, np.ndarray]) -> dict[str, float]:
    """The [Tirer & Bruna 2022] four NC numbers per level, for GD logs: ``<level>/nc1`` (Papyan, pinv), ``/nc2_etf``
    (centred Gram error), ``/nc2_of`` (uncentred, d >= K) and, at the deepest level, ``/nc3``
    ([Tirer & Bruna 2022, eq. (28)]: unsquared Frobenius distance to the uncentred means)."""
    levels = feature_levels(spec, params)
    deepest = list(levels)[-1]
    out: dict[str, float] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DegenerateMetricWarning)
        warnings.simplefilter("ignore", TargetUnattainableWarning)
        for name, H in levels.items():
            stats = level_stats(spec, H)
            out[f"{name}/nc1"] = nc1(stats)
            out[f"{name}/nc2_etf"] = etf_gram_error(stats)
            if spec.d >= spec.K:
                out[f"{name}/nc2_of"] = orthogonal_frame_error(stats)
            if name == deepest:
                out[f"{name}/nc3"] = self_duality(
                    stats, W=params[spec.classifier_key], squared=False, center_means=False
                )
    return out


#: a sample's last hidden ReLU features count as zero below this fraction of the largest sample's
DEAD_RTOL = 1e-6


@dataclass(frozen=True)
class DeadReLU:
    """The dead samples of a ReLU UFM solution (:func:`dead_relu_samples`): ``samples``, their row indices
    (class-major); ``excess``: the objective one dead sample adds to the closed-form optimum, to first order
    (``None`` without the closed form); ``predicted_gap = len(samples) * excess``."""

    samples: np.ndarray
    excess: float | None
    predicted_gap: float | None


def dead_relu_samples(
    spec: ModelSpec, params: Mapping[str, np.ndarray], theory: Any = None, *, rtol: float = DEAD_RTOL
) -> DeadReLU:
    """Samples of the extended ReLU UFM ([Tirer & Bruna 2022, eq. (24)]) whose last ReLU features are all zero.

    A sample ``i`` whose pre-activations ``W1 h1_i`` are all ``<= 0`` gets no gradient from the data term
    (``relu'(z) = 0`` for ``z <= 0``), only from the weight decay, which shrinks ``h1_i`` to 0: GD and L-BFGS
    stop there with logits 0, although it is no local minimum (moving ``h1_i`` towards its class's features
    lowers the objective at first order). Such a sample costs ``1/(2N)`` (zero logits) instead of its share
    of the optimum, ``(1 - p*)^2 / (2N) + lambda_H1 ||hbar_1||^2 / 2`` (Thm 4.2's constants): that difference is
    ``excess``, and ``m`` dead samples leave GD about ``m * excess`` above ``L*`` (the other samples and the
    weights re-adjust, a second-order change; measured 1.3e-6 of 2.3e-3 at ``K = 4, n = 50, d = 20``).

    ``theory``: the closed-form :class:`~nclab.ufm.closed_forms.Optimum` (for ``excess``), e.g. ``UFMResult.theory``.
    Dead: ``||relu(W1 h1_i)|| <= rtol * max_j ||relu(W1 h1_j)||``.
    """
    if spec.activation != "relu" or spec.depth != 2:
        raise ValueError(f"dead ReLU samples are defined for the depth-2 ReLU model (extended-relu), not {spec.name!r}")
    F = feature_levels(spec, params)["H2"]
    norms = np.linalg.norm(F, axis=1)
    dead = np.flatnonzero(norms <= rtol * norms.max())
    if theory is None or not theory.nonzero:
        return DeadReLU(dead, None, None)
    c = theory.constants
    share = (1.0 - c["p"]) ** 2 / (2.0 * spec.N) + 0.5 * spec.lam("H1") * c["H1_sq"]
    excess = 1.0 / (2.0 * spec.N) - share
    return DeadReLU(dead, excess, dead.size * excess)


def revive(spec: ModelSpec, params: Mapping[str, np.ndarray], dead: np.ndarray) -> dict[str, np.ndarray]:
    """``params`` with the first-level feature ``h1_i`` of every dead sample (:func:`dead_relu_samples`) replaced by
    the mean of its class's live samples: the first-order descent step GD cannot take. A class with no live
    sample keeps its features."""
    out = {k: np.array(v, copy=True) for k, v in params.items()}
    labels = spec.labels
    live = np.ones(spec.N, dtype=bool)
    live[dead] = False
    for i in dead:
        same = live & (labels == labels[i])
        if same.any():
            out["H1"][i] = out["H1"][same].mean(axis=0)
    return out
