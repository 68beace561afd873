"""Run-directory files: atomic writes (write a sibling temp file, then ``os.replace``, so a reader or a killed
process never sees half a file) and the long-format metrics table.

``metrics.csv`` columns: ``epoch`` (int; 0 = before training), ``split`` (train | test), ``layer`` (a
measured layer, or ``output`` for network-level rows), ``metric`` (a name of ``nclab.metrics.REGISTRY`` or
``loss``, ``error``, ``running_loss``, ``running_error``, ``lr``), ``value`` (float, written with ``repr`` so
it reads back bit-identically; ``nan`` / ``inf`` as such). ``metrics.parquet`` holds the same table when
``pyarrow`` is installed.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import torch

__all__ = [
    "COLUMNS",
    "Row",
    "atomic_torch_save",
    "atomic_write_bytes",
    "atomic_write_text",
    "read_metrics",
    "write_metrics",
]

COLUMNS = ("epoch", "split", "layer", "metric", "value")
Row = tuple[int, str, str, str, float]


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    return path


def atomic_write_text(path: str | Path, text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_torch_save(obj: Any, path: str | Path) -> Path:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return atomic_write_bytes(path, buf.getvalue())


def metrics_csv_text(rows: Iterable[Row]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS)
    for e, s, lay, m, v in rows:
        w.writerow([int(e), s, lay, m, repr(float(v))])
    return buf.getvalue()


def parquet_available() -> bool:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


def write_metrics(rows: Sequence[Row], out: str | Path) -> list[Path]:
    """Write ``metrics.csv`` (and ``metrics.parquet`` when pyarrow is available) atomically into ``out``."""
    out = Path(out)
    written = [atomic_write_text(out / "metrics.csv", metrics_csv_text(rows))]
    if parquet_available():
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.table(
            {
                "epoch": pa.array([r[0] for r in rows], pa.int64()),
                "split": pa.array([r[1] for r in rows], pa.string()),
                "layer": pa.array([r[2] for r in rows], pa.string()),
                "metric": pa.array([r[3] for r in rows], pa.string()),
                "value": pa.array([float(r[4]) for r in rows], pa.float64()),
            }
        )
        buf = pa.BufferOutputStream()
        pq.write_table(table, buf)
        written.append(atomic_write_bytes(out / "metrics.parquet", buf.getvalue().to_pybytes()))
    return written


def read_metrics(path: str | Path) -> list[Row]:
    """Rows of a ``metrics.csv`` (or of a run directory holding one)."""
    path = Path(path)
    if path.is_dir():
        path = path / "metrics.csv"
    with open(path, newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        if tuple(header or ()) != COLUMNS:
            raise ValueError(f"{path}: expected the header {','.join(COLUMNS)}, got {header}")
        return [(int(e), s, lay, m, float(v)) for e, s, lay, m, v in reader]
