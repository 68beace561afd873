"""``nclab theory``: the central-path simulator and the MSE loss decomposition from the command line."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

from nclab.cli.common import (
    OutputFormat,
    dim_option,
    emit,
    format_option,
    make_app,
    num_classes_option,
    parse_lams,
    per_class_option,
    user_errors,
)

app = make_app("theory", "Theory engines: MSE decomposition and central-path dynamics [Han et al. 2022].")


class ProjectionChoice(StrEnum):
    oblique = "oblique"
    orthogonal = "orthogonal"


class ObjectiveChoice(StrEnum):
    mse_mean = "mse_mean"
    mse_sum = "mse_sum"
    paper = "paper"


@app.command()
def simulate(
    K: Annotated[int, num_classes_option("number of classes K (C in [Han et al. 2022])", min=2)] = 4,
    n: Annotated[int, per_class_option("samples per class n (N in [Han et al. 2022])", min=1)] = 5,
    d: Annotated[int, dim_option("feature dimension d (P in [Han et al. 2022]; K n - K >= d)", min=1)] = 6,
    t_end: Annotated[float, typer.Option(help="final time (finite, > 0)")] = 1e4,
    projection: Annotated[ProjectionChoice, typer.Option(help="tangent projection")] = ProjectionChoice.oblique,
    checkpoints: Annotated[int, typer.Option(help="log-spaced checkpoints", min=1)] = 8,
    seed: Annotated[int, typer.Option(help="random seed of the initial features")] = 0,
    fmt: Annotated[OutputFormat, format_option()] = OutputFormat.table,
) -> None:
    """Integrate the renormalised central-path flow; compare omega_j(t) with both closed forms.

    Columns: t (flow time); omega (simulated), the singular values omega_j of the renormalised features;
    oblique closed form and Prop. 2 (orthogonal), the two closed-form predictions; max/min, the ratio of the
    largest to the smallest omega_j (1 = equalised, the simplex ETF)."""
    from nclab.theory.central_path import FlowOptions
    from nclab.theory.central_path import simulate as run_sim

    with user_errors(RuntimeError):  # RuntimeError: the ODE solver failed or reached its evaluation bound
        options = FlowOptions(num_checkpoints=checkpoints)
        run = run_sim(K, n, d, t_end, projection.value, options=options, seed=seed, nc_metrics=False)
    if fmt is not OutputFormat.table:
        emit(run.table(), fmt)
        return
    rows = [
        {
            "t": float(t),
            "omega (simulated)": " ".join(f"{w:.4g}" for w in run.omega[i]),
            "oblique closed form": " ".join(f"{w:.4g}" for w in run.omega_oblique[i]),
            "Prop. 2 (orthogonal)": " ".join(f"{w:.4g}" for w in run.omega_orthogonal[i]),
            "max/min": float(run.ratio[i]),
        }
        for i, t in enumerate(run.t)
    ]
    title = f"central-path flow ({projection.value} projection), K={K} n={n} d={d}"
    note = f"max relative error vs this projection's closed form: {run.max_relative_error():.3g}"
    emit(rows, fmt, title, footnotes=[note])


@app.command()
def decompose(
    features: Annotated[str, typer.Argument(help="features H (N, d): .npy, .npz, .pt, .safetensors (FILE:NAME)")],
    labels: Annotated[str, typer.Argument(help="integer labels (N,)")],
    classifier: Annotated[str, typer.Option("--classifier", "-w", help="classifier W (K, d), rows = classes")],
    bias: Annotated[str | None, typer.Option("--bias", "-b", help="bias b (K,); omit for a bias-free head")] = None,
    lam: Annotated[
        list[str] | None,
        typer.Option("--lam", help="W=VALUE: the [Han et al. 2022] lambda on (W, b) (default W=0)"),
    ] = None,
    weight_decay: Annotated[
        float | None, typer.Option("--weight-decay", help="training weight decay (mapped by --objective)")
    ] = None,
    objective: Annotated[
        ObjectiveChoice, typer.Option(help="training objective of --weight-decay (see docs/theory.md)")
    ] = ObjectiveChoice.mse_mean,
    K: Annotated[int | None, num_classes_option("number of classes K (default max label + 1)")] = None,
    fmt: Annotated[OutputFormat, format_option()] = OutputFormat.table,
) -> None:
    """Exact MSE decomposition L = L_NC1 + L_NC2/3 + L_perp of saved features and classifier
    [Han et al. 2022, Sec. 2].

    Terms: L, the regularised MSE loss; L_LS, its value at the least-squares classifier of H; L_NC1, the part
    due to within-class variability; L_NC2/3 (L_NC23), the distance of the class means and the classifier from
    the collapsed configuration; L_perp, the distance of (W, b) from the least-squares classifier (0 on the
    central path); lambda, the [Han et al. 2022] lambda used."""
    import numpy as np

    from nclab.io.arrays import load_array
    from nclab.stats import ClassStats
    from nclab.theory.mse import mse_decomposition_from_stats

    # without --lam, lambda comes from --weight-decay when given (mapped by --objective), else 0
    lam_value = parse_lams(lam, ("W",)).get("W", None if weight_decay is not None else 0.0)
    with user_errors():
        H = load_array(features)
        y = np.asarray(load_array(labels, mmap=False))
        W = np.asarray(load_array(classifier, mmap=False), dtype=np.float64)
        b = None if bias is None else np.asarray(load_array(bias, mmap=False), dtype=np.float64)
        if len(H.shape) != 2:
            raise ValueError(f"features must be 2-D (N, P), got shape {tuple(H.shape)}")
        stats = ClassStats.from_arrays(H, y, K=K, batch_size=8192)
        R = _data_loss(H, y, W, b)
        out = mse_decomposition_from_stats(
            stats, W, b, lam_value, weight_decay=weight_decay, convention=objective.value, data_loss=R
        )
    if fmt is OutputFormat.json:
        emit([], fmt, data=out)
        return
    emit([{"term": k, "value": v} for k, v in out.items()], fmt, f"MSE decomposition of {features}")


def _data_loss(H, y, W, b, batch: int = 8192) -> float:
    """``(1/(2N)) sum ||W h + b - e_y||^2`` streamed over rows (an independent check of the identity)."""
    import numpy as np

    W = np.asarray(W, dtype=np.float64)
    if W.ndim != 2 or W.shape[1] != H.shape[1]:
        raise ValueError(f"W must have shape (C, P) with P = {H.shape[1]} (rows = classes), got {W.shape}")
    C = W.shape[0]
    total = 0.0
    for s in range(0, H.shape[0], batch):
        R = np.asarray(H[s : s + batch], dtype=np.float64) @ W.T
        if b is not None:
            R += b
        yy = y[s : s + batch]
        if yy.size and (yy.min() < 0 or yy.max() >= C):
            raise ValueError(f"labels must lie in [0, {C}) for a classifier with {C} rows")
        R[np.arange(len(yy)), yy] -= 1.0
        total += float(np.sum(R * R))
    return 0.5 * total / H.shape[0]
