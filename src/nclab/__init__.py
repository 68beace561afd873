"""nclab: measure, simulate and predict neural collapse."""

from nclab.monitor import CollapseMonitor, extract_features
from nclab.stats import ClassStats

__version__ = "0.1.0"
__all__ = ["ClassStats", "CollapseMonitor", "__version__", "extract_features"]
