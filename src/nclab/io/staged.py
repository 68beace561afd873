"""A folder of files committed as one result: :class:`StagedFolder`, :func:`recover_staging`.

A writer of several files that belong together (an extraction: one file per layer, the labels, the classifier and
the manifest) writes them into ``OUT/.staging-<id>/`` and moves them into ``OUT`` only when every one of them is
complete (:meth:`StagedFolder.commit`). Until then ``OUT`` holds what it held before. A failure (an exception, a
full disk) removes the staging folder (:meth:`StagedFolder.abort`); a killed writer leaves it behind, and the next
writer into ``OUT`` removes it or finishes its commit (:func:`recover_staging`). The staging folder is inside
``OUT``, so every move is a rename on one file system.

Moving several files is several renames, so the commit is journaled:

1. ``COMMIT.json`` is written into the staging folder (atomically). From then on the staged set is complete; the
   journal names the staged files, the files of ``OUT`` that the commit replaces (the earlier result's) and the
   *record* (``manifest.json``), the file that describes the result;
2. the record in ``OUT`` is removed first, so that no reader finds an old record describing a mix of files;
3. the replaced files that the new result does not overwrite are removed (no stale file beside the new ones);
4. the staged files are renamed into ``OUT``, the record last; ``OUT`` is fsync'ed, the staging folder removed.

A crash between 1 and 4 leaves ``COMMIT.json``: :func:`recover_staging` repeats steps 2-4 (the record still in
the staging folder means it was not moved yet; once it is moved, only the cleanup is left), and
:func:`interrupted_commit` tells a reader that ``OUT`` is in that state. A staging folder without the journal was
never complete, and is removed.

One process at a time may write ``OUT`` (holding its lock, :meth:`nclab.io.rundir.RunDir.lock`, is the
caller's part): recovery would otherwise remove a live writer's staging folder.

**Resumable writers.** A writer that can continue after a crash keeps its progress in ``RESUME.json`` inside its
staging folder (:data:`RESUME_NAME`; what it holds is the writer's). Such a folder is not removed by recovery
while it is kept (``recover_staging(out, keep=...)``), is found by :func:`resumable_stagings`, is reopened with
:meth:`StagedFolder.reopen`, and its ``RESUME.json`` never moves into ``OUT`` with the commit.

Examples
--------
>>> import tempfile, pathlib
>>> out = pathlib.Path(tempfile.mkdtemp())
>>> _ = (out / "old.txt").write_text("earlier result")
>>> stage = StagedFolder(out)
>>> _ = (stage.path / "new.txt").write_text("new result")
>>> _ = (stage.path / "manifest.json").write_text("{}")
>>> sorted(p.name for p in out.iterdir() if not p.name.startswith("."))  # nothing moved before the commit
['old.txt']
>>> [p.name for p in stage.commit(replaces=["old.txt"])]
['new.txt', 'manifest.json']
>>> sorted(p.name for p in out.iterdir())
['manifest.json', 'new.txt']
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from nclab.io.atomic import atomic_write_text, fsync_folder

__all__ = [
    "JOURNAL_NAME",
    "RESUME_NAME",
    "STAGING_PREFIX",
    "StagedFolder",
    "interrupted_commit",
    "recover_staging",
    "resumable_stagings",
]

#: Name prefix of a staging folder inside the output folder (hidden: a listing of ``OUT`` shows the result only).
STAGING_PREFIX = ".staging-"

#: The journal written into a staging folder when its commit starts.
JOURNAL_NAME = "COMMIT.json"

#: A resumable writer's progress inside its staging folder (never committed into the output folder).
RESUME_NAME = "RESUME.json"


def _tree_bytes(folder: Path) -> int:
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total


def _mb(nbytes: int) -> str:
    return f"{nbytes / 2**20:.1f} MB"


class StagedFolder:
    """A new hidden folder ``out/.staging-<time>-<pid>-<random>`` (``path``) for the files of one result, moved
    into ``out`` by :meth:`commit` or removed by :meth:`abort`. ``record`` names the staged file that describes the
    result (moved last).

    Parameters
    ----------
    out : str or Path
        The output folder (created with its parents when missing).
    record : str, default "manifest.json"
        The file that must be staged before a commit, and that the commit moves last.
    """

    def __init__(self, out: str | Path, *, record: str = "manifest.json") -> None:
        self.out = Path(out)
        self.record = record
        self.out.mkdir(parents=True, exist_ok=True)
        self.id = f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}-{secrets.token_hex(3)}"
        self.path = self.out / f"{STAGING_PREFIX}{self.id}"
        self.path.mkdir()

    @classmethod
    def reopen(cls, path: str | Path, *, record: str = "manifest.json") -> StagedFolder:
        """The staging folder ``path`` (``out/.staging-<id>``) of an earlier writer, to continue writing into it."""
        path = Path(path)
        if not (path.name.startswith(STAGING_PREFIX) and path.is_dir()):
            raise ValueError(f"{path} is not a staging folder ({STAGING_PREFIX}<id>)")
        self = cls.__new__(cls)
        self.out, self.record, self.path = path.parent, record, path
        self.id = path.name[len(STAGING_PREFIX) :]
        return self

    def nbytes(self) -> int:
        """Bytes written into the staging folder so far."""
        return _tree_bytes(self.path)

    def commit(self, replaces: Iterable[str] = ()) -> list[Path]:
        """Move every staged file into ``out`` as one result (see the module's steps 1-4), removing the files
        ``replaces`` of ``out`` (an earlier result's) that the new result does not overwrite. Returns the new paths
        in ``out``, the record last.

        Raises
        ------
        ValueError
            When the record is not staged.
        IsADirectoryError
            When a staged name is a folder in ``out`` (checked before anything moves).
        """
        staged = sorted(p.name for p in self.path.iterdir() if p.name != RESUME_NAME)
        if self.record not in staged:
            raise ValueError(f"cannot commit {self.path}: its record {self.record} was not written")
        for name in staged:
            if (self.out / name).is_dir():
                raise IsADirectoryError(f"cannot write {self.out / name}: a folder of that name is in the way")
        journal = {
            "record": self.record,
            "files": staged,
            "replaces": sorted(set(replaces) - set(staged) - {JOURNAL_NAME}),
        }
        atomic_write_text(self.path / JOURNAL_NAME, json.dumps(journal, indent=1) + "\n")
        return _finish(self.path, self.out, journal)

    def abort(self) -> None:
        """Remove the staging folder and everything in it; ``out`` is left as it was (idempotent). A commit that
        has started (its journal written) is not undone: part of it may be in ``out`` already, so the staging
        folder stays for :func:`recover_staging` to finish."""
        if not (self.path / JOURNAL_NAME).exists():
            shutil.rmtree(self.path, ignore_errors=True)


def _finish(staging: Path, out: Path, journal: dict[str, Any]) -> list[Path]:
    """Steps 2-4 of the commit; safe to repeat after a crash part-way."""
    record = journal["record"]
    order = [n for n in journal["files"] if n != record] + [record]
    if (staging / record).exists():  # else the record was moved: every other file was moved before it
        (out / record).unlink(missing_ok=True)
        for name in journal["replaces"]:
            (out / name).unlink(missing_ok=True)
        for name in order:
            if (staging / name).exists():  # a repeat: files moved before the crash are already in place
                os.replace(staging / name, out / name)
        fsync_folder(out)
    shutil.rmtree(staging, ignore_errors=True)
    return [out / n for n in order]


def _read_journal(staging: Path) -> dict[str, Any] | None:
    try:
        journal = json.loads((staging / JOURNAL_NAME).read_text())
    except (OSError, ValueError):  # absent (never complete); it is written atomically, so never half
        return None
    ok = isinstance(journal, dict) and isinstance(journal.get("record"), str)
    return (
        journal if ok and isinstance(journal.get("files"), list) and isinstance(journal.get("replaces"), list) else None
    )


def interrupted_commit(folder: str | Path) -> Path | None:
    """The journal of a commit into ``folder`` that has started and not finished (a writer moving its files in
    right now, or one killed doing so), or ``None``: while it exists, the files of ``folder`` may be a mix of two
    results."""
    for staging in Path(folder).glob(f"{STAGING_PREFIX}*"):
        journal = staging / JOURNAL_NAME
        if journal.is_file():
            return journal
    return None


def _origin(staging: Path) -> str:
    parts = staging.name[len(STAGING_PREFIX) :].split("-")
    if len(parts) == 3 and parts[1].isdigit():
        return f"started {parts[0]} by pid {parts[1]}"
    return "of an unknown writer"


def resumable_stagings(out: str | Path) -> list[Path]:
    """The staging folders in ``out`` that hold a resumable writer's progress (:data:`RESUME_NAME`) and whose
    commit has not started, oldest first."""
    found = [p for p in Path(out).glob(f"{STAGING_PREFIX}*") if p.is_dir() and (p / RESUME_NAME).is_file()]
    return sorted(p for p in found if not (p / JOURNAL_NAME).exists())


def recover_staging(out: str | Path, *, keep: Iterable[str | Path] = ()) -> list[str]:
    """Clean up after writers of ``out`` that were killed: finish each interrupted commit (a staging folder with
    its journal), remove each staging folder that was never complete, except those in ``keep`` (a resumable
    writer's, about to be continued). Call it only while holding ``out``'s lock. Returns one note per staging
    folder handled (empty when there was none).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> out = pathlib.Path(tempfile.mkdtemp())
    >>> left = StagedFolder(out)  # a writer killed before its commit
    >>> _ = (left.path / "part.npy").write_bytes(b"x" * 2**20)
    >>> recover_staging(out)[0].startswith("removed the 1.0 MB left in ")
    True
    >>> list(out.iterdir())
    []
    """
    out = Path(out)
    notes = []
    kept = {Path(k).resolve() for k in keep}
    for staging in sorted(out.glob(f"{STAGING_PREFIX}*")):
        if not staging.is_dir() or staging.resolve() in kept:
            continue
        journal = _read_journal(staging)
        if journal is not None:
            _finish(staging, out, journal)
            notes.append(
                f"finished the commit of {staging} ({_origin(staging)}; killed while moving its complete files "
                f"into {out})"
            )
        else:
            size = _tree_bytes(staging)
            shutil.rmtree(staging, ignore_errors=True)
            notes.append(
                f"removed the {_mb(size)} left in {staging} by a writer that did not finish ({_origin(staging)})"
            )
    return notes
