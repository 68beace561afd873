"""Transfer scores: mean log odds (MLO) and MLOG [Xu & Liu 2023, Eq. (6)].

For downstream probe accuracies ``p_1 .. p_T`` (fractions) and the pretraining accuracy ``p_0``,

    MLO  = (1/T) sum_t log(p_t / (1 - p_t)),
    MLOG = MLO - log(p_0 / (1 - p_0)),

with the natural log (the only base that reproduces the paper's Tables 1-2). MLOG subtracts the pretraining
log odds to isolate how transferable the features are beyond how good the pretraining classifier is.

Accuracies 0 and 1 are results, not errors: a perfect probe (easy with d > N) has log odds +inf, so MLO = +inf
(and MLOG = +inf, or nan when the pretraining accuracy is 1 as well: inf - inf); accuracy 0 gives -inf.
IEEE arithmetic gives exactly these values; :func:`log_odds_note` says in words why a score is infinite or nan.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["log_odds", "log_odds_note", "mean_log_odds", "mlog"]


def _fractions(p: Any, name: str, percent: bool) -> np.ndarray:
    a = np.asarray(p, dtype=np.float64)
    if a.size == 0:
        raise ValueError(f"{name} is empty")
    if percent:
        a = a / 100.0
    if not np.all((a >= 0) & (a <= 1)):  # also false for NaN
        unit = "percentages in [0, 100]" if percent else "fractions in [0, 1]"
        # the hint only where it is likely the cause: every value reads as a percentage
        hint = " (pass percent=True for percentages)" if not percent and np.all((a >= 0) & (a <= 100)) else ""
        raise ValueError(f"{name} must be {unit}{hint}, got {np.asarray(p).ravel().tolist()}")
    return a


def _log_odds(a: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):  # log 0: p = 0 gives -inf, p = 1 gives +inf, both exact
        return np.log(a) - np.log1p(-a)


def log_odds(p: Any, *, percent: bool = False) -> np.ndarray | float:
    """``log(p / (1 - p))`` elementwise (natural log); ``percent=True`` reads ``p`` in percent. ``p = 1`` gives
    +inf, ``p = 0`` gives -inf.

    Parameters
    ----------
    p : float or array_like
        Accuracies, fractions in [0, 1] (percentages in [0, 100] with ``percent=True``).
    percent : bool, default=False
        Read ``p`` as percentages.

    Returns
    -------
    float or numpy.ndarray
        The log odds, a float for a scalar ``p``, else an array of ``p``'s shape; +inf where ``p = 1``, -inf
        where ``p = 0``.

    Raises
    ------
    ValueError
        If ``p`` is empty, or a value is outside the range (NaN included).

    See Also
    --------
    mean_log_odds : their mean over the downstream tasks (MLO).

    Examples
    --------
    >>> log_odds([0.5, 1.0]).tolist()
    [0.0, inf]
    >>> round(log_odds(90, percent=True), 6)  # log 9
    2.197225
    """
    out = _log_odds(_fractions(p, "p", percent))
    return float(out) if out.ndim == 0 else out


def mean_log_odds(accuracies: Any, *, percent: bool = False) -> float:
    """MLO: the mean of the downstream log odds ``log(p_t / (1 - p_t))`` over the tasks.

    Parameters
    ----------
    accuracies : array_like, shape (T,)
        Downstream probe accuracies, fractions in [0, 1].
    percent : bool, default=False
        Read ``accuracies`` as percentages in [0, 100] instead.

    Returns
    -------
    float
        MLO; +inf when a task has accuracy 1 (and none 0), -inf for accuracy 0, nan when both occur.

    Raises
    ------
    ValueError
        If ``accuracies`` is empty or a value is outside the range.

    See Also
    --------
    mlog : MLO minus the pretraining log odds.

    Examples
    --------
    >>> round(mean_log_odds([0.5, 0.9]), 6)  # (0 + log 9) / 2
    1.098612
    """
    odds = _log_odds(_fractions(accuracies, "accuracies", percent).ravel())
    with np.errstate(invalid="ignore"):  # +inf and -inf: nan, the honest value
        return float(np.mean(odds))


def mlog(accuracies: Any, pretrain_accuracy: float, *, percent: bool = False) -> float:
    """MLOG = MLO - log(p_0 / (1 - p_0)) [Xu & Liu 2023, Eq. (6)].

    Parameters
    ----------
    accuracies : array_like, shape (T,)
        Downstream probe accuracies (fractions, or percentages with ``percent=True``).
    pretrain_accuracy : float
        The pretraining task's test accuracy ``p_0``, in the same unit.
    percent : bool, default=False
        Read both as percentages in [0, 100].

    Returns
    -------
    float
        MLOG; +inf for a perfect probe (and no accuracy 0) with ``p_0 < 1``; nan when it is ``inf - inf`` (a
        perfect probe and ``p_0 = 1``) or MLO is nan (:func:`log_odds_note` says why in words).

    Raises
    ------
    ValueError
        If an accuracy is outside the range, or ``pretrain_accuracy`` is not one number.

    See Also
    --------
    mean_log_odds : MLO, the first term.

    Examples
    --------
    >>> round(mlog([0.9, 0.9], 0.9), 12)
    0.0
    """
    p0 = _fractions(pretrain_accuracy, "pretrain_accuracy", percent)
    if p0.size != 1:
        raise ValueError(f"pretrain_accuracy must be one number, got {np.asarray(pretrain_accuracy).tolist()}")
    return mean_log_odds(accuracies, percent=percent) - float(_log_odds(p0.ravel())[0])


def _signed(x: float) -> str:
    return "nan" if np.isnan(x) else f"{x:+g}"


def log_odds_note(accuracies: Mapping[str, float], pretrain_accuracy: float | None = None) -> str | None:
    """Why MLO (and MLOG, with ``pretrain_accuracy``) is infinite or nan, in words, or ``None`` when no accuracy
    is 0 or 1. ``accuracies`` maps task names to fractions in [0, 1].

    Examples
    --------
    >>> log_odds_note({"a": 0.9, "b": 1.0}, 0.8)
    "accuracy 1 (a perfect probe, log odds +inf) on 'b': MLO = +inf, MLOG = +inf"
    >>> log_odds_note({"a": 1.0}, 1.0).split(": ")[1]
    'MLO = +inf, MLOG = nan (inf - inf)'
    >>> log_odds_note({"a": 0.9}) is None
    True
    """
    acc = _fractions(list(accuracies.values()), "accuracies", False)
    perfect = [name for name, p in zip(accuracies, acc, strict=True) if p == 1]
    zero = [name for name, p in zip(accuracies, acc, strict=True) if p == 0]
    parts = []
    if perfect:
        parts.append(f"accuracy 1 (a perfect probe, log odds +inf) on {', '.join(map(repr, perfect))}")
    if zero:
        parts.append(f"accuracy 0 (log odds -inf) on {', '.join(map(repr, zero))}")
    p0 = None if pretrain_accuracy is None else float(_fractions(pretrain_accuracy, "pretrain_accuracy", False))
    if p0 in (0.0, 1.0):
        parts.append(f"pretraining accuracy {p0:g} (log odds {'+' if p0 else '-'}inf)")
    if not parts:
        return None
    mlo = mean_log_odds(acc)
    text = f"{'; '.join(parts)}: MLO = {_signed(mlo)}" + (" (+inf and -inf)" if np.isnan(mlo) else "")
    if p0 is not None:
        score = mlog(acc, p0)
        text += f", MLOG = {_signed(score)}" + (" (inf - inf)" if np.isnan(score) and not np.isnan(mlo) else "")
    return text
