"""nclab: measure, simulate and predict neural collapse."""

from typing import Any

__version__ = "0.1.0"
__all__ = ["ClassStats", "CollapseMonitor", "__version__", "extract_features", "read_metrics"]


def __getattr__(name: str) -> Any:
    # Imported on first use: ``import nclab.stats`` (or any package) runs this file first, and loading the
    # monitor here would pull the whole library (and torch.distributed, sinks, ...) into every import.
    if name == "ClassStats":
        from nclab.stats import ClassStats

        return ClassStats
    if name in ("CollapseMonitor", "extract_features"):
        from nclab import monitor

        return getattr(monitor, name)
    if name == "read_metrics":  # a run directory's rows: nclab.io.read_run_metrics
        from nclab.io.rundir import read_run_metrics

        return read_run_metrics
    raise AttributeError(f"module 'nclab' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
