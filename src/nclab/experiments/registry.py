"""The registry of reproducible experiments: ``nclab experiment list`` / ``nclab experiment run NAME --scale cpu``.

Experiments are functions registered with :func:`nclab.experiments.catalog.register` (see there). Modules that
define experiments are listed in :data:`EXPERIMENT_MODULES` and imported on first use of the registry.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from nclab.experiments.catalog import EXPERIMENTS, SMOKE_TEST_NOTE, Experiment
from nclab.validation import check_int, check_output_dir

__all__ = ["EXPERIMENT_MODULES", "get", "list_experiments", "run"]

#: Modules whose import registers experiments (one per paper or theme, all in this package).
EXPERIMENT_MODULES: list[str] = [
    "nclab.experiments.training",
    "nclab.experiments.unconstrained",
    "nclab.experiments.spherical_codes",
    "nclab.experiments.theory_engines",
    "nclab.experiments.transfer",
]

_loaded = False


def _load() -> None:
    global _loaded
    if not _loaded:
        for module in EXPERIMENT_MODULES:
            importlib.import_module(module)
        _loaded = True


def list_experiments() -> list[Experiment]:
    _load()
    return [EXPERIMENTS[k] for k in sorted(EXPERIMENTS)]


def get(name: str) -> Experiment:
    _load()
    try:
        return EXPERIMENTS[name]
    except KeyError:
        raise KeyError(f"unknown experiment {name!r}; known: {', '.join(sorted(EXPERIMENTS)) or '(none)'}") from None


def run(name: str, out: str | Path, *, scale: str = "cpu", seed: int = 0) -> dict[str, Any]:
    """Run experiment ``name`` at ``scale``, writing under ``out`` (created; a path that cannot be a writable
    folder raises ``NotADirectoryError`` / ``PermissionError`` before the experiment starts). The reports of a
    ``tiny`` run carry the smoke-test banner (:data:`~nclab.experiments.catalog.SMOKE_TEST_NOTE`).

    The summary returned (also written to ``out/summary.json``) ends with ``paper_claims``: the paper's value,
    ours and the verdict of each claim the experiment measures (:func:`nclab.experiments.paper_claims.attach`,
    which also adds them to ``report.html``)."""
    from nclab.experiments.paper_claims import attach

    exp = get(name)
    if scale not in exp.scales:
        raise ValueError(f"experiment {name!r} has scales {exp.scales}, not {scale!r}")
    check_int(seed, name="seed", low=0)
    out = check_output_dir(out, name="output folder", create=True)
    if scale != "tiny":
        return attach(name, out, exp.fn(out, scale, seed))
    from nclab.report.html import page_banner

    with page_banner(SMOKE_TEST_NOTE):  # every report of a tiny run says it is a smoke test
        summary = exp.fn(out, scale, seed)
    return attach(name, out, summary)
