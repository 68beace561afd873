"""Optimisers and the per-epoch learning-rate schedule (a pure function of the epoch, so a resumed run needs
no scheduler state)."""

from __future__ import annotations

import math

import torch
from torch import nn

from nclab.train.config import OptimConfig, ScheduleConfig

__all__ = ["lr_at", "make_optimizer", "milestone_epochs"]


def make_optimizer(model: nn.Module, cfg: OptimConfig) -> torch.optim.Optimizer:
    """SGD (PyTorch's coupled weight decay on every trainable parameter, biases and BN included, as paper
    the [Han et al. 2022] recipe: [Han et al. 2022]) or AdamW (decoupled decay)."""
    params = [p for p in model.parameters() if p.requires_grad]
    if cfg.name == "sgd":
        return torch.optim.SGD(
            params, lr=cfg.lr, momentum=cfg.momentum, nesterov=cfg.nesterov, weight_decay=cfg.weight_decay
        )
    return torch.optim.AdamW(params, lr=cfg.lr, betas=cfg.betas, weight_decay=cfg.weight_decay)


def milestone_epochs(cfg: ScheduleConfig, epochs: int) -> list[int]:
    """Epoch counts after which the multistep schedule multiplies the lr by gamma."""
    if cfg.milestones is not None:
        return sorted(cfg.milestones)
    return sorted(int(epochs * f) for f in cfg.milestone_fractions)


def lr_at(epoch_index: int, base_lr: float, cfg: ScheduleConfig, epochs: int) -> float:
    """Learning rate of 0-based epoch ``epoch_index`` (the epoch numbered ``epoch_index + 1``).

    Warmup: ``start + (base - start) i / warmup`` for ``i < warmup``. Then ``multistep``:
    ``base * gamma^#{m <= i}`` (``torch.optim.lr_scheduler.MultiStepLR`` stepped per epoch); ``cosine``:
    ``min + (base - min)(1 + cos(pi (i - warmup) / (epochs - warmup))) / 2``; ``constant``: ``base``."""
    w = cfg.warmup_epochs
    if epoch_index < w:
        return cfg.warmup_start_lr + (base_lr - cfg.warmup_start_lr) * epoch_index / w
    if cfg.name == "multistep":
        return base_lr * cfg.gamma ** sum(m <= epoch_index for m in milestone_epochs(cfg, epochs))
    if cfg.name == "cosine":
        span = max(epochs - w, 1)
        return cfg.min_lr + (base_lr - cfg.min_lr) * (1 + math.cos(math.pi * (epoch_index - w) / span)) / 2
    return base_lr
