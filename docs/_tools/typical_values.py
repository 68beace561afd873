"""The table of typical values in docs/guides/values.md, from the runs of ``nclab demo``.

    nclab demo --out runs/demo            # about 30 s of CPU time
    python docs/_tools/typical_values.py runs/demo

Prints a Markdown table: each metric at the penultimate layer of the demo's MSE and CE runs, at epoch 0 (the
initialisation, the same network for both runs), at the first epoch with zero training error, and at the last
epoch; each cell is ``train / test``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from nclab.io import read_metrics

METRICS = (
    "nc1",
    "vci",
    "trace_ratio",
    "cdnv",
    "within_class_cosine",
    "equinorm",
    "equiangularity",
    "max_angle",
    "etf_gram_error",
    "self_duality",
    "ncc_accuracy",
    "ncc_mismatch",
    "classifier_accuracy",
)


def _values(run_dir: Path, metric: str) -> tuple[dict[tuple[int, str], float], int, int]:
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    layer, zero, last = summary["penultimate"], summary["zero_error_epoch"], summary["epochs"]
    rows = read_metrics(run_dir)
    return {(r.epoch, r.split): r.value for r in rows if (r.layer, r.metric) == (layer, metric)}, zero, last


def _pair(value: dict[tuple[int, str], float], epoch: int) -> str:
    return " / ".join(f"{value[(epoch, s)]:.3g}" if (epoch, s) in value else "-" for s in ("train", "test"))


def table(demo: Path) -> str:
    """One row per metric; each cell ``train / test``."""
    _, zero_mse, _ = _values(demo / "mse", "nc1")
    _, zero_ce, _ = _values(demo / "ce", "nc1")
    lines = [
        f"| metric | epoch 0 | MSE, zero error (epoch {zero_mse}) | MSE, last | CE, zero error (epoch {zero_ce}) "
        "| CE, last |",
        "|---|---|---|---|---|---|",
    ]
    for metric in METRICS:
        mse, zero, last = _values(demo / "mse", metric)
        ce, zero_c, last_c = _values(demo / "ce", metric)
        cells = [_pair(mse, 0), _pair(mse, zero), _pair(mse, last), _pair(ce, zero_c), _pair(ce, last_c)]
        lines.append(f"| `{metric}` | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(table(Path(sys.argv[1] if len(sys.argv) > 1 else "runs/demo")))
