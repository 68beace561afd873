"""The manifest of a feature folder (``manifest.json``, written last by :func:`nclab.monitor.extract_features`) and
the checks a reader of the folder's files makes against it.

Format 2 is a JSON object with ``"format": "nclab-features"``, ``"version": 2``, the extraction's ``"id"``, its
description (``layers``: ``{layer: shape}``, ``num_samples``, ``num_classes``, ``penultimate``, ``classifier``)
and ``"files"``: one entry per file of the extraction ::

    "penultimate.npy": {"bytes": 2816, "data_offset": 256, "sha256": "9f2c...",
                        "arrays": {"penultimate": {"dtype": "float32", "shape": [70, 6], "rows": 70}}}

``bytes`` is the file's size, ``sha256`` the SHA-256 of its bytes from ``data_offset`` on (the data after the
header: ``tail -c +257 penultimate.npy | sha256sum``), computed while the rows were written; a ``.safetensors``
file lists each of its tensors under ``arrays``. Format 1 (nclab before the staged extraction) had the description
only; its layer shapes and ``num_samples`` are still checked.

Checks (cheap ones always, the checksum on request):

* :func:`check_listed` -- a file the manifest lists must have the size, dtype and shape it records (a truncated
  or appended-to file, or one left by an earlier extraction, is refused), and no commit may be under way in the
  folder (:func:`nclab.io.staged.interrupted_commit`). :func:`nclab.io.arrays.load_array` calls it for every
  file it opens, at the cost of reading the header and one small JSON file.
* :func:`check_same_extraction` -- files of one folder measured together must all be listed, or none: a layer
  file the manifest does not list beside labels it does list is from another extraction.
* :func:`verify_checksum` -- reads the file's data once and compares its SHA-256 (``nclab measure
  --verify-checksum``): a second read of a multi-GB file, so not done by default.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from nclab.io.integrity import CorruptFileError
from nclab.io.staged import interrupted_commit

__all__ = [
    "FORMAT",
    "MANIFEST_NAME",
    "VERSION",
    "check_listed",
    "check_same_extraction",
    "file_entry",
    "listed_files",
    "read_manifest",
    "verify_checksum",
]

MANIFEST_NAME = "manifest.json"
FORMAT = "nclab-features"
VERSION = 2


def file_entry(
    path: str | Path, arrays: Mapping[str, tuple[Any, tuple[int, ...]]], *, data_offset: int, sha256: str
) -> dict[str, Any]:
    """The manifest entry of the written file ``path``: its size, ``data_offset``, the ``sha256`` of its data and
    ``arrays`` (``{name: (dtype, shape)}``).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "y.npy"
    >>> np.save(p, np.arange(3))
    >>> file_entry(p, {"y": (np.int64, (3,))}, data_offset=128, sha256="00")["arrays"]
    {'y': {'dtype': 'int64', 'shape': [3], 'rows': 3}}
    """
    return {
        "bytes": Path(path).stat().st_size,
        "data_offset": int(data_offset),
        "sha256": sha256,
        "arrays": {
            name: {"dtype": str(np.dtype(dt)), "shape": [int(n) for n in shape], "rows": int(shape[0]) if shape else 1}
            for name, (dt, shape) in arrays.items()
        },
    }


def read_manifest(folder: str | Path) -> dict[str, Any] | None:
    """The nclab manifest of ``folder`` (format 1 or 2), or ``None`` when there is none (a ``manifest.json`` that
    another program wrote is not nclab's and is ignored).

    Raises
    ------
    CorruptFileError
        An nclab manifest that cannot be read.
    """
    path = Path(folder) / MANIFEST_NAME
    try:
        text = path.read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None
    except (OSError, UnicodeDecodeError) as err:
        raise CorruptFileError(path, f"cannot be read ({err})") from None
    try:
        manifest = json.loads(text)
    except ValueError:
        if FORMAT in text or '"num_samples"' in text:
            raise CorruptFileError(path, "is not valid JSON (edited, or cut)") from None
        return None
    if not isinstance(manifest, dict):
        return None
    if manifest.get("format") == FORMAT or {"layers", "num_samples"} <= manifest.keys():
        return manifest
    return None


def _format1_files(folder: Path, manifest: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    # format 1 recorded the layer shapes and the sample count only (float32 layers, int64 labels)
    layers = manifest.get("layers") or {}
    arrays = {n: {"dtype": "float32", "shape": list(s)} for n, s in layers.items()}
    arrays["labels"] = {"dtype": "int64", "shape": [manifest.get("num_samples")]}
    if (folder / "features.safetensors").exists() and not (folder / "labels.npy").exists():
        return {"features.safetensors": {"arrays": arrays}}
    return {f"{n}.npy": {"arrays": {n: a}} for n, a in arrays.items()}


def listed_files(folder: str | Path, manifest: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """``{file name: entry}`` of every file ``manifest`` (of ``folder``) describes; for format 1 the entries hold
    ``arrays`` only."""
    if manifest.get("format") == FORMAT:
        files = manifest.get("files")
        return dict(files) if isinstance(files, Mapping) else {}
    return _format1_files(Path(folder), manifest)


def check_listed(path: str | Path, key: str | None, dtype: Any, shape: tuple[int, ...], nbytes: int) -> None:
    """Refuse the array ``key`` (``None`` for a ``.npy``) of ``path`` (``nbytes`` long; ``dtype`` and ``shape``
    as its header says) when its folder's manifest lists it with another size, dtype or shape, or when a commit is
    under way in its folder. Files the manifest does not list, and folders without one, pass.

    Raises
    ------
    CorruptFileError
        Naming the file, what it holds and what the manifest records.
    """
    path = Path(path)
    folder = path.parent
    pending = interrupted_commit(folder)
    if pending is not None:
        raise CorruptFileError(
            path,
            f"its folder is in the middle of replacing one extraction by another ({pending} exists: the writer is "
            "moving its files in, or was killed doing so), so its files may be a mix of both; wait for the writer, "
            f"or run `nclab extract` into {folder} again, which finishes the interrupted commit first",
        )
    manifest = read_manifest(folder)
    if manifest is None:
        return
    entry = listed_files(folder, manifest).get(path.name)
    if entry is None:
        return
    where = folder / MANIFEST_NAME
    recorded = entry.get("bytes")
    if recorded is not None and recorded != nbytes:
        raise CorruptFileError(
            path,
            f"holds {nbytes} bytes but {where} records {recorded}: it was cut, appended to or replaced after the "
            "extraction",
        )
    arrays = entry.get("arrays") or {}
    info = arrays.get(key) if key is not None else (next(iter(arrays.values())) if len(arrays) == 1 else None)
    if info is None:
        return
    want_shape = tuple(info.get("shape") or ())
    want_dtype = np.dtype(info["dtype"]) if info.get("dtype") else None
    if None not in want_shape and want_shape != tuple(shape):
        raise CorruptFileError(
            path,
            f"holds an array of shape {tuple(shape)} but {where} records {want_shape}: it is not the file that "
            "extraction wrote (cut by a failed write, or left by another extraction)",
        )
    if want_dtype is not None and want_dtype != np.dtype(dtype):
        raise CorruptFileError(path, f"holds {np.dtype(dtype)} data but {where} records {want_dtype}")


def check_same_extraction(paths: Iterable[str | Path | None]) -> None:
    """Refuse files of one folder with a manifest of which some are listed and others not: a ``layer1.npy`` left
    by an earlier extraction beside the ``labels.npy`` of a later one would otherwise be measured against labels
    of other samples. ``None`` entries (options not given) are skipped.

    Raises
    ------
    ValueError
        Naming the unlisted files, the manifest and what it lists.
    """
    by_folder: dict[Path, list[Path]] = {}
    for p in paths:
        if p is not None:
            p = Path(p)
            by_folder.setdefault(p.parent, []).append(p)
    for folder, group in by_folder.items():
        manifest = read_manifest(folder)
        if manifest is None:
            continue
        listed = listed_files(folder, manifest)
        outside = [p for p in group if p.name not in listed]
        if outside and len(outside) < len(group):
            inside = [p.name for p in group if p.name in listed]
            raise ValueError(
                f"{', '.join(map(str, outside))} {'is' if len(outside) == 1 else 'are'} not part of the extraction "
                f"that {', '.join(inside)} belong to ({folder / MANIFEST_NAME} lists {', '.join(sorted(listed))}): "
                "probably left by an earlier extraction into that folder, so its rows are other samples. Measure "
                "files of one extraction together (extract the layer again, or move the stray file out)"
            )


def verify_checksum(path: str | Path, chunk_mb: float = 16.0) -> bool:
    """Read the data of ``path`` once and compare its SHA-256 with the one its folder's manifest records. Returns
    ``False`` when there is nothing to compare with (no manifest, the file not listed, format 1), ``True`` when it
    matches.

    Raises
    ------
    CorruptFileError
        When it differs (the file changed after the extraction: a flipped bit, an edit, a copy from elsewhere).
    """
    path = Path(path)
    manifest = read_manifest(path.parent)
    entry = None if manifest is None else listed_files(path.parent, manifest).get(path.name)
    if not entry or not isinstance(entry.get("sha256"), str) or "data_offset" not in entry:
        return False
    h = hashlib.sha256()
    step = max(1, int(chunk_mb * 2**20))
    with open(path, "rb") as fh:
        fh.seek(int(entry["data_offset"]))
        while chunk := fh.read(step):
            h.update(chunk)
    if h.hexdigest() != entry["sha256"]:
        raise CorruptFileError(
            path,
            f"checksum mismatch: the SHA-256 of its data is {h.hexdigest()[:16]}..., {path.parent / MANIFEST_NAME} "
            f"records {entry['sha256'][:16]}...: the file changed after the extraction (a flipped bit, an edit, "
            "a copy from another extraction)",
        )
    return True
