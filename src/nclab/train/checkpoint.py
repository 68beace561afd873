"""Training checkpoints (``checkpoints/last.pt``), sealed with a checksum and verified on every read.

A checkpoint is a ``torch.save``'d dictionary (read with ``weights_only=True``: no code runs on load) with the
keys :data:`CHECKPOINT_KEYS` (the trainer adds ``run_id`` and ``config``, the run that wrote it, which
``nclab verify`` and ``--resume`` check ``config.yaml`` and ``metrics.csv`` against; files without them still load),
``format`` (:data:`CHECKPOINT_FORMAT`) and ``sha256``:
:func:`nclab.io.integrity.object_sha256` of the dictionary without ``sha256`` -- the checksum is inside the file,
so a crash can never leave a file and its checksum disagreeing. :func:`checkpoint_bytes` seals a payload;
:func:`load_checkpoint` refuses, with one :class:`~nclab.io.integrity.CorruptFileError` naming the file and the
problem, a file that is empty, truncated or not a torch file, of another format, missing a key, or whose
contents no longer match the checksum (a bit flip, an edit).

The metric rows ``(epoch, split, layer, metric, value)`` are stored by column (format 3): an int64 and a float64
tensor, int32 codes into one list of the distinct names. A list of thousands of small tuples cost a Python-level
call per element to pickle and to checksum, and it grows at every checkpoint: 17 ms per checkpoint at the end of
the demo run against 3.9 ms by column (benchmarks/RESULTS.md). :func:`load_checkpoint` gives the rows back as the
list of tuples either way, and still reads format 2 (rows as that list).
"""

from __future__ import annotations

import io
import pickle
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

from nclab.io.integrity import CorruptFileError, object_sha256
from nclab.io.run_table import COLUMNS

__all__ = [
    "CHECKPOINT_FORMAT",
    "CHECKPOINT_KEYS",
    "READABLE_FORMATS",
    "checkpoint_bytes",
    "columns_to_rows",
    "load_checkpoint",
    "rows_to_columns",
]

#: Layout version of a checkpoint written now (2: sealed with ``sha256``; 3: metric rows stored by column).
CHECKPOINT_FORMAT = 3
#: Layout versions :func:`load_checkpoint` reads.
READABLE_FORMATS = (2, 3)

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
    sealed["rows"] = rows_to_columns(payload["rows"])
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
    fmt = state.get("format")
    if isinstance(fmt, bool) or fmt not in READABLE_FORMATS:
        readable = " and ".join(map(str, READABLE_FORMATS))
        raise CorruptFileError(path, f"unsupported checkpoint format {fmt!r} (this nclab reads {readable})")
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
    try:
        state["rows"] = columns_to_rows(state["rows"])
    except ValueError as err:
        raise CorruptFileError(path, f"the checkpoint's metric rows are inconsistent: {err}") from err
    return state


def rows_to_columns(rows: Any) -> Any:
    """Metric rows ``(epoch, split, layer, metric, value)`` (int, three str, a real number) by column: ``epoch``
    (N,) int64 and ``value`` (N,) float64 tensors (every value bit for bit, nan and inf included), ``split``,
    ``layer``, ``metric`` (N,) int32 codes into ``names``, the distinct strings in order of first use. Rows of any
    other shape are returned as given (stored as a list; :func:`columns_to_rows` passes a list through).

    Examples
    --------
    >>> cols = rows_to_columns([(0, "train", "fc", "nc1", 0.5), (1, "train", "fc", "nc1", float("nan"))])
    >>> cols["names"], cols["metric"].tolist()
    (['train', 'fc', 'nc1'], [2, 2])
    >>> columns_to_rows(cols)[1][:4]
    (1, 'train', 'fc', 'nc1')
    """
    cols = _row_columns(rows)
    if cols is None:
        return rows
    epochs, split, layer, metric, values = cols
    names: dict[str, int] = {}

    def codes(column: tuple[str, ...]) -> torch.Tensor:
        return torch.tensor([names.setdefault(v, len(names)) for v in column], dtype=torch.int32)

    return {
        "epoch": torch.tensor([int(e) for e in epochs], dtype=torch.int64),
        "split": codes(split),
        "layer": codes(layer),
        "metric": codes(metric),
        "value": torch.tensor([float(v) for v in values], dtype=torch.float64),
        "names": list(names),
    }


def _row_columns(rows: Any) -> list[tuple[Any, ...]] | None:
    """The five columns of ``rows`` when every row is ``(int, str, str, str, real)``, else None. Checked per
    column on the set of types present (C-level ``map``: a Python check per row cost as much as the encoding)."""
    if not isinstance(rows, list | tuple):
        return None
    if not rows:
        return [()] * 5
    if not all(issubclass(t, tuple | list) for t in set(map(type, rows))) or set(map(len, rows)) != {5}:
        return None
    cols = list(zip(*rows, strict=True))
    ints, reals = (int, np.integer), (int, float, np.integer, np.floating)
    kinds = [set(map(type, c)) for c in cols]
    if any(t is bool for k in (kinds[0], kinds[4]) for t in k):
        return None
    if not all(issubclass(t, ints) for t in kinds[0]) or not all(issubclass(t, reals) for t in kinds[4]):
        return None
    if not all(issubclass(t, str) for k in kinds[1:4] for t in k):
        return None
    return cols


def columns_to_rows(cols: Any) -> Any:
    """The list of row tuples back from :func:`rows_to_columns` (anything but its dictionary, e.g. the list of a
    format-2 checkpoint, is returned as it is); ``ValueError`` when the columns do not fit together."""
    if not isinstance(cols, dict):
        return cols
    if set(cols) != {*COLUMNS, "names"}:
        raise ValueError(f"expected the columns {', '.join(COLUMNS)} and names")
    names = cols["names"]
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ValueError("names is not a list of strings")
    tensors = [cols[c] for c in COLUMNS]
    dtypes = (torch.int64, torch.int32, torch.int32, torch.int32, torch.float64)
    if not all(
        isinstance(t, torch.Tensor) and t.dtype == dt and t.ndim == 1 for t, dt in zip(tensors, dtypes, strict=True)
    ):
        raise ValueError("a column is not a 1-D tensor of its dtype")
    if len({t.shape[0] for t in tensors}) != 1:
        raise ValueError(f"columns of different lengths {[t.shape[0] for t in tensors]}")
    codes = torch.stack(tensors[1:4])
    if codes.numel() and (int(codes.min()) < 0 or int(codes.max()) >= len(names)):
        raise ValueError(f"a name code lies outside the {len(names)} names")
    epochs, values = tensors[0].tolist(), tensors[4].tolist()
    split, layer, metric = ([names[i] for i in t.tolist()] for t in tensors[1:4])
    return list(zip(epochs, split, layer, metric, values, strict=True))
