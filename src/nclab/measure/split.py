"""One measurement of a network on one data split: :func:`measure_split`, and the steps it shares with
:class:`~nclab.monitor.CollapseMonitor` (:func:`run_passes`, :func:`layer_rows`).

Metrics: :func:`nclab.metrics.collapse_report` per layer (so ``trace_ratio`` = PFC1, ``etf_gram_error`` =
PFC2, ``ncc_accuracy`` = PFC3 at every layer, NC1-NC4 and the rest at the penultimate), plus ``gnc1`` for
cosine heads. Held-out splits: variability / geometry metrics use the split's own class statistics
([Han et al. 2022, Fig. 12] reading), NCC quantities use the training means. The passes are
:mod:`nclab.measure.passes`'.
"""

from __future__ import annotations

import warnings
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field

import torch
from torch import nn

from nclab._threads import blas_threads
from nclab.io.run_table import OUTPUT_LAYER
from nclab.measure.batches import Batches, tensor_batches
from nclab.measure.passes import PresentNCC, StatsPass, forward_pass, ncc_pass, unit_stats
from nclab.measure.plan import MeasurePlan
from nclab.metrics import collapse_report, gnc1
from nclab.stats import ClassMoments, ClassStats, NCCAccumulator

__all__ = ["SplitMeasurement", "layer_rows", "measure_batches", "measure_split", "run_passes"]

#: ``(layer, metric, value)``.
Row = tuple[str, str, float]


@dataclass
class SplitMeasurement:
    """Rows ``(layer, metric, value)`` in layer order, the pass-1 statistics per layer, and warnings.

    ``moments``: the :class:`~nclab.stats.ClassMoments` view the penultimate layer's report was computed in, so
    that a caller reading more of its statistics (the trainer's MSE decomposition: Sigma_W, Sigma_T) reuses them;
    its d x d matrices go with this object.

    Parameters
    ----------
    rows : list of (str, str, float)
        ``(layer, metric, value)`` rows in layer order; network-level rows (``error``, ``loss``) under the
        output layer's name.
    stats : dict of str to ClassStats
        Pass-1 class statistics per measured layer.
    error : float
        The network's classification error on the split; NaN when no output was a logit row ``(n, K)``.
    loss : float
        The network's mean loss per sample; NaN without a ``loss_fn``.
    warnings : list of str, default=[]
        Messages of skipped metrics and passes.
    moments : dict of str to ClassMoments, default={}
        The view the penultimate layer's report was computed in.

    See Also
    --------
    measure_split : what returns one.

    Examples
    --------
    >>> m = SplitMeasurement([("fc", "nc1", 0.5)], {}, error=0.25, loss=float("nan"))
    >>> m.value("fc", "nc1"), m.error, m.warnings
    (0.5, 0.25, [])
    """

    rows: list[Row]
    stats: dict[str, ClassStats]
    error: float
    loss: float
    warnings: list[str] = field(default_factory=list)
    moments: dict[str, ClassMoments] = field(default_factory=dict)

    def value(self, layer: str, metric: str) -> float:
        for lay, met, v in self.rows:
            if lay == layer and met == metric:
                return v
        raise KeyError(f"no {metric!r} at layer {layer!r}")


def layer_rows(
    plan: MeasurePlan,
    name: str,
    stats: ClassStats | ClassMoments,
    ncc: NCCAccumulator | PresentNCC | None,
    unit: ClassStats | None,
    msgs: list[str],
) -> list[Row]:
    """The report step of one layer: ``collapse_report`` of ``stats`` (a ClassStats, or a view whose cached
    statistics outlive the report; with the plan's classifier and conventions, and the NCC counts ``ncc``; plus
    ``gnc1`` from ``unit`` at a cosine head's penultimate layer) as ``(layer, metric, value)`` rows; its warnings,
    or why it failed, go to ``msgs``.

    Parameters
    ----------
    plan : MeasurePlan
        The classifier (used at ``plan.penultimate`` only) and the conventions.
    name : str
        The layer.
    stats : ClassStats or ClassMoments
        Its class statistics.
    ncc : NCCAccumulator or None
        Its NCC counts (pass 2), or ``None`` when that pass was skipped.
    unit : ClassStats or None
        Statistics of the unit-normalised penultimate features of a cosine head, or ``None``.
    msgs : list of str
        Receives the report's warnings and, when it fails with ``ValueError``, why.

    Returns
    -------
    list of (str, str, float)
        ``(name, metric, value)`` rows; empty when the report failed (e.g. an empty class).

    Examples
    --------
    >>> from nclab.stats import ClassStats
    >>> stats = ClassStats(2, 2).update(torch.tensor([[0.0, 0.0], [2.0, 0.0], [0.0, 1.0], [0.0, 3.0]]),
    ...                                 torch.tensor([0, 0, 1, 1]))
    >>> plan = MeasurePlan({"h": nn.Identity()}, "h", 2)
    >>> msgs = []
    >>> rows = {metric: v for _, metric, v in layer_rows(plan, "h", stats, None, None, msgs)}
    >>> round(rows["trace_ratio"], 12), rows["numerical_rank"], msgs
    (0.8, 2.0, [])
    >>> layer_rows(plan, "h", ClassStats(2, 2).update(torch.zeros(1, 2), torch.tensor([0])), None, None, msgs)
    []
    >>> msgs[0].split(" (")[0]
    'h: metrics skipped'
    """
    pen = name == plan.penultimate
    W, b = plan.classifier_at(name)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            ncc_in = ncc.acc if isinstance(ncc, PresentNCC) else ncc
            rep = collapse_report(
                stats,
                W=W,
                b=b,
                ncc=ncc_in,
                conventions=plan.conventions,
                classes=plan.classes,
                min_count=plan.min_count,
            )
            if pen and unit is not None:
                rep["gnc1"] = gnc1(unit, check=False)
        except ValueError as err:  # e.g. an empty class in a small held-out subset
            msgs.append(f"{name}: metrics skipped ({err})")
            rep = {}
    msgs += [f"{name}: {w.message}" for w in caught]
    return [(name, k, float(v)) for k, v in rep.items()]


def run_passes(
    model: nn.Module,
    batches: Batches,
    plan: MeasurePlan,
    p1: StatsPass,
    reference: Mapping[str, ClassStats] | None,
    msgs: list[str],
) -> tuple[list[Row], dict[str, ClassMoments]]:
    """Pass 1 into ``p1``, pass 2 (NCC against ``reference``, default ``p1``'s own statistics), both all-reduced
    when ``plan.distributed``; then the rows: ``error`` (when some output was a logit row), ``loss`` (with
    ``plan.loss_fn``) and each layer's report. Warnings go to ``msgs``. Also returns the view the penultimate
    layer's report was computed in (``{penultimate: ClassMoments}``, see :class:`SplitMeasurement`).

    Parameters
    ----------
    model : torch.nn.Module
        The network.
    batches : Batches
        The re-iterable pass over ``(inputs, labels)``.
    plan : MeasurePlan
        What to measure.
    p1 : StatsPass
        A fresh pass-1 sink (:class:`~nclab.measure.StatsPass` or :class:`~nclab.measure.KeepingStatsPass`);
        filled here.
    reference : Mapping[str, ClassStats] or None
        The statistics NCC measures against (a held-out split: the training split's); ``None``: ``p1``'s own.
    msgs : list of str
        Receives the warnings.

    Returns
    -------
    rows : list of (str, str, float)
        ``(layer, metric, value)`` rows: the network's ``error`` and ``loss`` first (when measured), then each
        layer's report in layer order.
    views : dict of str to ClassMoments
        ``{plan.penultimate: ClassMoments}``; empty when the penultimate layer has no statistics.

    Examples
    --------
    >>> from nclab.measure import StatsPass
    >>> torch.manual_seed(0)  # doctest: +ELLIPSIS
    <...>
    >>> net = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 3))
    >>> plan = MeasurePlan({"1": net[1]}, "1", 3)
    >>> x, y = torch.randn(12, 4), torch.arange(12) % 3
    >>> rows, views = run_passes(net, lambda: [(x, y)], plan, StatsPass(plan, y, None), None, [])
    >>> rows[0][1], list(views), {layer for layer, _, _ in rows[1:]}
    ('error', ['1'], {'1'})
    """
    forward_pass(model, batches, plan, p1)
    p1.finish()
    if plan.distributed:
        p1.all_reduce()
    ncc = ncc_pass(model, batches, plan, p1.stats if reference is None else reference, p1.cached, msgs)
    if plan.distributed:
        for acc in ncc.values():  # every rank skipped the same layers: the reference is the same everywhere
            acc.all_reduce()
    rows: list[Row] = [(OUTPUT_LAYER, "error", p1.error)] if p1.counts.scored else []
    if plan.loss_fn is not None:
        rows.append((OUTPUT_LAYER, "loss", p1.loss))
    pen = plan.penultimate
    views = {pen: ClassMoments(p1.stats[pen])} if pen in p1.stats else {}
    for name in plan.layers:
        rows += layer_rows(plan, name, views.get(name, p1.stats[name]), ncc.get(name), p1.unit, msgs)
    return rows, views


def _geodesic_rows(
    layer_map: Mapping[str, nn.Module],
    cache: Mapping[str, torch.Tensor] | None,
    y: torch.Tensor,
    K: int,
    msgs: list[str],
) -> list[Row]:
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
        prof = geodesic_profile([cache[n] for n in segment], y, K)
    except ValueError as err:  # e.g. an empty class in a small subset, or no layer moving any sample
        msgs.append(f"geodesic: skipped ({err})")
        return []
    pred = prof.predictions["measured"]
    rows = [(OUTPUT_LAYER, "geodesic_s01", prof.s01), (OUTPUT_LAYER, "straightness_index", prof.straightness_index)]
    for i, name in enumerate(segment):
        rows.append((name, "relative_depth", float(prof.relative_depth[i])))
        rows += [(name, f"geodesic_{k}", float(getattr(pred, k)[i])) for k in ("pfc1", "pfc2", "pfc3")]
    return rows


@torch.no_grad()
def measure_split(
    model: nn.Module,
    data: tuple[torch.Tensor, torch.Tensor],
    plan: MeasurePlan,
    *,
    reference: Mapping[str, ClassStats] | None = None,
) -> SplitMeasurement:
    """Measure ``model`` on one split ``data = (x (N, ...), y (N,))`` as ``plan`` says (see the module
    docstring), in batches of ``plan.batch_size``.

    ``reference``: the class statistics whose means the NCC pass measures against (a held-out split's: the
    training split's ``stats``); default: the split's own. ``plan.threads``: numpy/scipy BLAS threads while
    measuring; one by default: the measurement's products and d x d decompositions are small, and between torch
    operations a multi-threaded BLAS call waits for cores that torch's OpenMP workers still spin on (measured on
    2 cores: a d = 128 report 30 ms with 2 threads, 3-4 ms with one; 1.3-1.6x faster with one even at d =
    512-1,024; ``nclab._threads``). ``plan.geodesic``: also the [Wang et al. 2024] geodesic model over the leading
    measured layers of equal dimension (``layer0 .. layerL`` of ``fc_resnet`` / ``pfc_resnet``): per layer
    ``relative_depth`` and the straight line's ``geodesic_pfc1/2/3`` at that depth (measured end), and
    ``geodesic_s01``, ``straightness_index`` as network rows (:func:`nclab.theory.geodesic.geodesic_profile`,
    from the cached features; skipped with a warning when they exceed ``plan.cache_mb`` or fewer than two layers
    share a dimension). ``plan.distributed``: ``x, y`` are this rank's shard of the split (no sample in two
    shards, :func:`nclab.train.distributed.eval_shard`); every rank calls with its shard, the statistics, NCC
    counts, loss and error sums are all-reduced over the default process group (exactly: :mod:`nclab.stats`),
    and every rank returns the whole split's rows.

    Parameters
    ----------
    model : torch.nn.Module
        The network (run in eval mode, without gradients; its modes are restored).
    data : tuple of torch.Tensor
        ``(x (N, ...), y (N,))``, the split's inputs and class indices.
    plan : MeasurePlan
        What to measure (:meth:`MeasurePlan.of`).
    reference : Mapping[str, ClassStats], optional
        The class statistics whose means the NCC pass measures against; default: the split's own.

    Returns
    -------
    SplitMeasurement
        The rows, the pass-1 statistics per layer, the error and loss, and the warnings.

    Raises
    ------
    TypeError
        If ``data`` is not an ``(x, y)`` pair.
    ValueError
        If ``x`` and ``y`` have different numbers of rows, or as :func:`~nclab.measure.forward_pass` raises.

    See Also
    --------
    measure_batches : the same over any re-iterable pass of batches.

    Examples
    --------
    >>> from nclab.nets import build_model
    >>> torch.manual_seed(0)  # doctest: +ELLIPSIS
    <...>
    >>> net = build_model("mlp", (4,), 3, widths=[8, 6])
    >>> x, y = torch.randn(30, 4), torch.arange(30) % 3
    >>> res = measure_split(net, (x, y), MeasurePlan.of(net, 3, batch_size=16))
    >>> res.stats["layer2"].N, 0 <= res.value("layer2", "ncc_accuracy") <= 1
    (30, True)
    """
    if not (isinstance(data, tuple | list) and len(data) == 2):
        raise TypeError(f"data must be an (x, y) pair of tensors, got {type(data).__name__}")
    x, y = data
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"data: x has {x.shape[0]} rows but y has {y.shape[0]} labels")
    return measure_batches(model, tensor_batches(x, y, plan.batch_size), y, plan, reference=reference)


@torch.no_grad()
def measure_batches(
    model: nn.Module,
    batches: Batches,
    y: torch.Tensor,
    plan: MeasurePlan,
    *,
    reference: Mapping[str, ClassStats] | None = None,
) -> SplitMeasurement:
    """:func:`measure_split` over a re-iterable pass ``batches()`` of ``(inputs, labels)`` (e.g.
    :func:`~nclab.measure.iterable_batches` of a DataLoader over a streamed image dataset, in order) whose labels,
    concatenated, are ``y (N,)``, known in advance: the pass-1 features are then kept for the NCC pass in one
    preallocated buffer per layer while they fit in ``plan.cache_mb``, else both passes stream (memory: one batch
    and the statistics, whatever ``N``). ``y`` lives on the device the batches arrive on.

    Parameters
    ----------
    model : torch.nn.Module
        The network.
    batches : Batches
        A re-iterable pass: ``batches()`` yields ``(inputs, labels)`` in the order of ``y``.
    y : torch.Tensor, shape (N,)
        All the pass's labels, concatenated.
    plan : MeasurePlan
        What to measure.
    reference : Mapping[str, ClassStats], optional
        The class statistics whose means the NCC pass measures against; default: the split's own.

    Returns
    -------
    SplitMeasurement
        As :func:`measure_split`.

    Examples
    --------
    >>> from nclab.measure import tensor_batches
    >>> torch.manual_seed(0)  # doctest: +ELLIPSIS
    <...>
    >>> net = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 3))
    >>> plan = MeasurePlan({"1": net[1]}, "1", 3)
    >>> x, y = torch.randn(12, 4), torch.arange(12) % 3
    >>> a = measure_batches(net, tensor_batches(x, y, 5), y, plan)
    >>> b = measure_split(net, (x, y), plan)
    >>> a.stats["1"].N, a.value("1", "ncc_accuracy") == b.value("1", "ncc_accuracy")
    (12, True)
    """
    with blas_threads(plan.threads):
        p1 = StatsPass(plan, y, unit_stats(plan), y.device)
        msgs: list[str] = []
        rows, views = run_passes(model, batches, plan, p1, reference, msgs)
        if plan.geodesic:
            feats = None if p1.cached is None else {n: f for n, (f, _) in p1.cached.items()}
            rows += _geodesic_rows(plan.layers, feats, y, plan.K, msgs)
    return SplitMeasurement(
        rows=rows,
        stats=OrderedDict((n, p1.stats[n]) for n in plan.layers),
        error=p1.error,
        loss=p1.loss,
        warnings=list(dict.fromkeys(msgs)),
        moments=views,
    )
