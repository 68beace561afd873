"""Files nclab writes and reads: atomic writes (one helper for every writer; :func:`atomic_write_files` for several
files that are one result, :mod:`nclab.io.staged` for a folder of them), checksums and the one error for a corrupt
file (:mod:`nclab.io.integrity`), feature / label / classifier arrays from .npy (memory-mapped), .npz, .pt and
.safetensors files, checked against their header and their folder's manifest (:mod:`nclab.io.manifest`), the
run-directory table, and the run directory itself: :class:`RunDir` (its files, kind, lock and rules) and
:func:`read_run`, the one reader of a run."""

from nclab.io.arrays import ArrayRows, iter_batches, load_array, split_key
from nclab.io.atomic import (
    AtomicFile,
    atomic_save_npy,
    atomic_torch_save,
    atomic_write_bytes,
    atomic_write_files,
    atomic_write_text,
)
from nclab.io.integrity import CorruptFileError, arrays_sha256, object_sha256
from nclab.io.run_table import (
    COLUMNS,
    OUTPUT_LAYER,
    RUN_ID_COLUMN,
    MetricRow,
    MetricTable,
    read_metrics,
    read_run_id,
    relabel_output,
    write_metrics,
)
from nclab.io.rundir import RunDir, RunIdentity, RunRecord, read_run, read_run_metrics, run_id_of
from nclab.io.runlock import RunDirBusyError, RunDirError, RunLock
from nclab.io.tables import column_names, csv_text, to_frame

__all__ = [
    "COLUMNS",
    "OUTPUT_LAYER",
    "RUN_ID_COLUMN",
    "ArrayRows",
    "AtomicFile",
    "CorruptFileError",
    "MetricRow",
    "MetricTable",
    "RunDir",
    "RunDirBusyError",
    "RunDirError",
    "RunIdentity",
    "RunLock",
    "RunRecord",
    "arrays_sha256",
    "atomic_save_npy",
    "atomic_torch_save",
    "atomic_write_bytes",
    "atomic_write_files",
    "atomic_write_text",
    "column_names",
    "csv_text",
    "iter_batches",
    "load_array",
    "object_sha256",
    "read_metrics",
    "read_run",
    "read_run_id",
    "read_run_metrics",
    "relabel_output",
    "run_id_of",
    "split_key",
    "to_frame",
    "write_metrics",
]
