"""The passes of a measurement: a forward pass with hooks on the measured layers, and the sinks it feeds.

:func:`forward_pass` runs the model in eval mode over ``batches()`` and hands each measured layer's features of
each batch, with the :class:`Batch` in flight, to a :class:`PassSink`. Between the hooks and the sink it checks
what a sink cannot see: the batch's labels (1-D class indices, before the model runs), that each layer's output
has the batch dimension first, and that each hooked module runs once per forward pass.

Pass 1 (:class:`StatsPass`): ``ClassStats`` per layer -- ``track="full"`` (d x d, for NC1, VCI, ranks, probe
loss) or ``"light"`` (O(K d), enough for the per-layer PFC metrics) as :meth:`MeasurePlan.track` says; the
network's loss and error (:class:`~nclab.measure.PassCounts`); for cosine heads also full statistics of the
L2-normalised penultimate features (GNC1, [Jiang et al. 2024]). Pass 2 (:func:`ncc_pass`): ``NCCAccumulator``
per layer against the class means of a reference -- the training split's for a held-out split
(docs/conventions.md, "NC4 split and means"), the split's own otherwise; the classifier ``W, b`` enter at the
penultimate layer only (NC4).

Pass 1 keeps the features for pass 2 while they fit in ``cache_mb``: with the split's size known,
:class:`FeatureCache` preallocates one ``(N, d)`` buffer per layer and the statistics are built in one update
after the pass; over an iterable of unknown size, :class:`KeepingStatsPass` keeps copies of the batches. Either
way, once the features outgrow the budget the pass streams from there on and pass 2 runs the model again -- or,
for a one-shot iterator that cannot be read twice, refuses at once.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from nclab.measure.batches import Batches, check_label_batch
from nclab.measure.counts import PassCounts
from nclab.measure.hooks import FeatureHooks, eval_mode
from nclab.measure.plan import MeasurePlan
from nclab.metrics.classes import select_classes
from nclab.stats import ClassStats, NCCAccumulator
from nclab.stats.class_stats import check_label_range

__all__ = [
    "Batch",
    "FeatureCache",
    "KeepingStatsPass",
    "NCCPass",
    "PassSink",
    "PresentNCC",
    "StatsPass",
    "autocast",
    "forward_pass",
    "ncc_pass",
    "unit_stats",
]

#: Features of a layer with their labels: ``(features (n, d), labels (n,))``.
Labelled = tuple[torch.Tensor, torch.Tensor]


@dataclass(frozen=True)
class Batch:
    """The batch in flight: the model's ``inputs``, the ``labels (n,)`` of its samples (of a layer's mapped
    samples under ``targets_fn``), and ``start``, the offset of its first sample in the pass.

    Parameters
    ----------
    inputs : Any
        The model's inputs for this batch (a tensor ``(n, ...)`` or a mapping of keyword inputs).
    labels : torch.Tensor, shape (n,)
        Class indices of the batch's samples.
    start : int, default=0
        Offset of the batch's first sample in the pass.

    Examples
    --------
    >>> b = Batch(torch.zeros(4, 2), torch.tensor([0, 1, 0, 1]), start=8)
    >>> b.size, b.start
    (4, 8)
    """

    inputs: Any
    labels: torch.Tensor
    start: int = 0

    @property
    def size(self) -> int:
        return int(self.labels.shape[0])


class PassSink:
    """What a :func:`forward_pass` feeds: ``sink(name, features (n, d), batch)`` for each measured layer of each
    batch, then :meth:`after_batch` with the batch's network outputs.

    See Also
    --------
    StatsPass : pass 1, the class statistics and the network's loss and error.

    Examples
    --------
    >>> class Rows(PassSink):
    ...     def __init__(self):
    ...         self.rows = []
    ...     def __call__(self, name, f, batch):
    ...         self.rows.append((name, batch.start, tuple(f.shape)))
    >>> net = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 3))
    >>> plan = MeasurePlan({"1": net[1]}, "1", 3)
    >>> x, y = torch.randn(5, 4), torch.tensor([0, 1, 2, 0, 1])
    >>> sink = Rows()
    >>> forward_pass(net, lambda: [(x[:3], y[:3]), (x[3:], y[3:])], plan, sink)
    >>> sink.rows
    [('1', 0, (3, 6)), ('1', 3, (2, 6))]
    """

    def __call__(self, name: str, f: torch.Tensor, batch: Batch) -> None:
        raise NotImplementedError

    def after_batch(self, out: Any, batch: Batch) -> None:
        """Called once the batch's hooks have run, with its outputs (logits ``(n, K)`` for a classifier)."""


class FeatureCache:
    """Each measured layer's features of one split, kept while they fit in a memory budget.

    A layer's batches are written in order into one preallocated ``(N, d)`` buffer (no per-batch copies to
    concatenate later). A layer whose buffer would exceed what is left of the budget gets none and sets
    :attr:`overflowed`; the caller then takes the rows cached so far with :meth:`drain` and streams from there on.

    Parameters
    ----------
    N : int
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

    def __init__(self, N: int, budget_mb: float) -> None:
        self.N = int(N)
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
            need = self.N * f.shape[1] * f.element_size()
            if need <= self._bytes_left:
                buf = torch.empty((self.N, f.shape[1]), dtype=f.dtype, device=f.device)
                self._buffers[name] = buf
                self._bytes_left -= need
            else:
                self.overflowed = True
            self._filled[name], self._first_row[name] = 0, start
        if buf is None:
            return False
        n, done = int(f.shape[0]), self._filled[name]
        if done + n > self.N:
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
        short = [n for n in self._buffers if self._filled[n] != self.N or self._first_row[n] != 0]
        if short:
            raise RuntimeError(f"layers {short} did not produce one row per sample during the forward pass")
        return self._buffers


class _Router:
    """Between the hooks and a pass's sink: holds the batch in flight, checks each layer's output against it,
    and hands the sink ``(n, d)`` features -- flattened, or mapped by ``targets_fn`` (whose labels then replace
    the batch's for that layer)."""

    def __init__(self, plan: MeasurePlan, sink: PassSink) -> None:
        self.plan, self.sink = plan, sink
        self.batch: Batch | None = None
        self.calls: Counter[str] = Counter()  # hook calls per layer in the batch in flight
        self.batches = 0

    def begin(self, batch: Batch) -> None:
        self.batch = batch
        self.calls.clear()

    def __call__(self, name: str, out: torch.Tensor) -> None:
        self.calls[name] += 1
        if self.calls[name] > 1:  # a module run twice in one forward pass: reported by end()
            return
        batch, targets = self.batch, self.plan.targets_fn
        assert batch is not None
        if targets is not None:
            feats, labels = targets(out, (batch.inputs, batch.labels))
            self.sink(name, feats.reshape(feats.shape[0], -1), replace(batch, labels=labels.to(feats.device)))
            return
        if out.ndim == 0 or out.shape[0] != batch.size:
            raise ValueError(
                f"layer {name!r} output has shape {tuple(out.shape)}, but the batch has {batch.size} samples: the "
                f"batch dimension must come first (batch_first=True for an RNN, or select={{{name!r}: fn}} returning "
                "the output batch first), or targets_fn must map it to one row per sample"
            )
        self.sink(name, out.flatten(1) if out.ndim > 1 else out[:, None], batch)

    def end(self) -> None:
        self.batches += 1
        for name, n in self.calls.items():
            if n > 1:
                module = type(self.plan.layers[name]).__name__
                raise ValueError(
                    f"layer {name!r} ({module}) ran {n} times in one forward pass (a module applied more than "
                    "once, e.g. weight-tied): its features are not one row per sample; measure a module that runs "
                    "once per forward pass (e.g. the block's own output, or one of its submodules)"
                )


def forward_pass(model: nn.Module, batches: Batches, plan: MeasurePlan, sink: PassSink) -> None:
    """One eval-mode pass over ``batches()`` (pairs ``(inputs, labels)``), ``sink`` hooked on the measured layers
    (see the module docstring; through ``plan.targets_fn`` when set).

    Parameters
    ----------
    model : torch.nn.Module
        The network, run in eval mode without changing its modes for good (:func:`~nclab.measure.eval_mode`).
    batches : Batches
        A re-iterable pass: ``batches()`` yields ``(inputs, labels (n,))`` pairs.
    plan : MeasurePlan
        The layers, their selectors and inputs, ``K``, ``call``, ``autocast_dtype``, ``targets_fn`` and
        ``advance``.
    sink : PassSink
        Receives each measured layer's features ``(n, d)`` of each batch, then the batch's outputs.

    Raises
    ------
    ValueError
        The data yielded no batch; labels that are not 1-D class indices (one-hot rows named as such); a
        layer output whose first dimension is not the batch; a hooked module run more than once per forward.
    TypeError
        A layer returning a tuple without ``plan.select`` for it (:mod:`nclab.measure.hooks`).

    See Also
    --------
    PassSink : what the pass feeds.

    Examples
    --------
    >>> net = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 3))
    >>> plan = MeasurePlan({"0": net[0], "1": net[1]}, "1", 3)
    >>> x, y = torch.randn(5, 4), torch.tensor([0, 1, 2, 0, 1])
    >>> p1 = StatsPass(plan, None, None)
    >>> forward_pass(net, lambda: [(x, y)], plan, p1)
    >>> p1.stats["0"].N, p1.stats["1"].N, p1.counts.scored
    (5, 5, 5)
    >>> forward_pass(net, lambda: [], plan, p1)
    Traceback (most recent call last):
        ...
    ValueError: the data yielded no batch: nothing to measure (an empty loader, or an iterator used up)
    """
    route = _Router(plan, sink)
    hooks = FeatureHooks(model, plan.layers, sink=route, inputs=plan.inputs, flatten=False, select=plan.select)
    precision = autocast(model, plan.autocast_dtype)
    with eval_mode(model), hooks:
        start = 0
        for x, y in batches():
            check_label_batch(y, plan.K)
            batch = Batch(x, y, start)
            route.begin(batch)
            with precision:  # the hooks run inside: the features come in the autocast dtype
                out = plan.call(model, x)
            route.end()
            sink.after_batch(out, batch)
            start += batch.size
            if plan.advance is not None:
                plan.advance(batch.size)
    if not route.batches:
        raise ValueError("the data yielded no batch: nothing to measure (an empty loader, or an iterator used up)")


def autocast(model: nn.Module, dtype: torch.dtype | None) -> contextlib.AbstractContextManager[Any]:
    """``torch.autocast`` to ``dtype`` on the device of ``model``'s first parameter (the CPU for a model without
    parameters), re-enterable; a no-op context for ``dtype=None``.

    Parameters
    ----------
    model : torch.nn.Module
        The network; its first parameter's device type is autocast's.
    dtype : torch.dtype or None
        ``torch.bfloat16`` or ``torch.float16``; ``None`` for the model's own precision.

    Returns
    -------
    contextlib.AbstractContextManager
        ``torch.autocast(device, dtype=dtype)``, or ``contextlib.nullcontext()`` when ``dtype`` is ``None``.

    Examples
    --------
    >>> net = nn.Linear(4, 3)
    >>> with autocast(net, torch.bfloat16):
    ...     low = net(torch.zeros(2, 4))
    >>> with autocast(net, None):
    ...     own = net(torch.zeros(2, 4))
    >>> low.dtype, own.dtype
    (torch.bfloat16, torch.float32)
    """
    if dtype is None:
        return contextlib.nullcontext()
    p = next(model.parameters(), None)
    device = "cpu" if p is None else p.device.type
    return torch.autocast(device, dtype=dtype)


def unit_stats(plan: MeasurePlan) -> ClassStats | None:
    """Full statistics of the unit-normalised penultimate features for a cosine classifier (``gnc1``,
    [Jiang et al. 2024]); ``None`` otherwise."""
    if not plan.cosine or plan.W is None:
        return None
    return ClassStats(plan.K, int(plan.W.shape[1]), track="full")


class StatsPass(PassSink):
    """Pass 1: ``ClassStats`` per layer, the network's loss and error (:attr:`counts`), and (cosine heads,
    ``unit``) the statistics of the normalised penultimate features. A layer's batch goes into the feature cache
    while it fits (its statistics are then built in one update from the whole buffer by :meth:`finish`), else
    straight into its statistics.

    ``y``: the split's labels ``(N,)`` when known in advance (enables the :class:`FeatureCache`), ``None`` for
    a pass over an iterable of batches (streamed; :class:`KeepingStatsPass` keeps them instead). ``device``:
    where the counts live (the model's). After :meth:`finish`, :attr:`cached` holds each layer's features of the
    whole split with their labels when they were kept, for pass 2.

    Parameters
    ----------
    plan : MeasurePlan
        The layers, ``K``, which layers are tracked in full, ``cache_mb`` and ``loss_fn``.
    y : torch.Tensor, shape (N,), or None
        The split's labels in pass order when known in advance; ``None`` streams.
    unit : ClassStats or None
        Statistics of the unit-normalised penultimate features (a cosine head, :func:`unit_stats`), or ``None``.
    device : torch.device, optional
        Where the loss and error counts live (default: the first batch's labels' device).

    See Also
    --------
    KeepingStatsPass : pass 1 over batches of unknown total size.
    ncc_pass : pass 2.

    Examples
    --------
    >>> net = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 3))
    >>> plan = MeasurePlan({"1": net[1]}, "1", 3)
    >>> x, y = torch.randn(9, 4), torch.arange(9) % 3
    >>> p1 = StatsPass(plan, y, None)
    >>> forward_pass(net, lambda: [(x[:5], y[:5]), (x[5:], y[5:])], plan, p1)
    >>> p1.finish()
    >>> p1.stats["1"].N, p1.counts.seen, tuple(p1.cached["1"][0].shape)
    (9, 9, (9, 6))
    """

    def __init__(
        self, plan: MeasurePlan, y: torch.Tensor | None, unit: ClassStats | None, device: torch.device | None = None
    ) -> None:
        self.plan, self.labels, self.unit = plan, y, unit
        # None once streaming
        self.cache: FeatureCache | None = None if y is None else FeatureCache(int(y.shape[0]), plan.cache_mb)
        self.cached: dict[str, Labelled] | None = None
        self.stats: dict[str, ClassStats] = {}
        self.counts = PassCounts(device)
        self._h: torch.Tensor | None = None  # the penultimate features of the batch in flight (the loss's h)

    def __call__(self, name: str, f: torch.Tensor, batch: Batch) -> None:
        if self.cache is None or not self.cache.store(name, f, batch.start):
            self.fold(name, f, batch.labels)
        if name == self.plan.penultimate:
            self._h = f
            if self.unit is not None:
                self.unit.update(F.normalize(f.to(torch.float64), dim=1), batch.labels)

    def after_batch(self, out: Any, batch: Batch) -> None:
        y, loss_fn = batch.labels, self.plan.loss_fn
        loss = None if loss_fn is None else loss_fn(out, y, out if self._h is None else self._h)
        self.counts.update(out if self.plan.targets_fn is None else None, y, loss)
        self._h = None
        if self.cache is not None and self.cache.overflowed:  # too large to keep: stream from here on
            assert self.labels is not None
            for name, f, labels in self.cache.drain(self.labels):
                self.fold(name, f, labels)
            self.cache = None

    def fold(self, name: str, f: torch.Tensor, y: torch.Tensor) -> None:
        s = self.stats.get(name)
        if s is None:
            d = int(f.shape[1])
            s = self.stats[name] = ClassStats(
                self.plan.K, d, track=self.plan.track(name, d), compute_dtype=self.plan.compute_dtype
            )
        s.update(f, y)

    def finish(self) -> None:
        """Build the statistics of the cached layers; check that every layer produced output."""
        if self.cache is not None:
            assert self.labels is not None
            self.cached = {}
            for name, f in self.cache.complete().items():
                self.fold(name, f, self.labels)
                self.cached[name] = (f, self.labels)
        missing = [n for n in self.plan.layers if n not in self.stats]
        if missing:
            raise RuntimeError(f"layers {missing} produced no output during the forward pass (not on its path?)")

    def all_reduce(self) -> None:
        """Sum pass 1 over the ranks: the statistics per layer (in layer order, the same on every rank), the
        normalised-feature statistics of a cosine head, and the counts."""
        for name in self.plan.layers:
            self.stats[name].all_reduce()
        if self.unit is not None:
            self.unit.all_reduce()
        self.counts.all_reduce()

    @property
    def error(self) -> float:
        return self.counts.error

    @property
    def loss(self) -> float:
        return self.counts.loss if self.plan.loss_fn is not None else float("nan")


class KeepingStatsPass(StatsPass):
    """Pass 1 over an iterable of batches of unknown total size, with the feature cache of :class:`StatsPass`:
    each layer's features (and labels) are kept while they fit in ``plan.cache_mb``, then :meth:`finish` builds
    the statistics in one update per layer and the NCC pass reads the kept features instead of running the model
    again. A batch past the budget folds what was kept and streams from there on (pass 2 then runs the model) --
    unless the data is ``one_shot`` (an iterator: it cannot be read again), which is then refused at once, before
    more memory goes. Copies, not references: an in-place op after the hooked module (``ReLU(inplace=True)``)
    would change a kept output.

    Parameters
    ----------
    plan : MeasurePlan
        As for :class:`StatsPass`; ``plan.cache_mb`` bounds the kept copies (0 keeps none).
    unit : ClassStats or None
        Statistics of the unit-normalised penultimate features (a cosine head), or ``None``.
    device : torch.device, optional
        Where the loss and error counts live.
    one_shot : bool, default=False
        The data can be read once only: features past the budget raise ``ValueError`` instead of streaming.

    Examples
    --------
    >>> net = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 3))
    >>> x, y = torch.randn(9, 4), torch.arange(9) % 3
    >>> kept = KeepingStatsPass(MeasurePlan({"1": net[1]}, "1", 3), None)
    >>> streamed = KeepingStatsPass(MeasurePlan({"1": net[1]}, "1", 3, cache_mb=0), None)
    >>> for p1 in (kept, streamed):
    ...     forward_pass(net, lambda: [(x[:5], y[:5]), (x[5:], y[5:])], p1.plan, p1)
    ...     p1.finish()
    >>> kept.stats["1"].N, tuple(kept.cached["1"][0].shape), streamed.stats["1"].N, streamed.cached
    (9, (9, 6), 9, None)
    """

    def __init__(
        self, plan: MeasurePlan, unit: ClassStats | None, device: torch.device | None = None, *, one_shot: bool = False
    ) -> None:
        super().__init__(plan, None, unit, device)
        self.one_shot = one_shot
        self._left = plan.cache_mb * 2**20
        self._kept: dict[str, list[Labelled]] | None = {} if (plan.cache_mb > 0 or one_shot) else None

    def fold(self, name: str, f: torch.Tensor, y: torch.Tensor) -> None:
        if self._kept is not None:
            self._left -= f.numel() * f.element_size()
            if self._left >= 0:
                self._kept.setdefault(name, []).append((f.detach().clone(), y))
                return
            if self.one_shot:
                self._refuse()
            self._spill()
        super().fold(name, f, y)

    def _refuse(self) -> None:
        seen = self.counts.seen
        where = f"after {seen} samples" if seen else "in its first batch"
        self._kept = None  # the copies go now, not when the caller lets go of the error
        raise ValueError(
            "the data is a one-shot iterator (a generator, iter(...), itertools.cycle) and its features outgrew "
            f"cache_mb={self.plan.cache_mb:g} MiB {where}: the NCC pass would need to read it a "
            "second time. Pass a re-iterable (a DataLoader, a list of batches) or raise cache_mb; an endless "
            "iterator (itertools.cycle) cannot be measured"
        )

    def _spill(self) -> None:
        assert self._kept is not None
        kept, self._kept = self._kept, None
        for name, parts in kept.items():
            super().fold(name, torch.cat([f for f, _ in parts]), torch.cat([y for _, y in parts]))

    def finish(self) -> None:
        if self._kept:
            self.cached = {}
            for name, parts in self._kept.items():
                f, y = torch.cat([f for f, _ in parts]), torch.cat([y for _, y in parts])
                super().fold(name, f, y)
                self.cached[name] = (f, y)
        super().finish()


class NCCPass(PassSink):
    """Pass 2 without cached features: each layer's batch into its NCC accumulator."""

    def __init__(self, ncc: Mapping[str, NCCAccumulator]) -> None:
        self.ncc = ncc

    def __call__(self, name: str, f: torch.Tensor, batch: Batch) -> None:
        acc = self.ncc.get(name)
        if acc is not None:
            acc.update(f, batch.labels)


class PresentNCC:
    """An :class:`~nclab.stats.NCCAccumulator` over the kept classes ``keep`` of K (``classes="present"``): each
    batch's labels are mapped to 0..K'-1 and the samples of the other classes left out."""

    def __init__(self, acc: NCCAccumulator, keep: Any, K: int) -> None:
        self.acc = acc
        self._map = torch.full((K,), -1, dtype=torch.int64)
        self._map[torch.as_tensor(keep, dtype=torch.int64)] = torch.arange(len(keep), dtype=torch.int64)

    def update(self, features: Any, labels: Any) -> PresentNCC:
        y = torch.as_tensor(labels).long()
        if y.numel():
            check_label_range(y, int(self._map.shape[0]))
        new = self._map.to(y.device)[y]
        kept = new >= 0
        x = torch.as_tensor(features)
        self.acc.update(x[kept.to(x.device)], new[kept])
        return self

    def all_reduce(self, group: Any = None) -> PresentNCC:
        self.acc.all_reduce(group)
        return self

    def compute(self) -> dict[str, Any]:
        return self.acc.compute()


def ncc_pass(
    model: nn.Module,
    batches: Batches,
    plan: MeasurePlan,
    reference: Mapping[str, ClassStats],
    cached: Mapping[str, Labelled] | None,
    msgs: list[str],
) -> dict[str, Any]:
    """Pass 2: NCC against the reference means, from pass 1's ``cached`` features with their labels when there
    are some (one update per layer), else by a second forward pass over ``batches()``; layers whose reference has
    an empty class are skipped (with a message in ``msgs``).

    Parameters
    ----------
    model : torch.nn.Module
        The network (run again only when there are no cached features).
    batches : Batches
        The re-iterable pass over ``(inputs, labels)``.
    plan : MeasurePlan
        The layers; the classifier ``W (K, d)``, ``b (K,)`` enters at ``plan.penultimate`` only (NC4).
    reference : Mapping[str, ClassStats]
        Per layer, the statistics whose class means NCC measures against (the training split's for a held-out
        split, else pass 1's own).
    cached : Mapping[str, tuple of torch.Tensor] or None
        Pass 1's kept ``(features (N, d), labels (N,))`` per layer (:attr:`StatsPass.cached`), or ``None``.
    msgs : list of str
        Receives a message for each skipped layer.

    Returns
    -------
    dict of str to NCCAccumulator
        The counts per measured layer; a layer whose reference has an empty class is absent.

    Examples
    --------
    >>> net = nn.Sequential(nn.Identity(), nn.Linear(3, 3))
    >>> plan = MeasurePlan({"0": net[0]}, "0", 3)
    >>> y = torch.arange(6) % 3
    >>> x = torch.eye(3)[y]  # every sample at its class mean
    >>> p1 = StatsPass(plan, y, None)
    >>> forward_pass(net, lambda: [(x, y)], plan, p1)
    >>> p1.finish()
    >>> msgs = []
    >>> ncc = ncc_pass(net, lambda: [(x, y)], plan, p1.stats, p1.cached, msgs)
    >>> ncc["0"].compute()["ncc_accuracy"], msgs
    (1.0, [])
    """
    ncc: dict[str, Any] = {}
    for name in plan.layers:
        if name not in reference:
            msgs.append(f"{name}: no NCC pass (no reference statistics)")
            continue
        W, b = plan.classifier_at(name)
        if plan.classes == "present":
            try:
                ref, W, b, keep = select_classes(reference[name], W, b, classes="present", min_count=plan.min_count)
            except ValueError as err:
                msgs.append(f"{name}: no NCC pass ({err})")
                continue
            assert isinstance(ref, ClassStats)
            acc = NCCAccumulator(ref, W=W, b=b)
            ncc[name] = acc if keep.size == plan.K else PresentNCC(acc, keep, plan.K)
            continue
        if reference[name].empty_classes.size:
            msgs.append(f"{name}: no NCC pass (a reference class has no sample; classes='present' measures the rest)")
            continue
        ncc[name] = NCCAccumulator(reference[name], W=W, b=b)
    if ncc and cached is not None:
        for name, acc in ncc.items():
            acc.update(*cached[name])
        if plan.advance is not None:
            plan.advance(int(next(iter(cached.values()))[1].shape[0]))
    elif ncc:
        forward_pass(model, batches, plan, NCCPass(ncc))
    return ncc
