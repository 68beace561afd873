"""Files nclab writes and reads: atomic writes (one helper for every writer; :func:`atomic_write_files` for several
files that are one result, :mod:`nclab.io.staged` for a folder of them), checksums and the one error for a corrupt
file (:mod:`nclab.io.integrity`), feature / label / classifier arrays from .npy (memory-mapped), .npz, .pt and
.safetensors files, checked against their header and their folder's manifest (:mod:`nclab.io.manifest`), the
run-directory table, and the run directory itself: :class:`RunDir` (its files, kind, lock and rules) and
:func:`read_run`, the one reader of a run."""

from importlib import import_module
from typing import Any

#: Where each public name lives. The package imports none of its modules up front: ``import nclab.stats`` needs
#: only :mod:`nclab.io.atomic` and :mod:`nclab.io.integrity`, not the run directory, its lock and its tables.
_HOMES = {
    "arrays": ("ArrayRows", "iter_batches", "load_array", "split_key"),
    "atomic": (
        "AtomicFile",
        "atomic_save_npy",
        "atomic_torch_save",
        "atomic_write_bytes",
        "atomic_write_files",
        "atomic_write_text",
    ),
    "integrity": ("CorruptFileError", "arrays_sha256", "object_sha256"),
    "run_table": (
        "COLUMNS",
        "OUTPUT_LAYER",
        "RUN_ID_COLUMN",
        "MetricRow",
        "MetricTable",
        "read_metrics",
        "read_run_id",
        "relabel_output",
        "write_metrics",
    ),
    "rundir": ("RunDir", "RunIdentity", "RunRecord", "read_run", "read_run_metrics", "run_id_of"),
    "runlock": ("RunDirBusyError", "RunDirError", "RunLock"),
    "tables": ("column_names", "csv_text", "to_frame"),
}
_MODULE_OF = {name: module for module, names in _HOMES.items() for name in names}


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'nclab.io' has no attribute {name!r}")
    value = getattr(import_module(f"nclab.io.{module}"), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_MODULE_OF])


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
