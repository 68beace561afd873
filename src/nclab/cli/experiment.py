"""Commands ``experiment list`` and ``experiment run NAME`` (the Typer group :data:`app`).

The ``tiny`` scale of every experiment is a smoke test (seconds; it exercises the code, its figures show no
collapse): ``experiment list`` says so beside its time, ``experiment run --scale tiny`` in a note, and its reports
in a banner (:data:`nclab.experiments.SMOKE_TEST_NOTE`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from nclab.cli.common import (
    OutputFormat,
    emit,
    emit_records,
    err_console,
    flag,
    format_option,
    make_app,
    note,
    out_option,
    user_errors,
)

__all__ = ["app"]

app = make_app("experiment", "Registered reproductions of the papers' experiments.")


def _scale(scale: str) -> str:
    return f"{scale} (smoke test)" if scale == "tiny" else scale


def _gib(x: float) -> str:
    """Two significant figures below 10 GiB (0.08, 3.8), whole GiB above (11, 145)."""
    return f"{x:.2g}" if x < 10 else f"{x:.0f}"


def _cost_line(scale: str, info: dict[str, Any]) -> str:
    """The cost of ``scale`` in short lines (the list's cost column does not wrap)."""
    est = info["estimate"]
    if "gpu_hours" in est:
        lines = [
            f"{_scale(scale)}: {info['runs']} run{'s' * (info['runs'] != 1)}",
            f"  ~{est['gpu_hours']:.1f} H200 GPU-h",
        ]
        if est["sweep_gpu_hours"] > est["gpu_hours"]:
            lines.append(f"  ({est['sweep_gpu_hours']:.0f} with lr sweep)")
        return "\n".join([*lines, f"  {_gib(est['memory_gib'])} GiB peak"])
    return f"{_scale(scale)}: {est['time_2_cores']}"


@app.command("list")
def experiment_list(fmt: Annotated[OutputFormat, format_option()] = OutputFormat.table) -> None:
    """List the registered experiments: per scale what runs, its expected cost and the data it needs.

    tiny and cpu times are wall times measured on this 2-core machine ("not timed" where no measurement was made;
    "<=" where the machine was loaded: upper bounds). A training experiment's paper scale gives H200 GPU-hours
    estimated from measured throughput (the basis is in -f json) and its peak memory. The tiny scale is a smoke
    test: it runs in seconds to check that the code works, and its figures do not show collapse; cpu is the
    smallest scale whose results mean something. `nclab experiment run NAME --scale paper --dry-run` prints a
    scale's full protocol."""
    from nclab.experiments.listing import compute_listing, read_listing

    items = read_listing() or compute_listing()
    if fmt is OutputFormat.json:
        emit([], fmt, data=items)
        return
    if fmt is OutputFormat.csv:
        rows = [
            {
                "name": it["name"],
                "paper": it["paper"],
                **{f"{s} time": it[f"{s} time"] for s in ("tiny", "cpu", "paper")},
                "paper estimate": " ".join(_cost_line("paper", it["scales"]["paper"]).split())
                if "paper" in it["scales"]
                else "",
                "data": " ".join(dict.fromkeys(d["name"] for info in it["scales"].values() for d in info["data"])),
                "scales": " ".join(it["scales"]),
                "summary": it["summary"],
            }
            for it in items
        ]
        emit(rows, fmt)
        return
    from rich.table import Table

    from nclab.cli.common import console

    table = Table(title="nclab experiments", expand=True)
    # the summary sits under the name (its own column folded one word per line at 100 columns)
    table.add_column("experiment", ratio=1, min_width=30, overflow="fold")
    table.add_column("paper", width=13)
    table.add_column("scale: cost", no_wrap=True)
    table.add_column("data (paper scale)", width=14, overflow="fold")
    blocks = []
    for it in items:
        costs = "\n".join(_cost_line(s, info) for s, info in it["scales"].items())
        needs = ", ".join(d["name"] for d in it["scales"].get("paper", {}).get("data", [])) or "-"
        table.add_row(f"[bold]{escape(it['name'])}[/bold]\n{escape(it['summary'])}", escape(it["paper"]), costs, needs)
        blocks.append((it, costs, needs))
    # a narrow terminal or a pipe (80 columns) would fold the names mid-word: one block per experiment instead
    longest_cost = max(len(line) for _, costs, _ in blocks for line in costs.splitlines())
    if max(len(it["name"]) for it in items) + 13 + longest_cost + 14 + 13 > console.width:  # + widths, borders
        for it, costs, needs in blocks:
            lines = [f"{it['name']}  {it['paper']}", f"  {it['summary']}", *(f"  {c}" for c in costs.splitlines())]
            console.print("\n".join([*lines, f"  data (paper scale): {needs}"]), markup=False, highlight=False)
    else:
        console.print(table)
    console.print(
        "Data: put each dataset in $NCLAB_DATA/<name> (or /usr/share/datasets/<name>); the layout each expects is "
        "in -f json (scales.<scale>.data) and in the error of a run that misses it. nclab never downloads.",
        highlight=False,
        soft_wrap=False,
    )


def _summary_rows(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """The summary as quantity / value rows, each value a number or a word: a mapping gives one row per entry
    (``nc1_last (mse)``), a missing value reads ``not reached`` where it belongs to the zero-error epoch (a run that
    never got there) and ``undefined`` otherwise, never ``none`` or ``{}``."""
    rows: list[dict[str, Any]] = []
    for key, value in summary.items():
        missing = "not reached" if "zero_error" in str(key) else "undefined"
        if isinstance(value, dict):
            rows += [{"quantity": f"{key} ({k})", "value": missing if v is None else v} for k, v in value.items()]
            if not value:
                rows.append({"quantity": str(key), "value": missing})
        else:
            rows.append({"quantity": str(key), "value": missing if value is None else value})
    return rows


@app.command("run")
def experiment_run(
    name: Annotated[str, typer.Argument(help="experiment name (see `nclab experiment list`)")],
    scale: Annotated[str, typer.Option(help="tiny (a smoke test) | cpu | paper")] = "cpu",
    out: Annotated[Path | None, out_option("output folder (default runs/experiments/NAME-SCALE)")] = None,
    seed: Annotated[int, typer.Option(help="random seed")] = 0,
    dry_run: Annotated[
        bool, flag("--dry-run", help="print the resolved protocol of each run and exit; runs and reads nothing")
    ] = False,
    runs: Annotated[
        list[str] | None,
        typer.Option(
            "--runs",
            help="paper scale: train only the runs matching this pattern (repeatable; labels as --dry-run shows)",
            metavar="<str>",
        ),
    ] = None,
    epochs: Annotated[
        int | None,
        typer.Option(help="paper scale: train each run this many epochs (at most the paper's), the schedule rescaled"),
    ] = None,
    device: Annotated[
        str | None,
        typer.Option(
            help="paper scale: where the runs train (default cuda, one GPU, as the cost estimate assumes; cpu is "
            "hundreds to thousands of times slower)",
            metavar="<str>",
        ),
    ] = None,
    fmt: Annotated[OutputFormat, format_option()] = OutputFormat.table,
) -> None:
    """Run one registered experiment and print its summary; its tables, figures and report.html go to OUT.

    Progress, notes and the output folder go to stderr, the summary to stdout (a table, or JSON / CSV with -f).
    --scale tiny is a smoke test: its report says so. --dry-run prints what would run (the resolved protocol of
    each run, its cost and data) and exits without training or reading data. --runs and --epochs cut a paper
    protocol to the data or hours at hand (e.g. --runs 'fashion-mnist/*' --epochs 30); the summary and every
    report page say what was cut; --epochs above a run's own is refused (a cut never extends). Paper scale trains on
    one CUDA GPU; --device cpu runs it on the CPU instead (a machine without CUDA is refused before anything is
    written, naming this option)."""
    from nclab.experiments import SMOKE_TEST_NOTE, run
    from nclab.experiments.protocols import RunSelection

    with user_errors():
        selection = RunSelection(runs=tuple(runs or ()), epochs=epochs)
    if dry_run:
        _dry_run(name, scale, fmt, selection, device)
        return
    # a cut trains configs of its own: apart from the full protocol's runs (which would refuse them)
    out = out or Path("runs/experiments") / f"{name}-{scale}{'' if selection.is_all else '-cut'}"
    with user_errors():
        summary = run(name, out, scale=scale, seed=seed, selection=selection, device=device)
    if scale == "tiny":
        note(SMOKE_TEST_NOTE)
    if fmt is OutputFormat.json:
        emit([], fmt, data=summary)
    else:
        title = f"{name} ({_scale(scale)})"
        claims = summary.pop("paper_claims", [])
        emit(_summary_rows(summary), fmt, title)
        if claims and fmt is OutputFormat.table:  # CSV stays one table: the claims are in summary.json and -f json
            cols = ("claim", "verdict", "paper_value", "ours")  # long texts: one block per claim, not a wrapped table
            emit_records([{k: c[k] for k in cols} for c in claims], f"{name}: paper vs ours (criteria: -f json)")
    err_console.print(f"outputs in {out} (report: {out / 'report.html'})", markup=False, highlight=False)


def _dry_run(name: str, scale: str, fmt: OutputFormat, selection: Any, device: str | None = None) -> None:
    """Print the protocols ``name`` runs at ``scale`` (one table row per run; JSON: the list-entry of the scale);
    a cut (``selection``) keeps the selected runs and says how their epochs are cut; a paper scale that this
    machine cannot train (no CUDA) or a CPU run says so."""
    from nclab.experiments import dry_run, get
    from nclab.experiments.listing import scale_info
    from nclab.experiments.registry import check_paper_device
    from nclab.experiments.runs import paper_device

    with user_errors(KeyError):
        exp = get(name)
        with paper_device(device or "cuda"):
            protocols = dry_run(name, scale, selection)
        info = scale_info(exp, scale, protocols)
        if device is not None and scale != "paper":
            check_paper_device(name, scale, device)  # the refusal `experiment run` gives
    if not selection.is_all:
        note(f"cut: {selection.describe()}; the protocols and cost below are the paper's epochs and schedule")
    if scale == "paper" and any(p.kind == "training" for p in protocols):
        try:
            check_paper_device(name, scale, device)
        except ValueError as err:
            note(f"`experiment run` would refuse this: {err}")
        if device is not None and torch_device_type(device) == "cpu":
            note(
                "--device cpu: the cost below is one H200 GPU's (9.8 ms per ResNet-18 step of 128 images); on a CPU "
                "a step takes seconds (23-40 s on a shared 2-core machine), hundreds to thousands of times longer"
            )
    if fmt is OutputFormat.json:
        emit([], fmt, data={"name": name, "scale": scale, "papers": exp.papers, **info})
        return
    if not protocols:
        note(f"experiment {name!r} declares no protocol at scale {scale}: it runs as its module defines")
    rows = [_protocol_row(p.to_dict()) for p in protocols]
    cost = ", ".join(line.strip() for line in _cost_line(scale, info).splitlines())
    emit(rows, fmt, f"{name}: {cost}")
    for need in info["data"]:
        err_console.print(
            f"data {need['name']}: {need['layout']} (looked for in {', '.join(need['where'])})",
            markup=False,
            highlight=False,
        )


def torch_device_type(device: str) -> str:
    """The type of a torch device string (``"cuda:1"`` -> ``"cuda"``)."""
    return device.split(":", 1)[0]


def _protocol_row(p: dict[str, Any]) -> dict[str, Any]:
    """One protocol as a table row (nested values flattened to words)."""
    if p["kind"] == "solver":
        return {"run": p["label"], **{k: _word(v) for k, v in p["solver"].items()}, "seeds": _word(p["seeds"])}
    data = p["data"]
    return {
        "run": p["label"],
        "model": p["model"] + (f" {_word(p['model_options'])}" if p["model_options"] else ""),
        "head": _word({k: v for k, v in p["head"].items() if v is not None}),
        "data": f"{data['name']} {data['input_size']}px"
        + (f" classes {_word(data['classes'])}" if data["classes"] else "")
        + (f" {data['per_class']}/class" if data["per_class"] else ""),
        "augment": p["augmentation"] or "none",
        "loss": p["loss"] + (f" {_word(p['loss_options'])}" if p["loss_options"] else ""),
        "optimiser": f"{p['optimiser']['name']}"
        + (f" m={p['optimiser']['momentum']:g}" if p["optimiser"]["momentum"] is not None else "")
        + (" nesterov" if p["optimiser"]["nesterov"] else ""),
        "lr": f"{p['lr']:g}" + (f" (sweep of {len(p['lr_sweep'])})" if p["lr_sweep"] else ""),
        "schedule": _word(p["schedule"]),
        "batch": p["batch"],
        "epochs": p["epochs"],
        "wd": p["weight_decay"],
        "seeds": _word(p["seeds"]),
        "measure": _word(
            {k: v for k, v in p["measure"].items() if not (k == "num_log" and p["measure"]["epochs"] != "log")}
        ),
    }


def _word(value: Any) -> str:
    if isinstance(value, dict):
        return " ".join(f"{k}={_word(v)}" for k, v in value.items())
    if isinstance(value, list):
        return (
            ",".join(_word(v) for v in value)
            if len(value) <= 6
            else f"{_word(value[0])}..{_word(value[-1])} ({len(value)})"
        )
    return f"{value:g}" if isinstance(value, float) else str(value)
