"""Commands ``experiment list`` and ``experiment run NAME`` (the Typer group :data:`app`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from nclab.cli.common import console, fail, make_app

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
) -> None:
    """Run one registered experiment and write its tables, figures and report."""
    from nclab.experiments import run

    out = out or Path("runs/experiments") / f"{name}-{scale}"
    try:
        summary = run(name, out, scale=scale, seed=seed)
    except (KeyError, ValueError) as err:
        fail(err)
    console.print_json(json.dumps(summary, default=float))
    console.print(f"outputs in [bold]{out}[/bold]")
