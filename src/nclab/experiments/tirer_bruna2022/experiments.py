"""What we run for [Tirer & Bruna 2022]: the extended unconstrained-features model's experiments (``ufm-figures``,
``ufm-threshold-sweep``, ``ufm-init-scale``, ``ufm-thm51``) and the ResNet depth study (``resnet-depth``), each
registered with its facts (durations, protocols per scale, builders, code).

``nclab experiment run NAME --scale tiny|cpu|paper``. The [Tirer & Bruna 2022] sizes and lambdas are lost from its text
file [Tirer & Bruna 2022, Sec. 6]; "cpu" and "paper" use the defaults (K=4, d=20, n=50, lambda=5e-3,
GD lr 0.1, 1e5 iterations, metrics every 5e3).

The ResNet depth study of [Tirer & Bruna 2022, Figs. 5 / 10]: does a trained bias-free MSE ResNet behave like the
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
import math
from pathlib import Path
from typing import Any

import numpy as np

from nclab.experiments.catalog import METRICS_CODE, TRAINING_CODE, register
from nclab.experiments.common import by_scale, check_scale, html_table, legend, log_ticks, png, pyplot, write_csv
from nclab.experiments.protocols import Protocol
from nclab.experiments.runs import protocols_of, resolve_paper
from nclab.io.rundir import RunDir
from nclab.report import metrics_table_html, write_report
from nclab.ufm import closed_forms
from nclab.ufm.solvers import solve

__all__ = [
    "DEPTHS",
    "RESNET_DEPTH",
    "SCALES",
    "block_layers",
    "depth_config",
    "init_scale_study",
    "resnet_depth",
    "resnet_depth_configs",
    "stage_layers",
    "thm51_monte_carlo",
    "threshold_sweep",
    "ufm_figures",
]


# ---------------------------------------------------------------------------------------------- Figs 1-4
_FIG_MODELS = {
    "fig1-thm3.1-bias-free": ("mse-bias-free", ("W", "H")),
    "fig2-thm3.2-free-bias": ("mse-bias", ("W", "H")),
    "fig3-thm4.1-extended-linear": ("extended-linear", ("W1", "W2", "H1")),
    "fig4-thm4.2-extended-relu": ("extended-relu", ("W1", "W2", "H1")),
}


def _ufm_figures(scale: str) -> list[Protocol]:
    K, d, n = by_scale(scale, (4, 12, 8), (4, 20, 50))
    steps, every = by_scale(scale, (3000, 500), (100_000, 5000))
    return [Protocol.solver("GD on the UFM models of Figs. 1-4", K=K, d=d, n=n, lam=5e-3, lr=0.1, steps=steps,
                            measure_every=every)]  # fmt: skip


@register(
    "ufm-figures",
    summary="[Tirer & Bruna 2022, Figs. 1-4]: GD objective and NC1/NC2/NC3 per feature level",
    paper="[Tirer & Bruna 2022]",
    durations={"tiny": "~5 s", "cpu": "<= 7 min"},
    protocols=_ufm_figures,
    code=("nclab.ufm",),
)
def ufm_figures(out: Path, scale: str, seed: int) -> dict[str, Any]:
    check_scale(scale)
    K, d, n, lam = (4, 12, 8, 5e-3) if scale == "tiny" else (4, 20, 50, 5e-3)
    iters, every = (3000, 500) if scale == "tiny" else (100_000, 5000)
    summary: dict[str, Any] = {}
    figures = []
    plt = pyplot()
    for fig_name, (model, keys) in _FIG_MODELS.items():
        res = solve(
            model,
            K=K,
            n=n,
            d=d,
            lams=dict.fromkeys(keys, lam),
            solver="gd",
            seed=seed,
            iters=iters,
            log_every=max(1, iters // 500),
            metrics_every=every,
        )
        write_csv(out / f"{fig_name}.csv", res.history)
        fig, ax = plt.subplots(2, 2, figsize=(12, 6.4))
        ax = ax.ravel()
        it = np.array([r["iter"] for r in res.history])
        gap = np.array([r["gap"] for r in res.history])
        ax[0].semilogy(it, np.maximum(np.abs(gap), 1e-16))
        ax[0].set_title("|objective - L*|")
        ax[0].set_ylabel("objective gap |L - L*|")
        mrows = [r for r in res.history if any("/nc1" in k for k in r)]
        mit = [r["iter"] for r in mrows]
        for level in res.levels():
            ax[1].semilogy(mit, [max(r[f"{level}/nc1"], 1e-30) for r in mrows], "o-", label=level)
            ax[2].plot(mit, [r[f"{level}/nc2_etf"] for r in mrows], "o-", label=f"{level} ETF")
            if f"{level}/nc2_of" in mrows[0]:
                ax[2].plot(mit, [r[f"{level}/nc2_of"] for r in mrows], "s--", label=f"{level} OF")
            if f"{level}/nc3" in mrows[0]:
                ax[3].plot(mit, [r[f"{level}/nc3"] for r in mrows], "o-", label=level)
        ylabels = ("NC1 = tr(Sigma_W Sigma_B^+)", "NC2 Gram distance", "NC3 ||W/||W|| - M/||M|| ||_F")
        for a, t, yl in zip(ax[1:], ("NC1", "NC2 (ETF, OF)", "NC3 (uncentred)"), ylabels, strict=True):
            a.set_title(t)
            a.set_ylabel(yl)
            legend(a)
            a.set_xlabel("GD iteration")
        ax[0].set_xlabel("GD iteration")
        for a in ax[:2]:
            log_ticks(a)
        fig.suptitle(f"{fig_name} (K={K}, d={d}, n={n}, lambda={lam}, lr 0.1)")
        figures.append((fig_name, png(fig, out / f"{fig_name}.png")))
        summary[fig_name] = {"loss": res.loss, "L_star": res.theory.loss, "gap": res.gap, "iters": iters}
        summary[fig_name]["levels"] = _level_metrics(res.spec, res.params)
        if res.spec.activation == "relu":
            summary[fig_name].update(_dead_relu_diagnosis(res, lams=dict.fromkeys(keys, lam), iters=iters // 5))
    sections = [
        ("Runs", metrics_table_html({f"{k} gap": v["gap"] for k, v in summary.items()})),
        ("ReLU model (Fig. 4): the gap to L*", _DEAD_NOTE),
        ("Feature levels at the end (linear vs ReLU model)", _levels_table(summary)),
    ]
    write_report(out / RunDir.REPORT, "UFM figures [Tirer & Bruna 2022, Figs. 1-4]", sections, figures)
    return summary


_DEAD_NOTE = (
    "<p>GD on the ReLU model can end above the closed form L*: a sample whose pre-activations W1 h1 are all &lt;= 0 "
    "gets no gradient through the ReLU, only the weight decay, which shrinks its h1 to 0. Its logits are then 0 and "
    "it costs 1/(2N) instead of its share of L*, although this is no local minimum (moving h1 towards its class "
    "lowers the objective). 'dead_samples' counts them, 'predicted_gap' is their number times that excess (first "
    "order), and 'revived_gap' is the gap after moving each dead sample's h1 to its class's mean and continuing GD "
    "for 'revived_iters' steps: it reaches L*. 'optimum_levels' are the feature levels' metrics at that point.</p>"
)


def _levels_table(summary: dict[str, Any]) -> str:
    """Per figure and feature level: NC1 and NC2 (ETF, OF) at the end of GD, and at the point reaching L* for the
    ReLU model ([Tirer & Bruna 2022, Sec. 6]: with the ReLU only the deeper level H2 collapses to an orthogonal
    frame; in the linear model both do, Thm 4.1)."""
    rows = []
    for fig, v in summary.items():
        for label, key in (("end of GD", "levels"), ("at L* (" + str(v.get("optimum_from")) + ")", "optimum_levels")):
            for level, m in v.get(key, {}).items():
                rows.append({"figure": fig, "point": label, "level": level, **m})
    return html_table(rows)


#: The collapse metrics :func:`_level_metrics` keeps per feature level (names of :func:`nclab.metrics.collapse_report`):
#: NC1, NC2 to a simplex ETF (centred) and to an orthogonal frame (uncentred, eq. (27) of [Tirer & Bruna 2022]).
_LEVEL_METRICS = ("nc1", "etf_gram_error", "orthogonal_frame_error")


def _level_metrics(spec: Any, params: dict[str, np.ndarray]) -> dict[str, dict[str, float]]:
    """Per feature level (``H``; or ``H1``, ``pre-ReLU``, ``H2``) the :data:`_LEVEL_METRICS` of a solution."""
    from nclab.ufm.analysis import collapse_reports

    reports = collapse_reports(spec, params, ncc=False)
    return {level: {m: float(rep[m]) for m in _LEVEL_METRICS if m in rep} for level, rep in reports.items()}


def _dead_relu_diagnosis(res: Any, *, lams: dict[str, float], iters: int) -> dict[str, Any]:
    """Dead ReLU samples of a GD result, the gap they predict, and the gap after reviving them and continuing GD;
    ``optimum_loss`` and ``optimum_levels``: the objective and the per-level metrics of the point that reaches L*
    (the revived one when a sample died, else GD's own), ``optimum_from`` which it is."""
    from nclab.ufm.analysis import dead_relu_samples, revive

    dead = dead_relu_samples(res.spec, res.params, res.theory)
    out: dict[str, Any] = {"dead_samples": int(dead.samples.size), "predicted_gap": dead.predicted_gap}
    if dead.samples.size:
        spec = res.spec
        start = revive(spec, res.params, dead.samples)
        again = solve(
            spec.name, K=spec.K, n=spec.n, d=spec.d, lams=lams, solver="gd", init=start, iters=iters,
            log_every=max(1, iters), metrics_every=0,
        )  # fmt: skip
        out.update(revived_loss=again.loss, revived_gap=again.gap, revived_iters=iters)
        out.update(optimum_from="revived", optimum_loss=again.loss, optimum_levels=_level_metrics(spec, again.params))
    else:
        out.update(optimum_from="gd", optimum_loss=res.loss, optimum_levels=_level_metrics(res.spec, res.params))
    return out


# ---------------------------------------------------------------------------------------------- threshold sweeps
def _threshold(scale: str) -> list[Protocol]:
    return [Protocol.solver("L-BFGS vs closed form across lambda", K=4, n=3, d=8, points=by_scale(scale, 6, 25))]


@register(
    "ufm-threshold-sweep",
    summary="lambda vs L*: closed form (line) vs L-BFGS (points)",
    paper="[Tirer & Bruna 2022]",
    durations={"tiny": "~5 s", "cpu": "<= 2.5 min"},
    protocols=_threshold,
    code=("nclab.ufm",),
)
def threshold_sweep(out: Path, scale: str, seed: int) -> dict[str, Any]:
    check_scale(scale)
    K, n, d = 4, 3, 8
    points = 6 if scale == "tiny" else 25
    rows = []
    plt = pyplot()
    fig, ax = plt.subplots(1, 3, figsize=(12, 3.8))
    worst = 0.0
    for j, (model, make) in enumerate(
        (
            ("mse-bias-free", lambda lam: dict(W=lam, H=lam)),
            ("mse-bias", lambda lam: dict(W=lam, H=lam)),
            ("extended-linear", lambda lam: dict(W1=lam, W2=lam, H1=lam)),
        )
    ):
        q = 2 if j < 2 else 3
        crit = (1 / (K**2 * n)) ** 0.5 if q == 2 else (1 / (16 * K**3 * n)) ** (1 / 3)  # lambda at the threshold
        grid_line = np.linspace(0.2, 1.6, 200) * crit
        ax[j].plot(
            grid_line / crit,
            [closed_forms.optimum(model, K=K, n=n, d=d, lams=make(x)).loss for x in grid_line],
            label="closed form",
        )
        grid = np.linspace(0.25, 1.5, points) * crit
        num = []
        for lam in grid:
            res = solve(model, K=K, n=n, d=d, lams=make(lam), seed=seed, starts=1 if q == 2 else 4)
            num.append(res.loss)
            assert res.gap is not None  # these models have the closed form plotted above
            worst = max(worst, abs(res.gap))
            rows.append(
                {
                    "model": model,
                    "lambda": lam,
                    "lambda/critical": lam / crit,
                    "L_num": res.loss,
                    "L_star": res.theory.loss,
                    "nonzero": res.theory.nonzero,
                }
            )
        ax[j].plot(grid / crit, num, "o", label="L-BFGS")
        ax[j].set_title(model)
        ax[j].set_xlabel("lambda / lambda_critical")
        ax[j].set_ylabel("regularised MSE objective L")
        legend(ax[j])
    write_csv(out / "threshold_sweep.csv", rows)
    image = png(fig, out / "threshold_sweep.png")
    write_report(
        out / RunDir.REPORT,
        "UFM threshold sweeps",
        [("Worst |L_num - L*|", f"<p>{worst:.3e}</p>")],
        [("lambda vs L* (equal lambdas, K=4, n=3)", image)],
    )
    return {"max_abs_gap": worst, "points": len(rows)}


# ---------------------------------------------------------------------------------------------- init scale
def _init_scale(scale: str) -> list[Protocol]:
    return [Protocol.solver("GD on the 3-factor UFM from five init scales", K=4, n=10, d=20, lam=0.02,
                            steps=by_scale(scale, 3000, 40_000), init_scales=[0.01, 0.03, 0.1, 0.3, 1.0])]  # fmt: skip


@register(
    "ufm-init-scale",
    summary="3-factor model: GD init scale vs outcome (origin, optimum, divergence)",
    paper="[Tirer & Bruna 2022]",
    durations={"tiny": "~4 s", "cpu": "<= 2 min"},
    protocols=_init_scale,
    code=("nclab.ufm",),
)
def init_scale_study(out: Path, scale: str, seed: int) -> dict[str, Any]:
    check_scale(scale)
    K, n, d, lam = 4, 10, 20, 0.02  # [Tirer & Bruna 2022]
    iters = 3000 if scale == "tiny" else 40_000
    scales = (0.01, 0.03, 0.1, 0.3, 1.0)
    rows = []
    for s in scales:
        res = solve(
            "extended-linear",
            K=K,
            n=n,
            d=d,
            lams=dict(W1=lam, W2=lam, H1=lam),
            solver="gd",
            seed=seed,
            init_scale=s,
            iters=iters,
            metrics_every=0,
            log_every=max(1, iters // 200),
        )
        outcome = "diverged" if res.info["diverged"] else ("origin" if abs(res.loss - 0.5) < 1e-6 else "nonzero")
        rows.append({"init_scale": s, "final_loss": res.loss, "L_star": res.theory.loss, "outcome": outcome})
    write_csv(out / "init_scale.csv", rows)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.semilogx(scales, [r["final_loss"] if math.isfinite(r["final_loss"]) else np.nan for r in rows], "o-")
    ax.axhline(rows[0]["L_star"], color="k", ls="--", label="L*")
    ax.axhline(0.5, color="r", ls=":", label="origin (1/2)")
    ax.set_xlabel("init scale")
    ax.set_ylabel(f"objective after {iters} GD steps")
    legend(ax)
    image = png(fig, out / "init_scale.png")
    table = "".join(
        f"<tr><td>{r['init_scale']}</td><td>{r['final_loss']:.6g}</td><td>{r['outcome']}</td></tr>" for r in rows
    )
    write_report(
        out / RunDir.REPORT,
        "3-factor UFM: init scale study",
        [("Outcomes", f"<table><tr><th>scale</th><th>loss</th><th>outcome</th></tr>{table}</table>")],
        [("objective vs init scale", image)],
    )
    return {str(r["init_scale"]): r["outcome"] for r in rows}


# ---------------------------------------------------------------------------------------------- Thm 5.1
def _thm51(scale: str) -> list[Protocol]:
    ns = by_scale(scale, [100, 400, 1600], [100, 300, 1000, 3000, 10_000, 20_000])
    return [Protocol.solver("Thm 5.1 Monte Carlo (fixed noisy features)", K=4, d=20, n=ns, lam_W=0.01,
                            n_lam_H=0.02, sigma=0.3, repeats=by_scale(scale, 3, 10))]  # fmt: skip


@register(
    "ufm-thm51",
    summary="Thm 5.1 Monte Carlo: ||W_hat - f W*||/||W*|| vs n (slope -1/2)",
    paper="[Tirer & Bruna 2022]",
    durations={"tiny": "~1 s", "cpu": "<= 2 min"},
    protocols=_thm51,
    code=("nclab.ufm",),
)
def thm51_monte_carlo(out: Path, scale: str, seed: int) -> dict[str, Any]:
    check_scale(scale)
    K, d, lam_W, nlam_H, sigma = 4, 20, 0.01, 0.02, 0.3  # [Tirer & Bruna 2022]
    ns = [100, 400, 1600] if scale == "tiny" else [100, 300, 1000, 3000, 10_000, 20_000]
    reps = 3 if scale == "tiny" else 10
    rows = []
    for n in ns:
        opt = closed_forms.optimum("mse-bias-free", K=K, n=n, d=d, lams=dict(W=lam_W, H=nlam_H / n))
        f = closed_forms.attenuation_factor(K, n, nlam_H / n, lam_W, sigma)
        star = opt.construct(seed=seed)
        errs = []
        for r in range(reps):
            E = sigma * np.random.default_rng(seed * 1000 + r).standard_normal(star["H"].shape)
            W_hat = closed_forms.ridge_solution(star["H"] + E, K=K, n=n, lam_W=lam_W)
            errs.append(float(np.linalg.norm(W_hat - f * star["W"]) / np.linalg.norm(star["W"])))
        rows.append({"n": n, "rel_error": float(np.mean(errs)), "std": float(np.std(errs)), "factor": f})
    slope = float(np.polyfit(np.log(ns), np.log([r["rel_error"] for r in rows]), 1)[0])
    write_csv(out / "thm51.csv", rows)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.loglog(ns, [r["rel_error"] for r in rows], "o-", label=f"Monte Carlo (slope {slope:.3f})")
    ax.loglog(ns, rows[0]["rel_error"] * (np.array(ns) / ns[0]) ** -0.5, "k--", label="n^(-1/2)")
    ax.set_xlabel("n")
    ax.set_ylabel("||W_hat - f W*|| / ||W*||")
    legend(ax)
    image = png(fig, out / "thm51.png")
    write_report(
        out / RunDir.REPORT,
        "Thm 5.1: attenuation of the optimal classifier",
        [("Fit", metrics_table_html({"slope": slope, "factor": rows[0]["factor"]}))],
        [("error vs n", image)],
    )
    return {"slope": slope, "factor": rows[0]["factor"], "errors": [r["rel_error"] for r in rows]}


# ---------------------------------------------------------------------------------------------- ResNet depth
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
    (:func:`resnet_depth_configs`: ResNet18 on MNIST with MSE / CE, CIFAR10 MSE)."""
    from nclab.train.config import resolve_config

    if scale in SCALES:
        return {model: resolve_config(depth_config(scale, model, seed)) for model in DEPTHS}

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


def resnet_depth_configs() -> dict:
    """The [Tirer & Bruna 2022] Figs. 5 / 10 runs: ResNet18 on MNIST (MSE without the classifier's bias, CE with
    it) and CIFAR10 (MSE without bias), lr 0.05 / 10 every 40 epochs, every residual stage measured."""
    out = {}
    for ds, loss, bias in (("mnist", "mse", False), ("mnist", "ce", True), ("cifar10", "mse", False)):
        raw = {
            "name": f"tirer2022-{ds}-{loss}",
            "data": {"name": ds, "pad_to": 32 if ds == "mnist" else None},
            "model": {"name": "resnet18", "head": {"kind": "linear", "bias": bias}},
            # the paper's MSE is 1/(2N) ||W H - Y||_F^2 (its eq. (2)): nclab's reduction "sum_half"
            "loss": {"name": loss, **({"reduction": "sum_half"} if loss == "mse" else {})},
            "optim": {"name": "sgd", "lr": 0.05, "momentum": 0.9, "weight_decay": 5e-4},
            "schedule": {"name": "multistep", "milestones": [40, 80], "gamma": 0.1},
            "train": {"epochs": 120, "batch_size": 128},
            "measure": {"epochs": "log", "num_log": 30, "splits": ["train"], "layers": "all"},
            "checkpoint": {"every": 10},
        }
        out[f"{ds}/resnet18/{loss}-{'bias' if bias else 'nobias'}"] = resolve_paper(raw)
    return out


def _resnet_depth_protocols(scale: str) -> list[Protocol]:
    return protocols_of(resnet_depth_configs())


@register(
    "resnet-depth",
    summary="Bias-free MSE ResNets of increasing depth: NC1 per residual block and the orthogonal-frame structure "
    "of the last block ([Tirer & Bruna 2022, Figs. 5 / 10])",
    paper="[Tirer & Bruna 2022]",
    # 2026-11-26: cpu 189 s at load 5, 76 s at load 2 (15:16); tiny 57 s wall at load 8
    durations={"tiny": "~15 s", "cpu": "~2 min"},
    protocols={"paper": _resnet_depth_protocols},
    configs={"paper": resnet_depth_configs},
    code=(*TRAINING_CODE, *METRICS_CODE),
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
