"""Collapse measurement for training code outside nclab: :class:`CollapseMonitor` (any loop, any iterable of
batches, distributed-aware) and :func:`extract_features` (features streamed to ``.npy`` files for ``nclab
measure``). The engine under both, with the schedule (:class:`nclab.measure.Schedule`) and the classifier
detection rules (:func:`nclab.measure.find_classifier`), is :mod:`nclab.measure`."""

from nclab.monitor.export import extract_features
from nclab.monitor.monitor import CLASSIFIER_METRICS, CollapseMonitor, MonitorResult, next_token_targets

__all__ = ["CLASSIFIER_METRICS", "CollapseMonitor", "MonitorResult", "extract_features", "next_token_targets"]
