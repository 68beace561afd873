"""Commands ``train`` and ``report`` (a Typer sub-app) and :func:`run_demo`, the body of ``nclab demo``.

Mount: ``app.command("train")(train_command)`` and ``app.command("report")(report_command)`` give
``nclab train CONFIG.yaml [--set key=value ...] [--out DIR] [--resume]`` and ``nclab report RUN_DIR``;
``app.add_typer(train_app, name=...)`` mounts both under a group instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from nclab._cli_common import console, err_console, fail, make_app

__all__ = ["report_command", "run_demo", "train_app", "train_command"]

train_app = make_app("train", "Train to the terminal phase and measure collapse; build run reports.")


@train_app.command("train")
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


@train_app.command("report")
def report_command(run_dir: Annotated[Path, typer.Argument(help="a training run directory")]) -> None:
    """(Re)build RUN_DIR/report.html from its metrics.csv."""
    from nclab.report.run_report import write_run_report

    try:
        path = write_run_report(run_dir)
    except (FileNotFoundError, ValueError) as err:
        fail(err)
    console.print(f"report written to [bold]{path}[/bold]")


def run_demo(out: Path, *, epochs: int | None = None, progress: bool = True) -> Path:
    """The ``nclab demo`` runs: an MLP on the embedded digits, trained with MSE and with CE well past zero
    training error (``configs/demo-digits-mlp.yaml`` with ``loss.name`` switched), each in its own subfolder
    ``out/mse`` and ``out/ce`` (metrics.csv, report.html, ...), plus ``out/report.html`` comparing them.
    Returns the path of that summary report. ``epochs`` shortens the runs (tests)."""
    from nclab.report.figures import compare_figure
    from nclab.report.html import metrics_table_html, write_report
    from nclab.report.run_report import collapse_summary
    from nclab.train.config import resolve_config
    from nclab.train.experiments import demo_config
    from nclab.train.trainer import train

    out = Path(out)
    runs = {}
    for loss in ("mse", "ce"):
        cfg = resolve_config(demo_config(loss), [f"train.epochs={epochs}"] if epochs else [])
        err_console.print(f"[bold]demo[/bold]: training {cfg.name} ({cfg.train.epochs} epochs) into {out / loss}")
        runs[loss] = train(cfg, out / loss, overwrite=True, progress=progress, console=err_console)
    summary = {}
    for loss, r in runs.items():
        for k, v in collapse_summary(r.rows, r.penultimate, r.zero_error_epoch).items():
            summary[f"{loss}: {k}"] = v
        summary[f"{loss}: zero-error epoch"] = float("nan") if r.zero_error_epoch is None else r.zero_error_epoch
    pen = runs["mse"].penultimate
    # the network's error sits at layer "output": relabel it to plot it beside the penultimate metrics
    merged = {
        k.upper(): ([x if x[2] != "output" else (*x[:2], pen, *x[3:]) for x in r.rows], r.zero_error_epoch)
        for k, r in runs.items()
    }
    fig = compare_figure(merged, ["nc1", "trace_ratio", "etf_gram_error", "self_duality", "ncc_mismatch", "error"], pen)
    links = "".join(f'<li><a href="{k}/report.html">{k.upper()} run report</a></li>' for k in runs)
    body = (
        "<p>Digits (embedded, balanced subset), MLP with three measured hidden layers, trained with MSE (paper 004) "
        f"and with cross-entropy past zero training error. Per-run reports:</p><ul>{links}</ul>"
        + metrics_table_html(summary)
    )
    path = write_report(
        out / "report.html",
        "nclab demo: neural collapse of an MLP on digits, MSE vs CE",
        [("Runs", body)],
        [(f"MSE vs CE at layer {pen} (dotted lines: zero-error epochs)", fig)],
    )
    console.print(f"demo report: [bold]{path}[/bold] (runs in {out / 'mse'} and {out / 'ce'})")
    return path
