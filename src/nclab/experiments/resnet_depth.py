"""The ResNet depth study of [Tirer & Bruna 2022, Figs. 5 / 10]: does a trained bias-free MSE ResNet behave like the
ReLU extended unconstrained-features model (Thm 4.2)?

The paper trains ResNet18 on MNIST (Fig. 5) and CIFAR-10 (Fig. 10) with the MSE loss and no bias in the classifier,
SGD lr 0.05 divided by 10 every 40 epochs, weight decay 5e-4, hooks at the output of each of its four ResBlocks (the
``layer1`` ... ``layer4`` stages of torchvision's network), and reads two things off its NC curves:

* NC1 decreases monotonically with depth (deeper features are more collapsed);
* the deepest features collapse *in structure* to an orthogonal frame (OF): the uncentred class means are
  orthogonal with equal norms (``orthogonal_frame_error``, NC2_OF of eq. (27)), and the classifier's rows too
  (the bias-free optimum of Thms 3.1 / 4.2; a simplex ETF, the optimum with a free bias, has OF error
  ``sqrt(2 - 2 sqrt((K-1)/K))`` = 0.32 at K = 10).

Experiment ``resnet-depth`` trains torchvision-layout ResNets of increasing depth (ResNet18, ResNet34) with a
bias-free linear head under the MSE loss with the paper's ``1/(2N) ||W H - Y||_F^2`` scaling (``reduction:
sum_half``) and reports, at the last epoch on the training split: NC1 of every residual block's output (and of
each stage's output, the paper's four ResBlocks), and the OF error of the last block's features (the classifier
input, the global average pool of the last block) and of the classifier ``W``. ``cpu``: the embedded 8x8 digits,
width 8 (minutes on 2 cores), ResNet18 and ResNet34; ``paper``: the paper's runs (ResNet18 on MNIST with MSE
without bias and CE with bias, Fig. 5; on CIFAR10 with MSE, Fig. 10; 120 epochs: the paper's number of epochs is
not in its text, 120 = three lr stages of 40, ours), as ``--dry-run`` lists them.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np

from nclab.experiments.catalog import register
from nclab.experiments.common import check_scale, html_table, legend, png, pyplot, write_csv
from nclab.io.rundir import RunDir

__all__ = ["DEPTHS", "RESNET_DEPTH", "SCALES", "block_layers", "depth_config", "stage_layers"]

#: The networks of the study, shallow to deep (``build_model`` names).
DEPTHS: tuple[str, ...] = ("resnet18", "resnet34")

#: The paper's recipe [Tirer & Bruna 2022, Sec. 6]: MSE without classifier bias, SGD lr 0.05 / 10 every 40 epochs,
#: weight decay 5e-4 (momentum 0.9 and batch 128 are ours: the paper does not state them).
RESNET_DEPTH: dict[str, Any] = {
    "model": {"head": {"kind": "linear", "bias": False}},
    "loss": {"name": "mse", "reduction": "sum_half"},
    "optim": {"name": "sgd", "lr": 0.05, "momentum": 0.9, "weight_decay": 5e-4},
    "schedule": {"name": "multistep", "gamma": 0.1},
    "train": {"batch_size": 128},
    "measure": {"splits": ["train"], "layers": "all"},
    "report": False,
}

#: Per CPU scale: data, width, epochs and lr milestones, measured epochs, and which layers get full statistics. The
#: paper scale runs the paper's own configs (:func:`_runs`); at its width a block's flattened output has up to 65,536
#: dimensions (too wide for NC1's d x d within-class covariance), so there the per-block metric is NC1's trace form
#: Tr Sigma_W / Tr Sigma_B (``trace_ratio``).
SCALES: dict[str, dict[str, Any]] = {
    "tiny": {
        "data": {"name": "digits", "per_class": 20, "test_per_class": 5},
        "width": 2,
        "epochs": 2,
        "milestones": [1],
        "num_log": 1,
        "full_layers": "all",
        "threads": 1,
    },
    "cpu": {
        "data": {"name": "digits", "per_class": 130, "test_per_class": 43},
        "width": 8,
        "epochs": 45,
        "milestones": [30],
        "num_log": 4,
        "full_layers": "all",
        "threads": 1,
    },
}


def depth_config(scale: str, model: str, seed: int = 0) -> dict[str, Any]:
    """The raw run config of network ``model`` (one of :data:`DEPTHS`) at ``scale``."""
    from nclab.train.config import deep_merge

    check_scale(scale, tuple(SCALES))
    s = SCALES[scale]
    return deep_merge(
        copy.deepcopy(RESNET_DEPTH),
        {
            "name": f"resnet-depth-{model}-{scale}",
            "seed": seed,
            "data": s["data"],
            "model": {"name": model, "options": {"width": s["width"]}},
            "schedule": {"milestones": s["milestones"]},
            "train": {"epochs": s["epochs"], "threads": s["threads"]},
            "measure": {"num_log": s["num_log"], "full_layers": s["full_layers"]},
        },
    )


def _runs(scale: str, seed: int) -> dict[str, Any]:
    """``{label: RunConfig}``: at ``tiny`` / ``cpu`` one bias-free MSE run per network of :data:`DEPTHS`; at
    ``paper`` the paper's runs, exactly those ``nclab experiment run resnet-depth --scale paper --dry-run`` lists
    (:func:`nclab.experiments.reproductions.resnet_depth_configs`: ResNet18 on MNIST with MSE / CE, CIFAR10 MSE)."""
    from nclab.train.config import resolve_config

    if scale in SCALES:
        return {model: resolve_config(depth_config(scale, model, seed)) for model in DEPTHS}
    from nclab.experiments.reproductions import resnet_depth_configs  # the registry checks their data first

    configs = resnet_depth_configs()
    return {label: cfg.model_copy(update={"seed": cfg.seed + seed}) for label, cfg in configs.items()}


def block_layers(layers: list[str]) -> list[str]:
    """The residual blocks among measured layer names, input side first: ``layer{s}.{b}``."""
    return [name for name in layers if name.startswith("layer") and "." in name]


def stage_layers(layers: list[str]) -> list[str]:
    """The last block of each stage (the stage's output: the paper's four ResBlocks of ResNet18)."""
    blocks = block_layers(layers)
    return [b for i, b in enumerate(blocks) if i + 1 == len(blocks) or blocks[i + 1].split(".")[0] != b.split(".")[0]]


def _non_increasing(values: list[float]) -> bool:
    return bool(np.all(np.diff(values) <= 0))


_YES_NO = {True: "yes", False: "no", None: "none reached zero training error"}


def _classifier_of(run_dir: Path) -> np.ndarray:
    """The trained classifier ``W (K, d)`` of a run, from its last checkpoint."""
    from nclab.train.checkpoint import load_checkpoint

    state = load_checkpoint(RunDir(run_dir).checkpoint)["model"]
    return state["head.weight"].double().numpy()


def _depth_figure(per_net: dict[str, dict[str, Any]], metric: str) -> Any:
    """Per-block ``metric`` at the last epoch against the block index, one curve per network (log y)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.8))
    for i, (model, res) in enumerate(per_net.items()):
        values = res["by_block"]
        ax.plot(range(1, len(values) + 1), values, marker="o", ms=4, color=f"C{i}", label=model)
        stages = [res["blocks"].index(s) + 1 for s in res["stages"]]
        ax.plot(stages, res["by_stage"], ls="none", marker="s", ms=8, mfc="none", color=f"C{i}")
    ax.set_yscale("log")
    ax.set_xlabel("residual block (input side first; squares: stage outputs)")
    ax.set_ylabel(metric)
    legend(ax)
    return fig


@register(
    "resnet-depth",
    summary="Bias-free MSE ResNets of increasing depth: NC1 per residual block and the orthogonal-frame structure "
    "of the last block ([Tirer & Bruna 2022, Figs. 5 / 10])",
    paper="[Tirer & Bruna 2022]",
)
def resnet_depth(out: Path, scale: str, seed: int) -> dict[str, Any]:
    from nclab.metrics import orthogonal_frame_error
    from nclab.report.html import write_report
    from nclab.train.trainer import train

    check_scale(scale, (*SCALES, "paper"))
    per_net: dict[str, dict[str, Any]] = {}
    # at the paper's width a block's flattened output is too wide for the d x d covariance: NC1's trace form there
    metric = "nc1" if scale in SCALES else "trace_ratio"
    runs = _runs(scale, seed)
    for model, cfg in runs.items():
        res = train(cfg, out / model.replace("/", "-"), overwrite=True, progress=False)
        last = max(res.measured_epochs)
        value = {r.layer: r.value for r in res.rows if r.split == "train" and r.epoch == last and r.metric == metric}
        of = {
            r.layer: r.value
            for r in res.rows
            if r.split == "train" and r.epoch == last and r.metric == "orthogonal_frame_error"
        }
        layers = list(dict.fromkeys(r.layer for r in res.rows if r.layer in value))
        blocks, stages = block_layers(layers), stage_layers(layers)
        per_net[model] = {
            "blocks": blocks,
            "stages": stages,
            "by_block": [value[b] for b in blocks],
            "by_stage": [value[s] for s in stages],
            "of_features": of[res.penultimate],
            "of_classifier": orthogonal_frame_error(_classifier_of(out / model.replace("/", "-"))),
            "zero_error_epoch": res.zero_error_epoch,
            "train_error": res.series("error", "output")[last],
            "final_loss": res.series("loss", "output").get(last),
        }
    rows = [
        {"network": m, "block": b, "stage output": b in r["stages"], metric: v}
        for m, r in per_net.items()
        for b, v in zip(r["blocks"], r["by_block"], strict=True)
    ]
    write_csv(out / "blocks.csv", rows)
    # the claims read converged networks only (zero training error at the last epoch: the terminal phase the
    # paper's figures show); the others are reported as dropped, with why
    converged = {m: r["train_error"] == 0 for m, r in per_net.items()}
    dropped = {
        m: f"train error {100 * r['train_error']:.3g} % at the last epoch (target: 0, the terminal phase)"
        for m, r in per_net.items()
        if not converged[m]
    }
    kept = [m for m in per_net if converged[m]]
    # the OF claim is the bias-free MSE optimum's: the deepest converged network (cpu), MNIST's run of Fig. 5 (paper)
    of_net = (
        (kept[-1] if kept else None)
        if scale in SCALES
        else next((m for m in kept if m == "mnist/resnet18/mse-nobias"), None)
    )
    from nclab.experiments.convergence import convergence_keys

    summary: dict[str, Any] = {
        "per_block_metric": metric,
        "networks": list(per_net),
        **{
            key: v
            for m, r in per_net.items()
            for key, v in convergence_keys(
                m,
                reached=converged[m],
                final_loss=r["final_loss"],
                target="zero training error at the last epoch",
                detail=f"{100 * r['train_error']:.3g} % training error at the end",
            ).items()
        },
        "converged": [converged[m] for m in per_net],
        "dropped": dropped,
        "final_loss": [r["final_loss"] for r in per_net.values()],
        "nc1_by_block": [r["by_block"] for r in per_net.values()],
        "nc1_by_stage": [r["by_stage"] for r in per_net.values()],
        # the paper's claim is at its four ResBlocks (stage outputs), over the converged networks (None: none
        # converged); every block's order, and every network's, is reported beside it
        "nc1_decreasing_in_depth": all(_non_increasing(per_net[m]["by_stage"]) for m in kept) if kept else None,
        "nc1_decreasing_in_depth_all_networks": all(_non_increasing(r["by_stage"]) for r in per_net.values()),
        "nc1_block_violations": [int(np.sum(np.diff(r["by_block"]) > 0)) for r in per_net.values()],
        "of_network": of_net,
        "of_error_last_block": None if of_net is None else per_net[of_net]["of_features"],
        "of_error_classifier": None if of_net is None else per_net[of_net]["of_classifier"],
        "of_error_last_block_by_net": [r["of_features"] for r in per_net.values()],
        "of_error_classifier_by_net": [r["of_classifier"] for r in per_net.values()],
        "zero_error_epoch": [
            "not reached" if r["zero_error_epoch"] is None else r["zero_error_epoch"] for r in per_net.values()
        ],
        "train_error_last": [r["train_error"] for r in per_net.values()],
    }
    table = [
        {
            "network": m,
            "zero-error epoch": "not reached" if r["zero_error_epoch"] is None else r["zero_error_epoch"],
            "train error (last)": r["train_error"],
            f"{metric} by stage (ResBlock 1-4)": ", ".join(f"{v:.3g}" for v in r["by_stage"]),
            "OF error, last block's features": r["of_features"],
            "OF error, classifier W": r["of_classifier"],
        }
        for m, r in per_net.items()
    ]
    caption = f"{metric} of each residual block's output at the last epoch, train split, one curve per network"
    first = next(iter(runs.values()))
    text = (
        f"<p>Runs: {', '.join(runs)}. MSE (1/(2N) ||WH - Y||^2) with a bias-free linear head"
        f"{' (CE with a bias beside it)' if scale not in SCALES else ''}, SGD lr {first.optim.lr} momentum "
        f"{first.optim.momentum}, /10 at epochs {first.schedule.milestones}, weight decay {first.optim.weight_decay}, "
        f"{first.train.epochs} epochs, data: {first.data.name}. The paper's claims: NC1 decreases with depth (at its "
        "four ResBlocks, over the networks that reached zero training error: here "
        f"{_YES_NO[summary['nc1_decreasing_in_depth']]}); the deepest "
        "features and the classifier approach an orthogonal frame (OF error 0; a simplex ETF has 0.32 at K = 10), "
        f"read on {of_net or 'no network (none reached zero training error)'}."
        + "".join(f" Dropped: {m}, {why}." for m, why in dropped.items())
        + "</p>"
    )
    write_report(
        out / RunDir.REPORT,
        f"resnet-depth ({scale}): NC1 against depth, bias-free MSE ResNets",
        [("Networks", text + html_table(table)), ("Per block (blocks.csv)", html_table(rows))],
        [(caption, png(_depth_figure(per_net, metric), out / "depth.png"))],
    )
    return summary
