"""Metadata every metric declares: its name, which way is "more collapsed", and where it comes from."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

Direction = Literal["lower", "higher", "none"]
F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class MetricInfo:
    """What a metric declares about itself, attached to the function as ``fn.info`` (:func:`metric`).

    Parameters
    ----------
    name : str
        The metric's name in reports and ``REGISTRY``.
    direction : {"lower", "higher", "none"}
        "lower" means smaller values are more collapsed; "none" for diagnostics.
    source : str
        Where it comes from (paper, equation, citation keys of docs/references.md).
    needs : tuple of str, default ("stats",)
        Inputs it needs: ``"stats"``, ``"features"``, ``"labels"``, ``"W"``, ``"b"``.

    Examples
    --------
    >>> from nclab.metrics import nc1
    >>> nc1.info.name, nc1.info.direction, nc1.info.needs
    ('nc1', 'lower', ('stats',))
    """

    name: str
    direction: Direction
    source: str
    needs: tuple[str, ...] = ("stats",)


REGISTRY: dict[str, MetricInfo] = {}


def metric(name: str, direction: Direction, source: str, needs: tuple[str, ...] = ("stats",)) -> Callable[[F], F]:
    """Register a metric function and attach its :class:`MetricInfo` as ``fn.info``."""
    if direction not in ("lower", "higher", "none"):
        raise ValueError(f"direction must be 'lower', 'higher' or 'none', got {direction!r}")

    def wrap(fn: F) -> F:
        info = MetricInfo(name=name, direction=direction, source=source, needs=needs)
        if name in REGISTRY:
            raise ValueError(f"metric {name!r} registered twice")
        REGISTRY[name] = info
        vars(fn)["info"] = info  # fn.info: a function attribute, which a Callable type cannot declare
        return fn

    return wrap


def collapse_direction(name: str) -> Direction:
    """Which way is more collapsed for the metric ``name`` (aliases included).

    Parameters
    ----------
    name : str
        A registered metric name.

    Returns
    -------
    {"lower", "higher", "none"}
        "lower": smaller values are more collapsed; "none": a diagnostic.

    Raises
    ------
    KeyError
        Unknown name (the message lists the known ones).

    Examples
    --------
    >>> collapse_direction("nc1"), collapse_direction("ncc_accuracy"), collapse_direction("rank_metrics")
    ('lower', 'higher', 'none')
    """
    try:
        return REGISTRY[name].direction
    except KeyError:
        raise KeyError(f"unknown metric {name!r}; known: {sorted(REGISTRY)}") from None
