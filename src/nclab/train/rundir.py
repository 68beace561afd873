"""Run directories: who owns one, and when ``resume`` may continue it.

Ownership. A process that writes a run directory holds an OS-level lock on ``RUN_DIR/run.lock``
(``fcntl.flock``, exclusive), a small JSON file naming the owner (pid, host, start time); a second writer fails at
once with :class:`RunDirBusyError` naming the owner. The lock is released, and the file removed, when the owner
ends (the kernel drops the lock of a killed process too). A lock file that is present but not locked was left
by an owner that died without cleaning up: the next owner reports it ("previous owner pid X on host Y is gone;
taking over") and takes over. :func:`acquire_run_lock` is the one place that takes the lock, so a caller whose
process does not write the folder (a DDP rank other than 0) simply skips it.

Resume. ``resume=True`` needs a readable checkpoint *and* the saved ``config.yaml`` (:func:`check_resumable`);
anything else is refused, never a new run started over old results. The config given must equal the saved one
except for ``train.epochs`` (:data:`EXTENDABLE_KEYS`, :func:`resume_differences`): changing the epoch budget
extends (or, before its end, shortens) a run. Schedules that are functions of the budget -- ``cosine`` (its
horizon is ``train.epochs``) and ``multistep`` without explicit ``milestones`` (``int(epochs * f)`` for each
``f`` in ``milestone_fractions``) -- and the ``measure.epochs: log`` plan then follow the new budget from the
next epoch on; the epochs already trained keep the learning rate and measurements they had (the ``lr`` rows of
``metrics.csv`` record them), so such an extended run differs from an uninterrupted run of the new length
(:func:`budget_dependent_fields`). With a ``constant`` schedule, explicit ``milestones`` and explicit
``measure.epochs`` it is the same run.
"""

from __future__ import annotations

import contextlib
import csv
import errno
import io
import json
import math
import os
import socket
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nclab.io.run_table import COLUMNS, RUN_ID_COLUMN

__all__ = [
    "EXTENDABLE_KEYS",
    "LOCK_NAME",
    "RunDirBusyError",
    "RunDirError",
    "RunLock",
    "acquire_run_lock",
    "budget_dependent_fields",
    "check_resumable",
    "config_differences",
    "default_run_dir",
    "disk_full_error",
    "metrics_file_status",
    "resume_differences",
]

#: Name of the lock file inside a run directory.
LOCK_NAME = "run.lock"

#: Config keys (dotted paths) that may differ from the saved config on resume: the epoch budget only.
EXTENDABLE_KEYS: frozenset[str] = frozenset({"train.epochs"})

#: errno values that mean "the disk (or the user's quota) is full".
_DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT})


class RunDirError(ValueError):
    """A run directory cannot be used as asked (resume refused, disk full, ...); the message says why and what to
    do. A ``ValueError``, so the CLI reports it as a user error (exit code 2)."""


class RunDirBusyError(RunDirError):
    """Another live process owns the run directory (holds its lock)."""


def default_run_dir(name: str, root: str | Path = "runs") -> Path:
    """``root / name``: the folder of a run (or of a sweep, ``root="runs/sweeps"``) when no output folder is
    given. ``name`` comes from a config, so it must be one plain folder name that keeps the folder inside
    ``root``.

    Raises
    ------
    RunDirError
        ``name`` is empty, ``.`` or ``..``, absolute, or holds a path separator (``/``, ``\\``); the message
        names ``name``.

    Examples
    --------
    >>> default_run_dir("tiny").as_posix()
    'runs/tiny'
    >>> default_run_dir("../../escape")
    Traceback (most recent call last):
        ...
    nclab.train.rundir.RunDirError: name '../../escape' cannot name a folder under runs: ...
    """
    if not name or name in (".", "..") or "/" in name or "\\" in name or Path(name).is_absolute():
        raise RunDirError(
            f"name {name!r} cannot name a folder under {Path(root).as_posix()}: it must be one folder name (no '/', "
            "'\\', '..' or absolute path), or the output folder must be given (--out)"
        )
    return Path(root) / name


# --------------------------------------------------------------------------------------------- ownership
def _owner_text(info: Mapping[str, Any]) -> str:
    since = f" since {info['since']}" if info.get("since") else ""
    return f"pid {info.get('pid', '?')} on host {info.get('host', '?')}{since}"


def _read_owner(fd: int) -> dict[str, Any]:
    os.lseek(fd, 0, os.SEEK_SET)
    raw = b""
    while chunk := os.read(fd, 4096):
        raw += chunk
    if not raw.strip():
        return {}
    try:
        info = json.loads(raw)
    except ValueError:
        return {"pid": "?", "host": "?", "unreadable": raw[:80].decode("utf-8", "replace")}
    return info if isinstance(info, dict) else {}


@dataclass
class RunLock:
    """The held lock of one run directory (from :func:`acquire_run_lock`); :meth:`release` (or leaving the
    ``with`` block) removes the lock file and unlocks. ``previous`` is the record left by an owner that died
    holding the folder (``None`` when the folder was free), ``locked`` is false where the file system does not
    support locks (the folder is then not protected; see ``note``)."""

    path: Path
    fd: int | None
    previous: dict[str, Any] | None = None
    locked: bool = True
    note: str = ""

    def release(self) -> None:
        """Remove the lock file and unlock (idempotent)."""
        if self.fd is None:
            return
        # unlink while still holding the lock: a waiter that opened the old file re-checks the inode and retries
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        os.close(self.fd)  # closing the last descriptor drops the flock
        self.fd = None

    def __enter__(self) -> RunLock:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()


def acquire_run_lock(out: str | Path) -> RunLock:
    """Take ownership of the run directory ``out`` (which must exist): lock ``out/run.lock`` and write this
    process's pid, host and start time in it.

    Raises
    ------
    RunDirBusyError
        When another live process holds the lock; the message names its pid and host and the lock file.

    Notes
    -----
    A lock file left by a dead owner is not locked any more (the kernel releases ``flock`` locks when the holder
    exits, ``kill -9`` included); it is taken over and its record returned as ``RunLock.previous`` for the caller
    to report. On a file system without ``flock`` support (some network mounts) the folder is used unlocked and
    ``RunLock.note`` says so. The file is removed on release; a waiter that opened it just before checks that
    the path still names the file it locked, and retries otherwise.
    """
    path = Path(out) / LOCK_NAME
    try:
        import fcntl
    except ImportError:  # not POSIX: no flock
        return RunLock(path, None, locked=False, note=f"{out} is not locked: this platform has no fcntl.flock")
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunDirBusyError(_busy_message(out, path, fd)) from None
        except OSError as err:
            os.close(fd)
            if err.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):
                return RunLock(path, None, locked=False, note=f"{out} is not locked: its file system has no flock")
            raise
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(path))
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)  # the previous owner removed the file between our open and our lock: lock the new one
    previous = _read_owner(fd) or None
    record = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.strftime("%Y-%m-%dT%H:%M:%S")}
    try:
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, (json.dumps(record) + "\n").encode())
    except OSError:  # a full disk: give the folder back as it was found
        os.close(fd)
        raise
    note = ""
    if previous is not None:
        note = (
            f"previous owner pid {previous.get('pid', '?')} on host {previous.get('host', '?')} is gone "
            f"(its lock file {path} was left behind); taking over"
        )
    return RunLock(path, fd, previous=previous, note=note)


def _busy_message(out: str | Path, path: Path, fd: int) -> str:
    try:
        info: dict[str, Any] = {}
        # the owner writes its record right after locking: give it a moment before reporting it unknown
        for _ in range(20):
            info = _read_owner(fd)
            if info and "unreadable" not in info:  # empty or half-written: the owner is writing it now
                break
            time.sleep(0.01)
    finally:
        os.close(fd)
    owner = _owner_text(info) if info else "a process that has not written its record yet"
    return (
        f"{out} is in use by another nclab process ({owner}; lock file {path}): wait for it to end, "
        "or write to another folder"
    )


def disk_full_error(err: BaseException, out: str | Path, *, resumable: bool = True) -> RunDirError | None:
    """A :class:`RunDirError` explaining a disk-full (or quota) ``err`` raised while writing the run ``out``, or
    ``None`` when ``err`` is another error. Every nclab file is written atomically, so nothing already on disk was
    damaged: the message says so and how to go on (``--resume`` when ``resumable``, else start again)."""
    if not isinstance(err, OSError) or err.errno not in _DISK_FULL:
        return None
    where = f" writing {err.filename}" if err.filename else ""
    then = f"continue with `nclab train {out} --resume`" if resumable else "start the run again"
    return RunDirError(
        f"no space left on the device of {out}{where} ({os.strerror(err.errno)}): the files already written are "
        f"intact (atomic writes; no temporary file is left); free some space and {then}"
    )


# --------------------------------------------------------------------------------------------- resume
def check_resumable(out: str | Path, checkpoint: str | Path, *, overwrite: bool = False) -> None:
    """Refuse a resume of ``out`` that cannot be honest: ``overwrite`` too (contradictory: call this before
    touching the folder), no run in ``out``, no checkpoint ``checkpoint`` (a new run would replace the old
    results), no saved ``config.yaml`` (nothing says which config the checkpoint was trained with). Reading the
    checkpoint itself is the caller's.

    Raises
    ------
    RunDirError
        Naming what is missing and what to do instead.
    """
    out, checkpoint = Path(out), Path(checkpoint)
    if overwrite:
        raise RunDirError(
            "resume and overwrite contradict each other (--resume continues the run in the folder, --overwrite "
            "replaces it): pass one of them"
        )
    if not out.exists():
        raise RunDirError(f"cannot resume {out}: no such folder (start a run there without --resume)")
    if not out.is_dir() or not any(p.name != LOCK_NAME for p in out.iterdir()):
        raise RunDirError(f"cannot resume {out}: there is no run there (start one without --resume)")
    if not checkpoint.is_file():
        held = [p.name for p in sorted(out.iterdir()) if p.name not in (LOCK_NAME, "checkpoints")]
        raise RunDirError(
            f"cannot resume {out}: its checkpoint {checkpoint} is missing, so the run cannot be continued "
            f"(the folder holds {', '.join(held) or 'nothing else'}); nothing was changed. To start again in this "
            "folder, replacing its results, pass --overwrite without --resume"
        )
    if not (out / "config.yaml").is_file():
        raise RunDirError(
            f"cannot resume {out}: its config.yaml is missing, so nothing says which config trained the "
            f"checkpoint {checkpoint}; nothing was changed. Restore config.yaml (the resolved config of the run) "
            "and resume again"
        )


def config_differences(saved: Any, given: Any, prefix: str = "") -> list[str]:
    """Dotted paths of the keys at which two config dicts differ, sorted (a key missing on one side differs).

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


def resume_differences(saved: Mapping[str, Any], given: Mapping[str, Any]) -> list[str]:
    """The keys at which ``given`` differs from the run's ``saved`` config other than :data:`EXTENDABLE_KEYS`:
    a resume is allowed exactly when this is empty."""
    return [k for k in config_differences(saved, given) if k not in EXTENDABLE_KEYS]


def budget_dependent_fields(config: Mapping[str, Any]) -> list[str]:
    """The parts of a resolved config dict that are functions of ``train.epochs`` (so change when a run is
    extended): ``schedule`` for ``cosine`` (horizon) and for ``multistep`` without explicit ``milestones``
    (``milestone_fractions`` of the budget), ``measure.epochs`` for the ``log`` plan. Each entry is a short
    phrase for the run's log.

    Examples
    --------
    >>> budget_dependent_fields({"schedule": {"name": "constant"}, "measure": {"epochs": [0, 5]}})
    []
    >>> budget_dependent_fields({"schedule": {"name": "cosine"}, "measure": {"epochs": "log"}})
    ['schedule.name=cosine (horizon train.epochs)', 'measure.epochs=log (log-spaced over train.epochs)']
    """
    out = []
    sched = config.get("schedule", {})
    if sched.get("name") == "cosine":
        out.append("schedule.name=cosine (horizon train.epochs)")
    elif sched.get("name") == "multistep" and sched.get("milestones") is None:
        out.append("schedule.milestone_fractions (milestones int(train.epochs * f))")
    if config.get("measure", {}).get("epochs", "log") == "log":
        out.append("measure.epochs=log (log-spaced over train.epochs)")
    return out


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
