"""What the experiment modules share: scales, figures as PNG bytes, CSV tables and HTML tables of rows.

Figures follow the readability rule of :mod:`nclab.report.figures`: :func:`pyplot` sets every font to at least
:data:`~nclab.report.figures.MIN_FONT_PT` points; :func:`png` lays figures out with constrained layout (so a
suptitle never overlaps the panel titles) and renders at :data:`~nclab.report.figures.FIGURE_DPI` and at most
:data:`~nclab.report.figures.MAX_WIDTH_IN` inches wide, so reports show the PNG at 1:1 in a 1280-px window
with text of at least ``MIN_FONT_PT * FIGURE_DPI / 72`` = 12.5 px.
"""

from __future__ import annotations

import html
import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nclab.io.atomic import atomic_write_bytes, atomic_write_text
from nclab.io.rundir import RunDir
from nclab.io.tables import csv_text

__all__ = [
    "SCALES",
    "by_scale",
    "check_scale",
    "finish_report",
    "html_table",
    "legend",
    "log_ticks",
    "png",
    "pyplot",
    "write_csv",
]

#: The scales every experiment may declare: test suite (seconds), 2-core CPU (minutes), the paper's sizes.
SCALES: tuple[str, ...] = ("tiny", "cpu", "paper")


def check_scale(scale: str, scales: Sequence[str] = SCALES) -> None:
    """Raise ``ValueError`` naming ``scale`` unless it is one of ``scales``."""
    if scale not in scales:
        raise ValueError(f"scale must be one of {tuple(scales)}, got {scale!r}")


def by_scale(scale: str, tiny: Any, other: Any) -> Any:
    """``tiny`` at the ``tiny`` scale, ``other`` at every other (a solver size of the smoke test and of the rest)."""
    return tiny if scale == "tiny" else other


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend with the report font sizes (:func:`png` adds constrained layout).

    Experiments only write files, so matplotlib is imported on first figure; the rc settings are global because
    tick labels are created when a figure is drawn, after any ``rc_context`` around its construction has ended.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from nclab.report.figures import MIN_FONT_PT

    plt.rcParams.update(
        {
            "font.size": MIN_FONT_PT + 1,
            "axes.titlesize": MIN_FONT_PT + 2,
            "axes.labelsize": MIN_FONT_PT + 1,
            "xtick.labelsize": MIN_FONT_PT,
            "ytick.labelsize": MIN_FONT_PT,
            "legend.fontsize": MIN_FONT_PT,
            "legend.title_fontsize": MIN_FONT_PT,
            "figure.titlesize": MIN_FONT_PT + 3,
        }
    )
    return plt


def log_ticks(ax: Any, axis: str = "y") -> None:
    """:func:`nclab.report.figures.log_ticks` (imported here on first figure: listing experiments needs no
    matplotlib)."""
    from nclab.report.figures import log_ticks as report_log_ticks

    report_log_ticks(ax, axis)


def legend(ax: Any) -> None:
    """A legend only where two or more labelled artists share the panel (one curve needs none)."""
    handles, _ = ax.get_legend_handles_labels()
    if len(handles) >= 2:
        ax.legend()


def png(fig: Any, path: Path | None = None) -> bytes:
    """The figure as PNG bytes at ``FIGURE_DPI`` (also written to ``path`` when given); the figure is closed.

    A figure wider than ``MAX_WIDTH_IN`` is narrowed to it (fonts keep their size in points) so that the report
    can show it at 1:1.
    """
    from nclab.report.figures import FIGURE_DPI, MAX_WIDTH_IN

    if fig.get_layout_engine() is None:  # set here, not in rcParams: report figures choose their own layout
        fig.set_layout_engine("constrained")
    w, h = fig.get_size_inches()
    if w > MAX_WIDTH_IN:
        fig.set_size_inches(MAX_WIDTH_IN, h)
    buf = io.BytesIO()
    # no bbox_inches="tight": it could widen the PNG past MAX_WIDTH_IN; constrained layout keeps text inside
    fig.savefig(buf, format="png", dpi=FIGURE_DPI)
    pyplot().close(fig)
    data = buf.getvalue()
    if path is not None:
        atomic_write_bytes(path, data)
    return data


def write_csv(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    """Write ``rows`` as a CSV table; the columns are every key in order of first appearance."""
    atomic_write_text(path, csv_text(rows))


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


def finish_report(out: Path, title: str, sections: list[tuple[str, str]], figures: list, summary: dict) -> dict:
    """Write ``out/report.html`` (``sections``, a table of the summary's numbers, ``figures``) and
    ``out/summary.json``; return ``summary``."""
    from nclab.report import metrics_table_html, write_report

    numeric = {k: float(v) for k, v in summary.items() if isinstance(v, int | float) and not isinstance(v, bool)}
    write_report(out / RunDir.REPORT, title, [*sections, ("Summary", metrics_table_html(numeric))], figures)
    atomic_write_text(out / RunDir.SUMMARY, json.dumps(summary, indent=2, default=float) + "\n")
    return summary
