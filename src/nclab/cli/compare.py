"""Command ``nclab compare RUN_OR_SWEEP_DIR... [--metric M ...] [--layer L] [--split S] [--out compare.html]``
(:func:`nclab.report.compare.write_compare_report`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from nclab.cli.common import err_console, user_errors, warnings_as_notes

__all__ = ["compare_command"]


def compare_command(
    paths: Annotated[list[Path], typer.Argument(help="run directories and/or sweep directories")],
    metric: Annotated[
        list[str] | None, typer.Option("--metric", "-m", help="metric to overlay (repeatable; default nc1)")
    ] = None,
    layer: Annotated[
        str, typer.Option(help="layer name, 'penultimate' (each run's own) or 'output' (loss, error)")
    ] = "penultimate",
    split: Annotated[str, typer.Option(help="train or test")] = "train",
    out: Annotated[Path, typer.Option(help="HTML file; the table of runs goes beside it as .csv")] = Path(
        "compare.html"
    ),
) -> None:
    """Overlay a metric of many runs (zero-error epochs marked per run, legend from the config keys that differ)
    and write a tidy table of the runs (run id and the differing keys as columns) as .csv beside the HTML. A
    sweep's trial without a table is named in a note; a run with an epoch measured twice is refused."""
    from nclab.report.compare import write_compare_report

    with user_errors(), warnings_as_notes():  # a sweep's trial that cannot be read is named, not dropped silently
        html_path, csv_path = write_compare_report(paths, out, metrics=metric or ["nc1"], layer=layer, split=split)
    err_console.print(f"comparison written to {html_path} (table: {csv_path})", markup=False, highlight=False)
