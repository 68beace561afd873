"""Training checkpoints (``checkpoints/last.pt``), sealed with a checksum and verified on every read.

A checkpoint is a ``torch.save``'d dictionary (read with ``weights_only=True``: no code runs on load) with the
keys :data:`CHECKPOINT_KEYS`, ``format`` (:data:`CHECKPOINT_FORMAT`) and ``sha256``:
:func:`nclab.io.integrity.object_sha256` of the dictionary without ``sha256`` -- the checksum is inside the file,
so a crash can never leave a file and its checksum disagreeing. :func:`checkpoint_bytes` seals a payload;
:func:`load_checkpoint` refuses, with one :class:`~nclab.io.integrity.CorruptFileError` naming the file and the
problem, a file that is empty, truncated or not a torch file, of another format, missing a key, or whose
contents no longer match the checksum (a bit flip, an edit).
"""

from __future__ import annotations

import io
import pickle
import zipfile
from pathlib import Path
from typing import Any

import torch

from nclab.io.integrity import CorruptFileError, object_sha256

__all__ = ["CHECKPOINT_FORMAT", "CHECKPOINT_KEYS", "checkpoint_bytes", "load_checkpoint"]

#: Layout version of a checkpoint (2: sealed with ``sha256``).
CHECKPOINT_FORMAT = 2

#: What a checkpoint holds besides ``format`` and ``sha256``.
CHECKPOINT_KEYS: tuple[str, ...] = (
    "epoch",
    "model",
    "optimizer",
    "torch_rng",
    "rows",
    "zero_error_epoch",
    "measured",
    "timings",
)


def checkpoint_bytes(payload: dict[str, Any]) -> bytes:
    """The file contents of a checkpoint of ``payload`` (the :data:`CHECKPOINT_KEYS`): ``format`` and the
    checksum ``sha256`` added, ``torch.save``'d. Write them with :func:`nclab.io.atomic.atomic_write_bytes`.

    Examples
    --------
    >>> import tempfile, pathlib, torch
    >>> from nclab.io.atomic import atomic_write_bytes
    >>> payload = dict.fromkeys(CHECKPOINT_KEYS, 0) | {"model": {"w": torch.ones(2)}}
    >>> path = atomic_write_bytes(pathlib.Path(tempfile.mkdtemp()) / "last.pt", checkpoint_bytes(payload))
    >>> load_checkpoint(path)["model"]["w"].tolist()
    [1.0, 1.0]
    """
    missing = [k for k in CHECKPOINT_KEYS if k not in payload]
    if missing:
        raise ValueError(f"checkpoint payload is missing {', '.join(missing)}")
    sealed: dict[str, Any] = {"format": CHECKPOINT_FORMAT, **{k: v for k, v in payload.items() if k != "format"}}
    sealed["sha256"] = object_sha256(sealed)
    buf = io.BytesIO()
    torch.save(sealed, buf)
    return buf.getvalue()


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Read and verify the checkpoint at ``path``; returns its dictionary (``format`` and ``sha256`` included).

    Raises
    ------
    CorruptFileError
        (a ``ValueError``) naming ``path`` and the problem: unreadable (empty, truncated, not a torch file),
        another format, a missing key, or a checksum mismatch.
    FileNotFoundError
        When there is no file at ``path``.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}")
    if path.stat().st_size == 0:
        raise CorruptFileError(path, "the checkpoint is empty (0 bytes)")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except (RuntimeError, OSError, EOFError, ValueError, zipfile.BadZipFile, pickle.UnpicklingError) as err:
        # torch reports a cut zip archive as RuntimeError or OSError (EINVAL), an empty pickle as EOFError
        text = str(err).strip() or type(err).__name__
        first = text.splitlines()[0].split(". ")[0]  # torch appends paragraphs of advice
        raise CorruptFileError(path, f"cannot read the checkpoint (truncated or not a torch file): {first}") from err
    if not isinstance(state, dict):
        raise CorruptFileError(path, f"not an nclab checkpoint (holds a {type(state).__name__}, not a dict)")
    if state.get("format") != CHECKPOINT_FORMAT:
        raise CorruptFileError(
            path, f"unsupported checkpoint format {state.get('format')!r} (this nclab reads {CHECKPOINT_FORMAT})"
        )
    missing = [k for k in (*CHECKPOINT_KEYS, "sha256") if k not in state]
    if missing:
        raise CorruptFileError(path, f"the checkpoint is missing {', '.join(map(repr, missing))}")
    try:
        actual = object_sha256({k: v for k, v in state.items() if k != "sha256"})
    except TypeError as err:
        raise CorruptFileError(path, f"the checkpoint holds an unexpected value: {err}") from err
    if actual != state["sha256"]:
        raise CorruptFileError(path, "checksum mismatch: the contents changed after they were saved (bit flip, edit)")
    epoch = state["epoch"]
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
        raise CorruptFileError(path, f"the checkpoint's epoch is {epoch!r}, not a nonnegative int")
    return state
