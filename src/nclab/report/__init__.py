"""Reports: self-contained HTML (no external assets), figures of metrics tables, training-run reports."""

from nclab.report.html import metrics_table_html, write_report

__all__ = ["metrics_table_html", "write_report", "write_run_report"]


def __getattr__(name: str):  # the run report pulls in matplotlib: import it only when asked for
    if name == "write_run_report":
        from nclab.report.run_report import write_run_report

        return write_run_report
    raise AttributeError(name)
