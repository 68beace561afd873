"""Collapse measurement for training code outside nclab: :class:`CollapseMonitor` (any loop, any iterable of
batches, distributed-aware), its :class:`Schedule`, the classifier detection rules, and
:func:`extract_features` (features streamed to ``.npy`` files for ``nclab measure``)."""

from nclab.monitor.export import extract_features
from nclab.monitor.monitor import (
    CLASSIFIER_METRICS,
    Classifier,
    CollapseMonitor,
    MonitorResult,
    Schedule,
    find_linear_classifier,
    next_token_targets,
)

__all__ = [
    "CLASSIFIER_METRICS",
    "Classifier",
    "CollapseMonitor",
    "MonitorResult",
    "Schedule",
    "extract_features",
    "find_linear_classifier",
    "next_token_targets",
]
