"""Transfer scores: mean log odds (MLO) and MLOG [Xu & Liu 2023, Eq. (6)].

For downstream probe accuracies ``p_1 .. p_T`` (fractions) and the pretraining accuracy ``p_0``,

    MLO  = (1/T) sum_t log(p_t / (1 - p_t)),
    MLOG = MLO - log(p_0 / (1 - p_0)),

with the natural log (the only base that reproduces the paper's Tables 1-2). MLOG subtracts the pretraining
log odds to isolate how transferable the features are beyond how good the pretraining classifier is.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["log_odds", "mean_log_odds", "mlog"]


def _fractions(p: Any, name: str, percent: bool) -> np.ndarray:
    a = np.asarray(p, dtype=np.float64)
    if a.size == 0:
        raise ValueError(f"{name} is empty")
    if percent:
        a = a / 100.0
    if not np.all((a > 0) & (a < 1)):
        unit = "percentages in (0, 100)" if percent else "fractions in (0, 1) (pass percent=True for percentages)"
        raise ValueError(f"{name} must be {unit}, got {np.asarray(p).ravel().tolist()}")
    return a


def log_odds(p: Any, *, percent: bool = False) -> np.ndarray | float:
    """``log(p / (1 - p))`` elementwise (natural log); ``percent=True`` reads ``p`` in percent."""
    a = _fractions(p, "p", percent)
    out = np.log(a) - np.log1p(-a)
    return float(out) if out.ndim == 0 else out


def mean_log_odds(accuracies: Any, *, percent: bool = False) -> float:
    """MLO: the mean of the downstream log odds ``log(p_t / (1 - p_t))`` over the tasks.

    Parameters
    ----------
    accuracies : (T,) downstream probe accuracies, fractions in (0, 1)
    percent : read ``accuracies`` as percentages in (0, 100) instead

    See Also
    --------
    mlog : MLO minus the pretraining log odds.

    Examples
    --------
    >>> round(mean_log_odds([0.5, 0.9]), 6)  # (0 + log 9) / 2
    1.098612
    """
    a = _fractions(accuracies, "accuracies", percent).ravel()
    return float(np.mean(np.log(a) - np.log1p(-a)))


def mlog(accuracies: Any, pretrain_accuracy: float, *, percent: bool = False) -> float:
    """MLOG = MLO - log(p_0 / (1 - p_0)) [Xu & Liu 2023, Eq. (6)].

    Parameters
    ----------
    accuracies : (T,) downstream probe accuracies (fractions, or percentages with ``percent=True``)
    pretrain_accuracy : the pretraining task's test accuracy ``p_0``, in the same unit

    Examples
    --------
    >>> round(mlog([0.9, 0.9], 0.9), 12)
    0.0
    """
    return mean_log_odds(accuracies, percent=percent) - float(log_odds(pretrain_accuracy, percent=percent))
