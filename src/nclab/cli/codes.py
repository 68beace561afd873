"""``nclab codes``: Softmax Codes, Tammes codes and Thm 3.9 bounds of [Jiang et al. 2024] from the command line."""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from rich.table import Table

from nclab.cli.common import console, fail, make_app

app = make_app("codes", "Spherical codes of [Jiang et al. 2024]: Softmax Codes, Tammes codes, Thm 3.9 bounds.")


class Format(StrEnum):
    table = "table"
    json = "json"


def _emit(rows: list[dict[str, Any]], fmt: Format, title: str) -> None:
    if fmt == Format.json:
        typer.echo(json.dumps(rows if len(rows) != 1 or title.startswith("Thm") else rows[0], indent=2))
        return
    table = Table(title=title)
    for col in rows[0]:
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(*(f"{v:.6g}" if isinstance(v, float) else str(v) for v in r.values()))
    console.print(table)


def _search(kind: str, d: int, K: int, restarts: int, seed: int, steps: int | None, out: Path | None, fmt: Format):
    from nclab.geometry.codes import softmax_code_search, tammes_search

    fn = softmax_code_search if kind == "softmax" else tammes_search
    try:
        res = fn(d, K, restarts=restarts, seed=seed, steps=steps)
    except ValueError as err:
        fail(err)
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
        "polished_values": [float(v) for v in res.values],
        "kkt_residual": float("nan") if res.kkt is None else res.kkt.residual,
        "kkt_ok": None if res.kkt is None else bool(res.kkt.ok),
        "active_constraints": None if res.kkt is None else len(res.kkt.active),
        "certifies": res.certifies,
    }
    if res.bounds is not None:
        row.update(bound_lower=res.bounds.lower, bound_upper=res.bounds.upper, bound_valid=res.bounds.valid)
    if out is not None:
        np.save(out, res.W)
        row["saved"] = str(out)
    if fmt == Format.table:
        row["polished_values"] = ", ".join(f"{v:.6g}" for v in row["polished_values"])
        table = Table(title=f"{'Softmax Code' if kind == 'softmax' else 'Tammes code'} (d={d}, K={K})")
        table.add_column("quantity")
        table.add_column("value", justify="right")
        for k, v in row.items():
            table.add_row(k, f"{v:.6g}" if isinstance(v, float) else str(v))
        console.print(table)
    else:
        typer.echo(json.dumps(row, indent=2))


_D = Annotated[int, typer.Option("--d", "-d", help="feature dimension d")]
_K = Annotated[int, typer.Option("--K", "-K", help="number of classes K")]
_R = Annotated[int, typer.Option(help="diversified starts (random + spiral/polygon) before the polish")]
_S = Annotated[int, typer.Option(help="random seed")]
_ST = Annotated[
    int | None, typer.Option(help="coarse smoothed steps per start (default 300 when polished, else 1500 + 5K)")
]
_O = Annotated[Path | None, typer.Option("--out", "-o", help="save the code W (K, d) to this .npy file")]
_F = Annotated[Format, typer.Option("--format", "-f", help="output format")]


@app.command()
def softmax(
    d: _D, K: _K, restarts: _R = 16, seed: _S = 0, steps: _ST = None, out: _O = None, fmt: _F = Format.table
) -> None:
    """Numerical Softmax Code: maximise the one-vs-rest margin of K unit vectors in R^d [Jiang et al. 2024, eq. (3)]."""
    _search("softmax", d, K, restarts, seed, steps, out, fmt)


@app.command()
def tammes(
    d: _D, K: _K, restarts: _R = 16, seed: _S = 0, steps: _ST = None, out: _O = None, fmt: _F = Format.table
) -> None:
    """Numerical Tammes code: maximise the minimum pairwise distance of K unit vectors [Jiang et al. 2024, eq. (11)]."""
    _search("tammes", d, K, restarts, seed, steps, out, fmt)


@app.command()
def bounds(
    d: Annotated[list[int], typer.Option("--d", "-d", help="feature dimension(s), repeatable")],
    K: Annotated[list[int], typer.Option("--K", "-K", help="number(s) of classes, repeatable")],
    fmt: _F = Format.table,
) -> None:
    """Thm 3.9 bounds on the optimal one-vs-rest margin [Jiang et al. 2024, eq. (13)] for every (d, K) given."""
    from nclab.geometry.bounds import softmax_code_bounds

    rows = []
    for dd in d:
        for kk in K:
            try:
                b = softmax_code_bounds(dd, kk)
            except ValueError as err:
                fail(err)
            rows.append({"d": dd, "K": kk, "lower": b.lower, "upper": b.upper, "valid": b.valid, "min_K": b.min_K})
    if fmt == Format.json:
        typer.echo(json.dumps(rows, indent=2))
    else:
        _emit(rows, fmt, "Thm 3.9 bounds on max rho_one-vs-rest")
