"""Sweeps: many ordinary training runs from one file, on Ray or one after another in this process.

A sweep file (YAML) names a base run config and the axes to vary::

    name: lr-seeds                 # optional; default: the file's stem
    base: tiny.yaml                # a run config file (relative to the sweep file) or an inline mapping
    grid:                          # the Cartesian product of these --set values
      optim.lr: [0.01, 0.1]
      loss.name: [mse, ce]
    overrides:                     # and/or explicit variants, each a list of --set strings (crossed with grid)
      - ["model.options.widths=[16]"]
      - ["model.options.widths=[32, 32]"]
    seeds: [0, 1, 2]               # a sweep axis of its own (sets ``seed``)
    resources:
      num_cpus: 2                  # of the local Ray instance that ``nclab sweep`` starts
      cpus_per_trial: 1            # Ray resources of one trial
      gpus_per_trial: 0

Trials are the product overrides x grid x seeds. A trial that switches ``loss.name`` also resets the base's
loss options that do not apply to its loss (:func:`loss_resets`: a CE trial of an MSE base with
``reduction: sum_half`` gets ``loss.reduction=mean``, shown among its overrides), so a grid over the loss needs
no hand-written variants. Every trial's config is resolved and validated before anything
runs (a bad key or value is an error of the sweep file, not a failed trial); a trial's id is the trainer's
:func:`~nclab.train.trainer.run_id` of its resolved config (``NAME-HASH``), so it is stable across re-runs, equal
to the ``run_id`` in its ``summary.json`` and ``metrics.csv``, and two trials with the same resolved config are
refused as duplicates.

Layout: ``SWEEP_DIR/sweep.yaml`` (the sweep file as given), ``SWEEP_DIR/<trial-id>/`` (an ordinary run
directory), ``SWEEP_DIR/sweep.csv`` (one row per trial: id, overrides, status, key results, error; rewritten
atomically by the driver after every change) and ``SWEEP_DIR/sweep.log`` (one line per trial started, resumed,
skipped or finished). Status: ``pending``, ``running`` (submitted or in progress), ``completed``, ``failed``.
A re-run skips completed trials (status ``completed`` and a readable run: ``summary.json`` and ``metrics.csv``),
resumes a trial whose run directory holds a checkpoint (the trainer's ``resume=True``: an interrupted trial
continues from its last checkpoint), starts the pending ones and leaves failed ones as they are unless
``retry_failed`` (their errors are mostly deterministic: a bad layer name fails again). A completed trial that
lost a file (its ``metrics.csv`` deleted) is reported as ``damaged`` (in ``sweep.log`` and ``sweep.csv``) and run
again, which rebuilds its table from its checkpoint. A failed trial records ``ExceptionType: message`` and does
not stop the others.

One driver at a time: the sweep directory is locked while a driver writes it (``SWEEP_DIR/run.lock``,
:meth:`nclab.io.rundir.RunDir.lock`), so a second ``nclab sweep`` into it fails at once, naming the first; each
trial's run directory has its own lock. A sweep directory belongs to one sweep file: another file (a different
``name``, ``base``, ``grid``, ``overrides`` or ``seeds``; ``resources`` may change) is refused, naming the keys
that differ, so that ``sweep.csv`` never mixes the trials of two sweeps.
"""

from __future__ import annotations

import csv
import io
import itertools
import math
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from nclab.io.atomic import atomic_write_text
from nclab.io.run_table import OUTPUT_LAYER
from nclab.io.rundir import RunDir, config_differences, read_run
from nclab.io.yaml_io import load_yaml, load_yaml_file
from nclab.train.config import ConfigError, RunConfig, load_config, resolve_config
from nclab.train.rundir import default_run_dir

__all__ = [
    "SWEEP_COLUMNS",
    "SweepError",
    "SweepResult",
    "SweepSpec",
    "Trial",
    "expand_trials",
    "load_sweep",
    "loss_resets",
    "override_string",
    "read_sweep_table",
    "run_sweep",
    "run_trial",
]

#: Columns of ``sweep.csv``, in order.
SWEEP_COLUMNS: tuple[str, ...] = (
    "trial_id",
    "overrides",
    "status",
    "zero_error_epoch",
    "epochs",
    "train_error",
    "test_error",
    "nc1",
    "elapsed_s",
    "error",
)

#: Seconds to wait for a TCP answer from ``--address`` before giving up (Ray's own retries take minutes).
CONNECT_TIMEOUT_S = 10.0

RAY_MISSING = "Ray is not installed: pip install 'nclab[sweep]' (or run the trials one after another with --local)"


class SweepError(ValueError):
    """An invalid sweep file or sweep directory, or a sweep that cannot start (Ray missing or unreachable)."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SweepResources(_Strict):
    num_cpus: Annotated[int, Field(gt=0)] | None = None  # None: Ray's default (every core)
    cpus_per_trial: Annotated[float, Field(gt=0)] = 1.0
    gpus_per_trial: Annotated[float, Field(ge=0)] = 0.0


class SweepSpec(_Strict):
    """The validated sweep file (see the module docstring); ``base`` is resolved relative to the file."""

    name: str | None = None
    base: str | dict[str, Any]
    grid: dict[str, list[Any]] | None = None
    overrides: list[list[str]] | None = None
    seeds: list[int] | None = None
    resources: SweepResources = Field(default_factory=SweepResources)


@dataclass(frozen=True)
class Trial:
    """One run of a sweep: its id (the resolved config's run id), the ``--set`` strings that make it from the
    base config, and the resolved config."""

    trial_id: str
    overrides: tuple[str, ...]
    config: RunConfig = field(compare=False)


@dataclass
class SweepResult:
    """What :func:`run_sweep` returns: the sweep directory, by trial id the trial's ``sweep.csv`` row (cells as
    strings, as :func:`read_sweep_table` reads them), and the trials (their resolved configs) in order."""

    out: Path
    rows: dict[str, dict[str, str]]
    trials: list[Trial] = field(default_factory=list)

    @property
    def failed(self) -> list[str]:
        """Ids of the trials whose status is ``failed``."""
        return [tid for tid, row in self.rows.items() if row.get("status") == "failed"]


def _format_errors(err: ValidationError) -> str:
    from nclab.validation import did_you_mean

    known = [*SweepSpec.model_fields, *(f"resources.{k}" for k in SweepResources.model_fields)]
    lines = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"]) or "(top level)"
        msg = "unknown key" + did_you_mean(loc, known) if e["type"] == "extra_forbidden" else e["msg"]
        lines.append(f"  {loc}: {msg}")
    return "\n".join(lines)


def load_sweep(path: str | Path) -> tuple[SweepSpec, dict[str, Any], str]:
    """Read and validate a sweep file: ``(spec, base config as a mapping, sweep name)``.

    Raises
    ------
    SweepError
        A missing file, invalid YAML, an unknown key, an empty grid / axis / override list / seed list, or no
        axis at all; each message names the key.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such sweep file: {path}")
    try:
        raw = load_yaml_file(path)
    except ValueError as err:  # not valid YAML, or a duplicate key (the message names the file)
        raise SweepError(str(err)) from None
    if not isinstance(raw, dict):
        raise SweepError(f"{path}: the top level must be a mapping with base, grid / overrides / seeds")
    try:
        spec = SweepSpec.model_validate(raw)
    except ValidationError as err:
        raise SweepError(f"invalid sweep file {path}:\n{_format_errors(err)}") from None
    if spec.grid is None and spec.overrides is None and spec.seeds is None:
        raise SweepError(f"{path}: nothing to sweep: give grid, overrides and/or seeds")
    if spec.grid is not None:
        if not spec.grid:
            raise SweepError(f"{path}: grid is empty: give at least one key with a list of values")
        empty = [k for k, v in spec.grid.items() if not v]
        if empty:
            raise SweepError(f"{path}: grid.{empty[0]} is an empty list: the grid would have no trial")
    if spec.overrides is not None and not spec.overrides:
        raise SweepError(f"{path}: overrides is an empty list: give at least one list of --set strings")
    if spec.seeds is not None and not spec.seeds:
        raise SweepError(f"{path}: seeds is an empty list")
    if isinstance(spec.base, str):
        base_path = (path.parent / spec.base) if not Path(spec.base).is_absolute() else Path(spec.base)
        if not base_path.is_file():
            raise SweepError(f"{path}: base: no such config file {base_path}")
        try:
            base = load_yaml_file(base_path) or {}
        except ValueError as err:
            raise SweepError(str(err)) from None
        if not isinstance(base, dict):
            raise SweepError(f"{base_path}: the top level must be a mapping")
        load_config(base_path)  # the base alone must be a valid run config
    else:
        base = spec.base
    return spec, base, spec.name or path.stem


def override_string(key: str, value: Any) -> str:
    """The ``--set`` string ``key=value`` of a config override, the value written as flow-style YAML.

    Examples
    --------
    >>> override_string("optim.lr", 0.1), override_string("model.options.widths", [64, 64])
    ('optim.lr=0.1', 'model.options.widths=[64, 64]')
    """
    # a scalar dumps as "0.1\n...\n" (YAML's end-of-document marker): keep the value alone
    text = yaml.safe_dump(value, default_flow_style=True, width=math.inf).strip().removesuffix("...").strip()
    return f"{key}={text}"


def loss_resets(base: RunConfig, sets: Sequence[str]) -> list[str]:
    """The ``--set`` strings that return the base's loss options to their defaults when a trial switches
    ``loss.name`` to a loss they do not apply to (the base's MSE ``loss.reduction=sum_half`` in a CE trial), so
    that a grid over ``loss.name`` needs no hand-written variant; an option the trial sets itself is kept.

    Examples
    --------
    >>> base = resolve_config({"loss": {"name": "mse", "reduction": "sum_half"}})
    >>> loss_resets(base, ["loss.name=ce", "optim.lr=0.1"]), loss_resets(base, ["optim.lr=0.1"])
    (['loss.reduction=mean'], [])
    """
    named = {item.split("=", 1)[0].strip(): item.split("=", 1)[1] for item in sets if "=" in item}
    if "loss.name" not in named:
        return []
    new = load_yaml(named["loss.name"], source="--set loss.name")
    try:
        defaults = resolve_config({"loss": {"name": new}}).loss
    except ConfigError:  # an unknown loss: the trial's own resolution names it
        return []
    resets = []
    for key in type(base.loss).model_fields:
        value = getattr(base.loss, key)
        if key == "name" or f"loss.{key}" in named or value == getattr(defaults, key):
            continue
        try:
            resolve_config({"loss": {"name": new, key: value}})
        except ConfigError:  # the option does not apply to the new loss
            resets.append(override_string(f"loss.{key}", getattr(defaults, key)))
    return resets


def expand_trials(spec: SweepSpec, base: Mapping[str, Any]) -> list[Trial]:
    """The trials of ``spec`` in order (overrides x grid x seeds, the last axis fastest), each config resolved.

    Raises
    ------
    SweepError
        When a trial's config is invalid (the message names the trial's overrides and the key) or two trials
        resolve to the same config.

    Examples
    --------
    >>> spec = SweepSpec(base={"name": "t"}, grid={"optim.lr": [0.1, 0.2]}, seeds=[0, 1])
    >>> [t.overrides for t in expand_trials(spec, {"name": "t"})][:2]
    [('optim.lr=0.1', 'seed=0'), ('optim.lr=0.1', 'seed=1')]
    >>> len({t.trial_id for t in expand_trials(spec, {"name": "t"})})
    4
    """
    try:
        base_cfg: RunConfig | None = resolve_config(base)
    except ConfigError:  # an inline base that only the trials' overrides complete: no loss options to reset
        base_cfg = None
    variants: list[list[str]] = [list(v) for v in spec.overrides] if spec.overrides is not None else [[]]
    grid = spec.grid or {}
    points = [
        [override_string(k, v) for k, v in zip(grid, combo, strict=True)] for combo in itertools.product(*grid.values())
    ]
    seeds = [[f"seed={s}"] for s in spec.seeds] if spec.seeds is not None else [[]]
    trials: list[Trial] = []
    seen: dict[str, tuple[str, ...]] = {}
    for variant, point, seed in itertools.product(variants, points, seeds):
        sets = (*variant, *point, *seed)
        sets += tuple(loss_resets(base_cfg, sets)) if base_cfg is not None else ()
        try:
            cfg = resolve_config(base, sets)
        except ConfigError as err:
            raise SweepError(f"trial with --set {' '.join(sets) or '(none)'}: {err}") from None
        from nclab.train.trainer import run_id

        tid = run_id(cfg)
        if tid in seen:
            raise SweepError(
                f"duplicate trial {tid}: --set {' '.join(seen[tid]) or '(none)'} and --set {' '.join(sets) or '(none)'}"
                " resolve to the same config"
            )
        seen[tid] = sets
        trials.append(Trial(tid, sets, cfg))
    return trials


# ------------------------------------------------------------------------------------------ one trial
def _last(rows: Sequence[Any], split: str, layer: str, metric: str) -> float | None:
    pts = [(r[0], r[4]) for r in rows if r[1] == split and r[2] == layer and r[3] == metric]
    return max(pts)[1] if pts else None


def _error_text(err: BaseException) -> str:
    """``Type: message`` on one line (a KeyError's message without the quotes ``str`` adds)."""
    msg = err.args[0] if isinstance(err, KeyError) and err.args else err
    return " ".join(f"{type(err).__name__}: {msg}".split())


def run_trial(config: Mapping[str, Any], out: str | Path) -> dict[str, Any]:
    """Run (or resume, when ``out`` holds a checkpoint) one trial with the trainer; never raises.

    Returns the trial's ``sweep.csv`` cells: ``status`` (``completed`` or ``failed``), the key results
    (zero-error epoch, epochs, last train / test error, last penultimate NC1), ``elapsed_s`` and ``error``. Takes
    and returns plain data, so Ray can ship it to a worker.
    """
    from nclab.train.trainer import train

    out = Path(out)
    t0 = time.perf_counter()
    resume = RunDir(out).checkpoint.is_file()
    try:
        result = train(resolve_config(config), out, resume=resume, progress=False)
    except Exception as err:  # a trial's failure is data for sweep.csv, not the end of the sweep
        return {"status": "failed", "elapsed_s": time.perf_counter() - t0, "error": _error_text(err)}
    rows = [tuple(r) for r in result.rows]
    return {
        "status": "completed",
        "zero_error_epoch": result.zero_error_epoch,
        "epochs": result.config.train.epochs,
        "train_error": _last(rows, "train", OUTPUT_LAYER, "error"),
        "test_error": _last(rows, "test", OUTPUT_LAYER, "error"),
        "nc1": _last(rows, "train", result.penultimate, "nc1"),
        "elapsed_s": time.perf_counter() - t0,
        "error": "",
    }


# ------------------------------------------------------------------------------------------ the index
def read_sweep_table(sweep_dir: str | Path) -> dict[str, dict[str, str]]:
    """``sweep.csv`` of ``sweep_dir`` as ``{trial_id: row}`` (cells as strings); empty when there is none."""
    path = RunDir(sweep_dir).sweep_table
    if not path.is_file():
        return {}
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        if tuple(reader.fieldnames or ()) != SWEEP_COLUMNS:
            raise SweepError(f"{path}: expected the header {','.join(SWEEP_COLUMNS)}, got {reader.fieldnames}")
        return {row["trial_id"]: row for row in reader}


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return repr(v)
    return str(v)


def _write_table(sweep_dir: Path, table: Mapping[str, Mapping[str, Any]]) -> None:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(SWEEP_COLUMNS)
    for row in table.values():
        w.writerow([_cell(row.get(c)) for c in SWEEP_COLUMNS])
    atomic_write_text(RunDir(sweep_dir).sweep_table, buf.getvalue())


class _Index:
    """The driver's view of ``sweep.csv`` and ``sweep.log``: the only writer of both."""

    def __init__(self, sweep_dir: Path, trials: Sequence[Trial], echo: Callable[[str], None] | None) -> None:
        self.dir = sweep_dir
        self.echo = echo
        old = read_sweep_table(sweep_dir)
        # rows of trials this sweep file no longer names are kept: their run directories are still there
        self.table: dict[str, dict[str, Any]] = dict(old)
        for t in trials:
            row = dict(old.get(t.trial_id, {}))
            row.update(trial_id=t.trial_id, overrides=" ".join(t.overrides))
            row.setdefault("status", "pending")
            self.table[t.trial_id] = row

    def skip_reason(self, t: Trial, retry_failed: bool) -> str | None:
        status = self.table[t.trial_id].get("status")
        if status in ("completed", "damaged"):
            damage = _damage(self.dir / t.trial_id)
            if damage is None:
                if status == "damaged":  # repaired by hand (or by a run that was stopped after it)
                    self.update(t.trial_id, status="completed", error="")
                return "completed"
            # reported, then run again: the trainer's resume rebuilds a lost table from the checkpoint
            how = "continuing it from its checkpoint" if _has_checkpoint(self.dir, t) else "running it again"
            self.log(f"damaged {t.trial_id}: marked completed, but {damage}; {how}")
            self.update(t.trial_id, status="damaged", error=f"damaged: {damage}")
            return None
        if status == "failed" and not retry_failed:
            return "failed before; --retry-failed runs it again"
        return None

    def log(self, msg: str) -> None:
        with open(RunDir(self.dir).sweep_log, "a") as fh:
            fh.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {msg}\n")
        if self.echo is not None:
            self.echo(msg)

    def update(self, tid: str, **cells: Any) -> None:
        self.table[tid].update(cells)
        _write_table(self.dir, self.table)

    def finish(self, t: Trial, outcome: Mapping[str, Any]) -> None:
        cells = {c: outcome.get(c) for c in SWEEP_COLUMNS if c in outcome}
        cells["elapsed_s"] = round(float(outcome.get("elapsed_s", 0.0)), 3)
        self.update(t.trial_id, **cells)
        extra = f": {outcome['error']}" if outcome["status"] == "failed" else ""
        self.log(f"{outcome['status']} {t.trial_id} in {cells['elapsed_s']:.2f}s{extra}")


# ------------------------------------------------------------------------------------------ scheduling
def _check_address(address: str) -> None:
    """Fail within :data:`CONNECT_TIMEOUT_S` when nothing answers at ``address`` (``host:port`` or
    ``ray://host:port``; ``auto`` is left to Ray)."""
    if address in ("auto", "local"):
        return
    hostport = address.split("://", 1)[-1]
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise SweepError(f"--address {address!r}: expected host:port, ray://host:port or auto")
    try:
        with socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S):
            pass
    except OSError as err:
        raise SweepError(
            f"no Ray cluster answers at {address} ({err or 'timed out'} after at most {CONNECT_TIMEOUT_S:g} s); "
            "start one with `ray start --head` or drop --address to run a local Ray instance"
        ) from None


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise SweepError(RAY_MISSING) from None
    return ray


def _run_local(todo: Sequence[Trial], index: _Index) -> None:
    for t in todo:
        index.update(t.trial_id, status="running", error="")
        index.log(
            f"{'resume' if _has_checkpoint(index.dir, t) else 'start'} {t.trial_id} (--set {' '.join(t.overrides)})"
        )
        index.finish(t, run_trial(t.config.to_dict(), index.dir / t.trial_id))


def _has_checkpoint(sweep_dir: Path, t: Trial) -> bool:
    return RunDir(sweep_dir / t.trial_id).checkpoint.is_file()


def _damage(trial: Path) -> str | None:
    """What a completed trial's run directory lost (``None`` when it reads as a finished run)."""
    run = RunDir(trial)
    lost = [p.name for p in (run.summary, run.metrics) if not p.is_file()]
    if lost:
        return f"its {' and '.join(lost)} {'is' if len(lost) == 1 else 'are'} missing"
    try:
        read_run(trial)
    except (OSError, ValueError) as err:
        return f"it cannot be read ({err})"
    return None


def _check_same_sweep(run: RunDir, path: Path) -> None:
    """Refuse a sweep file other than the one the sweep directory ``run`` was made with (``resources`` may
    change: they do not change the trials)."""
    if not run.sweep_file.is_file():
        return
    try:
        old = load_yaml_file(run.sweep_file)
    except ValueError as err:
        raise SweepError(
            f"{run.path} holds a sweep.yaml that cannot be read ({err}): run into another folder"
        ) from None
    new = load_yaml_file(path)
    old_axes, new_axes = (
        {k: v for k, v in (d if isinstance(d, dict) else {}).items() if k != "resources"} for d in (old, new)
    )
    keys = config_differences(old_axes, new_axes)
    if keys:
        raise SweepError(
            f"{run.path} holds another sweep: its sweep.yaml differs from {path} at {', '.join(keys)}, so the two "
            f"sweeps' trials would mix in {run.sweep_table.name}. Run this sweep into another folder (--out), or "
            f"move {run.path} away first; nothing was changed"
        )


def _run_ray(todo: Sequence[Trial], index: _Index, spec: SweepSpec, address: str | None, num_cpus: int | None) -> None:
    ray = _import_ray()
    started = not ray.is_initialized()
    if started:
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
        if address is not None:
            kwargs["address"] = address
        else:
            kwargs["num_cpus"] = num_cpus or spec.resources.num_cpus
        try:
            ray.init(**kwargs)
        except ConnectionError as err:
            raise SweepError(f"could not connect to the Ray cluster at {address}: {err}") from None
    try:
        remote = ray.remote(num_cpus=spec.resources.cpus_per_trial, num_gpus=spec.resources.gpus_per_trial)(run_trial)
        pending = {}
        for t in todo:
            ref = remote.remote(t.config.to_dict(), str((index.dir / t.trial_id).resolve()))
            pending[ref] = t
            index.update(t.trial_id, status="running", error="")
            index.log(
                f"{'resume' if _has_checkpoint(index.dir, t) else 'start'} {t.trial_id} (--set {' '.join(t.overrides)})"
            )
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            t = pending.pop(done[0])
            try:
                outcome = ray.get(done[0])
            except Exception as err:  # the worker itself died (run_trial never raises): record it like a failure
                outcome = {
                    "status": "failed",
                    "elapsed_s": 0.0,
                    "error": _error_text(err),
                }
            index.finish(t, outcome)
    finally:
        if started:
            ray.shutdown()


def run_sweep(
    path: str | Path,
    out: str | Path | None = None,
    *,
    local: bool = False,
    address: str | None = None,
    num_cpus: int | None = None,
    retry_failed: bool = False,
    echo: Callable[[str], None] | None = None,
) -> SweepResult:
    """Run the sweep file ``path`` into ``out`` (default ``runs/sweeps/<name>``).

    Parameters
    ----------
    path : str or Path
        The sweep file (see the module docstring).
    out : str or Path, optional
        The sweep directory (locked while the sweep runs; it must not hold another sweep file's sweep).
    local : bool
        Run the trials one after another in this process (no Ray); same directory layout.
    address : str, optional
        An existing Ray cluster (``host:port``, ``ray://host:port`` or ``auto``); default: start a local Ray
        instance with ``num_cpus`` (default ``resources.num_cpus`` of the file) and shut it down at the end.
    num_cpus : int, optional
        Overrides ``resources.num_cpus`` for the local Ray instance.
    retry_failed : bool
        Run the trials that failed in an earlier run of the sweep again (default: leave them failed).
    echo : callable, optional
        Receives each ``sweep.log`` line (the command prints them).

    Returns
    -------
    SweepResult
        The sweep directory and the ``sweep.csv`` rows of this file's trials.

    Raises
    ------
    SweepError
        An invalid sweep file (nothing is written then), Ray missing (names the ``nclab[sweep]`` extra), an
        address where no cluster answers, or a sweep directory of another sweep file (naming the keys).
    RunDirBusyError
        Another driver is running a sweep into ``out``.
    """
    spec, base, name = load_sweep(path)
    trials = expand_trials(spec, base)
    if not local:  # before anything is written
        _import_ray()
        if address is not None:
            _check_address(address)
    sweep_dir = Path(out) if out is not None else default_run_dir(name, Path("runs") / "sweeps")
    sweep_dir.mkdir(parents=True, exist_ok=True)
    run = RunDir(sweep_dir)
    with run.lock() as lock:  # one driver at a time; a second one fails here, before touching sweep.csv
        _check_same_sweep(run, Path(path))
        index = _Index(sweep_dir, trials, echo)
        if lock.note:
            index.log(f"note: {lock.note}")
        atomic_write_text(run.sweep_file, Path(path).read_text())
        todo = []
        for t in trials:
            reason = index.skip_reason(t, retry_failed)
            if reason is None:
                todo.append(t)
            else:
                index.log(f"skip {t.trial_id} ({reason})")
        _write_table(sweep_dir, index.table)
        if todo:
            if local:
                _run_local(todo, index)
            else:
                _run_ray(todo, index, spec, address, num_cpus)
        written = read_sweep_table(sweep_dir)  # the rows as on disk (cells as strings), whatever ran or not
    return SweepResult(sweep_dir, {t.trial_id: written[t.trial_id] for t in trials}, trials)
