"""One measurement of a network on one data split: the eval-mode passes that feed the metric suite.

Pass 1 (forward, hooks on every measured layer): ``ClassStats`` per layer -- ``track="full"`` at the
penultimate layer (d x d, for NC1, VCI, ranks, probe loss), ``"light"`` (O(K d)) elsewhere, enough for the
per-layer PFC metrics; the network's loss and error on the split; for cosine heads also full statistics of the
L2-normalised penultimate features (GNC1, [Jiang et al. 2024]). Pass 2: the NCC pass (``NCCAccumulator``) per layer,
against the class means of ``reference`` statistics -- the training split's for a held-out split (docs/conventions.md,
"NC4 split and means"), the split's own otherwise; the classifier ``W, b`` enter at the penultimate layer only (NC4).
When the split's features fit in ``cache_mb``, pass 1 keeps them (:class:`FeatureCache`) and builds each
layer's statistics in one update after the forward pass, and pass 2 reuses them (one NCC update per layer);
otherwise both stream batch by batch and pass 2 runs the forward pass again.

Metrics: :func:`nclab.metrics.collapse_report` per layer (so ``trace_ratio`` = PFC1, ``etf_gram_error`` =
PFC2, ``ncc_accuracy`` = PFC3 at every layer, NC1-NC4 and the rest at the penultimate), plus ``gnc1`` for
cosine heads. Held-out splits: variability / geometry metrics use the split's own class statistics
([Han et al. 2022, Fig. 12] reading), NCC quantities use the training means.
"""

from __future__ import annotations

import math
import warnings
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from nclab._threads import blas_threads
from nclab.io.run_table import OUTPUT_LAYER
from nclab.metrics import collapse_report, gnc1
from nclab.stats import ClassStats, NCCAccumulator
from nclab.train.distributed import sum_all
from nclab.train.hooks import FeatureHooks, LayerSpec, eval_mode, resolve_layers

__all__ = [
    "FeatureCache",
    "MeasurePlan",
    "PassSink",
    "SplitMeasurement",
    "StatsPass",
    "find_classifier",
    "forward_pass",
    "layer_rows",
    "measure_split",
    "ncc_pass",
    "tensor_batches",
]

LossFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]
#: ``targets_fn(features, batch) -> (features (M, d), labels (M,))``: one layer's raw output of one batch to the
#: samples it holds (e.g. a language model's hidden states at position t labelled by token t + 1).
TargetsFn = Callable[[torch.Tensor, Any], tuple[torch.Tensor, torch.Tensor]]


@dataclass
class SplitMeasurement:
    """Rows ``(layer, metric, value)`` in layer order, the pass-1 statistics per layer, and warnings."""

    rows: list[tuple[str, str, float]]
    stats: dict[str, ClassStats]
    error: float
    loss: float
    warnings: list[str] = field(default_factory=list)

    def value(self, layer: str, metric: str) -> float:
        for lay, met, v in self.rows:
            if lay == layer and met == metric:
                return v
        raise KeyError(f"no {metric!r} at layer {layer!r}")


def _geodesic_rows(
    layer_map: Mapping[str, nn.Module],
    cache: Mapping[str, torch.Tensor] | None,
    y: torch.Tensor,
    num_classes: int,
    msgs: list[str],
) -> list[tuple[str, str, float]]:
    """Rows of the [Wang et al. 2024] geodesic model over the leading measured layers of one dimension (see
    measure_split)."""
    from nclab.theory.geodesic import geodesic_profile

    if cache is None:
        msgs.append("geodesic: skipped (the split's features exceed measure.cache_mb)")
        return []
    names = list(layer_map)
    segment = [names[0]]
    for name in names[1:]:
        if cache[name].shape[1] != cache[names[0]].shape[1]:
            break
        segment.append(name)
    if len(segment) < 2:
        msgs.append("geodesic: skipped (needs at least two leading measured layers of the same dimension)")
        return []
    try:
        prof = geodesic_profile([cache[n] for n in segment], y, num_classes)
    except ValueError as err:  # e.g. an empty class in a small subset, or no layer moving any sample
        msgs.append(f"geodesic: skipped ({err})")
        return []
    pred = prof.predictions["measured"]
    rows = [(OUTPUT_LAYER, "geodesic_s01", prof.s01), (OUTPUT_LAYER, "straightness_index", prof.straightness_index)]
    for i, name in enumerate(segment):
        rows.append((name, "relative_depth", float(prof.relative_depth[i])))
        rows += [(name, f"geodesic_{k}", float(getattr(pred, k)[i])) for k in ("pfc1", "pfc2", "pfc3")]
    return rows


def find_classifier(model: nn.Module) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The classifier ``W (K, d)`` and bias ``b (K,)`` of ``model.head``, as float64 arrays.

    ``(None, None)`` when the model has no ``head`` with a ``weight``; ``b`` is ``None`` for a head without bias.

    Examples
    --------
    >>> net = nn.Module()
    >>> net.head = nn.Linear(8, 3)
    >>> W, b = find_classifier(net)
    >>> W.shape, b.shape, W.dtype
    ((3, 8), (3,), dtype('float64'))
    """
    head = getattr(model, "head", None)
    W = getattr(head, "weight", None)
    if W is None:
        return None, None
    b = getattr(head, "bias", None)
    to = lambda t: t.detach().to("cpu", torch.float64).numpy()  # noqa: E731
    return to(W), (None if b is None else to(b))


class FeatureCache:
    """Each measured layer's features of one split, kept while they fit in a memory budget.

    A layer's batches are written in order into one preallocated ``(N, d)`` buffer (no per-batch copies to
    concatenate later). A layer whose buffer would exceed what is left of the budget gets none and sets
    :attr:`overflowed`; the caller then takes the rows cached so far with :meth:`drain` and streams from there on.

    Parameters
    ----------
    num_samples : int
        ``N``, the number of samples of the split (rows of every buffer).
    budget_mb : float
        Memory for all buffers together, in MiB (``measure.cache_mb``).

    Examples
    --------
    >>> cache = FeatureCache(4, budget_mb=1.0)
    >>> cache.store("fc", torch.ones(3, 2), start=0), cache.store("fc", torch.zeros(1, 2), start=3)
    (True, True)
    >>> cache.complete()["fc"].sum().item()
    6.0
    """

    def __init__(self, num_samples: int, budget_mb: float) -> None:
        self.num_samples = int(num_samples)
        #: Set once a layer did not fit: the caller drains the cache and streams the rest of the pass.
        self.overflowed = False
        self._bytes_left = budget_mb * 2**20
        self._buffers: dict[str, torch.Tensor] = {}
        self._filled: dict[str, int] = {}  # rows written per layer (also the layers already seen)
        self._first_row: dict[str, int] = {}  # sample offset of each layer's first row

    def store(self, name: str, f: torch.Tensor, start: int) -> bool:
        """Append the batch ``f (n, d)`` of samples ``start, start + 1, ...`` to ``name``'s buffer; ``False`` when
        ``name`` has no buffer (it did not fit), and the caller uses ``f`` directly."""
        buf = self._buffers.get(name)
        if buf is None and name not in self._filled:
            need = self.num_samples * f.shape[1] * f.element_size()
            if need <= self._bytes_left:
                buf = torch.empty((self.num_samples, f.shape[1]), dtype=f.dtype, device=f.device)
                self._buffers[name] = buf
                self._bytes_left -= need
            else:
                self.overflowed = True
            self._filled[name], self._first_row[name] = 0, start
        if buf is None:
            return False
        n, done = int(f.shape[0]), self._filled[name]
        if done + n > self.num_samples:
            raise RuntimeError(f"layer {name!r} produced more rows than the split has samples")
        buf[done : done + n].copy_(f)
        self._filled[name] = done + n
        return True

    def drain(self, y: torch.Tensor) -> list[tuple[str, torch.Tensor, torch.Tensor]]:
        """Empty the cache: ``(name, features, labels)`` of the rows each buffer holds; ``y (N,)``: the split's
        labels."""
        held = []
        for name, buf in self._buffers.items():
            first, n = self._first_row[name], self._filled[name]
            held.append((name, buf[:n], y[first : first + n]))
        self._buffers = {}
        return held

    def complete(self) -> dict[str, torch.Tensor]:
        """``{name: (N, d)}`` once a pass has written every sample of every cached layer (raises otherwise)."""
        short = [n for n in self._buffers if self._filled[n] != self.num_samples or self._first_row[n] != 0]
        if short:
            raise RuntimeError(f"layers {short} did not produce one row per sample during the forward pass")
        return self._buffers


def _call_model(model: nn.Module, x: Any) -> Any:
    return model(x)


@dataclass(frozen=True)
class MeasurePlan:
    """What the passes of one measurement share.

    ``layers``: ``{name: module}`` in order; ``penultimate``: the layer the classifier ``W (K, d)``, ``b (K,)``
    reads (NC3 / NC4 there only); ``full_layers``: ``"penultimate"`` (full statistics there, light elsewhere),
    ``"all"``, or a collection of layer names; ``batch_size``: rows per forward pass of :func:`tensor_batches`;
    ``advance(n)``: progress callback; ``threads``: BLAS threads while measuring. The seams for models outside
    nclab: ``inputs`` names layers whose module *input* is measured (the classifier's input is the penultimate
    feature of a model with no module producing it); ``call(model, x)`` runs a batch and returns the logits
    ``(n, K)`` (or anything else, then no error is counted); ``targets_fn`` turns a layer's raw output and the
    batch into ``(features, labels)`` (token-level collapse).
    """

    layers: dict[str, nn.Module]
    penultimate: str
    num_classes: int
    W: np.ndarray | None
    b: np.ndarray | None
    full_layers: str | Collection[str]
    batch_size: int
    advance: Callable[[int], None] | None
    threads: int | None
    inputs: frozenset[str] = frozenset()
    call: Callable[[nn.Module, Any], Any] = _call_model
    targets_fn: TargetsFn | None = None

    def track(self, name: str) -> str:
        if isinstance(self.full_layers, str):
            return "full" if name == self.penultimate or self.full_layers == "all" else "light"
        return "full" if name in self.full_layers else "light"

    def classifier_at(self, name: str) -> tuple[np.ndarray | None, np.ndarray | None]:
        """``(W, b)`` at the penultimate layer (NC3, NC4 there), ``(None, None)`` elsewhere."""
        return (self.W, self.b) if name == self.penultimate else (None, None)


class PassSink:
    """Hook sink of one forward pass; :func:`forward_pass` sets the labels ``y``, the sample offset ``start`` and
    the ``batch`` in flight and hands the batch's network outputs to :meth:`after_batch`."""

    y: torch.Tensor
    start: int = 0
    batch: Any = None

    def __call__(self, name: str, f: torch.Tensor) -> None:
        raise NotImplementedError

    def after_batch(self, out: torch.Tensor) -> None:
        """Called once the batch's hooks have run, with its outputs ``(n, K)``."""


Batches = Callable[[], Iterable[tuple[Any, torch.Tensor]]]


def tensor_batches(x: torch.Tensor, y: torch.Tensor, batch_size: int) -> Batches:
    """A re-iterable pass over ``(x, y)`` in row batches of ``batch_size`` (the form :func:`forward_pass` takes)."""

    def batches() -> Iterable[tuple[torch.Tensor, torch.Tensor]]:
        for start in range(0, int(y.shape[0]), batch_size):
            yield x[start : start + batch_size], y[start : start + batch_size]

    return batches


class _Targets:
    """Hook sink that maps each layer's raw output through ``targets_fn`` before the pass's sink sees it (the
    labels of the mapped rows replace the batch's for that call)."""

    def __init__(self, sink: PassSink, fn: TargetsFn) -> None:
        self.sink, self.fn = sink, fn

    def __call__(self, name: str, f: torch.Tensor) -> None:
        feats, labels = self.fn(f, self.sink.batch)
        held = self.sink.y
        self.sink.y = labels.to(feats.device)
        try:
            self.sink(name, feats.reshape(feats.shape[0], -1))
        finally:
            self.sink.y = held


def forward_pass(model: nn.Module, batches: Batches, plan: MeasurePlan, sink: PassSink) -> None:
    """One eval-mode pass over ``batches()`` (pairs ``(inputs, labels)``), ``sink`` hooked on the measured layers
    (through ``plan.targets_fn`` when set)."""
    targets = plan.targets_fn
    hook = sink if targets is None else _Targets(sink, targets)
    with eval_mode(model), FeatureHooks(model, plan.layers, sink=hook, inputs=plan.inputs, flatten=targets is None):
        start = 0
        for x, y in batches():
            sink.y, sink.start, sink.batch = y, start, (x, y)
            sink.after_batch(plan.call(model, x))
            start += int(y.shape[0])
            if plan.advance is not None:
                plan.advance(int(y.shape[0]))


class StatsPass(PassSink):
    """Pass 1: ``ClassStats`` per layer, the network's loss and error, and (cosine heads) the statistics of the
    normalised penultimate features. A layer's batch goes into the feature cache while it fits (its statistics
    are then built in one update from the whole buffer by :meth:`finish`), else straight into its statistics.

    ``y``: the split's labels ``(N,)`` when known in advance (enables the cache), ``None`` for a pass over an
    iterable of batches (streamed). Counters for the error and loss: ``wrong``, ``scored`` (samples whose
    outputs were logits), ``loss_sum``, ``seen``; all plain sums, so ranks of a distributed pass add them.
    """

    def __init__(
        self,
        plan: MeasurePlan,
        y: torch.Tensor | None,
        loss_fn: LossFn | None,
        cache_mb: float,
        unit: ClassStats | None,
    ) -> None:
        self.plan, self.labels, self.loss_fn, self.unit = plan, y, loss_fn, unit
        # None once streaming
        self.cache: FeatureCache | None = None if y is None else FeatureCache(int(y.shape[0]), cache_mb)
        self.features: dict[str, torch.Tensor] | None = None  # the whole split's, after finish() when cached
        self.stats: dict[str, ClassStats] = {}
        self.h: torch.Tensor | None = None  # the penultimate features of the batch in flight (the loss's h)
        self.loss_sum, self.wrong, self.scored, self.seen = 0.0, 0, 0, 0

    def __call__(self, name: str, f: torch.Tensor) -> None:
        if self.cache is None or not self.cache.store(name, f, self.start):
            self.fold(name, f, self.y)
        if name == self.plan.penultimate:
            self.h = f
            if self.unit is not None:
                self.unit.update(F.normalize(f.to(torch.float64), dim=1), self.y)

    def after_batch(self, out: torch.Tensor) -> None:
        n = int(self.y.shape[0])
        self.seen += n
        if isinstance(out, torch.Tensor) and out.ndim == 2 and out.shape[0] == n and self.plan.targets_fn is None:
            self.wrong += int((out.argmax(dim=1) != self.y).sum())
            self.scored += n
        if self.loss_fn is not None:
            self.loss_sum += float(self.loss_fn(out, self.y, out if self.h is None else self.h)) * n
        if self.cache is not None and self.cache.overflowed:  # too large to keep: stream from here on
            assert self.labels is not None
            for name, f, y in self.cache.drain(self.labels):
                self.fold(name, f, y)
            self.cache = None

    def fold(self, name: str, f: torch.Tensor, y: torch.Tensor) -> None:
        s = self.stats.get(name)
        if s is None:
            s = self.stats[name] = ClassStats(self.plan.num_classes, int(f.shape[1]), track=self.plan.track(name))
        s.update(f, y)

    def finish(self) -> None:
        if self.cache is not None:
            assert self.labels is not None
            self.features = self.cache.complete()
            for name, f in self.features.items():
                self.fold(name, f, self.labels)
        missing = [n for n in self.plan.layers if n not in self.stats]
        if missing:
            raise RuntimeError(f"layers {missing} produced no output during the forward pass (not on its path?)")

    @property
    def error(self) -> float:
        return self.wrong / self.scored if self.scored else math.nan

    @property
    def loss(self) -> float:
        return self.loss_sum / self.seen if (self.seen and self.loss_fn is not None) else math.nan


class _NCCPass(PassSink):
    """Pass 2 without cached features: each layer's batch into its NCC accumulator."""

    def __init__(self, ncc: Mapping[str, NCCAccumulator]) -> None:
        self.ncc = ncc

    def __call__(self, name: str, f: torch.Tensor) -> None:
        acc = self.ncc.get(name)
        if acc is not None:
            acc.update(f, self.y)


def ncc_pass(
    model: nn.Module,
    batches: Batches,
    y: torch.Tensor | None,
    plan: MeasurePlan,
    reference: Mapping[str, ClassStats],
    features: Mapping[str, torch.Tensor] | None,
    msgs: list[str],
) -> dict[str, NCCAccumulator]:
    """Pass 2: NCC against the reference means, from the cached ``features`` of the split with labels ``y`` when
    there are some (one update per layer), else by a second forward pass over ``batches()``; layers whose
    reference has an empty class are skipped (with a message in ``msgs``)."""
    ncc: dict[str, NCCAccumulator] = {}
    for name in plan.layers:
        if name not in reference or reference[name].empty_classes.size:
            msgs.append(f"{name}: no NCC pass (a reference class has no sample)")
            continue
        W, b = plan.classifier_at(name)
        ncc[name] = NCCAccumulator(reference[name], W=W, b=b)
    if ncc and features is not None:
        assert y is not None
        for name, acc in ncc.items():
            acc.update(features[name], y)
        if plan.advance is not None:
            plan.advance(int(y.shape[0]))
    elif ncc:
        forward_pass(model, batches, plan, _NCCPass(ncc))
    return ncc


def layer_rows(
    plan: MeasurePlan,
    name: str,
    stats: ClassStats,
    ncc: NCCAccumulator | None,
    unit: ClassStats | None,
    conventions: Mapping[str, Any] | None,
    msgs: list[str],
) -> list[tuple[str, str, float]]:
    """The report step of one layer: ``collapse_report`` of ``stats`` (with the plan's classifier and the NCC
    counts ``ncc``; plus ``gnc1`` from ``unit`` at a cosine head's penultimate layer) as ``(layer, metric,
    value)`` rows; its warnings, or why it failed, go to ``msgs``."""
    pen = name == plan.penultimate
    W, b = plan.classifier_at(name)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            # keep_memo at the penultimate layer: the caller may read more of its statistics (the trainer's MSE
            # decomposition reuses Sigma_W and Sigma_T; it clears the caches when done)
            rep = collapse_report(stats, W=W, b=b, ncc=ncc, conventions=conventions, keep_memo=pen)
            if pen and unit is not None:
                rep["gnc1"] = gnc1(unit, check=False)
        except ValueError as err:  # e.g. an empty class in a small held-out subset
            msgs.append(f"{name}: metrics skipped ({err})")
            rep = {}
    msgs += [f"{name}: {w.message}" for w in caught]
    return [(name, k, float(v)) for k, v in rep.items()]


@torch.no_grad()
def measure_split(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    num_classes: int,
    *,
    layers: LayerSpec = None,
    penultimate: str | None = None,
    loss_fn: LossFn | None = None,
    reference: Mapping[str, ClassStats] | None = None,
    full_layers: str = "penultimate",
    conventions: Mapping[str, Any] | None = None,
    batch_size: int = 256,
    cache_mb: float = 256.0,
    advance: Callable[[int], None] | None = None,
    blas_threads: int | None = 1,
    geodesic: bool = False,
    distributed: bool = False,
) -> SplitMeasurement:
    """Measure ``model`` on inputs ``x (N, ...)`` with labels ``y (N,)`` (see the module docstring).

    ``layers``: as :func:`nclab.train.hooks.resolve_layers` (default: the model's ``measured_layers()``);
    ``penultimate``: the layer whose output feeds the classifier (default: the model's ``penultimate_name``,
    else the last layer); the classifier is read from ``model.head.weight`` / ``.bias`` when present
    (:func:`find_classifier`). ``advance(n)`` is called after each batch of each pass (progress bars).
    ``blas_threads``: numpy/scipy BLAS threads while measuring (``None``: unchanged). One by default: the
    measurement's products and d x d decompositions are small, and between torch operations a multi-threaded
    BLAS call waits for cores that torch's OpenMP workers still spin on (measured on 2 cores: a d = 128 report
    30 ms with 2 threads, 3-4 ms with one; 1.3-1.6x faster with one even at d = 512-1,024; ``nclab._threads``).
    ``geodesic``: also log the [Wang et al. 2024] geodesic model over the leading measured layers of equal dimension
    (``layer0 .. layerL`` of ``fc_resnet`` / ``pfc_resnet``): per layer ``relative_depth`` and the straight line's
    ``geodesic_pfc1/2/3`` at that depth (measured end), and ``geodesic_s01``, ``straightness_index`` as network
    rows (:func:`nclab.theory.geodesic.geodesic_profile`, from the cached features; skipped with a warning when
    they exceed ``cache_mb`` or fewer than two layers share a dimension).
    ``distributed``: ``x, y`` are this rank's shard of the split (no sample in two shards,
    :func:`nclab.train.distributed.eval_shard`); every rank calls with its shard, the statistics, NCC counts,
    loss and error sums are all-reduced over the default process group (exactly: :mod:`nclab.stats`), and every
    rank returns the whole split's rows. Not with ``geodesic`` (it needs every sample's features in one place).
    """
    if distributed and geodesic:
        raise ValueError("geodesic=True needs the whole split's features in one process: not with distributed=True")
    layer_map = resolve_layers(model, layers)
    if penultimate is None:
        penultimate = getattr(model, "penultimate_name", None) or next(reversed(layer_map))
    if penultimate not in layer_map:
        raise KeyError(f"penultimate layer {penultimate!r} is not among the measured layers {list(layer_map)}")
    W, b = find_classifier(model)
    plan = MeasurePlan(layer_map, penultimate, num_classes, W, b, full_layers, batch_size, advance, blas_threads)
    return _measure(model, x, y, plan, loss_fn, reference, conventions, cache_mb, geodesic, distributed)


def _measure(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    plan: MeasurePlan,
    loss_fn: LossFn | None,
    reference: Mapping[str, ClassStats] | None,
    conventions: Mapping[str, Any] | None,
    cache_mb: float,
    geodesic: bool,
    distributed: bool = False,
) -> SplitMeasurement:
    with blas_threads(plan.threads):
        cosine = bool(getattr(getattr(model, "head", None), "cosine", False))
        unit = ClassStats(plan.num_classes, plan.W.shape[1], track="full") if (cosine and plan.W is not None) else None
        p1 = StatsPass(plan, y, loss_fn, cache_mb, unit)
        batches = tensor_batches(x, y, plan.batch_size)
        forward_pass(model, batches, plan, p1)
        p1.finish()
        if distributed:
            _all_reduce_pass(p1)
        msgs: list[str] = []
        ncc = ncc_pass(model, batches, y, plan, p1.stats if reference is None else reference, p1.features, msgs)
        if distributed:
            for acc in ncc.values():  # every rank skipped the same layers: the reference is the same everywhere
                acc.all_reduce()
        rows = [(OUTPUT_LAYER, "error", p1.error)]
        if loss_fn is not None:
            rows.append((OUTPUT_LAYER, "loss", p1.loss))
        for name in plan.layers:
            rows += layer_rows(plan, name, p1.stats[name], ncc.get(name), unit, conventions, msgs)
        if geodesic:
            rows += _geodesic_rows(plan.layers, p1.features, y, plan.num_classes, msgs)
    return SplitMeasurement(
        rows=rows,
        stats=OrderedDict((n, p1.stats[n]) for n in plan.layers),
        error=p1.error,
        loss=p1.loss,
        warnings=list(dict.fromkeys(msgs)),
    )


def _all_reduce_pass(p1: StatsPass) -> None:
    """Pass 1 of every rank summed: the statistics per layer (in layer order, the same on every rank), the
    normalised-feature statistics of a cosine head, and the loss and error counters."""
    for name in p1.plan.layers:
        p1.stats[name].all_reduce()
    if p1.unit is not None:
        p1.unit.all_reduce()
    p1.loss_sum, p1.wrong, p1.scored, p1.seen = sum_all(p1.loss_sum, p1.wrong, p1.scored, p1.seen)
