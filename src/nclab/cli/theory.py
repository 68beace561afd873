"""``nclab theory``: the central-path simulator and the MSE loss decomposition from the command line."""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Annotated

import numpy as np
import typer
from rich.table import Table

from nclab.cli.common import console, fail, make_app

app = make_app("theory", "Theory engines: MSE decomposition and central-path dynamics [Han et al. 2022].")


class ProjectionChoice(StrEnum):
    oblique = "oblique"
    orthogonal = "orthogonal"


class ConventionChoice(StrEnum):
    mse_mean = "mse_mean"
    mse_sum = "mse_sum"
    paper = "paper"


@app.command()
def simulate(
    classes: Annotated[int, typer.Option("--classes", "-C", help="number of classes C")] = 4,
    per_class: Annotated[int, typer.Option("--per-class", "-N", help="samples per class N")] = 5,
    dim: Annotated[int, typer.Option("--dim", "-P", help="feature dimension P (C N - C >= P)")] = 6,
    t_end: Annotated[float, typer.Option(help="final time")] = 1e4,
    projection: Annotated[ProjectionChoice, typer.Option(help="tangent projection")] = ProjectionChoice.oblique,
    checkpoints: Annotated[int, typer.Option(help="log-spaced checkpoints")] = 8,
    seed: Annotated[int, typer.Option(help="random seed of the initial features")] = 0,
    json_out: Annotated[bool, typer.Option("--json", help="print the trajectory as JSON")] = False,
) -> None:
    """Integrate the renormalised central-path flow; compare omega_j(t) with both closed forms."""
    from nclab.theory.central_path import simulate as run_sim

    try:
        run = run_sim(
            classes, per_class, dim, t_end, projection.value, num_checkpoints=checkpoints, seed=seed, nc_metrics=False
        )
    except (ValueError, RuntimeError) as err:
        fail(err)
        return
    if json_out:
        typer.echo(json.dumps(run.table(), indent=2))
        return
    table = Table(title=f"central-path flow ({projection.value} projection), C={classes} N={per_class} P={dim}")
    table.add_column("t", justify="right")
    table.add_column("omega (simulated)")
    table.add_column("oblique closed form")
    table.add_column("Prop. 2 (orthogonal)")
    table.add_column("max/min", justify="right")
    for i, t in enumerate(run.t):
        table.add_row(
            f"{t:.4g}",
            " ".join(f"{w:.6g}" for w in run.omega[i]),
            " ".join(f"{w:.6g}" for w in run.omega_oblique[i]),
            " ".join(f"{w:.6g}" for w in run.omega_orthogonal[i]),
            f"{run.ratio[i]:.6g}",
        )
    console.print(table)
    console.print(f"max relative error vs this projection's closed form: {run.max_relative_error():.3g}")


@app.command()
def decompose(
    features: Annotated[str, typer.Argument(help="features H (N, P): .npy, .npz, .pt, .safetensors (FILE:NAME)")],
    labels: Annotated[str, typer.Argument(help="integer labels (N,)")],
    classifier: Annotated[str, typer.Option("--classifier", "-w", help="classifier W (C, P), rows = classes")],
    bias: Annotated[str | None, typer.Option("--bias", "-b", help="bias b (C,); omit for a bias-free head")] = None,
    lam: Annotated[float | None, typer.Option("--lam", help="the [Han et al. 2022] lambda")] = None,
    weight_decay: Annotated[
        float | None, typer.Option("--weight-decay", help="training weight decay (mapped by --convention)")
    ] = None,
    convention: Annotated[
        ConventionChoice, typer.Option(help="training objective of --weight-decay (see docs/theory.md)")
    ] = ConventionChoice.mse_mean,
    num_classes: Annotated[int | None, typer.Option("--num-classes", "-k", help="C (default max label + 1)")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """Exact MSE decomposition L = L_NC1 + L_NC2/3 + L_perp of saved features and classifier
    [Han et al. 2022, Sec. 2]."""
    from nclab.io.arrays import load_array
    from nclab.stats import ClassStats
    from nclab.theory.mse import mse_decomposition_from_stats

    if lam is None and weight_decay is None:
        lam = 0.0
    try:
        H = load_array(features)
        y = np.asarray(load_array(labels, mmap=False))
        W = np.asarray(load_array(classifier, mmap=False), dtype=np.float64)
        b = None if bias is None else np.asarray(load_array(bias, mmap=False), dtype=np.float64)
        if len(H.shape) != 2:
            raise ValueError(f"features must be 2-D (N, P), got shape {tuple(H.shape)}")
        stats = ClassStats.from_arrays(H, y, num_classes=num_classes, batch_size=8192)
        R = _data_loss(H, y, W, b)
        out = mse_decomposition_from_stats(
            stats, W, b, lam, weight_decay=weight_decay, convention=convention.value, data_loss=R
        )
    except (ValueError, TypeError, KeyError, FileNotFoundError) as err:
        fail(err)
        return
    if json_out:
        typer.echo(json.dumps(out, indent=2))
        return
    table = Table(title=f"MSE decomposition of {features} (lambda = {out['lambda']:.6g})")
    table.add_column("term")
    table.add_column("value", justify="right")
    for k, v in out.items():
        table.add_row(k, f"{v:.6g}")
    console.print(table)


def _data_loss(H, y, W, b, batch: int = 8192) -> float:
    """``(1/(2N)) sum ||W h + b - e_y||^2`` streamed over rows (an independent check of the identity)."""
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
