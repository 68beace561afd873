"""Verify a run directory, a sweep, an extraction or one file: each file with the checks its reader runs, then the
files against each other. ``verify(path)``.

Each file on its own (one :class:`Finding` per file): ``config.yaml`` parses and validates as a
:class:`~nclab.train.RunConfig`; ``metrics.csv`` is well formed (:func:`nclab.io.run_table.read_metrics`: header,
five fields a row, numbers, a final newline) and measures no ``(epoch, split, layer, metric)`` twice with two
values; every checkpoint ``checkpoints/*.pt`` passes :func:`~nclab.train.checkpoint.load_checkpoint` (format,
keys, checksum); ``summary.json`` parses; ``identity.json`` (a monitor's or callback's run) is a run identity whose
id is the hash of what it records; every statistics file (``.npz`` / ``.safetensors`` written by
:meth:`nclab.stats.Accumulator.save`, anywhere below the folder) passes :meth:`~nclab.stats.Accumulator.load`.
Array files of other origin are skipped.

The files against each other (findings with ``cross=True``; run when every file passed on its own, since a
damaged file would only repeat its own finding):

* ``run id``: the ``run_id`` column of ``metrics.csv`` is the hash of ``config.yaml``
  (:func:`nclab.io.rundir.run_id_of`; an extension killed before its first checkpoint, whose ``config.yaml`` holds
  the new ``train.epochs``, passes), or the ``run_id`` of ``identity.json``;
* ``config vs checkpoint``: ``config.yaml`` equals the config that trained the checkpoint except ``train.epochs``,
  and the checkpoint's run id is the table's;
* ``metrics vs checkpoint``: every row of ``metrics.csv`` is the checkpoint's row, and none is missing (a changed
  digit, a deleted row, a clean cut, another run's table);
* ``parquet vs csv``: ``metrics.parquet`` holds the rows and run id of ``metrics.csv`` (needs pyarrow);
* ``summary``: ``summary.json`` matches its own ``sha256`` (written by the trainer since the seal was added: any
  edit), and agrees with the config (name, epochs, run id, lambda), the checkpoint (zero-error epoch, measured
  epochs, timings) and the rows (zero-error epoch, penultimate layer).

Checkpoints written before nclab recorded the run id and config in them are cross-checked by their rows only. A
sweep folder verifies ``sweep.yaml``, ``sweep.csv`` and every completed trial's run directory (a completed trial
that lost a file is reported); an extraction folder verifies each file its ``manifest.json`` lists (size and
SHA-256) and that no commit is half done. A single file is checked by its name: ``.pt`` / ``.pth`` a checkpoint,
``.npz`` / ``.safetensors`` a statistics file, ``.csv`` a metrics table, ``.yaml`` / ``.yml`` a run config,
``.json`` JSON.
"""

from __future__ import annotations

import json
import math
import re
import zipfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nclab.io.integrity import CorruptFileError, object_sha256
from nclab.io.manifest import listed_files, read_manifest, verify_checksum
from nclab.io.run_table import OUTPUT_LAYER, MetricRow, read_metrics, read_run_id
from nclab.io.rundir import RunDir, duplicate_rows, metrics_file_status, read_run, run_id_of
from nclab.io.runlock import RunDirError
from nclab.io.staged import interrupted_commit
from nclab.io.yaml_io import load_yaml_file
from nclab.stats import Accumulator
from nclab.train.checkpoint import load_checkpoint
from nclab.train.config import RunConfig
from nclab.train.losses import lambda_from_weight_decay
from nclab.train.rundir import resume_differences

__all__ = ["Finding", "verify"]


@dataclass(frozen=True)
class Finding:
    """The verdict on one file, or on two files checked against each other (``cross``): what is checked
    (``kind``) and the ``problem``, ``None`` when it passed."""

    path: Path
    kind: str
    problem: str | None = None
    cross: bool = False

    @property
    def ok(self) -> bool:
        """Whether the file passed every check."""
        return self.problem is None


def _message(err: BaseException, path: Path) -> str:
    text = str(err.args[0]) if isinstance(err, KeyError) and err.args else str(err)
    prefix = f"{path}: "
    return text[len(prefix) :] if text.startswith(prefix) else text  # the finding names the file already


def _check(path: Path, kind: str, reader: Callable[[Path], object]) -> Finding:
    return _read(path, kind, reader)[1]


def _read(path: Path, kind: str, reader: Callable[[Path], Any]) -> tuple[Any, Finding]:
    """What ``reader`` returns for ``path`` (``None`` when it failed) and the finding."""
    try:
        value = reader(path)
    except (OSError, ValueError, KeyError, TypeError) as err:
        return None, Finding(path, kind, _message(err, path) or type(err).__name__)
    return value, Finding(path, kind)


def _read_config(path: Path) -> dict[str, Any]:
    data = load_yaml_file(path)
    if not isinstance(data, dict):
        raise ValueError(f"not a run config (a YAML mapping), found {type(data).__name__}")
    RunConfig.model_validate(data)
    return data


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _read_table(path: Path) -> list[MetricRow]:
    rows = read_metrics(path)
    _, clashes = duplicate_rows(rows)
    if clashes:
        (epoch, split, layer, metric), a, b = clashes[0]
        raise ValueError(
            f"{len(clashes)} {'rows repeat' if len(clashes) > 1 else 'row repeats'} an (epoch, split, layer, metric) "
            f"with another value, e.g. epoch {epoch}, "
            f"split {split}, layer {layer}, metric {metric} at data lines {a} and {b} (an epoch measured twice)"
        )
    return rows


def _read_identity(path: Path) -> Any:
    ident = RunDir(path.parent).saved_identity()
    if ident is not None and not ident.consistent():
        raise ValueError(f"its run_id {ident.run_id} is not the hash of the identity it records (edited)")
    return ident


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


#: An epoch number in a file name: ``epoch_5``, ``epoch5``, ``ep-5``, ``e5`` (not inside a word).
_EPOCH_IN_NAME = re.compile(r"(?:^|[^a-z])(?:epoch|ep|e)[_-]?(\d+)(?!\d)", re.IGNORECASE)
#: Split names recognised in a file name.
_SPLITS = frozenset({"train", "test", "val", "valid", "validation"})


def _name_epoch(path: Path) -> int | None:
    """The epoch a file's name states (``epoch_0016.pt``, ``stats_e5.npz``); ``None`` when it states none or
    several different ones."""
    found = {int(m) for m in _EPOCH_IN_NAME.findall(path.stem)}
    return found.pop() if len(found) == 1 else None


def _name_problems(path: Path, provenance: Mapping[str, Any]) -> list[str]:
    """Where the epoch or split a statistics file records contradicts its name."""
    wrong = []
    named = _name_epoch(path)
    if "epoch" in provenance and named is not None and named != provenance["epoch"]:
        wrong.append(f"it records epoch {provenance['epoch']}, its name says epoch {named}")
    tokens = {t.lower() for t in re.split(r"[^A-Za-z0-9]+", path.stem)} & _SPLITS
    if "split" in provenance and tokens and provenance["split"].lower() not in tokens:
        wrong.append(f"it records split {provenance['split']!r}, its name says {', '.join(sorted(tokens))}")
    return wrong


def _read_statistics(path: Path) -> Accumulator:
    """:meth:`Accumulator.load`, and the epoch and split it records (:attr:`Accumulator.provenance`) checked
    against the file's name (a file copied or renamed over another epoch's)."""
    acc = Accumulator.load(path)
    wrong = _name_problems(path, acc.provenance)
    if wrong:
        raise ValueError(f"{'; '.join(wrong)} (copied or renamed from another file?)")
    return acc


_BY_SUFFIX: dict[str, tuple[str, Callable[[Path], object]]] = {
    ".pt": ("checkpoint", load_checkpoint),
    ".pth": ("checkpoint", load_checkpoint),
    ".npz": ("statistics", _read_statistics),
    ".safetensors": ("statistics", _read_statistics),
    ".csv": ("metrics table", read_metrics),
    ".yaml": ("run config", _read_config),
    ".yml": ("run config", _read_config),
    ".json": ("JSON", _read_json),
}


def _statistics_files(folder: Path, files: _Files) -> None:
    for suffix in (".npz", ".safetensors"):
        for p in sorted(folder.rglob(f"*{suffix}")):
            if p.is_file() and _is_statistics_file(p):
                acc, f = _read(p, "statistics", _read_statistics)
                files.findings.append(f)
                if acc is not None:
                    files.statistics[p] = acc


@dataclass
class _Files:
    """The files of a run as read (``None``: missing or unreadable) and their findings."""

    findings: list[Finding]
    config: dict[str, Any] | None = None
    rows: list[MetricRow] | None = None
    table_id: str | None = None
    summary: dict[str, Any] | None = None
    state: dict[str, Any] | None = None
    #: the kept checkpoints ``epoch_NNNN.pt`` as read, by path
    epoch_states: dict[Path, dict[str, Any]] = field(default_factory=dict)
    #: the statistics files as read, by path
    statistics: dict[Path, Accumulator] = field(default_factory=dict)
    #: a live process holds the folder (a run in progress: files may still be on their way)
    running: bool = False


def _leftovers(run: RunDir, files: _Files) -> None:
    """The temporary files an interrupted atomic write left (none is reported while a writer holds the folder:
    they may be its writes in progress)."""
    if files.running:
        return
    for p in run.leftover_temporaries():
        target = p.name[1:].rsplit(".", 2)[0]
        files.findings.append(
            Finding(
                p,
                "temporary file",
                f"left by a write of {target} that was interrupted before its rename (the process was killed); the "
                f"run's files are intact: `nclab train {run.path} --resume` removes it, or delete it",
            )
        )


def _held(run: RunDir) -> bool:
    try:
        return run.holder() is not None
    except (OSError, ValueError, RunDirError):
        return False


def _train_files(run: RunDir) -> _Files:
    files = _Files([], running=_held(run))
    add = files.findings.append
    if run.config.exists():
        files.config, f = _read(run.config, "run config", _read_config)
        add(f)
    else:
        add(Finding(run.config, "run config", "missing"))
    _table(run, files)
    if run.summary.exists():
        summary, f = _read(run.summary, "JSON", _read_json)
        files.summary = summary if isinstance(summary, dict) else None
        add(f)
    checkpoints = sorted(run.checkpoints.glob("*.pt")) if run.checkpoints.is_dir() else []
    if not run.checkpoint.exists() and (run.checkpoints.is_dir() or run.metrics.exists() or run.summary.exists()):
        # the trainer writes the checkpoint before the table: rows without it cannot be continued or checked
        add(Finding(run.checkpoint, "checkpoint", "missing"))
    for p in checkpoints:
        state, f = _read(p, "checkpoint", load_checkpoint)
        if p == run.checkpoint:
            files.state = state
        elif state is not None:
            files.epoch_states[p] = state
        add(f)
    _statistics_files(run.path, files)
    _leftovers(run, files)
    if files.state is not None and files.config is not None:
        files.findings += _missing_run_files(run, files)
    return files


def _missing_run_files(run: RunDir, files: _Files) -> list[Finding]:
    """The files a run at its checkpoint's epoch must have but lacks: ``metrics.parquet`` when the run writes
    it (pyarrow was installed), ``summary.json`` once the checkpoint is at the last epoch (unless the run is still
    writing it), and with ``checkpoint.keep_measured`` the kept checkpoint of each checkpointed measured epoch."""
    state, cfg, out = files.state or {}, files.config or {}, []
    if state.get("parquet") and run.metrics.exists() and not run.parquet.exists():
        out.append(
            Finding(
                run.parquet,
                "metrics table",
                f"missing: the run writes it beside metrics.csv with every checkpoint (pyarrow was installed); "
                f"`nclab train {run.path} --resume` rewrites it from the checkpoint",
            )
        )
    epochs = (cfg.get("train") or {}).get("epochs")
    if isinstance(epochs, int) and state["epoch"] >= epochs and not run.summary.exists() and not files.running:
        out.append(
            Finding(
                run.summary,
                "JSON",
                f"missing: the checkpoint is at the last epoch ({state['epoch']} of train.epochs={epochs}), so the "
                f"run finished (or was killed while finishing) and a finished run has a summary.json; `nclab train "
                f"{run.path} --resume` writes it",
            )
        )
    ckpt_cfg = cfg.get("checkpoint") or {}
    every = ckpt_cfg.get("every", 1)
    if ckpt_cfg.get("keep_measured") and isinstance(every, int) and every >= 1:
        for e in state["measured"]:
            path = run.epoch_checkpoint(int(e))
            if int(e) % every == 0 and not path.exists():
                out.append(
                    Finding(
                        path,
                        "checkpoint",
                        f"missing: checkpoint.keep_measured keeps a checkpoint of each measured epoch, and epoch {e} "
                        f"was measured and checkpointed (it is in {run.checkpoint.name}'s measured epochs)",
                    )
                )
    return out


def _table(run: RunDir, files: _Files) -> None:
    if not run.metrics.exists():
        files.findings.append(Finding(run.metrics, "metrics table", "missing"))
        return
    files.rows, f = _read(run.metrics, "metrics table", _read_table)
    files.findings.append(f)
    if files.rows is not None:
        files.table_id = read_run_id(run.metrics)


# ------------------------------------------------------------------------------------------ cross-checks
def _same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


def _parquet_vs_csv(run: RunDir, rows: Sequence[MetricRow], table_id: str | None) -> str | None:
    """Why ``metrics.parquet`` is not ``metrics.csv`` (``None`` when it is)."""
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(run.parquet).to_pydict()
    except Exception as err:  # pyarrow raises its own types for a damaged file
        return f"cannot be read ({type(err).__name__}: {err})"
    ids = set(table.get("run_id", []))
    if ids and ids != {table_id}:
        return f"holds run_id {', '.join(sorted(map(str, ids)))}, metrics.csv holds {table_id} (another run's table)"
    got = list(zip(*(table.get(c, []) for c in MetricRow._fields), strict=True))
    if len(got) != len(rows):
        return f"holds {len(got)} rows, metrics.csv {len(rows)}"
    for i, (g, r) in enumerate(zip(got, rows, strict=True), 1):
        if tuple(g[:4]) != tuple(r[:4]) or not _same(float(g[4]), r.value):
            return f"row {i} is {tuple(g)}, metrics.csv's is {tuple(r)}"
    return None


def _expected_ids(files: _Files) -> set[str]:
    """The run ids the table may carry: the hash of ``config.yaml``, and where the checkpoint's config differs
    from it in ``train.epochs`` only (an extension that has not written its first checkpoint), the checkpoint's."""
    assert files.config is not None
    name = str(files.config.get("name", ""))
    ids = {run_id_of(name, files.config)}
    trained = (files.state or {}).get("config")
    if isinstance(trained, dict) and not resume_differences(trained, files.config):
        ids.add(run_id_of(name, trained))
    return ids


def _config_vs_checkpoint(run: RunDir, files: _Files) -> list[Finding]:
    state, out = files.state, []
    assert state is not None
    trained = state.get("config")
    if isinstance(trained, dict) and files.config is not None:
        keys = resume_differences(trained, files.config)
        problem = None
        if keys:
            problem = (
                f"differs from the config that trained {run.checkpoint} at {', '.join(keys)} (edited after the run "
                "wrote it, or the checkpoint is another run's)"
            )
        out.append(Finding(run.config, "config vs checkpoint", problem, cross=True))
    rid = state.get("run_id")
    if isinstance(rid, str) and files.table_id is not None:
        problem = (
            None
            if rid == files.table_id or files.config is None or rid in _expected_ids(files)
            else (
                f"was written by run {rid}, {run.metrics.name} records run {files.table_id} (another run's checkpoint, "
                "or another run's table)"
            )
        )
        out.append(Finding(run.checkpoint, "checkpoint run id", problem, cross=True))
    return out


def _rows_vs_checkpoint(run: RunDir, state: Mapping[str, Any]) -> Finding:
    status, n = metrics_file_status(run.metrics, state["rows"])
    total = len(state["rows"])
    problem = None
    if status == "different":
        where = "its header" if n == 0 else f"data line {n}"
        problem = (
            f"disagrees with the {total} rows of {run.checkpoint} at {where} (edited, rows deleted, or another "
            "run's table)"
        )
    elif status == "prefix":
        problem = (
            f"holds the first {n} of the {total} rows of {run.checkpoint} (cut, or written before it): `nclab train "
            f"{run.path} --resume` rebuilds it from the checkpoint"
        )
    return Finding(run.metrics, "metrics vs checkpoint", problem, cross=True)


def _first_zero(rows: Sequence[MetricRow]) -> int | None:
    zero = (r.epoch for r in rows if (r.split, r.layer, r.metric) == ("train", OUTPUT_LAYER, "error") and r.value == 0)
    return min(zero, default=None)


def _summary_problems(files: _Files) -> list[str]:
    """What in ``summary.json`` disagrees with the config, the checkpoint and the rows."""
    s, cfg, state, rows = files.summary or {}, files.config or {}, files.state, files.rows or []
    wrong = []
    if "sha256" in s:  # summaries written before the seal carry none: their fields are cross-checked below
        rest = {k: v for k, v in s.items() if k != "sha256"}
        if object_sha256(rest) != s["sha256"]:
            wrong.append("it was edited after the run wrote it (its content does not match its sha256)")

    def differs(key: str, want: Any, source: str) -> None:
        if s.get(key) != want:
            wrong.append(f"{key} is {s.get(key)!r}, {source} says {want!r}")

    if files.table_id is not None:
        differs("run_id", files.table_id, "metrics.csv")
    if cfg:
        differs("name", cfg.get("name"), "config.yaml")
    if state is not None:
        if isinstance(s.get("epochs"), int) and s["epochs"] < state["epoch"]:
            return wrong  # a summary of an earlier finish, before the run was extended: the rest describes that
        differs("epochs", state["epoch"], "the checkpoint")
        differs("zero_error_epoch", state["zero_error_epoch"], "the checkpoint")
        differs("measured_epochs", list(state["measured"]), "the checkpoint")
        for key in ("train_s", "measure_s"):
            want = state.get("timings", {}).get(key)
            if (s.get("timings") or {}).get(key) != want:
                wrong.append(f"timings.{key} is {(s.get('timings') or {}).get(key)!r}, the checkpoint says {want!r}")
    zero = _first_zero(rows)
    if zero is not None:
        differs("zero_error_epoch", zero, "the first zero training error in metrics.csv")
    if s.get("penultimate") is not None and rows and not any(r.layer == s["penultimate"] for r in rows):
        wrong.append(f"penultimate is {s['penultimate']!r}, a layer without rows in metrics.csv")
    try:
        lam = lambda_from_weight_decay(cfg["optim"]["weight_decay"], s["num_classes"], cfg["loss"]["reduction"])
    except (KeyError, TypeError, ValueError):
        lam = None
    # runs written before the key was named by its meaning call it "paper004_lambda"
    key = "lambda_from_weight_decay" if "paper004_lambda" not in s else "paper004_lambda"
    if lam is not None and not (isinstance(s.get(key), float | int) and math.isclose(s[key], lam)):
        wrong.append(
            f"{key} {s.get(key)!r} does not follow from its num_classes "
            f"{s.get('num_classes')!r} and the config's weight decay and loss (they give {lam!r})"
        )
    return list(dict.fromkeys(wrong))


def _same_rows(a: Sequence[Any], b: Sequence[Any]) -> bool:
    return len(a) == len(b) and all(
        tuple(x[:4]) == tuple(y[:4]) and _same(float(x[4]), float(y[4])) for x, y in zip(a, b, strict=True)
    )


def _epoch_checkpoint_problems(path: Path, state: Mapping[str, Any], files: _Files) -> list[str]:
    """Why the kept checkpoint ``path`` (``epoch_NNNN.pt``) is not this run's checkpoint of epoch NNNN."""
    wrong = []
    named = _name_epoch(path)
    if named is not None and named != state["epoch"]:
        wrong.append(
            f"holds epoch {state['epoch']}, its name says epoch {named} (a copy of another epoch's checkpoint: "
            "resuming from it would restore the wrong epoch)"
        )
    trained, cfg = state.get("config"), files.config
    if isinstance(trained, dict) and cfg is not None:
        keys = resume_differences(trained, cfg)
        if keys:
            wrong.append(f"was trained with another config than config.yaml (at {', '.join(keys)}): another run's")
        rid = state.get("run_id")
        if isinstance(rid, str) and rid != run_id_of(str(trained.get("name", "")), trained):
            wrong.append(f"records run id {rid}, not the hash of the config it records")
    if files.state is not None:
        mine = [r for r in files.state["rows"] if r[0] <= state["epoch"]]
        if not _same_rows(state["rows"], mine):
            wrong.append(
                f"its {len(state['rows'])} metric rows are not the {len(mine)} rows of epochs 0-{state['epoch']} in "
                f"{RunDir.LAST} (another run's checkpoint, or another epoch's)"
            )
    return wrong


def _statistics_problems(path: Path, acc: Accumulator, files: _Files, ids: set[str]) -> list[str]:
    """Where the run id, epoch, layer and split a statistics file records disagree with the run's table (files
    that record none are not checked: older files, or statistics saved without them)."""
    prov, rows, wrong = acc.provenance, files.rows or [], []
    rid = prov.get("run_id")
    if rid is not None and files.table_id is not None and rid != files.table_id and rid not in ids:
        wrong.append(f"records run {rid}, metrics.csv records run {files.table_id} (another run's statistics)")
    if not rows:
        return wrong
    epoch, layer, split = prov.get("epoch"), prov.get("layer"), prov.get("split")
    layers = {r.layer for r in rows}
    if layer is not None:
        if layer not in layers:
            wrong.append(f"records layer {layer!r}, which metrics.csv has no rows of")
            return wrong
        named = {n for n in layers if re.search(rf"(?<![A-Za-z0-9]){re.escape(n)}(?![A-Za-z0-9])", path.stem)}
        if named and layer not in named:
            wrong.append(f"records layer {layer!r}, its name says {', '.join(sorted(named))}")
    if epoch is not None:
        # the epochs at which layers were measured (the output's training rows are written every epoch)
        measured = {r.epoch for r in rows if r.layer != OUTPUT_LAYER or r.layer == layer}
        if epoch not in measured:
            wrong.append(
                f"records epoch {epoch}, which metrics.csv has no measurements of (measured: {sorted(measured)})"
            )
        elif layer is not None and not any(r.epoch == epoch and r.layer == layer for r in rows):
            wrong.append(f"records layer {layer!r} at epoch {epoch}, which metrics.csv has no rows of")
        elif split is not None and not any(r.epoch == epoch and r.split == split for r in rows):
            wrong.append(f"records split {split!r} of epoch {epoch}, which metrics.csv has no rows of")
    return wrong


def _files_cross(files: _Files, ids: set[str]) -> list[Finding]:
    out = []
    for p, state in files.epoch_states.items():
        wrong = _epoch_checkpoint_problems(p, state, files)
        out.append(Finding(p, "kept checkpoint vs run", "; ".join(wrong) or None, cross=True))
    for p, acc in files.statistics.items():
        if acc.provenance:
            wrong = _statistics_problems(p, acc, files, ids)
            out.append(Finding(p, "statistics vs run", "; ".join(wrong) or None, cross=True))
    return out


def _train_cross(run: RunDir, files: _Files) -> list[Finding]:
    out = _files_cross(files, _expected_ids(files) if files.config is not None else set())
    if files.config is not None and files.table_id is not None:
        ids = _expected_ids(files)
        problem = (
            None
            if files.table_id in ids
            else (
                f"records run {files.table_id}, but {run.config.name} hashes to {min(ids)}: config.yaml was edited "
                "after the run wrote it, or the table is another run's"
            )
        )
        out.append(Finding(run.metrics, "run id", problem, cross=True))
    if files.state is not None:
        out += _config_vs_checkpoint(run, files)
        if files.rows is not None:
            out.append(_rows_vs_checkpoint(run, files.state))
    out += _common_cross(run, files)
    if files.summary is not None:
        wrong = _summary_problems(files)
        out.append(Finding(run.summary, "summary", "; ".join(wrong) or None, cross=True))
    return out


def _common_cross(run: RunDir, files: _Files) -> list[Finding]:
    if files.rows is None or not run.parquet.exists():
        return []
    try:
        import pyarrow  # noqa: F401  (an optional dependency)
    except ImportError:
        return []
    return [Finding(run.parquet, "parquet vs csv", _parquet_vs_csv(run, files.rows, files.table_id), cross=True)]


# ------------------------------------------------------------------------------------------ folders
def _verify_train(run: RunDir) -> list[Finding]:
    files = _train_files(run)
    if not all(f.ok for f in files.findings):
        return files.findings
    return files.findings + _train_cross(run, files)


def _verify_monitor(run: RunDir) -> list[Finding]:
    files = _Files([], running=_held(run))
    _table(run, files)
    ident = None
    if run.identity.exists():
        ident, f = _read(run.identity, "run identity", _read_identity)
        files.findings.append(f)
    _statistics_files(run.path, files)
    _leftovers(run, files)
    if not all(f.ok for f in files.findings):
        return files.findings
    out = list(files.findings) + _files_cross(files, {ident.run_id} if ident is not None else set())
    if ident is not None and files.rows:
        problem = (
            None
            if files.table_id == ident.run_id
            else (f"records run {files.table_id}, {run.identity.name} says {ident.run_id} (another run's table)")
        )
        out.append(Finding(run.metrics, "run id", problem, cross=True))
    return out + _common_cross(run, files)


def _verify_sweep(run: RunDir) -> list[Finding]:
    out = []
    if run.sweep_file.exists():
        out.append(_check(run.sweep_file, "sweep file", load_yaml_file))
    try:
        trials = read_run(run.path).summary["trials"]
    except (OSError, ValueError) as err:
        return [*out, Finding(run.sweep_table, "sweep table", _message(err, run.sweep_table))]
    out.append(Finding(run.sweep_table, "sweep table"))
    for row in trials:
        trial = run.path / str(row.get("trial_id"))
        if row.get("status") != "completed":
            continue  # failed, pending or running: nothing is claimed about its folder yet
        if not trial.is_dir():
            out.append(Finding(trial, "trial", "missing: sweep.csv marks the trial completed"))
            continue
        found = _verify_folder(RunDir(trial))
        if not RunDir(trial).metrics.exists() or not RunDir(trial).summary.exists():
            lost = [n for n in (RunDir.METRICS, RunDir.SUMMARY) if not (trial / n).exists()]
            found.append(
                Finding(
                    trial,
                    "trial",
                    f"damaged: sweep.csv marks it completed, but its {' and '.join(lost)} "
                    f"{'is' if len(lost) == 1 else 'are'} missing (running the sweep again repairs it from its "
                    "checkpoint)",
                )
            )
        out += found
    return out


def _verify_extraction(run: RunDir) -> list[Finding]:
    try:
        manifest = read_manifest(run.path) or {}
    except CorruptFileError as err:
        return [Finding(run.manifest, "manifest", err.problem)]
    out = [Finding(run.manifest, "manifest")]
    pending = interrupted_commit(run.path)
    if pending is not None:
        out.append(
            Finding(pending, "extraction", "a commit is half done (`nclab extract` into the folder finishes it)")
        )
    for name, entry in sorted(listed_files(run.path, manifest).items()):
        path = run.path / name
        if not path.is_file():
            out.append(Finding(path, "features", "missing (listed in manifest.json)"))
            continue
        recorded = entry.get("bytes")
        if recorded is not None and path.stat().st_size != recorded:
            problem = f"holds {path.stat().st_size} bytes, manifest.json records {recorded}"
            out.append(Finding(path, "features", problem))
            continue
        out.append(_check(path, "features", verify_checksum))
    return out


def _verify_folder(run: RunDir) -> list[Finding]:
    kind = run.kind()
    if kind == "train" or (kind == "other" and run.checkpoints.is_dir()):
        return _verify_train(run)
    if kind == "monitor":
        return _verify_monitor(run)
    if kind == "sweep":
        return _verify_sweep(run)
    if kind == "extraction":
        return _verify_extraction(run)
    problem = "not an nclab run directory (no config.yaml, metrics.csv, checkpoints/, sweep.csv or manifest.json)"
    return [Finding(run.path, "run directory", problem)]


def verify(path: str | Path) -> list[Finding]:
    """Check the run directory, sweep, extraction or file ``path``; one :class:`Finding` per file checked and
    per cross-check (see the module documentation). The run is sound when every finding is ``ok``.

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
        return _verify_folder(RunDir(path))
    entry = _BY_SUFFIX.get(path.suffix.lower())
    if entry is None:
        known = ", ".join(sorted(_BY_SUFFIX))
        return [Finding(path, "file", f"cannot tell what to check in a {path.suffix or 'suffix-less'} file ({known})")]
    kind, reader = entry
    return [_check(path, kind, reader)]
