"""Readers for the on-disk formats of the standard image datasets. Each returns uint8 images
``(N, C, H, W)`` and int64 labels ``(N,)``, and raises :class:`CorruptDatasetError` naming the file and the
problem when the bytes do not match the format.

* IDX (MNIST, Fashion-MNIST): big-endian header ``0x0000 TT DD`` (TT = 0x08 unsigned byte, DD = number of
  dimensions), DD big-endian uint32 sizes, then the data; optionally gzip-compressed.
* CIFAR-10/100 "python version": pickled dicts with ``data`` (N, 3072) uint8 in channel-major order and
  ``labels`` (CIFAR-10) or ``fine_labels`` / ``coarse_labels`` (CIFAR-100). Unpickled with a restricted
  unpickler that only admits numpy's array reconstruction (pickles can execute code).
* SVHN cropped digits: MATLAB ``.mat`` with ``X`` (32, 32, 3, N) and ``y`` (N, 1), label 10 meaning digit 0.
* STL-10 binary: ``*_X.bin`` raw uint8, each image 3 x 96 x 96 in column-major (Fortran) order;
  ``*_y.bin`` labels 1..10.
"""

from __future__ import annotations

import gzip
import io
import pickle
import struct
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import DTypeLike

from nclab.data.errors import CorruptDatasetError

__all__ = ["read_cifar_batch", "read_idx", "read_stl10", "read_svhn_mat"]

_IDX_DTYPES: dict[int, DTypeLike] = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def _read_bytes(path: Path) -> bytes:
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rb") as fh:
                return fh.read()
        return path.read_bytes()
    except (OSError, EOFError) as err:  # gzip raises BadGzipFile (an OSError) or EOFError when truncated
        raise CorruptDatasetError(path, f"cannot read ({err})") from err


def read_idx(path: str | Path) -> np.ndarray:
    """One IDX file (``.gz`` or not) as a numpy array of the shape its header declares."""
    path = Path(path)
    raw = _read_bytes(path)
    if len(raw) < 4:
        raise CorruptDatasetError(path, f"{len(raw)} bytes, shorter than the 4-byte IDX magic number")
    zero, type_code, ndim = struct.unpack(">HBB", raw[:4])
    if zero != 0 or type_code not in _IDX_DTYPES or ndim == 0:
        raise CorruptDatasetError(path, f"bad IDX magic number 0x{raw[:4].hex()} (expected 0x0000TTDD)")
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise CorruptDatasetError(path, f"truncated IDX header ({len(raw)} bytes, need {header})")
    shape = struct.unpack(f">{ndim}I", raw[4:header])
    dtype = np.dtype(_IDX_DTYPES[type_code])
    expected = header + int(np.prod(shape)) * dtype.itemsize
    if len(raw) != expected:
        raise CorruptDatasetError(path, f"{len(raw)} bytes, but the header {shape} implies {expected}")
    return np.frombuffer(raw, dtype=dtype, offset=header).reshape(shape).astype(dtype.newbyteorder("="))


class _NumpyOnlyUnpickler(pickle.Unpickler):
    """Admit only what a pickled numpy array needs; anything else in a 'dataset' pickle is refused."""

    _ALLOWED: frozenset[tuple[str, str]] = frozenset(
        {
            ("numpy", "ndarray"),
            ("numpy", "dtype"),
            ("numpy.core.multiarray", "_reconstruct"),
            ("numpy._core.multiarray", "_reconstruct"),
            ("numpy.core.multiarray", "scalar"),
            ("numpy._core.multiarray", "scalar"),
            ("_codecs", "encode"),
        }
    )

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in self._ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing to unpickle {module}.{name} (only numpy arrays are allowed)")


def _key(d: dict, name: str):
    for k in (name, name.encode()):
        if k in d:
            return d[k]
    return None


def read_cifar_batch(path: str | Path, label_key: str = "labels") -> tuple[np.ndarray, np.ndarray]:
    """One CIFAR pickle batch: images ``(N, 3, 32, 32)`` uint8, labels ``(N,)`` int64 (``label_key``:
    ``labels`` for CIFAR-10, ``fine_labels`` or ``coarse_labels`` for CIFAR-100)."""
    path = Path(path)
    raw = _read_bytes(path)
    try:
        obj = _NumpyOnlyUnpickler(io.BytesIO(raw), encoding="bytes").load()
    except Exception as err:  # any unpickling failure means the file is not a CIFAR batch
        raise CorruptDatasetError(path, f"not a readable CIFAR pickle ({type(err).__name__}: {err})") from err
    if not isinstance(obj, dict):
        raise CorruptDatasetError(path, f"expected a pickled dict, found {type(obj).__name__}")
    data, labels = _key(obj, "data"), _key(obj, label_key)
    if data is None or labels is None:
        keys = sorted(k.decode() if isinstance(k, bytes) else str(k) for k in obj)
        raise CorruptDatasetError(path, f"missing 'data' or {label_key!r} (keys: {keys})")
    data = np.asarray(data)
    labels = np.asarray(labels, dtype=np.int64)
    if data.ndim != 2 or data.shape[1] != 3 * 32 * 32 or data.shape[0] != labels.shape[0]:
        raise CorruptDatasetError(path, f"data shape {data.shape} / labels {labels.shape}: expected (N, 3072) and (N,)")
    return data.astype(np.uint8, copy=False).reshape(-1, 3, 32, 32), labels


def read_svhn_mat(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """An SVHN ``*_32x32.mat``: images ``(N, 3, 32, 32)`` uint8 and labels ``(N,)`` in 0..9 (10 -> 0)."""
    import scipy.io

    path = Path(path)
    try:
        mat = scipy.io.loadmat(path)
    except Exception as err:  # scipy raises ValueError / TypeError / MatReadError on garbage
        raise CorruptDatasetError(path, f"not a readable .mat file ({type(err).__name__}: {err})") from err
    if "X" not in mat or "y" not in mat:
        raise CorruptDatasetError(
            path, f"expected variables 'X' and 'y', found {sorted(k for k in mat if k[0] != '_')}"
        )
    X, y = np.asarray(mat["X"]), np.asarray(mat["y"]).reshape(-1).astype(np.int64)
    if X.ndim != 4 or X.shape[:3] != (32, 32, 3) or X.shape[3] != y.shape[0]:
        raise CorruptDatasetError(path, f"X has shape {X.shape}, y {y.shape}: expected (32, 32, 3, N) and (N, 1)")
    y = np.where(y == 10, 0, y)
    if y.size and (y.min() < 0 or y.max() > 9):
        raise CorruptDatasetError(path, f"labels outside 1..10: [{y.min()}, {y.max()}]")
    return np.ascontiguousarray(X.transpose(3, 2, 0, 1)).astype(np.uint8, copy=False), y


def read_stl10(x_path: str | Path, y_path: str | Path | None) -> tuple[np.ndarray, np.ndarray | None]:
    """STL-10 binary: images ``(N, 3, 96, 96)`` uint8 and labels in 0..9 (``y_path=None``: unlabeled)."""
    x_path = Path(x_path)
    raw = _read_bytes(x_path)
    per = 3 * 96 * 96
    if len(raw) % per != 0 or len(raw) == 0:
        raise CorruptDatasetError(x_path, f"{len(raw)} bytes is not a positive multiple of 3*96*96 = {per}")
    # column-major per image: the stored order is (N, C, W, H); swap the last two axes
    X = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 3, 96, 96).transpose(0, 1, 3, 2)
    if y_path is None:
        return np.ascontiguousarray(X), None
    y_path = Path(y_path)
    y = np.frombuffer(_read_bytes(y_path), dtype=np.uint8).astype(np.int64)
    if y.shape[0] != X.shape[0]:
        raise CorruptDatasetError(y_path, f"{y.shape[0]} labels for {X.shape[0]} images in {x_path.name}")
    if y.size and (y.min() < 1 or y.max() > 10):
        raise CorruptDatasetError(y_path, f"labels outside 1..10: [{y.min()}, {y.max()}]")
    return np.ascontiguousarray(X), y - 1
