"""The ``nclab demo`` runs, and experiment ``digits-mlp-demo`` that runs them: an MLP on the embedded digits,
trained with MSE [Han et al. 2022] and with cross-entropy well past zero training error.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console

from nclab.experiments.catalog import METRICS_CODE, TRAINING_CODE, register
from nclab.experiments.protocols import Protocol
from nclab.experiments.runs import summary_table
from nclab.io.rundir import RunDir
from nclab.io.yaml_io import load_yaml_file

__all__ = ["DEMO_CONFIG", "DEMO_LOSS_OVERRIDES", "demo_config", "digits_mlp_demo", "run_demo"]


#: The demo run (``configs/demo-digits-mlp.yaml`` holds the same, for ``nclab train``).
DEMO_CONFIG: dict[str, Any] = {
    "name": "demo",
    "seed": 0,
    "data": {"name": "digits", "per_class": 130, "test_per_class": 43},
    "model": {
        "name": "mlp",
        "options": {"widths": [128, 128, 128], "batchnorm": True},
        "head": {"kind": "linear", "bias": True},
    },
    "loss": {"name": "ce"},
    "optim": {"name": "sgd", "lr": 0.05, "momentum": 0.9, "weight_decay": 5e-3},
    "schedule": {"name": "cosine"},
    "train": {"epochs": 200, "batch_size": 128, "threads": 1},
    # every hidden layer fully tracked (3 x 128 dimensions: cheap): NC1 itself against depth in the reports
    "measure": {"num_log": 16, "splits": ["train", "test"], "full_layers": "all"},
    "checkpoint": {"every": 5},
}


#: Per-loss changes of the two ``nclab demo`` runs (MSE needs a larger step than CE on this MLP).
DEMO_LOSS_OVERRIDES: dict[str, dict[str, Any]] = {"mse": {"optim": {"lr": 0.1}}, "ce": {}}


def demo_config(loss: str) -> dict[str, Any]:
    """The raw config of the ``nclab demo`` run with ``loss`` (``"mse"`` or ``"ce"``)."""
    from nclab.train.config import deep_merge

    if loss not in DEMO_LOSS_OVERRIDES:
        raise ValueError(f"the demo trains with {' or '.join(DEMO_LOSS_OVERRIDES)}, not {loss!r}")
    return deep_merge(DEMO_CONFIG, {"name": f"demo-{loss}", "loss": {"name": loss}, **DEMO_LOSS_OVERRIDES[loss]})


def run_demo(
    out: Path,
    *,
    epochs: int | None = None,
    progress: bool = True,
    console: Console | None = None,
    overwrite: bool = False,
) -> Path:
    """The ``nclab demo`` runs: an MLP on the embedded digits, trained with MSE and with CE well past zero
    training error (``configs/demo-digits-mlp.yaml`` with ``loss.name`` switched), each in its own subfolder
    ``out/mse`` and ``out/ce`` (metrics.csv, report.html, ...), plus ``out/report.html`` comparing them.
    Returns the path of that summary report. ``epochs`` shortens the runs (tests); ``console`` receives the
    progress lines (default: a console on stderr). A run already in ``out/mse`` or ``out/ce`` is re-run in place
    when its resolved config is the one about to run; a different one raises ``FileExistsError`` (nothing is
    touched) unless ``overwrite``."""
    from nclab.io.run_table import relabel_output
    from nclab.report.figures import compare_figure, layer_profile_figure, layers_of
    from nclab.report.html import metrics_table_html, write_report
    from nclab.train.config import resolve_config
    from nclab.train.trainer import train

    out = Path(out)
    console = console or Console(stderr=True)
    runs = {}
    cfgs = {
        loss: resolve_config(demo_config(loss), [f"train.epochs={epochs}"] if epochs is not None else [])
        for loss in DEMO_LOSS_OVERRIDES
    }
    if not overwrite:
        for loss, cfg in cfgs.items():
            saved = RunDir(out / loss).config
            if saved.is_file() and load_yaml_file(saved) != cfg.to_dict():
                raise FileExistsError(
                    f"{out / loss} holds a different run (its config.yaml differs from this demo's); "
                    "pass --overwrite to replace it or --out to write elsewhere"
                )
    for loss, cfg in cfgs.items():
        console.print(f"[bold]demo[/bold]: training {cfg.name} ({cfg.train.epochs} epochs) into {out / loss}")
        runs[loss] = train(cfg, out / loss, overwrite=True, progress=progress, console=console)
    summary = summary_table(runs)
    pen = runs["mse"].penultimate
    # the network's error sits at the output layer: relabel it to plot it beside the penultimate metrics
    merged = {k.upper(): (relabel_output(r.rows, pen), r.zero_error_epoch) for k, r in runs.items()}
    fig = compare_figure(merged, ["nc1", "trace_ratio", "etf_gram_error", "self_duality", "ncc_mismatch", "error"], pen)
    depth = {k.upper(): (r.rows, r.zero_error_epoch) for k, r in runs.items()}
    # NC1 itself where every hidden layer was fully tracked (the demo config), else its PFC1 form
    metric = "nc1" if len(layers_of(runs["mse"].rows, "nc1")) > 1 else "trace_ratio"
    depth_fig = layer_profile_figure(depth, [metric])
    links = "".join(f'<li><a href="{k}/report.html">{k.upper()} run report</a></li>' for k in runs)
    body = (
        "<p>Digits (embedded, balanced subset), MLP with three measured hidden layers, trained with MSE "
        "[Han et al. 2022] "
        f"and with cross-entropy past zero training error. Per-run reports (every metric, per-layer curves and "
        f"heatmaps, train vs test):</p><ul>{links}</ul>" + metrics_table_html(summary)
    )
    caption = (
        f"{'NC1' if metric == 'nc1' else 'PFC1 (Tr Sw / Tr Sb)'} against depth (the hidden layers, input side "
        "first) at each run's first, zero-error (when reached) and last measured epoch, light to dark, train split "
        "[Wang et al. 2024, Fig. 3]"
    )
    return write_report(
        out / RunDir.REPORT,
        "nclab demo: neural collapse of an MLP on digits, MSE vs CE",
        [("Runs", body)],
        [
            (f"MSE vs CE at the penultimate layer ({pen}); dotted lines: zero-error epochs", fig),
            (caption, depth_fig),
        ],
    )


def _demo(scale: str) -> list[Protocol]:
    from nclab.train.config import resolve_config

    over = ["train.epochs=4"] if scale == "tiny" else []  # the experiment's tiny run: run_demo(epochs=4)
    return [Protocol.from_config(resolve_config(demo_config(loss), over), loss) for loss in DEMO_LOSS_OVERRIDES]


@register(
    "digits-mlp-demo",
    summary="The nclab demo: MLP on the embedded digits, MSE and CE past zero training error",
    paper="[Han et al. 2022]",
    scales=("tiny", "cpu"),
    durations={"tiny": "~15 s", "cpu": "~40 s"},
    protocols=_demo,
    code=("nclab.experiments.runs", *TRAINING_CODE, *METRICS_CODE),
)
def digits_mlp_demo(out: Path, scale: str, seed: int) -> dict[str, Any]:
    path = run_demo(out, epochs=4 if scale == "tiny" else None, progress=scale != "tiny")
    return {"report": str(path)}
