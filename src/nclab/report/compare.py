"""Many runs in one report: overlaid curves of a metric, and a tidy table of the runs.

:func:`find_runs` turns run directories and sweep directories (``sweep.csv`` and its trial folders, or any folder
of run folders) into run directories, with a warning for each trial it cannot read; :func:`load_run` reads one
(:func:`nclab.io.rundir.read_run`: metrics, summary, resolved config; a table with an epoch measured twice is
refused);
:func:`differing_keys` finds the config keys whose values differ between runs (the legend and the table's
columns); :func:`runs_table` is the tidy table (one row per run: ``run_id``, the run folder, the differing keys,
the zero-error epoch and the last value of each metric) and :func:`display_rows` the same in words;
:func:`load_comparison` reads it all and :func:`write_comparison` writes ``compare.html`` (legend above the
curves, a table that fits a 1280-px window) and, beside it, the table as ``compare.csv``;
:func:`write_compare_report` does both.
"""

from __future__ import annotations

import html
import json
import os
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nclab.io.atomic import atomic_write_text
from nclab.io.rundir import PENULTIMATE, RunDir, RunRecord, read_run
from nclab.io.tables import csv_text
from nclab.report.html import format_value, write_report

__all__ = [
    "Comparison",
    "RunRecord",
    "differing_keys",
    "display_rows",
    "find_runs",
    "flatten_config",
    "load_comparison",
    "load_run",
    "runs_table",
    "write_compare_report",
    "write_comparison",
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


#: The longest legend label made of the differing keys' values; longer ones are replaced by the run ids (the
#: table under the figure pairs each run id with its keys).
MAX_LABEL = 60


def _show(v: Any) -> Any:
    """A config value as a cell: lists and mappings as JSON, ``None`` and booleans as YAML spells them."""
    if v is None or isinstance(v, bool):
        return {None: "null", True: "true", False: "false"}[v]
    return json.dumps(v) if isinstance(v, list | dict) else v


def _values(config: Mapping[str, Any], keys: Sequence[str]) -> dict[str, Any]:
    """The run's value of each key (``None`` where its config lacks the key)."""
    flat = flatten_config(config)
    return {k: (_show(flat[k]) if k in flat else None) for k in keys}


def _labels(runs: Sequence[RunRecord], keys: Sequence[str]) -> list[str]:
    """Legend labels: the values of the differing keys (``optim.lr=0.1, loss.name=ce``; with the keys' last parts,
    ``lr=0.1, name=ce``, when the full ones are longer than :data:`MAX_LABEL`), or the run ids when those are
    still too long."""
    values = [_values(r.config, keys) for r in runs]
    short = {k: k.rsplit(".", 1)[-1] for k in keys}  # optim.lr -> lr, when that names one key only
    labels = []
    for names in (dict(zip(keys, keys, strict=True)), short):
        labels = [
            ", ".join(f"{names[k]}={'absent' if v[k] is None else v[k]}" for k in keys) or r.run_id
            for r, v in zip(runs, values, strict=True)
        ]
        if len(set(names.values())) < len(keys) or any(len(label) > MAX_LABEL for label in labels):
            labels = [r.run_id for r in runs]
        else:
            break
    if len(set(labels)) < len(labels):  # the same config twice (copies of a run): the folder tells them apart
        labels = [f"{lab} ({r.path.name})" for lab, r in zip(labels, runs, strict=True)]
    return labels


def _last(run: RunRecord, metric: str, layer: str, split: str) -> float | None:
    pts = [(r.epoch, r.value) for r in run.rows if r.split == split and r.layer == layer and r.metric == metric]
    return max(pts)[1] if pts else None


def _keys(runs: Sequence[RunRecord]) -> list[str]:
    """The :func:`differing_keys` of the runs that have a config (a monitor's run has none: it would make every
    key differ)."""
    return differing_keys([r.config for r in runs if r.config])


def runs_table(
    runs: Sequence[RunRecord], metrics: Sequence[str] = ("nc1",), layer: str = PENULTIMATE, split: str = "train"
) -> list[dict[str, Any]]:
    """One row per run: ``run_id``, ``run_dir``, the :func:`differing_keys` of the configs of the runs that have
    one (``None`` where a run's config lacks the key, ``"null"`` where it holds a null), ``zero_error_epoch``,
    ``last_epoch`` and ``<metric>_last`` (the value at the run's last measured epoch, at ``layer`` on ``split``)."""
    keys = _keys(runs)
    table = []
    for run in runs:
        row: dict[str, Any] = {"run_id": run.run_id, "run_dir": str(run.path)}
        row |= _values(run.config, keys)  # None (an empty cell): the run's config lacks the key
        row["zero_error_epoch"] = run.zero_error_epoch
        row["last_epoch"] = max((r.epoch for r in run.rows), default=None)
        lay = run.layer(layer)
        row |= {f"{m}_last": _last(run, m, lay, split) for m in metrics}
        table.append(row)
    return table


#: More differing keys than this are shown in one ``config`` column (``key=value`` per line), not a column each.
MAX_KEY_COLUMNS = 4
_RESULTS = ("run_id", "run_dir", "zero_error_epoch", "last_epoch")


def _display(column: str, value: Any) -> str:
    """A cell of the runs table as read: a missing zero-error epoch is ``not reached``, a metric a run did not
    measure ``not measured``, a config key a run lacks ``absent``; numbers to 4 significant figures."""
    if value is None or value == "":
        if column == "zero_error_epoch":
            return "not reached"
        return "not measured" if column.endswith("_last") or column == "last_epoch" else "absent"
    if isinstance(value, float):
        return format_value(value)
    return str(value)


def _heading(column: str) -> str:
    """``zero_error_epoch`` -> ``zero-error epoch``, ``nc1_last`` -> ``nc1 (last)``; config keys as they are."""
    named = {"run_id": "run", "zero_error_epoch": "zero-error epoch", "last_epoch": "last epoch"}
    if column in named:
        return named[column]
    return f"{column.removesuffix('_last')} (last)" if column.endswith("_last") else column


def display_rows(
    table: Sequence[Mapping[str, Any]], separator: str = ", ", runs: Sequence[RunRecord] | None = None
) -> list[dict[str, str]]:
    """The :func:`runs_table` as printed by ``nclab compare`` and shown in ``compare.html``: headings in words,
    every cell a word or a number (no blank), the run folder left to the CSV; more than
    :data:`MAX_KEY_COLUMNS` differing keys go into one ``config`` column (``key=value`` joined by ``separator``).
    With the ``runs`` of the table, a run without training-error rows has its zero-error epoch ``not measured``
    rather than ``not reached``.

    Examples
    --------
    >>> display_rows([{"run_id": "a-1", "run_dir": "x/a-1", "optim.lr": 0.1, "zero_error_epoch": None,
    ...                "last_epoch": 9, "nc1_last": 0.0123456}])
    [{'run': 'a-1', 'optim.lr': '0.1', 'zero-error epoch': 'not reached', 'last epoch': '9', 'nc1 (last)': '0.01235'}]
    """
    from nclab.report.run_report import zero_error_text

    out = []
    for i, row in enumerate(table):
        keys = [c for c in row if c not in _RESULTS and not c.endswith("_last")]
        shown = {"run": _display("run_id", row["run_id"])}
        if len(keys) > MAX_KEY_COLUMNS:
            shown["config"] = separator.join(f"{k}={_display(k, row[k])}" for k in keys)
        else:
            shown |= {k: _display(k, row[k]) for k in keys}
        shown |= {_heading(c): _display(c, row[c]) for c in row if c not in ("run_id", "run_dir", *keys)}
        if runs is not None:
            shown["zero-error epoch"] = zero_error_text(runs[i]).split(" (")[0]
        out.append(shown)
    return out


def _breakable(text: str) -> str:
    """``text`` escaped, with line-break opportunities after ``_``, ``.`` and ``=`` (config keys and metric names
    have no spaces; a narrow column breaks them there rather than overflow the page or split a word)."""
    return re.sub(r"([_.=])", r"\1<wbr>", html.escape(text))


def _table_html(table: Sequence[Mapping[str, Any]], runs: Sequence[RunRecord], folder: Path) -> str:
    """The runs table (:func:`display_rows`, a ``config`` column with one key per line); each run id links to the
    run's report.html (relative to ``folder``) when it has one."""
    if not table:
        return "<p>no runs</p>"
    shown = display_rows(table, separator="\n", runs=runs)
    head = "".join(f"<th>{_breakable(c)}</th>" for c in shown[0])
    body = []
    for row, cells in zip(table, shown, strict=True):
        report = RunDir(row["run_dir"]).report
        tds = []
        for c, text in cells.items():
            text = _breakable(text).replace("\n", "<br>")
            if c == "run":
                link = html.escape(os.path.relpath(report, folder))
                tds.append(f'<td class=id><a href="{link}">{text}</a></td>' if report.is_file() else f"<td>{text}</td>")
            else:
                numeric = c.endswith("(last)") or c in ("zero-error epoch", "last epoch")
                kind = "num" if numeric else "cfg" if c == "config" else "txt"
                tds.append(f"<td class={kind}>{text}</td>")
        body.append(f"<tr>{''.join(tds)}</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


@dataclass
class Comparison:
    """What :func:`load_comparison` reads: the runs, their labels (the values of the differing config keys), the
    differing keys, and the :func:`runs_table`."""

    runs: list[RunRecord]
    labels: list[str]
    keys: list[str]
    table: list[dict[str, Any]]
    metrics: list[str]
    layer: str
    split: str


def load_comparison(
    paths: Sequence[str | Path], *, metrics: Sequence[str] = ("nc1",), layer: str = PENULTIMATE, split: str = "train"
) -> Comparison:
    """Read every run under ``paths`` (see :func:`find_runs`) and check that ``metrics`` were measured.

    Raises
    ------
    FileNotFoundError
        A path that is not a run or sweep directory.
    KeyError
        A metric that no run measured at ``layer`` on ``split`` (the message lists the ones measured).
    """
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
    keys = _keys(runs)
    table = runs_table(runs, metrics, layer, split)
    return Comparison(runs, _labels(runs, keys), keys, table, list(metrics), layer, split)


def write_comparison(comparison: Comparison, out: str | Path) -> tuple[Path, Path]:
    """Write ``comparison`` as ``out`` (HTML: the overlaid curves, the legend above them, then the runs table)
    and its table as CSV beside it (``out`` with suffix ``.csv``). Returns ``(html_path, csv_path)``."""
    from nclab.report.figures import compare_figure

    c, out = comparison, Path(out)
    layer = c.layer
    # compare_figure takes one layer for every run: name the runs' (possibly different) layers uniformly
    curves = {
        lab: ([r._replace(layer=layer) for r in run.rows if r.layer == run.layer(layer)], run.zero_error_epoch)
        for lab, run in zip(c.labels, c.runs, strict=True)
    }
    csv_path = atomic_write_text(out.with_suffix(".csv"), csv_text(c.table, exact_floats=True))
    differ = ", ".join(c.keys) if c.keys else "none (the runs share one config)"
    long_labels = bool(c.keys) and c.labels == [r.run_id for r in c.runs]
    intro = (
        f"<p>{len(c.runs)} runs; config keys that differ between them: <code>{html.escape(differ)}</code>. "
        f"The table, with each run's folder, is also in <code>{html.escape(csv_path.name)}</code> beside this "
        "file; a run id links to the run's own report"
        + ("; the legend names the runs by their ids (their keys make long labels)" if long_labels else "")
        + ".</p>"
    )
    figures = [
        (
            f"{', '.join(c.metrics)} at layer {layer}, {c.split} split, one curve per run; dotted vertical line in "
            "the run's colour: its first epoch with zero training error",
            compare_figure(curves, c.metrics, layer, c.split, legend_on_top=True),
        )
    ]
    title = f"nclab compare: {len(c.runs)} runs"
    html_path = write_report(out, title, [("Runs", intro + _table_html(c.table, c.runs, out.parent))], figures)
    return html_path, csv_path


def write_compare_report(
    paths: Sequence[str | Path],
    out: str | Path,
    *,
    metrics: Sequence[str] = ("nc1",),
    layer: str = PENULTIMATE,
    split: str = "train",
) -> tuple[Path, Path]:
    """Overlay ``metrics`` of every run under ``paths`` (see :func:`find_runs`) in ``out`` (HTML) and write the
    :func:`runs_table` as CSV beside it (``out`` with suffix ``.csv``): :func:`load_comparison` then
    :func:`write_comparison`. Returns ``(html_path, csv_path)``.

    Each panel has one curve per run, labelled by the run's values of the differing config keys, and a dotted
    vertical line in the run's colour at its zero-error epoch.

    Raises
    ------
    FileNotFoundError
        A path that is not a run or sweep directory.
    KeyError
        A metric that no run measured at ``layer`` on ``split`` (the message lists the ones measured).
    """
    return write_comparison(load_comparison(paths, metrics=metrics, layer=layer, split=split), out)
