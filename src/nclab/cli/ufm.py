"""``nclab ufm``: solve a UFM and print the closed-form theory next to the numerical optimum."""

from __future__ import annotations

import math
from typing import Annotated, Any

import typer

from nclab.cli.common import (
    OutputFormat,
    dim_option,
    emit,
    format_option,
    make_app,
    note,
    num_classes_option,
    parse_lams,
    per_class_option,
    user_errors,
)

app = make_app(
    "ufm", "Unconstrained-features models: closed forms vs numerical optima ([Tirer & Bruna 2022; Wang et al. 2024])."
)


#: The default of every lambda of ``ufm solve`` (a partial ``--lam`` keeps it for the keys it does not name).
DEFAULT_LAM = 5e-3
#: Relative gradient norm above which a solve is reported as not converged.
GRAD_TOL = 1e-6


def _class_means(H: Any, K: int) -> Any:
    return H.reshape(K, -1, H.shape[1]).mean(axis=1)


def _gram_summary(G: Any) -> tuple[float, float]:
    import numpy as np

    K = G.shape[0]
    return float(np.trace(G) / K), float((G.sum() - np.trace(G)) / (K * (K - 1)))


def side_by_side(result: Any) -> list[tuple[str, float | None, float]]:
    """Rows (quantity, theory or None, numeric): objective, and the mean diagonal / off-diagonal entries of
    every predicted Gram matrix (class-mean Grams per level, ``W W^T``, the logits ``M W^T``), and the bias."""
    import numpy as np

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


def _no_theory_reason(result: Any) -> str:
    """Why ``result`` has no closed form at all (the closed form's own error message)."""
    from nclab.ufm.closed_forms import optimum_for_spec

    try:
        optimum_for_spec(result.spec, strict=True)
    except ValueError as err:
        return str(err)
    return "no closed form for this model"


@app.command()
def solve(
    model: Annotated[
        str,
        typer.Option(help="mse-bias-free | mse-bias | mse-regbias | extended-linear | extended-relu | ce-wd | mufm"),
    ],
    K: Annotated[int, num_classes_option()] = 4,
    n: Annotated[int, per_class_option()] = 5,
    d: Annotated[int, dim_option()] = 8,
    lam: Annotated[
        list[str] | None,
        typer.Option(
            "--lam",
            help=f"KEY=VALUE, repeatable; keys per model in `nclab ufm models`; a key not given keeps {DEFAULT_LAM:g}",
        ),
    ] = None,
    solver: Annotated[str, typer.Option(help="lbfgs | gd | central | alternating")] = "lbfgs",
    lam_convention: Annotated[
        str,
        typer.Option(
            "--lam-convention",
            help="scaling of the lambdas: penalty_sum (lam/2 ||W||^2, [Tirer & Bruna 2022]) | penalty_mean "
            "(penalties averaged over classes / samples, [Wang et al. 2024])",
        ),
    ] = "penalty_sum",
    seed: Annotated[int, typer.Option(help="random seed")] = 0,
    iters: Annotated[int | None, typer.Option(help="GD iterations (gd solver)")] = None,
    depth: Annotated[int | None, typer.Option(help="number of weight matrices (extended models)")] = None,
    fmt: Annotated[OutputFormat, format_option()] = OutputFormat.table,
) -> None:
    """Solve MODEL numerically and print theory vs numeric side by side.

    Rows: objective (the regularised loss); for each feature level and for W, the mean diagonal and mean
    off-diagonal entry of its class-mean Gram matrix (W W^T for the classifier, M W^T for the logits of the class
    means); mean bias; gradient norm (a convergence check: 0 at a stationary point). A blank theory cell carries
    a footnote saying why. A solve whose gradient norm exceeds 1e-6 (relative to the objective) is reported as
    not converged on stderr."""
    from nclab.ufm.models import lambda_keys
    from nclab.ufm.solvers import solve as ufm_solve

    with user_errors():
        keys = lambda_keys(model, depth)
    lams = parse_lams(lam, keys, dict.fromkeys(keys, DEFAULT_LAM))
    options: dict[str, Any] = {"convention": lam_convention}
    if depth is not None:
        options["depth"] = depth
    if iters is not None:
        if solver != "gd":
            raise typer.BadParameter("--iters applies to --solver gd", param_hint="--iters")
        options.update(iters=iters, metrics_every=0, log_every=max(1, iters // 100))
    with user_errors():
        result = ufm_solve(model, K=K, n=n, d=d, lams=lams, solver=solver, seed=seed, **options)
    if not result.grad_norm <= GRAD_TOL * max(1.0, abs(result.loss)):
        note(
            f"not converged: gradient norm {result.grad_norm:.3g} after the {solver} solve "
            f"(tolerance {GRAD_TOL:g} x max(1, |objective|)); raise --iters or use --solver lbfgs"
        )
    rows = side_by_side(result)
    if fmt is OutputFormat.json:
        emit([], fmt, data={q: {"theory": t, "numeric": v} for q, t, v in rows})
        return
    notes: list[str] = []
    marks: dict[str, str] = {}

    def mark(reason: str) -> str:
        if reason not in marks:
            marks[reason] = f"[{len(marks) + 1}]"
            notes.append(f"{marks[reason]} {reason}")
        return marks[reason]

    opt = result.theory
    objective_gap = abs(result.loss - opt.loss) if opt is not None else math.inf
    table = []
    for q, t, v in rows:
        if t is None:
            if q == "gradient norm":
                why = "no theory entry: a convergence check, 0 at a stationary point"
            elif opt is None:
                why = f"no closed form: {_no_theory_reason(result)}"
            else:
                why = "the closed form does not predict this entry"
            table.append({"quantity": q, "theory": mark(why), "numeric": v, "difference": mark(why)})
            continue
        diff = v - t
        if abs(diff) > 1e-3 * max(1.0, abs(t)) and objective_gap <= 1e-8 * max(1.0, abs(opt.loss)):
            q += " " + mark(
                f"the objective equals the closed form (to {objective_gap:.1e}), so this is a global minimiser "
                "too: the minimiser is not unique in this entry, and the closed form shows one of them"
            )
        table.append({"quantity": q, "theory": t, "numeric": v, "difference": diff})
    if opt is not None:
        state = "nonzero" if opt.nonzero else "zero"
        notes.append(f"theory: {state} optimum; threshold {opt.threshold:.4g} (critical {opt.critical:.4g})")
    lam_text = ", ".join(f"{k}={v:g}" for k, v in lams.items())
    title = f"{model} (K={K}, n={n}, d={d}, solver={solver}, lambda {lam_text}, convention {lam_convention})"
    emit(table, fmt, title, footnotes=notes if fmt is OutputFormat.table else ())


@app.command("models")
def list_models(fmt: Annotated[OutputFormat, format_option()] = OutputFormat.table) -> None:
    """List the UFM models and their lambda keys (the keys of `ufm solve --lam`)."""
    from nclab.ufm.models import UFM_MODELS, lambda_keys

    rows = [{"model": m, "lambda keys": " ".join(lambda_keys(m))} for m in UFM_MODELS]
    if fmt is OutputFormat.json:
        emit([], fmt, data={m: lambda_keys(m) for m in UFM_MODELS})
        return
    emit(rows, fmt, "UFM models")
