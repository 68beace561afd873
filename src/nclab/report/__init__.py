"""Reports: self-contained HTML (no external assets)."""

from nclab.report.html import metrics_table_html, write_report

__all__ = ["metrics_table_html", "write_report"]
