"""Self-contained HTML reports: inline CSS, figures embedded as base64 PNG, no external asset, no JavaScript.

Layout of :func:`write_report`: the title, the page's banner (:func:`page_banner`: a smoke test says so), a
table of contents (anchors to every part; each entry kept whole in its column), the figures first, then the
tables, then the folded parts (the resolved config) in ``<details>``. Figures are shown at their pixel size
(``width`` = the PNG's width, CSS pixels, scaled down only in a narrower window), so the font sizes of
:mod:`nclab.report.figures` hold at 1:1 in a 1280-px window; tables wrap their cells rather than overflow it.

No cell holds a placeholder: :func:`format_value` writes a NaN as ``undefined`` (a metric without a value
on these data), and callers pass words (``not reached``, ``not measured``) for what is missing.
"""

from __future__ import annotations

import base64
import contextvars
import html
import math
import re
import struct
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from nclab.io.atomic import atomic_write_text
from nclab.metrics import REGISTRY
from nclab.metrics.glossary import GLOSSARY

if TYPE_CHECKING:  # matplotlib is imported only when a Figure is actually rendered
    from matplotlib.figure import Figure

__all__ = ["add_section", "format_value", "metrics_table_html", "page_banner", "write_report"]

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:76rem;margin:2rem auto;padding:0 1rem;
color:#1b1b1b}h1{font-size:1.5rem}table{border-collapse:collapse;margin:1rem 0}
th,td{border-bottom:1px solid #ddd;padding:.3rem .8rem;text-align:left}td.num{text-align:right;
font-variant-numeric:tabular-nums}th{background:#f4f4f4}.note{color:#555;font-size:.9rem}img{max-width:100%;height:auto}
nav ol{columns:2;column-gap:3rem;font-size:.95rem;padding-left:1.5rem}nav li{break-inside:avoid;margin:0 0 .3rem}
figure{margin:1rem 0}figcaption{color:#333;font-size:.95rem}table{max-width:100%}td,th{overflow-wrap:anywhere}
td{vertical-align:top}td.id{white-space:nowrap}td.cfg{min-width:17rem}
.banner{background:#fff4d6;border-left:4px solid #d99a00;padding:.5rem .8rem}
"""

_banner: contextvars.ContextVar[str] = contextvars.ContextVar("nclab_report_banner", default="")


@contextmanager
def page_banner(text: str) -> Iterator[None]:
    """Show ``text`` in a banner under the title of every report written inside the block (the experiment
    registry marks the reports of a ``--scale tiny`` run as a smoke test)."""
    token = _banner.set(text)
    try:
        yield
    finally:
        _banner.reset(token)


def format_value(v: float | str) -> str:
    """A table cell: 4 significant figures (integers whole, ``inf`` as such, a NaN as ``undefined``); a string
    (``not reached``) as it is.

    Examples
    --------
    >>> format_value(0.123456789), format_value(12345678.0), format_value(3.0)
    ('0.1235', '1.235e+07', '3')
    >>> format_value(float("nan")), format_value(float("-inf")), format_value("not reached")
    ('undefined', '-inf', 'not reached')
    """
    if isinstance(v, str):
        return v
    v = float(v)
    if math.isnan(v):
        return "undefined"
    if math.isinf(v):
        return str(v)
    if v.is_integer() and abs(v) < 1e6:
        return str(int(v))
    return f"{v:.4g}"


def metrics_table_html(report: Mapping[str, float | str]) -> str:
    """An HTML table of quantity and value; when some names are registered metrics, also the collapse direction and
    the source, as a key of the bibliography (docs/references.md).

    Parameters
    ----------
    report : mapping of str to float or str
        Quantity name to value, e.g. the output of :func:`~nclab.metrics.collapse_report`.

    Returns
    -------
    str
        One ``<table>``: values with 4 significant figures (:func:`format_value`), words as they are, every name
        and value HTML-escaped. In a table with the direction column, names that are not registered metrics (or
        metrics without a direction) read "diagnostic".

    Examples
    --------
    >>> table = metrics_table_html({"lr": 0.1})  # not a metric: two columns
    >>> table.count("<th>"), "<tr><td>lr</td><td class=num>0.1</td></tr>" in table
    (2, True)
    >>> "<td>lower</td>" in metrics_table_html({"nc1": 0.012345678})  # nc1: lower is more collapsed
    True
    """
    known = any(name in REGISTRY for name in report)
    rows = []
    for name, value in report.items():
        cells = f"<td>{html.escape(name)}</td><td class=num>{html.escape(format_value(value))}</td>"
        if known:
            info = REGISTRY.get(name)
            # a diagnostic (a rank, a split of the variance) measures no collapse: it has no direction
            direction = {"lower": "lower", "higher": "higher"}.get(info.direction if info else "", "diagnostic")
            citation = GLOSSARY.get(name, ("", "", ""))[2] or "nclab"
            cells += f"<td>{direction}</td><td class=note>{html.escape(citation)}</td>"
        rows.append(f"<tr>{cells}</tr>")
    head = "<th>quantity</th><th>value</th>" + ("<th>more collapsed</th><th>source</th>" if known else "")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _anchor(text: str, used: set[str]) -> str:
    base = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40] or "part"
    slug, i = base, 2
    while slug in used:
        slug, i = f"{base}-{i}", i + 1
    used.add(slug)
    return slug


def _png_width(png: bytes) -> int:
    return struct.unpack(">I", png[16:20])[0]  # the IHDR chunk's width


def write_report(
    path: str | Path,
    title: str,
    sections: Sequence[tuple[str, str]],
    figures: Sequence[tuple[str, Figure | bytes]] = (),
    folded: Sequence[tuple[str, str]] = (),
) -> Path:
    """Write a self-contained ``report.html`` (the folder is created when missing).

    Parameters
    ----------
    path : str or Path
        The file to write (atomically: a temporary file renamed over it).
    title : str
        The page's title and heading.
    sections : sequence of (heading, HTML body)
        Tables and text, shown after the figures.
    figures : sequence of (caption, Figure or PNG bytes)
        Shown first; a matplotlib Figure is rendered at :data:`nclab.report.figures.FIGURE_DPI` and closed.
    folded : sequence of (heading, HTML body)
        Shown last, each folded in a ``<details>`` (the resolved config).

    Returns
    -------
    Path
        ``path``.

    Examples
    --------
    >>> import tempfile
    >>> sections = [("Numbers", metrics_table_html({"nc1": 0.5}))]
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     out = write_report(Path(tmp) / "demo" / "report.html", "Demo", sections)
    ...     text = out.read_text()
    >>> out.name, "<title>Demo</title>" in text, "0.5" in text
    ('report.html', True, True)
    """
    path = Path(path)
    used: set[str] = set()
    toc, parts = [], []
    for i, (caption, fig) in enumerate(figures):
        if isinstance(fig, bytes):
            png = fig
        else:
            from nclab.report.figures import figure_png

            png = figure_png(fig)
        data = base64.b64encode(png).decode("ascii")
        anchor = _anchor(f"figure {i + 1}", used)
        toc.append(f'<li><a href="#{anchor}">Figure {i + 1}: {html.escape(caption)}</a></li>')
        parts.append(
            f'<figure id="{anchor}"><img alt="{html.escape(caption)}" width="{_png_width(png)}" '
            f'src="data:image/png;base64,{data}"><figcaption>Figure {i + 1}: {html.escape(caption)}</figcaption>'
            "</figure>"
        )
    for heading, body in sections:
        anchor = _anchor(heading, used)
        toc.append(f'<li><a href="#{anchor}">{html.escape(heading)}</a></li>')
        parts.append(f'<h2 id="{anchor}">{html.escape(heading)}</h2>{body}')
    for heading, body in folded:
        anchor = _anchor(heading, used)
        toc.append(f'<li><a href="#{anchor}">{html.escape(heading)}</a></li>')
        parts.append(f'<details id="{anchor}"><summary>{html.escape(heading)}</summary>{body}</details>')
    nav = f"<nav><h2>Contents</h2><ol>{''.join(toc)}</ol></nav>" if len(toc) > 1 else ""
    banner = f"<p class=banner>{html.escape(_banner.get())}</p>" if _banner.get() else ""
    doc = (
        f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{html.escape(title)}</title>"
        f"<style>{_CSS}</style></head><body><h1>{html.escape(title)}</h1>{banner}{nav}{''.join(parts)}"
        "</body></html>\n"
    )
    return atomic_write_text(path, doc)


def add_section(path: str | Path, heading: str, body: str) -> Path:
    """Add a section (``heading``, HTML ``body``) to a report written by :func:`write_report`, after its figures
    (the first figure, its legend included, stays in the first viewport), and list it first in its contents (the
    file is rewritten atomically).

    A report that already has a section of that heading gets the new body in its place (re-running an experiment
    into the same folder does not stack copies). A file that is not such a report raises ``ValueError``.

    >>> import tempfile, pathlib
    >>> p = write_report(pathlib.Path(tempfile.mkdtemp()) / "r.html", "t", [("A", "<p>a</p>"), ("B", "<p>b</p>")])
    >>> text = add_section(p, "Verdicts", "<p>v</p>").read_text()
    >>> text.index("<p>v</p>") > text.index("<p>b</p>"), text.count('href="#verdicts"')
    (True, 1)
    """
    path = Path(path)
    doc = path.read_text(encoding="utf-8")
    anchor = re.sub(r"[^a-z0-9]+", "-", heading.lower()).strip("-") or "section"
    section = f'<h2 id="{anchor}">{html.escape(heading)}</h2>{body}'
    old = re.search(rf'<h2 id="{re.escape(anchor)}">.*?(?=<h2 id=|<figure id=|<details id=|</body>)', doc, re.S)
    if old:
        return atomic_write_text(path, doc[: old.start()] + section + doc[old.end() :])
    if re.search(r"</h1>", doc) is None or "</body>" not in doc:
        raise ValueError(f"{path} is not a report written by nclab (no <h1> title)")
    if "</nav>" in doc:
        item = f'<li><a href="#{anchor}">{html.escape(heading)}</a></li>'
        doc = doc.replace("<nav><h2>Contents</h2><ol>", f"<nav><h2>Contents</h2><ol>{item}", 1)
    end = doc.rindex("</body>")
    return atomic_write_text(path, doc[:end] + section + doc[end:])
