"""The measurement engine: collapse of any ``nn.Module`` on any data, in streamed passes.

Below both the built-in trainer (:mod:`nclab.train`) and :class:`~nclab.monitor.CollapseMonitor` for any loop:

- :mod:`~nclab.measure.hooks`: forward hooks on named layers (:func:`resolve_layers`, :class:`FeatureHooks`,
  :func:`collect_features`, :func:`eval_mode`);
- :mod:`~nclab.measure.plan`: :class:`MeasurePlan`, what one measurement does, as a value;
- :mod:`~nclab.measure.passes`: the forward pass and its sinks -- pass 1 (class statistics, loss and error,
  :class:`StatsPass`), pass 2 (NCC, :func:`ncc_pass`), the feature cache between them;
- :mod:`~nclab.measure.split`: :func:`measure_split`, one split of tensors measured into metric rows;
- :mod:`~nclab.measure.batches`: data as ``(inputs, labels)`` batches (tensors, any iterable, Hugging Face
  mappings);
- :mod:`~nclab.measure.classifier`: :func:`find_classifier`, the one set of rules for the classifier ``W, b``;
- :mod:`~nclab.measure.schedule`: :class:`Schedule` and :func:`measurement_epochs`, when to measure;
- :mod:`~nclab.measure.counts`: :class:`PassCounts`, the loss and error sums as an accumulator;
- :mod:`~nclab.measure.distributed`: :func:`is_distributed`, :func:`rank`;
- :mod:`~nclab.measure.robustness`: :func:`deepfool`, DeepFool's minimal perturbations and the mean relative
  perturbation (adversarial robustness, [Papyan et al. 2020, Fig. 8]).
"""

from nclab.measure.batches import call_model, iterable_batches, tensor_batches
from nclab.measure.classifier import Classifier, find_classifier
from nclab.measure.counts import PassCounts
from nclab.measure.distributed import is_distributed, rank
from nclab.measure.hooks import FeatureHooks, collect_features, eval_mode, resolve_layers
from nclab.measure.passes import (
    Batch,
    FeatureCache,
    KeepingStatsPass,
    PassSink,
    StatsPass,
    autocast,
    forward_pass,
    ncc_pass,
)
from nclab.measure.plan import FULL_TRACK_MAX_DIM, LossFn, MeasurePlan, TargetsFn
from nclab.measure.robustness import DEEPFOOL_MAX_ITER, DEEPFOOL_OVERSHOOT, DeepFoolResult, deepfool
from nclab.measure.schedule import Schedule, check_epoch, measurement_epochs
from nclab.measure.split import SplitMeasurement, layer_rows, measure_batches, measure_split, run_passes

__all__ = [
    "DEEPFOOL_MAX_ITER",
    "DEEPFOOL_OVERSHOOT",
    "FULL_TRACK_MAX_DIM",
    "Batch",
    "Classifier",
    "DeepFoolResult",
    "FeatureCache",
    "FeatureHooks",
    "KeepingStatsPass",
    "LossFn",
    "MeasurePlan",
    "PassCounts",
    "PassSink",
    "Schedule",
    "SplitMeasurement",
    "StatsPass",
    "TargetsFn",
    "autocast",
    "call_model",
    "check_epoch",
    "collect_features",
    "deepfool",
    "eval_mode",
    "find_classifier",
    "forward_pass",
    "is_distributed",
    "iterable_batches",
    "layer_rows",
    "measure_batches",
    "measure_split",
    "measurement_epochs",
    "ncc_pass",
    "rank",
    "resolve_layers",
    "run_passes",
    "tensor_batches",
]
