"""Streaming class statistics: the single pass over (features, labels) that every metric reads."""

from nclab.stats.class_stats import FORMAT_VERSION, ClassStats, EmptyClassError

__all__ = ["FORMAT_VERSION", "ClassStats", "EmptyClassError"]
