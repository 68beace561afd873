"""Run directories: one owner of their format (:class:`RunDir`) and one reader (:func:`read_run`).

A run directory is what a writer of metric rows leaves: the trainer (``nclab train``: ``config.yaml``,
``metrics.csv`` with ``metrics.parquet``, ``checkpoints/last.pt``, ``summary.json``, ``log.txt``, ``report.html``),
a :class:`~nclab.CollapseMonitor` or one of the Lightning / Hugging Face callbacks with ``out=`` (``metrics.csv`` and
``identity.json``). Beside them live the folders of a sweep (``sweep.yaml``, ``sweep.csv``, ``sweep.log`` and one
run directory per trial) and of an extraction (``manifest.json`` and the feature files). :class:`RunDir` names
every one of these files, tells which kind of folder it is looking at (:meth:`RunDir.kind`), takes its lock
(:meth:`RunDir.lock`, :mod:`nclab.io.runlock`) and holds the rules for starting a run in it (:meth:`RunDir.start`),
appending to its table (:meth:`RunDir.open_table`) and resuming it (:meth:`RunDir.check_resumable`; the config
rules of a resume are the trainer's, :mod:`nclab.train.rundir`).

Identity. Every table carries the run's id in its leading ``run_id`` column: ``NAME-HASH``, the first 10 hex digits
of the SHA-256 of what identifies the run (:func:`run_id_of`). For a training run that is the resolved config
(``config.yaml``); for a monitor or a callback, the number of classes, the measured layers, the conventions and the
shapes of the model's parameters, recorded in ``identity.json`` (:class:`RunIdentity`; an explicit ``run_id=``
replaces the hash). A writer appends to a table of its own run and refuses any other (naming the folder, both
identities and ``overwrite=True``); the same ``(epoch, split)`` measured twice replaces its rows.

Reading. :func:`read_run` reads any of these folders into a :class:`RunRecord` (kind, id, config, rows, summary,
identity); ``nclab report``, ``nclab compare``, ``nclab verify`` and ``--resume`` read through it. A table that
holds one ``(epoch, split, layer, metric)`` twice with different values (an older nclab appended a re-measured
epoch) is refused rather than read with one of them picked silently.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from nclab.io.atomic import atomic_write_text
from nclab.io.integrity import CorruptFileError
from nclab.io.manifest import MANIFEST_NAME, read_manifest
from nclab.io.run_table import (
    COLUMNS,
    METRICS_NAME,
    OUTPUT_LAYER,
    PARQUET_NAME,
    RUN_ID_COLUMN,
    MetricRow,
    MetricTable,
    read_metrics,
    read_run_id,
)
from nclab.io.runlock import LOCK_NAME, RunDirBusyError, RunDirError, RunLock, acquire_run_lock, lock_holder
from nclab.io.yaml_io import load_yaml_file

__all__ = [
    "PENULTIMATE",
    "RUN_KINDS",
    "RunDir",
    "RunDirBusyError",
    "RunDirError",
    "RunIdentity",
    "RunRecord",
    "check_run_id",
    "config_differences",
    "duplicate_rows",
    "metrics_file_status",
    "read_run",
    "read_run_metrics",
    "run_id_of",
]

#: The kinds of folder :meth:`RunDir.kind` tells apart.
RUN_KINDS: tuple[str, ...] = ("train", "monitor", "sweep", "extraction", "empty", "other")

#: The name of a temporary file of :class:`nclab.io.atomic.AtomicFile` (``tempfile.mkstemp``'s 8 random characters).
_ATOMIC_TEMPORARY = re.compile(r"^\..+\.[a-z0-9_]{8}\.tmp$")

#: The one name of "the classifier's input": the layer ``CollapseMonitor(layers="penultimate")`` measures when no
#: named module outputs it, and the ``layer`` value that means a run's own penultimate layer when its table is read
#: (from its ``summary.json``, or its first ``nc1`` row).
PENULTIMATE = "penultimate"


# ------------------------------------------------------------------------------------------------ identity
def run_id_of(name: str, hashed: Any) -> str:
    """``NAME-HASH``: ``name`` and the first 10 hex digits of the SHA-256 of ``hashed`` written as YAML with its
    keys sorted (the trainer's :func:`~nclab.train.trainer.run_id` of a resolved config is this of its dict).

    Parameters
    ----------
    name : str
        The run's name, the id's prefix.
    hashed : object
        What the id hashes (a resolved config as a dict): anything ``yaml.safe_dump`` writes.

    Returns
    -------
    str
        ``NAME-HASH``, the hash 10 hex digits; equal mappings give the same id whatever their key order.

    Examples
    --------
    >>> run_id_of("demo", {"b": 1, "a": [2, 3]}) == run_id_of("demo", {"a": [2, 3], "b": 1})
    True
    >>> run_id_of("demo", {"a": 1})[:5], len(run_id_of("demo", {"a": 1}))
    ('demo-', 15)
    """
    text = yaml.safe_dump(hashed, sort_keys=True)
    return f"{name}-{hashlib.sha256(text.encode()).hexdigest()[:10]}"


def check_run_id(run_id: Any, *, name: str = "run_id") -> str:
    """``run_id`` checked as a table's run id: a non-empty string without commas, quotes or line breaks.

    Raises
    ------
    TypeError, ValueError
        Naming ``name`` and the value.
    """
    if not isinstance(run_id, str):
        raise TypeError(f"{name} must be a string, got {run_id!r} ({type(run_id).__name__})")
    if not run_id or any(c in run_id for c in ',"\n\r'):
        raise ValueError(f"{name} must be a non-empty string without commas, quotes or line breaks, got {run_id!r}")
    return run_id


@dataclass(frozen=True)
class RunIdentity:
    """Who wrote a table: ``run_id`` and what it hashes (``hashed``: ``None`` for an explicit ``run_id``), the run's
    ``name`` and the ``writer`` (``"monitor"``, ``"lightning"``, ``"hf"``, ``"train"``). Saved as
    ``identity.json`` beside a monitor's table.

    Parameters
    ----------
    run_id : str
        The table's run id.
    name : str
        The run's name.
    hashed : mapping or None, default None
        What ``run_id`` hashes; None for an explicit id.
    writer : str, default "monitor"
        Who wrote the table: ``"monitor"``, ``"lightning"``, ``"hf"`` or ``"train"``.

    Examples
    --------
    >>> ident = RunIdentity.of("Sequential", {"num_classes": 3}, writer="monitor")
    >>> ident.run_id == run_id_of("Sequential", {"num_classes": 3}), RunIdentity.from_json(ident.to_json()) == ident
    (True, True)
    >>> RunIdentity.explicit("my-run").hashed is None
    True
    """

    run_id: str
    name: str
    hashed: Mapping[str, Any] | None = field(default=None, compare=False)
    writer: str = field(default="monitor", compare=False)

    @classmethod
    def of(cls, name: str, hashed: Mapping[str, Any], *, writer: str = "monitor") -> RunIdentity:
        """The identity whose ``run_id`` is :func:`run_id_of` ``(name, hashed)``; ``name`` is reduced to
        letters, digits, ``_ . -``."""
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", name) or "run"
        return cls(run_id_of(name, hashed), name, hashed, writer)

    @classmethod
    def explicit(cls, run_id: str, *, writer: str = "monitor") -> RunIdentity:
        """An identity named by the caller (``run_id=``), checked with :func:`check_run_id`."""
        return cls(check_run_id(run_id), run_id, None, writer)

    def to_json(self) -> str:
        record = {"run_id": self.run_id, "name": self.name, "writer": self.writer, "hashed": self.hashed}
        return json.dumps(record, indent=2, sort_keys=False) + "\n"

    @classmethod
    def from_json(cls, text: str, *, source: str = "identity.json") -> RunIdentity:
        """The identity saved by :meth:`to_json`.

        Raises
        ------
        CorruptFileError
            ``text`` is not such a record (naming ``source``).
        """
        try:
            data = json.loads(text)
            return cls(check_run_id(data["run_id"]), str(data["name"]), data.get("hashed"), str(data["writer"]))
        except (ValueError, TypeError, KeyError) as err:
            raise CorruptFileError(source, f"not an nclab run identity ({type(err).__name__}: {err})") from None

    def consistent(self) -> bool:
        """Whether ``run_id`` is the hash of ``hashed`` (always true for an explicit id)."""
        return self.hashed is None or self.run_id == run_id_of(self.name, self.hashed)


def config_differences(saved: Any, given: Any, prefix: str = "") -> list[str]:
    """Dotted paths of the keys at which two nested mappings differ, sorted (a key missing on one side differs).

    Examples
    --------
    >>> config_differences({"optim": {"lr": 0.1, "momentum": 0.9}}, {"optim": {"lr": 0.2, "momentum": 0.9}})
    ['optim.lr']
    """
    if isinstance(saved, Mapping) and isinstance(given, Mapping):
        out: list[str] = []
        for k in sorted(set(saved) | set(given), key=str):
            out += config_differences(saved.get(k), given.get(k), f"{prefix}{k}.")
        return out
    return [] if saved == given else [prefix.rstrip(".")]


# ------------------------------------------------------------------------------------------------ the folder
class RunDir:
    """The run directory ``path``: its files by name, its kind, its lock, and the rules for writing it.

    Parameters
    ----------
    path : str or Path
        The folder; it need not exist yet (nothing is created or read on construction).

    Examples
    --------
    >>> import tempfile
    >>> run = RunDir(tempfile.mkdtemp())
    >>> run.metrics.name, run.checkpoint.relative_to(run.path).as_posix(), run.kind()
    ('metrics.csv', 'checkpoints/last.pt', 'empty')
    """

    CONFIG = "config.yaml"
    METRICS = METRICS_NAME
    PARQUET = PARQUET_NAME
    SUMMARY = "summary.json"
    CHECKPOINTS = "checkpoints"
    LAST = "last.pt"
    LOG = "log.txt"
    REPORT = "report.html"
    IDENTITY = "identity.json"
    LOCK = LOCK_NAME
    MANIFEST = MANIFEST_NAME
    SWEEP_FILE = "sweep.yaml"
    SWEEP_TABLE = "sweep.csv"
    SWEEP_LOG = "sweep.log"
    #: What a new run in the folder replaces (``overwrite=True``), besides ``checkpoints/``.
    RUN_FILES: tuple[str, ...] = (CONFIG, METRICS, PARQUET, LOG, SUMMARY, REPORT, IDENTITY)

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    def __truediv__(self, name: str) -> Path:
        return self.path / name

    # -------------------------------------------------------------- files
    @property
    def config(self) -> Path:
        """``config.yaml``: the resolved config of a training run."""
        return self.path / self.CONFIG

    @property
    def metrics(self) -> Path:
        """``metrics.csv``: the rows (:mod:`nclab.io.run_table`)."""
        return self.path / self.METRICS

    @property
    def parquet(self) -> Path:
        """``metrics.parquet``: the same rows, written with ``metrics.csv`` when pyarrow is installed."""
        return self.path / self.PARQUET

    @property
    def summary(self) -> Path:
        """``summary.json``: a finished training run's summary."""
        return self.path / self.SUMMARY

    @property
    def checkpoints(self) -> Path:
        """``checkpoints/``."""
        return self.path / self.CHECKPOINTS

    @property
    def checkpoint(self) -> Path:
        """``checkpoints/last.pt``: what ``--resume`` continues."""
        return self.checkpoints / self.LAST

    def epoch_checkpoint(self, epoch: int) -> Path:
        """``checkpoints/epoch_NNNN.pt``: the copy kept at a measured epoch."""
        return self.checkpoints / f"epoch_{epoch:04d}.pt"

    @property
    def log(self) -> Path:
        """``log.txt``."""
        return self.path / self.LOG

    @property
    def report(self) -> Path:
        """``report.html``."""
        return self.path / self.REPORT

    @property
    def identity(self) -> Path:
        """``identity.json``: a monitor's or callback's :class:`RunIdentity`."""
        return self.path / self.IDENTITY

    @property
    def lock_file(self) -> Path:
        """``run.lock``."""
        return self.path / self.LOCK

    @property
    def manifest(self) -> Path:
        """``manifest.json`` of an extraction."""
        return self.path / self.MANIFEST

    @property
    def sweep_file(self) -> Path:
        """``sweep.yaml``: the sweep file as given."""
        return self.path / self.SWEEP_FILE

    @property
    def sweep_table(self) -> Path:
        """``sweep.csv``: one row per trial."""
        return self.path / self.SWEEP_TABLE

    @property
    def sweep_log(self) -> Path:
        """``sweep.log``."""
        return self.path / self.SWEEP_LOG

    # -------------------------------------------------------------- what it is
    def kind(self) -> str:
        """What the folder holds (:data:`RUN_KINDS`): ``"train"`` (a config or a checkpoint), ``"monitor"`` (a
        table or ``identity.json`` without them), ``"sweep"``, ``"extraction"`` (a ``manifest.json``), ``"empty"``
        (nothing, or no folder yet) or ``"other"``."""
        if not self.path.is_dir():
            return "empty"
        if self.config.is_file() or self.checkpoint.is_file():
            return "train"
        if self.metrics.is_file() or self.identity.is_file():
            return "monitor"
        if self.sweep_table.is_file() or self.sweep_file.is_file():
            return "sweep"
        if self.manifest.is_file():
            return "extraction"
        if not any(p.name != self.LOCK for p in self.path.iterdir()):
            return "empty"
        return "other"

    def saved_identity(self) -> RunIdentity | None:
        """The :class:`RunIdentity` in ``identity.json`` (``None`` when there is none).

        Raises
        ------
        CorruptFileError
            An ``identity.json`` that is not one.
        """
        if not self.identity.is_file():
            return None
        return RunIdentity.from_json(self.identity.read_text(encoding="utf-8"), source=str(self.identity))

    def recorded_run_id(self) -> str | None:
        """The run id the folder's files record: ``identity.json``'s, else the ``run_id`` column of
        ``metrics.csv``, else ``summary.json``'s (``None`` when none does)."""
        ident = self.saved_identity()
        if ident is not None:
            return ident.run_id
        if self.metrics.is_file():
            rid = read_run_id(self.metrics)
            if rid is not None:
                return rid
        if self.summary.is_file():
            try:
                rid = json.loads(self.summary.read_text(encoding="utf-8")).get("run_id")
            except (ValueError, AttributeError):
                return None
            return rid if isinstance(rid, str) else None
        return None

    # -------------------------------------------------------------- writing
    def lock(self, *, share: str | None = None) -> RunLock:
        """Take the folder's lock (:func:`nclab.io.runlock.acquire_run_lock`; the folder must exist)."""
        return acquire_run_lock(self.path, share=share)

    def holder(self) -> dict[str, Any] | None:
        """The live writer holding the folder, or ``None`` (:func:`nclab.io.runlock.lock_holder`)."""
        return lock_holder(self.path)

    def clear(self) -> None:
        """Remove the files of the run in the folder (:attr:`RUN_FILES`, ``checkpoints/`` and the temporary
        files of interrupted writes, :meth:`leftover_temporaries`); other files stay."""
        for name in self.RUN_FILES:
            (self.path / name).unlink(missing_ok=True)
        self.remove_leftover_temporaries()
        shutil.rmtree(self.checkpoints, ignore_errors=True)

    def leftover_temporaries(self) -> list[Path]:
        """The temporary files that an atomic write (:class:`nclab.io.atomic.AtomicFile`: ``.NAME.<8 characters>.tmp``
        beside ``NAME``) left in the folder or in ``checkpoints/`` when its process was killed before the rename,
        sorted. While a writer holds the folder they may be its writes in progress; otherwise they are debris."""
        out: list[Path] = []
        for folder in (self.path, self.checkpoints):
            if folder.is_dir():
                out += [p for p in folder.iterdir() if _ATOMIC_TEMPORARY.match(p.name) and p.is_file()]
        return sorted(out)

    def remove_leftover_temporaries(self) -> list[Path]:
        """Remove :meth:`leftover_temporaries` (the caller owns the folder: it holds the lock); returns those
        removed."""
        removed = []
        for p in self.leftover_temporaries():
            try:
                p.unlink()
            except FileNotFoundError:
                continue
            removed.append(p)
        return removed

    def _refuse_foreign_kind(self, what: str) -> None:
        kind = self.kind()
        if kind in ("sweep", "extraction"):
            raise RunDirError(
                f"{self.path} holds {'a sweep (sweep.csv)' if kind == 'sweep' else 'an extraction (manifest.json)'}, "
                f"not a run: {what} cannot be written there; choose another folder"
            )

    def start(self, *, overwrite: bool = False) -> None:
        """The rule for a new training run in the folder: refused when it holds a run (``FileExistsError`` naming
        ``--resume`` and ``--overwrite``), a sweep or an extraction; with ``overwrite`` the run's files go
        (:meth:`clear`)."""
        self._refuse_foreign_kind("a training run")
        if not (self.checkpoint.is_file() or self.metrics.is_file()):
            return
        if not overwrite:
            if self.kind() == "monitor":
                raise FileExistsError(
                    f"{self.path} already holds the metrics.csv of a CollapseMonitor or callback run (run_id "
                    f"{self.recorded_run_id()}): pass overwrite=True (--overwrite) to replace it, or choose another "
                    "output folder"
                )
            raise FileExistsError(
                f"{self.path} already holds a run: pass resume=True (--resume) to continue it, "
                "overwrite=True, or choose another output folder"
            )
        self.clear()

    def check_resumable(self, *, overwrite: bool = False) -> None:
        """Refuse a resume that cannot be honest: ``overwrite`` too (contradictory: call this before touching
        the folder), no run in the folder, no checkpoint (a new run would replace the old results), no saved
        ``config.yaml`` (nothing says which config the checkpoint was trained with). Reading the checkpoint
        itself is the trainer's.

        Raises
        ------
        RunDirError
            Naming what is missing and what to do instead.
        """
        out, checkpoint = self.path, self.checkpoint
        if overwrite:
            raise RunDirError(
                "resume and overwrite contradict each other (--resume continues the run in the folder, --overwrite "
                "replaces it): pass one of them"
            )
        if not out.exists():
            raise RunDirError(f"cannot resume {out}: no such folder (start a run there without --resume)")
        if not out.is_dir() or self.kind() == "empty":
            raise RunDirError(f"cannot resume {out}: there is no run there (start one without --resume)")
        if not checkpoint.is_file():
            held = [p.name for p in sorted(out.iterdir()) if p.name not in (self.LOCK, self.CHECKPOINTS)]
            raise RunDirError(
                f"cannot resume {out}: its checkpoint {checkpoint} is missing, so the run cannot be continued "
                f"(the folder holds {', '.join(held) or 'nothing else'}); nothing was changed. To start again in "
                "this folder, replacing its results, pass --overwrite without --resume"
            )
        if not self.config.is_file():
            raise RunDirError(
                f"cannot resume {out}: its config.yaml is missing, so nothing says which config trained the "
                f"checkpoint {checkpoint}; nothing was changed. Restore config.yaml (the resolved config of the run) "
                "and resume again"
            )

    def open_table(
        self, identity: RunIdentity | None, *, resume: bool = False, overwrite: bool = False
    ) -> list[MetricRow]:
        """The rule for a writer of rows (a monitor's table) in the folder: the rows it continues.

        An empty folder (or one without a table) starts a new table: ``[]``. A table of the same run (its run id
        is ``identity.run_id``) is continued: its rows. ``resume=True`` continues a table without a run id too.
        Anything else is refused, before anything is written: a training run's folder, another run's table (the
        message names the folder, both run ids and where their identities differ), a table without a run id, a
        sweep or an extraction. ``overwrite=True`` removes the run there (:meth:`clear`) and starts over. The
        caller holds the lock.

        Raises
        ------
        RunDirError
            The refusals above.
        """
        what = f"the rows of run {identity.run_id}" if identity is not None else "a metrics table"
        self._refuse_foreign_kind(what)
        if overwrite:
            self.clear()
            return []
        kind = self.kind()
        mine = "" if identity is None else f" (this writer's run identity: {identity.run_id})"
        if kind == "train":
            raise RunDirError(
                f"{self.path} holds an nclab training run (run_id {self.recorded_run_id()}; config.yaml, "
                f"checkpoints/): {what} cannot be written into it{mine}. Write to another folder, or pass "
                "overwrite=True to replace that run's files"
            )
        if not self.metrics.is_file():
            return []
        theirs = self.recorded_run_id()
        if identity is not None and theirs == identity.run_id:
            return read_metrics(self.metrics)
        if resume and (theirs is None or identity is None):
            return read_metrics(self.metrics)
        if theirs is None:
            raise RunDirError(
                f"{self.metrics} holds rows without a run id (written by an older nclab, or by a sink without one), "
                f"so they cannot be told to be this run's{mine}: write to another folder, pass resume=True to a "
                "RunTableSink to append to them, or overwrite=True to start over"
            )
        if identity is None:
            raise RunDirError(
                f"{self.path} holds the rows of run {theirs}: pass resume=True to append to them, overwrite=True to "
                "start over, or write to another folder"
            )
        raise RunDirError(
            f"{self.path} holds the rows of another run: its run_id is {theirs}, this writer's is {identity.run_id}"
            f"{self._identity_gap(identity)}. Write to another folder, pass run_id={theirs!r} if this is the same "
            "run, or overwrite=True to start over"
        )

    def _identity_gap(self, identity: RunIdentity) -> str:
        try:
            saved = self.saved_identity()
        except CorruptFileError:
            return ""
        if saved is None or saved.hashed is None or identity.hashed is None:
            return ""
        keys = config_differences(saved.hashed, identity.hashed)
        shown = ", ".join(keys[:6]) + (f" and {len(keys) - 6} more" if len(keys) > 6 else "")
        return f" (their identities differ at {shown})" if keys else ""

    def write_identity(self, identity: RunIdentity) -> None:
        """Save ``identity`` as ``identity.json`` (atomically), unless the same record is there."""
        text = identity.to_json()
        try:
            if self.identity.read_text(encoding="utf-8") == text:
                return
        except OSError:
            pass
        atomic_write_text(self.identity, text)


# ------------------------------------------------------------------------------------------------ the table
def duplicate_rows(rows: Sequence[MetricRow]) -> tuple[list[MetricRow], list[tuple[tuple[Any, ...], int, int]]]:
    """``rows`` without exact repeats of an ``(epoch, split, layer, metric)`` key (same value, nan included), and
    the keys that repeat with a different value, each with the data lines (1-based) of its first two rows.

    Examples
    --------
    >>> rows = [MetricRow(1, "train", "fc", "nc1", 0.5), MetricRow(1, "train", "fc", "nc1", 0.5)]
    >>> kept, clashes = duplicate_rows(rows + [MetricRow(1, "train", "fc", "nc1", 0.25)])
    >>> len(kept), clashes
    (2, [((1, 'train', 'fc', 'nc1'), 1, 3)])
    """
    first: dict[tuple[Any, ...], tuple[int, float]] = {}
    kept: list[MetricRow] = []
    clashes: list[tuple[tuple[Any, ...], int, int]] = []
    for i, r in enumerate(rows, 1):
        key = (r.epoch, r.split, r.layer, r.metric)
        seen = first.get(key)
        if seen is None:
            first[key] = (i, r.value)
            kept.append(r)
        elif not (seen[1] == r.value or (math.isnan(seen[1]) and math.isnan(r.value))):
            clashes.append((key, seen[0], i))
            kept.append(r)
    return kept, clashes


def _duplicates_error(path: Path, clashes: Sequence[tuple[tuple[Any, ...], int, int]]) -> RunDirError:
    (epoch, split, layer, metric), a, b = clashes[0]
    return RunDirError(
        f"{path}: {len(clashes)} {'rows repeat' if len(clashes) > 1 else 'row repeats'} an (epoch, split, layer, "
        f"metric) with another value, e.g. epoch {epoch}, split {split}, layer {layer}, metric {metric} at data "
        f"lines {a} and {b}: the same epoch was measured twice and both kept (an older nclab appended re-measured "
        "epochs), so nclab cannot tell which measurement is meant. Keep one measurement of each epoch (delete the "
        "other lines) and read the run again"
    )


def _same_value(a: str, b: float) -> bool:
    try:
        v = float(a)
    except ValueError:
        return False
    return (math.isnan(v) and math.isnan(b)) or v == b


def metrics_file_status(path: str | Path, rows: Sequence[Sequence[Any]]) -> tuple[str, int]:
    """How the table file ``path`` (``metrics.csv``) relates to the rows of a checkpoint: ``("same", n)``,
    ``("prefix", n)`` (its ``n`` complete lines are the first ``n`` rows: truncated, or written before the
    checkpoint; a last line without its newline counts as cut), ``("missing", 0)``, or ``("different", i)``
    (line ``i`` (1-based, after the header) disagrees with the checkpoint, or the header is wrong: ``i = 0``).
    Both layouts of :mod:`nclab.io.run_table` are read: with a leading ``run_id`` column (the trainer's; the
    same value on every line) or without.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "metrics.csv"
    >>> rows = [(0, "train", "fc", "nc1", 0.5), (1, "train", "fc", "nc1", 0.25)]
    >>> _ = p.write_text("epoch,split,layer,metric,value\\n0,train,fc,nc1,0.5\\n1,train,fc,nc1,0.2")
    >>> metrics_file_status(p, rows)
    ('prefix', 1)
    """
    path = Path(path)
    if not path.is_file():
        return ("missing", 0)
    text = path.read_bytes().decode("utf-8", "replace")
    lines = text.split("\n")
    complete = lines[:-1]  # the text after the last newline is empty, or a line cut mid-write
    header = ",".join(COLUMNS)
    if not complete or complete[0] not in (header, f"{RUN_ID_COLUMN},{header}"):
        return ("different", 0)
    lead = int(complete[0] != header)  # the run_id column
    body = complete[1:]
    if len(body) > len(rows):
        return ("different", len(rows) + 1)
    run_ids = set()
    for i, (fields, row) in enumerate(zip(csv.reader(io.StringIO("\n".join(body))), rows, strict=False)):
        run_ids.update(fields[:lead])
        fields = fields[lead:]
        ok = (
            len(run_ids) <= 1
            and len(fields) == 5
            and fields[0] == str(int(row[0]))
            and fields[1:4] == [str(row[1]), str(row[2]), str(row[3])]
            and _same_value(fields[4], float(row[4]))
        )
        if not ok:
            return ("different", i + 1)
    n = len(body)
    return ("same" if n == len(rows) and not lines[-1] else "prefix", n)


# ------------------------------------------------------------------------------------------------ reading
@dataclass
class RunRecord:
    """One folder, read by :func:`read_run`.

    Parameters
    ----------
    path : Path
        The folder.
    kind : str
        One of :data:`RUN_KINDS`.
    run_id : str
        The run's id (a sweep's name, an extraction's folder name).
    rows : list of MetricRow
        The metric rows (empty for a sweep or an extraction).
    config : dict
        The resolved config (a training run's ``config.yaml``, a sweep's ``sweep.yaml``; ``{}`` otherwise).
    summary : dict
        ``summary.json``; a sweep's ``{"trials": [sweep.csv rows]}``; an extraction's manifest.
    identity : dict, default {}
        What ``run_id`` hashes: the config of a training run, the ``hashed`` record of a monitor's
        ``identity.json``; ``{}`` when unknown.
    zero_error_epoch : int or None, default None
        The first epoch with zero training error.
    penultimate : str or None, default None
        The penultimate layer's name.

    Examples
    --------
    >>> rec = RunRecord(Path("runs/demo"), "monitor", "demo-0123456789", [], {}, {}, penultimate="fc")
    >>> rec.layer("penultimate"), rec.layer("conv1")
    ('fc', 'conv1')
    """

    path: Path
    kind: str
    run_id: str
    rows: list[MetricRow]
    config: dict[str, Any]
    summary: dict[str, Any]
    identity: dict[str, Any] = field(default_factory=dict)
    zero_error_epoch: int | None = None
    penultimate: str | None = None

    def layer(self, name: str) -> str:
        """``name``, with :data:`PENULTIMATE` resolved to this run's penultimate layer."""
        if name != PENULTIMATE:
            return name
        if self.penultimate is None:
            raise ValueError(f"{self.path}: no summary.json or nc1 rows to tell the penultimate layer; pass --layer")
        return self.penultimate


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as err:
        raise CorruptFileError(path, f"not valid JSON ({err})") from None
    if not isinstance(data, dict):
        raise CorruptFileError(path, f"expected a JSON object, found {type(data).__name__}")
    return data


def _read_yaml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    data = load_yaml_file(path)
    if not isinstance(data, dict):
        raise CorruptFileError(path, f"expected a YAML mapping, found {type(data).__name__}")
    return data


def read_run(path: str | Path) -> RunRecord:
    """Read the folder ``path``: a training run, a monitor's or callback's run, a sweep or an extraction.

    Parameters
    ----------
    path : str or Path
        The folder.

    Returns
    -------
    RunRecord
        Its kind, run id, rows, config, summary, identity, zero-error epoch (from ``summary.json``, else the first
        epoch with zero training error, else None) and penultimate layer (from ``summary.json``, else the one a
        monitor's ``identity.json`` records, else a layer named ``penultimate``, else the deepest with ``nc1``
        rows, else None).

    Raises
    ------
    FileNotFoundError
        No such folder, or nothing nclab wrote in it (a run without ``metrics.csv`` has no rows to read).
    CorruptFileError
        A file that cannot be read (the message names it).
    RunDirError
        A table that repeats an ``(epoch, split, layer, metric)`` with different values (:func:`duplicate_rows`).

    Examples
    --------
    >>> import tempfile
    >>> from nclab.io.run_table import write_metrics
    >>> out = tempfile.mkdtemp()
    >>> _ = write_metrics([MetricRow(0, "train", "fc", "nc1", 0.5)], out, run_id="demo-0123456789")
    >>> rec = read_run(out)
    >>> rec.kind, rec.run_id, rec.penultimate, len(rec.rows)
    ('monitor', 'demo-0123456789', 'fc', 1)
    """
    run = RunDir(path)
    if not run.path.is_dir():
        raise FileNotFoundError(f"no such run directory: {run.path}")
    kind = run.kind()
    if kind == "sweep":
        return _read_sweep(run)
    if kind == "extraction":
        manifest = read_manifest(run.path) or {}
        return RunRecord(run.path, kind, run.path.name, [], {}, manifest)
    if kind not in ("train", "monitor") or not run.metrics.is_file():
        why = " (a training run whose table was removed, or that has not written one yet)" if kind == "train" else ""
        raise FileNotFoundError(
            f"{run.path} holds no metrics.csv{why}: not a run directory of nclab train, a CollapseMonitor or a callback"
        )
    rows, clashes = duplicate_rows(read_metrics(run.metrics))
    if clashes:
        raise _duplicates_error(run.metrics, clashes)
    summary = _read_json(run.summary)
    config = _read_yaml(run.config)
    saved = run.saved_identity()
    identity = dict(config) if kind == "train" else dict((saved.hashed or {}) if saved else {})
    run_id = summary.get("run_id") or (saved.run_id if saved else None) or read_run_id(run.metrics) or run.path.name
    pen = summary.get("penultimate") or _penultimate_of(rows, identity.get("penultimate"))
    zero = summary.get("zero_error_epoch")
    if zero is None and "zero_error_epoch" not in summary:  # a table without summary: its first zero training error
        zero = min(
            (
                r.epoch
                for r in rows
                if r.layer == OUTPUT_LAYER and r.split == "train" and r.metric == "error" and r.value == 0.0
            ),
            default=None,
        )
    return RunRecord(run.path, kind, str(run_id), rows, config, summary, identity, zero, pen)


def _penultimate_of(rows: list[MetricRow], recorded: Any) -> str | None:
    """The penultimate layer of a run without ``summary.json`` (a monitor's or callback's): the one its identity
    records, else a layer named ``penultimate``, else the deepest layer with NC1 rows (tables list layers input
    side first). Never the first layer measured: that is the shallowest, and its NC1 would be reported as the
    classifier input's."""
    with_nc1 = list(dict.fromkeys(r.layer for r in rows if r.metric == "nc1"))
    measured = {r.layer for r in rows}
    if isinstance(recorded, str) and recorded in measured:
        return recorded
    if "penultimate" in measured:
        return "penultimate"
    return with_nc1[-1] if with_nc1 else None


def read_run_metrics(path: str | Path) -> MetricTable:
    """The metric rows of the run directory ``path`` (of ``nclab train``, a :class:`~nclab.CollapseMonitor` or a
    callback), read by :func:`read_run`: a :class:`~nclab.io.run_table.MetricTable` (a list of
    :class:`~nclab.io.run_table.MetricRow`, with the run's id and penultimate layer, :meth:`~MetricTable.series`
    and :meth:`~MetricTable.to_frame`). It is :func:`nclab.read_metrics`.

    Parameters
    ----------
    path : str or Path
        The run directory.

    Returns
    -------
    MetricTable
        Its rows in table order, with ``run_id``, ``penultimate`` and ``path``.

    Raises
    ------
    FileNotFoundError, CorruptFileError, RunDirError
        As :func:`read_run`.
    ValueError
        ``path`` is a sweep or an extraction, not one run.

    Examples
    --------
    >>> import tempfile
    >>> from nclab.io.run_table import write_metrics
    >>> out = tempfile.mkdtemp()
    >>> _ = write_metrics([MetricRow(0, "train", "fc", "nc1", 0.5)], out, run_id="demo-0123456789")
    >>> table = read_run_metrics(out)
    >>> table.run_id, table.series("nc1"), table[0].value
    ('demo-0123456789', {0: 0.5}, 0.5)
    """
    rec = read_run(path)
    if rec.kind not in ("train", "monitor"):
        inside = "its trials are the run directories in it" if rec.kind == "sweep" else "it holds saved features"
        raise ValueError(f"{rec.path} is {'a sweep' if rec.kind == 'sweep' else 'an extraction'}, not a run ({inside})")
    return MetricTable(rec.rows, run_id=rec.run_id, penultimate=rec.penultimate, path=rec.path)


def _read_sweep(run: RunDir) -> RunRecord:
    config = _read_yaml(run.sweep_file)
    trials: list[dict[str, str]] = []
    if run.sweep_table.is_file():
        with open(run.sweep_table, newline="", encoding="utf-8") as fh:
            trials = [dict(row) for row in csv.DictReader(fh)]
    name = config.get("name") or run.path.name
    return RunRecord(run.path, "sweep", str(name), [], config, {"trials": trials})
