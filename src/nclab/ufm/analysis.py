"""Collapse measurements of UFM solutions with the project's metric suite (one definition of each metric).

Feature levels of a solution (all ``(K n, d)``, class-major, labels ``repeat(arange(K), n)``):
``"H"`` (two-factor models, MUFM); ``"H1", "H2", ...`` for the extended models, where ``H{l+1} = sigma(H{l}
W{l}^T)``; with ReLU also the pre-activations ``"pre-ReLU"`` (= ``H1 W1^T``, depth 2; ``"pre-ReLU{l+1}"``
deeper). The classifier (and bias) are attached to the deepest level only.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
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
from nclab.ufm.models import ModelSpec, evaluate

__all__ = ["UFM_CONVENTIONS", "collapse_reports", "feature_levels", "level_stats", "quick_metrics"]

#: collapse_report conventions for UFM solutions: NC3 against the *uncentred* class means (the [Tirer & Bruna 2022] NC3,
#: the one that vanishes at bias-free and regularised-bias optima, where W is proportional to them).
UFM_CONVENTIONS: dict[str, Any] = {"center_means": False}


def feature_levels(spec: ModelSpec, params: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every feature level of ``params`` (module docstring), shallow to deep."""
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


def level_stats(spec: ModelSpec, H: np.ndarray, track: str = "full") -> ClassStats:
    """ClassStats of one level with the class-major labels."""
    return ClassStats.from_arrays(H, spec.labels, num_classes=spec.K, track=track)  # type: ignore[arg-type]


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
    (NC2_OF, uncentred; when d >= K). A zero solution gives the documented nan/inf values of the metrics."""
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
