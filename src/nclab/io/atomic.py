"""Atomic file writes: the one helper every nclab writer uses.

A reader, or a process killed mid-write, must never see half a file. Each write goes to a temporary file with a
unique name in the destination's folder (same file system, so the rename is atomic), is flushed and fsync'ed,
then renamed over the destination with ``os.replace``; the folder is fsync'ed too, so the rename itself survives
a crash. Parent folders are created. On any error the temporary file is removed and the destination is left as
it was.
"""

from __future__ import annotations

import contextlib
import io
import os
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["atomic_torch_save", "atomic_write_bytes", "atomic_write_text"]


def _fsync_dir(folder: Path) -> None:
    # Directory fsync makes the rename durable; some file systems (and Windows) do not support it.
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


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (unique temporary sibling, fsync, rename); returns ``path``.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = atomic_write_bytes(pathlib.Path(tempfile.mkdtemp()) / "sub" / "x.bin", b"abc")
    >>> p.read_bytes()
    b'abc'
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    _fsync_dir(path.parent)
    return path


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically; see :func:`atomic_write_bytes`."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_torch_save(obj: Any, path: str | Path) -> Path:
    """``torch.save(obj)`` to ``path`` atomically; see :func:`atomic_write_bytes`."""
    import torch

    buf = io.BytesIO()
    torch.save(obj, buf)
    return atomic_write_bytes(path, buf.getvalue())
