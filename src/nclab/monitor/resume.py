"""Progress of a resumable extraction, kept in its staging folder: :class:`ExtractionProgress`.

An extraction of an indexable dataset (a ``torch.utils.data.Dataset`` read in order, in batches of
``batch_size``) writes each layer's rows into ``OUT/.staging-<id>/LAYER.npy.part``
(:class:`nclab.io.npy_stream.PartialNpy`) and, every :data:`RESUME_EVERY_S` seconds and when it stops on an
error, records in ``RESUME.json`` (:data:`nclab.io.staged.RESUME_NAME`) how many rows every file holds, after
making them durable. A resumed extraction checks that it extracts the same thing (layers, samples, batch size,
file format, the model's weights and the dataset, by fingerprint), cuts each file back to the recorded rows (a
``kill -9`` may have left rows written after the record), re-hashes them for the manifest's checksums (reading the
rows back once), and goes on from the next sample. Because it restarts at a batch boundary with the same batch
size, every later batch holds the samples it would have held, and the files come out byte-identical to those of
an uninterrupted extraction.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from nclab.io.atomic import atomic_write_text
from nclab.io.staged import RESUME_NAME

__all__ = ["RESUME_EVERY_S", "ExtractionProgress", "dataset_fingerprint", "model_fingerprint"]

#: Seconds between two records of an extraction's progress: a ``kill -9`` loses at most this much work.
RESUME_EVERY_S = 30.0

_VERSION = 1


def model_fingerprint(model: nn.Module) -> str:
    """SHA-256 of the model's state dict (names, dtypes, shapes and values, in order)."""
    digest = hashlib.sha256()
    for name, tensor in model.state_dict().items():
        t = tensor.detach().cpu().contiguous()
        digest.update(f"{name}:{t.dtype}:{tuple(t.shape)};".encode())
        digest.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return digest.hexdigest()


def dataset_fingerprint(data: Any) -> str:
    """SHA-256 of what identifies an indexable dataset without reading its samples: its type, length, labels
    (``targets`` or ``y`` when it has them) and ``repr`` (an :class:`~nclab.data.ImageFiles`'s names its split,
    size and transform)."""
    digest = hashlib.sha256(f"{type(data).__name__}:{len(data)}:{data!r}".encode())
    labels = getattr(data, "targets", getattr(data, "y", None))
    if labels is not None:
        digest.update(np.ascontiguousarray(torch.as_tensor(labels).cpu().numpy()).tobytes())
    return digest.hexdigest()


class ExtractionProgress:
    """The ``RESUME.json`` of one extraction in ``stage`` (a staging folder): what it extracts (``identity``: the
    fields a resume must match) and how many rows its files hold.

    Parameters
    ----------
    stage : Path
        The staging folder.
    identity : dict
        ``layers``, ``num_samples``, ``batch_size``, ``format``, ``model``, ``data`` (fingerprints) and
        ``overwrite`` (whether the extraction may replace an earlier one in the output folder).
    """

    def __init__(self, stage: Path, identity: dict[str, Any]) -> None:
        self.stage, self.identity = Path(stage), dict(identity)
        self.rows = 0
        self.files: dict[str, int] = {}  # name -> columns (0 for 1-D), in the order the files were created
        self._last = time.monotonic()

    @property
    def path(self) -> Path:
        return self.stage / RESUME_NAME

    @classmethod
    def load(cls, stage: Path, identity: dict[str, Any]) -> ExtractionProgress:
        """The progress recorded in ``stage``, checked against ``identity`` (``overwrite`` is taken from the record).

        Raises
        ------
        ValueError
            The record is unreadable, or the extraction differs (naming what differs: a resume must extract the
            same layers of the same model on the same data in the same batches).
        """
        try:
            saved = json.loads((stage / RESUME_NAME).read_text())
            if saved.get("version") != _VERSION:
                raise ValueError(f"version {saved.get('version')!r}, not {_VERSION}")
            rows, files = int(saved["rows"]), {str(k): int(v) for k, v in saved["files"].items()}
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
            raise ValueError(
                f"cannot resume the extraction in {stage}: its {RESUME_NAME} cannot be read ({err})"
            ) from None
        what = {
            "model": "the model's weights differ from the ones it started with",
            "data": "the dataset differs from the one it started with (its size, labels or transform)",
        }
        for key, value in identity.items():
            if key != "overwrite" and saved.get(key) != value:
                differs = what.get(key, f"its {key} was {saved.get(key)!r}, now {value!r}")
                raise ValueError(
                    f"cannot resume the extraction in {stage}: {differs}; a resume must extract the same layers of "
                    "the same model on the same data with the same batch size. Extract with --overwrite "
                    "(overwrite=True) to start again"
                )
        out = cls(stage, {**identity, "overwrite": bool(saved.get("overwrite", False))})
        out.rows, out.files = rows, files
        return out

    def due(self) -> bool:
        """Whether :data:`RESUME_EVERY_S` has passed since the last record."""
        return time.monotonic() - self._last >= RESUME_EVERY_S

    def record(self, rows: int, files: dict[str, Any], sync: Sequence[Any]) -> None:
        """Make ``sync`` (the open files, each with ``sync()``) durable, then record ``rows`` complete rows in every
        file of ``files`` (``{name: columns}``) atomically."""
        for f in sync:
            f.sync()
        self.rows, self.files = int(rows), {str(k): int(v) for k, v in files.items()}
        state = {"version": _VERSION, **self.identity, "rows": self.rows, "files": self.files}
        atomic_write_text(self.path, json.dumps(state, indent=1) + "\n")
        self._last = time.monotonic()
