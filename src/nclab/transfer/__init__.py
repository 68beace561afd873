"""Transfer of frozen features: linear probes, the MLO / MLOG scores and the transfer study runner.

[Xu & Liu 2023, Sec. 6.3] asks which collapse metric of a pretrained network predicts how well its frozen
features transfer; this package holds the probe protocol of [Kornblith et al. 2019] (:mod:`.probe`), the
scores (:mod:`.scores`) and the study that trains a grid of settings and correlates metrics with MLOG
(:mod:`.study`).
"""

from nclab.transfer.probe import (
    DEFAULT_L2_GRID,
    LogisticProbe,
    ProbeResult,
    fit_logistic,
    linear_probe,
    logistic_path,
    mean_per_class_accuracy,
    probe_options,
    sklearn_c,
    task_data_options,
    top1_accuracy,
)
from nclab.transfer.scores import log_odds, mean_log_odds, mlog

__all__ = [
    "DEFAULT_L2_GRID",
    "LogisticProbe",
    "ProbeResult",
    "fit_logistic",
    "linear_probe",
    "log_odds",
    "logistic_path",
    "mean_log_odds",
    "mean_per_class_accuracy",
    "mlog",
    "probe_options",
    "sklearn_c",
    "task_data_options",
    "top1_accuracy",
]
