"""Reading feature / label / classifier arrays from files: .npy (memory-mapped, streamed), .npz, .pt,
.safetensors. One place for file formats used by the CLI and by users who keep features on disk.

Every file is checked before its data is used: a ``.npy`` or ``.safetensors`` file must be exactly as long as its
header says (a file cut short, or with bytes after its data, is refused naming both byte counts), and a file
listed in its folder's ``manifest.json`` must agree with it (:func:`nclab.io.manifest.check_listed`). Arrays
come back in the machine's byte order (a big-endian ``.npy`` is byte-swapped as it is read); ``bfloat16``
tensors of a ``.safetensors`` file come back as float32 (exact: every bfloat16 is a float32).

Large arrays are never loaded whole by :func:`load_array` (``mmap=True``): a ``.npy`` or a ``.safetensors``
tensor is memory-mapped, or, when it cannot be mapped as it is (another byte order, bfloat16, or larger than the
address space left to the process, e.g. under ``ulimit -v``), returned as :class:`ArrayRows`, which reads a row
range at a time.
"""

from __future__ import annotations

import errno
import json
import math
import pickle
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from nclab.io.integrity import CorruptFileError
from nclab.io.manifest import check_listed

__all__ = ["SUFFIXES", "ArrayRows", "iter_batches", "load_array", "split_key"]

SUFFIXES = (".npy", ".npz", ".pt", ".pth", ".safetensors")

#: safetensors dtype code -> numpy dtype of the stored bytes (little-endian); BF16 is read as raw 16-bit words
_SAFETENSORS = {
    "F64": "<f8",
    "F32": "<f4",
    "F16": "<f2",
    "BF16": "<u2",
    "I64": "<i8",
    "I32": "<i4",
    "I16": "<i2",
    "I8": "i1",
    "U64": "<u8",
    "U32": "<u4",
    "U16": "<u2",
    "U8": "u1",
    "BOOL": "?",
}


def _pick(mapping: dict[str, Any], path: Path, key: str | None) -> Any:
    if key is not None:
        if key not in mapping:
            raise KeyError(f"{path}: no array named {key!r}; it holds {sorted(mapping)}")
        return mapping[key]
    if len(mapping) == 1:
        return next(iter(mapping.values()))
    raise ValueError(f"{path} holds several arrays {sorted(mapping)}: name one with 'file{path.suffix}:NAME'")


def _native(arr: np.ndarray) -> np.ndarray:
    # torch (and so every accumulator) refuses a byte order other than the machine's
    return arr if arr.dtype.isnative else arr.astype(arr.dtype.newbyteorder("="))


def split_key(spec: str | Path) -> tuple[Path, str | None]:
    """Split ``path:NAME`` into the file and the name of an array in it.

    Parameters
    ----------
    spec : str or Path
        A file path, optionally followed by ``:NAME`` after one of the known suffixes (.npy, .npz, .pt, .pth,
        .safetensors).

    Returns
    -------
    path : Path
        The file.
    key : str or None
        The array's name; None when ``spec`` names none.

    Examples
    --------
    >>> split_key("feats.npz:penultimate")
    (PosixPath('feats.npz'), 'penultimate')
    >>> split_key("H.npy")
    (PosixPath('H.npy'), None)
    """
    text = str(spec)
    for suffix in SUFFIXES:
        marker = suffix + ":"
        if marker in text:
            head, key = text.split(marker, 1)
            return Path(head + suffix), key
    return Path(text), None


class ArrayRows:
    """A row-major array stored at byte ``offset`` of the file ``path``, read a row range at a time.

    ``rows[a:b]`` (or ``rows[i]``) reads those rows into memory as an array in the machine's byte order (stored
    bfloat16 words upcast to float32); ``np.asarray(rows)`` reads everything. ``shape``, ``dtype`` (of what reads
    return), ``ndim`` and ``len`` are those of the array. What :func:`load_array` returns for an array it does
    not memory-map; memory use is the rows read.

    Parameters
    ----------
    path : str or Path
    offset : int
        Byte offset of the first element.
    shape : tuple of int
    stored : numpy dtype
        Dtype of the bytes in the file (any byte order).
    bfloat16 : bool, default False
        The stored 16-bit words are bfloat16 (``stored`` is then ``"<u2"``): reads return float32.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "big_endian.npy"
    >>> np.save(path, np.arange(6.0).reshape(3, 2).astype(">f8"))
    >>> rows = ArrayRows(path, 128, (3, 2), np.dtype(">f8"))
    >>> rows[1:], rows.dtype
    (array([[2., 3.],
           [4., 5.]]), dtype('float64'))
    """

    def __init__(
        self, path: str | Path, offset: int, shape: tuple[int, ...], stored: Any, *, bfloat16: bool = False
    ) -> None:
        self.path = Path(path)
        self.offset = int(offset)
        self.shape = tuple(int(n) for n in shape)
        self.stored = np.dtype(stored)
        self.bfloat16 = bool(bfloat16)
        self.dtype = np.dtype(np.float32) if bfloat16 else self.stored.newbyteorder("=")
        self._row_items = math.prod(self.shape[1:])

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def _read(self, start: int, stop: int) -> np.ndarray:
        count = max(stop - start, 0) * self._row_items
        with open(self.path, "rb") as fh:
            fh.seek(self.offset + start * self._row_items * self.stored.itemsize)
            raw = np.fromfile(fh, dtype=self.stored, count=count)
        if raw.size != count:  # the file shrank after it was opened
            raise CorruptFileError(self.path, f"ended after {raw.size} of the {count} values of rows {start}:{stop}")
        if self.bfloat16:  # a bfloat16 is the upper half of a float32: exact
            raw = (raw.astype(np.uint32) << 16).view(np.float32)
        return _native(raw).reshape((max(stop - start, 0), *self.shape[1:]))

    def __getitem__(self, index: Any) -> np.ndarray:
        if not self.shape:
            raise IndexError("a 0-d array has no rows; use np.asarray")
        n = self.shape[0]
        if isinstance(index, slice):
            start, stop, step = index.indices(n)
            if step != 1:
                raise IndexError("ArrayRows reads contiguous rows: use a slice with step 1")
            return self._read(start, max(start, stop))
        if isinstance(index, int | np.integer):
            i = int(index) + n if index < 0 else int(index)
            if not 0 <= i < n:
                raise IndexError(f"row {index} out of range for {n} rows")
            row: np.ndarray = self._read(i, i + 1)[0]
            return row
        raise IndexError("ArrayRows supports a row index or a row slice [a:b]; np.asarray(rows) reads it whole")

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        if not self.shape:
            return self._read(0, 1).reshape(()).astype(dtype or self.dtype, copy=False)
        out = self._read(0, self.shape[0])
        return out if dtype is None else out.astype(dtype, copy=False)

    def __repr__(self) -> str:
        kind = "bfloat16 -> float32" if self.bfloat16 else str(self.stored)
        return f"ArrayRows({self.path}, shape={self.shape}, {kind})"


def _rows(
    path: Path, offset: int, shape: tuple[int, ...], stored: np.dtype, *, mmap: bool, bfloat16: bool = False
) -> Any:
    """The array stored row-major at ``offset`` of ``path``: memory-mapped when it can be as it is, else an
    :class:`ArrayRows`; with ``mmap=False`` read into memory."""
    rows = ArrayRows(path, offset, shape, stored, bfloat16=bfloat16)
    if not mmap or rows.size == 0:
        return np.asarray(rows)
    if bfloat16 or not stored.isnative:
        return rows
    try:
        return np.memmap(path, dtype=stored, mode="r", offset=offset, shape=shape)
    except (MemoryError, OSError) as err:
        # mapping needs address space for the whole file (ulimit -v): read it a row range at a time instead
        if isinstance(err, OSError) and err.errno != errno.ENOMEM:
            raise
        return rows


def _size_error(path: Path, header: int, need: int, size: int, what: str) -> CorruptFileError:
    have = size - header
    if have > need:
        return CorruptFileError(
            path,
            f"{have - need} bytes after the array's data: the {header}-byte header describes {what} = {need} bytes "
            f"of data, the file holds {have} ({size} bytes in all); it was appended to or is not what its header "
            "says, so it is not read",
        )
    return CorruptFileError(
        path,
        f"truncated: the {header}-byte header describes {what} = {need} bytes of data, the file holds only {have} "
        f"({size} bytes in all)",
    )


def _load_npy(path: Path, mmap: bool) -> Any:
    size = path.stat().st_size
    with open(path, "rb") as fh:
        version = np.lib.format.read_magic(fh)
        read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, fortran, dtype = read(fh)
        header = fh.tell()
    if dtype.hasobject:
        raise ValueError(f"{path} holds Python objects (dtype {dtype}), not numbers; it was not loaded")
    need = math.prod(shape) * dtype.itemsize
    if size - header != need:
        raise _size_error(path, header, need, size, f"{shape} {dtype}")
    check_listed(path, None, dtype, shape, size)
    if fortran and len(shape) > 1:  # column-major: rows are not contiguous, so numpy's own reader
        arr = np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
        return arr if arr.dtype.isnative else _native(np.asarray(arr))
    return _rows(path, header, shape, dtype, mmap=mmap)


def _safetensors_header(path: Path) -> tuple[dict[str, Any], int, int]:
    """The tensors' header entries, the data start and the file size, after checking that the tensors tile the
    data exactly (the safetensors format: no gaps, nothing after the last tensor)."""
    size = path.stat().st_size
    with open(path, "rb") as fh:
        raw = fh.read(8)
        if len(raw) < 8:
            raise CorruptFileError(path, f"truncated: {size} bytes, shorter than the 8-byte header length")
        n = int.from_bytes(raw, "little")
        if 8 + n > size:
            raise CorruptFileError(
                path, f"truncated: its header length says {n} bytes of JSON, the file holds {size - 8} after it"
            )
        try:
            header = json.loads(fh.read(n))
        except (UnicodeDecodeError, ValueError):
            raise CorruptFileError(path, "its header is not valid JSON (not a .safetensors file, or damaged)") from None
    if not isinstance(header, dict):
        raise CorruptFileError(path, "its header is not a JSON object")
    header.pop("__metadata__", None)
    end = 0
    for name, info in sorted(header.items(), key=lambda kv: kv[1].get("data_offsets", [0])[0]):
        try:
            begin, stop = (int(v) for v in info["data_offsets"])
            shape = tuple(int(v) for v in info["shape"])
            code = str(info["dtype"])
        except (KeyError, TypeError, ValueError):
            raise CorruptFileError(path, f"the header entry of {name!r} is malformed: {info!r}") from None
        if begin != end:
            raise CorruptFileError(path, f"the data of {name!r} starts at byte {begin}, expected {end}")
        if code in _SAFETENSORS and stop - begin != math.prod(shape) * np.dtype(_SAFETENSORS[code]).itemsize:
            raise CorruptFileError(path, f"{name!r}: {stop - begin} bytes of data for shape {shape} {code}")
        end = stop
    data = 8 + n
    if size - data != end:
        raise _size_error(path, data, end, size, f"{len(header)} tensors")
    return header, data, size


def _load_safetensors(path: Path, key: str | None, mmap: bool) -> Any:
    header, data, size = _safetensors_header(path)
    name = key if key is not None or len(header) != 1 else next(iter(header))
    info = _pick(header, path, name)
    code = info["dtype"]
    if code not in _SAFETENSORS:
        raise ValueError(
            f"{path}: tensor {name!r} has dtype {code}, which nclab cannot read (it reads "
            f"{', '.join(_SAFETENSORS)}); convert it to float32 before saving"
        )
    stored, shape = np.dtype(_SAFETENSORS[code]), tuple(info["shape"])
    check_listed(path, name, np.float32 if code == "BF16" else stored, shape, size)
    begin = data + int(info["data_offsets"][0])
    return _rows(path, begin, shape, stored, mmap=mmap, bfloat16=code == "BF16")


def _load_torch(path: Path, key: str | None) -> Any:
    import torch

    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        found = re.search(r"GLOBAL (\S+)", str(err))
        what = f" (it refers to {found.group(1)})" if found else ""
        raise ValueError(
            f"{path} holds Python objects other than tensors{what}, so it was not loaded: unpickling them could run "
            "code from the file. nclab reads a tensor, an array, or a dict of them from a .pt file; save the "
            "features with torch.save(tensor) or numpy.save"
        ) from None
    if isinstance(obj, dict):
        obj = _pick(obj, path, key)
    if not isinstance(obj, torch.Tensor | np.ndarray):
        raise ValueError(f"{path}: expected a tensor, found {type(obj).__name__}")
    return _native(obj) if isinstance(obj, np.ndarray) else obj


def load_array(spec: str | Path, *, mmap: bool = True) -> Any:
    """Load one array, checked against its header and its folder's manifest (see the module).

    With ``mmap=True`` a ``.npy`` or ``.safetensors`` array is not read into memory: a ``numpy.memmap``, or an
    :class:`ArrayRows` (another byte order, bfloat16, or too large to map), both read in row chunks
    (:func:`iter_batches`). ``.npz`` and ``.pt`` are read whole.

    Parameters
    ----------
    spec : str or Path
        The file, ``path:NAME`` for a file holding several arrays (:func:`split_key`).
    mmap : bool, default True
        Map ``.npy`` / ``.safetensors`` arrays instead of reading them; ``False`` returns them in memory.

    Returns
    -------
    numpy.ndarray, numpy.memmap, ArrayRows or torch.Tensor
        A numpy array (native byte order), a memmap, an :class:`ArrayRows`, or a torch tensor (``.pt``).

    Raises
    ------
    FileNotFoundError
        No such file.
    CorruptFileError
        A file shorter or longer than its header says, or disagreeing with its manifest (names the file).
    ValueError
        An unreadable file, a dtype nclab cannot read, a ``.pt`` holding objects other than tensors.
    KeyError
        ``path:NAME`` names no array of the file.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = pathlib.Path(tmp) / "feats.npz"
    ...     np.savez(path, H=np.eye(2), y=np.arange(2))
    ...     load_array(f"{path}:H").tolist()
    [[1.0, 0.0], [0.0, 1.0]]
    """
    path, key = split_key(spec)
    if not path.exists():
        raise FileNotFoundError(f"no such file: {path}")
    suffix = path.suffix.lower()
    try:
        if suffix == ".npy":
            if key is not None:
                raise ValueError(f"{path} holds a single array; ':{key}' names an array only in .npz/.pt/.safetensors")
            return _load_npy(path, mmap)
        if suffix == ".npz":
            with np.load(path, allow_pickle=False) as fh:
                return _native(np.asarray(_pick({k: fh[k] for k in fh.files}, path, key)))
        if suffix in (".pt", ".pth"):
            return _load_torch(path, key)
        if suffix == ".safetensors":
            return _load_safetensors(path, key, mmap)
    except (OSError, ValueError, RuntimeError) as err:
        if isinstance(err, FileNotFoundError | KeyError | CorruptFileError) or str(path) in str(err):
            raise
        raise ValueError(f"could not read {path}: {err}") from err
    raise ValueError(f"unsupported file type {suffix!r} for {path}; use one of {', '.join(SUFFIXES)}")


def iter_batches(features: Any, labels: Any, batch_size: int = 8192) -> Iterator[tuple[Any, Any]]:
    """Row chunks of ``(features, labels)``; memory-mapped features (and :class:`ArrayRows`) are read one chunk
    at a time, in the machine's byte order.

    Parameters
    ----------
    features : array_like, memmap, ArrayRows or torch.Tensor, shape (N, d)
        The features.
    labels : array_like or torch.Tensor, shape (N,)
        Their labels.
    batch_size : int, default 8192
        Rows per chunk, an int >= 1.

    Yields
    ------
    (features_chunk, labels_chunk)
        Features ``(B, d)`` in memory, native byte order, and their labels ``(B,)``; ``B = batch_size`` but for
        the last chunk. A generator: nothing is read before the first chunk is asked for.

    Raises
    ------
    ValueError
        A bad ``batch_size``, or features and labels of different lengths.

    Examples
    --------
    >>> [(h.shape, y.tolist()) for h, y in iter_batches(np.zeros((5, 2)), np.arange(5), batch_size=2)]
    [((2, 2), [0, 1]), ((2, 2), [2, 3]), ((1, 2), [4])]
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int | np.integer) or batch_size < 1:
        raise ValueError(f"batch_size must be an int >= 1, got {batch_size!r}")  # range(0, n, 0) would raise
    n = features.shape[0]
    if labels.shape[0] != n:
        raise ValueError(f"features have {n} rows but labels have {labels.shape[0]} entries")
    for start in range(0, n, batch_size):
        chunk = features[start : start + batch_size]
        if isinstance(chunk, np.ndarray):  # a plain array (a memmap's slice still maps the file), native order
            chunk = _native(np.asarray(chunk))
        yield chunk, labels[start : start + batch_size]
