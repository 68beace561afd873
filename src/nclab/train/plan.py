"""What a run will do, before it does anything: :func:`plan_run` (behind ``nclab train CONFIG --plan``).

A :class:`RunPlan` holds the resolved protocol (model and its options, data and augmentation, loss, optimiser,
learning rate and schedule, batch, epochs, weight decay, precision, seeds), the parameter count, an estimate of
the accelerator memory, the number of optimisation steps and the measured epochs. Nothing is written and nothing
is trained: the data is opened (an in-memory dataset is read, a streamed one listed) to count its samples, and the
network is built on PyTorch's ``meta`` device (shapes without storage), so planning a 133M-parameter VGG costs no
memory. A later ``nclab experiment run NAME --dry-run`` prints the plans of its runs.

**Memory estimate** (bytes; the sum of the parts the run keeps on its device):

* parameters: ``sum(p.numel() * p.element_size())`` (float32, also under mixed precision: autocast keeps float32
  weights), plus, under ``bf16`` / ``fp16``, the half-precision copies autocast makes of them in each forward pass
  (2 bytes per parameter);
* gradients: 4 bytes per trainable parameter;
* optimiser state: SGD with momentum one buffer (4 bytes per trainable parameter; none without momentum),
  AdamW two (8);
* activations of one micro-batch (``batch_size / processes / grad_accum`` samples): the input batch plus the
  output of every leaf module of one forward pass on the ``meta`` device, at 4 bytes per element (2 under
  ``bf16`` / ``fp16``). Autograd keeps about these for the backward pass -- more for some operations (batch norm
  keeps its input too), less where an in-place ReLU shares its input's memory -- so it is an estimate, good to a
  factor of about two, not a bound;
* measurement: the pass-1 feature cache (``min(measure.cache_mb, N x sum of the measured layers' dimensions x
  element size)``) and the class statistics (``K d`` float64 means per layer, ``d^2`` float64 at full layers). It
  replaces the activations while it runs, so the total counts the larger of the two.

Unlike the activations, the parameter, gradient and optimiser bytes are exact (``tests/test_train_gpu.py``
checks the parameter bytes against a built network).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from nclab.measure import measurement_epochs, resolve_layers
from nclab.nets import CollapseNet, build_model
from nclab.train.config import ConfigError, RunConfig, resolve_config
from nclab.train.optim import lr_at, milestone_epochs

__all__ = ["MemoryEstimate", "RunPlan", "plan_run"]

_HALF = {"bf16", "fp16"}


@dataclass(frozen=True)
class MemoryEstimate:
    """Accelerator memory of a run in bytes, by part (see the module docstring); ``activations`` and
    ``measurement`` are ``None`` when the network cannot run on the ``meta`` device.

    Parameters
    ----------
    parameters : int
        Bytes of the parameters.
    autocast_copies : int
        Bytes of their half-precision copies under ``bf16`` / ``fp16`` autocast (0 in float32).
    gradients : int
        Bytes of the gradients (float32, trainable parameters).
    optimizer : int
        Bytes of the optimiser state (SGD momentum: one buffer; AdamW: two).
    activations : int or None
        Bytes of one micro-batch's activations, or ``None`` when not estimated.
    measurement : int or None
        Bytes of a measurement (feature cache and class statistics), or ``None`` when not estimated.

    Examples
    --------
    >>> m = MemoryEstimate(400, 0, 400, 400, activations=1000, measurement=3000)
    >>> m.total  # the activations and the measurement are not held at once
    4200
    >>> MemoryEstimate(400, 0, 400, 400, activations=None, measurement=None).total
    1200
    """

    parameters: int
    autocast_copies: int
    gradients: int
    optimizer: int
    activations: int | None
    measurement: int | None

    @property
    def total(self) -> int:
        """Parameters, their autocast copies, gradients, optimiser state, and the larger of the activations and
        the measurement."""
        held = self.parameters + self.autocast_copies + self.gradients + self.optimizer
        return held + max(self.activations or 0, self.measurement or 0)


@dataclass(frozen=True)
class RunPlan:
    """The plan of one run (:func:`plan_run`). ``protocol`` maps each item (``model``, ``data``, ...) to its
    resolved value as text, in the order printed; ``steps`` counts optimisation steps (``steps_per_epoch x
    epochs``), ``micro_batches`` the forward-backward passes (``steps x grad_accum``).

    Parameters
    ----------
    config : RunConfig
        The resolved config.
    protocol : dict of str to str
        Each protocol item and its resolved value as text, in print order.
    num_parameters : int
        Parameters of the network.
    trainable_parameters : int
        Those with ``requires_grad``.
    memory : MemoryEstimate
        Accelerator memory by part.
    input_shape : tuple of int
        One sample's input shape.
    K : int
        ``K``, the number of classes.
    train_samples : int
        ``N`` of the training split.
    test_samples : int or None
        ``N`` of the held-out split, ``None`` without one.
    processes : int
        Data-parallel processes.
    steps_per_epoch : int
        Optimisation steps per epoch (per process).
    steps : int
        ``steps_per_epoch x epochs``.
    micro_batches : int
        ``steps x grad_accum``.
    measured_epochs : list of int, default=[]
        The planned measurement epochs (the first zero-error epoch is added during the run).

    See Also
    --------
    plan_run : what builds one.

    Examples
    --------
    >>> plan = plan_run({"model": {"name": "mlp", "options": {"widths": [16]}},
    ...                  "train": {"epochs": 4, "batch_size": 128}})
    >>> plan.K, plan.input_shape, plan.train_samples, plan.micro_batches, plan.measured_epochs
    (10, (1, 8, 8), 1352, 40, [0, 1, 2, 3, 4])
    >>> next(plan.lines()).split(":")[0]
    'run'
    """

    config: RunConfig
    protocol: dict[str, str]
    num_parameters: int
    trainable_parameters: int
    memory: MemoryEstimate
    input_shape: tuple[int, ...]
    K: int
    train_samples: int
    test_samples: int | None
    processes: int
    steps_per_epoch: int
    steps: int
    micro_batches: int
    measured_epochs: list[int] = field(default_factory=list)

    def lines(self) -> Iterator[str]:
        """The plan as ``key: value`` lines (what ``nclab train CONFIG --plan`` prints)."""
        width = max(len(k) for k in self.protocol) + 1
        for key, value in self.protocol.items():
            yield f"{key + ':':<{width}} {value}"
        m = self.memory
        acts = "n/a (the network does not run on the meta device)" if m.activations is None else _size(m.activations)
        yield f"{'parameters:':<{width}} {self.num_parameters:,} ({self.trainable_parameters:,} trainable)"
        yield (
            f"{'memory:':<{width}} ~{_size(m.total)} estimated: parameters {_size(m.parameters)}"
            + (f" (+ autocast copies {_size(m.autocast_copies)})" if m.autocast_copies else "")
            + f", gradients {_size(m.gradients)}, optimiser {_size(m.optimizer)}, activations {acts} per micro-batch"
            + ("" if m.measurement is None else f", measurement {_size(m.measurement)}")
        )
        yield (
            f"{'steps:':<{width}} {self.steps:,} optimisation steps ({self.steps_per_epoch:,} per epoch x "
            f"{self.config.train.epochs} epochs; {self.micro_batches:,} micro-batches)"
        )
        shown = self.measured_epochs if len(self.measured_epochs) <= 24 else [*self.measured_epochs[:23], "..."]
        yield f"{'measured:':<{width}} epochs {', '.join(str(e) for e in shown)} (and the first at zero error)"

    def __str__(self) -> str:
        return "\n".join(self.lines())


def _size(nbytes: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if nbytes < 1024 or unit == "GiB":
            return f"{nbytes:.0f} {unit}" if unit == "B" else f"{nbytes:.1f} {unit}"
        nbytes /= 1024
    return f"{nbytes:.1f} GiB"  # pragma: no cover


def _build(cfg: RunConfig, input_shape: tuple[int, ...], K: int) -> tuple[CollapseNet, bool]:
    """The network on the meta device when it builds there (``True``), else on the CPU."""
    spec = dict(head=cfg.model.head.build_kwargs(), **cfg.model.options)
    try:
        with torch.device("meta"):
            return build_model(cfg.model.name, input_shape, K, **spec), True
    except (RuntimeError, NotImplementedError, TypeError, ValueError):  # an initialiser that reads values
        torch.manual_seed(cfg.seed)
        return build_model(cfg.model.name, input_shape, K, **spec), False


def _activations(
    model: nn.Module, layers: dict[str, nn.Module], shape: tuple[int, ...], micro: int, elem: int
) -> tuple[int, dict[str, int]]:
    """Bytes of the leaf modules' outputs (and the input) of one meta forward pass of ``micro`` samples, and each
    measured layer's dimension (elements per sample)."""
    total = [micro * math.prod(shape)]
    dims: dict[str, int] = {}
    names = {id(m): n for n, m in layers.items()}

    def hook(module: nn.Module, _: Any, out: Any) -> None:
        outs = [out] if isinstance(out, torch.Tensor) else [o for o in out if isinstance(o, torch.Tensor)]
        if not any(module.children()):
            total[0] += sum(o.numel() for o in outs)
        if id(module) in names and outs:
            dims[names[id(module)]] = outs[0].numel() // max(outs[0].shape[0], 1)

    handles = [m.register_forward_hook(hook) for m in model.modules()]
    try:
        with torch.no_grad():
            model(torch.empty((micro, *shape), device="meta"))
    finally:
        for h in handles:
            h.remove()
    return total[0] * elem, dims


def _schedule_text(cfg: RunConfig) -> str:
    s, E = cfg.schedule, cfg.train.epochs
    warm = f"linear warmup from {s.warmup_start_lr:g} over {s.warmup_epochs} epochs, then " if s.warmup_epochs else ""
    if s.name == "multistep":
        body = f"multistep x{s.gamma:g} after epochs {', '.join(str(m) for m in milestone_epochs(s, E))}"
    elif s.name == "cosine":
        body = f"cosine to {s.min_lr:g}"
    elif s.name == "exponential":
        body = f"exponential x{s.gamma:g} per epoch" + (f" (floor {s.min_lr:g})" if s.min_lr else "")
    else:
        body = "constant"
    picks = sorted({0, s.warmup_epochs, E // 2, E - 1} & set(range(E)))
    at = ", ".join(f"epoch {i + 1}: {lr_at(i, cfg.optim.lr, s, E):.4g}" for i in picks)
    return f"{warm}{body} ({at})"


def _protocol(cfg: RunConfig, model: nn.Module, recipe: Any, per_process: int) -> dict[str, str]:
    c, d, o, t = cfg.model, cfg.data, cfg.optim, cfg.train
    variant = getattr(model, "variant", None)
    opts = ", ".join(f"{k}={v!r}" for k, v in c.options.items())
    head = ", ".join(f"{k}={v!r}" for k, v in c.head.build_kwargs().items() if v is not None)
    data = f"{d.name} ({'streamed' if d.streamed else 'in memory'}"
    data += f", root {d.root}" if d.root else ""
    data += f", {d.per_class} per class" if d.per_class else ""
    data += f", padded to {d.pad_to}" if d.pad_to else ""
    data += (
        f", image_size {d.image_size}, splits {d.train_split}/{d.held_out_split()}, workers {d.workers}"
        if d.streamed
        else ""
    )
    data += ")"
    if o.name == "sgd":
        optim = f"SGD momentum {o.momentum:g}" + (" Nesterov" if o.nesterov else "") + " (coupled weight decay)"
    else:
        optim = f"AdamW betas {tuple(o.betas)} (decoupled weight decay)"
    loss = cfg.loss.name + (f", label smoothing {cfg.loss.label_smoothing:g}" if cfg.loss.label_smoothing else "")
    loss += f", tau {cfg.loss.tau:g}" if cfg.loss.tau != 1.0 else ""
    loss += f", reduction {cfg.loss.reduction}" if cfg.loss.name == "mse" else ""
    micro = per_process // t.grad_accum
    batch = f"{t.batch_size} global"
    if per_process != t.batch_size:
        batch += f", {per_process} per process"
    if t.grad_accum > 1:
        batch += f", {t.grad_accum} micro-batches of {micro}"
    batch += ", drop_last" if t.drop_last else ""
    aug = "none" if recipe.train is None else repr(recipe.train)
    if recipe.mixing is not None:
        aug += f"; per batch {recipe.mixing!r}"
    return {
        "run": f"{cfg.name}" + (f" (preset {cfg.preset})" if cfg.preset else ""),
        "model": f"{c.name}"
        + (f" ({opts})" if opts else "")
        + (f", variant {variant}" if variant else "")
        + f"; head {head}",
        "data": data,
        "augmentation": d.augment or "none",
        "train transform": aug,
        "measured with": "none" if recipe.eval is None else repr(recipe.eval),
        "loss": loss,
        "optimiser": optim,
        "lr": f"{o.lr:g}",
        "schedule": _schedule_text(cfg),
        "weight decay": f"{o.weight_decay:g}",
        "batch": batch,
        "epochs": str(t.epochs),
        "precision": t.precision + (", channels_last" if t.channels_last else ""),
        "device": t.device,
        "seeds": f"{cfg.seed} (initialisation; order and augmentation of epoch e: ({cfg.seed}, e))",
    }


def plan_run(config: RunConfig | dict[str, Any], *, processes: int = 1) -> RunPlan:
    """The :class:`RunPlan` of ``config`` trained by ``processes`` data-parallel processes (``train.batch_size`` is
    their global batch). Writes nothing and trains nothing (see the module docstring). Raises what the run would
    raise before its first step: :class:`~nclab.train.ConfigError` (no batch fits the data), the loaders' errors
    (``DatasetNotFoundError``, ``CorruptDatasetError``).

    Parameters
    ----------
    config : RunConfig or dict
        The run's config, resolved or as plain data (:func:`~nclab.train.resolve_config`).
    processes : int, default=1
        Data-parallel processes; ``train.batch_size`` must divide evenly over them.

    Returns
    -------
    RunPlan
        Parameter counts, the memory estimate, step counts and the protocol as text.

    Raises
    ------
    ValueError
        If ``train.batch_size`` does not divide over ``processes``.
    ConfigError
        If the config is invalid, or no batch fits the training split with ``drop_last``.

    Examples
    --------
    >>> plan = plan_run({"data": {"name": "digits"}, "model": {"name": "mlp", "options": {"widths": [32]}},
    ...                  "train": {"epochs": 10, "batch_size": 100}})
    >>> plan.num_parameters, plan.steps_per_epoch, plan.steps
    (2410, 13, 130)
    >>> plan.memory.parameters == 4 * plan.num_parameters
    True
    """
    from nclab.train.feeds import load_run_data

    cfg = config if isinstance(config, RunConfig) else resolve_config(config)
    t = cfg.train
    if t.batch_size % processes:
        raise ValueError(f"train.batch_size={t.batch_size} must divide evenly over {processes} processes")
    per_process = t.batch_size // processes
    data = load_run_data(cfg, torch.device("cpu"), per_process)
    model, on_meta = _build(cfg, data.input_shape, data.K)
    params = list(model.parameters())
    n_params = sum(p.numel() for p in params)
    trainable = sum(p.numel() for p in params if p.requires_grad)
    half = t.precision in _HALF
    elem = 2 if half else 4
    layer_spec = cfg.measure.layers
    layers = resolve_layers(
        model,
        None if layer_spec == "all" else ([model.penultimate_name] if layer_spec == "penultimate" else layer_spec),
    )
    acts = measurement = None
    if on_meta:
        try:
            acts, dims = _activations(model, dict(layers), data.input_shape, per_process // t.grad_accum, elem)
        except (RuntimeError, NotImplementedError, TypeError, ValueError):  # an op without a meta kernel
            acts, dims = None, {}
        if dims:
            n, K = len(data.train), data.K
            cache = min(cfg.measure.cache_mb * 2**20, n * sum(dims.values()) * elem)
            full = set(dims) if cfg.measure.full_layers == "all" else {model.penultimate_name}
            stats = sum(K * dv * 8 + (dv * dv * 8 if name in full else 0) for name, dv in dims.items())
            measurement = int(cache + stats)
    opt_buffers = (1 if cfg.optim.momentum > 0 else 0) if cfg.optim.name == "sgd" else 2
    memory = MemoryEstimate(
        parameters=sum(p.numel() * p.element_size() for p in params),
        autocast_copies=2 * n_params if half else 0,
        gradients=4 * trainable,
        optimizer=4 * opt_buffers * trainable,
        activations=acts,
        measurement=measurement,
    )
    n_train = len(data.train)
    shard = math.ceil(n_train / processes)  # DDP pads each process's share to the same size
    steps_per_epoch = shard // per_process if t.drop_last else math.ceil(shard / per_process)
    if steps_per_epoch == 0:  # the run would fail at its first epoch: say so now
        raise ConfigError(
            f"train.batch_size={t.batch_size} exceeds the {n_train} training samples with drop_last: no batch"
        )
    m = cfg.measure
    planned = measurement_epochs(t.epochs, m.num_log) if m.epochs == "log" else m.epochs
    test = data.splits.get("test")
    return RunPlan(
        config=cfg,
        protocol=_protocol(cfg, model, data.recipe, per_process),
        num_parameters=n_params,
        trainable_parameters=trainable,
        memory=memory,
        input_shape=data.input_shape,
        K=data.K,
        train_samples=n_train,
        test_samples=None if test is None else test.N,
        processes=processes,
        steps_per_epoch=steps_per_epoch,
        steps=steps_per_epoch * t.epochs,
        micro_batches=steps_per_epoch * t.epochs * t.grad_accum,
        measured_epochs=sorted(e for e in planned if e <= t.epochs),
    )
