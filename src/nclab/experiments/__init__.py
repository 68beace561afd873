"""The papers' experiments, the application layer above the library: ``nclab experiment list`` / ``run``.

:mod:`nclab.experiments.registry` looks experiments up, :mod:`nclab.experiments.catalog` holds what the
modules registered; each module here defines the experiments of one paper or
theme (:mod:`~nclab.experiments.training`, :mod:`~nclab.experiments.unconstrained`,
:mod:`~nclab.experiments.spherical_codes`, :mod:`~nclab.experiments.theory_engines`) and
:mod:`nclab.experiments.common` the figure, CSV and scale helpers they share. :mod:`nclab.experiments.paper_claims`
holds the papers' reported values and judges each run's summary against them (the "paper vs ours" of every run);
the cpu-scale result files behind ``docs/reproductions.md`` are kept by ``scripts/reproductions.py``, outside the
installed package. Library packages never import this package.
"""

from nclab.experiments.catalog import SMOKE_TEST_NOTE, Experiment, declare_protocols, register
from nclab.experiments.protocols import Protocol
from nclab.experiments.registry import EXPERIMENT_MODULES, dry_run, get, list_experiments, run

__all__ = [
    "EXPERIMENT_MODULES",
    "SMOKE_TEST_NOTE",
    "Experiment",
    "Protocol",
    "declare_protocols",
    "dry_run",
    "get",
    "list_experiments",
    "register",
    "run",
]
