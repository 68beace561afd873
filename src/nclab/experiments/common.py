"""What the experiment modules share: scales, figures as PNG bytes, CSV tables and HTML tables of rows."""

from __future__ import annotations

import csv
import html
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nclab.io.atomic import atomic_write_bytes, atomic_write_text

__all__ = ["SCALES", "check_scale", "html_table", "png", "pyplot", "write_csv"]

#: The scales every experiment may declare: test suite (seconds), 2-core CPU (minutes), the paper's sizes.
SCALES: tuple[str, ...] = ("tiny", "cpu", "paper")


def check_scale(scale: str, scales: Sequence[str] = SCALES) -> None:
    """Raise ``ValueError`` naming ``scale`` unless it is one of ``scales``."""
    if scale not in scales:
        raise ValueError(f"scale must be one of {tuple(scales)}, got {scale!r}")


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend (experiments only write files; imported on first figure)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def png(fig: Any, path: Path | None = None, *, dpi: int = 110) -> bytes:
    """The figure as PNG bytes (also written to ``path`` when given); the figure is closed."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    pyplot().close(fig)
    data = buf.getvalue()
    if path is not None:
        atomic_write_bytes(path, data)
    return data


def write_csv(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    """Write ``rows`` as a CSV table; the columns are every key in order of first appearance."""
    keys: list[str] = []
    for row in rows:
        keys += [k for k in row if k not in keys]
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=keys, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_text(path, buf.getvalue())


def html_table(rows: Sequence[dict[str, Any]]) -> str:
    """An HTML table of ``rows`` (header from the first row; floats to 6 significant digits)."""
    head = "".join(f"<th>{html.escape(k)}</th>" for k in rows[0])
    body = "".join(
        "<tr>"
        + "".join(f"<td>{html.escape(f'{v:.6g}' if isinstance(v, float) else str(v))}</td>" for v in r.values())
        + "</tr>"
        for r in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
