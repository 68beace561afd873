"""Features of a model streamed to disk for ``nclab measure``: :func:`extract_features`.

An extraction is one result of several files (one per layer, the labels, the classifier, ``manifest.json``), and it
is committed all-or-nothing. Its files are written into a staging folder ``OUT/.staging-<id>/``
(:class:`nclab.io.staged.StagedFolder`) and moved into ``OUT`` by rename only when all of them are complete, the
manifest last; a failure (a full disk, a loader that raises, Ctrl-C) removes the staging folder, so ``OUT`` keeps
the earlier extraction untouched, or nothing. A ``kill -9`` leaves the staging folder behind: the next extraction
into ``OUT`` removes it (or finishes its commit, when the kill came while the files were being moved) and says
so in a warning. ``OUT`` is locked while it is written (``OUT/run.lock``, :meth:`nclab.io.rundir.RunDir.lock`).

**Resume.** An extraction of an indexable dataset (a ``torch.utils.data.Dataset``: an
:class:`~nclab.data.ImageFiles` of a streamed image dataset, an :class:`~nclab.data.ArrayDataset`) is read in order
through a ``DataLoader`` (``batch_size``, ``workers``) and is resumable: its staging folder keeps its progress
(:mod:`nclab.monitor.resume`), an error or a kill leaves that folder in place, and ``resume=True`` (``nclab extract
... --resume``) continues it into files byte-identical to an uninterrupted extraction's. Data given as an iterable
of batches (a generator may be one pass only) is not resumable: a killed extraction of it is started again.

An earlier extraction in ``OUT`` is never replaced by accident: without ``overwrite=True`` (``--overwrite``) the
call is refused before the first forward pass. Why refuse rather than replace: an extraction can take hours and
the folder is often the only copy, and a second extraction into the same folder (another split, other layers) is
more often a slip than an intent. With ``overwrite=True`` the earlier extraction is replaced as a whole: every
file its manifest lists goes, so no layer file of it stays beside the new labels; files it did not write stay.

The manifest (:mod:`nclab.io.manifest`) records each file's size, the dtype and shape of its arrays and the
SHA-256 of its data, computed while the rows were written; :func:`nclab.io.arrays.load_array` refuses a file that
disagrees with it.
"""

from __future__ import annotations

import errno
import hashlib
import io
import json
import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from nclab.io import CorruptFileError, manifest, staged
from nclab.io.atomic import atomic_save_npy, atomic_write_text
from nclab.io.npy_stream import PartialNpy, write_safetensors
from nclab.io.rundir import RunDir
from nclab.measure import Batch, PassSink, forward_pass
from nclab.monitor.monitor import PENULTIMATE, CollapseMonitor
from nclab.monitor.resume import ExtractionProgress, dataset_fingerprint, model_fingerprint

__all__ = ["extract_features"]


class _Writer(PassSink):
    """Each layer's batch appended to ``out/LAYER.npy`` (float32), the labels once per batch to ``labels.npy``,
    through part files (:class:`~nclab.io.npy_stream.PartialNpy`); :meth:`close` finishes the files (inside the
    staging folder), :meth:`abort` discards or keeps them. ``progress``: a resumable extraction's record, reopened
    at its rows and updated after batches (:meth:`after_batch`)."""

    def __init__(self, out: Path, first: str, progress: ExtractionProgress | None = None) -> None:
        self.out, self.first, self.progress = out, first, progress
        rows = 0 if progress is None else progress.rows
        self.files: dict[str, PartialNpy] = {}
        if progress is not None and rows:
            for name, columns in progress.files.items():
                if name != "labels":
                    self.files[name] = PartialNpy(out / f"{name}.npy", np.float32, rows=rows, columns=columns)
        self.labels = PartialNpy(out / "labels.npy", np.int64, rows=rows, columns=0 if rows else None)

    @property
    def rows(self) -> int:
        """Rows every file holds (complete batches)."""
        return min([self.labels.rows, *(w.rows for w in self.files.values())])

    def __call__(self, name: str, f: torch.Tensor, batch: Batch) -> None:
        w = self.files.get(name)
        if w is None:
            w = self.files[name] = PartialNpy(self.out / f"{name}.npy", np.float32)
        w.append(f.detach().to("cpu", torch.float32).numpy())
        if name == self.first:  # one label row per feature row, written with the first layer's rows
            self.labels.append(batch.labels.detach().cpu().numpy())

    def after_batch(self, out: Any, batch: Batch) -> None:
        if self.progress is not None and self.progress.due():
            self.record()

    def record(self) -> None:
        """Record the progress (the files made durable first)."""
        assert self.progress is not None
        every = {**self.files, "labels": self.labels}
        self.progress.record(self.rows, {n: w.columns or 0 for n, w in every.items()}, list(every.values()))

    def close(self) -> dict[str, Path]:
        paths = {n: w.close() for n, w in self.files.items()}
        paths["labels"] = self.labels.close()
        return paths

    def abort(self, *, keep: bool = False) -> None:
        for w in [*self.files.values(), self.labels]:
            w.abort(keep=keep)

    def entries(self) -> dict[str, dict[str, Any]]:
        """The manifest entry of each closed file, with the checksum computed as its rows were written."""
        ws = {**self.files, "labels": self.labels}
        return {
            w.path.name: manifest.file_entry(
                w.path, {n: (w.dtype, w.shape)}, data_offset=w.data_offset, sha256=w.sha256
            )
            for n, w in ws.items()
        }


def _npy_entry(path: Path, name: str) -> dict[str, Any]:
    # the classifier's files are small: their checksum is read back rather than streamed
    raw = path.read_bytes()
    fh = io.BytesIO(raw)
    version = np.lib.format.read_magic(fh)
    read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    shape, _, dtype = read(fh)
    offset = fh.tell()
    return manifest.file_entry(
        path, {name: (dtype, shape)}, data_offset=offset, sha256=hashlib.sha256(raw[offset:]).hexdigest()
    )


def _new_names(plan: Any, format: str) -> set[str]:
    if format == "safetensors":
        return {"features.safetensors", manifest.MANIFEST_NAME}
    names = {f"{n}.npy" for n in plan.layers} | {"labels.npy", manifest.MANIFEST_NAME}
    return names | ({"W.npy", "b.npy"} if plan.W is not None else set())


def _earlier_extraction(out: Path, names: set[str], overwrite: bool) -> list[str]:
    """The files of an earlier extraction in ``out`` (what a commit removes); refused without ``overwrite``."""
    try:
        earlier = manifest.read_manifest(out)
        listed = set() if earlier is None else set(manifest.listed_files(out, earlier))
    except CorruptFileError:
        earlier, listed = {}, set()
    if earlier is not None:
        # format 1 did not list the classifier's files, nor itself
        listed |= {manifest.MANIFEST_NAME} | ({"W.npy", "b.npy"} if "files" not in earlier else set())
    present = sorted(n for n in listed | names if (out / n).is_file())
    if present and not overwrite:
        if earlier:
            what = f"layers {', '.join(earlier.get('layers') or {}) or '?'}, {earlier.get('num_samples', '?')} samples"
        else:
            what = "without a readable manifest.json"
        raise FileExistsError(
            f"{out} already holds an extraction ({what}; files {', '.join(present)}): pass overwrite=True "
            "(--overwrite) to replace it as a whole, or extract into another folder; nothing was changed"
        )
    return sorted(listed)


def _old_temporaries(out: Path) -> list[str]:
    """Remove the hidden temporary files of extractions killed before the staging folder existed (nclab < the
    staged commit wrote ``.LAYER.npy.<random>.tmp`` beside the results); ``out`` is locked, so none is being written."""
    found = [p for pat in (".*.npy.*.tmp", ".*.safetensors.*.tmp", ".manifest.json.*.tmp") for p in out.glob(pat)]
    if not found:
        return []
    size = sum(p.stat().st_size for p in found if p.is_file())
    for p in found:
        p.unlink(missing_ok=True)
    return [f"removed {len(found)} temporary files ({size / 2**20:.1f} MB) left by an extraction that was killed"]


def _no_room(err: BaseException, out: Path, written: int) -> OSError | None:
    """A full disk (or quota, or file-size limit) while staging, said in words (same errno); ``None`` for other
    errors."""
    if not isinstance(err, OSError) or err.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return None
    where = f" writing {Path(err.filename).name}" if err.filename else ""
    size = f"{written / 2**20:.1f} MB" if written >= 2**20 else f"{written / 2**10:.1f} kB"
    full = OSError(
        f"the extraction into {out} ran out of room ({os.strerror(err.errno)}{where}) after writing {size}: "
        f"nothing was committed, so {out} holds what it held before, and the partial files were removed; free some "
        "space (or raise the limit) and extract again"
    )
    full.errno = err.errno  # one argument keeps the message free of "[Errno N]"; callers may still test errno
    return full


class _OnePass:
    """An iterator of batches, read as it comes: :meth:`CollapseMonitor.batches` keeps a one-shot iterator's
    batches in a list for its two passes, but an extraction makes one pass, so its memory stays one batch."""

    def __init__(self, data: Any) -> None:
        self.data = data

    def __iter__(self) -> Any:
        return iter(self.data)


@dataclass
class _Indexed:
    """An indexable dataset read in order: ``DataLoader(Subset(data, range(start, N)), batch_size, workers)``."""

    data: Any
    batch_size: int
    workers: int
    progress: ExtractionProgress
    #: set when the forward pass stopped with rows to keep: the part files and the record stay for a resume
    kept: bool = False

    def loader(self, start: int, pin: bool) -> Any:
        from torch.utils.data import DataLoader, Subset

        part = Subset(self.data, range(start, len(self.data)))
        return DataLoader(part, batch_size=self.batch_size, shuffle=False, num_workers=self.workers, pin_memory=pin)


def _stage_features(
    stage: Path, model: nn.Module, monitor: CollapseMonitor, plan: Any, data: Any, job: _Indexed | None
) -> _Writer:
    sink = _Writer(stage, next(iter(plan.layers)), None if job is None else job.progress)
    modes = {m: m.training for m in model.modules()}
    if job is not None:
        start = sink.rows
        data = job.loader(start, pin=monitor.device.type == "cuda") if start < len(job.data) else None
    elif hasattr(data, "__next__"):
        data = _OnePass(data)
    try:
        if data is not None:
            forward_pass(model, monitor.batches(data), plan, sink)
        sink.close()  # commits into the staging folder only: a failure above never reaches it
    except BaseException:
        kept = job is not None and sink.rows > 0
        if job is not None and kept:  # what was extracted so far stays for a resume: recorded at the last batch
            sink.record()
            job.kept = True
        sink.abort(keep=kept)
        raise
    finally:
        for m, was in modes.items():
            m.train(was)
    return sink


def _stage_extraction(
    stage: staged.StagedFolder,
    model: nn.Module,
    monitor: CollapseMonitor,
    plan: Any,
    data: Any,
    format: str,
    job: _Indexed | None,
) -> list[str]:
    """Every file of the extraction, written into ``stage`` (manifest last); returns the array names."""
    sink = _stage_features(stage.path, model, monitor, plan, data, job)
    files = sink.entries()
    names = [*sink.files, "labels"]
    description: dict[str, Any] = {
        "layers": {n: list(w.shape) for n, w in sink.files.items()},
        "num_samples": sink.labels.rows,
        "num_classes": monitor.K,
        "penultimate": monitor.penultimate,
        "classifier": None if monitor.classifier is None else monitor.classifier.name,
    }
    for name, value in (("W", plan.W), ("b", plan.b)):
        if value is not None and (name == "W" or plan.W is not None):
            files[f"{name}.npy"] = _npy_entry(atomic_save_npy(stage.path / f"{name}.npy", value), name)
            names.append(name)
    head = {"format": manifest.FORMAT, "version": manifest.VERSION, "id": stage.id}
    if format == "safetensors":
        npy = [stage.path / f"{n}.npy" for n in names]
        arrays = {n: np.load(p, mmap_mode="r") for n, p in zip(names, npy, strict=True)}
        digest = hashlib.sha256()
        meta = {"nclab": json.dumps(head | description)}
        target = write_safetensors(stage.path / "features.safetensors", arrays, metadata=meta, digest=digest)
        shapes = {n: (a.dtype, a.shape) for n, a in arrays.items()}
        del arrays  # the memory maps, before their files go
        for p in npy:
            p.unlink()
        with open(target, "rb") as fh:
            offset = 8 + int.from_bytes(fh.read(8), "little")
        files = {target.name: manifest.file_entry(target, shapes, data_offset=offset, sha256=digest.hexdigest())}
    text = json.dumps(head | description | {"files": files}, indent=2) + "\n"
    atomic_write_text(stage.path / manifest.MANIFEST_NAME, text)
    return names


def _indexable(data: Any) -> bool:
    """A dataset read by index (resumable), not an iterable of batches."""
    from torch.utils.data import Dataset, IterableDataset

    return isinstance(data, Dataset) and not isinstance(data, IterableDataset) and hasattr(data, "__len__")


def _interrupted(out: Path, found: list[Path]) -> FileExistsError:
    try:
        record = json.loads((found[-1] / staged.RESUME_NAME).read_text())
        rows, total = record.get("rows", "?"), record.get("num_samples", "?")
    except (OSError, ValueError, AttributeError):
        rows = total = "?"
    return FileExistsError(
        f"{out} holds an interrupted extraction ({rows} of {total} samples done, in {found[-1].name}): pass "
        "resume=True (--resume) to continue it, or overwrite=True (--overwrite) to start again; nothing was changed"
    )


def _open_stage(
    out: Path, found: list[Path], resume: bool, identity: dict[str, Any] | None
) -> tuple[staged.StagedFolder, ExtractionProgress | None, list[str]]:
    """The staging folder to write (a resumed one, or a new one), its progress record (``None``: not resumable),
    and notes."""
    if resume and found:
        assert identity is not None
        stage = staged.StagedFolder.reopen(found[-1], record=manifest.MANIFEST_NAME)
        progress = ExtractionProgress.load(stage.path, identity)
        return stage, progress, [f"resuming the extraction in {stage.path} at sample {progress.rows}"]
    notes = [f"nothing to resume in {out}: extracting from the first sample"] if resume else []
    stage = staged.StagedFolder(out, record=manifest.MANIFEST_NAME)
    return stage, None if identity is None else ExtractionProgress(stage.path, identity), notes


@torch.no_grad()
def extract_features(
    model: nn.Module,
    data: Any,
    layers: str | Sequence[str] = PENULTIMATE,
    *,
    out: str | Path,
    K: int | None = None,
    classifier: Any = None,
    device: str | torch.device | None = None,
    format: str = "npy",
    overwrite: bool = False,
    batch_size: int = 256,
    workers: int = 0,
    resume: bool = False,
) -> dict[str, Path]:
    """Stream eval-mode features of ``layers`` over ``data`` to ``out``: an indexable dataset (a
    ``torch.utils.data.Dataset`` of ``(x, y)`` items, read in order in batches of ``batch_size`` by a
    ``DataLoader`` with ``workers`` processes; resumable) or any iterable of ``(x, y)`` batches.

    Writes ``out/LAYER.npy`` ``(N, d)`` float32 per layer and ``out/labels.npy`` ``(N,)`` int64, one batch at a
    time (memory: one batch, whatever ``N``); with a classifier also ``out/W.npy`` ``(K, d)`` and ``out/b.npy``
    (float64), and ``out/manifest.json`` (layers, shapes, ``K``, the penultimate layer, and per file its size,
    dtype, shape and the SHA-256 of its data: :mod:`nclab.io.manifest`). Layers and the classifier follow
    :class:`~nclab.monitor.CollapseMonitor` (``"penultimate"`` is the classifier's input); ``K``
    (default: the classifier's rows) finds the classifier. Each file reads back memory-mapped:
    ``nclab measure out/penultimate.npy out/labels.npy -w out/W.npy -b out/b.npy``.

    The files are committed all-or-nothing (see the module): on any error ``out`` keeps what it held; a full disk
    raises an ``OSError`` (same errno) saying so. An earlier extraction in ``out`` is refused with
    ``FileExistsError`` unless ``overwrite=True``, which replaces it as a whole. Leftovers of a killed extraction
    are removed (a ``UserWarning`` says what). ``out`` is locked while written (``RunDirBusyError`` when another
    process holds it).

    Resume (indexable datasets only, see the module): an extraction that stops on an error (other than a full
    disk) or is killed keeps its progress in its staging folder; ``resume=True`` continues it (refused, naming
    what differs, unless the layers, model weights, dataset, batch size and format are the same); without
    ``resume`` or ``overwrite`` a new extraction into ``out`` is refused while one is waiting to be resumed.

    ``format="safetensors"``: the same arrays as named tensors of one file ``out/features.safetensors`` (the
    manifest in its metadata too), copied from the streamed ``.npy`` files in chunks, which are then removed
    (disk: twice the features for a moment; memory: one chunk);
    ``nclab measure out/features.safetensors:penultimate out/features.safetensors:labels``. Every returned path
    is then that file, the key naming the tensor.

    Parameters
    ----------
    model : nn.Module
        The model, run in eval mode.
    data : Dataset or iterable
        A ``torch.utils.data.Dataset`` of ``(x, y)`` items (resumable) or any iterable of ``(x, y)`` batches.
    layers : str or sequence of str, default="penultimate"
        Layers to write, as :class:`~nclab.monitor.CollapseMonitor`.
    out : str or Path
        The output folder.
    K : int, optional
        Number of classes (default: the classifier's rows).
    classifier : optional
        As :class:`~nclab.monitor.CollapseMonitor` (None: find it).
    device : str or torch.device, optional
        Where the model runs.
    format : {"npy", "safetensors"}, default="npy"
        Output format.
    overwrite : bool, default=False
        Replace an earlier extraction in ``out``.
    batch_size : int, default=256
        Batch size for an indexable dataset.
    workers : int, default=0
        ``DataLoader`` worker processes for an indexable dataset.
    resume : bool, default=False
        Continue an interrupted extraction.

    Returns
    -------
    dict[str, Path]
        ``{layer: path}`` plus ``"labels"`` (and ``"W"``, ``"b"``).

    Examples
    --------
    >>> import tempfile
    >>> net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    >>> x, y = torch.randn(10, 4), torch.arange(10) % 3
    >>> out = tempfile.mkdtemp()
    >>> paths = extract_features(net, [(x[:6], y[:6]), (x[6:], y[6:])], out=out, K=3)
    >>> np.load(paths["penultimate"], mmap_mode="r").shape, np.load(paths["labels"]).tolist()[:4]
    ((10, 8), [0, 1, 2, 0])
    >>> sorted(p.name for p in Path(out).iterdir())
    ['W.npy', 'b.npy', 'labels.npy', 'manifest.json', 'penultimate.npy']
    """
    if format not in ("npy", "safetensors"):
        raise ValueError(f"format must be 'npy' or 'safetensors', got {format!r}")
    indexed = _indexable(data)
    if resume and not indexed:
        raise ValueError(
            "resume=True needs the data as an indexable dataset (a torch Dataset, read in order in batches of "
            f"batch_size), not {type(data).__name__}: an iterable of batches cannot be restarted part-way"
        )
    if K is None:
        if classifier is None:
            raise ValueError("extract_features needs K (to find the classifier) or classifier=")
        W = classifier[0] if isinstance(classifier, tuple | list) else getattr(classifier, "weight", None)
        K = int(W.shape[0]) if W is not None else 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # no classifier is fine here: the features are still exported
        monitor = CollapseMonitor(model, K, layers=layers, classifier=classifier, device=device)
    out = Path(out)
    created = [p for p in (out, *out.parents) if not p.exists()]  # deepest first
    out.mkdir(parents=True, exist_ok=True)
    try:
        return _extract_locked(out, model, monitor, data, format, batch_size, workers, indexed, resume, overwrite)
    except BaseException:
        for folder in created:  # a failed first extraction leaves no trace: the folders it made go again
            try:
                folder.rmdir()  # only when empty (a resumable staging folder is kept, and so is its parent)
            except OSError:
                break
        raise


def _extract_locked(
    out: Path,
    model: nn.Module,
    monitor: CollapseMonitor,
    data: Any,
    format: str,
    batch_size: int,
    workers: int,
    indexed: bool,
    resume: bool,
    overwrite: bool,
) -> dict[str, Path]:
    """:func:`extract_features` from the plan on: under the run directory's lock, staged, committed at once."""
    plan = monitor.plan()
    identity = None
    if indexed:
        identity = {
            "layers": list(plan.layers),
            "num_samples": len(data),
            "batch_size": int(batch_size),
            "format": format,
            "model": model_fingerprint(model),
            "data": dataset_fingerprint(data),
            "overwrite": bool(overwrite),
        }
    with RunDir(out).lock() as lock:
        # out is ours now: what is left of a killed writer is not being written
        found = staged.resumable_stagings(out)
        if found and not (resume or overwrite):
            raise _interrupted(out, found)
        keep = found[-1:] if resume else []
        notes = [lock.note] if lock.note else []
        for note in notes + staged.recover_staging(out, keep=keep) + _old_temporaries(out):
            warnings.warn(f"{out}: {note}", UserWarning, stacklevel=2)
        stage, progress, resumed = _open_stage(out, keep, resume, identity)
        for note in resumed:
            warnings.warn(f"{out}: {note}", UserWarning, stacklevel=2)
        may_replace = overwrite or (progress is not None and progress.identity["overwrite"])
        try:
            replaced = _earlier_extraction(out, _new_names(plan, format), may_replace)
        except BaseException:
            if progress is None or not progress.rows:
                stage.abort()
            raise
        job = None if progress is None else _Indexed(data, int(batch_size), int(workers), progress)
        try:
            names = _stage_extraction(stage, model, monitor, plan, data, format, job)
            stage.commit(replaces=replaced)
        except BaseException as err:
            written = stage.nbytes()
            full = _no_room(err, out, written)
            if job is not None and job.kept and full is None:  # the forward pass stopped: kept for a resume
                err.add_note(
                    f"nclab: the extraction into {out} stopped after {job.progress.rows} of {len(data)} samples; "
                    f"its progress is kept in {stage.path}: continue it with resume=True (nclab extract ... --resume)"
                )
                raise
            stage.abort()
            if full is not None:
                raise full from err
            raise
    if format == "safetensors":
        return dict.fromkeys(names, out / "features.safetensors")
    return {n: out / f"{n}.npy" for n in names}
