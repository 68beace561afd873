"""Verify the files of a run directory, or one file, with the checks their readers run: ``verify(path)``.

A run directory (:func:`nclab.train.train`'s output): ``config.yaml`` parses and validates as a
:class:`~nclab.train.RunConfig`; ``metrics.csv`` is well formed (:func:`nclab.io.run_table.read_metrics`: header,
five fields a row, numbers, a final newline); every checkpoint ``checkpoints/*.pt`` passes
:func:`~nclab.train.checkpoint.load_checkpoint` (format, keys, checksum); ``summary.json`` parses; and every
statistics file (``.npz`` / ``.safetensors`` written by :meth:`nclab.stats.Accumulator.save`, anywhere below
the directory) passes :meth:`~nclab.stats.Accumulator.load` (checksum and invariants). Array files of other
origin (e.g. ``nclab extract``'s features) are not statistics files and are skipped.

A single file is checked by its name: ``.pt`` / ``.pth`` a checkpoint, ``.npz`` / ``.safetensors`` a statistics
file, ``.csv`` a metrics table, ``.yaml`` / ``.yml`` a run config, ``.json`` JSON.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from nclab.io.run_table import read_metrics
from nclab.io.yaml_io import load_yaml_file
from nclab.stats import Accumulator
from nclab.train.checkpoint import load_checkpoint
from nclab.train.config import RunConfig

__all__ = ["Finding", "verify"]


@dataclass(frozen=True)
class Finding:
    """The verdict on one file: what it is checked as (``kind``) and the ``problem``, ``None`` when it passed."""

    path: Path
    kind: str
    problem: str | None = None

    @property
    def ok(self) -> bool:
        """Whether the file passed every check."""
        return self.problem is None


def _message(err: BaseException, path: Path) -> str:
    text = str(err.args[0]) if isinstance(err, KeyError) and err.args else str(err)
    prefix = f"{path}: "
    return text[len(prefix) :] if text.startswith(prefix) else text  # the finding names the file already


def _check(path: Path, kind: str, reader: Callable[[Path], object]) -> Finding:
    try:
        reader(path)
    except (OSError, ValueError, KeyError, TypeError) as err:
        return Finding(path, kind, _message(err, path) or type(err).__name__)
    return Finding(path, kind)


def _read_config(path: Path) -> None:
    data = load_yaml_file(path)
    if not isinstance(data, dict):
        raise ValueError(f"not a run config (a YAML mapping), found {type(data).__name__}")
    RunConfig.model_validate(data)


def _read_json(path: Path) -> None:
    json.loads(path.read_text(encoding="utf-8"))


def _is_statistics_file(path: Path) -> bool:
    """Whether ``path`` claims to be an accumulator file (its metadata has a ``kind``); unreadable files count
    as claims, so that the reader reports what is wrong with them."""
    try:
        if path.suffix == ".npz":
            with zipfile.ZipFile(path) as zf:
                return "meta__kind.npy" in zf.namelist()
        with open(path, "rb") as fh:
            size = int.from_bytes(fh.read(8), "little")
            if size > 100 * 2**20:
                return True
            header = json.loads(fh.read(size))
        return "kind" in (header.get("__metadata__") or {})
    except (OSError, ValueError, zipfile.BadZipFile, AttributeError):
        return True


_BY_SUFFIX: dict[str, tuple[str, Callable[[Path], object]]] = {
    ".pt": ("checkpoint", load_checkpoint),
    ".pth": ("checkpoint", load_checkpoint),
    ".npz": ("statistics", Accumulator.load),
    ".safetensors": ("statistics", Accumulator.load),
    ".csv": ("metrics table", read_metrics),
    ".yaml": ("run config", _read_config),
    ".yml": ("run config", _read_config),
    ".json": ("JSON", _read_json),
}


def _verify_dir(run: Path) -> list[Finding]:
    config, metrics, ckpts = run / "config.yaml", run / "metrics.csv", run / "checkpoints"
    if not (config.exists() or metrics.exists() or ckpts.is_dir()):
        return [
            Finding(run, "run directory", "not an nclab run directory (no config.yaml, metrics.csv or checkpoints/)")
        ]
    out = [
        _check(config, "run config", _read_config) if config.exists() else Finding(config, "run config", "missing"),
        _check(metrics, "metrics table", read_metrics)
        if metrics.exists()
        else Finding(metrics, "metrics table", "missing"),
    ]
    if (run / "summary.json").exists():
        out.append(_check(run / "summary.json", "JSON", _read_json))
    checkpoints = sorted(ckpts.glob("*.pt")) if ckpts.is_dir() else []
    if ckpts.is_dir() and not (ckpts / "last.pt").exists():
        out.append(Finding(ckpts / "last.pt", "checkpoint", "missing"))
    out += [_check(p, "checkpoint", load_checkpoint) for p in checkpoints]
    for suffix in (".npz", ".safetensors"):
        for p in sorted(run.rglob(f"*{suffix}")):
            if p.is_file() and _is_statistics_file(p):
                out.append(_check(p, "statistics", Accumulator.load))
    return out


def verify(path: str | Path) -> list[Finding]:
    """Check the run directory or the file ``path``; one :class:`Finding` per file checked (see the module
    documentation for the checks). The run is sound when every finding is ``ok``.

    Examples
    --------
    >>> import tempfile, pathlib, numpy as np
    >>> from nclab import ClassStats
    >>> path = ClassStats.from_arrays(np.eye(3), [0, 1, 2]).save(pathlib.Path(tempfile.mkdtemp()) / "s.npz")
    >>> [(f.kind, f.ok) for f in verify(path)]
    [('statistics', True)]
    >>> _ = path.write_bytes(path.read_bytes()[:100])
    >>> verify(path)[0].problem.startswith("cannot read an accumulator file (truncated")
    True
    """
    path = Path(path)
    if not path.exists():
        return [Finding(path, "path", "no such file or directory")]
    if path.is_dir():
        return _verify_dir(path)
    kind, reader = _BY_SUFFIX.get(path.suffix.lower(), ("file", None))  # type: ignore[arg-type]
    if reader is None:
        known = ", ".join(sorted(_BY_SUFFIX))
        return [Finding(path, kind, f"cannot tell what to check in a {path.suffix or 'suffix-less'} file ({known})")]
    return [_check(path, kind, reader)]
