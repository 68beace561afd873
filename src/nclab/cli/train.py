"""Commands ``train``, ``report`` and ``demo`` (the Typer group :data:`app`).

:mod:`nclab.cli` mounts them at the top level: ``nclab train CONFIG.yaml [--set key=value ...] [--out DIR]
[--resume]``, ``nclab report RUN_DIR`` and ``nclab demo [--out DIR] [--epochs E]``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from nclab.cli.common import console, err_console, fail, make_app

__all__ = ["app", "demo_command", "report_command", "train_command"]

app = make_app("train", "Train to the terminal phase and measure collapse; build run reports.")


@app.command("train")
def train_command(
    config: Annotated[Path, typer.Argument(help="YAML run config (see configs/ and docs/training.md)")],
    set_: Annotated[
        list[str] | None, typer.Option("--set", "-s", help="override a config key: key.path=value (repeatable)")
    ] = None,
    out: Annotated[Path | None, typer.Option(help="run directory (default runs/<config name>)")] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="continue the run in --out from its last checkpoint")
    ] = False,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="replace an existing run in --out")] = False,
    progress: Annotated[bool, typer.Option(help="show progress bars")] = True,
) -> None:
    """Train a network past zero training error, measuring every collapse metric per epoch, layer and split."""
    from nclab.data import CorruptDatasetError, DatasetNotFoundError
    from nclab.train.config import ConfigError, load_config
    from nclab.train.trainer import train

    try:
        cfg = load_config(config, set_ or [])
        run_dir = out or Path("runs") / cfg.name
        result = train(cfg, run_dir, resume=resume, overwrite=overwrite, progress=progress, console=err_console)
    except (
        ConfigError,
        FileNotFoundError,
        FileExistsError,
        DatasetNotFoundError,
        CorruptDatasetError,
        FloatingPointError,
    ) as err:
        fail(err)
    _print_result(result)


def _print_result(result) -> None:
    from nclab.report.run_report import collapse_summary

    table = Table(title=f"run {result.config.name}")
    table.add_column("quantity")
    table.add_column("value", justify="right")
    table.add_row("zero-error epoch", str(result.zero_error_epoch))
    for k, v in collapse_summary(result.rows, result.penultimate, result.zero_error_epoch).items():
        table.add_row(k, f"{v:.4g}")
    console.print(table)
    console.print(f"run directory: [bold]{result.out}[/bold] (metrics.csv, report.html, log.txt)")


@app.command("report")
def report_command(run_dir: Annotated[Path, typer.Argument(help="a training run directory")]) -> None:
    """(Re)build RUN_DIR/report.html from its metrics.csv."""
    from nclab.report.run_report import write_run_report

    try:
        path = write_run_report(run_dir)
    except (FileNotFoundError, ValueError) as err:
        fail(err)
    console.print(f"report written to [bold]{path}[/bold]")


@app.command("demo")
def demo_command(
    out: Annotated[Path, typer.Option(help="output folder")] = Path("runs/demo"),
    epochs: Annotated[int | None, typer.Option(help="shorten the runs (default: the demo config's 200)")] = None,
) -> None:
    """The main job: train an MLP on the embedded digits with MSE and with CE past zero training error, measure
    every collapse metric per epoch and layer, and write report.html (runs in OUT/mse, OUT/ce)."""
    from nclab.experiments.training import run_demo

    path = run_demo(out, epochs=epochs, console=err_console)
    console.print(f"demo report: [bold]{path}[/bold] (runs in {out / 'mse'} and {out / 'ce'})")
