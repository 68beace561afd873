"""Statistics the experiments and the papers' checks share, defined once: :func:`pearson`,
:func:`partial_pearson`.

Both ``vci-transfer``'s summary (our partial correlations) and the arithmetic of [Xu & Liu 2023]'s tables
(:func:`nclab.experiments.xu_liu2023.paper.xu2023_paper_r`) use it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["partial_pearson", "pearson"]


def pearson(x: Any, y: Any) -> float:
    """Pearson r of ``x`` and ``y`` (float64).

    >>> round(pearson([1.0, 2.0, 3.0], [2.0, 4.0, 7.0]), 6)
    0.993399
    """
    return float(np.corrcoef(np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64))[0, 1])


def partial_pearson(x: Any, y: Any, z: Any) -> float:
    """Pearson r of ``x`` and ``y`` controlling for ``z``: the correlation of their residuals after a least-squares
    fit on ``[1, z]`` each. nan with fewer than 4 points (the residuals of 3 points lie on a line: +-1 whatever the
    data) or when a residual is constant.

    Examples
    --------
    >>> z = np.array([0.0, 1.0, 2.0, 3.0, 4.0])
    >>> round(partial_pearson(z + np.array([1, -1, 0, 1, -1]), 2 * z + np.array([1, -1, 0, 1, -1]), z), 12)
    1.0
    """
    x, y, z = (np.asarray(v, dtype=np.float64) for v in (x, y, z))
    if x.size < 4 or not np.all(np.isfinite(np.concatenate([x, y, z]))):
        return float("nan")
    A = np.column_stack([np.ones_like(z), z])
    rx = x - A @ np.linalg.lstsq(A, x, rcond=None)[0]
    ry = y - A @ np.linalg.lstsq(A, y, rcond=None)[0]
    nx, ny = float(np.linalg.norm(rx)), float(np.linalg.norm(ry))
    scale = max(float(np.linalg.norm(x)), float(np.linalg.norm(y)), 1.0)
    if nx <= 1e-12 * scale or ny <= 1e-12 * scale:
        return float("nan")
    return float(rx @ ry / (nx * ny))
