"""``nclab codes``: Softmax Codes, Tammes codes and Thm 3.9 bounds of [Jiang et al. 2024] from the command line."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from nclab.cli.common import (
    OutputFormat,
    dim_option,
    emit,
    format_option,
    make_app,
    num_classes_option,
    user_errors,
)

app = make_app("codes", "Spherical codes of [Jiang et al. 2024]: Softmax Codes, Tammes codes, Thm 3.9 bounds.")

#: What every field of ``codes softmax`` / ``codes tammes`` means (printed under the table and in --help).
FIELDS: dict[str, str] = {
    "rho_one_vs_rest": "min over k of the distance of w_k to the convex hull of the other rows (eq. (3))",
    "rho_one_vs_one": "minimum pairwise distance ||w_k - w_j|| (the Tammes objective, eq. (11))",
    "min_angle_deg": "smallest angle between two rows, degrees",
    "max_cos": "largest cosine between two rows",
    "hardmax": "hardmax value at the optimal features; equals -rho_one_vs_rest (Lemma C.4): a solver check",
    "max_duality_gap": "largest duality gap of the one-vs-rest hull QPs (a solver check, ~0)",
    "rattlers": "number of classes farther than rho from the other rows' hull, free to move (Def. 3.4)",
    "restart_values": "exact objective of every polished start, best first (spread = how rugged the landscape is)",
    "kkt_residual": "first-order (KKT) residual of the polished code; <= 1e-9 certifies a local optimum",
    "kkt_ok": "whether the KKT residual certifies a local optimum",
    "active_constraints": "constraints active at the polished code",
    "certifies": "what is and what is not certified, in words",
    "bound_lower": "(and bound_upper) Thm 3.9 bounds on the optimal rho_one_vs_rest; bound_valid: they apply",
}


def _search(
    kind: str, d: int, K: int, restarts: int, seed: int, steps: int | None, out: Path | None, fmt: OutputFormat
) -> None:
    from nclab.geometry.codes import softmax_code_search, tammes_search
    from nclab.io.atomic import atomic_save_npy
    from nclab.validation import check_output_file

    fn = softmax_code_search if kind == "softmax" else tammes_search
    with user_errors():
        if out is not None:  # before the search: a bad path must not cost the computation
            check_output_file(out, name="--out", suffix=".npy")
        res = fn(d, K, restarts=restarts, seed=seed, steps=steps)
    row: dict[str, Any] = {
        "d": d,
        "K": K,
        "rho_one_vs_rest": res.rho_one_vs_rest,
        "rho_one_vs_one": res.rho_one_vs_one,
        "min_angle_deg": res.min_angle_deg,
        "max_cos": res.max_cos,
        "hardmax": res.hardmax,
        "max_duality_gap": res.max_gap,
        "rattlers": int(res.rattlers.size),
        "restart_values": [float(v) for v in res.values],
    }
    if res.kkt is not None:  # no polish, no KKT check: the rows are left out rather than shown empty
        row.update(kkt_residual=res.kkt.residual, kkt_ok=bool(res.kkt.ok), active_constraints=len(res.kkt.active))
    row["certifies"] = res.certifies
    if res.bounds is not None:
        row.update(bound_lower=res.bounds.lower, bound_upper=res.bounds.upper, bound_valid=res.bounds.valid)
    if out is not None:
        # np.save's naming: a path without the suffix gets ".npy" appended
        saved = atomic_save_npy(out if out.suffix == ".npy" else out.with_name(out.name + ".npy"), res.W)
        row["saved"] = str(saved)
    title = f"{'Softmax Code' if kind == 'softmax' else 'Tammes code'} (d={d}, K={K})"
    if fmt is OutputFormat.json:
        emit([], fmt, data=row)
        return
    row["restart_values"] = " ".join(f"{v:.6g}" for v in row["restart_values"])
    rows = [{"quantity": k, "value": v} for k, v in row.items()]
    if fmt is OutputFormat.csv:
        emit(rows, fmt)
        return
    emit(rows, fmt, title, footnotes=[f"{k}: {v}" for k, v in FIELDS.items() if k in row])


_D = Annotated[int, dim_option(min=1)]
_K = Annotated[int, num_classes_option(min=2)]
_R = Annotated[int, typer.Option(help="diversified starts (random + spiral/polygon) before the polish", min=1)]
_S = Annotated[int, typer.Option(help="random seed", min=0)]
_ST = Annotated[
    int | None,
    typer.Option(help="coarse smoothed steps per start (default 300 when polished, else 1500 + 5K)", min=1),
]
_O = Annotated[
    Path | None,
    typer.Option(
        "--out", "-o", help="save the code W (K, d) to this file (its name must end in .npy; the folder must exist)"
    ),
]
_F = Annotated[OutputFormat, format_option()]


@app.command()
def softmax(
    d: _D, K: _K, restarts: _R = 16, seed: _S = 0, steps: _ST = None, out: _O = None, fmt: _F = OutputFormat.table
) -> None:
    """Numerical Softmax Code: maximise the one-vs-rest margin of K unit vectors in R^d [Jiang et al. 2024, eq. (3)].

    Fields are explained under the table."""
    _search("softmax", d, K, restarts, seed, steps, out, fmt)


@app.command()
def tammes(
    d: _D, K: _K, restarts: _R = 16, seed: _S = 0, steps: _ST = None, out: _O = None, fmt: _F = OutputFormat.table
) -> None:
    """Numerical Tammes code: maximise the minimum pairwise distance of K unit vectors [Jiang et al. 2024, eq. (11)].

    Fields are explained under the table."""
    _search("tammes", d, K, restarts, seed, steps, out, fmt)


@app.command()
def bounds(
    d: Annotated[list[int], dim_option("feature dimension(s) d, repeatable")],
    K: Annotated[list[int], num_classes_option("number(s) of classes K, repeatable")],
    fmt: _F = OutputFormat.table,
) -> None:
    """Thm 3.9 bounds on the optimal one-vs-rest margin [Jiang et al. 2024, eq. (13)] for every (d, K) given."""
    from nclab.geometry.bounds import softmax_code_bounds

    rows = []
    for dd in d:
        for kk in K:
            with user_errors():
                b = softmax_code_bounds(dd, kk)
            rows.append({"d": dd, "K": kk, "lower": b.lower, "upper": b.upper, "valid": b.valid, "min_K": b.min_K})
    emit(
        rows,
        fmt,
        "Thm 3.9 bounds on max rho_one-vs-rest",
        footnotes=["lower, upper: bounds on the optimal one-vs-rest margin; valid: whether Thm 3.9 applies "
                   "(K >= min_K); min_K: the smallest K for which it does"],
    )  # fmt: skip
