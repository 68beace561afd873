"""Training to the terminal phase with collapse measured on a schedule (per epoch, per layer, per split).

``train(config, out)`` runs a :class:`RunConfig` (YAML + presets + ``--set`` overrides, see
:mod:`nclab.train.config`) into a run directory, epoch by epoch through a :class:`Trainer`; its metrics table is
:mod:`nclab.io.run_table`'s. :func:`measure_split` measures any model on any data; :mod:`nclab.train.hooks`
attaches to any ``nn.Module`` by layer names or regex. Under ``torchrun`` the same ``train`` is data-parallel
(DistributedDataParallel; the plumbing is :mod:`nclab.train.distributed`, docs/scaling.md).
"""

from nclab.train.config import ConfigError, RunConfig, apply_overrides, deep_merge, load_config, resolve_config
from nclab.train.hooks import FeatureHooks, collect_features, eval_mode, resolve_layers
from nclab.train.losses import make_loss, paper004_lambda, within_class_cosine_penalty
from nclab.train.measure import FeatureCache, SplitMeasurement, find_classifier, measure_split
from nclab.train.optim import lr_at, make_optimizer
from nclab.train.presets import PRESETS, preset_dict
from nclab.train.trainer import RunResult, RunState, Trainer, measurement_epochs, train

__all__ = [
    "PRESETS",
    "ConfigError",
    "FeatureCache",
    "FeatureHooks",
    "RunConfig",
    "RunResult",
    "RunState",
    "SplitMeasurement",
    "Trainer",
    "apply_overrides",
    "collect_features",
    "deep_merge",
    "eval_mode",
    "find_classifier",
    "load_config",
    "lr_at",
    "make_loss",
    "make_optimizer",
    "measure_split",
    "measurement_epochs",
    "paper004_lambda",
    "preset_dict",
    "resolve_config",
    "resolve_layers",
    "train",
    "within_class_cosine_penalty",
]
