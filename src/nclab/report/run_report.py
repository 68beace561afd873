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
    layer_profile_figure,
    layers_of,
    profile_epochs,
    series,
    train_test_figure,
)
from nclab.report.html import metrics_table_html, write_report
from nclab.validation import check_output_dir

__all__ = [
    "PENULTIMATE_METRICS",
    "collapse_summary",
    "depth_caption",
    "run_figures",
    "run_sections",
    "run_title",
    "write_run_report",
    "zero_error_text",
]

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


_WRITERS = {
    "monitor": "a CollapseMonitor",
    "lightning": "the Lightning CollapseCallback",
    "hf": "the Hugging Face CollapseCallback",
    "train": "nclab train",
}


def run_title(record: RunRecord) -> str:
    """The report's title: the run's name and what is known of it (dataset, model and loss of a training run;
    the model class and the writer of a monitor's run), no placeholder for what is not."""
    cfg = record.config
    name = cfg.get("name") or record.path.name
    parts = [v for v in (cfg.get("data", {}).get("name"), cfg.get("model", {}).get("name")) if v]
    parts += [f"loss {cfg['loss']['name']}"] if cfg.get("loss", {}).get("name") else []
    if not parts:
        saved = RunDir(record.path).saved_identity()
        writer = _WRITERS.get(saved.writer, saved.writer) if saved else "a CollapseMonitor or callback"
        model = f"{saved.name} " if saved and saved.hashed is not None else ""
        k = record.identity.get("num_classes")
        parts = [f"{model}measured by {writer}"] + ([f"K = {k}"] if k else [])
    return f"nclab run {name}: {', '.join(parts)}"


def write_run_report(
    run: str | Path | RunRecord,
    title: str | None = None,
    *,
    depth_epochs: Sequence[int] | None = None,
    out: str | Path | None = None,
) -> Path:
    """Write ``report.html`` into the run directory ``run`` (or into the folder ``out``).

    The report holds :func:`run_sections`, then :func:`run_figures`, then the resolved config folded.

    Parameters
    ----------
    run : str or Path or RunRecord
        A run folder (read with :func:`~nclab.io.rundir.read_run`) or its :class:`~nclab.io.rundir.RunRecord`.
    title : str, optional
        The page's title; default :func:`run_title` of the run.
    depth_epochs : sequence of int, optional
        The epochs of the metrics-vs-depth figure.
    out : str or Path, optional
        The folder to write ``report.html`` into (created; e.g. for a run on a read-only mount). Default: the run
        directory.

    Returns
    -------
    Path
        The report written, ``<run>/report.html`` (``<out>/report.html``).

    Raises
    ------
    PermissionError
        The destination folder is not writable (checked before the figures are drawn; nothing is written).

    Examples
    --------
    >>> import tempfile
    >>> from nclab.io import MetricRow, write_metrics
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     _ = write_metrics([MetricRow(e, "train", "fc", "nc1", 1.0 / (e + 1)) for e in (0, 1)], tmp)
    ...     out = write_run_report(tmp)
    ...     out.name, "<img" in out.read_text()
    ('report.html', True)
    """
    record = _record(run)
    target = RunDir(record.path).report if out is None else Path(out) / RunDir.REPORT
    if out is None:
        try:
            check_output_dir(target.parent, name="run directory")
        except PermissionError as err:
            raise PermissionError(
                f"{err}: report.html cannot be written there; write it to another folder with out= "
                "(`nclab report RUN --out DIR`)"
            ) from None
    else:
        check_output_dir(target.parent, name="out", create=False)
    cfg = record.config
    config = yaml.safe_dump(cfg, sort_keys=False) if cfg else ""
    folded = [("Config (resolved)", f"<pre>{html.escape(config)}</pre>")] if config else []
    figures = run_figures(record, depth_epochs=depth_epochs)
    if out is not None:
        check_output_dir(target.parent, name="out", create=True)
    return write_report(target, title or run_title(record), run_sections(record), figures, folded)


def zero_error_text(record: RunRecord) -> str:
    """The zero-error epoch in words: the epoch, ``not reached`` (the training error was measured and never 0)
    or ``not measured`` (the table has no training-error rows)."""
    if record.zero_error_epoch is not None:
        return str(record.zero_error_epoch)
    measured = any(r.metric == "error" and r.layer == OUTPUT_LAYER and r.split == "train" for r in record.rows)
    return "not reached" if measured else "not measured (no training-error rows)"


def _epochs_text(epochs: Sequence[int]) -> str:
    """``0, 1, 2, 5, 10`` (at most 12 listed: the first 6, ``...``, the last 5) or ``none``."""
    shown = [str(e) for e in epochs]
    if len(shown) > 12:
        shown = [*shown[:6], "...", *shown[-5:]]
    return f"{len(epochs)} ({', '.join(shown)})" if shown else "none"


def run_sections(record: RunRecord) -> list[tuple[str, str]]:
    """The report's tables of one run: the summary (zero-error epoch, run id, NC1 before and after it), every
    metric at the last epoch at the penultimate layer, the timings."""
    rows, summary, pen, zero = record.rows, record.summary, record.penultimate, record.zero_error_epoch
    stats = collapse_summary(rows, pen, zero) if pen else {}
    epochs = summary.get("measured_epochs") or sorted({r.epoch for r in rows})
    marker = " (red dashed line in the figures)" if zero is not None else ""
    penultimate = f"<code>{html.escape(str(pen))}</code>" if pen else "not known (no nc1 rows, no summary.json)"
    head = (
        f"<p>First epoch with zero training error (eval mode): <b>{html.escape(zero_error_text(record))}</b>{marker}. "
        f"Run id: <code>{html.escape(record.run_id)}</code>. Penultimate layer: {penultimate}. "
        f"Measured epochs: {_epochs_text(epochs)}.</p>"
        "<p class=note>Curves are eval-mode measurements over the training split (test: its own class statistics, "
        "NCC against the training means). Lower is more collapsed except ncc_accuracy and within_class_cosine. "
        "Per-layer figures follow the penultimate-layer ones.</p>"
    )
    table = metrics_table_html(stats) if stats else "<p>No NC1 or error rows to summarise.</p>"
    sections = [("Summary", head + table)]
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


def depth_caption(rows: Sequence[MetricRow], epochs: Sequence[int] | None, zero: int | None) -> str:
    """The caption of :func:`~nclab.report.figures.layer_profile_figure` in a report: the epochs shown, and,
    where NC1 itself was measured at one layer only, how to measure it at every layer."""
    chosen = list(epochs) if epochs is not None else profile_epochs(rows, "trace_ratio", zero)
    nc1_layers = len(layers_of(rows, "nc1"))
    how = (
        ""
        if nc1_layers > 1
        else "; NC1 = tr(Sw Sb+)/K is measured at the penultimate layer only (measure.full_layers: all, or "
        "CollapseMonitor(track='full'), measures it at every layer): its family is shown by Tr Sw / Tr Sb (PFC1)"
    )
    return (
        f"Collapse metrics against depth at epochs {', '.join(map(str, chosen))} (light to dark), train split"
        f" [Wang et al. 2024, Fig. 3]{how}"
    )


def run_figures(record: RunRecord, *, depth_epochs: Sequence[int] | None = None) -> list[tuple[str, Figure]]:
    """The report's figures of one run, captioned: the paper-style panels at the penultimate layer first, then
    loss and error, the MSE decomposition, metrics against depth at ``depth_epochs`` (default: the first, the
    zero-error and the last epoch), per-layer curves and heatmaps, the geodesic model, train vs test."""
    rows, pen, zero = record.rows, record.penultimate, record.zero_error_epoch
    if depth_epochs is not None:
        measured = sorted({r.epoch for r in rows if r.split == "train" and r.layer != OUTPUT_LAYER})
        missing = sorted(set(depth_epochs) - set(measured))
        if missing:
            raise ValueError(
                f"no measurement at epoch(s) {', '.join(map(str, missing))} of {record.path}: its measured epochs "
                f"are {', '.join(map(str, measured))}"
            )
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
            (depth_caption(rows, depth_epochs, zero), layer_profile_figure({"": (rows, zero)}, epochs=depth_epochs))
        )
        per_layer = [m for m in ("nc1", *LAYER_METRICS) if m != "nc1" or len(layers_of(rows, "nc1")) > 1]
        figures.append(
            (
                "Per-layer metrics, one curve per layer (input side light, penultimate dark), train split",
                curves_figure(rows, per_layer, zero_error_epoch=zero),
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
