"""Many runs in one report: overlaid curves of a metric, and a tidy table of the runs.

:func:`find_runs` turns run directories and sweep directories (``sweep.csv`` and its trial folders, or any folder
of run folders) into run directories, with a warning for each trial it cannot read; :func:`load_run` reads one
(:func:`nclab.io.rundir.read_run`: metrics, summary, resolved config; a table with an epoch measured twice is
refused);
:func:`differing_keys` finds the config keys whose values differ between runs (the legend and the table's
columns); :func:`runs_table` is the tidy table (one row per run: ``run_id``, the run folder, the differing keys,
the zero-error epoch and the last value of each metric); :func:`write_compare_report` writes ``compare.html``
and, beside it, the table as ``compare.csv``.
"""

from __future__ import annotations

import html
import json
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from nclab.io.atomic import atomic_write_text
from nclab.io.rundir import PENULTIMATE, RunDir, RunRecord, read_run
from nclab.io.tables import csv_text
from nclab.report.html import format_value, write_report

__all__ = [
    "RunRecord",
    "differing_keys",
    "find_runs",
    "flatten_config",
    "load_run",
    "runs_table",
    "write_compare_report",
]


def _is_run(path: Path) -> bool:
    return RunDir(path).metrics.is_file()


def _sweep_trials(sweep: Path) -> list[Path]:
    """The trials of the sweep folder ``sweep`` in ``sweep.csv`` order that hold a table; a warning names each
    one that does not (a failed trial, or a table removed), rather than leaving it out silently."""
    found = []
    for row in read_run(sweep).summary["trials"]:
        trial = sweep / row["trial_id"]
        if _is_run(trial):
            found.append(trial)
            continue
        status = row.get("status") or "unknown"
        why = "its folder is missing" if not trial.is_dir() else "it holds no metrics.csv"
        warnings.warn(
            f"{sweep}: trial {row['trial_id']} (status {status}) could not be read: {why}; it is left out"
            + ("" if status == "failed" else " (a re-run of the sweep repairs a completed trial from its checkpoint)"),
            UserWarning,
            stacklevel=3,
        )
    return found


def find_runs(paths: Sequence[str | Path]) -> list[Path]:
    """The run directories named by ``paths``, in order, each once: a run directory (it holds ``metrics.csv``)
    as itself; a sweep directory as its trials in ``sweep.csv`` order (those with a ``metrics.csv``; a
    ``UserWarning`` names each other one); any other folder as its sub-folders that are runs, by name.

    Raises
    ------
    FileNotFoundError
        When a path does not exist or holds no run.
    """
    out: list[Path] = []
    for p in map(Path, paths):
        if not p.is_dir():
            raise FileNotFoundError(f"no such run or sweep directory: {p}")
        if _is_run(p):
            found = [p]
        elif RunDir(p).sweep_table.is_file():
            found = _sweep_trials(p)
        else:
            found = sorted(d for d in p.iterdir() if d.is_dir() and _is_run(d))
        if not found:
            raise FileNotFoundError(f"{p} holds no run (no metrics.csv in it or in its sub-folders)")
        out += [d for d in found if d not in out]
    return out


def load_run(path: str | Path) -> RunRecord:
    """Read the run directory ``path`` (:func:`nclab.io.rundir.read_run`: ``metrics.csv``, and ``summary.json`` /
    ``config.yaml`` when present); a folder without a table is refused (``FileNotFoundError``)."""
    record = read_run(path)
    if record.kind not in ("train", "monitor"):
        raise FileNotFoundError(f"{record.path} is a {record.kind} folder, not a run directory (no metrics.csv)")
    return record


def flatten_config(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested mappings as one level of dotted keys (lists stay values).

    Examples
    --------
    >>> flatten_config({"optim": {"lr": 0.1, "betas": [0.9, 0.99]}, "seed": 0})
    {'optim.lr': 0.1, 'optim.betas': [0.9, 0.99], 'seed': 0}
    """
    out: dict[str, Any] = {}
    for k, v in config.items():
        if isinstance(v, Mapping) and v:
            out |= flatten_config(v, f"{prefix}{k}.")
        else:
            out[f"{prefix}{k}"] = v
    return out


def differing_keys(configs: Sequence[Mapping[str, Any]]) -> list[str]:
    """The dotted keys whose values are not the same in every config (a key missing from some counts as
    differing), in order of first appearance.

    Examples
    --------
    >>> differing_keys([{"optim": {"lr": 0.1}, "seed": 0}, {"optim": {"lr": 0.2}, "seed": 0}])
    ['optim.lr']
    """
    flat = [flatten_config(c) for c in configs]
    keys = list(dict.fromkeys(k for f in flat for k in f))
    missing = object()
    return [k for k in keys if len({json.dumps(f.get(k, missing), default=str, sort_keys=True) for f in flat}) > 1]


def _show(v: Any) -> Any:
    return json.dumps(v) if isinstance(v, list | dict) else v


def _labels(runs: Sequence[RunRecord], keys: Sequence[str]) -> list[str]:
    flat = [flatten_config(r.config) for r in runs]
    labels = [", ".join(f"{k}={_show(f.get(k))}" for k in keys) or r.run_id for r, f in zip(runs, flat, strict=True)]
    if len(set(labels)) < len(labels):  # the same config twice (copies of a run): the folder tells them apart
        labels = [f"{lab} ({r.path.name})" for lab, r in zip(labels, runs, strict=True)]
    return labels


def _last(run: RunRecord, metric: str, layer: str, split: str) -> float | None:
    pts = [(r.epoch, r.value) for r in run.rows if r.split == split and r.layer == layer and r.metric == metric]
    return max(pts)[1] if pts else None


def runs_table(
    runs: Sequence[RunRecord], metrics: Sequence[str] = ("nc1",), layer: str = PENULTIMATE, split: str = "train"
) -> list[dict[str, Any]]:
    """One row per run: ``run_id``, ``run_dir``, the :func:`differing_keys` of their configs, ``zero_error_epoch``,
    ``last_epoch`` and ``<metric>_last`` (the value at the run's last measured epoch, at ``layer`` on ``split``)."""
    keys = differing_keys([r.config for r in runs])
    table = []
    for run in runs:
        flat = flatten_config(run.config)
        row: dict[str, Any] = {"run_id": run.run_id, "run_dir": str(run.path)}
        row |= {k: _show(flat.get(k)) for k in keys}
        row["zero_error_epoch"] = run.zero_error_epoch
        row["last_epoch"] = max((r.epoch for r in run.rows), default=None)
        lay = run.layer(layer)
        row |= {f"{m}_last": _last(run, m, lay, split) for m in metrics}
        table.append(row)
    return table


def _table_html(table: Sequence[Mapping[str, Any]]) -> str:
    if not table:
        return "<p>no runs</p>"
    cols = list(table[0])
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = []
    for row in table:
        cells = []
        for c in cols:
            v = row[c]
            if isinstance(v, float):
                cells.append(f"<td class=num>{format_value(v)}</td>")
            else:
                cells.append(f"<td>{html.escape('-' if v is None else str(v))}</td>")
        body.append(f"<tr>{''.join(cells)}</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def write_compare_report(
    paths: Sequence[str | Path],
    out: str | Path,
    *,
    metrics: Sequence[str] = ("nc1",),
    layer: str = PENULTIMATE,
    split: str = "train",
) -> tuple[Path, Path]:
    """Overlay ``metrics`` of every run under ``paths`` (see :func:`find_runs`) in ``out`` (HTML) and write the
    :func:`runs_table` as CSV beside it (``out`` with suffix ``.csv``). Returns ``(html_path, csv_path)``.

    Each panel has one curve per run, labelled by the run's values of the differing config keys, and a dotted
    vertical line in the run's colour at its zero-error epoch.

    Raises
    ------
    FileNotFoundError
        A path that is not a run or sweep directory.
    KeyError
        A metric that no run measured at ``layer`` on ``split`` (the message lists the ones measured).
    """
    from nclab.report.figures import compare_figure

    runs = [load_run(p) for p in find_runs(paths)]
    for m in metrics:
        if not any(
            r.metric == m and r.split == split and r.layer == run.layer(layer) for run in runs for r in run.rows
        ):
            known = sorted(
                {r.metric for run in runs for r in run.rows if r.layer == run.layer(layer) and r.split == split}
            )
            raise KeyError(
                f"no run measured {m!r} at layer {layer!r} on the {split} split; measured: {', '.join(known)}"
            )
    keys = differing_keys([r.config for r in runs])
    labels = _labels(runs, keys)
    # compare_figure takes one layer for every run: name the runs' (possibly different) layers uniformly
    curves = {
        lab: ([r._replace(layer=layer) for r in run.rows if r.layer == run.layer(layer)], run.zero_error_epoch)
        for lab, run in zip(labels, runs, strict=True)
    }
    table = runs_table(runs, metrics, layer, split)
    out = Path(out)
    csv_path = atomic_write_text(out.with_suffix(".csv"), csv_text(table, exact_floats=True))
    differ = ", ".join(keys) if keys else "none (the runs share one config)"
    intro = (
        f"<p>{len(runs)} runs; config keys that differ between them: <code>{html.escape(differ)}</code>. "
        f"The table is also in <code>{html.escape(csv_path.name)}</code> beside this file.</p>"
    )
    figures = [
        (
            f"{', '.join(metrics)} at layer {layer}, {split} split, one curve per run; dotted vertical line in the "
            "run's colour: its first epoch with zero training error",
            compare_figure(curves, list(metrics), layer, split, legend_below=True),
        )
    ]
    title = f"nclab compare: {len(runs)} runs"
    html_path = write_report(out, title, [("Runs", intro + _table_html(table))], figures)
    return html_path, csv_path
