"""The experiments registered so far: :func:`register` (the decorator each experiment module uses) and
:data:`EXPERIMENTS`.

An experiment is a function ``fn(out: Path, scale: str, seed: int) -> dict`` registered with :func:`register`.
It writes its outputs (tables, figures, ``report.html``) under ``out`` and returns a small JSON-able summary.
``scale`` is one of the experiment's declared scales: ``"tiny"`` (a smoke test that the test suite runs, seconds:
:data:`SMOKE_TEST_NOTE`), ``"cpu"``
(minutes on 2 cores, the default of the CLI), ``"paper"`` (the paper's sizes). Looking experiments up (which
first imports every module that defines some) is :mod:`nclab.experiments.registry`'s: the experiment modules
import this module, and the registry imports them, so neither imports the other back.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["DURATIONS", "EXPERIMENTS", "PROTOCOLS", "SMOKE_TEST_NOTE", "Experiment", "declare_protocols", "register"]

#: What the ``tiny`` scale is, said in its reports (a banner), by ``nclab experiment run`` and in the list.
SMOKE_TEST_NOTE = (
    "Smoke test (--scale tiny): sizes chosen to run the code in seconds, not to show collapse; its numbers and "
    "figures are not results. Run --scale cpu (minutes) for the smallest meaningful reproduction."
)

#: Measured wall time per experiment and scale on the shared 2-core machine: tiny from one run of each on
#: 2026-11-23 (other jobs running), cpu from docs/geometry.md and benchmarks/RESULTS.md, and "<= ..." cpu figures
#: from one run each on 2026-11-23 with the machine loaded (load average 6-8 on 2 cores: upper bounds). The paper
#: scale has not been timed on this machine (GPU-sized); ``nclab experiment list`` says so, and gives the GPU-hours
#: of a training experiment's paper scale (:func:`nclab.experiments.protocols.estimate`). Entries measured later
#: say when and at what load beside them.
DURATIONS: dict[str, dict[str, str]] = {
    "central-path-flow": {"tiny": "~3 s", "cpu": "<= 1 min"},
    "digits-mlp-demo": {"tiny": "~15 s", "cpu": "~40 s"},
    # 2026-11-26: 720 s at load 4-5 (paper recipe, 80 epochs, 2,000 images, 1 seed per loss), 514 s at load 2-3.
    # 2026-12-05, 3 seeds per loss on 1,000 images, one thread per run: 477 s at load 11-13 (6 runs of 80 epochs);
    # tiny (3 seeds per loss) ~50 s at load 6-7
    "fashion-mnist-cnn": {"tiny": "~50 s", "cpu": "<= 8 min"},
    "geodesic-digits": {"tiny": "~7 s", "cpu": "<= 1.5 min"},
    "gnc-assignment": {"tiny": "~2 s", "cpu": "<= 16 s"},  # cpu: 2026-11-26 11:57, load 9.0-9.6, CLI wall time
    # cpu: 2026-11-26, after the dense Softmax Code pieces and the cut search (one start of 600 steps per d): 88 s
    # of CLI wall time at load 1 (15:03), 254 s at load 4-5 (14:42), 88-90 s of CPU time; was > 7 CPU-min before
    "gnc-bounds-vs-d": {"tiny": "~13 s", "cpu": "~2 min"},
    "gnc-d2-codes": {"tiny": "~4 s", "cpu": "~1 min"},
    "gnc-tau-maxcos": {"tiny": "~4 s", "cpu": "~35 s"},  # 2026-11-26, load 5-7: tiny 4.5 s, cpu 25-46 s
    # 2026-11-26 11:49, load average 9.5 on 2 cores, the CLI's wall time (imports included): upper bounds
    # cpu: 2026-11-26 15:00, the Fashion-MNIST stand-ins (Fig. 2: 2 runs x 60 epochs, Fig. 4: 4 runs x 30 epochs):
    # 131 s of CLI wall time at load 1.5-3 (195 s of CPU time); tiny 6 s. 15:15, with Fig. 5 (2 more runs x 60
    # epochs), OMP_NUM_THREADS=1: 185 s of CPU time, 321 s of CLI wall time at load 3.2-5.1 (57 % of a core)
    # 15:41, Figs. 4 and 5 on 3 seeds each (20 runs), one thread per run: 456 s at load 1-2. 2026-12-05: Fig. 2 on
    # 3 seeds and a fourth learned Fig. 4 seed (25 runs, +300k of 1.2M image-epochs): ~+2 min at that rate, untimed
    "gnc-trained": {"tiny": "<= 20 s", "cpu": "~10 min"},
    "mse-nc-benchmarks": {"tiny": "<= 25 s"},
    "pfc-table1": {"tiny": "<= 25 s"},
    "mse-decomposition-ufm": {"tiny": "<1 s", "cpu": "<= 1 min"},
    "mufm-tradeoff": {"tiny": "~14 s", "cpu": "<= 6 min"},
    # 2026-11-26: cpu 189 s at load 5, 76 s at load 2 (15:16); tiny 57 s wall at load 8
    "resnet-depth": {"tiny": "~15 s", "cpu": "~2 min"},
    "ufm-figures": {"tiny": "~5 s", "cpu": "<= 7 min"},
    # the redesigned cpu scale (24 runs x 30 epochs): 530 s at load 4-5, 506 s at load 3 and 244 s at load 1-2 (15:28)
    "vci-transfer": {"tiny": "~11 s", "cpu": "~6 min"},
    "ufm-init-scale": {"tiny": "~4 s", "cpu": "<= 2 min"},
    "ufm-threshold-sweep": {"tiny": "~5 s", "cpu": "<= 2.5 min"},
    "ufm-thm51": {"tiny": "~1 s", "cpu": "<= 2 min"},
}

# fn(out: Path, scale: str, seed: int[, selection=RunSelection]) -> summary
ExperimentFn = Callable[..., dict[str, Any]]
ProtocolFn = Callable[[str], list[Any]]

#: Per experiment name, per scale: ``fn(scale)``, the :class:`~nclab.experiments.protocols.Protocol` list of that
#: scale (filled by :func:`declare_protocols`; protocols may be declared before, or without, the experiment they
#: belong to, and different modules may declare different scales of one experiment: the paper protocol of an
#: experiment another module registers).
PROTOCOLS: dict[str, dict[str, ProtocolFn]] = {}


#: Every registered experiment by name (filled as the experiment modules are imported).
EXPERIMENTS: dict[str, Experiment] = {}


@dataclass(frozen=True)
class Experiment:
    """One registered experiment: its function and what ``nclab experiment list`` says about it.

    Built by :func:`register`; looked up with :func:`nclab.experiments.get`.

    Parameters
    ----------
    name : str
        The name it is run by (``nclab experiment run NAME``).
    fn : callable
        ``fn(out: Path, scale: str, seed: int) -> dict``: writes its outputs under ``out`` and returns a small
        JSON-able summary.
    summary : str
        One line on what it shows.
    paper : str
        Citation key of the paper it reproduces (docs/references.md).
    scales : tuple of str, default=("tiny", "cpu", "paper")
        The scales it runs at.
    durations : dict of str to str, default={}
        Expected wall time per scale on the 2-core reference machine, as measured (:data:`DURATIONS`).
    selectable : bool, default=False
        Its paper scale trains a set of labelled runs that a
        :class:`~nclab.experiments.protocols.RunSelection` can cut (some runs, fewer epochs): ``fn`` then takes
        ``selection=`` as a keyword.

    Examples
    --------
    >>> from pathlib import Path
    >>> exp = Experiment("toy", lambda out, scale, seed: {"seed": seed}, "a toy", "[Han et al. 2022]", ("tiny",))
    >>> exp.scales, exp.durations, exp.selectable, exp.fn(Path("."), "tiny", 3)
    (('tiny',), {}, False, {'seed': 3})
    """

    name: str
    fn: ExperimentFn
    summary: str
    paper: str  #: citation key of the paper it reproduces (docs/references.md)
    scales: tuple[str, ...] = field(default=("tiny", "cpu", "paper"))
    #: Expected wall time per scale on the 2-core reference machine, as measured (a scale missing here has not
    #: been timed).
    durations: dict[str, str] = field(default_factory=dict)
    selectable: bool = False

    @property
    def papers(self) -> list[str]:
        """The citation keys of :attr:`paper` (``"[Han et al. 2022]"`` -> ``["Han et al. 2022"]``; several are
        separated by ``;``), as docs/references.md lists them."""
        return [k.strip() for k in self.paper.strip().strip("[]").split(";") if k.strip()]

    def protocols(self, scale: str) -> list[Any]:
        """The :class:`~nclab.experiments.protocols.Protocol` list of ``scale`` (empty when none is declared)."""
        fn = PROTOCOLS.get(self.name, {}).get(scale)
        return [] if fn is None else list(fn(scale))


def declare_protocols(
    name: str, *, scales: tuple[str, ...] = ("tiny", "cpu", "paper")
) -> Callable[[ProtocolFn], ProtocolFn]:
    """Decorator: ``fn(scale) -> list[Protocol]`` gives what experiment ``name`` runs at each of ``scales``
    (``nclab experiment list``, ``run --dry-run``, the paper-scale data check). A scale declared twice (by two
    different functions) is an error.

    Parameters
    ----------
    name : str
        The experiment's name (as registered with :func:`register`).
    scales : tuple of str, default=("tiny", "cpu", "paper")
        The scales ``fn`` describes.

    Returns
    -------
    callable
        The decorator; it returns ``fn`` unchanged.

    Examples
    --------
    >>> from nclab.experiments.catalog import PROTOCOLS
    >>> @declare_protocols("toy-experiment", scales=("tiny",))
    ... def toy(scale):
    ...     return []
    >>> PROTOCOLS["toy-experiment"]["tiny"] is toy
    True
    >>> del PROTOCOLS["toy-experiment"]
    """

    def wrap(fn: ProtocolFn) -> ProtocolFn:
        declared = PROTOCOLS.setdefault(name, {})
        twice = [s for s in scales if s in declared and declared[s] is not fn]
        if twice:
            raise ValueError(f"the {', '.join(twice)} protocols of experiment {name!r} are declared twice")
        declared.update(dict.fromkeys(scales, fn))
        return fn

    return wrap


def register(
    name: str,
    *,
    summary: str,
    paper: str,
    scales: tuple[str, ...] = ("tiny", "cpu", "paper"),
    selectable: bool = False,
) -> Callable[[ExperimentFn], ExperimentFn]:
    """Decorator: register ``fn(out, scale, seed) -> summary dict`` under ``name`` (its expected wall times
    come from :data:`DURATIONS`).

    Parameters
    ----------
    name : str
        The experiment's name.
    summary : str
        One line on what it shows.
    paper : str
        Citation key of the paper it reproduces (resolving in docs/references.md).
    scales : tuple of str, default=("tiny", "cpu", "paper")
        The scales it runs at.
    selectable : bool, default=False
        ``fn`` takes ``selection=`` (a :class:`~nclab.experiments.protocols.RunSelection`) at the paper scale.

    Returns
    -------
    callable
        The decorator; it adds an :class:`Experiment` to :data:`EXPERIMENTS` and returns ``fn`` unchanged.

    Raises
    ------
    ValueError
        When applied: another function is already registered under ``name``, or :data:`DURATIONS` times a
        scale the experiment does not declare.

    Examples
    --------
    >>> @register("doc-toy", summary="a toy", paper="[Han et al. 2022]", scales=("tiny",))
    ... def toy(out, scale, seed):
    ...     return {"seed": seed}
    >>> EXPERIMENTS["doc-toy"].fn is toy, EXPERIMENTS["doc-toy"].scales
    (True, ('tiny',))
    >>> del EXPERIMENTS["doc-toy"]  # keep the registry to the real experiments
    """

    def wrap(fn: ExperimentFn) -> ExperimentFn:
        if name in EXPERIMENTS and EXPERIMENTS[name].fn is not fn:
            raise ValueError(f"experiment {name!r} is registered twice")
        durations = DURATIONS.get(name, {})
        unknown = set(durations) - set(scales)
        if unknown:
            raise ValueError(f"experiment {name!r}: durations for undeclared scales {sorted(unknown)}")
        EXPERIMENTS[name] = Experiment(name, fn, summary, paper, tuple(scales), dict(durations), selectable)
        return fn

    return wrap
