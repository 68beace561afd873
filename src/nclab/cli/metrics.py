"""Command ``metrics list`` (the Typer group :data:`app`): the metric registry with what each metric measures."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from typing import Annotated, Literal

import typer
from rich.table import Table

from nclab.cli.common import console, make_app

__all__ = ["app"]

app = make_app("metrics", "The registered collapse metrics.")

Format = Literal["table", "json", "csv"]


@app.command("list")
def metrics_list(
    format: Annotated[
        Format, typer.Option("--format", "-f", help="table (for reading), json or csv (for programs), on stdout")
    ] = "table",
) -> None:
    """List every registered metric: name, the collapse property it measures (NC1-NC4, PFC1-3, GNC; blank for
    diagnostics), direction (lower / higher = more collapsed, none = diagnostic), definition and citation (keys of
    docs/references.md)."""
    from nclab.metrics.glossary import glossary_rows

    rows = [dataclasses.asdict(e) for e in glossary_rows()]
    if format == "json":
        typer.echo(json.dumps(rows, indent=2))
    elif format == "csv":
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        typer.echo(buf.getvalue(), nl=False)
    else:
        table = Table(title="nclab metrics")
        for col in ("name", "label", "direction", "definition", "citation"):
            table.add_column(col, overflow="fold")
        for r in rows:
            table.add_row(*(r[c] for c in ("name", "label", "direction", "definition", "citation")))
        console.print(table)
