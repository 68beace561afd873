"""The papers' training recipes as named presets (partial configs merged under a run's own YAML).

``NAME`` is the paper-scale recipe; ``NAME@cpu`` the same recipe with fewer epochs (milestones given as
fractions scale with it) for a 2-core machine. Data and model are left to the run.

* ``han2022-mse`` ([Han et al. 2022] App. A.3, Colab lr): MSE (nn.MSELoss), SGD 0.9, wd 5e-4, batch 128, 350 epochs,
  lr 0.0184, /10 at 1/3 and 2/3 of the epochs;
* ``han2022-ce`` ([Han et al. 2022] / PNAS): the same with CE, lr 0.0679;
* ``wang2024-pfc`` [Wang et al. 2024, Sec. 4.3]: CE, SGD 0.9, wd 5e-4, batch 128, 350 epochs, lr 0.01 (0.005 for MNIST:
  override ``optim.lr``), /10 at epochs 117 and 233;
* ``xu2023-vci`` [Xu & Liu 2023, Sec. 3.2]: CE, SGD Nesterov 0.9, wd 8e-5, batch 256, lr 0.1, 10-epoch linear warmup
  from 1e-5, cosine, 300 epochs;
* ``xu2023-vci-step`` [Xu & Liu 2023, Sec. 6.1]: the same with the step schedule, lr x 0.975 every epoch after the
  warmup (``schedule.name: exponential``);
* ``xu2023-deit`` [Xu & Liu 2023, Sec. 6.1] after [Touvron et al. 2021]: AdamW, lr 1e-3 at batch 1024, wd 0.05,
  5-epoch linear warmup from 1e-6, cosine to 1e-5, label smoothing 0.1, ``data.augment: deit`` (random-resized
  crop, flip, AutoAugment in place of RandAugment, random erasing 0.25, mixup 0.8 / CutMix 1.0), 300 epochs; set
  ``model.options.drop_path_rate: 0.1`` on the DeiT (stochastic depth is a network option);
* ``jiang2023-gnc`` ([Jiang et al. 2024, Fig. 2] / B.3): cosine head tau 0.1, CE, SGD 0.9, wd 5e-4, lr 0.1, cosine, 200
  epochs.

The batch sizes are the papers' global batches; with fewer devices, ``train.grad_accum`` keeps the global batch
(and the lr that goes with it).
"""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["PRESETS", "preset_dict", "rescale_schedule"]

_SGD_004 = {"name": "sgd", "momentum": 0.9, "weight_decay": 5e-4, "nesterov": False}
_STEP_THIRDS = {"name": "multistep", "milestone_fractions": [1 / 3, 2 / 3], "gamma": 0.1, "milestones": None}

PRESETS: dict[str, dict[str, Any]] = {
    "han2022-mse": {
        "loss": {"name": "mse", "reduction": "mean"},
        "optim": {**_SGD_004, "lr": 0.0184},
        "schedule": _STEP_THIRDS,
        "train": {"epochs": 350, "batch_size": 128, "drop_last": True},
    },
    "han2022-ce": {
        "loss": {"name": "ce"},
        "optim": {**_SGD_004, "lr": 0.0679},
        "schedule": _STEP_THIRDS,
        "train": {"epochs": 350, "batch_size": 128, "drop_last": True},
    },
    "wang2024-pfc": {
        "loss": {"name": "ce"},
        "optim": {**_SGD_004, "lr": 0.01},
        "schedule": {"name": "multistep", "milestones": [117, 233], "gamma": 0.1},
        "train": {"epochs": 350, "batch_size": 128},
    },
    "xu2023-vci": {
        "loss": {"name": "ce"},
        "optim": {"name": "sgd", "momentum": 0.9, "nesterov": True, "weight_decay": 8e-5, "lr": 0.1},
        "schedule": {"name": "cosine", "warmup_epochs": 10, "warmup_start_lr": 1e-5},
        "train": {"epochs": 300, "batch_size": 256},
    },
    "xu2023-vci-step": {
        "loss": {"name": "ce"},
        "optim": {"name": "sgd", "momentum": 0.9, "nesterov": True, "weight_decay": 8e-5, "lr": 0.1},
        "schedule": {"name": "exponential", "gamma": 0.975, "warmup_epochs": 10, "warmup_start_lr": 1e-5},
        "train": {"epochs": 300, "batch_size": 256},
    },
    "xu2023-deit": {
        "data": {"augment": "deit"},
        "loss": {"name": "ce", "label_smoothing": 0.1},
        "optim": {"name": "adamw", "lr": 1e-3, "weight_decay": 0.05, "betas": [0.9, 0.999]},
        "schedule": {"name": "cosine", "warmup_epochs": 5, "warmup_start_lr": 1e-6, "min_lr": 1e-5},
        "train": {"epochs": 300, "batch_size": 1024},
    },
    "jiang2023-gnc": {
        "model": {"head": {"kind": "cosine", "tau": 0.1}},
        "loss": {"name": "ce"},
        "optim": {**_SGD_004, "lr": 0.1},
        "schedule": {"name": "cosine"},
        "train": {"epochs": 200, "batch_size": 128},
    },
}

# CPU variants: epochs cut; explicit milestones rescaled to the same fractions of the run.
_CPU_EPOCHS = {
    "han2022-mse": 60,
    "han2022-ce": 60,
    "wang2024-pfc": 60,
    "xu2023-vci": 50,
    "xu2023-vci-step": 50,
    "xu2023-deit": 50,
    "jiang2023-gnc": 40,
}


def rescale_schedule(schedule: dict[str, Any], full: int, epochs: int) -> dict[str, Any]:
    """``schedule`` (a config's ``schedule`` section) for a run of ``epochs`` instead of ``full`` epochs: explicit
    milestones and the warmup at the same fractions of the run (each at least epoch 1); ``milestone_fractions``
    and the rest are fractions or rates already and stay.

    Parameters
    ----------
    schedule : dict
        A ``schedule`` section (not modified).
    full : int
        The epochs it was written for, ``>= 1``.
    epochs : int
        The epochs of the shorter (or longer) run, ``>= 1``.

    Returns
    -------
    dict
        A new section.

    See Also
    --------
    preset_dict : the ``@cpu`` presets are rescaled with it.

    Examples
    --------
    [Wang et al. 2024]'s lr drops at epochs 117 and 233 of 350, for a 30-epoch run:

    >>> rescale_schedule({"name": "multistep", "milestones": [117, 233], "gamma": 0.1}, 350, 30)["milestones"]
    [10, 20]
    """
    out = copy.deepcopy(schedule)
    if out.get("milestones"):
        out["milestones"] = [max(1, round(m * epochs / full)) for m in out["milestones"]]
    if out.get("warmup_epochs"):
        out["warmup_epochs"] = max(1, round(out["warmup_epochs"] * epochs / full))
    return out


def preset_dict(name: str) -> dict[str, Any]:
    """The partial config of preset ``name`` (``NAME`` or ``NAME@cpu``).

    ``@cpu`` cuts the epochs (e.g. 350 -> 60 for ``han2022-mse``) and rescales explicit milestones and the warmup
    to the same fractions of the run.

    Parameters
    ----------
    name : str
        A key of ``PRESETS``, optionally followed by ``@cpu`` (or ``@paper``, the same as none).

    Returns
    -------
    dict
        A fresh copy of the preset's sections (modifying it leaves the preset unchanged), with ``preset: name``.

    Raises
    ------
    ValueError
        An unknown preset or scale.

    See Also
    --------
    nclab.train.resolve_config : merges the preset under a config.

    Examples
    --------
    >>> preset_dict("han2022-mse")["train"]["epochs"], preset_dict("han2022-mse@cpu")["train"]["epochs"]
    (350, 60)
    >>> preset_dict("han2022-mse@cpu")["preset"]
    'han2022-mse@cpu'
    """
    base, _, scale = name.partition("@")
    if base not in PRESETS:
        raise ValueError(f"unknown preset {base!r}; known: {', '.join(PRESETS)} (append @cpu for the CPU variant)")
    out = copy.deepcopy(PRESETS[base])
    if scale in ("", "paper"):
        pass
    elif scale == "cpu":
        full = out["train"]["epochs"]
        epochs = _CPU_EPOCHS[base]
        out["train"]["epochs"] = epochs
        out["schedule"] = rescale_schedule(out["schedule"], full, epochs)
    else:
        raise ValueError(f"unknown preset scale {scale!r} in {name!r}; use NAME or NAME@cpu")
    out["preset"] = name
    return out
