"""Command ``metrics list`` (the Typer group :data:`app`): the metric registry with what each metric measures."""

from __future__ import annotations

import dataclasses
from typing import Annotated

from rich.table import Table

from nclab.cli.common import OutputFormat, console, emit, format_option, make_app

__all__ = ["app"]

app = make_app("metrics", "The registered collapse metrics.")


@app.command("list")
def metrics_list(
    fmt: Annotated[OutputFormat, format_option()] = OutputFormat.table,
) -> None:
    """List every registered metric: name, the collapse property it measures (NC1-NC4, PFC1-3, GNC; blank for
    diagnostics), direction (lower / higher = more collapsed, none = diagnostic), definition and citation (keys of
    docs/references.md)."""
    from nclab.metrics.glossary import glossary_rows

    rows = [dataclasses.asdict(e) for e in glossary_rows()]
    if fmt is not OutputFormat.table:
        emit(rows, fmt)
    else:  # long definitions: fold inside the cells rather than the generic table
        table = Table(title="nclab metrics")
        for col in ("name", "label", "direction", "definition", "citation"):
            table.add_column(col, overflow="fold")
        for r in rows:
            table.add_row(*(r[c] for c in ("name", "label", "direction", "definition", "citation")))
        console.print(table)
