"""When to measure: :class:`Schedule` (any training loop) and :func:`measurement_epochs` (the built-in trainer's
log-spaced epochs, which :meth:`Schedule.log` reuses).

Epochs are non-negative Python or numpy integers. A schedule is given as a :class:`Schedule`, an ``int`` (every
``n`` epochs) or an iterable of epochs; anything else (a string, a float, a bool) is refused with a
``TypeError`` naming ``schedule``, because each would otherwise be read as something else: ``"10"`` as the
epochs 1 and 0, ``True`` as every epoch.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from nclab.validation import check_int

__all__ = ["Schedule", "check_epoch", "measurement_epochs"]


def measurement_epochs(epochs: int, num_log: int) -> list[int]:
    """``{0, epochs} U round(logspace(0, log10(epochs), num_log))``, sorted (the zero-error epoch is added
    during the run).

    Parameters
    ----------
    epochs : int
        Epochs of the run.
    num_log : int
        Log-spaced points between 1 and ``epochs`` before rounding (duplicates after rounding count once).

    Returns
    -------
    list of int
        Sorted distinct epochs in ``[0, epochs]``, always containing 0 and ``epochs``; ``[0]`` when ``epochs``
        is 0.

    See Also
    --------
    Schedule.log : the same epochs as a schedule.

    Examples
    --------
    >>> measurement_epochs(100, 5)
    [0, 1, 3, 10, 32, 100]
    """
    pts = np.unique(np.round(np.logspace(0, math.log10(max(epochs, 1)), num_log)).astype(int))
    return sorted({0, epochs, *(int(p) for p in pts if 1 <= p <= epochs)})


def check_epoch(epoch: Any, *, name: str = "epoch") -> int:
    """``epoch`` as an ``int >= 0``: Python and numpy integers pass; floats (also ``2.0``), strings and bools
    raise ``TypeError``, a negative epoch ``ValueError``, each naming ``name``.

    Parameters
    ----------
    epoch : Any
        The value to check.
    name : str, default="epoch"
        The argument's name in the error messages.

    Returns
    -------
    int
        ``epoch`` as a Python ``int``.

    Raises
    ------
    TypeError
        If ``epoch`` is not an integer (floats, strings and bools included).
    ValueError
        If ``epoch`` is negative.

    Examples
    --------
    >>> check_epoch(np.int64(3))
    3
    >>> check_epoch(2.7)
    Traceback (most recent call last):
        ...
    TypeError: epoch must be an int, got 2.7 (float)
    """
    return check_int(epoch, name=name, low=0)


class Schedule:
    """The epochs to measure: ``every(n)`` (0, n, 2n, ...), ``log(epochs, num)`` (0, ``epochs`` and ``num``
    log-spaced epochs between, as the built-in trainer), or ``at(epochs)``.

    Build one with the class methods :meth:`every`, :meth:`log`, :meth:`at` or :meth:`coerce` rather than the
    constructor.

    Parameters
    ----------
    rule : callable
        ``rule(epoch) -> bool``, whether ``epoch`` is measured.
    text : str
        Its description, shown by ``repr``.

    See Also
    --------
    measurement_epochs : the built-in trainer's log-spaced epochs.

    Examples
    --------
    >>> [e for e in range(12) if Schedule.every(5).due(e)]
    [0, 5, 10]
    >>> [e for e in range(101) if Schedule.log(100, 5).due(e)]
    [0, 1, 3, 10, 32, 100]
    >>> Schedule.coerce("10")
    Traceback (most recent call last):
        ...
    TypeError: schedule must be a Schedule, an int (every n epochs) or an iterable of epochs, got '10' (str)
    """

    def __init__(self, rule: Callable[[int], bool], text: str) -> None:
        self._rule, self._text = rule, text

    @classmethod
    def every(cls, n: int) -> Schedule:
        """Epochs 0, ``n``, ``2n``, ... (``n >= 1``)."""
        step = check_int(n, name="schedule", low=1)
        return cls(lambda e: e % step == 0, f"every {step}")

    @classmethod
    def log(cls, epochs: int, num: int = 20) -> Schedule:
        """:func:`measurement_epochs` of a run of ``epochs`` epochs with ``num`` log-spaced points."""
        epochs, num = check_int(epochs, name="epochs", low=0), check_int(num, name="num", low=1)
        pts = frozenset(measurement_epochs(epochs, num))
        return cls(pts.__contains__, f"log({epochs}, {num})")

    @classmethod
    def at(cls, epochs: Iterable[int]) -> Schedule:
        """Exactly the given epochs (non-negative integers)."""
        pts = frozenset(check_epoch(e, name=f"schedule[{i}]") for i, e in enumerate(epochs))
        return cls(pts.__contains__, f"at {sorted(pts)}")

    @classmethod
    def coerce(cls, spec: Schedule | int | Iterable[int] | None) -> Schedule:
        """``None`` -> every epoch; a :class:`Schedule` as it is; an ``int`` -> :meth:`every`; an iterable of
        epochs -> :meth:`at`. Strings, floats and bools raise ``TypeError`` naming ``schedule``."""
        if spec is None:
            return cls.every(1)
        if isinstance(spec, Schedule):
            return spec
        if isinstance(spec, int | np.integer) and not isinstance(spec, bool | np.bool_):
            return cls.every(spec)
        if isinstance(spec, str | bytes | bool | np.bool_) or not isinstance(spec, Iterable):
            raise TypeError(
                "schedule must be a Schedule, an int (every n epochs) or an iterable of epochs, "
                f"got {spec!r} ({type(spec).__name__})"
            )
        return cls.at(spec)

    def due(self, epoch: int) -> bool:
        """Whether ``epoch`` (an ``int >= 0``, :func:`check_epoch`) is on the schedule."""
        return bool(self._rule(check_epoch(epoch)))

    def __repr__(self) -> str:
        return f"Schedule({self._text})"
