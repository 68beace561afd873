"""Training to the terminal phase with collapse measured on a schedule (per epoch, per layer, per split).

``train(config, out)`` runs a :class:`RunConfig` (YAML + presets + ``--set`` overrides, see
:mod:`nclab.train.config`) into a run directory; :func:`measure_split` measures any model on any data;
:mod:`nclab.train.hooks` attaches to any ``nn.Module`` by layer names or regex.
"""

from nclab.train.config import ConfigError, RunConfig, apply_overrides, load_config, resolve_config
from nclab.train.hooks import FeatureHooks, extract_features, resolve_layers
from nclab.train.losses import make_loss, paper004_lambda, within_class_cosine_penalty
from nclab.train.measure import SplitMeasurement, measure_split
from nclab.train.optim import lr_at, make_optimizer
from nclab.train.presets import PRESETS, preset_dict
from nclab.train.runio import read_metrics, write_metrics
from nclab.train.trainer import RunResult, measurement_epochs, train

__all__ = [
    "PRESETS",
    "ConfigError",
    "FeatureHooks",
    "RunConfig",
    "RunResult",
    "SplitMeasurement",
    "apply_overrides",
    "extract_features",
    "load_config",
    "lr_at",
    "make_loss",
    "make_optimizer",
    "measure_split",
    "measurement_epochs",
    "paper004_lambda",
    "preset_dict",
    "read_metrics",
    "resolve_config",
    "resolve_layers",
    "train",
    "within_class_cosine_penalty",
    "write_metrics",
]
