"""The run-directory metrics table: one typed row per measured value, written as ``metrics.csv`` (and
``metrics.parquet`` when ``pyarrow`` is installed).

Long format, one :class:`MetricRow` ``(epoch, split, layer, metric, value)`` per value:

* ``epoch`` -- int, 0 = the initialisation (before training);
* ``split`` -- ``train`` or ``test``;
* ``layer`` -- a measured layer, or :data:`OUTPUT_LAYER` (``"output"``) for rows of the whole network (loss,
  error, learning rate, the MSE decomposition, the geodesic model's summary);
* ``metric`` -- a name of ``nclab.metrics.REGISTRY`` or a network-level name (``loss``, ``error``,
  ``running_loss``, ``running_error``, ``lr``, ...);
* ``value`` -- float, written with ``repr`` so it reads back bit-identically (``nan``, ``inf`` as such).

A run's table (the trainer's) also carries a leading :data:`RUN_ID_COLUMN` (``run_id``, the run's
``NAME-HASH`` of :func:`nclab.train.trainer.run_id`), the same on every row, so the tables of many runs stack
with ``pandas.concat([pandas.read_csv(d / "metrics.csv") for d in run_dirs])`` and stay told apart.
:func:`read_metrics` reads both layouts.

Both files are written as one result (:func:`nclab.io.atomic.atomic_write_files`): a reader, or a process
killed mid-write, sees the previous table or the new one, never half of one, and a failure while writing either
file (a full disk) leaves both as they were; without ``pyarrow`` a ``metrics.parquet`` of an earlier table is
removed, so that no stale copy stays beside the new ``metrics.csv``. Every row ends with a newline;
:func:`read_metrics` refuses a file that was cut anyway (copied in part, edited) with a
:class:`~nclab.io.integrity.CorruptFileError`.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from nclab.io.atomic import atomic_write_files, atomic_write_text
from nclab.io.integrity import CorruptFileError

__all__ = [
    "COLUMNS",
    "OUTPUT_LAYER",
    "RUN_ID_COLUMN",
    "MetricRow",
    "MetricTable",
    "read_metrics",
    "read_run_id",
    "relabel_output",
    "write_metrics",
]

#: Pseudo-layer of the rows that describe the whole network rather than one layer (loss, error, lr).
OUTPUT_LAYER = "output"


class MetricRow(NamedTuple):
    """One value of the metrics table: ``metric`` at ``layer`` on ``split`` after ``epoch`` epochs.

    Parameters
    ----------
    epoch : int
        Epochs trained when measured (0: at initialisation).
    split : str
        The data split, e.g. ``"train"`` or ``"test"``.
    layer : str
        The layer's name, or :data:`OUTPUT_LAYER` for network-level values (loss, error).
    metric : str
        The metric's name (a registered metric, ``"loss"``, ``"error"``).
    value : float
        The value.

    Examples
    --------
    >>> row = MetricRow(3, "train", OUTPUT_LAYER, "error", 0.25)
    >>> row.layer, row.value
    ('output', 0.25)
    >>> row._replace(layer="fc").layer
    'fc'
    """

    epoch: int
    split: str
    layer: str
    metric: str
    value: float


class MetricTable(list[MetricRow]):
    """A run's metric rows, in table order (a ``list`` of :class:`MetricRow`), with the run's ``run_id`` and
    ``penultimate`` layer when known: what :func:`nclab.read_metrics` returns.

    Parameters
    ----------
    rows : iterable of MetricRow, default ()
        The rows.
    run_id : str, optional
        The run's id.
    penultimate : str, optional
        The run's penultimate layer (what ``layer="penultimate"`` means in :meth:`series`).
    path : Path, optional
        The run directory it was read from.

    Examples
    --------
    >>> table = MetricTable(
    ...     [MetricRow(0, "train", "fc", "nc1", 2.0), MetricRow(5, "train", "fc", "nc1", 0.5)],
    ...     run_id="demo-0123456789",
    ...     penultimate="fc",
    ... )
    >>> table.series("nc1")
    {0: 2.0, 5: 0.5}
    >>> MetricTable(table, run_id="demo")
    MetricTable(2 rows, run_id='demo', epochs 0-5 (2 measured), splits ['train'], layers ['fc'], metrics: nc1)
    >>> table.to_frame().columns.tolist()
    ['run_id', 'epoch', 'split', 'layer', 'metric', 'value']
    """

    def __init__(
        self,
        rows: Iterable[MetricRow] = (),
        *,
        run_id: str | None = None,
        penultimate: str | None = None,
        path: Path | None = None,
    ) -> None:
        super().__init__(rows)
        self.run_id, self.penultimate, self.path = run_id, penultimate, path

    def __repr__(self) -> str:
        """One line: the rows, epochs, splits, layers and metrics the table holds (``list(table)`` shows the rows)."""
        if not self:
            return f"MetricTable(0 rows, run_id={self.run_id!r})"
        epochs = sorted({r.epoch for r in self})
        span = f"{epochs[0]}" if len(epochs) == 1 else f"{epochs[0]}-{epochs[-1]}"
        names = sorted({r.metric for r in self})
        shown = ", ".join(names[:6]) + (f", ... ({len(names)} in all)" if len(names) > 6 else "")
        return (
            f"MetricTable({len(self)} rows, run_id={self.run_id!r}, epochs {span} ({len(epochs)} measured), "
            f"splits {sorted({r.split for r in self})}, layers {sorted({r.layer for r in self})}, metrics: {shown})"
        )

    def series(self, metric: str, *, layer: str = "penultimate", split: str = "train") -> dict[int, float]:
        """``{epoch: value}`` of ``metric`` at ``layer`` (``"penultimate"``: the run's penultimate layer) on
        ``split``, in epoch order.

        Raises
        ------
        KeyError
            No such row: the message names the metrics there are at that layer and split (or the layers and
            splits, when there are none).
        """
        if layer == "penultimate" and self.penultimate is not None:
            layer = self.penultimate
        out = {r.epoch: r.value for r in self if (r.metric, r.layer, r.split) == (metric, layer, split)}
        if out:
            return dict(sorted(out.items()))
        there = sorted({r.metric for r in self if (r.layer, r.split) == (layer, split)})
        if there:
            raise KeyError(f"no {metric!r} at layer {layer!r} on {split!r}; measured there: {', '.join(there)}")
        layers, splits = sorted({r.layer for r in self}), sorted({r.split for r in self})
        raise KeyError(
            f"no rows at layer {layer!r} on {split!r}; layers: {', '.join(layers)}; splits: {', '.join(splits)}"
        )

    def to_frame(self) -> Any:
        """The rows as a ``pandas.DataFrame``: the columns of ``metrics.csv`` (``run_id`` first when known, so that
        the frames of many runs stack with ``pandas.concat``). pandas is optional: without it this raises
        ``ImportError`` naming it."""
        from nclab.io.tables import to_frame

        frame = to_frame([r._asdict() for r in self]) if self else _empty_frame()
        if self.run_id is not None:
            frame.insert(0, RUN_ID_COLUMN, self.run_id)
        return frame


def _empty_frame() -> Any:
    """An empty frame with the table's columns (pandas needs them named when there is no row)."""
    try:
        import pandas as pd
    except ImportError as exc:
        raise ImportError("to_frame needs pandas: pip install pandas") from exc
    return pd.DataFrame(columns=list(COLUMNS))


#: Column names of ``metrics.csv`` / ``metrics.parquet``, in order (the fields of :class:`MetricRow`).
COLUMNS: tuple[str, ...] = MetricRow._fields

#: The optional first column of a run's table: the run id, constant over the file.
RUN_ID_COLUMN = "run_id"

#: File names of the table in a run directory (:class:`nclab.io.rundir.RunDir` names them from here).
METRICS_NAME, PARQUET_NAME = "metrics.csv", "metrics.parquet"


def _csv_text(rows: Iterable[MetricRow], run_id: str | None) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    lead = [] if run_id is None else [run_id]
    w.writerow([RUN_ID_COLUMN, *COLUMNS] if lead else COLUMNS)
    for r in rows:
        w.writerow([*lead, int(r.epoch), r.split, r.layer, r.metric, repr(float(r.value))])
    return buf.getvalue()


def _parquet_bytes(rows: Sequence[MetricRow], run_id: str | None) -> bytes | None:
    """The table as parquet, or ``None`` without ``pyarrow`` (an optional dependency).

    The columns are built from their buffers (``pa.Array.from_buffers``) rather than with ``pa.array``: that
    entry point imports pandas when it is installed (~0.5 s, once per process, paid by the first checkpoint of a
    run), and the buffers are what it would build anyway."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        return None
    n = len(rows)
    columns = {} if run_id is None else {RUN_ID_COLUMN: _string_array(pa, [run_id] * n)}
    columns["epoch"] = _numeric_array(pa, np.fromiter((r.epoch for r in rows), np.int64, n), pa.int64())
    columns["split"] = _string_array(pa, [r.split for r in rows])
    columns["layer"] = _string_array(pa, [r.layer for r in rows])
    columns["metric"] = _string_array(pa, [r.metric for r in rows])
    columns["value"] = _numeric_array(pa, np.fromiter((r.value for r in rows), np.float64, n), pa.float64())
    table = pa.Table.from_arrays(list(columns.values()), names=list(columns))
    buf = pa.BufferOutputStream()
    pq.write_table(table, buf)
    data: bytes = buf.getvalue().to_pybytes()
    return data


def _numeric_array(pa: Any, values: np.ndarray, dtype: Any) -> Any:
    """A pyarrow array without nulls over the numpy ``values`` (zero-copy)."""
    return pa.Array.from_buffers(dtype, values.shape[0], [None, pa.py_buffer(values)])


def _string_array(pa: Any, values: list[str]) -> Any:
    """A pyarrow ``string`` array without nulls: UTF-8 bytes back to back, int32 offsets (``large_string``
    with int64 offsets past 2 GiB of text)."""
    encoded = [v.encode("utf-8") for v in values]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, encoded), np.int64, len(encoded)), out=offsets[1:])
    dtype = pa.string()
    if offsets[-1] < 2**31:
        offsets = offsets.astype(np.int32)
    else:
        dtype = pa.large_string()
    return pa.Array.from_buffers(dtype, len(encoded), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))])


def write_metrics(rows: Sequence[MetricRow], out: str | Path, run_id: str | None = None) -> list[Path]:
    """Write ``rows`` as ``out/metrics.csv`` (and ``out/metrics.parquet`` with pyarrow), atomically.

    Parameters
    ----------
    rows : sequence of MetricRow
        The whole table; each file is replaced, not appended to.
    out : str or Path
        The run directory (created with its parents when missing).
    run_id : str, optional
        When given, a leading :data:`RUN_ID_COLUMN` holding it on every row (what the trainer writes).

    Returns
    -------
    list of Path
        The files written, ``metrics.csv`` first.

    See Also
    --------
    read_metrics : the inverse (bit-identical values, ``nan`` and ``inf`` included).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "run"
    >>> rows = [MetricRow(0, "train", "fc", "nc1", 0.1), MetricRow(0, "train", OUTPUT_LAYER, "loss", float("nan"))]
    >>> write_metrics(rows, out)[0].name
    'metrics.csv'
    >>> read_metrics(out)[1].metric
    'loss'
    >>> _ = write_metrics(rows, out, run_id="demo-0123456789")
    >>> (out / "metrics.csv").read_text().splitlines()[1]
    'demo-0123456789,0,train,fc,nc1,0.1'
    >>> [r.metric for r in read_metrics(out)], read_run_id(out)
    (['nc1', 'loss'], 'demo-0123456789')
    """
    out = Path(out)
    if run_id is not None and (not run_id or any(c in run_id for c in ',"\n\r')):
        raise ValueError(f"run_id must be a non-empty string without commas, quotes or newlines, got {run_id!r}")
    csv_path, parquet_path = out / METRICS_NAME, out / PARQUET_NAME
    parquet = _parquet_bytes(rows, run_id)
    if parquet is None:
        # without pyarrow, a parquet copy of an earlier table would disagree with the new metrics.csv
        atomic_write_text(csv_path, _csv_text(rows, run_id))
        parquet_path.unlink(missing_ok=True)
        return [csv_path]
    # one result: both files written before either is renamed; the csv (the record) renamed last
    atomic_write_files({parquet_path: parquet, csv_path: _csv_text(rows, run_id).encode("utf-8")})
    return [csv_path, parquet_path]


def _table_path(path: str | Path) -> Path:
    path = Path(path)
    return path / METRICS_NAME if path.is_dir() else path


def _check_header(path: Path, header: list[str] | None) -> bool:
    """Whether the table has the leading run-id column; raises on any other header."""
    got = tuple(header or ())
    if got not in (COLUMNS, (RUN_ID_COLUMN, *COLUMNS)):
        raise CorruptFileError(
            path, f"expected the header {','.join(COLUMNS)} (optionally after {RUN_ID_COLUMN}), got {header}"
        )
    return got[0] == RUN_ID_COLUMN


def read_metrics(path: str | Path) -> list[MetricRow]:
    """The rows of a ``metrics.csv``, or of the one in the run directory ``path``, in file order.

    Every writer ends each row with a newline, so a file whose last line has none was cut (a copy interrupted,
    a disk full): it is refused rather than read with its last value silently shortened.

    Parameters
    ----------
    path : str or Path
        A ``metrics.csv``, or a run directory holding one.

    Returns
    -------
    list of MetricRow
        The rows; the ``run_id`` column, when present, is dropped (see :func:`read_run_id`).

    Raises
    ------
    CorruptFileError
        (a ``ValueError``) naming the file and the problem: empty, not UTF-8, a header other than
        :data:`COLUMNS` (optionally after :data:`RUN_ID_COLUMN`), a last line without its newline (truncated), a
        row with a missing or extra field, an epoch that is not an integer or a value that is not a number (with
        the line number).

    See Also
    --------
    write_metrics

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     _ = write_metrics([MetricRow(0, "train", "fc", "nc1", 0.5)], tmp, run_id="demo-0123456789")
    ...     read_metrics(tmp)
    [MetricRow(epoch=0, split='train', layer='fc', metric='nc1', value=0.5)]
    """
    path = _table_path(path)
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as err:
        raise CorruptFileError(path, f"not a UTF-8 text file ({err.reason} at byte {err.start})") from err
    if not text:
        raise CorruptFileError(path, "the metrics table is empty (0 bytes)")
    if not text.endswith("\n"):
        last = text.rsplit("\n", 1)[-1]
        raise CorruptFileError(path, f"truncated: the last line {last[:80]!r} has no final newline (the file was cut)")
    reader = csv.reader(io.StringIO(text, newline=""))
    skip = int(_check_header(path, next(reader, None)))
    width = len(COLUMNS) + skip
    rows = []
    for fields in reader:
        line = reader.line_num
        if len(fields) != width:
            raise CorruptFileError(path, f"line {line} has {len(fields)} fields, expected {width}: {fields}")
        e, s, lay, m, v = fields[skip:]
        try:
            epoch = int(e)
        except ValueError:
            raise CorruptFileError(path, f"line {line}: epoch {e!r} is not an integer") from None
        try:
            value = float(v)
        except ValueError:
            raise CorruptFileError(path, f"line {line}: value {v!r} is not a number") from None
        rows.append(MetricRow(epoch, s, lay, m, value))
    return rows


def read_run_id(path: str | Path) -> str | None:
    """The run id of a ``metrics.csv`` (or of the one in the run directory ``path``).

    Parameters
    ----------
    path : str or Path
        A ``metrics.csv``, or a run directory holding one.

    Returns
    -------
    str or None
        Its ``run_id`` column's value, or ``None`` for a table without one (or without rows).

    Raises
    ------
    CorruptFileError
        A header other than the table's.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     _ = write_metrics([MetricRow(0, "train", "fc", "nc1", 0.5)], tmp, run_id="demo-0123456789")
    ...     read_run_id(tmp)
    'demo-0123456789'
    """
    path = _table_path(path)
    with open(path, newline="") as fh:
        reader = csv.reader(fh)
        if not _check_header(path, next(reader, None)):
            return None
        first = next(reader, None)
        return None if first is None else first[0]


def relabel_output(rows: Iterable[MetricRow], layer: str) -> list[MetricRow]:
    """``rows`` with the network-level rows (layer :data:`OUTPUT_LAYER`) moved to ``layer``, so that the
    network's loss and error plot beside that layer's metrics.

    Parameters
    ----------
    rows : iterable of MetricRow
        The rows.
    layer : str
        The layer the network-level rows move to.

    Returns
    -------
    list of MetricRow
        A new list; rows at other layers unchanged.

    Examples
    --------
    >>> relabel_output([MetricRow(1, "test", OUTPUT_LAYER, "error", 0.5)], "fc")[0].layer
    'fc'
    """
    return [r._replace(layer=layer) if r.layer == OUTPUT_LAYER else r for r in rows]
