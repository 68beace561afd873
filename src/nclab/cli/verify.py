"""Command ``verify``: check a run directory, a sweep, an extraction or one file, with the checks nclab's readers
run, then the files against each other (:func:`nclab.train.verify.verify`: config, metrics table, checkpoint and
statistics checksums and invariants; rows against the checkpoint, run id against config.yaml, parquet against
csv, summary against rows)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from nclab.cli.common import OutputFormat, console, emit, err_console, format_option

__all__ = ["verify_command"]


def verify_command(
    target: Annotated[
        Path,
        typer.Argument(
            help="a run directory, sweep or extraction folder, or one checkpoint / statistics / metrics file"
        ),
    ],
    fmt: Annotated[OutputFormat, format_option()] = OutputFormat.table,
) -> None:
    """Verify a run directory, sweep, extraction or file: each file's own checks, then the files against each other.

    Checks: config.yaml parses, metrics.csv is well formed, every checkpoint and statistics
    file passes its checksum and invariants; then the files agree with each other (every row of metrics.csv is the
    checkpoint's, the run id is the hash of config.yaml, metrics.parquet holds metrics.csv's rows, summary.json
    agrees with the rows and the checkpoint). A sweep verifies each completed trial, an extraction each file its
    manifest lists. Exit 0 when all is well (a one-line summary), 2 with one line per problem otherwise."""
    from nclab.train.verify import verify

    findings = verify(target)
    problems = [f for f in findings if not f.ok]
    if fmt is not OutputFormat.table:
        rows = [
            {"file": str(f.path), "kind": f.kind, "ok": f.ok, "problem": f.problem, "cross_check": f.cross}
            for f in findings
        ]
        emit(rows, fmt)
    elif problems:
        for f in problems:
            console.print(f"{f.path}: {f.problem}", markup=False, highlight=False, soft_wrap=True)
    else:
        own = [f for f in findings if not f.cross]
        kinds = ", ".join(sorted({f.kind for f in own}))
        files = f"{len(own)} file{'s' if len(own) != 1 else ''}"
        cross = sorted({f.kind for f in findings if f.cross})
        against = f"; files agree: {', '.join(cross)}" if cross else ""
        console.print(f"OK: {files} verified in {target} ({kinds}){against}", markup=False, highlight=False)
    if problems:
        if fmt is OutputFormat.table:
            err_console.print(f"{len(problems)} of {len(findings)} failed verification", highlight=False)
        raise typer.Exit(2)
