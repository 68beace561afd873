"""Collapse metrics: pure functions of ClassStats (plus classifier W (K, d), b (K,)).

Every public metric is registered in :data:`REGISTRY` with its collapse direction and source; the aliases
``pfc1``/``sq_dist`` (= ``trace_ratio``) and ``pfc2`` (= ``etf_gram_error``) are the same functions under the names
[Wang et al. 2024; Xu & Liu 2023] use, and the registry entry ``pfc3`` names ``nclab.stats.NCCAccumulator``'s
``ncc_accuracy``.
"""

from nclab.metrics._linalg import PsdPinv, psd_cholesky, psd_pinv
from nclab.metrics._registry import REGISTRY, MetricInfo, collapse_direction
from nclab.metrics.cdnv import cdnv
from nclab.metrics.classes import ClassesRule, check_classes, present_classes, select_classes
from nclab.metrics.collapse_report import (
    DEFAULT_CONVENTIONS,
    ImbalanceWarning,
    check_convention,
    check_conventions,
    collapse_report,
)
from nclab.metrics.common import DegenerateMetricWarning, TargetUnattainableWarning
from nclab.metrics.cosine import class_separation, within_class_cosine, within_class_cosine_distance
from nclab.metrics.duality import duality_distances, uniform_duality
from nclab.metrics.gnc import (
    GNC2,
    GNC2_REPORT_MAX_K,
    MetricOmittedWarning,
    check_normalized_stats,
    gnc1,
    gnc2,
    gnc2_entries,
    gnc2_margin,
    gnc2_ratio,
    gnc3,
    normalize_features,
)
from nclab.metrics.means_geometry import (
    angle_statistics,
    classifier_accuracy_on_means,
    equiangularity,
    equinorm,
    etf_gram_error,
    etf_gram_error_spectral,
    max_angle,
    orthogonal_frame_error,
    pfc2,
    self_duality,
)
from nclab.metrics.ncc import ncc_metrics
from nclab.metrics.ood import ood_orthogonality
from nclab.metrics.probe import probe_mse_lstsq, probe_mse_optimal
from nclab.metrics.spectra import rank_metrics, spectrum
from nclab.metrics.uniformity import hyperspherical_uniformity
from nclab.metrics.variability import fuzziness, nc1, pfc1, sq_dist, trace_ratio, vci, within_class_split

__all__ = [
    "DEFAULT_CONVENTIONS",
    "GNC2",
    "GNC2_REPORT_MAX_K",
    "REGISTRY",
    "ClassesRule",
    "DegenerateMetricWarning",
    "ImbalanceWarning",
    "MetricInfo",
    "MetricOmittedWarning",
    "PsdPinv",
    "TargetUnattainableWarning",
    "angle_statistics",
    "cdnv",
    "check_classes",
    "check_convention",
    "check_conventions",
    "check_normalized_stats",
    "class_separation",
    "classifier_accuracy_on_means",
    "collapse_direction",
    "collapse_report",
    "duality_distances",
    "equiangularity",
    "equinorm",
    "etf_gram_error",
    "etf_gram_error_spectral",
    "fuzziness",
    "gnc1",
    "gnc2",
    "gnc2_entries",
    "gnc2_margin",
    "gnc2_ratio",
    "gnc3",
    "hyperspherical_uniformity",
    "max_angle",
    "nc1",
    "ncc_metrics",
    "normalize_features",
    "ood_orthogonality",
    "orthogonal_frame_error",
    "pfc1",
    "pfc2",
    "present_classes",
    "probe_mse_lstsq",
    "probe_mse_optimal",
    "psd_cholesky",
    "psd_pinv",
    "rank_metrics",
    "select_classes",
    "self_duality",
    "spectrum",
    "sq_dist",
    "trace_ratio",
    "uniform_duality",
    "vci",
    "within_class_cosine",
    "within_class_cosine_distance",
    "within_class_split",
]
