"""The registry of reproducible experiments: ``nclab experiment list`` / ``nclab experiment run NAME --scale cpu``.

An experiment is a function ``fn(out: Path, scale: str, seed: int) -> dict`` registered with :func:`register`.
It writes its outputs (tables, figures, ``report.html``) under ``out`` and returns a small JSON-able summary.
``scale`` is one of the experiment's declared scales: ``"tiny"`` (what the test suite runs, seconds), ``"cpu"``
(minutes on 2 cores, the default of the CLI), ``"paper"`` (the paper's sizes). Modules that define experiments
are listed in :data:`EXPERIMENT_MODULES` and imported on first use of the registry.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["EXPERIMENT_MODULES", "Experiment", "get", "list_experiments", "register", "run"]

#: Modules whose import registers experiments (one per paper or theme, all in this package).
EXPERIMENT_MODULES: list[str] = [
    "nclab.experiments.training",
    "nclab.experiments.unconstrained",
    "nclab.experiments.spherical_codes",
    "nclab.experiments.theory_engines",
    "nclab.experiments.transfer",
]

_REGISTRY: dict[str, Experiment] = {}
_loaded = False

ExperimentFn = Callable[[Path, str, int], dict[str, Any]]


@dataclass(frozen=True)
class Experiment:
    name: str
    fn: ExperimentFn
    summary: str
    paper: str
    scales: tuple[str, ...] = field(default=("tiny", "cpu", "paper"))


def register(
    name: str, *, summary: str, paper: str, scales: tuple[str, ...] = ("tiny", "cpu", "paper")
) -> Callable[[ExperimentFn], ExperimentFn]:
    """Decorator: register ``fn(out, scale, seed) -> summary dict`` under ``name``."""

    def wrap(fn: ExperimentFn) -> ExperimentFn:
        if name in _REGISTRY and _REGISTRY[name].fn is not fn:
            raise ValueError(f"experiment {name!r} is registered twice")
        _REGISTRY[name] = Experiment(name=name, fn=fn, summary=summary, paper=paper, scales=tuple(scales))
        return fn

    return wrap


def _load() -> None:
    global _loaded
    if not _loaded:
        for module in EXPERIMENT_MODULES:
            importlib.import_module(module)
        _loaded = True


def list_experiments() -> list[Experiment]:
    _load()
    return [_REGISTRY[k] for k in sorted(_REGISTRY)]


def get(name: str) -> Experiment:
    _load()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown experiment {name!r}; known: {', '.join(sorted(_REGISTRY)) or '(none)'}") from None


def run(name: str, out: str | Path, *, scale: str = "cpu", seed: int = 0) -> dict[str, Any]:
    """Run experiment ``name`` at ``scale``, writing under ``out`` (created)."""
    exp = get(name)
    if scale not in exp.scales:
        raise ValueError(f"experiment {name!r} has scales {exp.scales}, not {scale!r}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    return exp.fn(out, scale, seed)
