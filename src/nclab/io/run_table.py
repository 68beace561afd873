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

Both files are written atomically (:mod:`nclab.io.atomic`): a reader, or a process killed mid-write, sees the
previous table or the new one, never half of one.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

from nclab.io.atomic import atomic_write_bytes, atomic_write_text

__all__ = ["COLUMNS", "OUTPUT_LAYER", "MetricRow", "read_metrics", "relabel_output", "write_metrics"]

#: Pseudo-layer of the rows that describe the whole network rather than one layer (loss, error, lr).
OUTPUT_LAYER = "output"


class MetricRow(NamedTuple):
    """One value of the metrics table: ``metric`` at ``layer`` on ``split`` after ``epoch`` epochs.

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


#: Column names of ``metrics.csv`` / ``metrics.parquet``, in order (the fields of :class:`MetricRow`).
COLUMNS: tuple[str, ...] = MetricRow._fields


def _csv_text(rows: Iterable[MetricRow]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS)
    for r in rows:
        w.writerow([int(r.epoch), r.split, r.layer, r.metric, repr(float(r.value))])
    return buf.getvalue()


def _parquet_bytes(rows: Sequence[MetricRow]) -> bytes | None:
    """The table as parquet, or ``None`` without ``pyarrow`` (an optional dependency)."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        return None
    table = pa.table(
        {
            "epoch": pa.array([r.epoch for r in rows], pa.int64()),
            "split": pa.array([r.split for r in rows], pa.string()),
            "layer": pa.array([r.layer for r in rows], pa.string()),
            "metric": pa.array([r.metric for r in rows], pa.string()),
            "value": pa.array([float(r.value) for r in rows], pa.float64()),
        }
    )
    buf = pa.BufferOutputStream()
    pq.write_table(table, buf)
    return buf.getvalue().to_pybytes()


def write_metrics(rows: Sequence[MetricRow], out: str | Path) -> list[Path]:
    """Write ``rows`` as ``out/metrics.csv`` (and ``out/metrics.parquet`` with pyarrow), atomically.

    Parameters
    ----------
    rows : sequence of MetricRow
        The whole table; each file is replaced, not appended to.
    out : str or Path
        The run directory (created with its parents when missing).

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
    """
    out = Path(out)
    written = [atomic_write_text(out / "metrics.csv", _csv_text(rows))]
    parquet = _parquet_bytes(rows)
    if parquet is not None:
        written.append(atomic_write_bytes(out / "metrics.parquet", parquet))
    return written


def read_metrics(path: str | Path) -> list[MetricRow]:
    """The rows of a ``metrics.csv``, or of the one in the run directory ``path``, in file order.

    Raises
    ------
    ValueError
        When the file's header is not :data:`COLUMNS`.

    See Also
    --------
    write_metrics
    """
    path = Path(path)
    if path.is_dir():
        path = path / "metrics.csv"
    with open(path, newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        if tuple(header or ()) != COLUMNS:
            raise ValueError(f"{path}: expected the header {','.join(COLUMNS)}, got {header}")
        return [MetricRow(int(e), s, lay, m, float(v)) for e, s, lay, m, v in reader]


def relabel_output(rows: Iterable[MetricRow], layer: str) -> list[MetricRow]:
    """``rows`` with the network-level rows (layer :data:`OUTPUT_LAYER`) moved to ``layer``, so that the
    network's loss and error plot beside that layer's metrics.

    Examples
    --------
    >>> relabel_output([MetricRow(1, "test", OUTPUT_LAYER, "error", 0.5)], "fc")[0].layer
    'fc'
    """
    return [r._replace(layer=layer) if r.layer == OUTPUT_LAYER else r for r in rows]
