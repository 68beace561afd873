"""Building blocks shared by the metric modules: the ClassStats check and the unit directions of class vectors.

Public so that every metric module imports them by name (none reaches into another module's private helpers).
"""

from __future__ import annotations

import warnings

import numpy as np

from nclab.metrics.means_geometry import ZERO_RTOL, DegenerateMetricWarning
from nclab.stats.class_stats import ClassStats

__all__ = ["check_stats", "unit_directions"]


def check_stats(stats: ClassStats, *, name: str = "stats") -> None:
    """Raise unless ``stats`` is a :class:`~nclab.stats.ClassStats` that has seen samples in every class.

    Raises ``TypeError`` (not a ClassStats), ``ValueError`` (no sample) or
    :class:`~nclab.stats.class_stats.EmptyClassError` (naming the empty classes), each naming ``name``.
    """
    if not isinstance(stats, ClassStats):
        raise TypeError(f"{name} must be a ClassStats, got {type(stats).__name__}")
    if stats.num_samples == 0:
        raise ValueError(f"{name}: these ClassStats have seen no sample")
    stats.means  # noqa: B018 -- raises EmptyClassError naming the empty classes


def unit_directions(V: np.ndarray, scale: float, metric_name: str) -> np.ndarray | None:
    """The unit rows of ``V (K, d)``, or None after a :class:`DegenerateMetricWarning` naming the rows whose norm
    is ``<= ZERO_RTOL * scale`` (``scale``: the largest norm of the uncentred input; all rows when it is 0): a
    metric of directions is then nan."""
    norms = np.linalg.norm(V, axis=1)
    zero = np.flatnonzero(norms <= ZERO_RTOL * scale) if scale > 0 else np.arange(V.shape[0])
    if zero.size:
        shown = ", ".join(map(str, zero[:10])) + (" ..." if zero.size > 10 else "")
        warnings.warn(
            f"{metric_name} is undefined: rows {shown} have zero norm, so their directions are undefined; "
            "returning nan",
            DegenerateMetricWarning,
            stacklevel=3,
        )
        return None
    return V / norms[:, None]
