"""Self-contained HTML reports: inline CSS, figures embedded as base64 PNG, no external asset."""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

from nclab.io.atomic import atomic_write_text
from nclab.metrics import REGISTRY

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;
color:#1b1b1b}h1{font-size:1.5rem}table{border-collapse:collapse;margin:1rem 0}
th,td{border-bottom:1px solid #ddd;padding:.3rem .8rem;text-align:left}td.num{text-align:right;
font-variant-numeric:tabular-nums}th{background:#f4f4f4}.note{color:#555;font-size:.9rem}img{max-width:100%}
"""


def _fmt(v: float) -> str:
    v = float(v)
    if math.isnan(v) or math.isinf(v):
        return str(v)
    return f"{v:.6g}"


def metrics_table_html(report: Mapping[str, float]) -> str:
    """An HTML table of metric, value and collapse direction (from the metric registry)."""
    rows = []
    for name, value in report.items():
        info = REGISTRY.get(name)
        direction = {"lower": "lower", "higher": "higher"}.get(info.direction if info else "", "")
        source = html.escape(info.source) if info else ""
        rows.append(
            f"<tr><td>{html.escape(name)}</td><td class=num>{_fmt(value)}</td>"
            f"<td>{direction}</td><td class=note>{source}</td></tr>"
        )
    return (
        "<table><thead><tr><th>metric</th><th>value</th><th>collapse is</th><th>source</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def write_report(
    path: str | Path,
    title: str,
    sections: Sequence[tuple[str, str]],
    figures: Sequence[tuple[str, bytes]] = (),
) -> Path:
    """Write ``report.html``: ``sections`` are (heading, HTML body) pairs, ``figures`` (caption, PNG bytes)."""
    path = Path(path)
    parts = [f"<h1>{html.escape(title)}</h1>"]
    for heading, body in sections:
        parts.append(f"<h2>{html.escape(heading)}</h2>{body}")
    for caption, png in figures:
        data = base64.b64encode(png).decode("ascii")
        parts.append(
            f'<figure><img alt="{html.escape(caption)}" src="data:image/png;base64,{data}">'
            f"<figcaption>{html.escape(caption)}</figcaption></figure>"
        )
    doc = (
        f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{html.escape(title)}</title>"
        f"<style>{_CSS}</style></head><body>{''.join(parts)}</body></html>\n"
    )
    return atomic_write_text(path, doc)
