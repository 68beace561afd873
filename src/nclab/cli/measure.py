"""Command ``measure``: every collapse metric of saved features, streamed in two passes (:func:`measure_arrays`)."""

from __future__ import annotations

import csv
import io
import json
import math
from typing import TYPE_CHECKING, Annotated, Any

import typer

from nclab.cli.common import (
    USER_ERRORS,
    OutputFormat,
    console,
    err_console,
    fail,
    flag,
    format_option,
    note,
    num_classes_option,
    parse_key_values,
    warnings_as_notes,
)

if TYPE_CHECKING:
    from nclab.stats.class_stats import Track

__all__ = ["measure_arrays", "measure_command"]


def _parse_conventions(items: list[str] | None) -> dict[str, Any]:
    """``key=value`` items (values read as YAML scalars, so ``true`` / ``false`` are the only booleans); an
    unknown key or a value the key does not accept (:func:`nclab.metrics.check_convention`) raises
    ``typer.BadParameter`` naming both (exit 2)."""
    from nclab.io.yaml_io import load_yaml
    from nclab.metrics import DEFAULT_CONVENTIONS, check_convention

    out: dict[str, Any] = {}
    for key, text in parse_key_values(items, "--convention", sorted(DEFAULT_CONVENTIONS)).items():
        try:
            out[key] = check_convention(key, load_yaml(text, source=f"--convention {key}"), name=key)
        except (TypeError, ValueError) as err:
            raise typer.BadParameter(f"{key}={text!r} is not accepted: {err}", param_hint="--convention") from None
    return out


def _progress() -> Any:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=err_console,
        transient=True,
    )


def _stream(progress: Any, desc: str, features: Any, labels: Any, batch_size: int, sink: Any) -> None:
    from nclab.io.arrays import iter_batches

    n = features.shape[0]
    task = progress.add_task(desc, total=n)
    for xb, yb in iter_batches(features, labels, batch_size):
        sink.update(xb, yb)
        progress.advance(task, len(yb))


def measure_arrays(
    features: Any,
    labels: Any,
    *,
    K: int | None = None,
    W: Any = None,
    b: Any = None,
    conventions: dict[str, Any] | None = None,
    batch_size: int = 8192,
    show_progress: bool = True,
    track: Track = "full",
    classes: str = "all",
    min_count: int | None = None,
    compute_dtype: str = "float64",
) -> dict[str, float]:
    """Two streaming passes (ClassStats with ``track``, then NCC) and the full collapse report over ``classes``
    (:func:`nclab.metrics.select_classes`); the conventions, classes and ``batch_size`` are checked before the
    first pass."""
    import numpy as np

    from nclab.measure.passes import PresentNCC
    from nclab.metrics import check_conventions, collapse_report
    from nclab.metrics.classes import check_classes, select_classes
    from nclab.stats import ClassStats, NCCAccumulator
    from nclab.validation import check_finite, check_int, infer_num_classes

    batch_size = check_int(batch_size, name="batch_size", low=1)
    check_conventions(conventions)
    rule, _ = check_classes(classes, min_count)

    labels = np.asarray(labels)
    if labels.ndim != 1:
        raise ValueError(f"labels must be 1-D, got shape {labels.shape}")
    if not np.issubdtype(labels.dtype, np.integer):
        raise TypeError(f"labels must have an integer dtype, got {labels.dtype}")
    # the classifier is checked before the streaming passes, not after the first of them
    W = None if W is None else check_finite(W, name="W")
    b = None if b is None else check_finite(b, name="b")
    if K is None:
        K = infer_num_classes(labels, name="labels")
    if len(features.shape) != 2:
        raise ValueError(f"features must be 2-D (N, d), got shape {tuple(features.shape)}")
    # refuses state that does not fit, and a compute_dtype other than float64 / float32
    stats = ClassStats(K, features.shape[1], track=track, compute_dtype=compute_dtype)  # type: ignore[arg-type]
    with _progress() as progress:
        if not show_progress:
            progress.disable = True
        _stream(progress, "class statistics", features, labels, batch_size, stats)
        ncc: Any = None
        if rule == "present" and stats.N:
            sub, Ws, bs, keep = select_classes(stats, W, b, classes="present", min_count=min_count)
            acc = NCCAccumulator(sub, W=Ws, b=bs)  # type: ignore[arg-type]
            _stream(progress, "NCC pass", features, labels, batch_size, PresentNCC(acc, keep, K))
            ncc = acc
        elif stats.empty_classes.size == 0:
            ncc = NCCAccumulator(stats, W=W, b=b)
            _stream(progress, "NCC pass", features, labels, batch_size, ncc)
    return collapse_report(
        stats,
        W=W,
        b=b,
        ncc=ncc,
        conventions=conventions,
        classes=rule,
        min_count=min_count,  # type: ignore[arg-type]
    )


def _json_value(v: Any) -> Any:
    """Strict JSON has no Infinity/NaN tokens: non-finite metric values (documented degenerate cases) are written
    as the strings "inf", "-inf", "nan", which ``float()`` reads back."""
    v = float(v)
    return v if math.isfinite(v) else str(v)


def _to_json(report: dict[str, float]) -> str:
    return json.dumps({k: _json_value(v) for k, v in report.items()}, indent=2, allow_nan=False)


def _emit(report: dict[str, float], fmt: OutputFormat, title: str) -> None:
    from nclab.metrics import REGISTRY

    if fmt is OutputFormat.json:
        typer.echo(_to_json(report))
        return
    if fmt is OutputFormat.csv:
        buf = io.StringIO()
        writer = csv.writer(buf)
        writer.writerow(["metric", "value"])
        for k, v in report.items():
            writer.writerow([k, repr(float(v))])
        typer.echo(buf.getvalue().rstrip("\n"))
        return
    from rich.table import Table

    table = Table(title=title)
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("collapse is", justify="center")
    for k, v in report.items():
        info = REGISTRY.get(k)
        arrow = {"lower": "lower", "higher": "higher"}.get(info.direction if info else "", "")
        table.add_row(k, _fmt(v), arrow)
    console.print(table)


def _fmt(v: float) -> str:
    v = float(v)
    if math.isnan(v) or math.isinf(v):
        return str(v)
    if v == int(v) and abs(v) < 1e9:
        return str(int(v))
    return f"{v:.6g}"


def measure_command(
    features: Annotated[str, typer.Argument(help="features (N, d): .npy, .npz, .pt, .safetensors (FILE:NAME)")],
    labels: Annotated[str, typer.Argument(help="integer labels (N,): same formats")],
    classifier: Annotated[
        str | None, typer.Option("--classifier", "-w", help="classifier weights W (K, d), rows = classes")
    ] = None,
    bias: Annotated[str | None, typer.Option("--bias", "-b", help="classifier bias b (K,)")] = None,
    K: Annotated[int | None, num_classes_option("number of classes K (default max label + 1)")] = None,
    convention: Annotated[
        list[str] | None,
        typer.Option(
            "--convention", "-c", help="override a metric convention: key=value (repeatable; docs/conventions.md)"
        ),
    ] = None,
    fmt: Annotated[OutputFormat, format_option()] = OutputFormat.table,
    batch_size: Annotated[int, typer.Option(help="rows per streamed chunk", min=1)] = 8192,
    track: Annotated[
        str,
        typer.Option(
            "--track",
            help="full: every metric (keeps a d x d matrix); light: the O(K d) metrics only (for very wide features)",
        ),
    ] = "full",
    present: Annotated[
        bool,
        flag(
            "--present",
            help="measure the classes present: those with >= --min-count samples (the classifier's rows and bias "
            "subset with them; docs/conventions.md); without it every class, and an empty class is an error",
        ),
    ] = False,
    min_count: Annotated[
        int | None, typer.Option("--min-count", help="samples a class needs with --present (default 1)")
    ] = None,
    compute_dtype: Annotated[
        str,
        typer.Option(
            "--compute-dtype",
            help="float64, or float32: the per-batch Gram as float32 GEMMs, accumulated in float64 (docs/stats.md)",
        ),
    ] = "float64",
    verify_checksum: Annotated[
        bool, flag("--verify-checksum", help="read each file once more to check its SHA-256 against manifest.json")
    ] = False,
) -> None:
    """Report every collapse metric of saved features (streamed; memory-mapped .npy never loads whole).

    Files of an `nclab extract` folder are checked against its manifest.json (size, dtype, shape; with
    --verify-checksum also the SHA-256 of the data, which costs one more read of each file), and files of one
    folder must all belong to its extraction. `nclab metrics list` describes the metrics (their NC1-NC4 / PFC /
    GNC label, direction, definition and citation); "collapse is" says whether lower or higher values mean more
    collapse."""
    import numpy as np

    from nclab.io import manifest
    from nclab.io.arrays import load_array, split_key
    from nclab.stats import EmptyClassError
    from nclab.stats.class_stats import Track
    from nclab.validation import check_choice

    conventions = _parse_conventions(convention)
    try:
        files = [None if spec is None else split_key(spec)[0] for spec in (features, labels, classifier, bias)]
        manifest.check_same_extraction(files)
        H = load_array(features)
        y = np.asarray(load_array(labels, mmap=False))
        W = None if classifier is None else np.asarray(load_array(classifier, mmap=False), dtype=np.float64)
        b = None if bias is None else np.asarray(load_array(bias, mmap=False), dtype=np.float64)
        unchecked = [p for p in dict.fromkeys(files) if p and verify_checksum and not manifest.verify_checksum(p)]
        if unchecked:
            note(f"no checksum to verify for {', '.join(map(str, unchecked))}")
        with warnings_as_notes():
            report = measure_arrays(
                H,
                y,
                K=K,
                W=W,
                b=b,
                conventions=conventions,
                batch_size=batch_size,
                show_progress=fmt is OutputFormat.table,
                track=check_choice(track, Track, name="--track"),
                classes="present" if present else "all",
                min_count=min_count,
                compute_dtype=compute_dtype,
            )
    except USER_ERRORS as err:
        hint = ""
        if isinstance(err, EmptyClassError):
            hint = " (check --num-classes against the labels, or pass --present)"
        fail(err, hint)
    _emit(report, fmt, f"collapse metrics of {features}")
