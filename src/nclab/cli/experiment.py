"""Commands ``experiment list`` and ``experiment run NAME`` (the Typer group :data:`app`).

The ``tiny`` scale of every experiment is a smoke test (seconds; it exercises the code, its figures show no
collapse): ``experiment list`` says so beside its time, ``experiment run --scale tiny`` in a note, and its reports
in a banner (:data:`nclab.experiments.SMOKE_TEST_NOTE`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from nclab.cli.common import OutputFormat, emit, err_console, format_option, make_app, note, out_option, user_errors

__all__ = ["app"]

app = make_app("experiment", "Registered reproductions of the papers' experiments.")


def _scale(scale: str) -> str:
    return f"{scale} (smoke test)" if scale == "tiny" else scale


@app.command("list")
def experiment_list(fmt: Annotated[OutputFormat, format_option()] = OutputFormat.table) -> None:
    """List the registered experiments with the expected wall time of each scale on 2 CPU cores.

    Times are measured ("not timed" where no measurement was made). The tiny scale is a smoke test: it runs in
    seconds to check that the code works, and its figures do not show collapse; cpu is the smallest scale
    whose results mean something."""
    from nclab.experiments import list_experiments

    if fmt is not OutputFormat.table:
        rows = [
            {
                "name": exp.name,
                "paper": exp.paper,
                **{f"{s} time": exp.durations.get(s, "not timed") for s in ("tiny", "cpu", "paper")},
                "scales": " ".join(exp.scales),
                "summary": exp.summary,
            }
            for exp in list_experiments()
        ]
        emit(rows, fmt)
        return
    from rich.table import Table

    from nclab.cli.common import console

    table = Table(title="nclab experiments")
    for col in ("name", "paper", "scale: time (2 cores)", "summary"):
        # names and times stay whole; a summary's long word folds rather than lose its end
        table.add_column(col, no_wrap=col not in ("summary", "paper"), overflow="fold")
    for exp in list_experiments():
        times = "\n".join(f"{_scale(s)}: {exp.durations.get(s, 'not timed')}" for s in exp.scales)
        table.add_row(exp.name, exp.paper, times, exp.summary)
    console.print(table)


def _summary_rows(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """The summary as quantity / value rows, each value a number or a word."""
    return [{"quantity": str(k), "value": "none" if v is None else v} for k, v in summary.items()]


@app.command("run")
def experiment_run(
    name: Annotated[str, typer.Argument(help="experiment name (see `nclab experiment list`)")],
    scale: Annotated[str, typer.Option(help="tiny (a smoke test) | cpu | paper")] = "cpu",
    out: Annotated[Path | None, out_option("output folder (default runs/experiments/NAME-SCALE)")] = None,
    seed: Annotated[int, typer.Option(help="random seed")] = 0,
    fmt: Annotated[OutputFormat, format_option()] = OutputFormat.table,
) -> None:
    """Run one registered experiment and print its summary; its tables, figures and report.html go to OUT.

    Progress, notes and the output folder go to stderr, the summary to stdout (a table, or JSON / CSV with -f).
    --scale tiny is a smoke test: its report says so."""
    from nclab.experiments import SMOKE_TEST_NOTE, run

    out = out or Path("runs/experiments") / f"{name}-{scale}"
    with user_errors():
        summary = run(name, out, scale=scale, seed=seed)
    if scale == "tiny":
        note(SMOKE_TEST_NOTE)
    if fmt is OutputFormat.json:
        emit([], fmt, data=summary)
    else:
        title = f"{name} ({_scale(scale)})"
        claims = summary.pop("paper_claims", [])
        emit(_summary_rows(summary), fmt, title)
        if claims and fmt is OutputFormat.table:  # CSV stays one table: the claims are in summary.json and -f json
            cols = ("claim", "paper_value", "ours", "verdict")
            emit([{k: c[k] for k in cols} for c in claims], fmt, f"{name}: paper vs ours (criteria: -f json)")
    err_console.print(f"outputs in {out} (report: {out / 'report.html'})", markup=False, highlight=False)
