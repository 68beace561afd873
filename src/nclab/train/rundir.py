"""Run directories of training runs: when ``resume`` may continue one, and where a run goes by default.

The folder's format, its lock and the rules for starting, appending and resuming are
:class:`nclab.io.rundir.RunDir`'s (the lock: :mod:`nclab.io.runlock`); the names below are re-exported from there.
This module holds what depends on the training config.

Resume. ``resume=True`` needs a readable checkpoint *and* the saved ``config.yaml``
(:meth:`~nclab.io.rundir.RunDir.check_resumable`); anything else is refused, never a new run started over old
results. ``config.yaml`` must still be the config that trained the checkpoint (the checkpoint holds it; an older
checkpoint's run id must be the hash of ``config.yaml``), and the config given must equal it except for
``train.epochs`` (:data:`EXTENDABLE_KEYS`, :func:`resume_differences`): changing the epoch budget extends (or,
before its end, shortens) a run, and the run id follows the config (a new id for every row of the extended run).
Schedules that are functions of the budget -- ``cosine`` (its horizon is ``train.epochs``) and ``multistep``
without explicit ``milestones`` (``int(epochs * f)`` for each ``f`` in ``milestone_fractions``) -- and the
``measure.epochs: log`` plan then follow the new budget from the next epoch on; the epochs already trained keep
the learning rate and measurements they had (the ``lr`` rows of ``metrics.csv`` record them), so such an
extended run differs from an uninterrupted run of the new length (:func:`budget_dependent_fields`). With a
``constant`` schedule, explicit ``milestones`` and explicit ``measure.epochs`` it is the same run.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nclab.io.rundir import RunDir, config_differences, metrics_file_status
from nclab.io.runlock import LOCK_NAME, RunDirBusyError, RunDirError, RunLock, acquire_run_lock

__all__ = [
    "EXTENDABLE_KEYS",
    "LOCK_NAME",
    "RunDir",
    "RunDirBusyError",
    "RunDirError",
    "RunLock",
    "acquire_run_lock",
    "budget_dependent_fields",
    "config_differences",
    "default_run_dir",
    "disk_full_error",
    "metrics_file_status",
    "resume_differences",
]

#: Config keys (dotted paths) that may differ from the saved config on resume: the epoch budget only.
EXTENDABLE_KEYS: frozenset[str] = frozenset({"train.epochs"})

#: errno values that mean "the disk (or the user's quota) is full".
_DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT})


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
    nclab.io.runlock.RunDirError: name '../../escape' cannot name a folder under runs: ...
    """
    if not name or name in (".", "..") or "/" in name or "\\" in name or Path(name).is_absolute():
        raise RunDirError(
            f"name {name!r} cannot name a folder under {Path(root).as_posix()}: it must be one folder name (no '/', "
            "'\\', '..' or absolute path), or the output folder must be given (--out)"
        )
    return Path(root) / name


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
