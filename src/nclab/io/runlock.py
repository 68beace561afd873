"""Who may write a folder: the lock ``FOLDER/run.lock`` that every nclab writer takes.

A process that writes a run directory (the trainer, a :class:`~nclab.CollapseMonitor` table, an extraction, a
sweep driver, a transfer study) holds an OS-level lock on ``FOLDER/run.lock`` (``fcntl.flock``, exclusive), a
small JSON file naming the owner (pid, host, start time); a second writer fails at once with
:class:`RunDirBusyError` naming the owner. The lock is released, and the file removed, when the owner ends (the
kernel drops the lock of a killed process too). A lock file that is present but not locked was left by an owner
that died without cleaning up: the next owner reports it ("previous owner pid X on host Y is gone; taking over")
and takes over.

Writers of one run inside one process (two monitors of the same run identity, a Lightning callback re-fitted)
share the lock: :func:`acquire_run_lock` with the same ``share`` key hands out one more handle of the lock this
process holds, released when the last handle is. Any other second writer, in this process or another, is refused.
:func:`lock_holder` tells whether a folder is held, without taking it.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["LOCK_NAME", "RunDirBusyError", "RunDirError", "RunLock", "acquire_run_lock", "lock_holder"]

#: Name of the lock file inside a run directory.
LOCK_NAME = "run.lock"


class RunDirError(ValueError):
    """A run directory cannot be used as asked (resume refused, another run's folder, disk full, ...); the message
    says why and what to do. A ``ValueError``, so the CLI reports it as a user error (exit code 2)."""


class RunDirBusyError(RunDirError):
    """Another live writer owns the run directory (holds its lock)."""


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
    """The held lock of one run directory (from :func:`acquire_run_lock`).

    :meth:`release` (or leaving the ``with`` block) removes the lock file and unlocks.

    Parameters
    ----------
    path : Path
        The lock file, ``<run>/run.lock``.
    fd : int or None
        Its open descriptor holding the ``flock``; None once released.
    previous : dict or None, default None
        The record left by an owner that died holding the folder (``None`` when the folder was free).
    locked : bool, default True
        False where the file system does not support locks (the folder is then not protected; see ``note``).
    note : str, default ""
        Why the folder is not locked, when it is not.
    share : str or None, default None
        The share key of a lock shared by writers of this process (see the module documentation).

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     with acquire_run_lock(tmp) as lock:
    ...         held = lock.path.name, lock.locked, lock.path.exists()
    ...     held, lock.path.exists()  # the lock file is gone after the block
    (('run.lock', True, True), False)
    """

    path: Path
    fd: int | None
    previous: dict[str, Any] | None = None
    locked: bool = True
    note: str = ""
    #: the share key and this handle's entry in the process's table of shared locks (see the module docstring)
    share: str | None = None

    def release(self) -> None:
        """Remove the lock file and unlock (idempotent); a shared handle releases when the last one does."""
        if self.share is not None:
            _release_shared(self)
            return
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


#: Locks this process holds for writers that share them: ``{lock path: [share key, the lock, handles]}``.
_SHARED: dict[Path, list[Any]] = {}


def _release_shared(handle: RunLock) -> None:
    if handle.fd is None:  # this handle was released already
        return
    handle.fd = None
    key = handle.path
    entry = _SHARED.get(key)
    if entry is None:
        return
    entry[2] -= 1
    if entry[2] == 0:
        del _SHARED[key]
        entry[1].release()


def acquire_run_lock(out: str | Path, *, share: str | None = None) -> RunLock:
    """Take ownership of the run directory ``out`` (which must exist): lock ``out/run.lock`` and write this
    process's pid, host and start time in it.

    Parameters
    ----------
    out : str or Path
        The folder.
    share : str, optional
        A key (a run id): a writer in this process that holds ``out`` with the same key shares its lock (one more
        handle; the lock is released with the last handle). Without it, or with another key, the folder must be
        free.

    Raises
    ------
    RunDirBusyError
        When another live writer holds the lock; the message names its pid and host (or says that it is this
        process) and the lock file.

    Notes
    -----
    A lock file left by a dead owner is not locked any more (the kernel releases ``flock`` locks when the holder
    exits, ``kill -9`` included); it is taken over and its record returned as ``RunLock.previous`` for the caller
    to report. On a file system without ``flock`` support (some network mounts) the folder is used unlocked and
    ``RunLock.note`` says so. The file is removed on release; a waiter that opened it just before checks that
    the path still names the file it locked, and retries otherwise.
    """
    path = (Path(out) / LOCK_NAME).absolute()
    entry = _SHARED.get(path)
    if entry is not None and share is not None and entry[0] == share:
        entry[2] += 1
        return RunLock(path, -1, locked=entry[1].locked, share=share)
    lock = _acquire(Path(out), Path(out) / LOCK_NAME)
    if share is not None and lock.fd is not None:
        _SHARED[path] = [share, lock, 1]
        return RunLock(path, -1, previous=lock.previous, note=lock.note, share=share)
    return lock


def _acquire(out: Path, path: Path) -> RunLock:
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


def _is_this_process(info: Mapping[str, Any]) -> bool:
    return info.get("pid") == os.getpid() and info.get("host") == socket.gethostname()


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
    if info and _is_this_process(info):
        return (
            f"{out} is in use by another nclab process or writer ({_owner_text(info)}: this process, through a "
            f"writer of another run that was not closed -- a run, a CollapseMonitor or a table sink; lock file "
            f"{path}): close that writer first (monitor.close(), or a `with` block), or write to another folder"
        )
    owner = _owner_text(info) if info else "a process that has not written its record yet"
    return (
        f"{out} is in use by another nclab process ({owner}; lock file {path}): wait for it to end, "
        "or write to another folder"
    )


def lock_holder(out: str | Path) -> dict[str, Any] | None:
    """The owner record (pid, host, since) of the live writer that holds ``out``, or ``None`` when nobody does
    (no lock file, or one left by a dead owner). Takes nothing: the lock file is neither created nor changed.

    Examples
    --------
    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> lock_holder(folder) is None
    True
    >>> with acquire_run_lock(folder):
    ...     sorted(lock_holder(folder))
    ['host', 'pid', 'since']
    """
    path = Path(out) / LOCK_NAME
    try:
        import fcntl

        fd = os.open(path, os.O_RDONLY)
    except (ImportError, OSError):
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read_owner(fd) or {"pid": "?", "host": "?"}
        except OSError:
            return None
        return None  # closing the descriptor drops the shared lock just taken
    finally:
        os.close(fd)
