"""Registered training experiments (``nclab experiment run NAME --scale tiny|cpu|paper``).

* ``fashion-mnist-cnn`` -- the [Han et al. 2022] figure set at CPU scale: a balanced Fashion-MNIST subset padded to
  32 x 32, a small CNN, trained with MSE and with CE ([Han et al. 2022] recipe: SGD 0.9, wd 5e-4, batch 128, lr /10 at
  1/3 and 2/3 of the epochs), NC1-NC4 at the penultimate layer per measured epoch, train and test, with MSE vs
  CE overlays (Figs. 3-8, 10, 12 analogues). Needs the Fashion-MNIST files (``dataset-fashion-mnist``).
* ``digits-mlp-demo`` -- the ``nclab demo`` runs (MSE and CE on the embedded digits).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from rich.console import Console

from nclab.experiments.catalog import register
from nclab.io.rundir import RunDir
from nclab.io.yaml_io import load_yaml_file

__all__ = [
    "DEMO_CONFIG",
    "DEMO_LOSS_OVERRIDES",
    "FASHION_MNIST_CNN",
    "SCALES",
    "demo_config",
    "fashion_runs",
    "run_demo",
    "summary_table",
]

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


def summary_table(runs: dict[str, Any]) -> dict[str, float | str]:
    """The summary of training runs ``{loss: RunResult}`` as ``"loss: quantity" -> value``: each run's zero-error
    epoch (``not reached`` when the training error never reached 0), then NC1 and the errors
    (:func:`~nclab.report.run_report.collapse_summary`)."""
    from nclab.report.run_report import collapse_summary

    summary: dict[str, float | str] = {}
    for loss, r in runs.items():
        summary[f"{loss}: zero-error epoch"] = "not reached" if r.zero_error_epoch is None else r.zero_error_epoch
        for k, v in collapse_summary(r.rows, r.penultimate, r.zero_error_epoch).items():
            summary[f"{loss}: {k}"] = v
    return summary


#: Fashion-MNIST + small CNN ([Han et al. 2022] recipe); ``SCALES`` shrink it.
FASHION_MNIST_CNN: dict[str, Any] = {
    "name": "fashion-mnist-cnn",
    "preset": "han2022-mse",
    "data": {"name": "fashion-mnist", "per_class": 500, "test_per_class": 200, "pad_to": 32},
    "model": {"name": "cnn", "options": {"channels": [16, 32], "hidden": 128}},
    "train": {"threads": 2},
    "measure": {"num_log": 15},
}
SCALES: dict[str, dict[str, Any]] = {
    "tiny": {
        "preset": "han2022-mse@cpu",
        "data": {"per_class": 12, "test_per_class": 6},
        "model": {"options": {"channels": [4, 8], "hidden": 16}},
        "train": {"epochs": 3, "batch_size": 32},
        "measure": {"num_log": 2},
        "report": False,
    },
    # CPU scale: 2,000 training images and a cosine schedule over 80 epochs. The paper's step schedule with the
    # 350-epoch learning rates never reaches zero training error in 40-80 epochs here (measured: 8.5% MSE, 0.4% CE).
    "cpu": {
        "preset": "han2022-mse@cpu",
        "data": {"per_class": 200, "test_per_class": 100},
        "train": {"epochs": 80},
        "schedule": {"name": "cosine"},
        "measure": {"num_log": 12},
    },
}
# the paper scale is [Han et al. 2022]'s Fashion-MNIST column: nclab.experiments.reproductions.han2022_configs


#: Per-loss settings of the CPU scale (measured on the CPU-scale subset, docs/training.md): weight decay 5e-3 as in
#: the demo (at 5e-4 NC1 moves ~0.1 order of magnitude in the 50 epochs after zero training error, at 5e-3 0.7-0.9);
#: MSE on the [Han et al. 2022] own loss scaling (lambda = wd). Both pass zero training error (epochs ~29 and ~16).
CPU_LOSS_OVERRIDES: dict[str, dict[str, Any]] = {
    "mse": {"loss": {"reduction": "sum_half"}, "optim": {"lr": 0.04, "weight_decay": 5e-3}},
    "ce": {"optim": {"lr": 0.05, "weight_decay": 5e-3}},
}


def _fashion_cfg(scale: str, seed: int, loss: str) -> Any:
    from nclab.train.config import deep_merge, resolve_config

    raw = deep_merge(copy.deepcopy(FASHION_MNIST_CNN), SCALES[scale])
    preset = raw["preset"].replace("han2022-mse", f"han2022-{loss}")
    raw = deep_merge(raw, {"preset": preset, "seed": seed, "name": f"fashion-mnist-cnn-{loss}-{scale}"})
    if scale == "cpu":
        raw = deep_merge(raw, CPU_LOSS_OVERRIDES[loss])
    return resolve_config(raw)


def fashion_runs(scale: str, seed: int) -> dict[str, Any]:
    """``{label: RunConfig}``: at tiny and cpu scale ``mse`` and ``ce`` on the small CNN; at paper scale the
    [Han et al. 2022] Fashion-MNIST runs (VGG11, ResNet18, DenseNet250, each with MSE and CE)."""
    if scale != "paper":
        return {loss: _fashion_cfg(scale, seed, loss) for loss in ("mse", "ce")}
    from nclab.experiments.reproductions import han2022_configs

    return {k: c.model_copy(update={"seed": seed}) for k, c in han2022_configs(("fashion-mnist",)).items()}


@register(
    "fashion-mnist-cnn",
    summary="Fashion-MNIST, MSE vs CE past zero training error: NC1-NC4 per epoch ([Han et al. 2022]; cpu: a "
    "subset and a small CNN, paper: its VGG11 / ResNet18 / DenseNet250 protocol)",
    paper="[Han et al. 2022]",
)
def fashion_mnist_cnn(out: Path, scale: str, seed: int) -> dict[str, Any]:
    from nclab.report.figures import compare_figure
    from nclab.report.html import metrics_table_html, write_report
    from nclab.train.trainer import train

    runs = {
        label: train(cfg, out / label.split("/", 1)[-1].replace("/", "-"), overwrite=True, progress=scale != "tiny")
        for label, cfg in fashion_runs(scale, seed).items()
    }
    summary = summary_table(runs)
    metrics = ["nc1", "equinorm", "equiangularity", "max_angle", "self_duality", "ncc_mismatch"]
    # one MSE-vs-CE comparison per network (at tiny and cpu scale the one small CNN)
    nets: dict[str, dict[str, Any]] = {}
    for label, r in runs.items():
        net, _, loss = label.rpartition("/")
        nets.setdefault(net.split("/")[-1] or "cnn", {})[loss.upper()] = r
    figs = []
    for net, by_loss in nets.items():
        pen = next(iter(by_loss.values())).penultimate
        curves = {k: (r.rows, r.zero_error_epoch) for k, r in by_loss.items()}
        figs.append(
            (
                f"{net}: [Han et al. 2022, Figs. 3-8] / 10 analogues at the penultimate layer ({pen}), train split "
                "(dotted: zero-error epochs)",
                compare_figure(curves, metrics, pen),
            )
        )
        figs.append((f"{net}: [Han et al. 2022, Fig. 12] analogue: NC1 on the test split",
                     compare_figure(curves, ["nc1"], pen, "test")))  # fmt: skip
    links = "".join(f'<li><a href="{r.out.name}/report.html">{k}</a></li>' for k, r in runs.items())
    write_report(
        out / RunDir.REPORT,
        f"fashion-mnist-cnn ({scale})",
        [("Runs", f"<ul>{links}</ul>" + metrics_table_html(summary))],
        figs,
    )
    return summary


@register(
    "digits-mlp-demo",
    summary="The nclab demo: MLP on the embedded digits, MSE and CE past zero training error",
    paper="[Han et al. 2022]",
    scales=("tiny", "cpu"),
)
def digits_mlp_demo(out: Path, scale: str, seed: int) -> dict[str, Any]:
    path = run_demo(out, epochs=4 if scale == "tiny" else None, progress=scale != "tiny")
    return {"report": str(path)}
