"""Datasets from local files only (nclab never downloads). The embedded default is ``digits``."""

from nclab.data.digits import load_digits

__all__ = ["load_digits"]
