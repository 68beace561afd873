"""Reference geometries: simplex ETF, orthogonal frame, ..."""

from nclab.geometry.frames import orthogonal_frame, simplex_etf

__all__ = ["orthogonal_frame", "simplex_etf"]
