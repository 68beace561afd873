"""Collapse measured inside any training loop: :class:`CollapseMonitor`.

The monitor wraps a model, finds its classifier (:func:`nclab.measure.find_classifier`), hooks the layers to
measure, and on each call of :meth:`CollapseMonitor.measure` runs the two streamed passes of
:mod:`nclab.measure` over any iterable of batches -- pass 1 the class statistics (``ClassStats``, float64
whatever the model's dtype), pass 2 the NCC counts against the training split's class means, read from a copy of
pass 1's features when they fit in ``cache_mb`` (else by running the model again) -- then
:func:`nclab.metrics.collapse_report` per layer (with ``gnc1`` for a cosine classifier, as the built-in trainer).
The rows go to the monitor's sinks (:mod:`nclab.io.sinks`; the run-directory table by default); the logger sinks
(TensorBoard, W&B, MLflow) also record the monitor's :attr:`~CollapseMonitor.settings` (K, layers, tracks,
classifier, conventions, run identity) as their run's parameters, with the first rows.

Every measured layer gets full statistics (d x d: NC1, VCI, ranks) when it is the penultimate layer or its width d
is at most :data:`~nclab.measure.FULL_TRACK_MAX_DIM` (1,024: a d x d scatter of 8 MiB whose update costs about
the forward pass of one d x d linear layer), and light ones (O(K d)) when it is wider, with a warning at its
first measurement naming the layer, d and ``track={layer: "full"}``; ``track=`` chooses per layer.

A monitor with ``out=`` is a writer of that folder (:class:`nclab.io.rundir.RunDir`): its table sink holds the
folder's lock until :meth:`CollapseMonitor.close`, and the monitor has a run identity, :attr:`CollapseMonitor.identity`
(``NAME-HASH`` of K, the measured layers, the conventions and the shapes of the model's parameters; or
``run_id=``). Pointed at a folder with rows of its own run (a re-run script, a resumed loop, a second monitor of
the same run) it appends to them; the folder of another run, of ``nclab train`` included, is refused with an
error naming the folder and both run ids (``overwrite=True`` starts over there). The same ``(epoch, split)``
measured twice replaces its rows.

A monitor is bound to the model it was built with: its hooks and classifier are that model's modules.
Assigning ``monitor.model`` raises, and so does measuring after a measured module or the classifier was
replaced in the model (e.g. a new head for fine-tuning): build a new monitor then.

Under ``torch.distributed`` each rank passes its own shard; the statistics, the NCC counts and the loss and
error counts are all-reduced (exact: sums of float64 moments re-expressed about a common shift, integer counts),
so every rank holds the same report, and rank 0 alone writes to the sinks.

Token-level collapse of a language model [Wu & Papyan 2024] (classes = next tokens, ``K`` = the vocabulary):
pass ``targets_fn`` (e.g. :func:`next_token_targets`) and ``track="light"`` for a large ``K``.
"""

from __future__ import annotations

import dataclasses
import json
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
from nclab.io.run_table import MetricRow
from nclab.io.rundir import PENULTIMATE, RunIdentity
from nclab.io.sinks import MetricSink, make_sink
from nclab.io.tables import to_frame as to_frame_of
from nclab.measure import (
    FULL_TRACK_MAX_DIM,
    KeepingStatsPass,
    MeasurePlan,
    Schedule,
    TargetsFn,
    check_epoch,
    find_classifier,
    is_distributed,
    iterable_batches,
    rank,
    resolve_layers,
    run_passes,
)
from nclab.measure.batches import Batches, is_one_shot
from nclab.measure.hooks import SelectSpec
from nclab.measure.passes import unit_stats
from nclab.memory import format_bytes
from nclab.metrics import check_conventions
from nclab.metrics.classes import ClassesRule, check_classes
from nclab.stats import ClassStats
from nclab.stats.class_stats import ComputeDtype
from nclab.validation import check_choice, check_int, check_positive

__all__ = ["CLASSIFIER_METRICS", "PENULTIMATE", "CollapseMonitor", "MonitorResult", "next_token_targets"]

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


@dataclass
class MonitorResult:
    """One measurement of :class:`CollapseMonitor`.

    Parameters
    ----------
    epoch : int
        The epoch it labels.
    split : str
        The data split (``"train"``, ``"test"``, ...).
    rows : list of MetricRow
        Typed rows (epoch, split, layer, metric, value).
    reports : dict of str to dict of str to float
        ``{layer: {metric: value}}``.
    stats : dict of str to ClassStats
        The pass-1 statistics per layer.
    warnings : list of str
        Warnings raised while measuring.
    missing : tuple of str
        The classifier metrics that could not be computed (no classifier found), empty when none is missing.

    Examples
    --------
    Penultimate features exactly at the vertices of a simplex ETF, classified by the same ETF: NC1 is 0 and the
    classifier is self-dual.

    >>> import torch
    >>> from torch import nn
    >>> from nclab.geometry import simplex_etf
    >>> from nclab.monitor import CollapseMonitor
    >>> net = nn.Sequential(nn.Identity(), nn.Linear(2, 3, bias=False))
    >>> E = torch.tensor(simplex_etf(3, 2), dtype=torch.float32)
    >>> with torch.no_grad():
    ...     _ = net[1].weight.copy_(E)
    >>> y = torch.arange(12) % 3
    >>> res = CollapseMonitor(net, K=3).measure([(E[y], y)], split="train", epoch=0)
    >>> pen = res.reports["penultimate"]
    >>> res.epoch, res.missing, round(pen["nc1"], 6), round(pen["self_duality"], 6), round(pen["etf_gram_error"], 6)
    (0, (), 0.0, 0.0, 0.0)
    """

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

    def to_frame(self) -> Any:
        """:attr:`rows` as a ``pandas.DataFrame`` (columns epoch, split, layer, metric, value); pandas is
        optional: without it this raises ``ImportError`` naming it."""
        return to_frame_of(self.rows)


def next_token_targets(features: torch.Tensor, batch: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """Token-level samples of a causal language model: hidden state at position ``t`` labelled by token
    ``t + 1``, padding (``attention_mask == 0`` at ``t + 1``) dropped. ``features (B, T, d)``; ``batch`` the
    ``(inputs, labels)`` pair whose inputs hold ``input_ids (B, T)`` and optionally ``attention_mask``.

    Parameters
    ----------
    features : torch.Tensor of shape (B, T, d)
        Hidden states of every position.
    batch : tuple
        The ``(inputs, labels)`` pair; ``inputs`` is a mapping with ``input_ids (B, T)`` (and optionally
        ``attention_mask (B, T)``) or the ``input_ids`` tensor itself.

    Returns
    -------
    h : torch.Tensor of shape (M, d)
        The hidden states of positions ``0..T-2`` whose next token is not padding.
    y : torch.Tensor of shape (M,)
        Their next tokens.

    Examples
    --------
    >>> import torch
    >>> from nclab.monitor import next_token_targets
    >>> h = torch.arange(6.0).reshape(1, 3, 2)  # B = 1, T = 3, d = 2
    >>> inputs = {"input_ids": torch.tensor([[5, 6, 7]]), "attention_mask": torch.tensor([[1, 1, 0]])}
    >>> feats, y = next_token_targets(h, (inputs, None))
    >>> feats.tolist(), y.tolist()  # position 1 is dropped: its next token is padding
    ([[0.0, 1.0]], [6])
    """
    inputs = batch[0]
    ids = inputs["input_ids"] if isinstance(inputs, Mapping) else inputs
    h = features[:, :-1].reshape(-1, features.shape[-1])
    y = ids[:, 1:].reshape(-1).to(h.device)
    mask = inputs.get("attention_mask") if isinstance(inputs, Mapping) else None
    if mask is None:
        return h, y
    keep = mask[:, 1:].reshape(-1).to(h.device).bool()
    return h[keep], y[keep]


class CollapseMonitor:
    """Measure neural collapse of ``model`` inside any training loop.

    Parameters
    ----------
    model : nn.Module
        Any model; float32 or bfloat16 (statistics accumulate in float64 either way). The monitor stays bound
        to it (see the module docstring).
    K : int
        ``K >= 2`` (for token-level collapse: the vocabulary size).
    layers : str or sequence of str, optional
        ``"penultimate"`` (default): the classifier's input (an nclab network's ``penultimate_name``); a list of
        module names (``"penultimate"`` allowed among them); or a regex matched in full against module names.
    classifier : nn.Module, (W, b), str, None or False
        The classifier ``W (K, d)``, ``b (K,)``: a module, a pair of arrays, a module or weight-parameter name,
        ``None`` to find it (:func:`nclab.measure.find_classifier`), ``False`` for none. Without one, NC3 / NC4
        and the other :data:`CLASSIFIER_METRICS` cannot be computed: a ``UserWarning`` names them and each
        result's ``missing`` lists them.
    schedule : Schedule, int, iterable of int or None
        When :meth:`due` is true (:meth:`nclab.measure.Schedule.coerce`; a string, float or bool is refused);
        :meth:`maybe_measure` follows it.
    track : str or mapping, optional
        ``"full"`` (d x d statistics: NC1, VCI, ranks, ...) or ``"light"`` (O(K d): no NC1, VCI or ranks) per
        layer: a mapping ``{layer: track}``, or one value for every layer. A layer not given one is full when it
        is the penultimate layer or its width ``d`` is at most :data:`~nclab.measure.FULL_TRACK_MAX_DIM`
        (1,024), and light otherwise, with a ``UserWarning`` at its first measurement naming the layer, ``d``
        and ``track={layer: "full"}``. :attr:`tracks` says which each layer got. Use ``"light"`` for a large
        ``K`` (a language model's vocabulary).
    select : int, callable or mapping, optional
        For a layer whose output is a tuple (an ``nn.LSTM``, a block returning ``(h, attention)``): which element
        to measure, an index or a callable ``output -> tensor``, per layer (``{"rnn": 0}``) or for every layer.
        Without it such a layer is refused with its elements named (:mod:`nclab.measure.hooks`).
    device : str or torch.device, optional
        Where batches go (default: the device of the model's first parameter).
    sinks : sequence of MetricSink or sink specs, optional
        Default: the run table in ``out`` when ``out`` is given, else none (rows are still returned).
    out : path, optional
        The run directory of the default table sink (and of sink specs given by name): appended to when it holds
        rows of this run, refused when it holds another run (see the module docstring).
    run_id : str, optional
        The run's id in the table (default: :attr:`identity`'s hash); name the same run across model changes.
    overwrite : bool
        Replace the run in ``out`` instead of refusing it.
    targets_fn : callable, optional
        ``targets_fn(features, batch) -> (features (M, d), labels (M,))`` applied to each layer's raw output
        (e.g. :func:`next_token_targets`); with it, no error row is computed.
    loss_fn : callable, optional
        ``loss_fn(logits, y) -> scalar``: adds the network's ``loss`` row.
    classes : {"all", "present"}, default "all"
        The classes measured (:func:`nclab.metrics.select_classes`): ``"all"`` K classes (an empty class leaves
        the layer without metrics, with a warning that names ``classes="present"``), or ``"present"``, those with
        at least ``min_count`` samples in the split measured (its NCC pass against the reference's kept classes;
        the classifier's rows and bias subset with them, so NC3 / NC4 stay). Rows ``K_present`` and
        ``present_min_count`` record what was kept. Use ``"present"`` for a language model's vocabulary.
    min_count : int, optional
        The samples a class needs under ``classes="present"`` (default 1).
    compute_dtype : {"float64", "float32"}, default "float64"
        The statistics' per-batch arithmetic (:class:`~nclab.stats.ClassStats`): ``"float32"`` runs the Gram of
        wide layers as float32 GEMMs (several times faster on a GPU), accumulating in float64 across blocks; the
        error bound is in docs/stats.md.
    cache_mb : float, optional
        Memory (MiB) for a copy of the measured features of pass 1; when they fit, the NCC pass reads them
        instead of running the model again (256 by default, as ``measure.cache_mb`` of the built-in trainer;
        ``0`` always runs the model twice). Data given as a one-shot iterator (a generator) is read once: it is
        measured while its features fit, and refused, naming ``cache_mb``, as soon as they do not.

    Examples
    --------
    >>> torch.manual_seed(0)  # doctest: +ELLIPSIS
    <...>
    >>> net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    >>> x, y = torch.randn(60, 4), torch.arange(60) % 3
    >>> monitor = CollapseMonitor(net, K=3)
    >>> res = monitor.measure([(x[:30], y[:30]), (x[30:], y[30:])], split="train", epoch=0)
    >>> sorted(res.reports), "self_duality" in res.reports["penultimate"]
    (['output', 'penultimate'], True)
    """

    def __init__(
        self,
        model: nn.Module,
        K: int,
        *,
        layers: str | Sequence[str] = PENULTIMATE,
        classifier: Any = None,
        schedule: Schedule | int | Iterable[int] | None = None,
        track: str | Mapping[str, str] | None = None,
        select: SelectSpec = None,
        device: str | torch.device | None = None,
        sinks: Sequence[MetricSink | str | Mapping[str, Any]] | None = None,
        out: str | Path | None = None,
        targets_fn: TargetsFn | None = None,
        loss_fn: Callable[[Any, torch.Tensor], torch.Tensor] | None = None,
        conventions: Mapping[str, Any] | None = None,
        cache_mb: float = 256.0,
        run_id: str | None = None,
        overwrite: bool = False,
        classes: ClassesRule = "all",
        min_count: int | None = None,
        compute_dtype: ComputeDtype = "float64",
    ) -> None:
        self._model = model
        self.K = check_int(K, name="K", low=2)
        self.classes: ClassesRule = check_classes(classes, min_count)[0]
        self.min_count = None if min_count is None else int(min_count)
        self.compute_dtype: ComputeDtype = check_choice(compute_dtype, ("float64", "float32"), name="compute_dtype")
        self.schedule = Schedule.coerce(schedule)
        self.targets_fn = targets_fn
        self.loss_fn = loss_fn
        self.conventions = conventions
        self.cache_mb = check_positive(cache_mb, name="cache_mb", strict=False)
        self.classifier = find_classifier(model, self.K, classifier)
        self.missing: tuple[str, ...] = () if self.classifier is not None else CLASSIFIER_METRICS
        if self.classifier is None:
            warnings.warn(
                f"CollapseMonitor: no classifier found in {type(model).__name__} (no 'head' and no nn.Linear with "
                f"{self.K} outputs); these metrics will be missing: {', '.join(CLASSIFIER_METRICS)}. "
                "Pass classifier= (a module, a (W, b) pair or a parameter name) to measure them.",
                UserWarning,
                stacklevel=2,
            )
        self.layers, self.inputs, self.penultimate = self._resolve(layers)
        self._track = self._tracks(track)
        self._measured: dict[str, tuple[str, int]] = {}  # layer -> (track, d), once measured
        self.select = select
        self._bound = self._module_paths()
        self._plan = self._base_plan()
        #: Layers found at the first measurement to hold the same features as another (``{layer: the one kept}``):
        #: measured once, their rows repeating the kept layer's (``None`` until the first measurement).
        self.aliases: dict[str, str] | None = None
        self._alias_metrics: dict[str, frozenset[str]] = {}
        self._device = None if device is None else torch.device(device)
        #: The run identity of the monitor's table (:class:`~nclab.io.rundir.RunIdentity`).
        self.identity = self._identity(run_id)
        if sinks is None:
            sinks = [] if out is None else ["table"]
        if rank() != 0:  # rank 0 alone writes: other ranks open no file or logger run
            sinks = []
        folder = Path(out) if out is not None else Path(".")
        self.sinks: list[MetricSink] = [
            s if isinstance(s, MetricSink) else make_sink(s, folder, identity=self.identity, overwrite=overwrite)
            for s in sinks
        ]
        #: Every row measured so far (an ``(epoch, split)`` measured again replaces its rows): :meth:`to_frame`.
        self.rows: list[MetricRow] = []
        self._params_sent = False  # the settings go to the sinks with their first rows
        #: The training split's statistics from the latest ``measure(split="train")``: NCC reference of the
        #: held-out splits.
        self.train_stats: dict[str, ClassStats] | None = None

    # ------------------------------------------------------------------ set-up
    def _identity(self, run_id: str | None) -> RunIdentity:
        """What makes two monitors one run: K, the measured layers, the conventions and the parameter shapes."""
        if run_id is not None:
            return RunIdentity.explicit(run_id)
        conventions = None
        if self.conventions is not None:  # plain values only: the identity is hashed as YAML
            conventions = json.loads(json.dumps(dict(self.conventions), default=str, sort_keys=True))
        hashed = {
            "num_classes": self.K,
            "layers": list(self.layers),
            "penultimate": self.penultimate,
            "conventions": conventions,
            "parameters": {n: list(p.shape) for n, p in self.model.named_parameters()},
        }
        if self.classes != "all":  # another set of classes is another measurement (identities of "all" unchanged)
            hashed["classes"] = {"rule": self.classes, "min_count": self.min_count}
        return RunIdentity.of(type(self.model).__name__, hashed)

    @property
    def model(self) -> nn.Module:
        """The model the monitor was built with (read-only: the hooks and the classifier are its modules)."""
        return self._model

    @model.setter
    def model(self, other: nn.Module) -> None:
        if other is not self._model:
            raise AttributeError(
                "CollapseMonitor.model cannot be reassigned: the monitor is bound to the model it was built with "
                "(its measured layers and classifier are that model's modules); build a new "
                "CollapseMonitor(other_model, ...) to measure another model"
            )

    def _resolve(self, spec: str | Sequence[str]) -> tuple[OrderedDict[str, nn.Module], frozenset[str], str]:
        model = self.model
        own = getattr(model, "penultimate_name", None) if hasattr(model, "measured_layers") else None
        names = [spec] if spec == PENULTIMATE else (list(spec) if not isinstance(spec, str) else None)
        if names is None:  # a regex
            matched = resolve_layers(model, spec)
            return matched, frozenset(), own if own is not None and own in matched else next(reversed(matched))
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
            pen = own if own is not None and own in layer_map else next(reversed(layer_map))
        return layer_map, frozenset(inputs), pen

    def _tracks(self, track: str | Mapping[str, str] | None) -> dict[str, str]:
        """The statistics asked for per layer: ``"full"``, ``"light"``, or ``"auto"`` (not given: full at the
        penultimate layer and at layers of width <= FULL_TRACK_MAX_DIM, decided when ``d`` is seen)."""
        per = {} if track is None else {n: track for n in self.layers} if isinstance(track, str) else dict(track)
        bad = {t for t in per.values() if t not in ("full", "light")}
        if bad or set(per) - set(self.layers):
            raise ValueError(f"track must be 'full' or 'light' per measured layer {list(self.layers)}, got {track!r}")
        return {n: per.get(n, "auto") for n in self.layers}

    @property
    def tracks(self) -> dict[str, str]:
        """``{layer: "full" or "light"}`` as measured; before a layer's first measurement its choice when one was
        made (``track=``, or the penultimate layer), else ``"auto"`` (decided by its width ``d``)."""
        out = {}
        for name, asked in self._track.items():
            if name in self._measured:
                out[name] = self._measured[name][0]
            else:
                out[name] = "full" if asked == "auto" and name == self.penultimate else asked
        return out

    def _module_paths(self) -> dict[str, nn.Module]:
        """``{path in the model: module}`` of every hooked module and the classifier module, as built."""
        paths = {id(m): n for n, m in self.model.named_modules()}
        clf = [] if self.classifier is None or self.classifier.module is None else [self.classifier.module]
        return {paths[id(m)]: m for m in [*self.layers.values(), *clf] if id(m) in paths}

    def _check_bound(self) -> None:
        """Refuse to measure when a module the monitor hooks, or its classifier, was replaced in the model."""
        now = dict(self.model.named_modules())
        for path, module in self._bound.items():
            if now.get(path) is module:
                continue
            clf = self.classifier
            what = (
                f"the classifier {clf.name!r}" if clf is not None and clf.module is module else f"the module {path!r}"
            )
            was = "removed from" if path not in now else f"replaced by another {type(now[path]).__name__} in"
            raise RuntimeError(
                f"{what} was {was} {type(self.model).__name__} after the CollapseMonitor was built; the monitor is "
                "bound to the modules it was built with (its hooks and classifier): build a new "
                "CollapseMonitor(model, ...) after changing the model (e.g. a new head for fine-tuning)"
            )

    @property
    def device(self) -> torch.device:
        if self._device is not None:
            return self._device
        p = next(self.model.parameters(), None)
        return torch.device("cpu") if p is None else p.device

    def due(self, epoch: int) -> bool:
        """Whether ``epoch`` (an ``int >= 0``) is on the schedule."""
        return self.schedule.due(epoch)

    # ------------------------------------------------------------------ measuring
    def batches(self, data: Any) -> Batches:
        """A pass over ``data`` as ``(inputs, labels)`` on the monitor's device (:func:`nclab.measure.iterable_batches`:
        a one-shot iterator gives one pass only)."""
        return iterable_batches(data, self.device, need_labels=self.targets_fn is None)

    def plan(self) -> MeasurePlan:
        """The measurement plan (:class:`nclab.measure.MeasurePlan`): the monitor's one plan value, built with the
        monitor, with what changes between measurements set: the classifier's current weights, the tracks decided
        so far and the process group."""
        clf = None if self.classifier is None else self.classifier.refreshed()
        self.classifier = clf
        return dataclasses.replace(
            self._plan,
            W=None if clf is None else clf.W,
            b=None if clf is None else clf.b,
            cosine=clf is not None and clf.cosine,
            full_layers=frozenset(n for n, t in self.tracks.items() if t == "full"),
            light_layers=frozenset(n for n, t in self._track.items() if t == "light"),
            distributed=is_distributed(),
        )

    def _base_plan(self) -> MeasurePlan:
        """What every measurement of this monitor shares, as one :class:`~nclab.measure.MeasurePlan`."""
        loss = None if self.loss_fn is None else (lambda out, y, h, fn=self.loss_fn: fn(out, y))
        return MeasurePlan(
            layers=dict(self.layers),
            penultimate=self.penultimate,
            K=self.K,
            full_max_d=FULL_TRACK_MAX_DIM,
            cache_mb=self.cache_mb,
            loss_fn=loss,
            conventions=self.conventions,
            threads=1,
            inputs=self.inputs,
            select=self.select,
            targets_fn=self.targets_fn,
            classes=self.classes,
            min_count=self.min_count,
            compute_dtype=self.compute_dtype,
        )

    @torch.no_grad()
    def measure(self, data: Any, *, split: str = "train", epoch: int = 0) -> MonitorResult:
        """Measure on ``data``: any iterable of batches ``(x, y)`` (a DataLoader, a list, a generator; mappings
        with ``labels`` too) or one ``(x, y)`` pair of tensors. A held-out split's NCC uses the class means of
        the latest training measurement (its own when there is none yet). The model's train/eval mode (per
        module) and the grad mode are restored. Rows go to the sinks (rank 0) and to :attr:`rows`.

        Raises
        ------
        TypeError, ValueError
            ``epoch`` not an ``int >= 0``; data that yields no batch; labels that are not class indices ``(n,)``
            (one-hot rows named as such) or that live on the ``meta`` device; a one-shot iterator whose features
            outgrow ``cache_mb``; a measured layer whose output is a tuple (without ``select``), whose first
            dimension is not the batch, or that runs more than once per forward pass.
        RuntimeError
            A measured module or the classifier was replaced in the model after the monitor was built.
        """
        epoch = check_epoch(epoch)
        self._check_bound()
        plan = self.plan()
        train = split == "train"
        msgs: list[str] = []
        if not train and self.train_stats is None:
            msgs.append(f"{split}: NCC against its own class means (no training measurement yet)")
        reference = None if (train or self.train_stats is None) else self.train_stats
        with blas_threads(plan.threads):
            p1 = KeepingStatsPass(plan, unit_stats(plan), self.device, one_shot=is_one_shot(data))
            layer_out, _ = run_passes(self.model, self.batches(data), plan, p1, reference, msgs)
        layer_out = self._aliased(p1.stats, layer_out, msgs)
        if train:
            self.train_stats = dict(p1.stats)
        msgs += self._note_tracks(p1.stats)
        if self.missing:
            msgs.append(f"no classifier: missing {', '.join(self.missing)}")
        reports: dict[str, dict[str, float]] = {}
        for lay, met, v in layer_out:
            reports.setdefault(lay, {})[met] = v
        self._warn_unmeasured(reports, msgs)
        rows = [MetricRow(epoch, split, lay, met, v) for lay, met, v in layer_out]
        # an (epoch, split) measured again replaces its rows, here as in the table
        self.rows = [r for r in self.rows if (r.epoch, r.split) != (epoch, split)] + rows
        if rank() == 0:
            if not self._params_sent:  # after the first measurement: the settings name each layer's track
                for sink in self.sinks:
                    if hasattr(sink, "log_params"):
                        sink.log_params(self.settings)
                self._params_sent = True
            for sink in self.sinks:
                sink.write(rows)
        return MonitorResult(
            epoch, split, rows, reports, OrderedDict(p1.stats), list(dict.fromkeys(msgs)), self.missing
        )

    def _aliased(self, stats: dict[str, ClassStats], layer_out: list[Any], msgs: list[str]) -> list[Any]:
        """The rows with the layers that hold the same features as another (:attr:`aliases`): found at the first
        measurement, measured once after it, their rows and statistics those of the layer kept."""
        if self.aliases is None:
            self._find_aliases(stats, layer_out, msgs)
            return layer_out
        for dup, kept in self.aliases.items():
            stats[dup] = stats[kept]
        return self._with_aliases(layer_out) if self.aliases else layer_out

    def _find_aliases(self, stats: Mapping[str, ClassStats], layer_out: list[Any], msgs: list[str]) -> None:
        """At the first measurement: layers whose statistics are identical, state for state, hold the same features
        (``layers=["layer3", "penultimate"]`` where the classifier's input is layer3's output, or one module under
        two names). Each is measured once from then on (the penultimate layer, else the first, is kept; the other's
        hooks go), and its rows repeat the kept layer's metrics that it had itself; a warning says so."""
        names = list(stats)
        order = sorted(names, key=lambda n: (n != self.penultimate, names.index(n)))  # keep the penultimate first
        states = {n: stats[n].state_dict() for n in names}
        aliases: dict[str, str] = {}
        for i, dup in enumerate(order):
            for kept in order[:i]:
                if kept not in aliases and _same_state(states[kept], states[dup]):
                    aliases[dup] = kept
                    break
        self.aliases = aliases
        if not aliases:
            return
        self._alias_metrics = {d: frozenset(m for lay, m, _ in layer_out if lay == d) for d in aliases}
        self._plan = dataclasses.replace(
            self._plan,
            layers={n: m for n, m in self._plan.layers.items() if n not in aliases},
            inputs=frozenset(self._plan.inputs - set(aliases)),
            select=self._plan.select,
        )
        said = "; ".join(f"{d!r} and {k!r}" for d, k in aliases.items())
        text = (
            f"CollapseMonitor: layers {said} hold the same features (the same tensor, or one module under two names): "
            "each pair is measured once from now on, the first-named layer's rows repeating the other's"
        )
        warnings.warn(text, UserWarning, stacklevel=4)
        msgs.append(text)

    def _with_aliases(self, layer_out: list[Any]) -> list[Any]:
        """``layer_out`` with each alias's rows: the kept layer's values of the metrics the alias had."""
        assert self.aliases is not None
        extra = [
            (dup, met, v)
            for dup, kept in self.aliases.items()
            for lay, met, v in layer_out
            if lay == kept and met in self._alias_metrics[dup]
        ]
        return [*layer_out, *extra]

    def _warn_unmeasured(self, reports: Mapping[str, Mapping[str, float]], msgs: list[str]) -> None:
        """A Python warning for each measured layer that produced no metric, naming why (never silent)."""
        if rank() != 0:
            return
        for name in self.layers:
            if reports.get(name):
                continue
            why = [m.split(": ", 1)[1] for m in msgs if m.startswith(f"{name}: metrics skipped")]
            cause = why[0] if why else "no statistics"
            hint = "" if self.classes == "present" or "classes='present'" in cause else "; pass classes='present'"
            # 4: past measure and its torch.no_grad wrapper, at the caller of measure
            warnings.warn(
                f"CollapseMonitor: layer {name!r} produced no metric: {cause}{hint}", UserWarning, stacklevel=4
            )

    def _note_tracks(self, stats: Mapping[str, ClassStats]) -> list[str]:
        """Record each layer's track and width; a layer measured light for its width alone (no ``track=`` for
        it) is said once, in a warning that names the way to measure it in full."""
        notes = []
        for name, s in stats.items():
            if name in self._measured:
                continue
            self._measured[name] = (s.track, s.d)
            if self._track.get(name) == "auto" and s.track == "light":
                notes.append(
                    f"layer {name!r} (d = {s.d} > FULL_TRACK_MAX_DIM = {FULL_TRACK_MAX_DIM}) is measured light: no "
                    f"nc1, vci or ranks there; pass track={{{name!r}: 'full'}} to measure it in full (a d x d "
                    f"scatter of {format_bytes(8.0 * s.d * s.d)})"
                )
        if notes and rank() == 0:
            for note in notes:
                # 4: past measure and its torch.no_grad wrapper, at the caller of measure
                warnings.warn(f"CollapseMonitor: {note}", UserWarning, stacklevel=4)
        return notes

    @property
    def settings(self) -> dict[str, Any]:
        """What the monitor measures, as flat parameters (the keys of a logger's params / config): ``K``,
        ``layers``, ``penultimate``, ``classifier`` (its name, ``None`` without one), ``schedule``,
        ``track/LAYER`` (:attr:`tracks`), ``conventions/KEY`` (every convention, defaults included:
        :doc:`/conventions`), ``run_id`` and ``run_name`` (:attr:`identity`). Every logger sink records them
        with its first rows (:meth:`nclab.io.sinks.MLflowSink.log_params`)."""
        out: dict[str, Any] = {
            "K": self.K,
            "layers": list(self.layers),
            "penultimate": self.penultimate,
            "classifier": None if self.classifier is None else self.classifier.name,
            "schedule": repr(self.schedule),
        }
        out.update({f"track/{n}": t for n, t in self.tracks.items()})
        out.update({f"conventions/{k}": v for k, v in check_conventions(self.conventions).items()})
        if self.classes != "all":  # the default adds no parameter
            out["classes"] = self.classes
            out["min_count"] = 1 if self.min_count is None else self.min_count
        if self.compute_dtype != "float64":  # the default adds no parameter
            out["compute_dtype"] = self.compute_dtype
        out.update(run_id=self.identity.run_id, run_name=self.identity.name)
        return out

    def to_frame(self) -> Any:
        """:attr:`rows` as a ``pandas.DataFrame`` (columns epoch, split, layer, metric, value); pandas is
        optional: without it this raises ``ImportError`` naming it."""
        return to_frame_of(self.rows)

    def maybe_measure(self, data: Any, *, split: str = "train", epoch: int = 0) -> MonitorResult | None:
        """:meth:`measure` when ``epoch`` is on the schedule, else ``None``."""
        return self.measure(data, split=split, epoch=epoch) if self.due(epoch) else None

    def close(self) -> None:
        """Close every sink (rank 0; other ranks never opened a writer's output); the table sink gives the folder
        back (its lock)."""
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
            f"K={self.K}, schedule={self.schedule!r})"
        )


def _same_state(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two accumulators' ``state_dict`` hold the same values, tensor for tensor, bit for bit."""
    if a.keys() != b.keys():
        return False
    for key, x in a.items():
        y = b[key]
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
            if x.shape != y.shape or x.dtype != y.dtype or not torch.equal(x, y):
                return False
        elif isinstance(x, np.ndarray) and isinstance(y, np.ndarray):
            if x.shape != y.shape or not np.array_equal(x, y):
                return False
        elif isinstance(x, Mapping) and isinstance(y, Mapping):
            if not _same_state(x, y):
                return False
        elif type(x) is not type(y) or (not isinstance(x, torch.Tensor | np.ndarray) and x != y):
            return False
    return True
