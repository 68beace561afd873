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
    the [Han et al. 2022] recipe: [Han et al. 2022]) or AdamW (decoupled decay).

    Parameters
    ----------
    model : torch.nn.Module
        The network; its parameters with ``requires_grad`` are optimised.
    cfg : OptimConfig
        The ``optim`` section of a :class:`~nclab.train.RunConfig`.

    Returns
    -------
    torch.optim.Optimizer
        ``torch.optim.SGD`` or ``torch.optim.AdamW`` with one parameter group.

    Examples
    --------
    >>> from nclab.train.config import OptimConfig
    >>> net = nn.Sequential(nn.Linear(4, 3), nn.Linear(3, 2))
    >>> net[0].requires_grad_(False)  # doctest: +ELLIPSIS
    Linear(...)
    >>> opt = make_optimizer(net, OptimConfig(name="sgd", lr=0.1))
    >>> type(opt).__name__, len(opt.param_groups[0]["params"]), opt.param_groups[0]["weight_decay"]
    ('SGD', 2, 0.0005)
    """
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
    ``min + (base - min)(1 + cos(pi (i - warmup) / (epochs - warmup))) / 2``; ``exponential``:
    ``max(min, base * gamma^(i - warmup))`` (``ExponentialLR`` stepped per epoch from the end of the warmup;
    [Xu & Liu 2023, Sec. 6.1]: x 0.975 per epoch after a 10-epoch warmup); ``constant``: ``base``.

    Parameters
    ----------
    epoch_index : int
        The 0-based epoch.
    base_lr : float
        The base learning rate (``optim.lr``).
    cfg : ScheduleConfig
        The ``schedule`` section of a :class:`~nclab.train.RunConfig`.
    epochs : int
        Epochs of the run (the milestone fractions and the cosine span refer to it).

    Returns
    -------
    float
        The learning rate of that epoch.

    Examples
    --------
    >>> from nclab.train.config import ScheduleConfig
    >>> step = ScheduleConfig(name="exponential", gamma=0.975, warmup_epochs=10, warmup_start_lr=1e-5)
    >>> [round(lr_at(i, 0.1, step, 300), 6) for i in (0, 5, 10, 11, 50)]
    [1e-05, 0.050005, 0.1, 0.0975, 0.036323]
    """
    w = cfg.warmup_epochs
    if epoch_index < w:
        return cfg.warmup_start_lr + (base_lr - cfg.warmup_start_lr) * epoch_index / w
    if cfg.name == "multistep":
        return base_lr * cfg.gamma ** sum(m <= epoch_index for m in milestone_epochs(cfg, epochs))
    if cfg.name == "cosine":
        span = max(epochs - w, 1)
        return cfg.min_lr + (base_lr - cfg.min_lr) * (1 + math.cos(math.pi * (epoch_index - w) / span)) / 2
    if cfg.name == "exponential":
        return max(cfg.min_lr, base_lr * cfg.gamma ** (epoch_index - w))
    return base_lr
