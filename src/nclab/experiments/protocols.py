"""What an experiment runs at one scale, as a value: :class:`Protocol`, with its cost (:func:`estimate`) and data
(:func:`data_needs`, :func:`check_data`).

A training protocol is read off the resolved :class:`~nclab.train.config.RunConfig` the run will train
(:meth:`Protocol.from_config`), so what ``nclab experiment list`` and ``run --dry-run`` show is what runs; a
solver protocol (UFM, ODE, code searches) records the solver's sizes (:meth:`Protocol.solver`). The papers'
values these are compared with live apart, in each paper package's ``paper`` module (``PROTOCOLS``).

GPU cost (:func:`estimate`) is scaled from two measured H200 epochs (``benchmarks/RESULTS.md``, Throughput on an
NVIDIA H200; bf16, channels_last, batch 128): ResNet-18 (CIFAR stem) on 60,000 Fashion-MNIST images padded to
32 x 32 in 4.6 s (468 steps, 9.8 ms a step) and the [Wang et al. 2024] Fashion-MNIST ``pfc_resnet`` in 4.1 s
(8.8 ms a step, the trainer's per-step floor for small networks). A step costs ``max(8.8 ms, 9.8 ms x
MACs(batch) / MACs(ResNet-18, 32 x 32, batch 128))``, MACs counted by a forward pass on the ``meta`` device (convs
and linear layers; attention's matrix products are left out, so a ViT is underestimated); one measurement of the
penultimate layer costs 0.24 epochs, of all layers 2.4 (the same benchmark). JPEG decoding of streamed data is not
counted: an ImageNet epoch is input-bound on most hosts.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal

__all__ = [
    "DATASET_FACTS",
    "Estimate",
    "Protocol",
    "RunSelection",
    "check_data",
    "data_needs",
    "estimate",
    "model_cost",
]

#: Per dataset: training images (the whole train split), classes, the side of its images. Used for the cost of a
#: run on the whole split and for the input size of a protocol; the files' own counts win when they are loaded.
DATASET_FACTS: dict[str, tuple[int, int, int]] = {
    "digits": (1352, 10, 8),
    "mnist": (60_000, 10, 28),
    "fashion-mnist": (60_000, 10, 28),
    "cifar10": (50_000, 10, 32),
    "cifar100": (50_000, 100, 32),
    "svhn": (73_257, 10, 32),
    "stl10": (5_000, 10, 96),
    "tiny-imagenet": (100_000, 200, 64),
    "imagenet": (1_281_167, 1000, 224),
}

#: The options of each loss a protocol shows (those that act for it).
_LOSS_OPTIONS: dict[str, tuple[str, ...]] = {
    "mse": ("reduction", "target_scale"),
    "ce": ("tau", "label_smoothing"),
    "ce_cosreg": ("tau", "label_smoothing", "cosreg_weight", "cosreg_variant"),
}

# the measured H200 anchors of the module docstring
_STEP_S_R18 = 4.6 / 468
_STEP_FLOOR_S = 4.1 / 468
_MEASURE_EPOCHS = {"penultimate": 0.24, "all": 2.4}


@dataclass(frozen=True)
class Protocol:
    """One run (or one solver set-up) of an experiment at one scale.

    Parameters
    ----------
    label : str
        Which run of the experiment this is (``"fashion-mnist/resnet18/mse"``).
    kind : {"training", "solver"}
        A network trained by :func:`nclab.train.trainer.train`, or a solver (UFM, ODE, code search) whose
        sizes are ``solver``.
    model, model_options, head
        The :func:`nclab.nets.build_model` name, its keyword options and the head spec.
    dataset, classes, per_class, test_per_class, input_size, preprocessing
        The data: a dataset of :mod:`nclab.data`, the classes kept (``None``: all), the balanced subset sizes
        (``None``: the whole split), the side of the images the network sees, and how they are prepared.
    augment : str or None
        A recipe of :data:`nclab.data.recipes.AUGMENT_RECIPES` (``None``: none).
    loss, loss_options, optimiser, momentum, nesterov, lr, lr_sweep, schedule, batch, epochs, weight_decay
        The recipe; ``lr_sweep`` the learning rates the paper sweeps (``lr`` is the one run).
    seeds : tuple of int
        The seeds run (one run per seed).
    measure : mapping
        When and what is measured (``epochs``, ``splits``, ``layers``).
    probes : mapping or None
        Downstream linear probes (the transfer study of [Xu & Liu 2023]).
    solver : mapping
        A solver protocol's sizes (``K``, ``d``, ``n``, steps, lr, grids).

    See Also
    --------
    estimate : its GPU cost; data_needs, check_data : its data.
    nclab.experiments.registry.paper_protocols : the papers' values it is compared with.

    Examples
    --------
    >>> p = Protocol.solver("UFM", K=4, d=20, n=50, steps=100_000)
    >>> p.kind, p.summary()
    ('solver', 'UFM: K=4, d=20, n=50, steps=100000')
    """

    label: str
    kind: Literal["training", "solver"] = "training"
    model: str | None = None
    model_options: Mapping[str, Any] = field(default_factory=dict)
    head: Mapping[str, Any] = field(default_factory=dict)
    dataset: str | None = None
    classes: tuple[int, ...] | None = None
    per_class: int | None = None
    test_per_class: int | None = None
    input_size: int | None = None
    preprocessing: str = ""
    augment: str | None = None
    loss: str | None = None
    loss_options: Mapping[str, Any] = field(default_factory=dict)
    optimiser: str | None = None
    momentum: float | None = None
    nesterov: bool | None = None
    lr: float | None = None
    lr_sweep: tuple[float, ...] = ()
    schedule: Mapping[str, Any] = field(default_factory=dict)
    batch: int | None = None
    epochs: int | None = None
    weight_decay: float | None = None
    seeds: tuple[int, ...] = (0,)
    measure: Mapping[str, Any] = field(default_factory=dict)
    probes: Mapping[str, Any] | None = None
    solver_sizes: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_config(
        cls,
        cfg: Any,
        label: str,
        *,
        lr_sweep: Sequence[float] = (),
        seeds: Sequence[int] | None = None,
        probes: Mapping[str, Any] | None = None,
    ) -> Protocol:
        """The protocol of the resolved run config ``cfg`` (:class:`~nclab.train.config.RunConfig`).

        ``seeds`` defaults to ``(cfg.seed,)``; the schedule keeps the keys that act for its ``name`` (a multistep
        schedule's milestones as the epochs they resolve to)."""
        d, m, opt, tr = cfg.data, cfg.model, cfg.optim, cfg.train
        classes = d.options.get("classes")
        side = d.image_size or d.pad_to or DATASET_FACTS.get(d.name, (0, 0, None))[2]
        prep = []
        if d.pad_to:
            prep.append(f"zero-pad to {d.pad_to}x{d.pad_to}")
        if d.streamed:
            prep.append(f"crop {d.image_size}")
        if d.normalize:
            prep.append("per-channel mean/std")
        loss = cfg.loss
        loss_opts = {k: getattr(loss, k) for k in _LOSS_OPTIONS[loss.name]}
        return cls(
            label=label,
            model=m.name,
            model_options=dict(m.options),
            head=m.head.build_kwargs(),
            dataset=d.name,
            classes=None if classes is None else tuple(int(c) for c in classes),
            per_class=d.per_class,
            test_per_class=d.test_per_class,
            input_size=side,
            preprocessing=", ".join(prep),
            augment=d.augment,
            loss=loss.name,
            loss_options=loss_opts,
            optimiser=opt.name,
            momentum=opt.momentum if opt.name == "sgd" else None,
            nesterov=opt.nesterov if opt.name == "sgd" else None,
            lr=opt.lr,
            lr_sweep=tuple(float(x) for x in lr_sweep),
            schedule=_schedule(cfg),
            batch=tr.batch_size,
            epochs=tr.epochs,
            weight_decay=opt.weight_decay,
            seeds=tuple(int(s) for s in (seeds if seeds is not None else (cfg.seed,))),
            measure={
                "epochs": cfg.measure.epochs,
                "num_log": cfg.measure.num_log,
                "splits": list(cfg.measure.splits),
                "layers": cfg.measure.layers,
            },
            probes=None if probes is None else dict(probes),
        )

    @classmethod
    def solver(cls, label: str, **sizes: Any) -> Protocol:
        """A solver protocol: ``sizes`` are the solver's (``K``, ``d``, ``n``, ``steps``, ``lr``, grids...)."""
        return cls(label=label, kind="solver", seeds=tuple(sizes.pop("seeds", (0,))), solver_sizes=dict(sizes))

    def to_dict(self) -> dict[str, Any]:
        """The protocol as JSON-able data (``nclab experiment list -f json``, ``run --dry-run -f json``)."""
        if self.kind == "solver":
            return {"label": self.label, "kind": "solver", "solver": _plain(self.solver_sizes),
                    "seeds": list(self.seeds)}  # fmt: skip
        return {
            "label": self.label,
            "kind": "training",
            "model": self.model,
            "model_options": _plain(self.model_options),
            "head": _plain(self.head),
            "data": {
                "name": self.dataset,
                "classes": None if self.classes is None else list(self.classes),
                "per_class": self.per_class,
                "test_per_class": self.test_per_class,
                "input_size": self.input_size,
                "preprocessing": self.preprocessing,
            },
            "augmentation": self.augment,
            "loss": self.loss,
            "loss_options": _plain(self.loss_options),
            "optimiser": {"name": self.optimiser, "momentum": self.momentum, "nesterov": self.nesterov},
            "lr": self.lr,
            "lr_sweep": list(self.lr_sweep),
            "schedule": _plain(self.schedule),
            "batch": self.batch,
            "epochs": self.epochs,
            "weight_decay": self.weight_decay,
            "seeds": list(self.seeds),
            "measure": _plain(self.measure),
            "probes": _plain(self.probes),
        }

    def summary(self) -> str:
        """One line: what runs (the list's and the dry run's words)."""
        if self.kind == "solver":
            return f"{self.label}: " + ", ".join(f"{k}={_short(v)}" for k, v in self.solver_sizes.items())
        data = self.dataset if self.per_class is None else f"{self.dataset} ({self.per_class}/class)"
        sweep = f" (sweep of {len(self.lr_sweep)})" if self.lr_sweep else ""
        seeds = f", {len(self.seeds)} seeds" if len(self.seeds) > 1 else ""
        return (
            f"{self.label}: {self.model} on {data} {self.input_size}px, {self.loss}, {self.optimiser} lr "
            f"{self.lr:g}{sweep}, {self.schedule.get('name')}, {self.epochs} ep, batch {self.batch}, wd "
            f"{self.weight_decay:g}{', aug ' + self.augment if self.augment else ''}{seeds}"
        )


def _schedule(cfg: Any) -> dict[str, Any]:
    s, epochs = cfg.schedule, cfg.train.epochs
    out: dict[str, Any] = {"name": s.name}
    if s.name == "multistep":
        out["milestones"] = list(s.milestones) if s.milestones else [int(epochs * f) for f in s.milestone_fractions]
        out["gamma"] = s.gamma
    if s.name == "exponential":
        out["gamma"] = s.gamma
    if s.name in ("cosine", "exponential") and s.min_lr:
        out["min_lr"] = s.min_lr
    if s.warmup_epochs:
        out["warmup_epochs"] = s.warmup_epochs
        out["warmup_start_lr"] = s.warmup_start_lr
    return out


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _short(value: Any) -> str:
    if isinstance(value, list | tuple):
        return f"[{_short(value[0])} .. {_short(value[-1])}] ({len(value)})" if len(value) > 3 else str(list(value))
    return f"{value:g}" if isinstance(value, float) else str(value)


# ---------------------------------------------------------------------------------------------------- cost
@dataclass(frozen=True)
class Estimate:
    """The cost of an experiment's training protocols on one H200: ``gpu_hours`` at the protocols' own lr
    (``sweep_gpu_hours`` with every lr of their sweeps), ``memory_gib`` the largest run's (weights, gradients,
    optimiser state in float32 and the bf16 activations of one batch), ``basis`` how it was computed."""

    gpu_hours: float
    sweep_gpu_hours: float
    memory_gib: float
    basis: str

    def to_dict(self) -> dict[str, Any]:
        return {"gpu_hours": round(self.gpu_hours, 2), "sweep_gpu_hours": round(self.sweep_gpu_hours, 2),
                "memory_gib": round(self.memory_gib, 2), "basis": self.basis}  # fmt: skip


#: :func:`model_cost` of the networks of the registered protocols, as measured (a meta-device forward takes about
#: 0.5 s a network, so listing the experiments would take 20 s). ``tests/test_reproduction_protocols.py`` recomputes
#: every entry and checks that every registered protocol's network is here.
KNOWN_MODEL_COSTS: dict[tuple[str, tuple[int, ...], int, str], tuple[int, int, int]] = {
    ("resnet18", (1, 32, 32), 10, "{}"): (554243072, 11172810, 1852426),
    ("vgg11_bn", (1, 32, 32), 10, "{}"): (151589888, 9229962, 486922),
    ("densenet", (1, 32, 32), 10, "{'depth': 250, 'growth': 12}"): (1354590174, 3899830, 46473616),
    ("resnet18", (3, 32, 32), 100, "{'d': 10}"): (555423720, 11175062, 1852526),
    ("densenet121", (3, 32, 32), 100, "{'d': 10}"): (888351720, 6957526, 12019822),
    ("resnext50_32x4d", (3, 32, 32), 100, "{'d': 10}"): (1343968232, 22993814, 13095022),
    ("resnet18", (3, 64, 64), 200, "{'d': 10}"): (2221677520, 11176162, 7406802),
    ("densenet121", (3, 64, 64), 200, "{'d': 10}"): (3553374160, 6958626, 48072914),
    ("resnext50_32x4d", (3, 64, 64), 200, "{'d': 10}"): (5375809488, 22994914, 52367570),
    ("resnet18", (3, 32, 32), 100, "{'d': 20}"): (555429840, 11181192, 1852536),
    ("densenet121", (3, 32, 32), 100, "{'d': 20}"): (888362960, 6968776, 12019832),
    ("resnext50_32x4d", (3, 32, 32), 100, "{'d': 20}"): (1343989712, 23015304, 13095032),
    ("resnet18", (3, 32, 32), 4, "{'d': 2}"): (555418632, 11169870, 1852422),
    ("resnet18", (3, 32, 32), 6, "{'d': 2}"): (555418636, 11169876, 1852424),
    ("densenet", (1, 32, 32), 10, "{'depth': 40, 'growth': 12}"): (71922984, 175690, 2610706),
    ("vgg13_bn", (3, 32, 32), 10, "{}"): (228267008, 9416010, 781834),
    ("resnet34", (3, 32, 32), 10, "{}"): (1159402496, 21282122, 3081226),
    ("densenet", (3, 32, 32), 10, "{'depth': 40, 'growth': 12}"): (72365352, 176122, 2610706),
    ("vgg11_bn", (3, 32, 32), 10, "{}"): (152769536, 9231114, 486922),
    ("resnet50", (3, 32, 32), 10, "{}"): (1297829888, 23520842, 9875466),
    ("densenet", (3, 32, 32), 10, "{'depth': 100, 'growth': 12}"): (287929692, 769162, 10054966),
    ("vgg11_bn", (3, 96, 96), 10, "{}"): (1494458368, 128812810, 4447754),
    ("resnet18", (3, 96, 96), 10, "{}"): (333108224, 11181642, 1374218),
    ("densenet121", (3, 96, 96), 10, "{}"): (520382464, 6964106, 7093770),
    ("fc_resnet", (784,), 10, "{'num_blocks': 10, 'width': 1000}"): (10794000, 10805010, 22010),
    ("pfc_resnet", (1, 28, 28), 10, "{'table': 'fashion-mnist'}"): (33505024, 439018, 294794),
    ("pfc_resnet", (3, 32, 32), 10, "{'table': 'cifar10'}"): (179789824, 6169162, 532490),
    ("pfc_resnet", (3, 96, 96), 10, "{'table': 'stl10'}"): (3528953856, 33089866, 9142282),
    ("pfc_resnet", (3, 32, 32), 100, "{'table': 'cifar100'}"): (1116176384, 27084708, 2736228),
    ("resnet18", (3, 32, 32), 10, "{}"): (555422720, 11173962, 1852426),
    ("resnet50", (3, 224, 224), 1000, "{}"): (4089184256, 25557032, 32042472),
}


@lru_cache(maxsize=64)
def model_cost(name: str, input_shape: tuple[int, ...], K: int, options: str) -> tuple[int, int, int]:
    """``(MACs per image, parameters, activation elements per image)`` of :func:`nclab.nets.build_model`'s
    ``name`` with ``K`` classes (``options`` a ``repr`` of its keyword options), from one forward pass on the
    ``meta`` device (no memory, no arithmetic): the MACs of every convolution and linear layer, the outputs of
    every leaf module.

    Examples
    --------
    >>> macs, params, _ = model_cost("resnet50", (3, 224, 224), 1000, "{}")
    >>> round(macs / 1e9, 2), params
    (4.09, 25557032)
    """
    known = KNOWN_MODEL_COSTS.get((name, tuple(input_shape), K, options))
    if known is not None:
        return known
    return measure_model_cost(name, input_shape, K, options)


def measure_model_cost(name: str, input_shape: tuple[int, ...], K: int, options: str) -> tuple[int, int, int]:
    """:func:`model_cost` measured by a forward pass on the ``meta`` device (never from :data:`KNOWN_MODEL_COSTS`)."""
    import torch
    from torch import nn

    from nclab.nets import build_model

    with torch.device("meta"):
        net = build_model(name, input_shape, K, **eval(options))
    counts = {"macs": 0, "acts": 0}

    def hook(mod: nn.Module, _inp: Any, out: Any) -> None:
        if not isinstance(out, torch.Tensor):
            return
        per_image = out.numel() // 2
        if isinstance(mod, nn.Conv2d):
            counts["macs"] += per_image * mod.in_channels // mod.groups * math.prod(mod.kernel_size)
        elif isinstance(mod, nn.Linear):
            counts["macs"] += per_image * mod.in_features
        if not list(mod.children()):
            counts["acts"] += per_image

    handles = [m.register_forward_hook(hook) for m in net.modules()]
    try:
        net.train()
        net(torch.empty(2, *input_shape, device="meta"))
    finally:
        for h in handles:
            h.remove()
    params = sum(p.numel() for p in net.parameters())
    return counts["macs"], params, counts["acts"]


def _input_shape(p: Protocol) -> tuple[tuple[int, ...], int, int]:
    """``(input shape, classes, training images)`` of a training protocol."""
    n_train, K, _ = DATASET_FACTS.get(p.dataset or "", (0, 0, 0))
    channels = 1 if p.dataset in ("digits", "mnist", "fashion-mnist") else 3
    if p.classes is not None:
        n_train, K = n_train * len(p.classes) // max(K, 1), len(p.classes)
    if p.per_class is not None:
        n_train = p.per_class * K
    side = int(p.input_size or 32)
    shape = (channels * side * side,) if p.model in ("mlp", "fc_resnet") else (channels, side, side)
    return shape, K, n_train


def _measured_epochs(p: Protocol) -> int:
    epochs = p.measure.get("epochs", "log")
    return len(epochs) if isinstance(epochs, list) else int(p.measure.get("num_log", 20)) + 2


def estimate(protocols: Sequence[Protocol]) -> Estimate | None:
    """The GPU cost of the training protocols on one H200; ``None`` when there are none.

    Per run, ``epochs + m x c`` epochs of ``ceil(N / batch)`` steps of ``max(8.8 ms, 9.8 ms x MACs(batch) /
    MACs(ResNet-18 at 32 x 32, batch 128))``, with ``N`` its training images, ``m`` its measured epochs and ``c``
    = 0.24 (penultimate layer) or 2.4 (all layers); times its seeds, and its lr sweep for ``sweep_gpu_hours``.

    See Also
    --------
    model_cost : the MACs, parameters and activations of a network.

    Examples
    --------
    ResNet-18 on 5,000 x 10 padded Fashion-MNIST images, 350 epochs and 32 measurements: 391 steps of 9.8 ms per
    epoch, (350 + 32 x 0.24) epochs.

    >>> p = Protocol("r18", model="resnet18", dataset="fashion-mnist", per_class=5000, input_size=32, batch=128,
    ...              epochs=350, optimiser="sgd", measure={"epochs": "log", "num_log": 30, "layers": "penultimate"})
    >>> round(estimate([p]).gpu_hours, 2)
    0.38
    """
    _, _, _ref_acts = model_cost("resnet18", (1, 32, 32), 10, "{}")
    ref_macs = model_cost("resnet18", (1, 32, 32), 10, "{}")[0] * 128
    hours = sweep = mem = 0.0
    trained = [p for p in protocols if p.kind == "training"]
    if not trained:
        return None
    for p in trained:
        shape, K, n_train = _input_shape(p)
        opts = dict(p.model_options)
        macs, params, acts = model_cost(p.model or "", shape, K, repr(dict(sorted(opts.items()))))
        batch = int(p.batch or 128)
        step_s = max(_STEP_FLOOR_S, _STEP_S_R18 * macs * batch / ref_macs)
        epoch_s = math.ceil(n_train / batch) * step_s
        layers = "penultimate" if p.measure.get("layers") == "penultimate" else "all"
        run_s = epoch_s * (int(p.epochs or 0) + _measured_epochs(p) * _MEASURE_EPOCHS[layers])
        runs = len(p.seeds)
        hours += run_s * runs / 3600
        sweep += run_s * runs * max(1, len(p.lr_sweep)) / 3600
        state = 16 if p.optimiser == "adamw" else 12  # weights + gradients + momentum (+ second moment)
        mem = max(mem, (params * state + acts * batch * 2) / 2**30)
    basis = (
        "H200 bf16 (benchmarks/RESULTS.md): 9.8 ms per ResNet-18 32x32 step of 128 scaled by MACs, "
        "floor 8.8 ms; measurement 0.24 (penultimate) / 2.4 (all layers) epochs; data loading not counted"
    )
    return Estimate(hours, sweep, mem, basis)


# ---------------------------------------------------------------------------------------------------- selection
@dataclass(frozen=True)
class RunSelection:
    """Part of a paper-scale experiment: some of its runs, or all of them for fewer epochs, stated as such.

    A paper protocol can take GPU-days; this is how a user with an hour (or with one of the five datasets) still
    runs the registered experiment end to end, with its summary, report and verdicts
    (``nclab experiment run NAME --scale paper --runs 'fashion-mnist/*' --epochs 30``). Everything else stays the
    paper's: a cut run keeps its milestones and warmup at the same fractions of the shorter run
    (:func:`nclab.train.rescale_schedule`; a cosine schedule's horizon is the run's length; an exponential one keeps
    its per-epoch rate, so it ends higher), and the summary and report say what was cut (:meth:`describe`).

    Parameters
    ----------
    runs : tuple of str, default=()
        Shell-style patterns (``fnmatch``) over the run labels of ``--dry-run``; a run is kept when any matches.
        Empty keeps every run.
    epochs : int or None, default=None
        Train each kept run this many epochs instead of its protocol's (``>= 1``); None keeps the protocol's.

    Raises
    ------
    ValueError
        ``epochs < 1``, or a pattern that matches no run (:meth:`select`).

    See Also
    --------
    nclab.experiments.run : takes a selection for the experiments that declare ``selectable``.

    Examples
    --------
    >>> sel = RunSelection(runs=("fashion-mnist/*",), epochs=30)
    >>> sel.select({"mnist/fc_resnet": 1, "fashion-mnist/pfc_resnet": 2})
    {'fashion-mnist/pfc_resnet': 2}
    >>> sel.describe()
    'runs fashion-mnist/* only; 30 epochs per run (the schedule rescaled to them)'
    """

    runs: tuple[str, ...] = ()
    epochs: int | None = None

    def __post_init__(self) -> None:
        from nclab.validation import check_int

        # a bare string would be read as its characters, one pattern each
        if not isinstance(self.runs, tuple) or not all(isinstance(p, str) and p for p in self.runs):
            raise TypeError(f"runs must be a tuple of non-empty pattern strings, got {self.runs!r}")
        if self.epochs is not None:
            check_int(self.epochs, name="epochs", low=1)

    @property
    def is_all(self) -> bool:
        """True when nothing is cut (every run, every epoch)."""
        return not self.runs and self.epochs is None

    def keeps(self, label: str) -> bool:
        """Whether the run ``label`` is selected."""
        return not self.runs or any(fnmatch.fnmatchcase(label, p) for p in self.runs)

    def select(self, items: Mapping[str, Any]) -> dict[str, Any]:
        """The entries of ``items`` (``{run label: anything}``) whose label is selected, in order; ``ValueError``
        naming the labels when a pattern matches none (a typo must not run nothing, or everything)."""
        for pattern in self.runs:
            if not any(fnmatch.fnmatchcase(label, pattern) for label in items):
                raise ValueError(f"--runs {pattern!r} matches no run; the runs are: {', '.join(items)}")
        return {label: v for label, v in items.items() if self.keeps(label)}

    def check_epochs(self, epochs: Mapping[str, int | None]) -> None:
        """Refuse (``ValueError``) :attr:`epochs` above a selected run's own (``{run label: its protocol's epochs}``):
        a cut trains fewer epochs, never more (more would be another protocol, reported as the paper's).

        Examples
        --------
        >>> RunSelection(epochs=400).check_epochs({"mnist/vgg/mse": 350})
        Traceback (most recent call last):
            ...
        ValueError: --epochs 400 is more than the 350 epochs of the paper's run mnist/vgg/mse: ...
        """
        if self.epochs is None:
            return
        over = {label: e for label, e in epochs.items() if e is not None and self.epochs > e}
        if over:
            label, e = next(iter(over.items()))
            more = f" (and {len(over) - 1} other run{'s' * (len(over) > 2)})" if len(over) > 1 else ""
            raise ValueError(
                f"--epochs {self.epochs} is more than the {e} epochs of the paper's run {label}{more}: --epochs cuts "
                f"a protocol short and cannot extend it; give at most {min(over.values())}, or extend a finished run "
                "with `nclab train RUN --resume --set train.epochs=N`"
            )

    def apply(self, configs: Mapping[str, Any]) -> dict[str, Any]:
        """The selected run configs (:class:`~nclab.train.config.RunConfig`), each cut to :attr:`epochs`: its
        schedule rescaled, its measured epochs those within the run plus the last."""
        from nclab.train.presets import rescale_schedule

        kept = self.select(configs)
        if self.epochs is None:
            return kept
        self.check_epochs({label: cfg.train.epochs for label, cfg in kept.items()})
        out = {}
        for label, cfg in kept.items():
            raw = cfg.model_dump(mode="json")
            full, n = raw["train"]["epochs"], self.epochs
            raw["train"]["epochs"] = n
            raw["schedule"] = rescale_schedule(raw["schedule"], full, n)
            if isinstance(raw["measure"]["epochs"], list):
                raw["measure"]["epochs"] = sorted({e for e in raw["measure"]["epochs"] if e <= n} | {n})
            out[label] = type(cfg).model_validate(raw)
        return out

    def describe(self) -> str:
        """What was cut, in words (the summary's ``selection`` and the report's banner); ``""`` when nothing."""
        parts = []
        if self.runs:
            parts.append(f"runs {', '.join(self.runs)} only")
        if self.epochs is not None:
            parts.append(f"{self.epochs} epoch{'s' * (self.epochs != 1)} per run (the schedule rescaled to them)")
        return "; ".join(parts)


# ---------------------------------------------------------------------------------------------------- data
def data_needs(protocols: Sequence[Protocol]) -> list[dict[str, Any]]:
    """The datasets the protocols train on, each with where nclab looks for it and the layout it expects
    (:func:`nclab.data.describe_dataset`), in first-use order."""
    from nclab.data import describe_dataset

    names = list(dict.fromkeys(p.dataset for p in protocols if p.dataset))
    for p in protocols:
        for task in (p.probes or {}).get("downstream", []):
            if task.get("dataset"):
                names.append(task["dataset"])
    return [describe_dataset(n) for n in dict.fromkeys(names)]


def check_data(protocols: Sequence[Protocol], what: str) -> None:
    """Raise ``FileNotFoundError`` naming every dataset of the protocols that is not on this machine, with where to
    put it and how to get it (``what`` names the run: ``"experiment 'pfc-table1' at scale paper"``)."""
    from nclab.data import DatasetNotFoundError, find_dataset

    missing = []
    for need in data_needs(protocols):
        try:
            find_dataset(need["name"])
        except DatasetNotFoundError as err:
            looked = ", ".join(str(p) for p in err.looked_in)
            missing.append(
                f"  - {need['name']}: expected layout {need['layout']}; looked in {looked}; how to get it: "
                f"{need['how_to_get']}"
            )
    if missing:
        raise FileNotFoundError(
            f"{what} needs data that is not on this machine (nclab never downloads); put each dataset in "
            "$NCLAB_DATA/<name> (or /usr/share/datasets/<name>), then run again:\n" + "\n".join(missing)
        )
