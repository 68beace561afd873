"""NCC metrics: PFC3 / NCC accuracy ([Wang et al. 2024; Jiang et al. 2024]) and NC4 mismatch [Han et al. 2022] in one
call.

The streaming second pass is :class:`nclab.stats.NCCAccumulator`; :func:`ncc_metrics` runs it over arrays in
memory, and this module registers the metric names it reports.
"""

from __future__ import annotations

from typing import Any

from nclab.metrics._registry import REGISTRY, MetricInfo
from nclab.stats import ClassStats, NCCAccumulator
from nclab.stats.ncc import NCCIndex

__all__ = ["ncc_metrics"]


def _register(info: MetricInfo) -> None:
    if info.name in REGISTRY:
        raise ValueError(f"metric {info.name!r} registered twice")
    REGISTRY[info.name] = info


_NEEDS = ("stats", "features", "labels")
_register(
    MetricInfo(
        "ncc_accuracy", "higher", "002 PFC3 eq. (9) / [Jiang et al. 2024] App. B.4 (NCC accuracy vs labels)", _NEEDS
    )
)
_register(
    MetricInfo("pfc3", "higher", "002 PFC3 eq. (9) / [Jiang et al. 2024] App. B.4 (NCC accuracy vs labels)", _NEEDS)
)
_register(
    MetricInfo(
        "ncc_mismatch",
        "lower",
        "[Han et al. 2022, Fig. 8] (NC4: argmax(Wh + b) != NCC, bias included)",
        (*_NEEDS, "W", "b"),
    )
)
_register(
    MetricInfo(
        "ncc_mismatch_nobias", "lower", "[neural-collapse (rhubarbwu)] (NC4 with the bias ignored)", (*_NEEDS, "W")
    )
)
_register(MetricInfo("classifier_accuracy", "none", "argmax(Wh + b) vs labels (not a collapse metric)", (*_NEEDS, "W")))


def ncc_metrics(
    stats: ClassStats,
    features: Any,
    labels: Any,
    W: Any = None,
    b: Any = None,
    *,
    batch_size: int = 8192,
    index: NCCIndex = "exact",
) -> dict[str, Any]:
    """One-shot :class:`NCCAccumulator` over ``features (N, d)``, ``labels (N,)`` in ``batch_size`` chunks;
    ``index="hnsw"`` for the approximate nearest-centre search (extra ``nclab[ann]``; the result's ``ncc_index``
    says which was used)."""
    acc = NCCAccumulator(stats, W=W, b=b, index=index)
    n = len(features)
    if n == 0:
        raise ValueError("ncc_metrics: no features given")
    for start in range(0, n, batch_size):
        acc.update(features[start : start + batch_size], labels[start : start + batch_size])
    return acc.compute()
