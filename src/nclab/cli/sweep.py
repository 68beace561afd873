"""Command ``nclab sweep SWEEP.yaml [--out DIR] [--local | --address ADDR] [--num-cpus N] [--retry-failed]``.

The sweep file, the directory layout and the statuses are :mod:`nclab.train.sweep`'s. Exit code 0 when every
trial completed, 1 when some failed (their errors are in ``sweep.csv``), 2 for bad input (nothing written).

The summary shows, per trial, the config keys whose values differ between the trials (not every override) and
the results (zero-error epoch, final train and test error, NC1, time); its columns are narrow enough for an
80-column terminal or log with a handful of differing keys.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from nclab.cli.common import (
    OutputFormat,
    console,
    emit,
    err_console,
    fail,
    flag,
    format_option,
    out_option,
    user_errors,
)

__all__ = ["summary_rows", "sweep_command"]


def _number(cell: str, digits: str = ".3g") -> float | str:
    return float(format(float(cell), digits)) if cell not in (None, "") else ""


def summary_rows(result: Any) -> list[dict[str, Any]]:
    """One row per trial of a :class:`~nclab.train.sweep.SweepResult`: ``trial``, the config keys that differ
    between the trials, ``status``, ``zero_error_epoch``, ``train_error``, ``test_error``, ``nc1`` and
    ``seconds`` (numbers; an empty string where a failed trial has no result)."""
    from nclab.report.compare import differing_keys, flatten_config

    configs = [t.config.to_dict() for t in result.trials]
    keys = differing_keys(configs)
    rows = []
    for trial, cfg in zip(result.trials, configs, strict=True):
        cells, flat = result.rows[trial.trial_id], flatten_config(cfg)
        row: dict[str, Any] = {"trial": trial.trial_id}
        row |= {k: flat.get(k) for k in keys}
        zero = cells.get("zero_error_epoch")
        row["status"] = cells.get("status", "")
        row["zero_error_epoch"] = int(zero) if zero else ""
        row |= {c: _number(cells.get(c)) for c in ("train_error", "test_error", "nc1")}
        row["seconds"] = _number(cells.get("elapsed_s"), ".1f")
        rows.append(row)
    return rows


def _heading(column: str, values: list[str]) -> str:
    """A narrow heading: the results' names on two lines, a long dotted key broken after its last dot."""
    named = {
        "zero_error_epoch": "zero-error\nepoch",
        "train_error": "train\nerror",
        "test_error": "test\nerror",
        "nc1": "NC1",
        "seconds": "time\n(s)",
    }
    if column in named:
        return named[column]
    head, dot, tail = column.rpartition(".")
    if dot and len(column) > max(8, *(len(v) for v in values)):
        return f"{head}.\n{tail}"
    return column


def _print_table(rows: list[dict[str, Any]], title: str) -> None:
    """The summary as a compact table: the common ``NAME-`` prefix of the trial ids goes into the title, the
    status column only when a trial did not complete, and every cell holds a value or a word."""
    from rich.table import Table

    prefix = rows[0]["trial"].rsplit("-", 1)[0] + "-" if rows else ""
    if not all(r["trial"].startswith(prefix) for r in rows):
        prefix = ""
    columns = [c for c in rows[0] if c != "status" or any(r["status"] != "completed" for r in rows)]
    cells = [{c: _cell(c, r[c], r["status"], prefix) for c in columns} for r in rows]  # words for what a trial lacks
    title += f" (trials {prefix}<id>)" if prefix else ""
    table = Table(title=title, box=None, padding=(0, 1), pad_edge=False, header_style="bold underline")
    for c in columns:
        numeric = c in ("zero_error_epoch", "train_error", "test_error", "nc1", "seconds")
        heading = _heading(c, [row[c] for row in cells])
        # a column as wide as its widest heading line or cell: rich otherwise shrinks headings to short cells
        # ("zero-err…" over a column of short words), also when the table fits the width
        widest = max(len(line) for line in [*heading.split("\n"), *(row[c] for row in cells)])
        table.add_column(heading, justify="right" if numeric else "left", no_wrap=True, min_width=widest)
    for row in cells:
        table.add_row(*(escape(row[c]) for c in columns))
    # piped into a log, a table wider than the default 80 columns keeps its lines whole rather than clip them
    natural = console.measure(table).maximum
    console.print(table, width=None if console.is_terminal else max(console.width, natural))


def _cell(column: str, value: Any, status: str, prefix: str) -> str:
    if column == "trial":
        return value.removeprefix(prefix)
    if value == "" or value is None:
        if status != "completed":
            return "no result"  # a failed or unfinished trial (its status column says which)
        return "not reached" if column == "zero_error_epoch" else "not measured"
    if isinstance(value, float):
        return f"{value:.3g}" if column != "seconds" else f"{value:.1f}"
    return value if isinstance(value, str) else _yaml(value)


def _yaml(value: Any) -> str:
    """A config value as flow-style YAML (``[16, 16]``, ``0.01``, ``true``)."""
    from nclab.train.sweep import override_string

    return override_string("k", value).split("=", 1)[1]


def sweep_command(
    sweep: Annotated[Path, typer.Argument(help="sweep file: base config, grid / overrides / seeds, resources")],
    out: Annotated[Path | None, out_option("sweep directory (default runs/sweeps/<sweep name>)")] = None,
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
    fmt: Annotated[OutputFormat, format_option()] = OutputFormat.table,
) -> None:
    """Run every trial of a sweep as an ordinary run directory, indexed in sweep.csv, and summarise the trials.

    The trials run on a local Ray instance (default), an existing Ray cluster (--address) or in this process
    (--local). A re-run skips completed (and failed) trials and resumes interrupted ones. The summary shows the
    config keys that differ between the trials and each trial's zero-error epoch, final train and test error,
    NC1 and time."""
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
    rows = summary_rows(result)
    if fmt is OutputFormat.table:
        _print_table(rows, f"sweep {sweep.name}")
    else:
        emit(rows, fmt)
    err_console.print(f"sweep index: {result.out / 'sweep.csv'}", markup=False, highlight=False)
    if result.failed:
        err_console.print(
            f"{len(result.failed)} of {len(result.rows)} trials failed; see the error column of sweep.csv",
            markup=False,
            highlight=False,
        )
        raise typer.Exit(1)
