"""``report.html`` of a run directory (``nclab report RUN_DIR``; a training run, or a monitor's or callback's):
figures first (collapse curves at the penultimate layer, loss and error, per-layer curves and layer x epoch
heatmaps, train vs test), then the summary and last-epoch tables and the timings, and the resolved config folded.
Self-contained (figures inlined as base64 PNG). The run is read once (:func:`nclab.io.rundir.read_run`, a
:class:`~nclab.io.rundir.RunRecord`); :func:`run_sections` and :func:`run_figures` summarise it, and
:func:`write_run_report` lays them out."""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from pathlib import Path

import yaml
from matplotlib.figure import Figure

from nclab.io.run_table import OUTPUT_LAYER, MetricRow, relabel_output
from nclab.io.rundir import RunDir, RunRecord, read_run
from nclab.report.figures import (
    curves_figure,
    decomposition_figure,
    depth_figure,
    heatmap_figure,
    layers_of,
    series,
    train_test_figure,
)
from nclab.report.html import metrics_table_html, write_report

__all__ = ["PENULTIMATE_METRICS", "collapse_summary", "run_figures", "run_sections", "write_run_report"]

#: Metrics plotted at the penultimate layer (NC1-NC4 of [Han et al. 2022] / [Papyan et al. 2020], VCI of
#: [Xu & Liu 2023], CDNV, cosine).
PENULTIMATE_METRICS = (
    "nc1",
    "vci",
    "trace_ratio",
    "cdnv",
    "within_class_cosine",
    "equinorm",
    "equiangularity",
    "max_angle",
    "etf_gram_error",
    "self_duality",
    "ncc_mismatch",
    "gnc1",
    "gnc3",
)
#: Metrics plotted per layer ([Wang et al. 2024]: PFC1-3) and as heatmaps.
LAYER_METRICS = ("trace_ratio", "etf_gram_error", "ncc_accuracy", "cdnv")


def collapse_summary(rows: Sequence[MetricRow], penultimate: str, zero_epoch: int | None) -> dict[str, float]:
    """NC1 and the train / test error at the zero-error epoch and at the last epoch, and the NC1 ratio."""
    out: dict[str, float] = {}
    e, v = series(rows, "nc1", penultimate)
    if e.size:
        out["nc1 first measured"] = float(v[0])
        out["nc1 last"] = float(v[-1])
        if zero_epoch is not None and zero_epoch in set(e.tolist()):
            nz = float(v[list(e).index(zero_epoch)])
            out["nc1 at zero-error epoch"] = nz
            if v[-1] > 0:
                out["nc1 zero-error / last"] = nz / float(v[-1])
                out["orders of magnitude after TPT"] = math.log10(nz / float(v[-1])) if nz > 0 else math.nan
    for split in ("train", "test"):
        e, v = series(rows, "error", OUTPUT_LAYER, split)
        if e.size:
            out[f"{split} error last"] = float(v[-1])
            if zero_epoch is not None and zero_epoch in set(e.tolist()):
                out[f"{split} error at zero-error epoch"] = float(v[list(e).index(zero_epoch)])
    return out


def _record(run: str | Path | RunRecord) -> RunRecord:
    record = run if isinstance(run, RunRecord) else read_run(run)
    if record.kind not in ("train", "monitor"):
        raise FileNotFoundError(f"{record.path} is a {record.kind} folder, not a run directory (no metrics.csv)")
    return record


def write_run_report(run: str | Path | RunRecord, title: str | None = None) -> Path:
    """Write ``report.html`` into the run directory ``run`` (a folder, read with
    :func:`~nclab.io.rundir.read_run`, or its :class:`~nclab.io.rundir.RunRecord`): :func:`run_sections`, then
    :func:`run_figures`, then the resolved config folded."""
    record = _record(run)
    cfg = record.config
    title = (
        title
        or f"nclab run {cfg.get('name', record.path.name)}: {cfg.get('data', {}).get('name', '?')}, "
        f"{cfg.get('model', {}).get('name', '?')}, loss {cfg.get('loss', {}).get('name', '?')}"
    )
    config = yaml.safe_dump(cfg, sort_keys=False) if cfg else ""
    folded = [("Config (resolved)", f"<pre>{html.escape(config)}</pre>")] if config else []
    return write_report(RunDir(record.path).report, title, run_sections(record), run_figures(record), folded)


def run_sections(record: RunRecord) -> list[tuple[str, str]]:
    """The report's tables of one run: the summary (zero-error epoch, run id, NC1 before and after it), every
    metric at the last epoch at the penultimate layer, the timings."""
    rows, summary, pen, zero = record.rows, record.summary, record.penultimate, record.zero_error_epoch
    stats = collapse_summary(rows, pen, zero) if pen else {}
    head = (
        f"<p>First epoch with zero training error (eval mode): <b>{zero if zero is not None else 'not reached'}</b>"
        f" (red dashed line in the figures). Run id: <code>{html.escape(record.run_id)}</code>. "
        f"Penultimate layer: <code>{html.escape(str(pen))}</code>. "
        f"Measured epochs: {', '.join(str(e) for e in summary.get('measured_epochs', []))}.</p>"
        "<p class=note>Curves are eval-mode measurements over the training split (test: its own class statistics, "
        "NCC against the training means). Lower is more collapsed except ncc_accuracy and within_class_cosine.</p>"
    )
    sections = [("Summary", head + metrics_table_html(stats))]
    if pen:
        last_epoch = max((r.epoch for r in rows if r.layer == pen and r.split == "train"), default=None)
        last_rows = {r.metric: r.value for r in rows if r.epoch == last_epoch and r.split == "train" and r.layer == pen}
        sections.append(
            (f"All metrics at the last epoch ({last_epoch}), layer {pen}, train split", metrics_table_html(last_rows))
        )
    t = summary.get("timings", {})
    if t:
        sections.append(("Timings", metrics_table_html({k: float(v) for k, v in t.items()})))
    return sections


def run_figures(record: RunRecord) -> list[tuple[str, Figure]]:
    """The report's figures of one run, captioned: the paper-style panels at the penultimate layer first, then
    loss and error, the MSE decomposition, per-layer curves and heatmaps, depth, train vs test."""
    rows, pen, zero = record.rows, record.penultimate, record.zero_error_epoch
    figures: list[tuple[str, Figure]] = []
    if pen:  # the paper-style panels first
        figures.append(
            (
                f"Collapse metrics at the penultimate layer ({pen}), train split; red dashed line: zero-error epoch",
                curves_figure(rows, PENULTIMATE_METRICS, layers=[pen], zero_error_epoch=zero),
            )
        )
    figures.append(
        (
            "Loss and error (output layer): eval-mode loss / error at measured epochs, running values every epoch",
            curves_figure(
                rows,
                ["loss", "error", "running_loss", "running_error", "lr"],
                layers=[OUTPUT_LAYER],
                zero_error_epoch=zero,
            ),
        )
    )
    if any(r.metric == "mse_L_NC1" for r in rows):
        figures.append(
            (
                "MSE loss decomposition at the penultimate layer [Han et al. 2022, Fig. 2]: "
                "L = L_NC1 + L_NC2/3 + L_perp",
                decomposition_figure(rows, zero_error_epoch=zero),
            )
        )
    layers = [lay for lay in layers_of(rows, "trace_ratio") if lay != OUTPUT_LAYER]
    if len(layers) > 1:
        figures.append(
            (
                "Per-layer metrics, one curve per layer (input side light, penultimate dark), train split",
                curves_figure(rows, LAYER_METRICS, zero_error_epoch=zero),
            )
        )
        figures.append(
            (
                "Layer x epoch heatmaps of PFC1 (trace ratio), PFC2 (ETF Gram error), PFC3 (NCC accuracy), train split",
                heatmap_figure(rows),
            )
        )
    if any(r.metric == "relative_depth" for r in rows):
        figures.append(
            (
                "[Wang et al. 2024, Fig. 3]: PFC1-3 of the measured layers at their relative depth (markers) "
                "and the geodesic "
                "model's straight line between the first and last of them (dashed), train split",
                depth_figure(rows),
            )
        )
    if pen and any(r.split == "test" for r in rows):
        merged = relabel_output(rows, pen)
        figures.append(
            (
                "Train (solid) vs test (dashed) at the penultimate layer, with the network's error and loss",
                train_test_figure(
                    merged,
                    ["nc1", "trace_ratio", "etf_gram_error", "ncc_accuracy", "error", "loss"],
                    pen,
                    zero_error_epoch=zero,
                ),
            )
        )
    return figures
