"""Run configuration: pydantic models (unknown keys and bad values rejected with their key path), presets,
YAML loading and ``--set key=value`` overrides.

Resolution order: preset (``preset: NAME`` or ``NAME@cpu``) < the YAML file < ``--set`` overrides; the
resolved, validated config is what a run writes to ``config.yaml`` (so a run directory alone reproduces it).
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from nclab.data.loaders import DATASETS
from nclab.nets import NET_MODELS

__all__ = [
    "ConfigError",
    "RunConfig",
    "apply_overrides",
    "deep_merge",
    "load_config",
    "resolve_config",
]

PosInt = Annotated[int, Field(gt=0)]
PosFloat = Annotated[float, Field(gt=0)]
NonNegFloat = Annotated[float, Field(ge=0)]


class ConfigError(ValueError):
    """An invalid run configuration; the message lists every problem with its key path (``model.widths.0``)."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class DataConfig(_Strict):
    name: str = "digits"
    root: str | None = None
    per_class: PosInt | None = None  # balanced training subset (seeded by the run seed)
    test_per_class: PosInt | None = None  # balanced test subset (None: the whole test split)
    pad_to: PosInt | None = None  # [Han et al. 2022]: 32 for (Fashion-)MNIST
    normalize: bool = True
    options: dict[str, Any] = Field(default_factory=dict)  # dataset-specific (gaussian: K, d, n, separation)

    @field_validator("name")
    @classmethod
    def _known(cls, v: str) -> str:
        if v not in DATASETS:
            raise ValueError(f"unknown dataset {v!r}; known: {', '.join(DATASETS)}")
        return v


class HeadConfig(_Strict):
    kind: Literal["linear", "cosine", "fixed", "cmf"] = "linear"
    bias: bool = True  # linear head only
    tau: PosFloat | None = None  # cosine / fixed / cmf: logits are cos / tau (default 0.1)
    logit_scale: PosFloat | None = None  # = 1 / tau (give one of the two)
    beta: Annotated[float, Field(ge=0, lt=1)] = 0.9  # cmf EMA factor
    renormalize: bool = True  # cmf: rows back on the sphere after each update
    code: Literal["etf", "orthogonal"] = "etf"  # fixed head
    assignment: list[int] | None = None  # fixed head: class k gets code row assignment[k]
    cosine: bool = True  # fixed head: cosine logits (else W h)

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

    @field_validator("name")
    @classmethod
    def _known(cls, v: str) -> str:
        if v not in NET_MODELS:
            raise ValueError(f"unknown model {v!r}; known: {', '.join(NET_MODELS)}")
        return v

    @model_validator(mode="after")
    def _options(self) -> ModelConfig:
        params = inspect.signature(NET_MODELS[self.name].__init__).parameters
        allowed = [p for p in params if p not in ("self", "input_shape", "num_classes", "head")]
        bad = [k for k in self.options if k not in allowed]
        if bad:
            raise ValueError(f"options.{bad[0]}: not an option of model {self.name!r} (options: {', '.join(allowed)})")
        return self


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
    nesterov: bool = False
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
    ``int(epochs * f)`` for ``f`` in ``milestone_fractions``; [Han et al. 2022]: 1/3, 2/3 of 350 = 116, 233) or
    ``cosine`` (to ``min_lr``)."""

    name: Literal["constant", "multistep", "cosine"] = "multistep"
    milestones: list[PosInt] | None = None
    milestone_fractions: list[Annotated[float, Field(gt=0, lt=1)]] = Field(default_factory=lambda: [1 / 3, 2 / 3])
    gamma: PosFloat = 0.1
    warmup_epochs: Annotated[int, Field(ge=0)] = 0
    warmup_start_lr: NonNegFloat = 1e-5
    min_lr: NonNegFloat = 0.0


class TrainConfig(_Strict):
    epochs: PosInt = 100
    batch_size: PosInt = 128
    drop_last: bool = True  # the [Han et al. 2022] Colab skips the last incomplete batch
    threads: PosInt | None = None  # torch and numpy/scipy BLAS threads for the run (None: leave as they are)
    device: str = "cpu"  # "cuda" works; bit-identical resume is only promised on the CPU


class MeasureConfig(_Strict):
    """When and what to measure. ``epochs="log"``: 0, the last epoch and ``num_log`` log-spaced epochs; the
    first epoch with zero training error is always added (detected and recorded)."""

    epochs: Literal["log"] | list[Annotated[int, Field(ge=0)]] = "log"
    num_log: PosInt = 20
    splits: list[Literal["train", "test"]] = Field(default_factory=lambda: ["train", "test"])
    layers: Literal["all", "penultimate"] | list[str] = "all"
    full_layers: Literal["penultimate", "all"] = "penultimate"  # full (d x d) ClassStats where
    conventions: dict[str, Any] = Field(default_factory=dict)  # nclab.metrics.DEFAULT_CONVENTIONS overrides
    # eval batch of the measurement passes: 256 keeps a small CNN's activations in cache on the CPU (a 2,000-image
    # Fashion-MNIST pass: 174 ms at 256, 376 ms at 1,024; an MLP pass is the same at both)
    batch_size: PosInt = 256
    cache_mb: NonNegFloat = 256.0  # keep pass-1 features for the NCC pass when they fit
    blas_threads: PosInt | None = 1  # numpy/scipy BLAS threads while measuring (None: as train.threads)
    geodesic: bool = False  # The [Wang et al. 2024] geodesic model over the equal-width measured layers (train split)
    zero_error_check: Literal["gated", "every_epoch"] = "gated"
    zero_error_gate: Annotated[float, Field(ge=0, le=1)] = 0.05

    @field_validator("conventions")
    @classmethod
    def _conv(cls, v: dict[str, Any]) -> dict[str, Any]:
        from nclab.metrics import DEFAULT_CONVENTIONS

        bad = [k for k in v if k not in DEFAULT_CONVENTIONS]
        if bad:
            raise ValueError(f"unknown convention {bad[0]!r}; known: {', '.join(sorted(DEFAULT_CONVENTIONS))}")
        if "weighting" in v:
            # checked here: at measurement time a bad value would only drop the metrics that use it, epochs later
            from nclab.stats.class_stats import check_weighting

            check_weighting(v["weighting"])
        return v


class CheckpointConfig(_Strict):
    every: PosInt = 1  # checkpoint (and rewrite metrics.csv) every this many epochs, and at the last epoch
    keep_measured: bool = False  # also keep checkpoints/epoch_NNNN.pt at every measured epoch


class LogConfig(_Strict):
    """Where the measured rows go besides the run directory's ``metrics.csv`` (always written: resume reads it).
    Each entry is a kind of :data:`nclab.io.sinks.SINKS` (``"tensorboard"``, ``"wandb"``, ``"mlflow"``;
    ``"table"`` is the default table) or ``{kind: ..., **options}`` (:func:`nclab.io.sinks.make_sink`)."""

    sinks: list[str | dict[str, Any]] = Field(default_factory=lambda: ["table"])

    @field_validator("sinks")
    @classmethod
    def _kinds(cls, v: list[str | dict[str, Any]]) -> list[str | dict[str, Any]]:
        from nclab.io.sinks import SINKS

        for spec in v:
            kind = spec if isinstance(spec, str) else spec.get("kind")
            if kind not in SINKS:
                raise ValueError(f"unknown sink {kind!r}; known: {', '.join(sorted(SINKS))}")
        return v


class RunConfig(_Strict):
    name: str = "run"
    seed: int = 0
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
    report: bool = True  # write report.html at the end
    notes: str = ""

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


# ------------------------------------------------------------------------------------------ resolution
def deep_merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of ``base`` with ``over`` merged in: nested mappings merge key by key, any other value of
    ``over`` replaces the one in ``base``. Neither argument is modified.

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
    """Apply ``key.path=value`` strings (values parsed as YAML: ``3``, ``0.1``, ``[64, 64]``, ``true``)."""
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
        node[parts[-1]] = yaml.safe_load(text)
    return out


def _format_errors(err: ValidationError) -> str:
    lines = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"])
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            msg = "unknown key"
        # a model-level check names its own sub-key (options.NAME): attach it to the path
        if msg.startswith("options.") and ":" in msg:
            sub, msg = msg.split(":", 1)
            loc = f"{loc}.{sub}" if loc else sub
            msg = msg.strip()
        lines.append(f"  {loc or '(top level)'}: {msg}" + (f" (got {e['input']!r})" if _show_input(e) else ""))
    return "invalid config:\n" + "\n".join(lines)


def _show_input(e: Mapping[str, Any]) -> bool:
    return e["type"] not in ("extra_forbidden", "missing", "value_error") and not isinstance(e.get("input"), dict)


def resolve_config(raw: Mapping[str, Any] | None = None, overrides: Sequence[str] = ()) -> RunConfig:
    """Merge the preset named in ``raw`` (if any) under ``raw``, apply ``overrides``, validate."""
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
    """Read a YAML config file and resolve it (see :func:`resolve_config`)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such config file: {path}")
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML ({err})") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the top level must be a mapping, got {type(raw).__name__}")
    return resolve_config(raw, overrides)
