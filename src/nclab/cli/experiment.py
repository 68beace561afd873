"""Commands ``experiment list`` and ``experiment run NAME`` (the Typer group :data:`app`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Literal

import typer
from rich.table import Table

from nclab.cli.common import console, err_console, make_app, user_errors

__all__ = ["app"]

app = make_app("experiment", "Registered reproductions of the papers' experiments.")


@app.command("list")
def experiment_list() -> None:
    """List the registered experiments."""
    from nclab.experiments import list_experiments

    table = Table(title="nclab experiments")
    for col in ("name", "paper", "scales", "summary"):
        table.add_column(col)
    for exp in list_experiments():
        table.add_row(exp.name, exp.paper, ", ".join(exp.scales), exp.summary)
    console.print(table)


@app.command("run")
def experiment_run(
    name: Annotated[str, typer.Argument(help="experiment name (see `nclab experiment list`)")],
    scale: Annotated[str, typer.Option(help="tiny | cpu | paper")] = "cpu",
    out: Annotated[Path | None, typer.Option(help="output folder (default runs/experiments/NAME-SCALE)")] = None,
    seed: Annotated[int, typer.Option(help="random seed")] = 0,
    format: Annotated[
        Literal["table", "json"] | None,
        typer.Option("--format", "-f", help="print the summary on stdout as a table or as JSON (default: none)"),
    ] = None,
) -> None:
    """Run one registered experiment and write its tables, figures and report (report.html in the output
    folder). Progress and the output folder go to stderr; the summary goes to stdout only with -f."""
    from nclab.experiments import run

    out = out or Path("runs/experiments") / f"{name}-{scale}"
    with user_errors():
        summary = run(name, out, scale=scale, seed=seed)
    if format == "json":
        typer.echo(json.dumps(summary, default=float, indent=2))
    elif format == "table":
        table = Table(title=f"{name} ({scale})")
        table.add_column("quantity")
        table.add_column("value", justify="right")
        for k, v in summary.items():
            table.add_row(str(k), f"{v:.4g}" if isinstance(v, float) else str(v))
        console.print(table)
    err_console.print(f"outputs in {out} (report: {out / 'report.html'})", markup=False, highlight=False)
