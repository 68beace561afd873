"""Matplotlib figures of a long-format metrics table (:class:`nclab.io.run_table.MetricRow` rows), returned as
:class:`matplotlib.figure.Figure` objects; :func:`figure_png` (called by :func:`nclab.report.write_report`) turns
them into PNG bytes at :data:`FIGURE_DPI`.

Readability: figures are at most :data:`MAX_WIDTH_IN` inches wide, so at :data:`FIGURE_DPI` they fit a
1280-px-wide window at 1:1, and no text is smaller than :data:`MIN_FONT_PT` points, i.e.
``MIN_FONT_PT * FIGURE_DPI / 72`` = 12.5 px at 1:1. Each y axis is labelled with the metric's name in
``metrics.csv``; a legend appears only where two or more curves (or a curve and the zero-error marker) share a
panel.

* :func:`curves_figure` -- one panel per metric, value vs epoch, one curve per layer (input side light, the
  penultimate layer dark), log y-axis for positive metrics whose collapse direction is "lower", a red
  vertical line at the first zero-training-error epoch ([Han et al. 2022, Fig. 2] / PNAS style);
* :func:`heatmap_figure` -- layer x epoch heatmaps ([Wang et al. 2024, Sec. 6]: PFC1-3 = trace ratio, ETF Gram error,
  NCC accuracy), log colour scale for the "lower" metrics;
* :func:`train_test_figure` -- train vs test curves of metrics at one layer;
* :func:`compare_figure` -- one metric of several runs overlaid (e.g. MSE vs CE, [Han et al. 2022, Fig. 10]);
* :func:`layer_profile_figure` -- metrics against depth at chosen epochs (NC1 vs depth, [Wang et al. 2024, Fig. 3]).

Titles name each metric's collapse family (:func:`metric_title`: ``NC2: ETF Gram error (PFC2)``); the zero-error
marker has a legend entry.

The x-axis is ``symlog`` (linear below epoch 1), so epoch 0 and the log-spaced epochs are all visible.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import LogFormatterSciNotation, LogLocator, NullLocator

from nclab.io.run_table import OUTPUT_LAYER, MetricRow
from nclab.metrics import REGISTRY

__all__ = [
    "FIGURE_DPI",
    "MAX_WIDTH_IN",
    "MIN_FONT_PT",
    "compare_figure",
    "curves_figure",
    "depth_figure",
    "figure_png",
    "heatmap_figure",
    "layer_profile_figure",
    "layers_of",
    "log_ticks",
    "metric_title",
    "profile_epochs",
    "series",
    "train_test_figure",
]

#: Resolution of the PNGs in reports; the HTML shows them at this size (1 image pixel = 1 CSS pixel).
FIGURE_DPI = 100
#: Widest figure, inches: 12 in x 100 dpi = 1200 px fits a 1280-px window beside the page margins.
MAX_WIDTH_IN = 12.0
#: Smallest font in the figures, points (9 pt at 100 dpi = 12.5 px).
MIN_FONT_PT = 9.0
_FONTS = {"title": 11, "label": 10, "tick": MIN_FONT_PT, "legend": MIN_FONT_PT}

#: How the figures name a metric after its family (``NC2: ETF Gram error (PFC2)``); others read as their name.
_NAMES = {
    "nc1": r"tr($\Sigma_W\,\Sigma_B^+$)/K",
    "trace_ratio": r"Tr $\Sigma_W$ / Tr $\Sigma_B$",
    "etf_gram_error": "ETF Gram error",
    "ncc_accuracy": "NCC accuracy",
    "ncc_mismatch": "NCC mismatch",
    "cdnv": "CDNV",
    "vci": "VCI",
    "self_duality": "self-duality",
    "within_class_cosine": "within-class cosine",
    "max_angle": "max angle",
    "gnc1": "GNC1",
    "gnc2": "GNC2",
    "gnc3": "GNC3",
}


def metric_title(metric: str) -> str:
    """A panel's title: the metric's collapse family, a readable name, and its own tag where it has one.

    Examples
    --------
    >>> metric_title("etf_gram_error"), metric_title("self_duality"), metric_title("loss")
    ('NC2: ETF Gram error (PFC2)', 'NC3: self-duality', 'loss')
    >>> metric_title("gnc3")
    'GNC3'
    """
    from nclab.metrics.glossary import GLOSSARY, family

    name = _NAMES.get(metric, metric.replace("_", " "))
    fam, tag = family(metric), GLOSSARY.get(metric, ("",))[0]
    if not fam or name.startswith(fam):
        return name if fam else metric
    return f"{fam}: {name}" + (f" ({tag})" if tag != fam else "")


def figure_png(fig: Figure, dpi: int = FIGURE_DPI) -> bytes:
    """``fig`` as PNG bytes at ``dpi`` (its size in inches times ``dpi`` pixels); closes the figure."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)  # no bbox_inches="tight": it redraws the figure (slow)
    plt.close(fig)
    return buf.getvalue()


def _ylabel(metric: str) -> str:
    """The y axis names the metric as ``metrics.csv`` does (the title says what it is)."""
    return metric


def _legend(ax: plt.Axes) -> None:
    handles, _ = ax.get_legend_handles_labels()
    if len(handles) > 1:
        ax.legend(fontsize=_FONTS["legend"], loc="best")


def layers_of(rows: Sequence[MetricRow], metric: str | None = None, split: str = "train") -> list[str]:
    """Layers in the order they first appear (the measurement writes them input side first)."""
    return list(dict.fromkeys(r.layer for r in rows if r.split == split and (metric is None or r.metric == metric)))


def series(rows: Sequence[MetricRow], metric: str, layer: str, split: str = "train") -> tuple[np.ndarray, np.ndarray]:
    """``(epochs, values)`` of one metric at one layer and split, sorted by epoch."""
    pts = sorted((r.epoch, r.value) for r in rows if r.split == split and r.layer == layer and r.metric == metric)
    if not pts:
        return np.zeros(0, dtype=int), np.zeros(0)
    e, v = zip(*pts, strict=True)
    return np.asarray(e), np.asarray(v, dtype=np.float64)


def _log_ok(metric: str, values: np.ndarray) -> bool:
    info = REGISTRY.get(metric)
    direction = info.direction if info else ("lower" if metric in ("loss", "error", "running_loss") else "none")
    finite = values[np.isfinite(values)]
    return direction == "lower" and finite.size > 0 and bool(np.all(finite > 0))


def log_ticks(ax: plt.Axes, axis: str = "y") -> None:
    """Give a log axis at least three tick labels where it spans less than three decades.

    Matplotlib labels only the powers of ten, so an axis from 0.02 to 2 shows two labels. The major ticks are
    the first of 1, {1, 2, 5}, {1, 2, 3, 5} or every integer multiple of the powers of ten that puts three
    ticks inside the axis, all labelled; minor ticks are off (they dominate layout time on log axes).
    """
    target = ax.yaxis if axis == "y" else ax.xaxis
    lo, hi = ax.get_ylim() if axis == "y" else ax.get_xlim()
    target.set_minor_locator(NullLocator())
    if not (lo > 0 and hi > lo):
        return
    powers = 10.0 ** np.arange(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
    for subs in ((1.0,), (1.0, 2.0, 5.0), (1.0, 2.0, 3.0, 5.0), tuple(float(k) for k in range(1, 10))):
        ticks = np.outer(powers, subs).ravel()
        if np.count_nonzero((ticks >= lo) & (ticks <= hi)) >= 3:
            break
    if subs != (1.0,):
        target.set_major_locator(LogLocator(base=10, subs=subs, numticks=100))
        target.set_major_formatter(LogFormatterSciNotation(labelOnlyBase=False, minor_thresholds=(math.inf, math.inf)))


#: The legend entry of the zero-error marker (a vertical line at the first epoch with zero training error).
ZERO_ERROR_LABEL = "zero training error"


def _decorate(ax: plt.Axes, metric: str, zero_epoch: int | None, log: bool, *, zero_label: bool = False) -> None:
    ax.set_xscale("symlog", linthresh=1.0)
    # margins computed on the linear axis (e.g. around an axvline drawn before the scale switch) would show
    # negative epochs on the symlog axis: epochs start at 0
    left, right = ax.get_xlim()
    if left < -0.3:
        ax.set_xlim(-0.3, right)
    if log:
        ax.set_yscale("log")
        log_ticks(ax)
    if zero_epoch is not None:  # in the legend of the first panel (zero_label), the same in every panel
        ax.axvline(zero_epoch, color="red", lw=1.2, ls="--", label=ZERO_ERROR_LABEL if zero_label else "_zero")
    ax.set_title(metric_title(metric), fontsize=_FONTS["title"])
    ax.set_xlabel("epoch", fontsize=_FONTS["label"])
    ax.set_ylabel(_ylabel(metric), fontsize=_FONTS["label"])
    ax.tick_params(labelsize=_FONTS["tick"])
    # minor ticks of log / symlog axes dominate matplotlib's layout time: major ticks and grid only
    ax.xaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_minor_locator(NullLocator())
    ax.grid(alpha=0.3, lw=0.4)


def _grid(n: int, ncols: int = 3) -> tuple[plt.Figure, np.ndarray]:
    ncols = min(ncols, max(n, 1))
    nrows = max(math.ceil(n / ncols), 1)  # no panel at all: one hidden axes, an empty figure
    fig, axes = plt.subplots(nrows, ncols, figsize=(MAX_WIDTH_IN * ncols / 3, 3.4 * nrows), squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, axes


def curves_figure(
    rows: Sequence[MetricRow],
    metrics: Sequence[str],
    *,
    split: str = "train",
    layers: Sequence[str] | None = None,
    zero_error_epoch: int | None = None,
    title: str | None = None,
) -> Figure:
    """One panel per metric (skipping metrics with no rows), one curve per layer."""
    metrics = [m for m in metrics if any(r.metric == m and r.split == split for r in rows)]
    fig, axes = _grid(len(metrics))
    for ax, metric in zip(axes.flat, metrics, strict=False):
        lays = [lay for lay in (layers or layers_of(rows, metric, split)) if series(rows, metric, lay, split)[0].size]
        cmap = plt.get_cmap("viridis")
        allv = []
        for i, lay in enumerate(lays):
            e, v = series(rows, metric, lay, split)
            allv.append(v)
            color = cmap(0.85 * (1 - i / max(len(lays) - 1, 1))) if len(lays) > 1 else "C0"
            ax.plot(e, v, marker="o", ms=2.5, lw=1.2, color=color, label=lay)
        log = _log_ok(metric, np.concatenate(allv) if allv else np.zeros(0))
        _decorate(ax, metric, zero_error_epoch, log, zero_label=ax is axes.flat[0])
        _legend(ax)
    if title:
        fig.suptitle(title, fontsize=_FONTS["title"])
    fig.tight_layout()
    return fig


def heatmap_figure(
    rows: Sequence[MetricRow],
    metrics: Sequence[str] = ("trace_ratio", "etf_gram_error", "ncc_accuracy"),
    *,
    split: str = "train",
    title: str | None = None,
) -> Figure:
    """Layer x epoch heatmaps (rows = layers, input side at the top; columns = measured epochs)."""
    metrics = [m for m in metrics if any(r.metric == m and r.split == split for r in rows)]
    fig, axes = plt.subplots(
        1, max(len(metrics), 1), figsize=(MAX_WIDTH_IN * min(max(len(metrics), 1), 3) / 3, 3.8), squeeze=False
    )
    for ax, metric in zip(axes.flat, metrics, strict=False):
        lays = layers_of(rows, metric, split)
        epochs = sorted({r.epoch for r in rows if r.split == split and r.metric == metric})
        col = {e: j for j, e in enumerate(epochs)}
        grid = np.full((len(lays), len(epochs)), np.nan)
        for i, lay in enumerate(lays):
            e, v = series(rows, metric, lay, split)
            for ee, vv in zip(e, v, strict=True):
                grid[i, col[int(ee)]] = vv
        log = _log_ok(metric, grid.ravel())
        shown = np.log10(grid) if log else grid
        im = ax.imshow(shown, aspect="auto", cmap="magma_r" if log else "viridis", interpolation="nearest")
        cb = fig.colorbar(im, ax=ax)
        cb.set_label(f"log10 {_ylabel(metric)}" if log else _ylabel(metric), fontsize=_FONTS["label"])
        cb.ax.tick_params(labelsize=_FONTS["tick"])
        ax.set_yticks(range(len(lays)), lays, fontsize=_FONTS["tick"])
        step = max(1, len(epochs) // 6)
        ax.set_xticks(range(0, len(epochs), step), [str(e) for e in epochs[::step]], fontsize=_FONTS["tick"])
        ax.set_xlabel("epoch", fontsize=_FONTS["label"])
        ax.set_title(metric_title(metric), fontsize=_FONTS["title"])
    if title:
        fig.suptitle(title, fontsize=_FONTS["title"])
    fig.tight_layout()
    return fig


def train_test_figure(
    rows: Sequence[MetricRow], metrics: Sequence[str], layer: str, *, zero_error_epoch: int | None = None
) -> Figure:
    """Train (solid) vs test (dashed) curves of ``metrics`` at ``layer``."""
    metrics = [m for m in metrics if series(rows, m, layer, "train")[0].size and series(rows, m, layer, "test")[0].size]
    fig, axes = _grid(len(metrics))
    for ax, metric in zip(axes.flat, metrics, strict=False):
        vals = []
        for split, ls in (("train", "-"), ("test", "--")):
            e, v = series(rows, metric, layer, split)
            vals.append(v)
            ax.plot(e, v, ls=ls, marker="o", ms=2.5, lw=1.2, label=split)
        _decorate(ax, metric, zero_error_epoch, _log_ok(metric, np.concatenate(vals)), zero_label=ax is axes.flat[0])
        _legend(ax)
    # layer names such as "layer3" already say "layer"
    fig.suptitle(f"train vs test at {layer}", fontsize=_FONTS["title"])
    fig.tight_layout()
    return fig


def decomposition_figure(
    rows: Sequence[MetricRow], *, split: str = "train", zero_error_epoch: int | None = None
) -> Figure:
    """[Han et al. 2022, Fig. 2]: the MSE loss and its decomposition L = L_NC1 + L_NC2/3 + L_perp on one log axis, and
    the
    proximity ratio L_perp / L_LS (the central-path approximation holds where it is small)."""
    fig, axes = _grid(2, ncols=2)
    fig.set_size_inches(MAX_WIDTH_IN * 2 / 3, 3.6)
    for key, label in (("L", "L"), ("L_NC1", "L_NC1"), ("L_NC23", "L_NC2/3"), ("L_perp", "L_perp"), ("L_LS", "L_LS")):
        e, v = series(rows, f"mse_{key}", OUTPUT_LAYER, split)
        if e.size:
            axes[0, 0].plot(e, np.maximum(v, 1e-300), marker="o", ms=2.5, lw=1.2, label=label)
    _decorate(axes[0, 0], "mse decomposition", zero_error_epoch, log=True, zero_label=True)
    axes[0, 0].set_title(f"MSE loss decomposition ({split})", fontsize=_FONTS["title"])
    axes[0, 0].set_ylabel("loss term", fontsize=_FONTS["label"])
    _legend(axes[0, 0])
    e, v = series(rows, "mse_proximity_ratio", OUTPUT_LAYER, split)
    axes[0, 1].plot(e, np.maximum(v, 1e-300), marker="o", ms=2.5, lw=1.2, color="C4")
    _decorate(axes[0, 1], "proximity", zero_error_epoch, log=True)
    axes[0, 1].set_title("L_perp / L_LS (off the central path)", fontsize=_FONTS["title"])
    axes[0, 1].set_ylabel("proximity ratio L_perp / L_LS", fontsize=_FONTS["label"])
    fig.tight_layout()
    return fig


def compare_figure(
    runs: Mapping[str, tuple[Sequence[MetricRow], int | None]],
    metrics: Sequence[str],
    layer: str,
    split: str = "train",
    *,
    legend_on_top: bool = False,
) -> Figure:
    """``runs``: label -> (rows, zero-error epoch); one panel per metric with one curve per run (and a dotted
    vertical line, in the run's colour, at its zero-error epoch; the legend says so). ``legend_on_top``: one
    legend for all panels above them, in columns, so that it is seen with the first row of panels (many runs
    with long labels: ``nclab compare``); otherwise each panel has its own."""
    from matplotlib.lines import Line2D

    fig, axes = _grid(len(metrics))
    marker = Line2D([], [], color="0.3", ls=":", lw=1.0, label=f"{ZERO_ERROR_LABEL} (dotted, run's colour)")
    for ax, metric in zip(axes.flat, metrics, strict=False):
        vals = []
        for i, (label, (rows, zero)) in enumerate(runs.items()):
            e, v = series(rows, metric, layer, split)
            vals.append(v)
            ax.plot(e, v, marker="o", ms=2.5, lw=1.2, color=f"C{i % 10}", label=label)
            if zero is not None:
                ax.axvline(zero, color=f"C{i % 10}", ls=":", lw=1.0)
        _decorate(ax, metric, None, _log_ok(metric, np.concatenate(vals) if vals else np.zeros(0)))
        if not legend_on_top:
            handles, _ = ax.get_legend_handles_labels()
            extra = [marker] if ax is axes.flat[0] and any(z is not None for _, z in runs.values()) else []
            if len(handles) + len(extra) > 1:
                ax.legend(handles=handles + extra, fontsize=_FONTS["legend"], loc="best")
    if legend_on_top and runs:
        handles, _ = axes.flat[0].get_legend_handles_labels()
        handles += [marker] if any(z is not None for _, z in runs.values()) else []
        _legend_on_top(fig, handles)
    else:
        fig.tight_layout()
    return fig


def _legend_on_top(fig: Figure, handles: list) -> None:
    """One legend above the panels: two columns when they fit the figure's width, else one; the figure is widened
    (up to :data:`MAX_WIDTH_IN`) for a legend wider than it, and made taller by the legend's height."""
    width, height = fig.get_size_inches()
    width = max(width, 8.0)
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]  # Agg's; the stubs type the base canvas
    for ncol in (2, 1) if len(handles) > 3 else (1,):
        legend = fig.legend(handles=handles, loc="upper center", ncol=ncol, fontsize=_FONTS["legend"], frameon=False)
        needed = legend.get_window_extent(renderer).width / fig.dpi + 0.3
        if needed <= width or ncol == 1:
            break
        legend.remove()
    width = min(max(width, needed), MAX_WIDTH_IN)
    top_in = legend.get_window_extent(renderer).height / fig.dpi + 0.2
    fig.set_size_inches(width, height + top_in)
    fig.tight_layout(rect=(0, 0, 1, height / (height + top_in)))


def depth_figure(rows: Sequence[MetricRow], *, split: str = "train", epochs: Sequence[int] | None = None) -> Figure:
    """[Wang et al. 2024, Fig. 3]: PFC1-3 of the measured layers against their relative depth (markers) and the geodesic
    model's prediction at the same depths (dashed), one colour per epoch (default: the first, a middle and the
    last epoch with ``relative_depth`` rows)."""
    have = sorted({r.epoch for r in rows if r.split == split and r.metric == "relative_depth"})
    if epochs is None:
        epochs = sorted({have[0], have[len(have) // 2], have[-1]}) if have else []
    panels: tuple[tuple[str, str, str], ...] = (
        ("trace_ratio", "pfc1", "PFC1 = Tr S_W / Tr S_B"),
        ("etf_gram_error", "pfc2", "PFC2 (ETF Gram error)"),
    )
    panels += (("ncc_accuracy", "pfc3", "PFC3 (NCC accuracy)"),)
    at_epoch: dict[int, dict[tuple[str, str], float]] = {e: {} for e in epochs}
    for r in rows:  # one pass over the rows
        if r.split == split and r.epoch in at_epoch:
            at_epoch[r.epoch][(r.layer, r.metric)] = r.value
    fig, axes = _grid(len(panels))
    for ax, (metric, geo, title) in zip(axes.flat, panels, strict=False):
        vals = []
        for i, epoch in enumerate(epochs):
            at = at_epoch[epoch]
            layers = [lay for (lay, m) in at if m == "relative_depth"]
            t = np.array([at[(lay, "relative_depth")] for lay in layers])
            measured = np.array([at.get((lay, metric), np.nan) for lay in layers])
            predicted = np.array([at.get((lay, f"geodesic_{geo}"), np.nan) for lay in layers])
            ax.plot(t, measured, marker="o", ms=3, lw=1.0, color=f"C{i}", label=f"epoch {epoch} measured")
            ax.plot(t, predicted, ls="--", lw=1.0, color=f"C{i}", label=f"epoch {epoch} geodesic")
            vals += [measured, predicted]
        values = np.concatenate(vals) if vals else np.zeros(0)
        if metric != "ncc_accuracy" and _log_ok(metric, values):
            ax.set_yscale("log")
        ax.set_xlabel("relative depth t_l", fontsize=_FONTS["label"])
        ax.set_ylabel(_ylabel(metric), fontsize=_FONTS["label"])
        ax.tick_params(labelsize=_FONTS["tick"])
        ax.set_title(title, fontsize=_FONTS["title"])
        ax.grid(alpha=0.3)
        _legend(ax)
    fig.tight_layout()
    return fig


def profile_epochs(rows: Sequence[MetricRow], metric: str, zero_error_epoch: int | None = None) -> list[int]:
    """The default epochs of :func:`layer_profile_figure`: the first measured epoch, the zero-error epoch (when
    reached and measured) and the last, of ``metric`` on the train split.

    Examples
    --------
    >>> rows = [MetricRow(e, "train", "fc", "nc1", 1.0) for e in (0, 5, 9, 20)]
    >>> profile_epochs(rows, "nc1", 9), profile_epochs(rows, "nc1", None)
    ([0, 9, 20], [0, 20])
    """
    measured = sorted({r.epoch for r in rows if r.metric == metric and r.split == "train"})
    if not measured:
        return []
    chosen = {measured[0], measured[-1]}
    if zero_error_epoch is not None and zero_error_epoch in measured:
        chosen.add(zero_error_epoch)
    return sorted(chosen)


def layer_profile_figure(
    runs: Mapping[str, tuple[Sequence[MetricRow], int | None]],
    metrics: Sequence[str] = ("nc1", "trace_ratio", "etf_gram_error", "ncc_accuracy"),
    *,
    epochs: Sequence[int] | None = None,
    split: str = "train",
) -> Figure:
    """Each metric against depth (the measured layers, input side first) at chosen epochs: the NC1-vs-depth plot
    of progressive collapse ([Wang et al. 2024, Fig. 3]).

    ``runs``: label -> (rows, zero-error epoch); one panel per run and metric (metrics measured at fewer than
    two layers are left out), one curve per epoch, light to dark from the first to the last. ``epochs``: the
    same for every panel; default :func:`profile_epochs` of each run (the first, the zero-error and the last
    measured epoch).
    """
    panels = []
    for label, (rows, zero) in runs.items():
        for metric in metrics:
            layers = [lay for lay in layers_of(rows, metric, split) if lay != OUTPUT_LAYER]
            if len(layers) > 1:
                panels.append((label, rows, zero, metric, layers))
    fig, axes = _grid(len(panels))
    for ax, (label, rows, zero, metric, layers) in zip(axes.flat, panels, strict=False):
        at = {(r.epoch, r.layer): r.value for r in rows if r.metric == metric and r.split == split}
        chosen = [e for e in (epochs if epochs is not None else profile_epochs(rows, metric, zero))]
        cmap = plt.get_cmap("viridis")
        values = []
        for i, epoch in enumerate(chosen):
            y = np.array([at.get((epoch, lay), np.nan) for lay in layers])
            values.append(y)
            name = f"epoch {epoch}" + (" (zero error)" if epoch == zero else "")
            color = cmap(0.85 * (1 - i / max(len(chosen) - 1, 1)))
            ax.plot(range(1, len(layers) + 1), y, marker="o", ms=3.5, lw=1.3, color=color, label=name)
        if _log_ok(metric, np.concatenate(values) if values else np.zeros(0)):
            ax.set_yscale("log")
            log_ticks(ax)
        ax.set_xticks(range(1, len(layers) + 1), layers, fontsize=_FONTS["tick"])
        ax.set_xlabel("layer (input side first)", fontsize=_FONTS["label"])
        ax.set_ylabel(_ylabel(metric), fontsize=_FONTS["label"])
        ax.set_title(f"{label}: {metric_title(metric)}" if label else metric_title(metric), fontsize=_FONTS["title"])
        ax.tick_params(labelsize=_FONTS["tick"])
        ax.yaxis.set_minor_locator(NullLocator())
        ax.grid(alpha=0.3, lw=0.4)
        _legend(ax)
    fig.tight_layout()
    return fig
