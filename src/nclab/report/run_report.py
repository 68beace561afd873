"""``report.html`` of a training run directory (``nclab report RUN_DIR``): figures first (collapse curves at the
penultimate layer, loss and error, per-layer curves and layer x epoch heatmaps, train vs test), then the summary
and last-epoch tables and the timings, and the resolved config folded. Self-contained (figures inlined as base64
PNG)."""

from __future__ import annotations

import html
import json
import math
from collections.abc import Sequence
from pathlib import Path

from matplotlib.figure import Figure

from nclab.io.run_table import OUTPUT_LAYER, MetricRow, read_metrics, relabel_output
from nclab.io.yaml_io import load_yaml
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

__all__ = ["PENULTIMATE_METRICS", "collapse_summary", "write_run_report"]

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


def write_run_report(run_dir: str | Path, title: str | None = None) -> Path:
    """Write ``RUN_DIR/report.html`` from ``metrics.csv``, ``summary.json`` and ``config.yaml``."""
    run_dir = Path(run_dir)
    if not (run_dir / "metrics.csv").is_file():
        raise FileNotFoundError(f"{run_dir} has no metrics.csv: not a training run directory")
    rows = read_metrics(run_dir)
    summary = json.loads((run_dir / "summary.json").read_text()) if (run_dir / "summary.json").is_file() else {}
    config = (run_dir / "config.yaml").read_text() if (run_dir / "config.yaml").is_file() else ""
    cfg = load_yaml(config, source=str(run_dir / "config.yaml")) or {}
    zero = summary.get("zero_error_epoch")
    if zero is None:  # rows without a summary.json (a user's own table): the first epoch they show at zero error
        zero = next((e for e, v in zip(*series(rows, "error", OUTPUT_LAYER), strict=True) if v == 0.0), None)
        zero = None if zero is None else int(zero)
    pen = summary.get("penultimate") or next((r.layer for r in rows if r.metric == "nc1"), None)
    name = cfg.get("name", run_dir.name)
    title = (
        title
        or f"nclab run {name}: {cfg.get('data', {}).get('name', '?')}, {cfg.get('model', {}).get('name', '?')}, "
        f"loss {cfg.get('loss', {}).get('name', '?')}"
    )
    stats = collapse_summary(rows, pen, zero) if pen else {}
    head = (
        f"<p>First epoch with zero training error (eval mode): <b>{zero if zero is not None else 'not reached'}</b>"
        f" (red dashed line in the figures). Run id: <code>{html.escape(str(summary.get('run_id', '-')))}</code>. "
        f"Penultimate layer: <code>{html.escape(str(pen))}</code>. "
        f"Measured epochs: {', '.join(str(e) for e in summary.get('measured_epochs', []))}.</p>"
        "<p class=note>Curves are eval-mode measurements over the training split (test: its own class statistics, "
        "NCC against the training means). Lower is more collapsed except ncc_accuracy and within_class_cosine.</p>"
    )
    sections = [("Summary", head + metrics_table_html(stats))]
    last_rows = {}
    if pen:
        last_epoch = max((r.epoch for r in rows if r.layer == pen and r.split == "train"), default=None)
        last_rows = {r.metric: r.value for r in rows if r.epoch == last_epoch and r.split == "train" and r.layer == pen}
        sections.append(
            (f"All metrics at the last epoch ({last_epoch}), layer {pen}, train split", metrics_table_html(last_rows))
        )
    t = summary.get("timings", {})
    if t:
        sections.append(("Timings", metrics_table_html({k: float(v) for k, v in t.items()})))

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
    folded = [("Config (resolved)", f"<pre>{html.escape(config)}</pre>")] if config else []
    return write_report(run_dir / "report.html", title, sections, figures, folded)
