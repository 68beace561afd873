"""A ``.npy`` file written row batch by row batch when the number of rows is not known in advance
(:class:`NpyAppender`), and arrays of any size copied into one ``.safetensors`` file in chunks
(:func:`write_safetensors`).

The header is written first with room for any shape, the rows are appended, and :meth:`NpyAppender.close`
rewrites the header in place with the final ``(N, d)`` (same length, so no data moves). The result is a plain
``.npy`` that ``numpy.load(..., mmap_mode="r")`` memory-maps; memory use is one batch. The SHA-256 of the data
(the bytes after the header) is computed as the rows are written (:attr:`NpyAppender.sha256`), for a manifest.
The file appears at its name only when :meth:`NpyAppender.close` commits it; :meth:`NpyAppender.abort` (and an
exception inside a ``with`` block) removes what was written.

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

import hashlib
import json
import os
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from nclab.io.atomic import AtomicFile
from nclab.io.integrity import CorruptFileError

__all__ = ["NpyAppender", "PartialNpy", "write_safetensors"]

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
    shape and commits the file, ``abort`` discards it. ``d`` is taken from the first batch; later batches must
    match it. ``data_offset`` is the header's length (256 bytes), ``sha256`` the hex SHA-256 of the data bytes
    written so far (the whole data after ``close``)."""

    #: Bytes before the data: every file an NpyAppender writes has this header length.
    data_offset = _HEADER_BYTES

    def __init__(self, path: str | Path, dtype: Any) -> None:
        self.path = Path(path)
        self.dtype = np.dtype(dtype)
        self.rows = 0
        self.columns: int | None = None
        self._digest = hashlib.sha256()
        # written beside the destination and renamed over it by close(): no reader sees a header of shape (0,)
        self._out = AtomicFile(self.path)
        self._fh: BinaryIO = self._out.file  # a subclass opens a new file ("wb") or resumes one ("r+b")
        self._fh.write(_header(self.dtype, (0,)))

    def append(self, batch: Any) -> None:
        arr = np.ascontiguousarray(batch, dtype=self.dtype)
        if arr.ndim == 1:
            arr = arr[:, None] if self.columns not in (None, 0) else arr
        columns = 0 if arr.ndim == 1 else int(arr.shape[1])
        if self.columns is None:
            self.columns = columns
        elif columns != self.columns:
            raise ValueError(f"{self.path.name}: batch has {columns} columns, earlier batches {self.columns}")
        data = arr.tobytes()
        self._fh.write(data)
        self._digest.update(data)
        self.rows += int(arr.shape[0])

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape the file has (after ``close``) or will have: ``(rows,)`` or ``(rows, d)``."""
        return (self.rows,) if not self.columns else (self.rows, self.columns)

    @property
    def sha256(self) -> str:
        """Hex SHA-256 of the data bytes written so far (the file's bytes after its header)."""
        return self._digest.hexdigest()

    def close(self) -> Path:
        """Write the final shape into the header and commit the file at ``path`` (flushed, fsync'ed, renamed)."""
        if self._fh.closed:
            return self.path
        self._fh.seek(0)
        self._fh.write(_header(self.dtype, self.shape))
        return self._out.commit()

    def abort(self) -> None:
        """Discard what was written: ``path`` is left as it was (idempotent; a no-op after ``close``)."""
        if not self._fh.closed:
            self._out.abort()

    def __enter__(self) -> NpyAppender:
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        # an error part-way must not put a valid-looking, truncated file at ``path``
        if exc_type is None:
            self.close()
        else:
            self.abort()


class PartialNpy(NpyAppender):
    """An :class:`NpyAppender` that writes ``path`` + ``".part"`` in place, under that stable name, for a writer
    whose folder is itself the atomic unit (a staging folder, :mod:`nclab.io.staged`) and that may be continued
    after a crash: :meth:`sync` makes the rows written so far durable, and ``PartialNpy(path, dtype, rows=n,
    columns=d)`` reopens the part file, cuts it to its first ``n`` rows (rows written after the last sync a crash may
    have left half-written) and re-hashes them, so the finished file and its checksum are those of an
    uninterrupted writer. :meth:`close` writes the final header and renames the part file to ``path``.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "h.npy"
    >>> w = PartialNpy(path, np.float32)
    >>> w.append(np.ones((2, 3))); w.sync(); w.append(np.full((5, 3), 7.0)); w.abort(keep=True)  # a crash
    >>> w = PartialNpy(path, np.float32, rows=2, columns=3)  # continue after the 2 rows synced
    >>> w.append(np.zeros((1, 3))); _ = w.close()
    >>> np.load(path).sum(), w.sha256 == hashlib.sha256(np.load(path).tobytes()).hexdigest()
    (np.float32(6.0), True)
    """

    def __init__(self, path: str | Path, dtype: Any, *, rows: int = 0, columns: int | None = None) -> None:
        self.path = Path(path)
        self.part = self.path.with_name(self.path.name + ".part")
        self.dtype = np.dtype(dtype)
        self._digest = hashlib.sha256()
        if rows == 0:
            self.rows, self.columns = 0, None
            self._fh = open(self.part, "wb")
            self._fh.write(_header(self.dtype, (0,)))
            return
        self.rows, self.columns = int(rows), columns
        need = _HEADER_BYTES + self.rows * max(columns or 1, 1) * self.dtype.itemsize
        size = self.part.stat().st_size if self.part.is_file() else -1
        if size < need:
            have = "missing" if size < 0 else f"{size} bytes"
            raise CorruptFileError(
                self.part, f"cannot continue it at row {rows}: that needs {need} bytes, it has {have}"
            )
        self._fh = open(self.part, "r+b")
        self._fh.truncate(need)
        self._fh.seek(_HEADER_BYTES)
        left = need - _HEADER_BYTES
        while left:
            chunk = self._fh.read(min(left, 16 * 2**20))
            self._digest.update(chunk)
            left -= len(chunk)

    def sync(self) -> None:
        """Flush the rows written so far to disk (``fsync``)."""
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def close(self) -> Path:
        """Write the final shape into the header, fsync, and rename the part file to ``path``."""
        if self._fh.closed:
            return self.path
        self._fh.seek(0)
        self._fh.write(_header(self.dtype, self.shape))
        self.sync()
        self._fh.close()
        os.replace(self.part, self.path)
        return self.path

    def abort(self, *, keep: bool = False) -> None:
        """Close the part file and remove it (``keep=True``: leave it, for a writer to continue)."""
        if not self._fh.closed:
            self._fh.close()
            if not keep:
                self.part.unlink(missing_ok=True)


#: numpy dtype -> safetensors dtype code
_SAFETENSORS_DTYPES = {
    np.dtype(np.float64): "F64",
    np.dtype(np.float32): "F32",
    np.dtype(np.float16): "F16",
    np.dtype(np.int64): "I64",
    np.dtype(np.int32): "I32",
    np.dtype(np.uint8): "U8",
}


def write_safetensors(
    path: str | Path,
    arrays: dict[str, Any],
    *,
    metadata: dict[str, str] | None = None,
    chunk_mb: float = 64.0,
    digest: Any = None,
) -> Path:
    """Write ``arrays`` (``{name: array}``, e.g. memory-mapped ``.npy`` files) to one ``.safetensors`` file,
    copying at most ``chunk_mb`` at a time (so an array larger than memory is never loaded whole), atomically.
    ``digest`` (a ``hashlib`` object) is updated with the data bytes (everything after the header) as they are
    written.

    The format: an 8-byte little-endian header length, a JSON header ``{name: {"dtype", "shape",
    "data_offsets": [begin, end]}, "__metadata__": {...}}`` padded with spaces to a multiple of 8 bytes, then
    the tensors' little-endian row-major bytes back to back in header order. Readers: ``safetensors``
    (``pip install nclab[io]``), ``nclab measure FILE:NAME``.

    Examples
    --------
    >>> import json, tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "f.safetensors"
    >>> _ = write_safetensors(path, {"h": np.arange(6.0).reshape(3, 2), "y": np.array([0, 1, 1])})
    >>> raw = path.read_bytes()
    >>> n = int.from_bytes(raw[:8], "little")
    >>> json.loads(raw[8 : 8 + n])["h"]
    {'dtype': 'F64', 'shape': [3, 2], 'data_offsets': [0, 48]}
    >>> np.frombuffer(raw[8 + n : 8 + n + 48]).tolist()
    [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    """
    header: dict[str, Any] = {}
    offset = 0
    order = []
    for name, arr in arrays.items():
        dtype = np.dtype(arr.dtype).newbyteorder("=")
        code = _SAFETENSORS_DTYPES.get(dtype)
        if code is None:
            known = ", ".join(str(d) for d in _SAFETENSORS_DTYPES)
            raise ValueError(f"write_safetensors: {name!r} has dtype {arr.dtype}, not one of {known}")
        size = int(np.prod(arr.shape, dtype=np.int64)) * dtype.itemsize
        header[name] = {"dtype": code, "shape": [int(n) for n in arr.shape], "data_offsets": [offset, offset + size]}
        order.append((name, arr, dtype.newbyteorder("<")))
        offset += size
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)
    path = Path(path)
    with AtomicFile(path) as out:
        fh = out.file
        fh.write(len(blob).to_bytes(8, "little"))
        fh.write(blob)
        for _, arr, little in order:
            flat = np.reshape(arr, -1) if np.ndim(arr) <= 1 else np.reshape(arr, (arr.shape[0], -1))
            per_row = (flat.shape[1] if flat.ndim == 2 else 1) * little.itemsize
            step = max(1, int(chunk_mb * 2**20) // max(per_row, 1))
            for i in range(0, flat.shape[0], step):
                data = np.ascontiguousarray(flat[i : i + step], dtype=little).tobytes()
                fh.write(data)
                if digest is not None:
                    digest.update(data)
    return path
