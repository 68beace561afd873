"""``nclab ufm``: solve a UFM and print the closed-form theory next to the numerical optimum."""

from __future__ import annotations

import json
import math
from typing import Annotated, Any

import numpy as np
import typer
from rich.table import Table

from nclab.cli.common import console, fail, make_app

app = make_app(
    "ufm", "Unconstrained-features models: closed forms vs numerical optima ([Tirer & Bruna 2022; Wang et al. 2024])."
)


def _parse_lams(items: list[str]) -> dict[str, float]:
    out: dict[str, float] = {}
    for item in items:
        if "=" not in item:
            raise typer.BadParameter(f"expected KEY=VALUE (e.g. W=0.01), got {item!r}", param_hint="--lam")
        key, value = item.split("=", 1)
        try:
            out[key.strip()] = float(value)
        except ValueError:
            raise typer.BadParameter(f"{value!r} is not a number", param_hint="--lam") from None
    return out


def _class_means(H: np.ndarray, K: int) -> np.ndarray:
    return H.reshape(K, -1, H.shape[1]).mean(axis=1)


def _gram_summary(G: np.ndarray) -> tuple[float, float]:
    K = G.shape[0]
    return float(np.trace(G) / K), float((G.sum() - np.trace(G)) / (K * (K - 1)))


def side_by_side(result: Any) -> list[tuple[str, float | None, float]]:
    """Rows (quantity, theory or None, numeric): objective, and the mean diagonal / off-diagonal entries of
    every predicted Gram matrix (class-mean Grams per level, ``W W^T``, the logits ``M W^T``), and the bias."""
    spec, opt = result.spec, result.theory
    rows: list[tuple[str, float | None, float]] = [("objective", None if opt is None else opt.loss, result.loss)]
    levels = result.levels()
    K = spec.K
    W = result.params[spec.classifier_key]
    deepest = _class_means(list(levels.values())[-1], K)
    numeric = {name: _class_means(H, K) @ _class_means(H, K).T for name, H in levels.items() if "pre" not in name}
    numeric["W"] = W @ W.T
    numeric["WH"] = deepest @ W.T
    for key, G in numeric.items():
        th = None if opt is None or key not in opt.grams else _gram_summary(opt.grams[key])
        num = _gram_summary(G)
        label = {"W": "W W^T", "WH": "M W^T (logits)"}.get(key, f"{key} class-mean Gram")
        rows.append((f"{label}: diag", None if th is None else th[0], num[0]))
        rows.append((f"{label}: off-diag", None if th is None else th[1], num[1]))
    if "b" in result.params:
        rows.append(
            (
                "mean bias",
                None if opt is None or opt.bias is None else float(opt.bias.mean()),
                float(np.mean(result.params["b"])),
            )
        )
    rows.append(("gradient norm", None, result.grad_norm))
    return rows


def _fmt(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.12g}" if math.isfinite(v) else str(v)


@app.command()
def solve(
    model: Annotated[
        str,
        typer.Option(help="mse-bias-free | mse-bias | mse-regbias | extended-linear | extended-relu | ce-wd | mufm"),
    ],
    K: Annotated[int, typer.Option("--K", help="number of classes")] = 4,
    n: Annotated[int, typer.Option("--n", help="samples per class")] = 5,
    d: Annotated[int, typer.Option("--d", help="feature dimension")] = 8,
    lam: Annotated[list[str] | None, typer.Option("--lam", help="KEY=VALUE, repeatable (default: all 5e-3)")] = None,
    solver: Annotated[str, typer.Option(help="lbfgs | gd | central | alternating")] = "lbfgs",
    convention: Annotated[
        str,
        typer.Option(help='lambda convention: "001" ([Tirer & Bruna 2022]) | "002" (normalised, [Wang et al. 2024])'),
    ] = "001",
    seed: Annotated[int, typer.Option(help="random seed")] = 0,
    iters: Annotated[int | None, typer.Option(help="GD iterations (gd solver)")] = None,
    depth: Annotated[int | None, typer.Option(help="number of weight matrices (extended models)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON instead of a table")] = False,
) -> None:
    """Solve MODEL numerically and print theory vs numeric side by side."""
    from nclab.ufm.models import lambda_keys
    from nclab.ufm.solvers import solve as ufm_solve

    try:
        keys = lambda_keys(model, depth)
    except ValueError as err:
        fail(err)
    lams = _parse_lams(lam) if lam else dict.fromkeys(keys, 5e-3)
    options: dict[str, Any] = {"convention": convention}
    if depth is not None:
        options["depth"] = depth
    if iters is not None:
        if solver != "gd":
            raise typer.BadParameter("--iters applies to --solver gd", param_hint="--iters")
        options.update(iters=iters, metrics_every=0, log_every=max(1, iters // 100))
    try:
        result = ufm_solve(model, K=K, n=n, d=d, lams=lams, solver=solver, seed=seed, **options)
    except ValueError as err:
        fail(err)
    rows = side_by_side(result)
    if as_json:
        typer.echo(json.dumps({q: {"theory": t, "numeric": v} for q, t, v in rows}, indent=2))
        return
    table = Table(title=f"{model} (K={K}, n={n}, d={d}, solver={solver}, lams={lams}, convention {convention})")
    table.add_column("quantity")
    table.add_column("theory", justify="right")
    table.add_column("numeric", justify="right")
    table.add_column("difference", justify="right")
    for q, t, v in rows:
        table.add_row(q, _fmt(t), _fmt(v), "-" if t is None else f"{v - t:.2e}")
    console.print(table)
    if result.theory is not None:
        state = "nonzero" if result.theory.nonzero else "zero"
        console.print(
            f"theory: {state} optimum; threshold {result.theory.threshold:.6g} (critical {result.theory.critical:.6g})"
        )


@app.command("models")
def list_models() -> None:
    """List the UFM models and their lambda keys."""
    from nclab.ufm.models import UFM_MODELS, lambda_keys

    for m in UFM_MODELS:
        console.print(f"{m}: lams {', '.join(lambda_keys(m))}")
