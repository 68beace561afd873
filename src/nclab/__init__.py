"""nclab: measure, simulate and predict neural collapse."""

from nclab.stats import ClassStats

__version__ = "0.1.0"
__all__ = ["ClassStats", "__version__"]
