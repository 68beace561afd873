"""Run configuration: pydantic models (unknown keys and bad values rejected with their key path), presets,
YAML loading and ``--set key=value`` overrides.

Resolution order: preset (``preset: NAME`` or ``NAME@cpu``) < the YAML file < ``--set`` overrides; the
resolved, validated config is what a run writes to ``config.yaml`` (so a run directory alone reproduces it).
"""

from __future__ import annotations

import copy
import inspect
import typing
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from nclab.data.catalog import IMAGE_DATASETS, IMAGE_SPLITS
from nclab.data.loaders import DATASETS
from nclab.data.recipes import AUGMENT_RECIPES, MIXING_RECIPES
from nclab.io.yaml_io import load_yaml, load_yaml_file
from nclab.nets import NET_MODELS

__all__ = [
    "LATER_KEYS",
    "SEED_LIMIT",
    "ConfigError",
    "RunConfig",
    "apply_overrides",
    "check_device_available",
    "deep_merge",
    "load_config",
    "resolve_config",
]

PosInt = Annotated[int, Field(gt=0)]
PosFloat = Annotated[float, Field(gt=0)]
NonNegFloat = Annotated[float, Field(ge=0)]

#: Seeds are in ``0 <= seed < SEED_LIMIT``: numpy's generators refuse negative seeds and torch's take 64 bits,
#: and the trainer derives its per-epoch seeds as ``seed * 1_000_003 + epoch``, which must stay below 2**63.
SEED_LIMIT = 2**32


class ConfigError(ValueError):
    """An invalid run configuration; the message lists every problem with its key path (``model.widths.0``)."""


class _AtKey(ValueError):
    """Raised by a validator about one sub-key of the field it checks (``options.widths``,
    ``conventions.weighting``): the message is shown under the field's key path extended by ``key``."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


#: Option keys renamed when the sizes took the letters of docs/conventions.md: ``(section, old key) -> new key``.
#: A config written before (a run's ``config.yaml``) still validates: the old key is read as the new one, with a
#: ``DeprecationWarning`` naming both.
_RENAMED_OPTIONS = {("data", "num_classes"): "K", ("model", "feature_dim"): "d"}


def _renamed_options(section: str, data: Any) -> Any:
    """``data`` (a section's raw mapping) with the old option keys of :data:`_RENAMED_OPTIONS` read as the new."""
    if not isinstance(data, Mapping) or not isinstance(data.get("options"), Mapping):
        return data
    options = dict(data["options"])
    for (where, old), new in _RENAMED_OPTIONS.items():
        if where == section and old in options:
            if new in options:
                raise _AtKey(f"options.{old}", f"{old!r} is the old name of {new!r}; give only {new!r}")
            warnings.warn(
                f"{section}.options.{old} is deprecated: it is now {section}.options.{new} (read as such)",
                DeprecationWarning,
                stacklevel=2,
            )
            options[new] = options.pop(old)
    return {**data, "options": options}


class DataConfig(_Strict):
    """The data of a run: an in-memory dataset of :data:`nclab.data.DATASETS` (``nclab.data.load``) or a streamed
    image dataset of :data:`nclab.data.IMAGE_DATASETS` (``nclab.data.open_images``, decoded per item in
    DataLoader workers). ``augment``: a recipe of :mod:`nclab.data.recipes` (``None``: none). Streamed datasets
    need ``image_size`` (the side of the training crop and of the measured images) and take ``train_split`` /
    ``test_split`` (default: ``test``, or ``val`` where the dataset has no ``test``), ``eval_resize``, and the
    DataLoader's ``workers``, ``pin_memory`` (used on CUDA only) and ``persistent_workers``."""

    name: str = "digits"
    root: str | None = None
    per_class: PosInt | None = None  # balanced training subset (seeded by the run seed)
    test_per_class: PosInt | None = None  # balanced test subset (None: the whole test split)
    pad_to: PosInt | None = None  # [Han et al. 2022]: 32 for (Fashion-)MNIST
    normalize: StrictBool = True
    options: dict[str, Any] = Field(default_factory=dict)  # dataset-specific (gaussian: K, d, n, separation)
    # a later key: written to config.yaml only when set (see RunConfig.to_dict), so older run folders still match
    augment: str | None = None  # a recipe of nclab.data.recipes.AUGMENT_RECIPES
    image_size: PosInt | None = None  # streamed: side of the training crop and of the measured images
    eval_resize: PosInt | None = None  # streamed: shorter side before the measured centre crop (default per recipe)
    train_split: str = "train"  # streamed: the split trained on (oxford-pets: trainval)
    test_split: str | None = None  # streamed: the held-out split (default test, or val)
    workers: Annotated[int, Field(ge=0)] = 0  # streamed: DataLoader worker processes
    pin_memory: StrictBool = False  # streamed, CUDA: page-locked batches, copied asynchronously
    persistent_workers: StrictBool = False  # streamed: keep the workers alive between epochs

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: Any) -> Any:
        return _renamed_options("data", data)

    @field_validator("name")
    @classmethod
    def _known(cls, v: str) -> str:
        if v not in DATASETS and v not in IMAGE_DATASETS:
            raise ValueError(
                f"unknown dataset {v!r}; in memory: {', '.join(DATASETS)}; streamed: {', '.join(IMAGE_DATASETS)}"
            )
        return v

    @field_validator("augment")
    @classmethod
    def _recipe(cls, v: str | None) -> str | None:
        if v is not None and v not in AUGMENT_RECIPES:
            raise ValueError(f"unknown augmentation recipe {v!r}; known: {', '.join(AUGMENT_RECIPES)}")
        return v

    @property
    def streamed(self) -> bool:
        """Whether the dataset is streamed from image files (else held in memory)."""
        return self.name in IMAGE_DATASETS

    def held_out_split(self) -> str:
        """The split measured as ``test``: ``test_split``, else ``test`` or (datasets without one) ``val``."""
        if self.test_split is not None:
            return self.test_split
        return "test" if "test" in IMAGE_SPLITS.get(self.name, ("test",)) else "val"

    @model_validator(mode="after")
    def _consistent(self) -> DataConfig:
        if self.streamed:
            if self.image_size is None:
                raise _AtKey("image_size", f"the streamed dataset {self.name!r} needs image_size (e.g. 224)")
            if self.pad_to is not None:
                raise _AtKey("pad_to", "applies to the in-memory datasets; streamed images are resized to image_size")
            splits = IMAGE_SPLITS[self.name]
            for key, split in (("train_split", self.train_split), ("test_split", self.held_out_split())):
                if split not in splits:
                    raise _AtKey(key, f"{self.name!r} has splits {', '.join(splits)}, not {split!r}")
            if self.persistent_workers and self.workers == 0:
                raise _AtKey("persistent_workers", "needs workers > 0")
            return self
        for key in ("image_size", "eval_resize", "test_split"):
            if getattr(self, key) is not None:
                raise _AtKey(key, f"applies to the streamed datasets ({', '.join(IMAGE_DATASETS)}), not {self.name!r}")
        if self.train_split != "train":
            raise _AtKey("train_split", f"applies to the streamed datasets, not {self.name!r}")
        if self.workers or self.pin_memory or self.persistent_workers:
            what = "workers" if self.workers else ("pin_memory" if self.pin_memory else "persistent_workers")
            raise _AtKey(what, f"applies to the streamed datasets: {self.name!r} is held in memory and sliced in place")
        if self.augment is not None and self.name in ("gaussian", "features"):
            raise _AtKey("augment", f"augments images; {self.name!r} holds vectors")
        return self


class HeadConfig(_Strict):
    kind: Literal["linear", "cosine", "fixed", "cmf"] = "linear"
    bias: StrictBool = True  # linear head only
    tau: PosFloat | None = None  # cosine / fixed / cmf: logits are cos / tau (default 0.1)
    logit_scale: PosFloat | None = None  # = 1 / tau (give one of the two)
    beta: Annotated[float, Field(ge=0, lt=1)] = 0.9  # cmf EMA factor
    renormalize: StrictBool = True  # cmf: rows back on the sphere after each update
    code: Literal["etf", "orthogonal", "polygon"] = "etf"  # fixed head ("polygon": d = 2 only)
    assignment: list[int] | None = None  # fixed head: class k gets code row assignment[k]
    cosine: StrictBool = True  # fixed head: cosine logits (else W h)

    @model_validator(mode="after")
    def _consistent(self) -> HeadConfig:
        if self.tau is not None and self.logit_scale is not None:
            raise ValueError("give tau or logit_scale (= 1/tau), not both")
        return self

    def build_kwargs(self) -> dict[str, Any]:
        kw: dict[str, Any] = {"kind": self.kind}
        if self.kind == "linear":
            kw["bias"] = self.bias
        else:
            kw.update(tau=self.tau, logit_scale=self.logit_scale)
        if self.kind == "cmf":
            kw.update(beta=self.beta, renormalize=self.renormalize)
        if self.kind == "fixed":
            kw.update(code=self.code, assignment=self.assignment, cosine=self.cosine)
        return kw


class ModelConfig(_Strict):
    """``name`` picks a class of :data:`nclab.nets.NET_MODELS`; ``options`` are its keyword arguments, checked
    against its signature (an unknown option is reported as ``model.options.NAME``)."""

    name: str = "mlp"
    options: dict[str, Any] = Field(default_factory=dict)
    head: HeadConfig = Field(default_factory=HeadConfig)

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: Any) -> Any:
        return _renamed_options("model", data)

    @field_validator("name")
    @classmethod
    def _known(cls, v: str) -> str:
        if v not in NET_MODELS:
            raise ValueError(f"unknown model {v!r}; known: {', '.join(NET_MODELS)}")
        return v

    @model_validator(mode="after")
    def _options(self) -> ModelConfig:
        init = NET_MODELS[self.name].__init__
        params = inspect.signature(init).parameters
        allowed = [p for p in params if p not in ("self", "input_shape", "K", "head")]
        bad = [k for k in self.options if k not in allowed]
        if bad:
            raise _AtKey(f"options.{bad[0]}", f"not an option of model {self.name!r} (options: {', '.join(allowed)})")
        hints = typing.get_type_hints(init)
        for key, value in self.options.items():
            _check_option(f"options.{key}", value, hints.get(key, Any))
        return self


def _check_option(key: str, value: Any, annotation: Any) -> None:
    """A model option checked against the constructor's annotation (strictly: ``"3"`` is not an int, ``"no"``
    not a bool) and, since every int option of :data:`nclab.nets.NET_MODELS` is a size or a count (widths,
    channels, blocks, depth, growth), every int in it ``>= 1``. The remaining checks (an activation's name, a
    block kind) are the constructor's; :class:`~nclab.train.trainer.Trainer` reports them under ``model.options``."""
    try:
        TypeAdapter(annotation, config=ConfigDict(strict=True)).validate_python(value)
    except ValidationError as err:
        e = err.errors()[0]
        where = "".join(f"[{p}]" for p in e["loc"])
        raise _AtKey(key, f"{e['msg'].lower()}{' at ' + where if where else ''} (got {value!r})") from None
    for item in _ints(value):
        if item < 1:
            raise _AtKey(key, f"sizes and counts must be >= 1, got {value!r}")


def _ints(value: Any) -> list[int]:
    if isinstance(value, bool):
        return []
    if isinstance(value, int):
        return [value]
    if isinstance(value, list | tuple):
        return [i for v in value for i in _ints(v)]
    return []


class LossConfig(_Strict):
    """``ce``: cross-entropy of ``logits / tau``, optional label smoothing. ``mse``: squared error to one-hot
    targets scaled by ``target_scale``; ``reduction="mean"`` is ``nn.MSELoss()`` (mean over the B x K entries,
    the [Han et al. 2022] training loss), ``"sum_half"`` is the [Han et al. 2022] L = (1/2) mean_i ||f(x_i) - y_i||^2
    (eq. (2)).
    ``ce_cosreg``: CE + ``cosreg_weight`` x within-class cosine regulariser [Xu & Liu 2023, Sec. 6.3]."""

    name: Literal["ce", "mse", "ce_cosreg"] = "ce"
    tau: PosFloat = 1.0
    label_smoothing: Annotated[float, Field(ge=0, lt=1)] = 0.0
    reduction: Literal["mean", "sum_half"] = "mean"
    target_scale: PosFloat = 1.0
    cosreg_weight: NonNegFloat = 0.0
    cosreg_variant: Literal["pairs", "pairs_over_n", "with_self"] = "pairs"

    @model_validator(mode="after")
    def _consistent(self) -> LossConfig:
        if self.name == "mse" and (self.label_smoothing or self.tau != 1.0):
            raise ValueError("label_smoothing and tau apply to the CE losses, not to mse")
        if self.name != "mse" and (self.reduction != "mean" or self.target_scale != 1.0):
            raise ValueError("reduction and target_scale apply to mse only")
        if self.name != "ce_cosreg" and self.cosreg_weight:
            raise ValueError("cosreg_weight needs name: ce_cosreg")
        return self


class OptimConfig(_Strict):
    name: Literal["sgd", "adamw"] = "sgd"
    lr: PosFloat = 0.05
    momentum: Annotated[float, Field(ge=0, lt=1)] = 0.9
    nesterov: StrictBool = False
    weight_decay: NonNegFloat = 5e-4  # SGD: coupled L2 on every parameter (PyTorch); AdamW: decoupled
    betas: tuple[Annotated[float, Field(ge=0, lt=1)], Annotated[float, Field(ge=0, lt=1)]] = (0.9, 0.999)

    @model_validator(mode="after")
    def _consistent(self) -> OptimConfig:
        if self.nesterov and (self.name != "sgd" or self.momentum == 0):
            raise ValueError("nesterov needs name: sgd and momentum > 0")
        return self


class ScheduleConfig(_Strict):
    """Per-epoch learning rate: linear warmup from ``warmup_start_lr`` over ``warmup_epochs``, then
    ``constant``, ``multistep`` (x ``gamma`` at each milestone: explicit epochs ``milestones``, else
    ``int(epochs * f)`` for ``f`` in ``milestone_fractions``; [Han et al. 2022]: 1/3, 2/3 of 350 = 116, 233),
    ``cosine`` (to ``min_lr``) or ``exponential`` (x ``gamma`` every epoch after the warmup, floored at ``min_lr``;
    [Xu & Liu 2023, Sec. 6.1]'s step schedule: 0.975)."""

    name: Literal["constant", "multistep", "cosine", "exponential"] = "multistep"
    milestones: list[PosInt] | None = None
    milestone_fractions: list[Annotated[float, Field(gt=0, lt=1)]] = Field(default_factory=lambda: [1 / 3, 2 / 3])
    gamma: PosFloat = 0.1
    warmup_epochs: Annotated[int, Field(ge=0)] = 0
    warmup_start_lr: NonNegFloat = 1e-5
    min_lr: NonNegFloat = 0.0

    @model_validator(mode="after")
    def _gamma(self) -> ScheduleConfig:
        # multistep's default 0.1 per epoch would end any run at lr ~ 0: exponential names its factor
        if self.name == "exponential" and "gamma" not in self.model_fields_set:
            raise _AtKey(
                "gamma",
                "schedule exponential needs its per-epoch factor gamma ([Xu & Liu 2023]'s step schedule: 0.975)",
            )
        return self


class TrainConfig(_Strict):
    """``batch_size`` is the global batch of one optimisation step: with ``grad_accum: k`` it is run as ``k``
    micro-batches of ``batch_size / k`` whose gradients add up before the step (the same step up to rounding,
    except for batch norm and ``ce_cosreg``'s regulariser, which see one micro-batch). ``precision``: ``fp32``,
    ``bf16`` (autocast to bfloat16, CPU or CUDA) or ``fp16`` (autocast to float16 with a gradient scaler; CUDA
    only); the measurements run under the same autocast, their statistics in float64. ``channels_last``: the
    network and its image batches in NHWC memory order (faster convolutions on tensor cores)."""

    epochs: PosInt = 100
    batch_size: PosInt = 128
    drop_last: StrictBool = True  # the [Han et al. 2022] Colab skips the last incomplete batch
    threads: PosInt | None = None  # torch and numpy/scipy BLAS threads for the run (None: leave as they are)
    device: str = "cpu"  # "cuda" works; bit-identical resume is only promised on the CPU
    # a later key: written to config.yaml only when set (see RunConfig.to_dict), so older run folders still match
    precision: Literal["fp32", "bf16", "fp16"] = "fp32"
    channels_last: StrictBool = False
    grad_accum: PosInt = 1  # micro-batches per optimisation step

    @model_validator(mode="after")
    def _consistent(self) -> TrainConfig:
        if self.precision == "fp16" and not self.device.startswith("cuda"):
            raise _AtKey(
                "precision",
                f"fp16 needs a CUDA device (float16 autocast with a gradient scaler), not {self.device!r}; "
                "on the CPU use bf16",
            )
        if self.batch_size % self.grad_accum:
            raise _AtKey("grad_accum", f"must divide train.batch_size={self.batch_size} (equal micro-batches)")
        return self

    @field_validator("device")
    @classmethod
    def _device(cls, v: str) -> str:
        import torch

        try:
            torch.device(v)
        except (RuntimeError, TypeError):
            raise ValueError(f"{v!r} is not a torch device (cpu, cuda, cuda:N, mps, ...)") from None
        return v


def _both_splits() -> list[Literal["train", "test"]]:
    return ["train", "test"]


def _table_sink() -> list[str | dict[str, Any]]:
    return ["table"]


class MeasureConfig(_Strict):
    """When and what to measure. ``epochs="log"``: 0, the last epoch and ``num_log`` log-spaced epochs; the
    first epoch with zero training error is always added (detected and recorded)."""

    epochs: Literal["log"] | list[Annotated[int, Field(ge=0)]] = "log"
    num_log: PosInt = 20
    # at least one: a run that measures nothing would still claim measured epochs (use measure.epochs instead)
    splits: list[Literal["train", "test"]] = Field(default_factory=_both_splits, min_length=1)
    layers: Literal["all", "penultimate"] | list[str] = "all"
    full_layers: Literal["penultimate", "all"] = "penultimate"  # full (d x d) ClassStats where
    conventions: dict[str, Any] = Field(default_factory=dict)  # nclab.metrics.DEFAULT_CONVENTIONS overrides
    # eval batch of the measurement passes: 256 keeps a small CNN's activations in cache on the CPU (a 2,000-image
    # Fashion-MNIST pass: 174 ms at 256, 376 ms at 1,024; an MLP pass is the same at both)
    batch_size: PosInt = 256
    cache_mb: NonNegFloat = 256.0  # keep pass-1 features for the NCC pass when they fit
    # the statistics' per-batch arithmetic (ClassStats compute_dtype): float32 GEMMs, float64 accumulation
    compute_dtype: Literal["float64", "float32"] = "float64"
    blas_threads: PosInt | None = 1  # numpy/scipy BLAS threads while measuring (None: as train.threads)
    geodesic: StrictBool = (
        False  # The [Wang et al. 2024] geodesic model over the equal-width measured layers (train split)
    )
    zero_error_check: Literal["gated", "every_epoch"] = "gated"
    zero_error_gate: Annotated[float, Field(ge=0, le=1)] = 0.05

    @field_validator("conventions")
    @classmethod
    def _conv(cls, v: dict[str, Any]) -> dict[str, Any]:
        from nclab.metrics import DEFAULT_CONVENTIONS, check_convention

        bad = [k for k in v if k not in DEFAULT_CONVENTIONS]
        if bad:
            raise ValueError(f"unknown convention {bad[0]!r}; known: {', '.join(sorted(DEFAULT_CONVENTIONS))}")
        out = {}
        for key, value in v.items():
            try:
                out[key] = check_convention(key, value, name="value")
            except (TypeError, ValueError) as err:  # a bad value fails the config, never the run's measurements
                raise _AtKey(key, str(err).removeprefix("value ")) from None
        return out


class CheckpointConfig(_Strict):
    every: PosInt = 1  # checkpoint (and rewrite metrics.csv) every this many epochs, and at the last epoch
    keep_measured: StrictBool = False  # also keep checkpoints/epoch_NNNN.pt at every measured epoch


class LogConfig(_Strict):
    """Where the measured rows go besides the run directory's ``metrics.csv`` (always written: resume reads it).
    Each entry is a kind of :data:`nclab.io.sinks.SINKS` (``"tensorboard"``, ``"wandb"``, ``"mlflow"``;
    ``"table"`` is the default table) or ``{kind: ..., **options}`` (:func:`nclab.io.sinks.make_sink`; the options
    of :data:`nclab.io.sinks.SINK_OPTIONS`, a misspelt one is refused here, before the run starts)."""

    sinks: list[str | dict[str, Any]] = Field(default_factory=_table_sink)

    @field_validator("sinks")
    @classmethod
    def _kinds(cls, v: list[str | dict[str, Any]]) -> list[str | dict[str, Any]]:
        from nclab.io.sinks import SINKS, check_sink_spec

        for spec in v:
            kind = spec if isinstance(spec, str) else spec.get("kind")
            if kind not in SINKS:
                raise ValueError(f"unknown sink {kind!r}; known: {', '.join(sorted(SINKS))}")
            try:
                check_sink_spec(spec)
            except TypeError as err:  # pydantic reports ValueErrors only
                raise ValueError(str(err)) from None
        return v


class RunConfig(_Strict):
    """One training run, validated: every key of ``config.yaml``, by section.

    A pydantic model: unknown keys and bad values raise with their key path; the sections are models of their
    own (:class:`LossConfig`, :class:`OptimConfig`, :class:`ScheduleConfig`, ...), given as such or as
    mappings. :func:`resolve_config` builds one from a preset, a mapping and ``--set`` overrides.

    Parameters
    ----------
    name : str, default="run"
        The run's name (in its directory name and reports).
    seed : int, default=0
        The run's seed, ``0 <= seed < SEED_LIMIT``.
    preset : str, optional
        The preset the fields were resolved from (recorded; already merged into the sections).
    data, model, loss, optim, schedule, train, measure, checkpoint, log : section models or mappings, optional
        The sections (defaults: each section's defaults; the embedded ``digits`` set and an ``mlp``).
    report : bool, default=True
        Write ``report.html`` at the end of the run.
    notes : str, default=""
        Free text kept with the run.

    Raises
    ------
    pydantic.ValidationError
        An unknown key, a bad value, or sections that contradict each other (:func:`resolve_config` turns it
        into a :class:`ConfigError` naming each key path).

    Examples
    --------
    >>> cfg = RunConfig(seed=3, optim={"lr": 0.1})
    >>> cfg.seed, cfg.optim.lr, cfg.optim.name, cfg.data.name, cfg.to_dict()["optim"]["lr"]
    (3, 0.1, 'sgd', 'digits', 0.1)
    """

    name: str = "run"
    seed: Annotated[int, Field(ge=0, lt=SEED_LIMIT)] = 0
    preset: str | None = None  # recorded; already merged into the fields below
    data: DataConfig = Field(default_factory=DataConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    loss: LossConfig = Field(default_factory=LossConfig)
    optim: OptimConfig = Field(default_factory=OptimConfig)
    schedule: ScheduleConfig = Field(default_factory=ScheduleConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    measure: MeasureConfig = Field(default_factory=MeasureConfig)
    checkpoint: CheckpointConfig = Field(default_factory=CheckpointConfig)
    log: LogConfig = Field(default_factory=LogConfig)
    report: StrictBool = True  # write report.html at the end
    notes: str = ""

    @model_validator(mode="after")
    def _across_sections(self) -> RunConfig:
        if self.data.augment in MIXING_RECIPES and self.loss.name == "ce_cosreg":
            raise _AtKey(
                "loss.name",
                f"ce_cosreg's within-class regulariser needs one label per sample; data.augment: {self.data.augment} "
                "mixes pairs of samples (use ce or mse, which take the mixed soft targets)",
            )
        return self

    def to_dict(self) -> dict[str, Any]:
        """The resolved config as plain data (``config.yaml``, :func:`~nclab.train.trainer.run_id`). The keys of
        :data:`LATER_KEYS` appear only when they differ from their defaults: a config written before they existed
        reads, hashes and resumes as it did."""
        out = self.model_dump(mode="json")
        for section, keys in LATER_KEYS.items():
            fields = type(getattr(self, section)).model_fields
            for key in keys:
                if out[section][key] == fields[key].get_default(call_default_factory=True):
                    del out[section][key]
        return out


#: Keys added after run directories existed (streamed data, augmentation, mixed precision, the statistics'
#: compute dtype), per section:
#: :meth:`RunConfig.to_dict` leaves them out at their defaults.
LATER_KEYS: dict[str, tuple[str, ...]] = {
    "data": (
        "augment",
        "image_size",
        "eval_resize",
        "train_split",
        "test_split",
        "workers",
        "pin_memory",
        "persistent_workers",
    ),
    "train": ("precision", "channels_last", "grad_accum"),
    "measure": ("compute_dtype",),
}


# ------------------------------------------------------------------------------------------ resolution
def deep_merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of ``base`` with ``over`` merged in: nested mappings merge key by key, any other value of
    ``over`` replaces the one in ``base``. Neither argument is modified.

    Parameters
    ----------
    base : dict
        The lower layer (e.g. a preset).
    over : Mapping[str, Any]
        The upper layer, winning on every key it sets.

    Returns
    -------
    dict
        The merged copy.

    Examples
    --------
    >>> deep_merge({"optim": {"lr": 0.1, "momentum": 0.9}, "seed": 0}, {"optim": {"lr": 0.05}})
    {'optim': {'lr': 0.05, 'momentum': 0.9}, 'seed': 0}
    """
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), dict):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def apply_overrides(raw: Mapping[str, Any], overrides: Sequence[str]) -> dict[str, Any]:
    """Apply ``key.path=value`` strings (values parsed as YAML: ``3``, ``0.1``, ``[64, 64]``, ``true``).

    Parameters
    ----------
    raw : Mapping[str, Any]
        A config as plain data (not modified).
    overrides : sequence of str
        ``key.path=value`` strings, applied in order; missing sections are created.

    Returns
    -------
    dict
        A deep copy of ``raw`` with the overrides applied (not yet validated).

    Raises
    ------
    ConfigError
        An item without ``=``, an empty key, a path through a value, or a value that is not YAML.

    Examples
    --------
    >>> apply_overrides({"optim": {"lr": 0.1}}, ["optim.lr=0.05", "model.widths=[64, 64]"])
    {'optim': {'lr': 0.05}, 'model': {'widths': [64, 64]}}
    """
    out = copy.deepcopy(dict(raw))
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"--set expects key=value, got {item!r}")
        key, text = item.split("=", 1)
        parts = [p for p in key.strip().split(".") if p]
        if not parts:
            raise ConfigError(f"--set has an empty key: {item!r}")
        node = out
        for p in parts[:-1]:
            nxt = node.get(p)
            if nxt is None:
                nxt = node[p] = {}
            if not isinstance(nxt, dict):
                raise ConfigError(f"--set {key}: {p!r} holds a value, not a section")
            node = nxt
        try:
            node[parts[-1]] = load_yaml(text, source=f"--set {key.strip()}")
        except ValueError as err:
            raise ConfigError(str(err)) from None
    return out


def _format_errors(err: ValidationError) -> str:
    from nclab.validation import did_you_mean

    lines = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"])
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":  # the closest key of the whole config: optim.epochs -> train.epochs
            msg = "unknown key" + did_you_mean(loc, _key_paths(RunConfig))
        # a validator's complaint about one sub-key (options.NAME, a convention): attach it to the path
        sub = e.get("ctx", {}).get("error")
        if isinstance(sub, _AtKey):
            loc = f"{loc}.{sub.key}" if loc else sub.key
        lines.append(f"  {loc or '(top level)'}: {msg}" + (f" (got {e['input']!r})" if _show_input(e) else ""))
    return "invalid config:\n" + "\n".join(lines)


def _key_paths(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Every dotted key of ``model``, sections and their keys (``optim``, ``optim.lr``, ...)."""
    out = []
    for name, info in model.model_fields.items():
        out.append(prefix + name)
        if isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel):
            out += _key_paths(info.annotation, f"{prefix}{name}.")
    return out


def check_device_available(device: str, *, name: str = "train.device") -> None:
    """Raise :class:`ConfigError` naming ``name`` when ``device`` (a torch device string) is not one or cannot
    be used by this torch build on this machine: CUDA not compiled in or no GPU visible, a GPU index beyond
    the count, or no MPS. :func:`~nclab.train.trainer.train` checks it when a run starts (a saved config stays
    readable on any machine)."""
    import torch

    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise ConfigError(f"{name}: {device!r} is not a torch device (cpu, cuda, cuda:N, mps, ...)") from None
    why = ""
    if dev.type == "cuda" and not torch.cuda.is_available():
        build = "in this torch build" if torch.version.cuda is None else "(no GPU visible to this torch build)"
        why = f"CUDA is not available {build} (torch {torch.__version__}); use cpu"
    elif dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        why = f"{device!r}, but this machine has {torch.cuda.device_count()} GPU(s)"
    elif dev.type == "mps" and not torch.backends.mps.is_available():
        why = "MPS is not available on this machine; use cpu"
    if why:
        raise ConfigError(f"{name}: {why}")


def _show_input(e: Mapping[str, Any]) -> bool:
    return e["type"] not in ("extra_forbidden", "missing", "value_error") and not isinstance(e.get("input"), dict)


def resolve_config(raw: Mapping[str, Any] | None = None, overrides: Sequence[str] = ()) -> RunConfig:
    """Merge the preset named in ``raw`` (if any) under ``raw``, apply ``overrides``, validate.

    Resolution order: preset < ``raw`` < ``overrides`` (an override may set ``preset`` itself).

    Parameters
    ----------
    raw : Mapping[str, Any], optional
        A config as plain data (a parsed YAML file); ``None`` for the defaults.
    overrides : sequence of str, default=()
        ``key.path=value`` strings (:func:`apply_overrides`).

    Returns
    -------
    RunConfig
        The validated config.

    Raises
    ------
    ConfigError
        Every invalid key and value, one line each with its key path (an unknown key with the closest known
        one), or an unknown preset.

    Examples
    --------
    >>> cfg = resolve_config({"preset": "han2022-mse@cpu"}, ["optim.lr=0.01"])
    >>> cfg.loss.name, cfg.train.epochs, cfg.optim.lr
    ('mse', 60, 0.01)
    >>> resolve_config({"optim": {"epochs": 3}})
    Traceback (most recent call last):
        ...
    nclab.train.config.ConfigError: invalid config:
      optim.epochs: unknown key (did you mean 'train.epochs'?)
    """
    from nclab.train.presets import preset_dict

    raw = apply_overrides(dict(raw or {}), overrides)
    name = raw.get("preset")
    if name is not None:
        if not isinstance(name, str):
            raise ConfigError(f"invalid config:\n  preset: expected a preset name, got {name!r}")
        raw = deep_merge(preset_dict(name), raw)
    try:
        return RunConfig.model_validate(raw)
    except ValidationError as err:
        raise ConfigError(_format_errors(err)) from None


def load_config(path: str | Path, overrides: Sequence[str] = ()) -> RunConfig:
    """Read a YAML config file and resolve it (see :func:`resolve_config`).

    Parameters
    ----------
    path : str or pathlib.Path
        The YAML file; its top level is a mapping of sections.
    overrides : sequence of str, default=()
        ``key.path=value`` strings applied after the file.

    Returns
    -------
    RunConfig
        The validated config.

    Raises
    ------
    FileNotFoundError
        If ``path`` is not a file.
    ConfigError
        If the file is not YAML, has a duplicate key, is not a mapping, or does not validate.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     _ = (Path(tmp) / "run.yaml").write_text("seed: 7\\noptim:\\n  lr: 0.2\\n")
    ...     cfg = load_config(Path(tmp) / "run.yaml", ["optim.momentum=0.5"])
    >>> cfg.seed, cfg.optim.lr, cfg.optim.momentum
    (7, 0.2, 0.5)
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such config file: {path}")
    try:
        raw = load_yaml_file(path) or {}
    except ValueError as err:  # not YAML, or a duplicate key (the message names the file and the line)
        raise ConfigError(str(err)) from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the top level must be a mapping, got {type(raw).__name__}")
    return resolve_config(raw, overrides)
