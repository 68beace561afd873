"""Training to the terminal phase with collapse measured on a schedule (per epoch, per layer, per split).

``train(config, out)`` runs a :class:`RunConfig` (YAML + presets + ``--set`` overrides, see
:mod:`nclab.train.config`) into a run directory, epoch by epoch through a :class:`Trainer`; its metrics table is
:mod:`nclab.io.run_table`'s, its measurements :mod:`nclab.measure`'s (the engine any model on any data can use).
Under ``torchrun`` the same ``train`` is data-parallel (DistributedDataParallel; the plumbing is
:mod:`nclab.train.distributed`, docs/scaling.md). The data a run reads (in memory or streamed from image files,
augmented) is :mod:`nclab.train.feeds`'; :func:`plan_run` says what a config will do before it runs.
"""

from nclab.train.config import ConfigError, RunConfig, apply_overrides, deep_merge, load_config, resolve_config
from nclab.train.losses import lambda_from_weight_decay, make_loss, within_class_cosine_penalty
from nclab.train.optim import lr_at, make_optimizer
from nclab.train.plan import MemoryEstimate, RunPlan, plan_run
from nclab.train.presets import PRESETS, preset_dict, rescale_schedule
from nclab.train.trainer import RunResult, RunState, Trainer, train

__all__ = [
    "PRESETS",
    "ConfigError",
    "MemoryEstimate",
    "RunConfig",
    "RunPlan",
    "RunResult",
    "RunState",
    "Trainer",
    "apply_overrides",
    "deep_merge",
    "lambda_from_weight_decay",
    "load_config",
    "lr_at",
    "make_loss",
    "make_optimizer",
    "plan_run",
    "preset_dict",
    "rescale_schedule",
    "resolve_config",
    "train",
    "within_class_cosine_penalty",
]
