"""Generic machinery of the training experiments: where paper-scale runs train (:func:`paper_device`), run configs
as protocols (:func:`protocols_of`), the smoke-test runs of the ``tiny`` scale (:func:`tiny_configs`), the runner
(:func:`run_plan`, :func:`train_runs`, :func:`run_configs`) and the summary of a set of runs (:func:`summary_table`).

Each paper's package builds its runs (``{label: RunConfig}``, from the presets of :mod:`nclab.train.presets` and the
networks of :mod:`nclab.nets`) and hands them to :func:`run_configs`; :func:`protocols_of` turns them into
:class:`~nclab.experiments.protocols.Protocol` values, which ``tests/test_reproduction_protocols.py`` compares with
what each paper states (its package's ``paper.py``, written apart from the builders).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from nclab.experiments.protocols import Protocol, RunSelection

__all__ = [
    "PAPER_DEVICE",
    "gpu_settings",
    "paper_device",
    "protocols_of",
    "resolve_paper",
    "run_configs",
    "run_key",
    "run_plan",
    "summary_table",
    "tiny_configs",
    "train_runs",
]


#: Where every paper-scale run trains: one GPU (the cost estimates assume an H200) unless
#: :func:`nclab.experiments.run` is given ``device=`` (``nclab experiment run --device``), which sets this for the
#: experiment's duration (:func:`paper_device`).
PAPER_DEVICE: ContextVar[str] = ContextVar("nclab_paper_device", default="cuda")


@contextmanager
def paper_device(device: str) -> Iterator[None]:
    """Within the block, paper-scale runs train on ``device`` (a torch device string) instead of ``cuda``."""
    token = PAPER_DEVICE.set(device)
    try:
        yield
    finally:
        PAPER_DEVICE.reset(token)


def gpu_settings() -> dict[str, Any]:
    """The ``train`` settings of a paper-scale run: its device (:data:`PAPER_DEVICE`), threads as they are."""
    return {"train": {"device": PAPER_DEVICE.get(), "threads": None}}


def resolve_paper(raw: dict[str, Any]) -> Any:
    """The :class:`~nclab.train.config.RunConfig` of a paper-scale run's raw config, on :data:`PAPER_DEVICE`."""
    from nclab.train.config import deep_merge, resolve_config

    return resolve_config(deep_merge(raw, gpu_settings()))


def protocols_of(configs: dict, *, lr_sweep: tuple[float, ...] = (), seeds: dict | None = None) -> list[Protocol]:
    """``{label: RunConfig}`` as protocols (``seeds``: per label, default the config's seed)."""
    return [
        Protocol.from_config(c, label, lr_sweep=lr_sweep, seeds=(seeds or {}).get(label))
        for label, c in configs.items()
    ]


# ---------------------------------------------------------------------------------------------------- tiny scale
def tiny_configs(
    kind: str,
    preset: str,
    model: dict[str, Any],
    *,
    losses: tuple[str, ...] = ("ce", "ce"),
    heads: tuple[dict[str, Any], ...] | None = None,
    layers: str = "penultimate",
) -> dict:
    """A smoke test of the runner on the embedded digits: one run of two epochs per entry of ``losses`` in the
    shape of ``kind``'s runs (``preset`` formatted with ``loss``; the i-th run with the i-th of ``heads``)."""
    from nclab.train.config import resolve_config

    out = {}
    for i, loss in enumerate(losses):
        if heads is not None:
            model = {**model, "head": heads[i]}
        raw = {
            "name": f"{kind}-tiny-{i}",
            "seed": i,
            "preset": preset.format(loss=loss),
            "data": {"name": "digits", "per_class": 20, "test_per_class": 10},
            "model": model,
            "train": {"epochs": 2, "batch_size": 32, "threads": 1},
            "measure": {"epochs": [2], "splits": ["train"], "layers": layers},
            "report": False,
        }
        out[f"digits/{model['name']}/{loss}-{i}"] = resolve_config(raw)
    return out


# ---------------------------------------------------------------------------------------------------- runner
# ---------------------------------------------------------------------------------------------------- runner
def run_plan(out: Path, configs: dict, *, seed: int = 0, seeds: dict | None = None) -> dict[str, tuple[Any, Path]]:
    """Where :func:`train_runs` trains each run: ``{"label seed<s>": (its RunConfig, its folder)}``, one per seed of
    ``seeds[label]`` (default ``(0,)``) shifted by ``seed``, in ``out/<label, / as ->/seed<s>``.

    Parameters
    ----------
    out : pathlib.Path
        The experiment's output folder.
    configs : dict
        ``{label: RunConfig}``.
    seed : int, default=0
        The experiment's seed: added to every run's config seed and seed index.
    seeds : dict, optional
        Per label, the seed indices to train (default one, 0).

    Returns
    -------
    dict
        ``{"label seed<s>": (RunConfig, pathlib.Path)}`` in the order of ``configs``.

    Examples
    --------
    >>> from nclab.train import resolve_config
    >>> plan = run_plan(Path("out"), {"fig5/cmf": resolve_config({"seed": 3})}, seed=1, seeds={"fig5/cmf": (0, 1)})
    >>> [(k, cfg.seed, folder.as_posix()) for k, (cfg, folder) in plan.items()]
    [('fig5/cmf seed1', 4, 'out/fig5-cmf/seed1'), ('fig5/cmf seed2', 5, 'out/fig5-cmf/seed2')]
    """
    plan = {}
    for label, cfg in configs.items():
        for s in (seeds or {}).get(label, (0,)):
            folder = Path(out) / label.replace("/", "-") / f"seed{seed + s}"
            plan[f"{label} seed{seed + s}"] = (cfg.model_copy(update={"seed": cfg.seed + seed + s}), folder)
    return plan


def train_runs(out: Path, configs: dict, *, seed: int = 0, seeds: dict | None = None, progress: bool = True) -> dict:
    """Train every run of ``configs`` (``{label: RunConfig}``) where :func:`run_plan` puts it; a run whose folder
    already holds its config is resumed (an interrupted experiment continues where it stopped), a folder holding
    another config refused before any run trains. Returns the summary (per run: its zero-error epoch, NC1 and
    errors, as ``fashion-mnist-cnn``'s) and writes ``out/report.html``."""
    from nclab.io.rundir import RunDir
    from nclab.report.html import metrics_table_html, write_report
    from nclab.report.run_report import collapse_summary
    from nclab.train.trainer import train

    plan = run_plan(out, configs, seed=seed, seeds=seeds)
    for run_cfg, folder in plan.values():  # every refusal before the first epoch
        _check_own_run(folder, run_cfg)
    runs = {}
    for key, (run_cfg, folder) in plan.items():
        resume = RunDir(folder).config.is_file()
        runs[key] = train(run_cfg, folder, resume=resume, overwrite=not resume, progress=progress)
    summary: dict[str, Any] = {}
    for key, r in runs.items():
        summary[f"{key}: zero-error epoch"] = "not reached" if r.zero_error_epoch is None else r.zero_error_epoch
        summary.update(
            {f"{key}: {k}": v for k, v in collapse_summary(r.rows, r.penultimate, r.zero_error_epoch).items()}
        )
    links = "".join(f'<li><a href="{r.out.relative_to(out)}/report.html">{k}</a></li>' for k, r in runs.items())
    write_report(
        Path(out) / RunDir.REPORT,
        f"{Path(out).name}: the paper's protocol",
        [("Runs", f"<ul>{links}</ul>" + metrics_table_html(summary))],
        [],
    )
    return summary


def _check_own_run(folder: Path, cfg: Any) -> None:
    """Refuse (``ValueError``) a run folder that holds a run of another config: an experiment resumes only its own
    runs (the trainer would extend a run cut with ``--epochs`` into the full protocol's, its schedule already
    spent on the shorter budget)."""
    from nclab.io.rundir import RunDir, config_differences
    from nclab.io.yaml_io import load_yaml_file

    saved = RunDir(folder).config
    if not saved.is_file():
        return
    diff = config_differences(load_yaml_file(saved), cfg.to_dict())
    if diff:
        raise ValueError(
            f"{folder} holds a run of another protocol (its config.yaml differs at {', '.join(diff)}); an experiment "
            "resumes only its own runs: give this one another output folder (-o), e.g. a cut (--runs, --epochs) "
            "and the full protocol apart; nothing was trained"
        )


def run_configs(
    configs: dict,
    out: Path,
    scale: str,
    seed: int,
    selection: RunSelection | None = None,
    *,
    seeds: dict | None = None,
) -> tuple[dict, list[Path]]:
    """Train ``configs`` (``{label: RunConfig}``, cut by ``selection``; ``seeds``: per label, the seed indices) into
    ``out``: the summary of :func:`train_runs` and the run folders it trained. The summaries read those, not every
    folder under ``out`` (a cut into a folder of the full protocol reports its own runs only)."""
    if selection is not None:
        configs = selection.apply(configs)
    summary = train_runs(out, configs, seed=seed, seeds=seeds, progress=scale != "tiny")
    return summary, [folder for _, folder in run_plan(out, configs, seed=seed, seeds=seeds).values()]


def run_key(folder: Path) -> str:
    """``"<run folder> seed<s>"``: a trained run's name in the summaries (its folder and seed folder)."""
    return f"{folder.parent.name} {folder.name}"


def summary_table(runs: dict[str, Any]) -> dict[str, float | str]:
    """The summary of training runs ``{loss: RunResult}`` as ``"loss: quantity" -> value``: each run's zero-error
    epoch (``not reached`` when the training error never reached 0), then NC1 and the errors
    (:func:`~nclab.report.run_report.collapse_summary`)."""
    from nclab.report.run_report import collapse_summary

    summary: dict[str, float | str] = {}
    for loss, r in runs.items():
        summary[f"{loss}: zero-error epoch"] = "not reached" if r.zero_error_epoch is None else r.zero_error_epoch
        for k, v in collapse_summary(r.rows, r.penultimate, r.zero_error_epoch).items():
            summary[f"{loss}: {k}"] = v
    return summary
