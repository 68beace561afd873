"""Verified files: the checksum nclab seals its statistics and checkpoints with, and the one error for a bad file.

Design: the checksum travels *inside* the file it protects (a sidecar could disagree with its file after a crash
between the two renames). It is the SHA-256 of a canonical serialisation of the payload, not of the file's
bytes, so that it can be stored in the file's own metadata and recomputed from what a reader loaded:

* statistics files (``.npz`` / ``.safetensors``, :meth:`nclab.stats.Accumulator.save`): :func:`arrays_sha256`
  of the metadata strings (sorted by key, the checksum's own entry left out) and the arrays (sorted by name:
  name, little-endian dtype, shape, C-order bytes), stored as the metadata entry ``sha256``;
* checkpoints (``.pt``, :mod:`nclab.train.checkpoint`): :func:`object_sha256` of the checkpoint dictionary
  without its ``sha256`` entry (nested dictionaries in order, sequences, tensors by dtype, shape and bytes,
  scalars exactly), stored as the entry ``sha256``.

A reader that finds a truncated, empty, bit-flipped, foreign, wrong-version, incomplete or semantically invalid
file raises :class:`CorruptFileError` (a ``ValueError``) whose message names the file and the problem.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["CorruptFileError", "arrays_sha256", "object_sha256"]


class CorruptFileError(ValueError):
    """A file nclab wrote (statistics, checkpoint, metrics table) that cannot be trusted: ``path`` and ``problem``.

    Examples
    --------
    >>> err = CorruptFileError("run/checkpoints/last.pt", "checksum mismatch")
    >>> str(err)
    'run/checkpoints/last.pt: checksum mismatch'
    >>> isinstance(err, ValueError), err.problem
    (True, 'checksum mismatch')
    """

    def __init__(self, path: str | Path, problem: str) -> None:
        self.path = Path(path)
        self.problem = problem
        super().__init__(f"{path}: {problem}")


def _array_bytes(arr: np.ndarray) -> tuple[str, bytes]:
    a = np.asarray(arr)
    little = a.dtype.newbyteorder("<")  # .npz keeps a big-endian array's order, safetensors does not
    a = np.ascontiguousarray(a, dtype=little)
    return little.str, a.tobytes()


def arrays_sha256(meta: Mapping[str, str], arrays: Mapping[str, Any], *, skip: str = "sha256") -> str:
    """SHA-256 (hex) of string metadata and named arrays, independent of their order and of the container format.

    Parameters
    ----------
    meta : mapping of str to str
        Metadata entries; the entry named ``skip`` (where the checksum itself is stored) is left out.
    arrays : mapping of str to array_like
        Named arrays; each contributes its name, little-endian dtype, shape and C-order bytes.
    skip : str, default "sha256"
        The metadata entry left out.

    Returns
    -------
    str
        64 hexadecimal digits.

    Examples
    --------
    >>> import numpy as np
    >>> a = arrays_sha256({"kind": '"X"'}, {"n": np.arange(3)})
    >>> a == arrays_sha256({"kind": '"X"', "sha256": "anything"}, {"n": np.arange(3).astype(">i8")})
    True
    >>> a == arrays_sha256({"kind": '"X"'}, {"n": np.array([0, 1, 3])})
    False
    """
    h = hashlib.sha256(b"nclab-arrays-1\0")
    for key in sorted(k for k in meta if k != skip):
        h.update(b"m" + key.encode() + b"\0" + str(meta[key]).encode() + b"\0")
    for key in sorted(arrays):
        dtype, data = _array_bytes(np.asarray(arrays[key]))
        h.update(b"a" + key.encode() + b"\0" + dtype.encode() + b"\0" + repr(np.shape(arrays[key])).encode() + b"\0")
        h.update(struct.pack("<Q", len(data)) + data)
    return h.hexdigest()


def _str_bytes(v: str) -> bytes:
    data = v.encode()
    return b"S" + struct.pack("<Q", len(data)) + data


# Exact-type encoders of the plain scalars, the same bytes as `_feed` writes for them (bool before int: exact type
# lookup keeps True from being read as an int). They serve the fast path of `_flat_bytes`.
_SCALAR_BYTES: dict[type, Any] = {
    bool: lambda v: b"B1" if v else b"B0",
    int: lambda v: b"I" + str(v).encode() + b"\0",
    float: lambda v: b"F" + v.hex().encode() + b"\0",
    str: _str_bytes,
    type(None): lambda v: b"N",
}


def _flat_bytes(seq: list[Any] | tuple[Any, ...]) -> bytes | None:
    """`_feed`'s bytes of a list / tuple of plain scalars (a metric row), or None when it holds anything else.

    Why: a checkpoint holds every metric row of the run (thousands of 5-tuples); one call per row instead of six
    recursive ones makes sealing and verifying a checkpoint several times faster, with the same checksum."""
    enc = _SCALAR_BYTES
    try:
        parts = [enc[type(v)](v) for v in seq]
    except KeyError:
        return None
    return b"L" + struct.pack("<Q", len(seq)) + b"".join(parts)


def _feed(h: Any, obj: Any) -> None:
    import torch

    if isinstance(obj, torch.Tensor):
        t = obj.detach().cpu().contiguous()
        h.update(b"T" + str(t.dtype).encode() + b"\0" + repr(tuple(t.shape)).encode() + b"\0")
        # a byte view covers every dtype numpy lacks (bfloat16, ...)
        data = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
        h.update(struct.pack("<Q", len(data)) + data)
    elif isinstance(obj, Mapping):
        h.update(b"D" + struct.pack("<Q", len(obj)))
        for k, v in obj.items():  # insertion order: pickling keeps it
            _feed(h, k)
            _feed(h, v)
    elif isinstance(obj, (list, tuple)):
        h.update(b"L" + struct.pack("<Q", len(obj)))
        for v in obj:
            flat = _flat_bytes(v) if type(v) is tuple or type(v) is list else None
            if flat is None:
                _feed(h, v)
            else:
                h.update(flat)
    elif obj is None:
        h.update(b"N")
    elif isinstance(obj, (bool, np.bool_)):
        h.update(b"B1" if obj else b"B0")
    elif isinstance(obj, (int, np.integer)):
        h.update(b"I" + str(int(obj)).encode() + b"\0")
    elif isinstance(obj, (float, np.floating)):
        h.update(b"F" + float(obj).hex().encode() + b"\0")
    elif isinstance(obj, str):
        data = obj.encode()
        h.update(b"S" + struct.pack("<Q", len(data)) + data)
    elif isinstance(obj, bytes):
        h.update(b"Y" + struct.pack("<Q", len(obj)) + obj)
    elif isinstance(obj, np.ndarray):
        dtype, data = _array_bytes(obj)
        h.update(b"A" + dtype.encode() + b"\0" + repr(obj.shape).encode() + b"\0" + struct.pack("<Q", len(data)) + data)
    else:
        raise TypeError(f"cannot checksum a {type(obj).__name__}")


def object_sha256(obj: Any) -> str:
    """SHA-256 (hex) of a nested structure of dicts, lists / tuples, tensors, arrays and scalars (a checkpoint).

    Dictionaries are read in insertion order (which pickling keeps), lists and tuples alike, tensors by dtype,
    shape and bytes, floats exactly (``float.hex``).

    Parameters
    ----------
    obj : object
        Dicts, lists, tuples, tensors, numpy arrays, str, bytes, bool, int, float, None, nested.

    Returns
    -------
    str
        64 hexadecimal digits.

    Examples
    --------
    >>> import torch
    >>> a = object_sha256({"epoch": 3, "w": torch.ones(2), "rows": [(1, "train", 0.5)]})
    >>> a == object_sha256({"epoch": 3, "w": torch.ones(2), "rows": [[1, "train", 0.5]]})
    True
    >>> a == object_sha256({"epoch": 3, "w": torch.tensor([1.0, 1.0 + 2**-23]), "rows": [(1, "train", 0.5)]})
    False
    """
    h = hashlib.sha256(b"nclab-object-1\0")
    _feed(h, obj)
    return h.hexdigest()
