"""Collapse measured inside any training loop: :class:`CollapseMonitor`.

The monitor wraps a model, finds its classifier, hooks the layers to measure, and on each call of
:meth:`CollapseMonitor.measure` runs the two streamed passes of :mod:`nclab.train.measure` over any iterable of
batches -- pass 1 the class statistics (``ClassStats``, float64 whatever the model's dtype), pass 2 the NCC
counts against the training split's class means, read from a copy of pass 1's features when they fit in
``cache_mb`` (else by running the model again) -- then :func:`nclab.metrics.collapse_report` per layer (with
``gnc1`` for a cosine classifier, as the built-in trainer). The rows go to the monitor's sinks
(:mod:`nclab.io.sinks`; the run-directory table by default).

Under ``torch.distributed`` each rank passes its own shard; the statistics and the NCC counts are all-reduced
(exact: sums of float64 moments re-expressed about a common shift, integer counts), so every rank holds the
same report, and rank 0 alone writes to the sinks.

Token-level collapse of a language model [Wu & Papyan 2024] (classes = next tokens, ``K`` = the vocabulary):
pass ``targets_fn`` (e.g. :func:`next_token_targets`) and ``track="light"`` for a large ``K``.
"""

from __future__ import annotations

import warnings
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from nclab._threads import blas_threads
from nclab.io.run_table import OUTPUT_LAYER, MetricRow
from nclab.io.sinks import MetricSink, make_sink
from nclab.stats import ClassStats
from nclab.train.hooks import resolve_layers
from nclab.train.measure import MeasurePlan, StatsPass, TargetsFn, forward_pass, layer_rows, ncc_pass
from nclab.train.trainer import measurement_epochs

__all__ = [
    "CLASSIFIER_METRICS",
    "Classifier",
    "CollapseMonitor",
    "MonitorResult",
    "Schedule",
    "find_linear_classifier",
    "next_token_targets",
]

#: Metrics that need the classifier ``W`` (and NC4's NCC comparison with it); without a classifier they are
#: missing from the report, and the monitor says so.
CLASSIFIER_METRICS: tuple[str, ...] = (
    "self_duality",
    "gnc3",
    "uniform_duality",
    "equinorm_w",
    "equiangularity_w",
    "max_angle_w",
    "ncc_mismatch",
    "ncc_mismatch_nobias",
    "classifier_accuracy",
)

#: The layer name of the classifier's input when no named module outputs it (``layers="penultimate"``).
PENULTIMATE = "penultimate"


@dataclass(frozen=True)
class Classifier:
    """A model's classifier: ``W (K, d)``, ``b (K,)`` or ``None`` (float64 arrays, read at each measurement
    from ``module`` when there is one), its ``name`` (module path, or ``"(W, b)"`` when given as arrays)."""

    name: str
    module: nn.Module | None
    W: np.ndarray
    b: np.ndarray | None

    def refreshed(self) -> Classifier:
        """The current weights of ``module`` (they change while training); arrays given directly stay."""
        if self.module is None:
            return self
        return _from_module(self.name, self.module)


def _f64(t: Any) -> np.ndarray:
    if isinstance(t, torch.Tensor):
        return t.detach().to("cpu", torch.float64).numpy()
    return np.asarray(t, dtype=np.float64)


def _from_module(name: str, module: nn.Module) -> Classifier:
    W = getattr(module, "weight", None)
    if not isinstance(W, torch.Tensor) or W.ndim != 2:
        raise TypeError(f"classifier {name!r} has no 2-D weight (K, d)")
    b = getattr(module, "bias", None)
    return Classifier(name, module, _f64(W), None if b is None else _f64(b))


def find_linear_classifier(model: nn.Module, num_classes: int) -> tuple[str, nn.Module] | None:
    """The module that classifies: ``model.head`` with a weight (nclab networks), else the last ``nn.Linear``
    in module order with ``num_classes`` outputs (``fc`` of torchvision, ``classifier`` / ``score`` of Hugging
    Face heads, ``lm_head`` of a language model with ``K`` = its vocabulary); ``None`` when there is none.

    Examples
    --------
    >>> net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    >>> find_linear_classifier(net, 3)[0]
    '2'
    >>> find_linear_classifier(net, 5) is None
    True
    """
    head = getattr(model, "head", None)
    if isinstance(getattr(head, "weight", None), torch.Tensor):
        return "head", head
    found = None
    for name, mod in model.named_modules():
        if isinstance(mod, nn.Linear) and mod.out_features == num_classes:
            found = (name, mod)
    return found


def _classifier(model: nn.Module, num_classes: int, spec: Any) -> Classifier | None:
    """The classifier named by ``spec`` (see :class:`CollapseMonitor`)."""
    if spec is False:
        return None
    if spec is None:
        hit = find_linear_classifier(model, num_classes)
        return None if hit is None else _from_module(*hit)
    if isinstance(spec, nn.Module):
        name = next((n for n, m in model.named_modules() if m is spec), type(spec).__name__)
        return _from_module(name, spec)
    if isinstance(spec, str):
        modules = dict(model.named_modules())
        if spec in modules:
            return _from_module(spec, modules[spec])
        params = dict(model.named_parameters())
        if spec in params:  # a weight parameter: its bias, if any, is the sibling ".bias"
            owner = spec.rsplit(".", 1)[0] if "." in spec else ""
            bias = params.get(f"{owner}.bias" if owner else "bias")
            return Classifier(
                owner or spec,
                modules.get(owner) if owner else None,
                _f64(params[spec]),
                None if bias is None else _f64(bias),
            )
        raise KeyError(f"classifier {spec!r} is neither a module nor a parameter of {type(model).__name__}")
    if isinstance(spec, tuple | list) and len(spec) == 2:
        W, b = spec
        return Classifier("(W, b)", None, _f64(W), None if b is None else _f64(b))
    raise TypeError("classifier must be None (find it), False (none), a module, a (W, b) pair or a name")


class Schedule:
    """The epochs to measure: ``every(n)`` (0, n, 2n, ...), ``log(epochs, num)`` (0, ``epochs`` and ``num``
    log-spaced epochs between, as the built-in trainer), or ``at(epochs)``.

    Examples
    --------
    >>> [e for e in range(12) if Schedule.every(5).due(e)]
    [0, 5, 10]
    >>> [e for e in range(101) if Schedule.log(100, 5).due(e)]
    [0, 1, 3, 10, 32, 100]
    """

    def __init__(self, rule: Callable[[int], bool], text: str) -> None:
        self._rule, self._text = rule, text

    @classmethod
    def every(cls, n: int) -> Schedule:
        if int(n) < 1:
            raise ValueError(f"schedule: every must be >= 1, got {n}")
        return cls(lambda e: e % int(n) == 0, f"every {n}")

    @classmethod
    def log(cls, epochs: int, num: int = 20) -> Schedule:
        pts = frozenset(measurement_epochs(int(epochs), int(num)))
        return cls(pts.__contains__, f"log({epochs}, {num})")

    @classmethod
    def at(cls, epochs: Iterable[int]) -> Schedule:
        pts = frozenset(int(e) for e in epochs)
        return cls(pts.__contains__, f"at {sorted(pts)}")

    @classmethod
    def coerce(cls, spec: Schedule | int | Iterable[int] | None) -> Schedule:
        """``None`` -> every epoch; an int -> :meth:`every`; epochs -> :meth:`at`."""
        if spec is None:
            return cls.every(1)
        if isinstance(spec, Schedule):
            return spec
        if isinstance(spec, int):
            return cls.every(spec)
        return cls.at(spec)

    def due(self, epoch: int) -> bool:
        return bool(self._rule(int(epoch)))

    def __repr__(self) -> str:
        return f"Schedule({self._text})"


@dataclass
class MonitorResult:
    """One measurement: typed ``rows`` (epoch, split, layer, metric, value), ``reports`` ``{layer: {metric:
    value}}``, the pass-1 ``stats`` per layer, ``warnings``, and ``missing``: the classifier metrics that could
    not be computed (no classifier found), empty when none is missing."""

    epoch: int
    split: str
    rows: list[MetricRow]
    reports: dict[str, dict[str, float]]
    stats: dict[str, ClassStats]
    warnings: list[str] = field(default_factory=list)
    missing: tuple[str, ...] = ()

    def value(self, layer: str, metric: str) -> float:
        try:
            return self.reports[layer][metric]
        except KeyError:
            raise KeyError(f"no {metric!r} at layer {layer!r}") from None


def next_token_targets(features: torch.Tensor, batch: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """Token-level samples of a causal language model: hidden state at position ``t`` labelled by token
    ``t + 1``, padding (``attention_mask == 0`` at ``t + 1``) dropped. ``features (B, T, d)``; ``batch`` the
    ``(inputs, labels)`` pair whose inputs hold ``input_ids (B, T)`` and optionally ``attention_mask``."""
    inputs = batch[0]
    ids = inputs["input_ids"] if isinstance(inputs, Mapping) else inputs
    h = features[:, :-1].reshape(-1, features.shape[-1])
    y = ids[:, 1:].reshape(-1).to(h.device)
    mask = inputs.get("attention_mask") if isinstance(inputs, Mapping) else None
    if mask is None:
        return h, y
    keep = mask[:, 1:].reshape(-1).to(h.device).bool()
    return h[keep], y[keep]


class _KeepingStatsPass(StatsPass):
    """Pass 1 over an iterable of batches of unknown total size, as :func:`nclab.train.measure.measure_split`
    does with its feature cache: each layer's features (and labels) are kept while they fit in ``budget_mb``,
    then :meth:`finish` builds the statistics in one update per layer and the NCC pass reads the kept features
    instead of running the model again. A batch past the budget folds what was kept and streams from there on
    (pass 2 then runs the model). Copies, not references: an in-place op after the hooked module
    (``ReLU(inplace=True)``) would change a kept output."""

    def __init__(self, plan: MeasurePlan, loss: Any, unit: ClassStats | None, budget_mb: float) -> None:
        super().__init__(plan, None, loss, 0.0, unit)
        self._left = budget_mb * 2**20
        self._kept: dict[str, list[tuple[torch.Tensor, torch.Tensor]]] | None = {} if budget_mb > 0 else None
        self.labels: torch.Tensor | None = None

    def fold(self, name: str, f: torch.Tensor, y: torch.Tensor) -> None:
        if self._kept is not None:
            self._left -= f.numel() * f.element_size()
            if self._left >= 0:
                self._kept.setdefault(name, []).append((f.detach().clone(), y))
                return
            self._spill()
        super().fold(name, f, y)

    def _spill(self) -> None:
        assert self._kept is not None
        kept, self._kept = self._kept, None
        for name, parts in kept.items():
            super().fold(name, torch.cat([f for f, _ in parts]), torch.cat([y for _, y in parts]))

    def finish(self) -> None:
        if self._kept:
            self.features = {}
            for name, parts in self._kept.items():
                f, self.labels = torch.cat([f for f, _ in parts]), torch.cat([y for _, y in parts])
                super().fold(name, f, self.labels)
                self.features[name] = f
        super().finish()


def _distributed() -> bool:
    import torch.distributed as dist

    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def _rank() -> int:
    import torch.distributed as dist

    return dist.get_rank() if (dist.is_available() and dist.is_initialized()) else 0


def _to(obj: Any, device: torch.device) -> Any:
    if isinstance(obj, torch.Tensor):
        return obj.to(device, non_blocking=True)
    if isinstance(obj, Mapping):
        return {k: _to(v, device) for k, v in obj.items()}
    if isinstance(obj, tuple | list):
        return type(obj)(_to(v, device) for v in obj)
    return obj


def _split_batch(batch: Any) -> tuple[Any, torch.Tensor | None]:
    """``(inputs, labels)`` of a batch: a ``(x, y, ...)`` sequence, or a mapping with ``labels`` (Hugging Face
    style; the rest are the model's keyword inputs)."""
    if isinstance(batch, Mapping):
        inputs = {k: v for k, v in batch.items() if k not in ("labels", "label")}
        return inputs, batch.get("labels", batch.get("label"))
    if isinstance(batch, tuple | list) and len(batch) >= 2:
        return batch[0], batch[1]
    raise TypeError(f"a batch must be (x, y) or a mapping with 'labels', got {type(batch).__name__}")


def _call(model: nn.Module, x: Any) -> Any:
    out = model(**x) if isinstance(x, Mapping) else model(x)
    logits = getattr(out, "logits", None)
    return out if logits is None else logits


class CollapseMonitor:
    """Measure neural collapse of ``model`` inside any training loop.

    Parameters
    ----------
    model : nn.Module
        Any model; float32 or bfloat16 (statistics accumulate in float64 either way).
    num_classes : int
        ``K`` (for token-level collapse: the vocabulary size).
    layers : str or sequence of str, optional
        ``"penultimate"`` (default): the classifier's input (an nclab network's ``penultimate_name``); a list of
        module names (``"penultimate"`` allowed among them); or a regex matched in full against module names.
    classifier : nn.Module, (W, b), str, None or False
        The classifier ``W (K, d)``, ``b (K,)``: a module, a pair of arrays, a module or weight-parameter name,
        ``None`` to find it (:func:`find_linear_classifier`), ``False`` for none. Without one, NC3 / NC4 and the
        other :data:`CLASSIFIER_METRICS` cannot be computed: a ``UserWarning`` names them and each result's
        ``missing`` lists them.
    schedule : Schedule, int, iterable of int or None
        When :meth:`due` is true (:meth:`Schedule.coerce`); :meth:`maybe_measure` follows it.
    track : str or mapping, optional
        ``"full"`` (d x d statistics: NC1, ranks, ...) or ``"light"`` (O(K d)) per layer: a mapping ``{layer:
        track}``, or one value for every layer. Default: full at the penultimate layer, light elsewhere. Use
        ``"light"`` for a large ``K``.
    device : str or torch.device, optional
        Where batches go (default: the device of the model's first parameter).
    sinks : sequence of MetricSink or sink specs, optional
        Default: the run table in ``out`` when ``out`` is given, else none (rows are still returned).
    out : path, optional
        The run directory of the default table sink (and of sink specs given by name).
    targets_fn : callable, optional
        ``targets_fn(features, batch) -> (features (M, d), labels (M,))`` applied to each layer's raw output
        (e.g. :func:`next_token_targets`); with it, no error row is computed.
    loss_fn : callable, optional
        ``loss_fn(logits, y) -> scalar``: adds the network's ``loss`` row.
    cache_mb : float, optional
        Memory (MiB) for a copy of the measured features of pass 1; when they fit, the NCC pass reads them
        instead of running the model again (256 by default, as ``measure.cache_mb`` of the built-in trainer;
        ``0`` always runs the model twice). Not used with ``targets_fn``.

    Examples
    --------
    >>> torch.manual_seed(0)  # doctest: +ELLIPSIS
    <...>
    >>> net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    >>> x, y = torch.randn(60, 4), torch.arange(60) % 3
    >>> monitor = CollapseMonitor(net, num_classes=3)
    >>> res = monitor.measure([(x[:30], y[:30]), (x[30:], y[30:])], split="train", epoch=0)
    >>> sorted(res.reports), "self_duality" in res.reports["penultimate"]
    (['output', 'penultimate'], True)
    """

    def __init__(
        self,
        model: nn.Module,
        num_classes: int,
        *,
        layers: str | Sequence[str] = PENULTIMATE,
        classifier: Any = None,
        schedule: Schedule | int | Iterable[int] | None = None,
        track: str | Mapping[str, str] | None = None,
        device: str | torch.device | None = None,
        sinks: Sequence[MetricSink | str | Mapping[str, Any]] | None = None,
        out: str | Path | None = None,
        targets_fn: TargetsFn | None = None,
        loss_fn: Callable[[Any, torch.Tensor], torch.Tensor] | None = None,
        conventions: Mapping[str, Any] | None = None,
        cache_mb: float = 256.0,
    ) -> None:
        if int(num_classes) < 2:
            raise ValueError(f"num_classes must be >= 2, got {num_classes}")
        self.model = model
        self.num_classes = int(num_classes)
        self.schedule = Schedule.coerce(schedule)
        self.targets_fn = targets_fn
        self.loss_fn = loss_fn
        self.conventions = conventions
        if not cache_mb >= 0:
            raise ValueError(f"cache_mb must be >= 0, got {cache_mb}")
        self.cache_mb = float(cache_mb)
        self.classifier = _classifier(model, self.num_classes, classifier)
        self.missing: tuple[str, ...] = () if self.classifier is not None else CLASSIFIER_METRICS
        if self.classifier is None:
            warnings.warn(
                f"CollapseMonitor: no classifier found in {type(model).__name__} (no 'head' and no nn.Linear with "
                f"{self.num_classes} outputs); these metrics will be missing: {', '.join(CLASSIFIER_METRICS)}. "
                "Pass classifier= (a module, a (W, b) pair or a parameter name) to measure them.",
                UserWarning,
                stacklevel=2,
            )
        self.layers, self.inputs, self.penultimate = self._resolve(layers)
        self.full_layers = self._tracks(track)
        self._device = None if device is None else torch.device(device)
        if sinks is None:
            sinks = [] if out is None else ["table"]
        if _rank() != 0:  # rank 0 alone writes: other ranks open no file or logger run
            sinks = []
        self.sinks: list[MetricSink] = [
            s if isinstance(s, MetricSink) else make_sink(s, Path(out) if out is not None else Path(".")) for s in sinks
        ]
        self.rows: list[MetricRow] = []
        #: The training split's statistics from the latest ``measure(split="train")``: NCC reference of the
        #: held-out splits.
        self.train_stats: dict[str, ClassStats] | None = None

    # ------------------------------------------------------------------ set-up
    def _resolve(self, spec: str | Sequence[str]) -> tuple[OrderedDict[str, nn.Module], frozenset[str], str]:
        model = self.model
        own = getattr(model, "penultimate_name", None) if hasattr(model, "measured_layers") else None
        names = [spec] if spec == PENULTIMATE else (list(spec) if not isinstance(spec, str) else None)
        if names is None:  # a regex
            layer_map = resolve_layers(model, spec)
            return layer_map, frozenset(), own if own in layer_map else next(reversed(layer_map))
        layer_map: OrderedDict[str, nn.Module] = OrderedDict()
        inputs: set[str] = set()
        pen = None
        for name in names:
            if name != PENULTIMATE:
                layer_map.update(resolve_layers(model, [name]))
                continue
            if own is not None:
                layer_map.update(resolve_layers(model, [own]))
                pen = own
            elif self.classifier is not None and self.classifier.module is not None:
                layer_map[PENULTIMATE] = self.classifier.module
                inputs.add(PENULTIMATE)
                pen = PENULTIMATE
            else:
                raise ValueError(
                    "layers='penultimate' needs a classifier module (its input is the penultimate feature) or an "
                    "nclab network; name the penultimate layer instead (a module name or regex)"
                )
        if pen is None:
            pen = own if own in layer_map else next(reversed(layer_map))
        return layer_map, frozenset(inputs), pen

    def _tracks(self, track: str | Mapping[str, str] | None) -> set[str]:
        if track is None:
            return {self.penultimate}
        per = {n: track for n in self.layers} if isinstance(track, str) else {self.penultimate: "full", **track}
        bad = {t for t in per.values() if t not in ("full", "light")}
        if bad or set(per) - set(self.layers):
            raise ValueError(f"track must be 'full' or 'light' per measured layer {list(self.layers)}, got {track!r}")
        return {n for n, t in per.items() if t == "full"}

    @property
    def device(self) -> torch.device:
        if self._device is not None:
            return self._device
        p = next(self.model.parameters(), None)
        return torch.device("cpu") if p is None else p.device

    def due(self, epoch: int) -> bool:
        """Whether ``epoch`` is on the schedule."""
        return self.schedule.due(epoch)

    # ------------------------------------------------------------------ measuring
    def batches(self, data: Any) -> Callable[[], Iterable[tuple[Any, torch.Tensor]]]:
        """A re-iterable pass over ``data`` as ``(inputs, labels)`` on the monitor's device (a one-shot iterator
        is kept in a list, as the two passes read it twice)."""
        if isinstance(data, tuple) and len(data) == 2 and all(isinstance(t, torch.Tensor) for t in data):
            x, y = data  # one batch of tensors
            data = [(x, y)]
        elif not hasattr(data, "__iter__"):
            raise TypeError(f"measure needs an iterable of (x, y) batches or an (x, y) pair, got {type(data).__name__}")
        if iter(data) is data:  # a generator or iterator: one pass only, so keep its batches for pass 2
            data = list(data)
        device = self.device

        def batches() -> Iterable[tuple[Any, torch.Tensor]]:
            for batch in data:
                x, y = _split_batch(batch)
                x = _to(x, device)
                if y is None:
                    if self.targets_fn is None:
                        raise ValueError("a batch has no labels (and no targets_fn gives them)")
                    first = next(iter(x.values())) if isinstance(x, Mapping) else x
                    y = torch.zeros(first.shape[0], dtype=torch.long, device=device)
                yield x, _to(torch.as_tensor(y), device)

        return batches

    def plan(self) -> MeasurePlan:
        """The measurement plan with the classifier's current weights (:class:`nclab.train.measure.MeasurePlan`)."""
        clf = None if self.classifier is None else self.classifier.refreshed()
        self.classifier = clf
        return MeasurePlan(
            layers=dict(self.layers),
            penultimate=self.penultimate,
            num_classes=self.num_classes,
            W=None if clf is None else clf.W,
            b=None if clf is None else clf.b,
            full_layers=frozenset(self.full_layers),
            batch_size=0,
            advance=None,
            threads=1,
            inputs=self.inputs,
            call=_call,
            targets_fn=self.targets_fn,
        )

    @torch.no_grad()
    def measure(self, data: Any, *, split: str = "train", epoch: int = 0) -> MonitorResult:
        """Measure on ``data``: any iterable of batches ``(x, y)`` (a DataLoader, a list, a generator; mappings
        with ``labels`` too) or one ``(x, y)`` pair of tensors. A held-out split's NCC uses the class means of
        the latest training measurement (its own when there is none yet). The model's train/eval mode (per
        module) and the grad mode are restored. Rows go to the sinks (rank 0) and to :attr:`rows`."""
        plan = self.plan()
        batches = self.batches(data)
        loss = None if self.loss_fn is None else (lambda out, y, h, fn=self.loss_fn: fn(out, y))
        modes = {m: m.training for m in self.model.modules()}
        msgs: list[str] = []
        try:
            with blas_threads(plan.threads):
                unit = self._unit_stats(plan)
                budget = self.cache_mb if self.targets_fn is None else 0.0
                p1 = _KeepingStatsPass(plan, loss, unit, budget)
                forward_pass(self.model, batches, plan, p1)
                p1.finish()
                counters = [float(p1.wrong), float(p1.scored), float(p1.loss_sum), float(p1.seen)]
                if _distributed():
                    counters = self._reduce([*p1.stats.values(), *([unit] if unit is not None else [])], counters)
                    p1.wrong, p1.scored, p1.loss_sum, p1.seen = (
                        int(counters[0]),
                        int(counters[1]),
                        counters[2],
                        int(counters[3]),
                    )
                train = split == "train"
                reference = p1.stats if (train or self.train_stats is None) else self.train_stats
                if not train and self.train_stats is None:
                    msgs.append(f"{split}: NCC against its own class means (no training measurement yet)")
                ncc = ncc_pass(self.model, batches, p1.labels, plan, reference, p1.features, msgs)
                if _distributed():
                    for acc in ncc.values():
                        acc.all_reduce()
                layer_out: list[tuple[str, str, float]] = [(OUTPUT_LAYER, "error", p1.error)] if p1.scored else []
                if self.loss_fn is not None:
                    layer_out.append((OUTPUT_LAYER, "loss", p1.loss))
                for name in plan.layers:
                    layer_out += layer_rows(plan, name, p1.stats[name], ncc.get(name), unit, self.conventions, msgs)
        finally:
            for m, was in modes.items():
                m.train(was)
        if train:
            self.train_stats = dict(p1.stats)
        if self.missing:
            msgs.append(f"no classifier: missing {', '.join(self.missing)}")
        reports: dict[str, dict[str, float]] = {}
        for lay, met, v in layer_out:
            reports.setdefault(lay, {})[met] = v
        rows = [MetricRow(int(epoch), split, lay, met, v) for lay, met, v in layer_out]
        self.rows.extend(rows)
        if _rank() == 0:
            for sink in self.sinks:
                sink.write(rows)
        return MonitorResult(
            int(epoch), split, rows, reports, OrderedDict(p1.stats), list(dict.fromkeys(msgs)), self.missing
        )

    def maybe_measure(self, data: Any, *, split: str = "train", epoch: int = 0) -> MonitorResult | None:
        """:meth:`measure` when ``epoch`` is on the schedule, else ``None``."""
        return self.measure(data, split=split, epoch=epoch) if self.due(epoch) else None

    def _unit_stats(self, plan: MeasurePlan) -> ClassStats | None:
        """Statistics of the unit-normalised penultimate features for a cosine classifier (``cosine = True``,
        as nclab's cosine heads), from which ``gnc1`` is reported [Jiang et al. 2024], as the built-in trainer
        does; ``None`` otherwise."""
        clf = self.classifier
        if clf is None or plan.W is None or not getattr(clf.module, "cosine", False):
            return None
        return ClassStats(plan.num_classes, int(plan.W.shape[1]), track="full")

    @staticmethod
    def _reduce(stats: Iterable[ClassStats], counters: list[float]) -> list[float]:
        import torch.distributed as dist

        for s in stats:
            s.all_reduce()
        t = torch.tensor(counters, dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
        return [float(v) for v in t]

    def close(self) -> None:
        """Close every sink (rank 0; other ranks never opened a writer's output)."""
        for sink in self.sinks:
            sink.close()

    def __enter__(self) -> CollapseMonitor:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        clf = None if self.classifier is None else self.classifier.name
        return (
            f"CollapseMonitor(layers={list(self.layers)}, penultimate={self.penultimate!r}, classifier={clf!r}, "
            f"K={self.num_classes}, schedule={self.schedule!r})"
        )
