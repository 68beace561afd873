"""A ``.npy`` file written row batch by row batch when the number of rows is not known in advance.

The header is written first with room for any shape, the rows are appended, and :meth:`NpyAppender.close`
rewrites the header in place with the final ``(N, d)`` (same length, so no data moves). The result is a plain
``.npy`` that ``numpy.load(..., mmap_mode="r")`` memory-maps; memory use is one batch.

Examples
--------
>>> import tempfile, pathlib
>>> path = pathlib.Path(tempfile.mkdtemp()) / "h.npy"
>>> with NpyAppender(path, np.float32) as out:
...     out.append(np.ones((2, 3))); out.append(np.zeros((1, 3)))
>>> arr = np.load(path, mmap_mode="r")
>>> arr.shape, float(arr.sum())
((3, 3), 6.0)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["NpyAppender"]

_MAGIC = b"\x93NUMPY\x01\x00"
_HEADER_BYTES = 256  # magic + length + dict, padded: a shape of two 30-digit numbers still fits


def _header(dtype: np.dtype, shape: tuple[int, ...]) -> bytes:
    text = repr({"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": shape})
    body_len = _HEADER_BYTES - len(_MAGIC) - 2
    body = text.encode("latin1")
    if len(body) + 1 > body_len:
        raise ValueError(f"shape {shape} does not fit the .npy header")
    body = body + b" " * (body_len - len(body) - 1) + b"\n"
    return _MAGIC + body_len.to_bytes(2, "little") + body


class NpyAppender:
    """Append ``(n, d)`` row batches of one dtype to ``path`` (a version-1.0 ``.npy``); ``close`` fixes the
    shape. ``d`` is taken from the first batch; later batches must match it."""

    def __init__(self, path: str | Path, dtype: Any) -> None:
        self.path = Path(path)
        self.dtype = np.dtype(dtype)
        self.rows = 0
        self.dim: int | None = None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = open(self.path, "wb")
        self._fh.write(_header(self.dtype, (0,)))

    def append(self, batch: Any) -> None:
        arr = np.ascontiguousarray(batch, dtype=self.dtype)
        if arr.ndim == 1:
            arr = arr[:, None] if self.dim not in (None, 0) else arr
        dim = 0 if arr.ndim == 1 else int(arr.shape[1])
        if self.dim is None:
            self.dim = dim
        elif dim != self.dim:
            raise ValueError(f"{self.path.name}: batch has {dim} columns, earlier batches {self.dim}")
        self._fh.write(arr.tobytes())
        self.rows += int(arr.shape[0])

    def close(self) -> Path:
        if self._fh.closed:
            return self.path
        shape = (self.rows,) if not self.dim else (self.rows, self.dim)
        self._fh.seek(0)
        self._fh.write(_header(self.dtype, shape))
        self._fh.close()
        return self.path

    def __enter__(self) -> NpyAppender:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
