"""Commands ``experiment list`` and ``experiment run NAME`` (the Typer group :data:`app`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from nclab.cli.common import OutputFormat, console, emit, err_console, make_app, user_errors

__all__ = ["app"]

app = make_app("experiment", "Registered reproductions of the papers' experiments.")


@app.command("list")
def experiment_list() -> None:
    """List the registered experiments with the expected wall time of each scale on 2 CPU cores (measured;
    "not timed" where no measurement was made)."""
    from nclab.experiments import list_experiments

    table = Table(title="nclab experiments")
    for col in ("name", "paper", "scale: expected time (2 cores)", "summary"):
        table.add_column(col)
    for exp in list_experiments():
        times = "\n".join(f"{s}: {exp.durations.get(s, 'not timed')}" for s in exp.scales)
        table.add_row(exp.name, exp.paper, times, exp.summary)
    console.print(table)


@app.command("run")
def experiment_run(
    name: Annotated[str, typer.Argument(help="experiment name (see `nclab experiment list`)")],
    scale: Annotated[str, typer.Option(help="tiny | cpu | paper")] = "cpu",
    out: Annotated[Path | None, typer.Option(help="output folder (default runs/experiments/NAME-SCALE)")] = None,
    seed: Annotated[int, typer.Option(help="random seed")] = 0,
    fmt: Annotated[
        OutputFormat | None,
        typer.Option("--format", "-f", help="print the summary on stdout: table, json or csv (default: nothing)"),
    ] = None,
) -> None:
    """Run one registered experiment and write its tables, figures and report (report.html in the output
    folder). Progress and the output folder go to stderr; the summary goes to stdout only with -f."""
    from nclab.experiments import run

    out = out or Path("runs/experiments") / f"{name}-{scale}"
    with user_errors():
        summary = run(name, out, scale=scale, seed=seed)
    if fmt is OutputFormat.json:
        emit([], fmt, data=summary)
    elif fmt is not None:
        emit([{"quantity": str(k), "value": v} for k, v in summary.items()], fmt, f"{name} ({scale})")
    err_console.print(f"outputs in {out} (report: {out / 'report.html'})", markup=False, highlight=False)
