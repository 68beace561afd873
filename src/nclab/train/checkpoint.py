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

The trainer writes its per-epoch checkpoint off the training thread: :func:`snapshot_state` copies the model's
and the optimiser's state (so training can go on updating them), and a :class:`CheckpointWriter` seals and writes
the copy on one background thread, in order, one checkpoint at a time. The file is the one a synchronous write
gives, byte for byte; a kill during the write leaves the previous checkpoint (the write is atomic).
"""

from __future__ import annotations

import copy
import io
import pickle
import threading
import zipfile
from collections.abc import Callable
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
    "CheckpointWriter",
    "checkpoint_bytes",
    "columns_to_rows",
    "load_checkpoint",
    "rows_to_columns",
    "snapshot_state",
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


def snapshot_state(state: Any) -> Any:
    """A copy of a state dict (nested dicts and lists of tensors and plain values: a model's or an optimiser's
    ``state_dict()``) that later in-place updates of the model or the optimiser do not reach: every tensor cloned
    on its own device, tensors that share a storage (views, tied weights) still sharing one copy, and each
    dictionary's attributes (a module state dict's ``_metadata``) kept -- so ``torch.save`` and the checksum see
    exactly what they would have seen in the original (``copy.deepcopy``, whose tensors copy their storage once
    per call).

    Examples
    --------
    >>> w = torch.zeros(4)
    >>> snap = snapshot_state({"w": w, "head": w[:2], "lr": 0.1})
    >>> _ = w.add_(1.0)  # training goes on
    >>> snap["w"].tolist(), snap["head"].untyped_storage().data_ptr() == snap["w"].untyped_storage().data_ptr()
    ([0.0, 0.0, 0.0, 0.0], True)
    """
    return copy.deepcopy(state)


class CheckpointWriter:
    """Runs write jobs (a checkpoint and its metric table, a log line) on one background thread, in the order
    they were submitted.

    The owner (the trainer) calls :meth:`wait` before it submits the next checkpoint, so at most one is in
    flight and they land in order; :meth:`raise_error` re-raises a failed job's exception on the owner's thread
    (the trainer checks at every epoch), :meth:`wait` and :meth:`close` do too, so a failed write is never lost.
    After a failure the jobs already queued are dropped (what follows a lost checkpoint must not reach the
    disk before it: a log line saying the epoch ended, a metric table ahead of its checkpoint), and so are the
    jobs submitted later. :meth:`close` runs what is queued and ends the thread. The thread is not a daemon: a
    process that exits with a write in flight finishes it first.

    Examples
    --------
    >>> done = []
    >>> writer = CheckpointWriter()
    >>> writer.submit(lambda: done.append(1))
    >>> writer.submit(lambda: done.append(2))
    >>> writer.wait()
    >>> done
    [1, 2]
    >>> writer.submit(lambda: 1 / 0)
    >>> try:
    ...     writer.close()
    ... except ZeroDivisionError as err:
    ...     print(err.__notes__[0])
    raised by the background checkpoint writer (the files written before are intact)
    """

    def __init__(self, name: str = "nclab-checkpoint-writer") -> None:
        self._cond = threading.Condition()
        self._jobs: list[Callable[[], None]] = []
        self._pending = 0  # submitted and not yet finished (queued or running)
        self._error: BaseException | None = None
        self._failed = False
        self._closing = False
        self._thread = threading.Thread(target=self._work, name=name, daemon=False)
        self._thread.start()

    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._jobs and not self._closing:
                    self._cond.wait()
                if not self._jobs:  # closing, nothing left
                    return
                job = self._jobs.pop(0)
                skip = self._failed
            try:
                if not skip:
                    job()
            except BaseException as err:  # re-raised on the owner's thread
                err.add_note("raised by the background checkpoint writer (the files written before are intact)")
                with self._cond:
                    self._error, self._failed = err, True
            finally:
                with self._cond:
                    self._pending -= 1
                    self._cond.notify_all()

    def submit(self, job: Callable[[], None]) -> None:
        """Queue ``job`` (a callable without arguments) behind the jobs already submitted."""
        with self._cond:
            if self._closing:
                raise RuntimeError("the checkpoint writer is closed")
            self._jobs.append(job)
            self._pending += 1
            self._cond.notify_all()

    def raise_error(self) -> None:
        """Re-raise the exception of a job that failed (once), without waiting for the jobs in flight."""
        with self._cond:
            err, self._error = self._error, None
        if err is not None:
            raise err

    def wait(self) -> None:
        """Wait until every job submitted so far has finished; then :meth:`raise_error`."""
        with self._cond:
            while self._pending:
                self._cond.wait()
        self.raise_error()

    def close(self) -> None:
        """Finish the queued jobs, end the thread (idempotent); then :meth:`raise_error`."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._thread.join()
        self.raise_error()
