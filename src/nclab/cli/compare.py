"""Command ``nclab compare RUN_OR_SWEEP_DIR... [--metric M ...] [--layer L] [--split S] [--out FILE.html]``
(:func:`nclab.report.compare.write_compare_report`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from nclab.cli.common import (
    OutputFormat,
    emit,
    err_console,
    format_option,
    out_option,
    user_errors,
    warnings_as_notes,
)

__all__ = ["compare_command"]


def compare_command(
    paths: Annotated[list[Path], typer.Argument(help="run directories and/or sweep directories")],
    metric: Annotated[
        list[str] | None,
        typer.Option("--metric", "-m", help="metric to overlay (repeatable; default nc1)", metavar="<str>"),
    ] = None,
    layer: Annotated[
        str, typer.Option(help="layer name, 'penultimate' (each run's own) or 'output' (loss, error)")
    ] = "penultimate",
    split: Annotated[str, typer.Option(help="train or test")] = "train",
    out: Annotated[Path, out_option("HTML file; the table of runs goes beside it as .csv")] = Path("runs/compare.html"),
    fmt: Annotated[OutputFormat, format_option()] = OutputFormat.table,
) -> None:
    """Overlay a metric of many runs in one HTML report and print the table of the runs.

    Each panel has a curve per run, labelled by the config keys that differ between the runs, and the run's
    zero-error epoch marked. The table (run id, the differing keys, zero-error epoch, the last value of each
    metric) is printed and written as .csv beside the HTML. A sweep's trial without a table is named in a note;
    a run with an epoch measured twice is refused."""
    from nclab.report.compare import display_rows, load_comparison, write_comparison

    with user_errors(), warnings_as_notes():  # a sweep's trial that cannot be read is named, not dropped silently
        comparison = load_comparison(paths, metrics=metric or ["nc1"], layer=layer, split=split)
        html_path, csv_path = write_comparison(comparison, out)
    if fmt is OutputFormat.table:
        emit(display_rows(comparison.table, runs=comparison.runs), fmt, f"{len(comparison.runs)} runs compared")
    else:  # the CSV's columns and values (empty: not reached / not measured)
        emit(comparison.table, fmt)
    err_console.print(f"comparison written to {html_path} (table: {csv_path})", markup=False, highlight=False)
