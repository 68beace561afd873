"""The experiments registered so far: :func:`register` (the decorator each experiment module uses) and
:data:`EXPERIMENTS`.

An experiment is a function ``fn(out: Path, scale: str, seed: int) -> dict`` registered with :func:`register`.
It writes its outputs (tables, figures, ``report.html``) under ``out`` and returns a small JSON-able summary.
``scale`` is one of the experiment's declared scales: ``"tiny"`` (a smoke test that the test suite runs, seconds:
:data:`SMOKE_TEST_NOTE`), ``"cpu"``
(minutes on 2 cores, the default of the CLI), ``"paper"`` (the paper's sizes).

Every fact of an experiment is declared once, beside its function, in the :func:`register` call: its measured
durations, the :class:`~nclab.experiments.protocols.Protocol` list of each scale, the run builders of each scale,
and the library code its numbers depend on. The claims a paper makes about it are written apart, in the paper's
``paper.py`` (what the paper states, independent of the code that runs); the registry attaches them to the
record (:attr:`Experiment.claims`). Looking experiments up (which first imports every paper package) is
:mod:`nclab.experiments.registry`'s: the experiment modules import this module, and the registry imports them, so
neither imports the other back.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["EXPERIMENTS", "METRICS_CODE", "SMOKE_TEST_NOTE", "TRAINING_CODE", "Experiment", "register"]

#: What the ``tiny`` scale is, said in its reports (a banner), by ``nclab experiment run`` and in the list.
SMOKE_TEST_NOTE = (
    "Smoke test (--scale tiny): sizes chosen to run the code in seconds, not to show collapse; its numbers and "
    "figures are not results. Run --scale cpu (minutes) for the smallest meaningful reproduction."
)

#: The library packages a training experiment's numbers depend on (``code=`` of :func:`register`).
TRAINING_CODE: tuple[str, ...] = ("nclab.train", "nclab.nets", "nclab.data", "nclab.measure", "nclab.monitor")
#: The library packages behind every collapse metric (``code=`` of :func:`register`).
METRICS_CODE: tuple[str, ...] = ("nclab.stats", "nclab.metrics")

# fn(out: Path, scale: str, seed: int[, selection=RunSelection]) -> summary
ExperimentFn = Callable[..., dict[str, Any]]
#: ``fn(scale) -> list[Protocol]``: what an experiment runs at ``scale``.
ProtocolFn = Callable[[str], list[Any]]
#: ``fn() -> {label: RunConfig}``: the training runs of one scale.
ConfigsFn = Callable[[], dict[str, Any]]


#: Every registered experiment by name (filled as the experiment modules are imported).
EXPERIMENTS: dict[str, Experiment] = {}


@dataclass(frozen=True)
class Experiment:
    """One registered experiment: its function and every fact declared beside it.

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
        Expected wall time per scale on the 2-core reference machine, as measured (a scale missing here has not
        been timed).
    selectable : bool, default=False
        Its paper scale trains a set of labelled runs that a
        :class:`~nclab.experiments.protocols.RunSelection` can cut (some runs, fewer epochs): ``fn`` then takes
        ``selection=`` as a keyword.
    scale_protocols : mapping of str to callable, default={}
        Per scale, ``fn(scale) -> list[Protocol]`` (:meth:`protocols`).
    configs : mapping of str to callable, default={}
        Per scale of a training experiment, ``fn() -> {label: RunConfig}``: the runs it trains.
    code : tuple of str, default=()
        The library modules and packages (dotted names) its numbers depend on, besides its own module's package:
        a result file is stale when their code changes (``scripts/reproductions_doc.py``).
    claims : tuple, default=()
        The papers' claims its summary measures (:class:`nclab.experiments.claims.Claim`), written in the papers'
        ``paper.py`` and attached by the registry.

    Examples
    --------
    >>> from pathlib import Path
    >>> exp = Experiment("toy", lambda out, scale, seed: {"seed": seed}, "a toy", "[Han et al. 2022]", ("tiny",))
    >>> exp.scales, exp.durations, exp.selectable, exp.fn(Path("."), "tiny", 3), exp.protocols("tiny")
    (('tiny',), {}, False, {'seed': 3}, [])
    """

    name: str
    fn: ExperimentFn
    summary: str
    paper: str  #: citation key of the paper it reproduces (docs/references.md)
    scales: tuple[str, ...] = field(default=("tiny", "cpu", "paper"))
    durations: Mapping[str, str] = field(default_factory=dict)
    selectable: bool = False
    scale_protocols: Mapping[str, ProtocolFn] = field(default_factory=dict, compare=False)
    configs: Mapping[str, ConfigsFn] = field(default_factory=dict, compare=False)
    code: tuple[str, ...] = ()
    claims: tuple[Any, ...] = field(default=(), compare=False)

    @property
    def papers(self) -> list[str]:
        """The citation keys of :attr:`paper` (``"[Han et al. 2022]"`` -> ``["Han et al. 2022"]``; several are
        separated by ``;``), as docs/references.md lists them."""
        return [k.strip() for k in self.paper.strip().strip("[]").split(";") if k.strip()]

    @property
    def module(self) -> str:
        """The module that defines :attr:`fn` (its paper's ``experiments`` module)."""
        return str(self.fn.__module__)

    def protocols(self, scale: str) -> list[Any]:
        """The :class:`~nclab.experiments.protocols.Protocol` list of ``scale`` (empty when none is declared)."""
        fn = self.scale_protocols.get(scale)
        return [] if fn is None else list(fn(scale))


def register(
    name: str,
    *,
    summary: str,
    paper: str,
    scales: tuple[str, ...] = ("tiny", "cpu", "paper"),
    selectable: bool = False,
    durations: Mapping[str, str] | None = None,
    protocols: ProtocolFn | Mapping[str, ProtocolFn] | None = None,
    configs: Mapping[str, ConfigsFn] | None = None,
    code: tuple[str, ...] = (),
) -> Callable[[ExperimentFn], ExperimentFn]:
    """Decorator: register ``fn(out, scale, seed) -> summary dict`` under ``name`` with its facts.

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
    durations : mapping of str to str, optional
        Measured wall time per scale on the 2-core reference machine (say when and at what load in a comment).
    protocols : callable or mapping of str to callable, optional
        ``fn(scale) -> list[Protocol]`` for every scale, or one such function per scale.
    configs : mapping of str to callable, optional
        Per scale of a training experiment, ``fn() -> {label: RunConfig}``.
    code : tuple of str, default=()
        The library modules and packages (dotted names) its numbers depend on, besides its own package.

    Returns
    -------
    callable
        The decorator; it adds an :class:`Experiment` to :data:`EXPERIMENTS` and returns ``fn`` unchanged.

    Raises
    ------
    ValueError
        When applied: another function is already registered under ``name``, or a duration, protocol or builder
        is given for a scale the experiment does not declare.

    Examples
    --------
    >>> @register("doc-toy", summary="a toy", paper="[Han et al. 2022]", scales=("tiny",), durations={"tiny": "~1 s"})
    ... def toy(out, scale, seed):
    ...     return {"seed": seed}
    >>> EXPERIMENTS["doc-toy"].fn is toy, EXPERIMENTS["doc-toy"].scales, EXPERIMENTS["doc-toy"].durations
    (True, ('tiny',), {'tiny': '~1 s'})
    >>> del EXPERIMENTS["doc-toy"]  # keep the registry to the real experiments
    """
    by_scale: dict[str, ProtocolFn] = dict.fromkeys(scales, protocols) if callable(protocols) else dict(protocols or {})
    times, builders = dict(durations or {}), dict(configs or {})

    def wrap(fn: ExperimentFn) -> ExperimentFn:
        if name in EXPERIMENTS and EXPERIMENTS[name].fn is not fn:
            raise ValueError(f"experiment {name!r} is registered twice")
        for what, given in (("durations", times), ("protocols", by_scale), ("configs", builders)):
            unknown = set(given) - set(scales)
            if unknown:
                raise ValueError(f"experiment {name!r}: {what} for undeclared scales {sorted(unknown)}")
        EXPERIMENTS[name] = Experiment(
            name, fn, summary, paper, tuple(scales), times, selectable, by_scale, builders, tuple(code)
        )
        return fn

    return wrap
