"""The registry of reproducible experiments: ``nclab experiment list`` / ``nclab experiment run NAME --scale cpu``.

Experiments are functions registered with :func:`nclab.experiments.catalog.register` (see there), one package per
paper: its ``experiments`` module (what we run, each experiment with its facts) is listed in
:data:`EXPERIMENT_MODULES`, its ``paper`` module (what the paper states: ``CLAIMS`` and ``PROTOCOLS``) in
:data:`PAPER_MODULES`. Both are imported on first use of the registry, which attaches each claim to the
experiment that measures it (:attr:`~nclab.experiments.catalog.Experiment.claims`). Adding an experiment touches
its paper's two modules only; adding a paper adds one package and its two lines here.
"""

from __future__ import annotations

import dataclasses
import importlib
from pathlib import Path
from typing import Any

from nclab.experiments.catalog import EXPERIMENTS, SMOKE_TEST_NOTE, Experiment
from nclab.experiments.protocols import RunSelection
from nclab.validation import check_int, check_output_dir

__all__ = [
    "EXPERIMENT_MODULES",
    "PAPER_MODULES",
    "all_claims",
    "dry_run",
    "get",
    "list_experiments",
    "paper_protocols",
    "run",
]

#: Modules whose import registers experiments: the demo, and each paper package's ``experiments``.
EXPERIMENT_MODULES: list[str] = [
    "nclab.experiments.demo",
    "nclab.experiments.xu_liu2023.experiments",
    "nclab.experiments.tirer_bruna2022.experiments",
    "nclab.experiments.wang2024.experiments",
    "nclab.experiments.jiang2024.experiments",
    "nclab.experiments.han2022.experiments",
]
#: What each paper states (``CLAIMS``, ``PROTOCOLS``), in the page's order of the papers.
PAPER_MODULES: list[str] = [
    "nclab.experiments.xu_liu2023.paper",
    "nclab.experiments.tirer_bruna2022.paper",
    "nclab.experiments.wang2024.paper",
    "nclab.experiments.jiang2024.paper",
    "nclab.experiments.han2022.paper",
]

_loaded = False


_CLAIMS: list[Any] = []
_PROTOCOLS: dict[str, dict[str, Any]] = {}


def _load() -> None:
    """Import every experiment and paper module; attach each claim to the experiment that measures it."""
    global _loaded
    if _loaded:
        return
    from nclab.experiments.claims import check_ids

    for module in EXPERIMENT_MODULES:
        importlib.import_module(module)
    claims: list[Any] = []
    protocols: dict[str, dict[str, Any]] = {}
    for module in PAPER_MODULES:
        paper = importlib.import_module(module)
        claims += paper.CLAIMS
        protocols.update(paper.PROTOCOLS)
    check_ids(claims)
    unknown = sorted({c.experiment for c in claims if c.experiment is not None} - set(EXPERIMENTS))
    if unknown:
        raise ValueError(f"claims name experiments that are not registered: {', '.join(unknown)}")
    for name, exp in EXPERIMENTS.items():
        mine = tuple(c for c in claims if c.experiment == name)
        if mine != exp.claims:
            EXPERIMENTS[name] = dataclasses.replace(exp, claims=mine)
    _CLAIMS[:] = claims
    _PROTOCOLS.update(protocols)
    _loaded = True


def all_claims() -> tuple[Any, ...]:
    """Every paper's claims (:class:`~nclab.experiments.claims.Claim`), papers in :data:`PAPER_MODULES` order, each
    paper's in its own order (the page's).

    Examples
    --------
    >>> claims = all_claims()
    >>> sum(c.experiment == "ufm-thm51" for c in claims) == len(get("ufm-thm51").claims) > 0
    True
    """
    _load()
    return tuple(_CLAIMS)


def paper_protocols(name: str) -> dict[str, Any]:
    """What experiment ``name``'s paper states of its paper-scale protocol: ``{run label: {field path: Value}}``
    (its package's ``paper.PROTOCOLS``; empty when the paper states none we compare)."""
    _load()
    return dict(_PROTOCOLS.get(name, {}))


def list_experiments() -> list[Experiment]:
    """Every registered experiment, sorted by name (the first call imports the experiment modules).

    Returns
    -------
    list of Experiment
        One per registered name.

    See Also
    --------
    get : one experiment by name.

    Examples
    --------
    >>> names = [e.name for e in list_experiments()]
    >>> names == sorted(names), "digits-mlp-demo" in names
    (True, True)
    """
    _load()
    return [EXPERIMENTS[k] for k in sorted(EXPERIMENTS)]


def get(name: str) -> Experiment:
    """The experiment registered as ``name`` (the first call imports the experiment modules).

    Parameters
    ----------
    name : str
        An experiment's name (``nclab experiment list``).

    Returns
    -------
    Experiment
        Its function, summary, citation key, scales, expected durations, protocols, builders and claims.

    Raises
    ------
    KeyError
        If no experiment has that name; the message lists the known ones.

    Examples
    --------
    >>> exp = get("digits-mlp-demo")
    >>> exp.name, "tiny" in exp.scales, callable(exp.fn)
    ('digits-mlp-demo', True, True)
    >>> get("no-such-experiment")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    KeyError: "unknown experiment 'no-such-experiment'; known: central-path-flow, ..."
    """
    _load()
    try:
        return EXPERIMENTS[name]
    except KeyError:
        raise KeyError(f"unknown experiment {name!r}; known: {', '.join(sorted(EXPERIMENTS)) or '(none)'}") from None


def run(
    name: str,
    out: str | Path,
    *,
    scale: str = "cpu",
    seed: int = 0,
    selection: RunSelection | None = None,
    device: str | None = None,
) -> dict[str, Any]:
    """Run experiment ``name`` at ``scale``, writing under ``out`` (created; a path that cannot be a writable
    folder raises ``NotADirectoryError`` / ``PermissionError`` before the experiment starts). The reports of a
    ``tiny`` run carry the smoke-test banner (:data:`~nclab.experiments.catalog.SMOKE_TEST_NOTE`).

    Parameters
    ----------
    name : str
        An experiment's name.
    out : str or pathlib.Path
        The output folder (created).
    scale : str, default="cpu"
        One of the experiment's scales: ``"tiny"`` (a smoke test), ``"cpu"`` or ``"paper"``.
    seed : int, default=0
        The experiment's seed, ``>= 0``.
    selection : RunSelection or None, default=None
        At the paper scale of a ``selectable`` experiment: train only some of its runs, or fewer epochs; the
        summary's ``selection`` and a banner on every report page say so.
    device : str or None, default=None
        At the paper scale: where its runs train (a torch device string; default ``"cuda"``, one GPU, which the
        cost estimates assume). ``"cpu"`` runs the paper's protocol on the CPU, hundreds to thousands of times
        slower than the estimate (docs/guides/experiments.md); combine it with a cut (``selection``). A device this
        machine lacks is refused before anything is written.

    Returns
    -------
    dict
        The experiment's JSON-able summary, also written to ``out/summary.json``; it ends with ``paper_claims``:
        the paper's value, ours and the verdict of each claim the experiment measures
        (:func:`nclab.experiments.claims.attach`, which also adds them to ``report.html``).

    Raises
    ------
    KeyError
        An unknown experiment.
    ValueError
        A scale the experiment does not declare, a negative seed, a selection the experiment or scale does not
        take (or whose patterns match no run, or whose epochs exceed a run's protocol), a ``device`` at another
        scale than paper, or a device this machine does not have (nothing is written then).
    NotADirectoryError, PermissionError
        ``out`` cannot be a writable folder.

    Examples
    --------
    A smoke test writes its table, figure and report (skipped here: it takes seconds, mostly plotting).

    >>> import tempfile, os
    >>> with tempfile.TemporaryDirectory() as tmp:  # doctest: +SKIP
    ...     summary = run("mse-decomposition-ufm", tmp, scale="tiny")
    ...     files = sorted(os.listdir(tmp))
    >>> files  # doctest: +SKIP
    ['decomposition.csv', 'fig2.png', 'report.html', 'summary.json']
    >>> run("mse-decomposition-ufm", "unused", scale="huge")
    Traceback (most recent call last):
        ...
    ValueError: experiment 'mse-decomposition-ufm' has scales ('tiny', 'cpu', 'paper'), not 'huge'
    """
    from nclab.experiments.claims import attach
    from nclab.experiments.runs import paper_device

    exp = get(name)
    if scale not in exp.scales:
        raise ValueError(f"experiment {name!r} has scales {exp.scales}, not {scale!r}")
    check_int(seed, name="seed", low=0)
    sel = None if selection is None or selection.is_all else selection
    with paper_device(device or "cuda"):
        protocols = dry_run(name, scale, sel)  # a selection the experiment does not take fails here
        if scale == "paper":  # every dataset checked before the first run: a missing one fails now, not hours in
            from nclab.experiments.protocols import check_data

            check_data(protocols, f"experiment {name!r} at scale paper")
        check_paper_device(name, scale, device)  # and the device: both before anything is written
        out = check_output_dir(out, name="output folder", create=True)
        from nclab.report.html import page_banner

        banner = SMOKE_TEST_NOTE if scale == "tiny" else "" if sel is None else _cut_note(sel)
        with page_banner(banner):  # every report page of a smoke test or of a cut protocol says so
            if sel is None:
                return attach(exp.claims, out, exp.fn(out, scale, seed))
            summary = exp.fn(out, scale, seed, selection=sel)
            return attach(exp.claims, out, {"selection": sel.describe(), **summary})


def check_paper_device(name: str, scale: str, device: str | None) -> None:
    """Refuse (``ValueError``, one sentence naming the cause and the fix) a ``device`` given at another scale than
    paper, and a paper-scale experiment that trains on a device this machine lacks (CUDA by default)."""
    from nclab.train.config import ConfigError, check_device_available

    if device is not None and scale != "paper":
        raise ValueError(
            f"--device chooses where a paper-scale experiment trains; {name!r} at scale {scale} trains on the CPU "
            "as its protocol says: drop --device"
        )
    if scale != "paper" or not any(p.kind == "training" for p in get(name).protocols(scale)):
        return
    try:
        check_device_available(device or "cuda", name="--device" if device else "device")
    except ConfigError as err:
        why = str(err).split(": ", 1)[-1].removesuffix("; use cpu")
        raise ValueError(
            f"experiment {name!r} at scale paper trains on {device or 'cuda'!r}, which this machine cannot use "
            f"({why}): run it on a machine with a GPU, or pass --device cpu (hundreds to thousands of times slower "
            "than the GPU estimate; cut it with --runs / --epochs); nothing was written"
        ) from None


def _cut_note(selection: RunSelection) -> str:
    return (f"A cut paper protocol: {selection.describe()}. Every other setting is the paper's; a verdict "
            "speaks for this cut, not for the paper's full protocol.")  # fmt: skip


def dry_run(name: str, scale: str = "paper", selection: RunSelection | None = None) -> list[Any]:
    """The :class:`~nclab.experiments.protocols.Protocol` list experiment ``name`` would run at ``scale``, resolved
    without running anything or reading any data (``nclab experiment run NAME --dry-run``).

    Parameters
    ----------
    name : str
        A registered experiment.
    scale : str, default="paper"
        One of the experiment's scales (else ``ValueError`` naming them).
    selection : RunSelection or None, default=None
        Keep the runs it selects (their protocols as the paper's: the epoch cut is applied to the configs when they
        train). ``ValueError`` when it cuts anything but the paper scale of a ``selectable`` experiment.

    Returns
    -------
    list of Protocol
        One per run the experiment trains or solves at ``scale`` (empty when none is declared).

    Examples
    --------
    >>> protocols = dry_run("fashion-mnist-cnn", "paper")  # [Han et al. 2022]'s Fashion-MNIST protocol
    >>> [(p.model, p.loss, p.epochs) for p in protocols][:2]
    [('vgg11_bn', 'mse', 350), ('vgg11_bn', 'ce', 350)]
    """
    exp = get(name)
    if scale not in exp.scales:
        raise ValueError(f"experiment {name!r} has scales {exp.scales}, not {scale!r}")
    if selection is None or selection.is_all:
        return exp.protocols(scale)
    if not (exp.selectable and scale == "paper"):
        takers = ", ".join(sorted(n for n, e in EXPERIMENTS.items() if e.selectable))
        raise ValueError(f"--runs / --epochs cut a paper-scale experiment of separate runs ({takers}), not {name!r} "
                         f"at scale {scale}")  # fmt: skip
    kept = list(selection.select({p.label: p for p in exp.protocols(scale)}).values())
    selection.check_epochs({p.label: p.epochs for p in kept if p.kind == "training"})
    return kept
