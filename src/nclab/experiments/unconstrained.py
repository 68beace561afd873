"""Registered UFM experiments ([Tirer & Bruna 2022; Wang et al. 2024]): figures, CSV tables and a self-contained
report.html.

``nclab experiment run NAME --scale tiny|cpu|paper``. The [Tirer & Bruna 2022] sizes and lambdas are lost from its text
file [Tirer & Bruna 2022, Sec. 6]; "cpu" and "paper" use the defaults (K=4, d=20, n=50, lambda=5e-3,
GD lr 0.1, 1e5 iterations, metrics every 5e3).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from nclab.experiments.catalog import register
from nclab.experiments.common import check_scale, html_table, legend, log_ticks, png, pyplot, write_csv
from nclab.io.rundir import RunDir
from nclab.metrics import etf_gram_error, ncc_metrics, trace_ratio
from nclab.report import metrics_table_html, write_report
from nclab.stats import ClassStats
from nclab.ufm import closed_forms, mufm
from nclab.ufm.solvers import solve

__all__ = ["figures_001", "init_scale_study", "mufm_tradeoff", "thm51_monte_carlo", "threshold_sweep"]


# ---------------------------------------------------------------------------------------------- Figs 1-4
_FIG_MODELS = {
    "fig1-thm3.1-bias-free": ("mse-bias-free", ("W", "H")),
    "fig2-thm3.2-free-bias": ("mse-bias", ("W", "H")),
    "fig3-thm4.1-extended-linear": ("extended-linear", ("W1", "W2", "H1")),
    "fig4-thm4.2-extended-relu": ("extended-relu", ("W1", "W2", "H1")),
}


@register(
    "ufm-figures",
    summary="[Tirer & Bruna 2022, Figs. 1-4]: GD objective and NC1/NC2/NC3 per feature level",
    paper="[Tirer & Bruna 2022]",
)
def figures_001(out: Path, scale: str, seed: int) -> dict[str, Any]:
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
@register(
    "ufm-threshold-sweep", summary="lambda vs L*: closed form (line) vs L-BFGS (points)", paper="[Tirer & Bruna 2022]"
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
@register(
    "ufm-init-scale",
    summary="3-factor model: GD init scale vs outcome (origin, optimum, divergence)",
    paper="[Tirer & Bruna 2022]",
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
@register(
    "ufm-thm51", summary="Thm 5.1 Monte Carlo: ||W_hat - f W*||/||W*|| vs n (slope -1/2)", paper="[Tirer & Bruna 2022]"
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


# ---------------------------------------------------------------------------------------------- [Wang et al. 2024]
def _pfc(H: np.ndarray, K: int, n: int) -> dict[str, float]:
    y = np.repeat(np.arange(K), n)
    st = ClassStats.from_arrays(H, y, K=K)
    return {"pfc1": trace_ratio(st), "pfc2": etf_gram_error(st), "ncc_accuracy": ncc_metrics(st, H, y)["ncc_accuracy"]}


@register(
    "mufm-tradeoff",
    summary="[Wang et al. 2024, Figs. 4-5]: MUFM vs UFM optima and metrics vs lambda/lambda_W",
    paper="[Wang et al. 2024]",
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
