"""One measurement of a network on one data split: the eval-mode passes that feed the metric suite.

Pass 1 (forward, hooks on every measured layer): ``ClassStats`` per layer -- ``track="full"`` at the
penultimate layer (d x d, for NC1, VCI, ranks, probe loss), ``"light"`` (O(K d)) elsewhere, enough for the
per-layer PFC metrics; the network's loss and error on the split; for cosine heads also full statistics of the
L2-normalised penultimate features (GNC1, paper 003). Pass 2: the NCC pass (``NCCAccumulator``) per layer,
against the class means of ``reference`` statistics -- the training split's for a held-out split (spec README,
"NC4 / NCC"), the split's own otherwise; the classifier ``W, b`` enter at the penultimate layer only (NC4).
When the split's features fit in ``cache_mb``, pass 1 keeps them and builds each layer's statistics in one
update after the forward pass, and pass 2 reuses them (one NCC update per layer); otherwise both stream batch by
batch and pass 2 runs the forward pass again.

Metrics: :func:`nclab.metrics.collapse_report` per layer (so ``trace_ratio`` = PFC1, ``etf_gram_error`` =
PFC2, ``ncc_accuracy`` = PFC3 at every layer, NC1-NC4 and the rest at the penultimate), plus ``gnc1`` for
cosine heads. Held-out splits: variability / geometry metrics use the split's own class statistics
(paper 004 Fig. 12 reading), NCC quantities use the training means.
"""

from __future__ import annotations

import math
import warnings
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from nclab._threads import blas_threads as _blas_threads
from nclab.metrics import collapse_report, gnc1
from nclab.stats import ClassStats, NCCAccumulator
from nclab.train.hooks import FeatureHooks, LayerSpec, _eval_mode, resolve_layers

__all__ = ["SplitMeasurement", "measure_split"]

OUTPUT_LAYER = "output"  # pseudo-layer of network-level rows (loss, error)


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
    """Rows of paper 002's geodesic model over the leading measured layers of one dimension (see measure_split)."""
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


def _classifier(model: nn.Module) -> tuple[np.ndarray | None, np.ndarray | None]:
    head = getattr(model, "head", None)
    W = getattr(head, "weight", None)
    if W is None:
        return None, None
    b = getattr(head, "bias", None)
    to = lambda t: t.detach().to("cpu", torch.float64).numpy()  # noqa: E731
    return to(W), (None if b is None else to(b))


@torch.no_grad()
def measure_split(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    num_classes: int,
    *,
    layers: LayerSpec = None,
    penultimate: str | None = None,
    loss_fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
    reference: Mapping[str, ClassStats] | None = None,
    full_layers: str = "penultimate",
    conventions: Mapping[str, Any] | None = None,
    batch_size: int = 256,
    cache_mb: float = 256.0,
    advance: Callable[[int], None] | None = None,
    blas_threads: int | None = 1,
    geodesic: bool = False,
) -> SplitMeasurement:
    """Measure ``model`` on inputs ``x (N, ...)`` with labels ``y (N,)`` (see the module docstring).

    ``layers``: as :func:`nclab.train.hooks.resolve_layers` (default: the model's ``measured_layers()``);
    ``penultimate``: the layer whose output feeds the classifier (default: the model's ``penultimate_name``,
    else the last layer); the classifier is read from ``model.head.weight`` / ``.bias`` when present.
    ``advance(n)`` is called after each batch of each pass (progress bars). ``blas_threads``: numpy/scipy BLAS
    threads while measuring (``None``: unchanged). One by default: the measurement's products and d x d
    decompositions are small, and between torch operations a multi-threaded BLAS call waits for cores that
    torch's OpenMP workers still spin on (measured on 2 cores: a d = 128 report 30 ms with 2 threads, 3-4 ms
    with one; 1.3-1.6x faster with one even at d = 512-1,024; ``nclab._threads``).
    ``geodesic``: also log paper 002's geodesic model over the leading measured layers of equal dimension
    (``layer0 .. layerL`` of ``fc_resnet`` / ``pfc_resnet``): per layer ``relative_depth`` and the straight line's
    ``geodesic_pfc1/2/3`` at that depth (measured end), and ``geodesic_s01``, ``straightness_index`` as network
    rows (:func:`nclab.theory.geodesic.geodesic_profile`, from the cached features; skipped with a warning when
    they exceed ``cache_mb`` or fewer than two layers share a dimension).
    """
    with _blas_threads(blas_threads):
        return _measure_split(
            model,
            x,
            y,
            num_classes,
            layers=layers,
            penultimate=penultimate,
            loss_fn=loss_fn,
            reference=reference,
            full_layers=full_layers,
            conventions=conventions,
            batch_size=batch_size,
            cache_mb=cache_mb,
            advance=advance,
            geodesic=geodesic,
        )


def _measure_split(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    num_classes: int,
    *,
    layers: LayerSpec,
    penultimate: str | None,
    loss_fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor] | None,
    reference: Mapping[str, ClassStats] | None,
    full_layers: str,
    conventions: Mapping[str, Any] | None,
    batch_size: int,
    cache_mb: float,
    advance: Callable[[int], None] | None,
    geodesic: bool,
) -> SplitMeasurement:
    layer_map = resolve_layers(model, layers)
    if penultimate is None:
        penultimate = getattr(model, "penultimate_name", None) or next(reversed(layer_map))
    if penultimate not in layer_map:
        raise KeyError(f"penultimate layer {penultimate!r} is not among the measured layers {list(layer_map)}")
    W, b = _classifier(model)
    head = getattr(model, "head", None)
    cosine = bool(getattr(head, "cosine", False))
    N = int(y.shape[0])
    stats: dict[str, ClassStats] = {}
    unit_stats = ClassStats(num_classes, W.shape[1], track="full") if (cosine and W is not None) else None
    # Features of the whole split, per layer, while they fit in cache_mb: written batch by batch into one
    # (N, d) buffer per layer (no per-batch clones to concatenate later); None once streaming.
    cache: dict[str, torch.Tensor] | None = {}
    filled: dict[str, int] = {}  # rows written per layer, from sample offset first_row[name]
    first_row: dict[str, int] = {}
    budget = {"bytes": cache_mb * 2**20, "overflow": False}
    cur: dict[str, Any] = {}

    def stats_of(name: str, f: torch.Tensor) -> ClassStats:
        s = stats.get(name)
        if s is None:
            full = name == penultimate or full_layers == "all"
            s = stats[name] = ClassStats(num_classes, int(f.shape[1]), track="full" if full else "light")
        return s

    def sink1(name: str, f: torch.Tensor) -> None:
        buf = None
        if cache is not None:
            buf = cache.get(name)
            if buf is None and name not in filled:
                need = N * f.shape[1] * f.element_size()
                if need <= budget["bytes"]:
                    buf = cache[name] = torch.empty((N, f.shape[1]), dtype=f.dtype, device=f.device)
                    budget["bytes"] -= need
                else:
                    budget["overflow"] = True
                filled[name], first_row[name] = 0, cur["start"]
        if buf is not None:  # statistics from the whole buffer after the pass (one update per layer)
            n = int(f.shape[0])
            if filled[name] + n > N:
                raise RuntimeError(f"layer {name!r} produced more rows than the split has samples")
            buf[filled[name] : filled[name] + n].copy_(f)
            filled[name] += n
        else:
            stats_of(name, f).update(f, cur["y"])
        if name == penultimate:
            cur["h"] = f
            if unit_stats is not None:
                unit_stats.update(F.normalize(f.to(torch.float64), dim=1), cur["y"])

    loss_sum, wrong = 0.0, 0
    with _eval_mode(model), FeatureHooks(model, layer_map, sink=sink1):
        for start in range(0, N, batch_size):
            xb, yb = x[start : start + batch_size], y[start : start + batch_size]
            cur["y"], cur["start"] = yb, start
            out = model(xb)
            wrong += int((out.argmax(dim=1) != yb).sum())
            if loss_fn is not None:
                loss_sum += float(loss_fn(out, yb, cur.get("h", out))) * int(yb.shape[0])
            if cache is not None and budget["overflow"]:  # too large to keep: stream from here on
                for name, buf in cache.items():
                    rows = slice(first_row[name], first_row[name] + filled[name])
                    stats_of(name, buf).update(buf[: filled[name]], y[rows])
                cache = None
            if advance is not None:
                advance(int(yb.shape[0]))
    if cache is not None:
        short = [name for name in cache if filled[name] != N or first_row[name] != 0]
        if short:
            raise RuntimeError(f"layers {short} did not produce one row per sample during the forward pass")
        for name, buf in cache.items():
            stats_of(name, buf).update(buf, y)
    missing = [n for n in layer_map if n not in stats]
    if missing:
        raise RuntimeError(f"layers {missing} produced no output during the forward pass (not on its path?)")

    # pass 2: NCC against the reference means (skipped where a reference class is empty)
    ref = reference if reference is not None else stats
    msgs: list[str] = []
    ncc: dict[str, NCCAccumulator] = {}
    for name in layer_map:
        if name not in ref or ref[name].empty_classes.size:
            msgs.append(f"{name}: no NCC pass (a reference class has no sample)")
            continue
        ncc[name] = NCCAccumulator(
            ref[name], W=W if name == penultimate else None, b=b if name == penultimate else None
        )
    if ncc:
        if cache is not None:
            for name, acc in ncc.items():
                acc.update(cache[name], y)
            if advance is not None:
                advance(N)
        else:

            def sink2(name: str, f: torch.Tensor) -> None:
                if name in ncc:
                    ncc[name].update(f, cur["y"])

            with _eval_mode(model), FeatureHooks(model, layer_map, sink=sink2):
                for start in range(0, N, batch_size):
                    cur["y"] = y[start : start + batch_size]
                    model(x[start : start + batch_size])
                    if advance is not None:
                        advance(int(cur["y"].shape[0]))

    rows: list[tuple[str, str, float]] = []
    error = wrong / N if N else math.nan
    loss = loss_sum / N if (N and loss_fn is not None) else math.nan
    rows.append((OUTPUT_LAYER, "error", error))
    if loss_fn is not None:
        rows.append((OUTPUT_LAYER, "loss", loss))
    for name in layer_map:
        pen = name == penultimate
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                # keep_memo at the penultimate layer: the caller may read more of its statistics (the trainer's
                # MSE decomposition reuses Sigma_W and Sigma_T; it clears the caches when done)
                rep = collapse_report(
                    stats[name],
                    W=W if pen else None,
                    b=b if pen else None,
                    ncc=ncc.get(name),
                    conventions=conventions,
                    keep_memo=pen,
                )
                if pen and unit_stats is not None:
                    rep["gnc1"] = gnc1(unit_stats, check=False)
            except ValueError as err:  # e.g. an empty class in a small held-out subset
                msgs.append(f"{name}: metrics skipped ({err})")
                rep = {}
        msgs += [f"{name}: {w.message}" for w in caught]
        rows += [(name, k, float(v)) for k, v in rep.items()]
    if geodesic:
        rows += _geodesic_rows(layer_map, cache, y, num_classes, msgs)
    return SplitMeasurement(
        rows=rows,
        stats=OrderedDict((n, stats[n]) for n in layer_map),
        error=error,
        loss=loss,
        warnings=list(dict.fromkeys(msgs)),
    )
