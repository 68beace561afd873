"""Metadata every metric declares: its name, which way is "more collapsed", and where it comes from."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

Direction = Literal["lower", "higher", "none"]
F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class MetricInfo:
    """``direction``: "lower" means smaller values are more collapsed; "none" for diagnostics."""

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
    """Which way is more collapsed for the metric ``name`` (aliases included)."""
    try:
        return REGISTRY[name].direction
    except KeyError:
        raise KeyError(f"unknown metric {name!r}; known: {sorted(REGISTRY)}") from None
