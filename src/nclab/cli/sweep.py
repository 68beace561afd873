"""Command ``nclab sweep SWEEP.yaml [--out DIR] [--local | --address ADDR] [--num-cpus N] [--retry-failed]``.

The sweep file, the directory layout and the statuses are :mod:`nclab.train.sweep`'s. Exit code 0 when every
trial completed, 1 when some failed (their errors are in ``sweep.csv``), 2 for bad input (nothing written).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from nclab.cli.common import console, err_console, fail, flag, user_errors

__all__ = ["sweep_command"]


def sweep_command(
    sweep: Annotated[Path, typer.Argument(help="sweep file: base config, grid / overrides / seeds, resources")],
    out: Annotated[Path | None, typer.Option(help="sweep directory (default runs/sweeps/<sweep name>)")] = None,
    local: Annotated[bool, flag("--local", help="run the trials one after another in this process (no Ray)")] = False,
    address: Annotated[
        str | None, typer.Option(help="an existing Ray cluster (host:port, ray://host:port or auto)")
    ] = None,
    num_cpus: Annotated[
        int | None, typer.Option(min=1, help="CPUs of the local Ray instance (default: resources.num_cpus)")
    ] = None,
    retry_failed: Annotated[
        bool, flag("--retry-failed", help="run again the trials that failed in an earlier run of this sweep")
    ] = False,
) -> None:
    """Run every trial of a sweep as an ordinary run directory under the sweep directory, on a local Ray
    instance (default), an existing Ray cluster (--address) or in this process (--local), indexed in sweep.csv.
    A re-run skips completed (and failed) trials and resumes interrupted ones."""
    from nclab.train.sweep import run_sweep

    if local and address is not None:
        fail("--local and --address exclude each other")
    with user_errors():
        result = run_sweep(
            sweep,
            out,
            local=local,
            address=address,
            num_cpus=num_cpus,
            retry_failed=retry_failed,
            echo=lambda line: err_console.print(escape(line), highlight=False),
        )
    table = Table(title=f"sweep {sweep.name}")
    table.add_column("trial", no_wrap=True)
    table.add_column("overrides")
    table.add_column("status", no_wrap=True)
    for col in ("zero-error epoch", "NC1 last", "seconds"):
        table.add_column(col, justify="right")
    for tid, row in result.rows.items():
        nc1 = row.get("nc1")
        table.add_row(
            tid,
            str(row.get("overrides", "")),
            str(row.get("status", "")),
            str(row.get("zero_error_epoch") or "-"),
            f"{float(nc1):.3g}" if nc1 not in (None, "") else "-",
            f"{float(row['elapsed_s']):.1f}" if row.get("elapsed_s") not in (None, "") else "-",
        )
    console.print(table)
    err_console.print(f"sweep index: {result.out / 'sweep.csv'}", markup=False, highlight=False)
    if result.failed:
        err_console.print(
            f"{len(result.failed)} of {len(result.rows)} trials failed; see the error column of sweep.csv",
            markup=False,
            highlight=False,
        )
        raise typer.Exit(1)
