"""Atomic file writes: the one helper every nclab writer uses.

A reader, or a process killed mid-write, must never see half a file. Each write goes to a temporary file with a
unique name in the destination's folder (same file system, so the rename is atomic; unique, so two processes
saving to one path never share a temporary file), is flushed and fsync'ed, then renamed over the destination
with ``os.replace``; the folder is fsync'ed too, so the rename itself survives a crash. Parent folders are
created. On any error the temporary file is removed and the destination is left as it was.

:class:`AtomicFile` is the mechanism (for writers that stream more than fits in memory, e.g.
:class:`nclab.io.npy_stream.NpyAppender`); :func:`atomic_write_bytes`, :func:`atomic_write_text`,
:func:`atomic_save_npy` and :func:`atomic_torch_save` write a whole payload through it, and
:func:`atomic_write_files` several files that are one result (all written before the first rename).
"""

from __future__ import annotations

import contextlib
import io
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "AtomicFile",
    "atomic_save_npy",
    "atomic_torch_save",
    "atomic_write_bytes",
    "atomic_write_files",
    "atomic_write_text",
    "fsync_folder",
]


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


#: Permissions of a new file (mkstemp creates 0600): what ``open(path, "w")`` would give under the umask.
_NEW_FILE_MODE = 0o666 & ~_umask()


def fsync_folder(folder: str | Path) -> None:
    """fsync the folder ``folder``, so that renames into it survive a crash (a no-op where the file system, or
    Windows, does not support it)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class AtomicFile:
    """A binary file (``.file``, opened ``w+b``) written under a unique temporary name beside ``path``.

    :meth:`commit` flushes, fsyncs and renames it over ``path``; :meth:`abort` removes it. As a context manager
    it commits on success and aborts on an exception. Replacing a file keeps its permissions; a new file gets
    those of ``open(path, "w")`` under the umask.

    Parameters
    ----------
    path : str or Path
        The destination; its parent folders are created.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> target = pathlib.Path(tempfile.mkdtemp()) / "x.bin"
    >>> with AtomicFile(target) as out:
    ...     _ = out.file.write(b"abc")
    ...     target.exists()  # nothing at the destination until the commit
    False
    >>> target.read_bytes()
    b'abc'
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=self.path.parent)
        self.tmp = Path(tmp_name)
        try:
            mode = self.path.stat().st_mode & 0o7777  # replacing a file keeps its permissions
        except OSError:
            mode = _NEW_FILE_MODE
        with contextlib.suppress(OSError):
            os.chmod(fd, mode)
        self.file = os.fdopen(fd, "w+b")

    def commit(self) -> Path:
        """Flush, fsync and rename the temporary file over ``path`` (and fsync the folder); returns ``path``."""
        try:
            self.file.flush()
            os.fsync(self.file.fileno())
            self.file.close()
            os.replace(self.tmp, self.path)
        except BaseException:
            self.abort()
            raise
        fsync_folder(self.path.parent)
        return self.path

    def abort(self) -> None:
        """Close and remove the temporary file; ``path`` is left as it was."""
        with contextlib.suppress(OSError):
            self.file.close()
        with contextlib.suppress(OSError):
            self.tmp.unlink()

    def __enter__(self) -> AtomicFile:
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.abort()


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (unique temporary sibling, fsync, rename).

    Parameters
    ----------
    path : str or Path
        The destination; its parent folders are created.
    data : bytes
        The whole content.

    Returns
    -------
    Path
        ``path``. On any error the destination is left as it was.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = atomic_write_bytes(pathlib.Path(tempfile.mkdtemp()) / "sub" / "x.bin", b"abc")
    >>> p.read_bytes()
    b'abc'
    """
    with AtomicFile(path) as out:
        out.file.write(data)
    return Path(path)


def atomic_write_files(files: Mapping[str | Path, bytes]) -> list[Path]:
    """Write several files as one result: every payload goes to its temporary file (flushed, fsync'ed) before the
    first rename, so a failure while writing any of them (a full disk, an error) leaves every destination as it
    was.

    Parameters
    ----------
    files : mapping of (str or Path) to bytes
        Destination to content. The renames follow this order; put the file that readers treat as the record
        last (it is renamed last: a crash in the microseconds between two renames leaves the earlier ones new and
        it old).

    Returns
    -------
    list of Path
        The paths, in order.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> [p.name for p in atomic_write_files({d / "t.parquet": b"P", d / "t.csv": b"a,b"})]
    ['t.parquet', 't.csv']
    """
    staged: list[AtomicFile] = []
    try:
        for path, data in files.items():
            staged.append(AtomicFile(path))
            staged[-1].file.write(data)
            staged[-1].file.flush()
            os.fsync(staged[-1].file.fileno())
    except BaseException:
        for out in staged:
            out.abort()
        raise
    for i, out in enumerate(staged):
        try:
            out.commit()
        except BaseException:
            for rest in staged[i + 1 :]:
                rest.abort()
            raise
    return [out.path for out in staged]


def atomic_write_text(path: str | Path, text: str) -> Path:
    r"""Write ``text`` (UTF-8) to ``path`` atomically; see :func:`atomic_write_bytes`.

    Parameters
    ----------
    path : str or Path
        The destination; its parent folders are created.
    text : str
        The whole content.

    Returns
    -------
    Path
        ``path``.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     atomic_write_text(pathlib.Path(tmp) / "note.txt", "collapse\n").read_text()
    'collapse\n'
    """
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_torch_save(obj: Any, path: str | Path) -> Path:
    """``torch.save(obj)`` to ``path`` atomically; see :func:`atomic_write_bytes`.

    Parameters
    ----------
    obj : object
        Anything ``torch.save`` accepts (a state dict, a tensor).
    path : str or Path
        The destination; its parent folders are created.

    Returns
    -------
    Path
        ``path``.

    Examples
    --------
    >>> import tempfile, pathlib, torch
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     p = atomic_torch_save({"w": torch.ones(2)}, pathlib.Path(tmp) / "ckpt.pt")
    ...     torch.load(p)["w"].tolist()
    [1.0, 1.0]
    """
    import torch

    buf = io.BytesIO()
    torch.save(obj, buf)
    return atomic_write_bytes(path, buf.getvalue())


def atomic_save_npy(path: str | Path, array: Any) -> Path:
    """``np.save(array)`` to exactly ``path`` (no ``.npy`` appended), atomically; see :func:`atomic_write_bytes`.

    Parameters
    ----------
    path : str or Path
        The destination; its parent folders are created.
    array : array_like
        Saved as ``np.asarray(array)``, without pickles (object arrays are refused).

    Returns
    -------
    Path
        ``path``.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> import numpy as np
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     p = atomic_save_npy(pathlib.Path(tmp) / "H.data", np.eye(2))
    ...     p.name, np.load(p).tolist()
    ('H.data', [[1.0, 0.0], [0.0, 1.0]])
    """
    import numpy as np

    buf = io.BytesIO()
    np.save(buf, np.asarray(array), allow_pickle=False)
    return atomic_write_bytes(path, buf.getvalue())
