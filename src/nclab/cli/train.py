"""Commands ``train``, ``report`` and ``demo`` (the Typer group :data:`app`).

:mod:`nclab.cli` mounts them at the top level: ``nclab train CONFIG.yaml [--set key=value ...] [--out DIR]
[--resume]``, ``nclab report RUN_DIR`` and ``nclab demo [--out DIR] [--epochs E]``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from nclab.cli.common import console, err_console, flag, make_app, user_errors

__all__ = ["app", "demo_command", "report_command", "train_command"]

app = make_app("train", "Train to the terminal phase and measure collapse; build run reports.")


@app.command("train")
def train_command(
    config: Annotated[Path, typer.Argument(help="YAML run config (see configs/ and docs/training.md)")],
    set_: Annotated[
        list[str] | None, typer.Option("--set", "-s", help="override a config key: key.path=value (repeatable)")
    ] = None,
    out: Annotated[Path | None, typer.Option(help="run directory (default runs/<config name>)")] = None,
    resume: Annotated[bool, flag("--resume", help="continue the run in --out from its last checkpoint")] = False,
    overwrite: Annotated[bool, flag("--overwrite", help="replace an existing run in --out")] = False,
    progress: Annotated[
        bool, flag("--progress/--no-progress", help="show progress bars (plain lines when not a terminal)")
    ] = True,
) -> None:
    """Train a network past zero training error, measuring every collapse metric per epoch, layer and split."""
    from nclab.train.config import load_config
    from nclab.train.trainer import train

    with user_errors():
        cfg = load_config(config, set_ or [])
        run_dir = out or Path("runs") / cfg.name
        result = train(cfg, run_dir, resume=resume, overwrite=overwrite, progress=progress, console=err_console)
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
    err_console.print(f"run directory: {result.out} (metrics.csv, report.html, log.txt)", markup=False, highlight=False)


@app.command("report")
def report_command(run_dir: Annotated[Path, typer.Argument(help="a training run directory")]) -> None:
    """(Re)build RUN_DIR/report.html from its metrics.csv."""
    from nclab.report.run_report import write_run_report

    with user_errors():
        path = write_run_report(run_dir)
    err_console.print(f"report written to {path}", markup=False, highlight=False)


@app.command("demo")
def demo_command(
    out: Annotated[Path, typer.Option(help="output folder")] = Path("runs/demo"),
    epochs: Annotated[int | None, typer.Option(help="shorten the runs (default: the demo config's 200)", min=1)] = None,
    overwrite: Annotated[bool, flag("--overwrite", help="replace runs in OUT made with a different config")] = False,
    progress: Annotated[
        bool, flag("--progress/--no-progress", help="show progress bars (plain lines when not a terminal)")
    ] = True,
) -> None:
    """The main job: train an MLP on the embedded digits with MSE and with CE past zero training error, measure
    every collapse metric per epoch and layer, and write report.html (runs in OUT/mse, OUT/ce). Ends with each
    run's zero-error epoch and how far NC1 fell. Refuses to replace a different run already in OUT unless
    --overwrite (the same config is re-run in place)."""
    from nclab.experiments.training import run_demo

    with user_errors():
        path = run_demo(out, epochs=epochs, progress=progress, console=err_console, overwrite=overwrite)
    _print_demo_summary(out)
    err_console.print(f"demo report: {path} (runs in {out / 'mse'} and {out / 'ce'})", markup=False, highlight=False)


def _print_demo_summary(out: Path) -> None:
    import json

    from nclab.io.run_table import read_metrics
    from nclab.report.run_report import collapse_summary

    table = Table(title="nclab demo")
    for col in ("run", "zero-error epoch", "NC1 first", "NC1 last", "NC1 drop (orders of magnitude)"):
        table.add_column(col, justify="right")
    for loss in ("mse", "ce"):
        summary = json.loads((out / loss / "summary.json").read_text())
        zero = summary.get("zero_error_epoch")
        stats = collapse_summary(read_metrics(out / loss), summary["penultimate"], zero)
        first, last = stats.get("nc1 first measured", float("nan")), stats.get("nc1 last", float("nan"))
        drop = math.log10(first / last) if first > 0 and last > 0 else float("nan")
        table.add_row(
            loss.upper(), "not reached" if zero is None else str(zero), f"{first:.3g}", f"{last:.3g}", f"{drop:.2f}"
        )
    console.print(table)
