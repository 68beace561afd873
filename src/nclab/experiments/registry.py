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

from nclab.validation import check_int, check_output_dir

__all__ = ["DURATIONS", "EXPERIMENT_MODULES", "Experiment", "get", "list_experiments", "register", "run"]

#: Modules whose import registers experiments (one per paper or theme, all in this package).
EXPERIMENT_MODULES: list[str] = [
    "nclab.experiments.training",
    "nclab.experiments.unconstrained",
    "nclab.experiments.spherical_codes",
    "nclab.experiments.theory_engines",
    "nclab.experiments.transfer",
]

#: Measured wall time per experiment and scale on the shared 2-core machine: tiny from one run of each on
#: 2026-11-23 (other jobs running), cpu from docs/geometry.md and benchmarks/RESULTS.md, and "<= ..." cpu figures
#: from one run each on 2026-11-23 with the machine loaded (load average 6-8 on 2 cores: upper bounds). The paper
#: scale has not been timed on this machine (GPU-sized); ``nclab experiment list`` says so.
DURATIONS: dict[str, dict[str, str]] = {
    "central-path-flow": {"tiny": "~3 s", "cpu": "<= 1 min"},
    "digits-mlp-demo": {"tiny": "~15 s", "cpu": "~40 s"},
    "fashion-mnist-cnn": {"tiny": "~20 s", "cpu": "~1.5 min"},
    "geodesic-digits": {"tiny": "~7 s", "cpu": "<= 1.5 min"},
    "gnc-assignment": {"tiny": "~2 s", "cpu": "seconds"},
    "gnc-bounds-vs-d": {"tiny": "~13 s", "cpu": "minutes"},
    "gnc-d2-codes": {"tiny": "~4 s", "cpu": "~1 min"},
    "gnc-tau-maxcos": {"tiny": "~4 s", "cpu": "~35 s"},  # 2026-11-26, load 5-7: tiny 4.5 s, cpu 25-46 s
    "mse-decomposition-ufm": {"tiny": "<1 s", "cpu": "<= 1 min"},
    "mufm-tradeoff": {"tiny": "~14 s", "cpu": "<= 6 min"},
    "ufm-figures": {"tiny": "~5 s", "cpu": "<= 7 min"},
    "vci-transfer": {"tiny": "~11 s", "cpu": "~4.5 min"},
    "ufm-init-scale": {"tiny": "~4 s", "cpu": "<= 2 min"},
    "ufm-threshold-sweep": {"tiny": "~5 s", "cpu": "<= 2.5 min"},
    "ufm-thm51": {"tiny": "~1 s", "cpu": "<= 2 min"},
}

_REGISTRY: dict[str, Experiment] = {}
_loaded = False

ExperimentFn = Callable[[Path, str, int], dict[str, Any]]


@dataclass(frozen=True)
class Experiment:
    name: str
    fn: ExperimentFn
    summary: str
    paper: str  #: citation key of the paper it reproduces (docs/references.md)
    scales: tuple[str, ...] = field(default=("tiny", "cpu", "paper"))
    #: Expected wall time per scale on the 2-core reference machine, as measured (a scale missing here has not
    #: been timed).
    durations: dict[str, str] = field(default_factory=dict)


def register(
    name: str,
    *,
    summary: str,
    paper: str,
    scales: tuple[str, ...] = ("tiny", "cpu", "paper"),
) -> Callable[[ExperimentFn], ExperimentFn]:
    """Decorator: register ``fn(out, scale, seed) -> summary dict`` under ``name`` (its expected wall times
    come from :data:`DURATIONS`)."""

    def wrap(fn: ExperimentFn) -> ExperimentFn:
        if name in _REGISTRY and _REGISTRY[name].fn is not fn:
            raise ValueError(f"experiment {name!r} is registered twice")
        durations = DURATIONS.get(name, {})
        unknown = set(durations) - set(scales)
        if unknown:
            raise ValueError(f"experiment {name!r}: durations for undeclared scales {sorted(unknown)}")
        _REGISTRY[name] = Experiment(name, fn, summary, paper, tuple(scales), dict(durations))
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
    """Run experiment ``name`` at ``scale``, writing under ``out`` (created; a path that cannot be a writable
    folder raises ``NotADirectoryError`` / ``PermissionError`` before the experiment starts)."""
    exp = get(name)
    if scale not in exp.scales:
        raise ValueError(f"experiment {name!r} has scales {exp.scales}, not {scale!r}")
    check_int(seed, name="seed", low=0)
    out = check_output_dir(out, name="output folder", create=True)
    return exp.fn(out, scale, seed)
