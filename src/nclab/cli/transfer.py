"""Commands ``probe`` (linear probes of saved features, MLO / MLOG) and ``transfer run`` (a transfer study)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any, Literal

import typer
from rich.markup import escape

from nclab.cli.common import (
    OutputFormat,
    console,
    emit,
    err_console,
    fail,
    flag,
    format_option,
    make_app,
    note,
    out_option,
    user_errors,
    warnings_as_notes,
)

__all__ = ["app", "parse_lams", "parse_strength_grid", "probe_command", "run_command"]

app = make_app("transfer", "Transfer studies: pretrain a grid of settings, correlate collapse with MLOG.")


def parse_strength_grid(text: str) -> Any:
    """``--lams``: ``START:STOP:NUM`` (log-spaced, inclusive) or a comma-separated list of the probe's L2 strengths,
    as a numpy array (not :func:`nclab.cli.common.parse_lams`, which reads ``--lam KEY=VALUE`` regularisers)."""
    import numpy as np

    try:
        if ":" in text:
            start, stop, num = text.split(":")
            return np.logspace(math.log10(float(start)), math.log10(float(stop)), int(num))
        return np.array([float(v) for v in text.split(",")])
    except ValueError as err:
        raise typer.BadParameter(f"expected START:STOP:NUM or a comma list, got {text!r}", param_hint="--lams") from err


def parse_lams(text: str) -> Any:
    """Deprecated name of :func:`parse_strength_grid` (it clashed with :func:`nclab.cli.common.parse_lams`)."""
    import warnings

    warnings.warn(
        "nclab.cli.transfer.parse_lams is deprecated: use parse_strength_grid", DeprecationWarning, stacklevel=2
    )
    return parse_strength_grid(text)


def _task(item: str) -> tuple[str, Path]:
    name, sep, folder = item.partition("=")
    if not sep or not name or not folder:
        raise typer.BadParameter(f"expected NAME=FOLDER, got {item!r}", param_hint="--downstream")
    return name, Path(folder)


def probe_command(
    features: Annotated[str, typer.Argument(help="pretraining features (N, d) of the model: .npy, .npz, .pt")],
    labels: Annotated[str, typer.Argument(help="their integer labels (N,)")],
    downstream: Annotated[
        list[str],
        typer.Option(
            "--downstream",
            "-t",
            help="NAME=FOLDER: an `nclab extract --layout probe` folder of the same model, or one with "
            "{train,test}_features.npy and {train,test}_labels.npy (repeatable)",
        ),
    ],
    pretrain_accuracy: Annotated[
        float | None,
        typer.Option(
            "--pretrain-accuracy", "-p", min=0.0, max=1.0, help="pretraining test accuracy (fraction in [0, 1]): MLOG"
        ),
    ] = None,
    mean_per_class: Annotated[
        list[str] | None,
        typer.Option("--mean-per-class", help="report mean per-class accuracy for this task (repeatable)"),
    ] = None,
    lams: Annotated[str, typer.Option(help="L2 grid: START:STOP:NUM (log-spaced) or a comma list")] = "1e-6:1e6:97",
    val_fraction: Annotated[float, typer.Option(help="validation share of each task's training split")] = 0.2,
    device: Annotated[str, typer.Option(help="cpu or cuda")] = "cpu",
    fmt: Annotated[OutputFormat, format_option()] = OutputFormat.table,
) -> None:
    """Probe downstream tasks on frozen features: probe accuracies, MLO, MLOG and the collapse metrics.

    Prints the collapse metrics of FEATURES, each task's probe accuracy and chosen L2 strength, MLO and (with
    --pretrain-accuracy) MLOG. A perfect probe (accuracy 1) is a result: MLO is then +inf, and a note says so;
    notes (on stderr, and under "notes" in JSON) also name test classes a task's training split lacks."""
    import numpy as np

    from nclab.data import load
    from nclab.io.arrays import load_array
    from nclab.metrics import collapse_report
    from nclab.stats import ClassStats
    from nclab.train.config import check_device_available
    from nclab.transfer import linear_probe, mean_log_odds, mlog
    from nclab.transfer.scores import log_odds_note
    from nclab.transfer.study import PAPER_METRICS

    grid = parse_strength_grid(lams)
    tasks = [_task(t) for t in downstream]
    mpc = set(mean_per_class or [])
    unknown = mpc - {n for n, _ in tasks}
    if unknown:
        fail(f"--mean-per-class names no --downstream task: {sorted(unknown)}")
    out: dict[str, Any] = {}
    notes: list[str] = []
    # OSError: a feature file that cannot be read; the library's warnings (imbalance) as note: lines
    with user_errors(OSError), warnings_as_notes():
        check_device_available(device, name="--device")
        # a .npy FEATURES is memory-mapped and accumulated in row chunks, never loaded whole
        H = load_array(features)
        y = np.asarray(load_array(labels, mmap=False))
        report = collapse_report(ClassStats.from_arrays(H, y, batch_size=8192))
        out["metrics"] = {k: report[k] for k in PAPER_METRICS if k in report}
        accs = []
        out["tasks"] = {}
        for name, folder in tasks:
            tr, te = load("features", "train", root=folder), load("features", "test", root=folder)
            score: Literal["top1", "mean_per_class"] = "mean_per_class" if name in mpc else "top1"
            res = linear_probe(
                (tr.x, tr.y), (te.x, te.y), lams=grid, score=score, val_fraction=val_fraction, device=device
            )
            out["tasks"][name] = {"accuracy": res.accuracy, "score": score, "lam": res.lam}
            accs.append(res.accuracy)
            notes += [f"{name}: {note}" for note in res.notes]
        out["mlo"] = mean_log_odds(accs)
        if pretrain_accuracy is not None:
            out["mlog"] = mlog(accs, pretrain_accuracy)
        infinite = log_odds_note(dict(zip(out["tasks"], accs, strict=True)), pretrain_accuracy)
        notes += [infinite] if infinite is not None else []
    out["notes"] = notes
    for text in notes:
        note(text)
    if fmt is not OutputFormat.table:
        emit([{"task": name, **t} for name, t in out["tasks"].items()], fmt, data=out)
        return
    from rich.table import Table

    table = Table(title="linear probes")
    for col in ("task", "score", "accuracy", "L2 strength"):
        table.add_column(col)
    for name, t in out["tasks"].items():
        table.add_row(name, t["score"], f"{t['accuracy']:.4f}", f"{t['lam']:.3g}")
    console.print(table)
    for k, v in out["metrics"].items():
        console.print(f"{k} = {v:.6g}")
    console.print(f"MLO = {out['mlo']:.4f}" + (f", MLOG = {out['mlog']:.4f}" if "mlog" in out else ""))


@app.command("run")
def run_command(
    study: Annotated[Path, typer.Argument(help="study YAML (see nclab.transfer.study)")],
    out: Annotated[
        Path | None, out_option("study folder (default runs/transfer/<study name>; finished runs in it are reused)")
    ] = None,
    local: Annotated[
        bool, flag("--local", help="pretrain one trial after another in this process (default when Ray is missing)")
    ] = False,
    address: Annotated[
        str | None, typer.Option(help="an existing Ray cluster (host:port, ray://host:port or auto)")
    ] = None,
    fmt: Annotated[OutputFormat, format_option()] = OutputFormat.table,
) -> None:
    """Run a transfer study: pretrain every setting as a sweep, probe, correlate collapse with MLOG.

    The settings are pretrained as a sweep (OUT/runs, on Ray when installed), then probed; table.csv,
    correlations.csv and fig7.png are written to OUT and the correlations printed. Notes (why a correlation is
    nan, perfect probes) go to stderr and study.json."""
    from nclab.transfer.study import load_study, run_study
    from nclab.validation import check_output_dir

    if local and address is not None:
        fail("--local and --address exclude each other")
    with user_errors(OSError):  # OSError: a study file or run folder that cannot be read or written
        spec = load_study(study)
        out = out or Path("runs") / "transfer" / spec.name
        check_output_dir(out, name="--out")  # before the first training run
        res = run_study(
            spec,
            out,
            local=True if local else None,
            address=address,
            log=lambda line: err_console.print(escape(line), highlight=False),
        )
    for text in res.notes:
        note(text)
    rows = [
        {
            "group": c["group"],
            "metric": c["metric"],
            "Pearson r": c["pearson_r"],
            "Spearman rho": c["spearman_rho"],
            "r seed sd": c["r_seed_sd"],
        }
        for c in res.correlations
    ]
    if fmt is OutputFormat.json:
        emit([], fmt, data={"correlations": res.correlations, "notes": res.notes, "seconds": res.seconds})
    else:
        emit(rows, fmt, f"{spec.name}: correlation with MLOG ({res.seconds:.0f} s)")
    err_console.print(f"wrote {', '.join(str(p) for p in res.files.values())}", markup=False, highlight=False)
