"""Collapse metrics: pure functions of ClassStats (plus classifier W (K, d), b (K,))."""

from nclab.metrics._registry import REGISTRY, MetricInfo, collapse_direction

__all__ = ["REGISTRY", "MetricInfo", "collapse_direction"]
