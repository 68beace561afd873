"""Registered experiments of the theory engines ([Han et al. 2022; Wang et al. 2024]). Import this module to register
them.

* ``central-path-flow`` [Han et al. 2022, Sec. 3]: the renormalised flow under both projections, omega_j(t) against both
  closed forms (log-log), max/min omega, distance to the ETF, NC metrics of the renormalised features.
* ``mse-decomposition-ufm`` ([Han et al. 2022, Fig. 2] analogue on the unconstrained-features model): joint GD on (W, b,
  H),
  L, L_NC1, L_NC2/3, L_perp against the step, log scale, red line at the first zero-error step.
* ``geodesic-digits`` ([Wang et al. 2024, Fig. 3] analogue): a small fully connected ResNet trained on the embedded
  digits;
  PFC1/2/3 of every block output against relative depth, with the geodesic prediction overlaid.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from nclab.experiments.catalog import declare_protocols, register
from nclab.experiments.common import legend, log_ticks, png, pyplot, write_csv
from nclab.experiments.protocols import Protocol
from nclab.io.atomic import atomic_write_text
from nclab.io.rundir import RunDir

__all__ = ["PFC_DEPTH_DIRECTIONS", "depth_profile", "pfc_depth_summary", "train_fc_resnet"]


def _finish(out: Path, title: str, sections: list[tuple[str, str]], figures: list, summary: dict) -> dict:
    from nclab.report import metrics_table_html, write_report

    numeric = {k: float(v) for k, v in summary.items() if isinstance(v, int | float) and not isinstance(v, bool)}
    write_report(out / RunDir.REPORT, title, [*sections, ("Summary", metrics_table_html(numeric))], figures)
    atomic_write_text(out / RunDir.SUMMARY, json.dumps(summary, indent=2, default=float) + "\n")
    return summary


# ---------------------------------------------------------------------------------------------- [Han et al. 2022] flow
_FLOW_SCALES: dict[str, dict[str, Any]] = {
    "tiny": dict(C=4, N=5, P=6, t_end=1e3, num_checkpoints=8),
    "cpu": dict(C=4, N=5, P=6, t_end=1e6, num_checkpoints=40),
    "paper": dict(C=10, N=20, P=16, t_end=1e7, num_checkpoints=60),
}


@register(
    "central-path-flow",
    summary="renormalised central-path flow, both projections vs the two closed forms (omega_j(t), max/min, ETF)",
    paper="[Han et al. 2022]",
)
def central_path_flow(out: Path, scale: str, seed: int) -> dict:
    from nclab.theory.central_path import FlowOptions, simulate

    cfg = _FLOW_SCALES[scale]
    plt = pyplot()
    runs = {
        proj: simulate(
            cfg["C"],
            cfg["N"],
            cfg["P"],
            cfg["t_end"],
            proj,
            options=FlowOptions(num_checkpoints=cfg["num_checkpoints"]),
            seed=seed,
        )
        for proj in ("oblique", "orthogonal")
    }
    figures = []
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for ax, (proj, run) in zip(axes, runs.items(), strict=True):
        t = run.t[1:]
        for j in range(run.omega.shape[1]):
            ax.loglog(t, run.omega[1:, j], "o", ms=4, color=f"C{j}", label=f"simulated omega_{j + 1}")
            ax.loglog(t, run.omega_oblique[1:, j], "-", color=f"C{j}", lw=1)
            ax.loglog(t, run.omega_orthogonal[1:, j], "--", color=f"C{j}", lw=1)
        ax.set_title(f"{proj} projection")
        ax.set_xlabel("t")
    axes[0].set_ylabel("omega_j(t)")
    axes[0].plot([], [], "k-", label="closed form, oblique [derived]")
    axes[0].plot([], [], "k--", label="closed form, orthogonal (Prop. 2)")
    legend(axes[0])
    figures.append(
        ("omega_j(t): points = simulation, solid = oblique closed form, dashed = Prop. 2", png(fig, out / "omega.png"))
    )
    fig, axes = plt.subplots(1, 3, figsize=(12, 4.0))
    for proj, run in runs.items():
        axes[0].semilogx(run.t[1:], run.ratio[1:], label=proj)
        axes[1].loglog(run.t[1:], run.etf_distance[1:], label=proj)
        axes[2].loglog(run.t[1:], run.metrics["nc1"][1:], label=f"{proj}: nc1")
        axes[2].loglog(run.t[1:], run.metrics["etf_gram_error"][1:], ":", label=f"{proj}: etf_gram_error")
    axes[0].set_title("max/min omega")
    axes[1].set_title("||SNR/omega_max - U0 V0^T||_F")
    axes[2].set_title("NC metrics of renormalised features")
    axes[0].set_ylabel("omega_max / omega_min")
    axes[1].set_ylabel("distance to the ETF direction")
    axes[2].set_ylabel("metric value")
    for ax in axes:
        ax.set_xlabel("t")
        legend(ax)
    figures.append(("equalisation of the singular values, distance to the ETF, NC metrics", png(fig, out / "etf.png")))
    summary: dict[str, Any] = {"C": cfg["C"], "N": cfg["N"], "P": cfg["P"], "t_end": cfg["t_end"]}
    for proj, run in runs.items():
        write_csv(out / f"flow_{proj}.csv", run.table())
        summary[f"{proj}_max_rel_error_vs_own_closed_form"] = run.max_relative_error()
        other = run.omega_orthogonal if proj == "oblique" else run.omega_oblique
        summary[f"{proj}_max_rel_error_vs_other_closed_form"] = float(np.max(np.abs(run.omega - other) / other))
        summary[f"{proj}_final_ratio"] = float(run.ratio[-1])
        summary[f"{proj}_final_etf_distance"] = float(run.etf_distance[-1])
        summary[f"{proj}_max_singular_vector_drift"] = float(run.offdiag.max())
    note = (
        "<p>Renormalised gradient flow of the central-path MSE [Han et al. 2022, eq. (5)], integrated with DOP853 "
        "(rtol 1e-10) and retracted onto Sigma_W = I at every checkpoint. The paper's Prop. 2 ODE "
        "(C^2 N log w + C N w^2 + N w^4/4 = a + t) is the flow of the Frobenius-orthogonal projection; the oblique "
        "projection of Prop. 4, which the paper's renormalise-after-each-step algorithm follows, obeys "
        "dw/dt = w/(C N (C + w^2)) [derived], i.e. C^2 N log w + (C N/2) w^2 = a + t. Each simulation matches "
        "its own closed form and not the other.</p>"
    )
    return _finish(out, "Central-path dynamics [Han et al. 2022, Sec. 3]", [("Setup", note)], figures, summary)


# ----------------------------------------------------------------------------------------------
# [Han et al. 2022, Fig. 2] (UFM)
_UFM_SCALES = {
    "tiny": dict(C=4, N=10, P=8, steps=300, record_every=10),
    "cpu": dict(C=10, N=50, P=32, steps=5000, record_every=25),
    "paper": dict(C=10, N=500, P=64, steps=20000, record_every=100),
}


def plot_decomposition(rows: Sequence[dict[str, float]], x_key: str = "epoch", zero_error: float | None = None):
    """[Han et al. 2022, Fig. 2] panel: L, L_NC1, L_NC2/3, L_perp against ``x_key`` (log y), red line at
    ``zero_error``."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    x = [r[x_key] for r in rows]
    # explicit colours: the default cycle's fourth colour is the red of the zero-error line
    curves = (("L", "L", "C0"), ("L_NC1", "L_NC1", "C1"), ("L_NC23", "L_NC2/3", "C2"), ("L_perp", "L_perp", "C4"))
    for key, label, colour in curves:
        ax.semilogy(x, [max(r[key], 1e-300) for r in rows], color=colour, label=label)
    if zero_error is not None:
        ax.axvline(zero_error, color="red", lw=1.2, ls="--", label=f"zero training error ({x_key} {zero_error:g})")
    ax.set_xlabel(x_key)
    ax.set_ylabel("loss term")
    log_ticks(ax)
    legend(ax)
    return fig


@register(
    "mse-decomposition-ufm",
    summary="[Han et al. 2022, Fig. 2] analogue: MSE decomposition L = L_NC1 + L_NC2/3 + L_perp "
    "along joint GD on the UFM",
    paper="[Han et al. 2022]",
)
def mse_decomposition_ufm(out: Path, scale: str, seed: int) -> dict:
    from nclab.theory.joint_gd import joint_gd

    cfg = _UFM_SCALES[scale]
    lam = 1e-3
    rows = joint_gd(
        cfg["C"],
        cfg["N"],
        cfg["P"],
        cfg["steps"],
        lr=0.05,
        lam=lam,
        lam_H=lam,
        record_every=cfg["record_every"],
        seed=seed,
    )
    write_csv(out / "decomposition.csv", rows)
    zero = next((r["step"] for r in rows if r["train_error"] == 0), None)
    fig = plot_decomposition(rows, "step", zero)
    caption = "L, L_NC1, L_NC2/3, L_perp vs GD step (log y); red dashed: first zero-error step"
    figures = [(caption, png(fig, out / "fig2.png"))]
    last = rows[-1]
    after = [r for r in rows if zero is not None and r["step"] >= zero]
    summary = {
        "zero_error_step": -1.0 if zero is None else zero,
        "final_L": last["L"],
        "final_L_NC1": last["L_NC1"],
        "final_L_NC23": last["L_NC23"],
        "final_L_perp": last["L_perp"],
        "final_proximity_ratio": last["proximity_ratio"],
        "max_identity_residual": max(r["identity_residual"] for r in rows),
        "max_proximity_ratio_after_zero_error": max((r["proximity_ratio"] for r in after), default=float("nan")),
    }
    note = (
        f"<p>Unconstrained features, C={cfg['C']}, N={cfg['N']} per class, P={cfg['P']}; full-batch joint GD on "
        f"(W, b, H) of the [Han et al. 2022] L with lambda={lam} plus a per-sample feature penalty "
        "(nclab.theory.joint_gd). "
        "L_perp/L_LS measures how close the pair is to the central path ([Han et al. 2022] extension).</p>"
    )
    return _finish(
        out,
        "MSE decomposition along joint GD ([Han et al. 2022, Fig. 2] analogue)",
        [("Setup", note)],
        figures,
        summary,
    )


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


@register(
    "geodesic-digits",
    summary="[Wang et al. 2024, Fig. 3] analogue: per-block PFC1/2/3 of an FC ResNet on digits "
    "vs the geodesic prediction (paper scale: pfc-table1)",
    paper="[Wang et al. 2024]",
    scales=("tiny", "cpu"),  # the paper's protocol is experiment pfc-table1
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
    return _finish(
        out,
        "Geodesic model of progressive collapse ([Wang et al. 2024, Fig. 3] analogue)",
        [("Setup", note)],
        figures,
        summary,
    )


# ---------------------------------------------------------------------------------- protocols (experiment list)
@declare_protocols("central-path-flow")
def _flow(scale: str) -> list[Protocol]:
    return [Protocol.solver("renormalised central-path flow (both projections)", **_FLOW_SCALES[scale])]


@declare_protocols("mse-decomposition-ufm")
def _decomposition(scale: str) -> list[Protocol]:
    return [Protocol.solver("joint GD on the UFM, MSE decomposition", **_UFM_SCALES[scale])]


@declare_protocols("geodesic-digits", scales=("tiny", "cpu"))
def _geodesic(scale: str) -> list[Protocol]:
    return [Protocol.solver("FC ResNet on the embedded digits, full batch", dataset="digits", **_GEO_SCALES[scale])]
