"""What we run for [Wang et al. 2024]: the progressive feedforward collapse experiments, each registered with its facts
(durations, protocols per scale, builders, code).

* ``geodesic-digits`` ([Wang et al. 2024, Fig. 3] analogue): a small fully connected ResNet trained on the embedded
  digits; PFC1/2/3 of every block output against relative depth, with the geodesic prediction overlaid.
* ``pfc-table1`` ([Wang et al. 2024] Table I rows and Figs. 2-3): the Table I network of each dataset, Sec. IV-A's
  recipe, every block of the last stage measured (:func:`pfc_configs`), summarised by :func:`pfc_depth_of_runs`.
* ``mufm-tradeoff`` ([Wang et al. 2024, Figs. 4-5]): MUFM vs UFM optima and metrics against lambda / lambda_W.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from nclab.experiments.catalog import METRICS_CODE, TRAINING_CODE, register
from nclab.experiments.common import (
    by_scale,
    check_scale,
    finish_report,
    legend,
    log_ticks,
    png,
    pyplot,
    write_csv,
)
from nclab.experiments.protocols import Protocol, RunSelection
from nclab.experiments.runs import protocols_of, resolve_paper, run_configs, run_key, tiny_configs
from nclab.io.rundir import RunDir
from nclab.metrics import etf_gram_error, ncc_metrics, trace_ratio
from nclab.report import metrics_table_html, write_report
from nclab.stats import ClassStats
from nclab.ufm import mufm
from nclab.ufm.solvers import solve

__all__ = [
    "PFC_DEPTH_DIRECTIONS",
    "depth_profile",
    "geodesic_digits",
    "mufm_tradeoff",
    "pfc_configs",
    "pfc_depth_of_runs",
    "pfc_depth_summary",
    "pfc_table1",
    "train_fc_resnet",
]


# ---------------------------------------------------------------------------------------------- geodesic-digits
# ----------------------------------------------------------------------------------------------
# [Wang et al. 2024, Fig. 3]
def train_fc_resnet(
    X: np.ndarray,
    y: np.ndarray,
    *,
    blocks: int,
    steps: int,
    seed: int,
    lr: float = 0.05,
    weight_decay: float = 5e-4,
    fit: dict[str, float] | None = None,
) -> list[np.ndarray]:
    """Train the [Wang et al. 2024] fully connected ResNet (:class:`nclab.nets.FCResNet`, width = input dimension,
    blocks
    ``x + W2 relu(W1 x)``) with CE, full-batch SGD (momentum 0.9, coupled weight decay); return the eval-mode
    features of its measured layers (embedding, then every block), float64. ``fit``, when given, receives the
    trained network's ``final_loss`` (CE) and ``train_error`` on ``X`` in eval mode."""
    import torch

    from nclab.measure import collect_features
    from nclab.nets import FCResNet

    torch.manual_seed(seed)
    model = FCResNet((X.shape[1],), int(y.max()) + 1, width=X.shape[1], num_blocks=blocks, block="double")
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=weight_decay)
    Xt = torch.tensor(X, dtype=torch.float32)
    yt = torch.tensor(y)
    # Small matrices: one thread is ~10x faster than torch's pool on a shared 2-core machine.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model.train()
        for _ in range(steps):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(Xt), yt).backward()
            opt.step()
        feats = collect_features(model, Xt)
        if fit is not None:
            model.eval()
            with torch.no_grad():
                logits = model(Xt)
            fit["final_loss"] = float(torch.nn.functional.cross_entropy(logits, yt))
            fit["train_error"] = float((logits.argmax(1) != yt).double().mean())
    finally:
        torch.set_num_threads(threads)
    return [f.double().numpy() for f in feats.values()]


def depth_profile(layers: Sequence[np.ndarray], y: np.ndarray, t_grid: np.ndarray) -> dict[str, Any]:
    """Measured PFC1/2/3 of every layer at its relative depth, and the geodesic predictions (measured end and
    Procrustes-ETF end) between layer 0 and the last layer on ``t_grid`` [Wang et al. 2024, Fig. 3]. In-memory
    convenience over :func:`nclab.theory.geodesic.geodesic_profile` and the metric suite."""
    from nclab.metrics import etf_gram_error, trace_ratio
    from nclab.stats import ClassStats, NCCAccumulator
    from nclab.theory.geodesic import geodesic_profile

    K = int(y.max()) + 1
    measured: dict[str, list[float]] = {"pfc1": [], "pfc2": [], "pfc3": []}
    for h in layers:
        st = ClassStats.from_arrays(h, y, K=K, track="light")
        measured["pfc1"].append(trace_ratio(st))
        measured["pfc2"].append(etf_gram_error(st))
        measured["pfc3"].append(NCCAccumulator(st).update(h, y).compute()["ncc_accuracy"])
    prof = geodesic_profile(layers, y, K, ends=("measured", "etf"), t_grid=t_grid)
    return {
        "relative_depth": prof.relative_depth,
        "measured": {k: np.asarray(v) for k, v in measured.items()},
        "predicted": prof.predictions,
        "s01": prof.s01,
        "straightness_index": prof.straightness_index,
        "kinetic_energy": prof.kinetic_energy,
    }


#: The depth order of the PFC conjecture [Wang et al. 2024, Conjecture 1] at the end of training: PFC1 (Tr S_W /
#: Tr S_B) and PFC2 (ETF Gram distance) decrease with depth, PFC3 (NCC accuracy) increases towards 1. +1: a layer's
#: value may not exceed the previous layer's; -1: it may not fall below it.
PFC_DEPTH_DIRECTIONS: dict[str, int] = {"pfc1": +1, "pfc2": +1, "pfc3": -1}


def pfc_depth_summary(measured: Mapping[str, Sequence[float]]) -> dict[str, float | int]:
    """Depth-order violations and the first- and last-layer levels of a per-layer PFC profile.

    ``measured["pfc1"|"pfc2"|"pfc3"]``: the metric of layers ``0..L`` in depth order (layer 0 = the input).
    ``pfc{j}_depth_violations`` counts the consecutive pairs that break the conjecture's order
    (:data:`PFC_DEPTH_DIRECTIONS`, the order of [Wang et al. 2024, Conjecture 1]: ``m^{l+1} <= m^l`` for PFC1 and
    PFC2, ``m^{l+1} >= m^l`` for PFC3; ties are not violations); ``pfc{j}_first`` / ``pfc{j}_last`` are the values
    at layer 0 and at the last layer, the latter the network's NC level (the conjecture's premise: NC at the last
    layer, i.e. PFC1 and PFC2 near 0, PFC3 near 1).
    """
    out: dict[str, float | int] = {}
    for key, sign in PFC_DEPTH_DIRECTIONS.items():
        m = np.asarray(measured[key], dtype=np.float64)
        if m.ndim != 1 or m.size < 1:
            raise ValueError(f"measured[{key!r}] must be a non-empty sequence of per-layer values, got shape {m.shape}")
        out[f"{key}_depth_violations"] = int(np.count_nonzero(sign * np.diff(m) > 0))
        out[f"{key}_first"] = float(m[0])
        out[f"{key}_last"] = float(m[-1])
    return out


_GEO_SCALES = {
    "tiny": dict(blocks=4, steps=60, grid=21),
    "cpu": dict(blocks=6, steps=1500, grid=101),
}


def _geodesic(scale: str) -> list[Protocol]:
    return [Protocol.solver("FC ResNet on the embedded digits, full batch", dataset="digits", **_GEO_SCALES[scale])]


@register(
    "geodesic-digits",
    summary="[Wang et al. 2024, Fig. 3] analogue: per-block PFC1/2/3 of an FC ResNet on digits "
    "vs the geodesic prediction (paper scale: pfc-table1)",
    paper="[Wang et al. 2024]",
    scales=("tiny", "cpu"),  # the paper's protocol is experiment pfc-table1
    durations={"tiny": "~7 s", "cpu": "<= 1.5 min"},
    protocols=_geodesic,
    code=("nclab.theory.geodesic", "nclab.nets", "nclab.measure", "nclab.data", *METRICS_CODE),
)
def geodesic_digits(out: Path, scale: str, seed: int) -> dict:
    from nclab.data import load_digits

    cfg = _GEO_SCALES[scale]
    X, y = load_digits()
    fit: dict[str, float] = {}
    layers = train_fc_resnet(X, y, blocks=cfg["blocks"], steps=cfg["steps"], seed=seed, fit=fit)
    t_grid = np.linspace(0, 1, cfg["grid"])
    prof = depth_profile(layers, y, t_grid)
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(12, 4.0))
    tl = prof["relative_depth"]
    titles = {"pfc1": "PFC1 = Tr S_W / Tr S_B", "pfc2": "PFC2 (ETF Gram distance)", "pfc3": "PFC3 (NCC accuracy)"}
    for ax, key in zip(axes, ("pfc1", "pfc2", "pfc3"), strict=True):
        ax.plot(tl, prof["measured"][key], "o-", color="green", label="measured layers")
        ax.plot(t_grid, getattr(prof["predicted"]["measured"], key), color="blue", label="geodesic (measured end)")
        etf_end = np.asarray(getattr(prof["predicted"]["etf"], key), dtype=np.float64)
        ax.set_title(titles[key])
        ax.set_xlabel("relative depth t")
        ax.set_ylabel(key.upper())
        if key != "pfc3":
            # the ETF-end curve reaches 0 at t = 1, i.e. -infinity on the log axis: keep the axis on the measured
            # range and stop that curve where it leaves it (the legend says where it goes)
            low = 0.1 * min(np.min(prof["measured"][key]), np.min(getattr(prof["predicted"]["measured"], key)))
            ax.plot(t_grid, np.where(etf_end >= low, etf_end, np.nan), ":", color="gray",
                    label="geodesic (ETF end, -> 0 at t = 1)")  # fmt: skip
            ax.set_yscale("log")
            ax.set_ylim(bottom=low)
            log_ticks(ax)
        else:
            ax.plot(t_grid, etf_end, ":", color="gray", label="geodesic (ETF end)")
    legend(axes[0])
    figures = [("metrics vs relative depth (green) with the geodesic prediction (blue)", png(fig, out / "fig3.png"))]
    rows = []
    for i, t in enumerate(tl):
        rows.append({"layer": i, "relative_depth": float(t), **{k: float(v[i]) for k, v in prof["measured"].items()}})
    write_csv(out / "layers.csv", rows)
    pm = prof["predicted"]["measured"]
    write_csv(
        out / "geodesic.csv",
        [
            {"t": float(t), "pfc1": float(pm.pfc1[i]), "pfc2": float(pm.pfc2[i]), "pfc3": float(pm.pfc3[i])}
            for i, t in enumerate(t_grid)
        ],
    )
    from nclab.experiments.convergence import convergence_keys

    summary = {
        "blocks": cfg["blocks"],
        "steps": cfg["steps"],
        # the run's target: zero training error (the terminal phase the conjecture presupposes)
        **convergence_keys(
            "fc-resnet",
            reached=fit["train_error"] == 0,
            final_loss=fit["final_loss"],
            target="zero training error",
            detail=f"{100 * fit['train_error']:.3g} % training error after {cfg['steps']} steps",
        ),
        "train_error": fit["train_error"],
        "s01": prof["s01"],
        "straightness_index": prof["straightness_index"],
        **pfc_depth_summary(prof["measured"]),
        # the curves of [Wang et al. 2024, Fig. 3]: measured per layer at its relative depth (green) and predicted
        # along the straight line from layer 0 to the last layer (blue), and how often each breaks monotonicity
        "relative_depth": [float(t) for t in tl],
        "measured": {k: [float(x) for x in v] for k, v in prof["measured"].items()},
        "predicted_t": [float(t) for t in t_grid],
        "predicted": {k: [float(x) for x in getattr(pm, k)] for k in ("pfc1", "pfc2", "pfc3")},
        "predicted_monotone_violations": {
            k: int(np.count_nonzero(sign * np.diff(np.asarray(getattr(pm, k), dtype=np.float64)) > 0))
            for k, sign in PFC_DEPTH_DIRECTIONS.items()
        },
    }
    note = (
        f"<p>A fully connected ResNet (64-d, {cfg['blocks']} blocks h + W2 relu(W1 h), linear head) trained on "
        f"the embedded digits with CE, full-batch SGD (momentum 0.9, wd 5e-4) for {cfg['steps']} steps. "
        "Layer 0 = the pixels. Green: measured PFC metrics at the relative depth ([Wang et al. 2024, Sec. IV-A]); "
        "blue: "
        "the straight-line interpolation between layer 0 and the last block (closed forms; PFC3 by an exact "
        "second pass); grey: the same with the end collapsed onto the Procrustes-nearest ETF. The summary counts, "
        "per metric, the consecutive layers that break the conjecture's depth order (PFC1 and PFC2 must not rise, "
        "PFC3 must not fall, with depth) and gives the first and last layers' values, the last being the NC level "
        "the conjecture presupposes; 'measured' and 'predicted' are the two curves (predicted on 'predicted_t') and "
        "'predicted_monotone_violations' counts the grid steps where a predicted curve breaks the same order.</p>"
    )
    return finish_report(
        out,
        "Geodesic model of progressive collapse ([Wang et al. 2024, Fig. 3] analogue)",
        [("Setup", note)],
        figures,
        summary,
    )


# ---------------------------------------------------------------------------------------------- pfc-table1
def pfc_configs() -> dict:
    """The [Wang et al. 2024] Table I runs ``{"dataset/model": RunConfig}``."""
    out = {}
    for ds in ("mnist", "fashion-mnist", "cifar10", "stl10", "cifar100"):
        if ds == "mnist":
            model: dict[str, Any] = {"name": "fc_resnet", "options": {"width": 1000, "num_blocks": 10}}
        else:
            model = {"name": "pfc_resnet", "options": {"table": ds}}
        raw = {
            "name": f"wang2024-{ds}",
            "preset": "wang2024-pfc",
            "data": {"name": ds},
            "model": model,
            "optim": {"lr": 0.005 if ds == "mnist" else 0.01},
            # the geodesic model reads every measured layer's features of the split at once (Fashion-MNIST: 60,000
            # x 5 blocks x d = 3136, the flattened 64 x 7 x 7 maps, x 4 B = 3.8 GB); the default 256 MB skipped it
            "measure": {
                "epochs": "log",
                "num_log": 30,
                "splits": ["train"],
                "layers": "all",
                "geodesic": True,
                "cache_mb": 8192,
            },
            "checkpoint": {"every": 10},
        }
        out[f"{ds}/{model['name']}"] = resolve_paper(raw)
    return out


def _pfc_tiny() -> dict:
    """The smoke test of ``pfc-table1``: two runs of two epochs of a small FC ResNet on the embedded digits, every
    block measured (so that it reaches the depth-order summary)."""
    return tiny_configs("pfc", "wang2024-pfc@cpu", {"name": "fc_resnet", "options": {"width": 32, "num_blocks": 3}},
                        layers="all")  # fmt: skip


#: The runs of ``pfc-table1`` per scale.
PFC_CONFIGS = {"tiny": _pfc_tiny, "paper": pfc_configs}


def _pfc_protocols(scale: str) -> list[Protocol]:
    return protocols_of(PFC_CONFIGS[scale]())


@register(
    "pfc-table1",
    summary="Table I networks on MNIST, FMNIST, CIFAR10, STL10, CIFAR100: per-block PFC1-3, geodesic (Figs. 2-3)",
    paper="[Wang et al. 2024]",
    scales=("tiny", "paper"),
    selectable=True,
    durations={"tiny": "<= 25 s"},
    protocols=_pfc_protocols,
    configs=PFC_CONFIGS,
    code=("nclab.experiments.runs", *TRAINING_CODE, *METRICS_CODE),
)
def pfc_table1(out: Path, scale: str, seed: int, selection: RunSelection | None = None) -> dict[str, Any]:
    summary, folders = run_configs(PFC_CONFIGS[scale](), out, scale, seed, selection)
    return {**summary, **pfc_depth_of_runs(folders)}


def pfc_depth_of_runs(folders: Sequence[Path]) -> dict[str, Any]:
    """The [Wang et al. 2024, Conjecture 1] depth order of the trained runs in ``folders``: per run
    (``pfc_by_run``) :func:`pfc_depth_summary` of PFC1 (``trace_ratio``), PFC2
    (``etf_gram_error``) and PFC3 (``ncc_accuracy``) over its blocks ``layer0, layer1, ...`` at its last measured
    epoch (train split), and ``pfc{j}_depth_violations`` summed over the runs (the keys the claims read). Runs that
    measured fewer than two blocks are left out."""
    from nclab.io.rundir import read_run

    names = {"pfc1": "trace_ratio", "pfc2": "etf_gram_error", "pfc3": "ncc_accuracy"}
    per_run: dict[str, Any] = {}
    for folder in map(Path, folders):
        rows = [r for r in read_run(folder).rows if r.split == "train"]
        blocks = sorted({r.layer for r in rows if re.fullmatch(r"layer\d+", r.layer)}, key=lambda b: int(b[5:]))
        last = max((r.epoch for r in rows if r.layer in blocks and r.metric == "trace_ratio"), default=None)
        at = {(r.layer, r.metric): r.value for r in rows if r.epoch == last}
        if len(blocks) < 2 or any((b, m) not in at for b in blocks for m in names.values()):
            continue
        measured = {key: [at[(b, metric)] for b in blocks] for key, metric in names.items()}
        per_run[run_key(folder)] = {"epoch": last, **pfc_depth_summary(measured)}
    totals = {f"{k}_depth_violations": sum(r[f"{k}_depth_violations"] for r in per_run.values()) for k in names}
    return {**totals, "pfc_by_run": per_run} if per_run else {}


# ---------------------------------------------------------------------------------------------- mufm-tradeoff
def _mufm(scale: str) -> list[Protocol]:
    K, n, d = by_scale(scale, (3, 10, 8), (5, 100, 20))
    ratios = by_scale(scale, [0.1, 1.0, 4.0], [0.1, 0.2, 0.4, 1.0, 2.0, 4.0])
    return [Protocol.solver("exact alternating MUFM / UFM solver", K=K, n=n, d=d, lam_W=0.005, lam_ratios=ratios)]


# ---------------------------------------------------------------------------------------------- [Wang et al. 2024]
def _pfc(H: np.ndarray, K: int, n: int) -> dict[str, float]:
    y = np.repeat(np.arange(K), n)
    st = ClassStats.from_arrays(H, y, K=K)
    return {"pfc1": trace_ratio(st), "pfc2": etf_gram_error(st), "ncc_accuracy": ncc_metrics(st, H, y)["ncc_accuracy"]}


@register(
    "mufm-tradeoff",
    summary="[Wang et al. 2024, Figs. 4-5]: MUFM vs UFM optima and metrics vs lambda/lambda_W",
    paper="[Wang et al. 2024]",
    durations={"tiny": "~14 s", "cpu": "<= 6 min"},
    protocols=_mufm,
    code=("nclab.ufm", *METRICS_CODE),
)
def mufm_tradeoff(out: Path, scale: str, seed: int) -> dict[str, Any]:
    check_scale(scale)
    K, n, d, lam_W = (3, 10, 8, 0.005) if scale == "tiny" else (5, 100, 20, 0.005)  # [Wang et al. 2024, Sec. IV-B]
    ratios = (0.1, 1.0, 4.0) if scale == "tiny" else (0.1, 0.2, 0.4, 1.0, 2.0, 4.0)
    X = mufm.gaussian_data(K, n, d, seed=seed)
    data = _pfc(X, K, n)
    rows = []
    for r in ratios:
        res = solve(
            "mufm",
            K=K,
            n=n,
            d=d,
            lams=dict(W=lam_W, transport=r * lam_W),
            convention="penalty_mean",
            X=X,
            solver="alternating",
            gtol=1e-10,
        )
        rows.append(
            {
                "lambda/lambda_W": r,
                **_pfc(res.params["H"], K, n),
                "alignment": mufm.alignment(res.params["H"], X),
                "grad_norm": res.grad_norm,
            }
        )
    ufm = solve(
        "mufm",
        K=K,
        n=n,
        d=d,
        lams=dict(W=lam_W, transport=0.2 * lam_W),
        convention="penalty_mean",
        X=np.zeros_like(X),
        solver="alternating",
        seed=seed,
        gtol=1e-10,
    )
    ufm_m = _pfc(ufm.params["H"], K, n)
    write_csv(out / "mufm_sweep.csv", rows)
    plt = pyplot()
    fig, ax = plt.subplots(2, 2, figsize=(12, 6.4))
    xs = [r["lambda/lambda_W"] for r in rows]
    for a, key in zip(ax.ravel(), ("pfc1", "pfc2", "ncc_accuracy", "alignment"), strict=True):
        a.plot(xs, [r[key] for r in rows], "o-", label="MUFM")
        if key in data:
            a.axhline(data[key], color="r", ls="--", label="data X")
        a.set_xscale("log")
        a.set_xlabel("lambda / lambda_W")
        a.set_ylabel(key)
        a.set_title(key)
        legend(a)
    image = png(fig, out / "mufm_sweep.png")
    sections = [
        ("Data X", metrics_table_html(data)),
        ("UFM (X = 0, lambda/lambda_W = 0.2)", metrics_table_html(ufm_m)),
        (
            "MUFM at lambda/lambda_W = 0.2" if 0.2 in ratios else "MUFM (first ratio)",
            metrics_table_html({k: v for k, v in rows[min(1, len(rows) - 1)].items() if k != "lambda/lambda_W"}),
        ),
    ]
    write_report(
        out / RunDir.REPORT, "MUFM vs UFM [Wang et al. 2024, Figs. 4-5]", sections, [("metrics vs lambda", image)]
    )
    return {"data": data, "ufm": ufm_m, "sweep": rows}
