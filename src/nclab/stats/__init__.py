"""Streaming accumulators: the single pass over (features, labels) that every metric reads.

All of them follow one protocol (:class:`Accumulator`: declared state, exact ``merge`` and ``all_reduce``,
``reset``, ``state_dict`` and ``save`` / ``load``): :class:`ClassStats` (per-class moments),
:class:`NCCAccumulator` (nearest-class-centre counts), :class:`PairedClassStats` and :class:`PathStats` (two or
all layers of the same samples), :class:`GeodesicNCC` (NCC accuracy along the straight line between two layers).
:class:`ClassMoments` is the view of a ClassStats' derived statistics (Sigma_W, Sigma_B, ...) that the metrics
read, with its named cache (:class:`MomentKey`).
"""

from nclab.stats.accumulator import FORMAT_VERSION, Accumulator, StateSpec, agree_on_shifts
from nclab.stats.class_stats import ClassStats, EmptyClassError
from nclab.stats.geodesic_ncc import GeodesicNCC
from nclab.stats.moments import ClassMoments, MomentKey
from nclab.stats.ncc import NCCAccumulator
from nclab.stats.paired import PairedClassStats
from nclab.stats.path import PathStats, relative_depth

__all__ = [
    "FORMAT_VERSION",
    "Accumulator",
    "ClassMoments",
    "ClassStats",
    "EmptyClassError",
    "GeodesicNCC",
    "MomentKey",
    "NCCAccumulator",
    "PairedClassStats",
    "PathStats",
    "StateSpec",
    "agree_on_shifts",
    "relative_depth",
]
