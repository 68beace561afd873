"""Command ``metrics list`` (the Typer group :data:`app`): the metric registry with what each metric measures."""

from __future__ import annotations

import dataclasses
from typing import Annotated

from nclab.cli.common import OutputFormat, console, emit, format_option, make_app

__all__ = ["app"]

app = make_app("metrics", "The registered collapse metrics.")


@app.command("list")
def metrics_list(
    fmt: Annotated[OutputFormat, format_option()] = OutputFormat.table,
) -> None:
    """List every registered metric: what it measures, its direction, definition and citation.

    Columns: name; family, the collapse property it measures (NC1-NC5, GNC; "diagnostic" for the others); label,
    its own tag where the literature gives one (PFC1-3 of [Wang et al. 2024] are the layer-wise NC1, NC2, NC4);
    direction (lower / higher = more collapsed, none = diagnostic); definition; citation (keys of
    docs/references.md)."""
    from nclab.metrics.glossary import glossary_rows

    rows = [dataclasses.asdict(e) for e in glossary_rows()]
    if fmt is not OutputFormat.table:
        emit(rows, fmt)
    else:  # long definitions: fold inside the cells rather than the generic table
        from rich.table import Table

        table = Table(title="nclab metrics")
        columns = ("name", "family", "label", "direction", "definition", "citation")
        for col in columns:
            table.add_column(col, overflow="fold")
        for r in rows:
            table.add_row(*(r[c] or ("diagnostic" if c in ("family", "label") else "") for c in columns))
        console.print(table)
