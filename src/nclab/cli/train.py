"""Commands ``train``, ``report`` and ``demo`` (the Typer group :data:`app`).

:mod:`nclab.cli` mounts them at the top level: ``nclab train CONFIG.yaml [--set key=value ...] [--out DIR]
[--resume] [--nproc N]`` (or ``nclab train RUN_DIR --resume [--set train.epochs=E]`` to continue or extend a
run with its saved config), ``nclab report RUN_DIR`` and ``nclab demo [--out DIR] [--epochs E]``. ``--nproc N``
starts ``torchrun --standalone --nproc_per_node=N -m nclab train ...`` (the same command, data-parallel: see
:mod:`nclab.train.distributed`); under ``torchrun`` itself the option is not needed.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from nclab.cli.common import (
    OutputFormat,
    console,
    emit,
    err_console,
    fail,
    flag,
    format_option,
    make_app,
    out_option,
    user_errors,
)

if TYPE_CHECKING:
    from nclab.train.config import RunConfig

__all__ = ["app", "demo_command", "report_command", "train_command"]

app = make_app("train", "Train to the terminal phase and measure collapse; build run reports.")


@app.command("train")
def train_command(
    config: Annotated[
        Path,
        typer.Argument(
            help="YAML run config (see configs/ and docs/training.md), or a run directory to continue with --resume",
            metavar="CONFIG_OR_RUN_DIR",
        ),
    ],
    set_: Annotated[
        list[str] | None, typer.Option("--set", "-s", help="override a config key: key.path=value (repeatable)")
    ] = None,
    out: Annotated[Path | None, out_option("run directory (default runs/<config name>)")] = None,
    resume: Annotated[
        bool,
        flag(
            "--resume",
            help="continue the run in --out (or RUN_DIR) from its last checkpoint; with --set "
            "train.epochs=E, extend a finished run",
        ),
    ] = False,
    overwrite: Annotated[bool, flag("--overwrite", help="replace an existing run in --out")] = False,
    progress: Annotated[
        bool, flag("--progress/--no-progress", help="show progress bars (plain lines when not a terminal)")
    ] = True,
    nproc: Annotated[
        int | None,
        typer.Option(
            "--nproc",
            help="train data-parallel on N processes (DDP through torchrun; gloo on the CPU, NCCL on CUDA); "
            "train.batch_size is then the global batch",
        ),
    ] = None,
    fmt: Annotated[OutputFormat, format_option()] = OutputFormat.table,
    plan: Annotated[
        bool,
        flag(
            "--plan",
            "--dry-run",
            help="print the resolved protocol, the parameter count, the estimated memory and the number of "
            "optimisation steps, then exit without training or writing anything",
        ),
    ] = False,
) -> None:
    """Train a network past zero training error, measuring every collapse metric per epoch, layer and split.

    A run directory is owned by the process writing it: a second `nclab train` into it fails at once. `--resume`
    needs the run's checkpoint and saved config.yaml, and a config equal to the saved one except train.epochs
    (`nclab train RUN_DIR --resume --set train.epochs=400` extends a finished run). `--plan` (or `--dry-run`)
    prints what the run would do and exits without writing anything."""
    from nclab.train import distributed as ddp
    from nclab.train.config import load_config
    from nclab.train.rundir import default_run_dir
    from nclab.train.trainer import train

    with user_errors():
        if plan:
            _print_plan(config, set_ or [], nproc, fmt)
            return
        if config.is_dir():
            cfg, run_dir = _run_dir_config(config, set_ or [], out, resume, overwrite)
        else:
            cfg = load_config(config, set_ or [])
            run_dir = out or default_run_dir(cfg.name)
        if nproc is not None and nproc > 1 and not ddp.launched():
            argv = ["train", str(config), "--out", str(run_dir), "--progress" if progress else "--no-progress"]
            argv += [a for s in set_ or [] for a in ("--set", s)]
            argv += ["--resume"] * resume + ["--overwrite"] * overwrite + ["--format", fmt.value]
            _launch(nproc, cfg.train.device, cfg.train.batch_size, argv, run_dir)
            return
        if nproc is not None and nproc < 1:
            raise ValueError(f"--nproc must be at least 1, got {nproc}")
        result = train(cfg, run_dir, resume=resume, overwrite=overwrite, progress=progress, console=err_console)
    if ddp.is_main():
        _print_result(result, fmt)


def _print_plan(config: Path, overrides: list[str], nproc: int | None, fmt: OutputFormat) -> None:
    """``--plan``: :func:`nclab.train.plan.plan_run` of the config (a run directory's saved one), printed as
    ``key: value`` lines, or with ``-f json`` / ``csv`` as data."""
    import dataclasses

    from nclab.io.rundir import RunDir
    from nclab.train.config import load_config
    from nclab.train.plan import plan_run

    cfg = load_config(RunDir(config).config if config.is_dir() else config, overrides)
    if nproc is not None and nproc < 1:
        raise ValueError(f"--nproc must be at least 1, got {nproc}")
    plan = plan_run(cfg, processes=nproc or 1)
    if fmt is OutputFormat.table:
        for line in plan.lines():
            console.print(line, soft_wrap=True, markup=False, highlight=False)
        return
    data = {f.name: getattr(plan, f.name) for f in dataclasses.fields(plan) if f.name != "config"}
    data["memory"] = dataclasses.asdict(plan.memory)
    emit([{"key": k, "value": v} for k, v in plan.protocol.items()], fmt, f"plan of {cfg.name}", data=data)


def _launch(nproc: int, device: str, batch_size: int, argv: list[str], run_dir: Path) -> None:
    """``torchrun --standalone --nproc_per_node=nproc -m nclab`` + ``argv`` in a child process, after checking
    what would otherwise fail on every rank at once (a folder another process writes among them); a failed run
    exits with what can be done next."""
    import torch

    from nclab.io.rundir import RunDir

    if device.startswith("cuda"):
        available, what = torch.cuda.device_count(), "CUDA devices"
    else:
        available, what = os.cpu_count() or 1, "CPU cores"
    if nproc > available:
        raise ValueError(f"--nproc {nproc} exceeds the {available} {what} of this machine (train.device={device})")
    if batch_size % nproc:
        raise ValueError(f"train.batch_size={batch_size} is the global batch and must divide evenly by --nproc {nproc}")
    run = RunDir(run_dir)
    _refuse_busy(run)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}", "-m", "nclab"]
    rc = subprocess.call(cmd + argv)
    if rc != 0:
        if run.holder() is not None:  # another process took the folder meanwhile: its run is not ours to resume
            then = f"{run_dir} is in use by another nclab process (lock file {run.lock_file}); write to another folder"
        elif run.checkpoint.is_file():
            then = f"nothing after the last complete checkpoint in {run.checkpoints} was kept: continue with --resume"
        else:
            then = "no checkpoint was written: start the run again"
        fail(
            f"the {nproc}-process run failed (torchrun exit code {rc}; the ranks' errors are above); {then}",
            code=rc if 0 < rc < 128 else 1,
        )


def _refuse_busy(run) -> None:
    """Refuse, before any rank starts, a folder that another live process writes (each rank would fail on it)."""
    from nclab.train.rundir import RunDirBusyError

    holder = run.holder()
    if holder is not None:
        raise RunDirBusyError(
            f"{run.path} is in use by another nclab process (pid {holder.get('pid', '?')} on host "
            f"{holder.get('host', '?')}; lock file {run.lock_file}): wait for it to end, or write to another folder"
        )


def _run_dir_config(
    run_dir: Path, overrides: list[str], out: Path | None, resume: bool, overwrite: bool
) -> tuple[RunConfig, Path]:
    """``nclab train RUN_DIR --resume``: the run's saved config.yaml with the ``--set`` overrides, and the folder."""
    from nclab.io.rundir import RunDir
    from nclab.train.config import load_config
    from nclab.train.rundir import RunDirError

    if not resume:
        raise RunDirError(
            f"{run_dir} is a folder: pass --resume to continue the run in it, or give a CONFIG.yaml to start one"
        )
    if out is not None and out.resolve() != run_dir.resolve():
        raise RunDirError(f"--out {out} differs from the run directory {run_dir}: a run is continued in place")
    # before reading a config.yaml that may be missing
    RunDir(run_dir).check_resumable(overwrite=overwrite)
    return load_config(RunDir(run_dir).config, overrides), run_dir


def _print_result(result, fmt: OutputFormat) -> None:
    from nclab.report.run_report import collapse_summary

    zero = result.zero_error_epoch
    stats = collapse_summary(result.rows, result.penultimate, zero)
    if fmt is not OutputFormat.table:  # for programs: null for an epoch not reached
        emit(
            [{"quantity": "zero-error epoch", "value": zero}, *({"quantity": k, "value": v} for k, v in stats.items())],
            fmt,
            data={"zero_error_epoch": zero, **stats},
        )
        return
    rows = [{"quantity": "zero-error epoch", "value": "not reached" if zero is None else zero}]
    emit(rows + [{"quantity": k, "value": v} for k, v in stats.items()], fmt, f"run {result.config.name}")
    err_console.print(f"run directory: {result.out} (metrics.csv, report.html, log.txt)", markup=False, highlight=False)


@app.command("report")
def report_command(
    run_dir: Annotated[Path, typer.Argument(help="a training run directory")],
    depth_epochs: Annotated[
        list[int] | None,
        typer.Option(
            "--depth-epoch",
            help="an epoch of the metrics-vs-depth figure (repeatable; default: the first, the zero-error and the "
            "last measured epoch)",
            metavar="<int>",
        ),
    ] = None,
    out: Annotated[
        Path | None,
        out_option("write report.html into this folder (created) instead of RUN_DIR, e.g. for a read-only run"),
    ] = None,
) -> None:
    """(Re)build RUN_DIR/report.html (or OUT/report.html) from its metrics.csv."""
    from nclab.report.run_report import write_run_report

    with user_errors(OSError):  # a file system that refuses the write (read-only, full): one line, not a traceback
        path = write_run_report(run_dir, depth_epochs=depth_epochs, out=out)
    err_console.print(f"report written to {path}", markup=False, highlight=False)


@app.command("demo")
def demo_command(
    out: Annotated[Path, out_option("output folder")] = Path("runs/demo"),
    epochs: Annotated[int | None, typer.Option(help="shorten the runs (default: the demo config's 200)", min=1)] = None,
    overwrite: Annotated[bool, flag("--overwrite", help="replace runs in OUT made with a different config")] = False,
    progress: Annotated[
        bool, flag("--progress/--no-progress", help="show progress bars (plain lines when not a terminal)")
    ] = True,
    fmt: Annotated[OutputFormat, format_option()] = OutputFormat.table,
) -> None:
    """Train an MLP on the embedded digits with MSE and with CE past zero training error, and report collapse.

    Every collapse metric is measured per epoch and layer; report.html compares the runs (in OUT/mse, OUT/ce),
    and the command ends with each run's zero-error epoch and how far NC1 fell. It refuses to replace a
    different run already in OUT unless --overwrite (the same config is re-run in place)."""
    from nclab.experiments.demo import run_demo

    with user_errors():
        path = run_demo(out, epochs=epochs, progress=progress, console=err_console, overwrite=overwrite)
    _print_demo_summary(out, fmt)
    err_console.print(f"demo report: {path} (runs in {out / 'mse'} and {out / 'ce'})", markup=False, highlight=False)


def _print_demo_summary(out: Path, fmt: OutputFormat) -> None:
    import json

    from nclab.io.run_table import read_metrics
    from nclab.io.rundir import RunDir
    from nclab.report.run_report import collapse_summary

    rows = []
    for loss in ("mse", "ce"):
        summary = json.loads(RunDir(out / loss).summary.read_text())
        zero = summary.get("zero_error_epoch")
        stats = collapse_summary(read_metrics(out / loss), summary["penultimate"], zero)
        first, last = stats.get("nc1 first measured", float("nan")), stats.get("nc1 last", float("nan"))
        drop = math.log10(first / last) if first > 0 and last > 0 else float("nan")
        shown = zero if zero is not None or fmt is not OutputFormat.table else "not reached"
        rows.append(
            {
                "run": loss.upper(),
                "zero-error epoch": shown,
                "NC1 first": first,
                "NC1 last": last,
                "NC1 drop (orders of magnitude)": round(drop, 2) if math.isfinite(drop) else drop,
            }
        )
    emit(rows, fmt, "nclab demo")
