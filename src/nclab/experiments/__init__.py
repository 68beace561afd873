"""The papers' experiments, the application layer above the library: ``nclab experiment list`` / ``run``.

One package per paper, each with two modules: ``experiments`` (what we run: the experiment functions, each
registered with its facts beside it, and their builders per scale) and ``paper`` (what the paper states: its claims
and protocol values, written apart from the builders): :mod:`~nclab.experiments.han2022`,
:mod:`~nclab.experiments.tirer_bruna2022`, :mod:`~nclab.experiments.wang2024`, :mod:`~nclab.experiments.jiang2024`,
:mod:`~nclab.experiments.xu_liu2023`; :mod:`~nclab.experiments.demo` is the ``nclab demo`` experiment.

The generic machinery stays flat: :mod:`~nclab.experiments.catalog` (``Experiment``, ``register``),
:mod:`~nclab.experiments.registry` (lookup, run, dry run), :mod:`~nclab.experiments.protocols`,
:mod:`~nclab.experiments.claims` (the claim engine: criteria, verdicts, outcomes), :mod:`~nclab.experiments.runs`
(run planning and training), :mod:`~nclab.experiments.convergence`, :mod:`~nclab.experiments.correlation`,
:mod:`~nclab.experiments.listing` and :mod:`~nclab.experiments.common` (figures, CSV and HTML tables). The cpu-scale
result files behind ``docs/reproductions.md`` are kept by ``scripts/reproductions.py``, outside the installed
package. Library packages never import this package.
"""

from nclab.experiments.catalog import SMOKE_TEST_NOTE, Experiment, register
from nclab.experiments.protocols import Protocol
from nclab.experiments.registry import EXPERIMENT_MODULES, PAPER_MODULES, dry_run, get, list_experiments, run

__all__ = [
    "EXPERIMENT_MODULES",
    "PAPER_MODULES",
    "SMOKE_TEST_NOTE",
    "Experiment",
    "Protocol",
    "dry_run",
    "get",
    "list_experiments",
    "register",
    "run",
]
