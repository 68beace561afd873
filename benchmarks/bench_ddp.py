"""Measurement overhead under DDP: the demo config trained by one process and by ``--nproc`` gloo ranks on the CPU.

Both runs are ``nclab train`` in a child process (``--nproc N`` for the data-parallel one, which starts
``torchrun``), on the demo's CE config shortened to ``--epochs`` (default 40: 10 measured epochs), one thread per
process. From each run's ``summary.json`` (rank 0's timers): training seconds, measurement seconds (the measured
epochs' passes, all-reduces and metrics, plus the zero-error checks) and their ratio, the measurement overhead of
``bench_train.py``. Printed: both runs' figures and the ratios DDP / single of the measurement time and of the
overhead. With N ranks a measurement forwards 1/N of each split per rank, then all-reduces the statistics (d x d
at the penultimate layer) and computes the metrics on every rank; the ideal is a measurement time ratio of 1/N
when each rank has its own core.

    .venv/bin/python benchmarks/bench_ddp.py [--epochs 40] [--nproc 2] [--runs 1]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from _native import kernels_line, native_blas


def run(config: Path, out: Path, nproc: int) -> dict[str, float]:
    cmd = [sys.executable, "-m", "nclab", "train", str(config), "--out", str(out), "--no-progress"]
    if nproc > 1:
        cmd += ["--nproc", str(nproc)]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    wall = time.perf_counter() - t0
    summary = json.loads((out / "summary.json").read_text())
    t = summary["timings"]
    n = len(summary["measured_epochs"])
    return {
        "wall_s": wall,
        "train_s": t["train_s"],
        "measure_s": t["measure_s"],
        "per_measurement_s": t["measure_s"] / n,
        "measure/train": t["measure_s"] / t["train_s"],
    }


def main() -> None:
    native_blas()
    from nclab.experiments.demo import demo_config

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=40)
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--runs", type=int, default=1)
    args = ap.parse_args()
    print(kernels_line())
    cfg = demo_config("ce")
    cfg = {**cfg, "report": False, "train": {**cfg["train"], "epochs": args.epochs, "threads": 1}}
    results: dict[str, list[dict[str, float]]] = {"single": [], "ddp": []}
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "config.yaml"
        config.write_text(yaml.safe_dump(cfg))
        for i in range(args.runs):
            results["single"].append(run(config, Path(tmp) / f"single{i}", 1))
            results["ddp"].append(run(config, Path(tmp) / f"ddp{i}", args.nproc))
    med = {k: {q: statistics.median(r[q] for r in rs) for q in rs[0]} for k, rs in results.items()}
    print(f"demo CE config, {args.epochs} epochs, medians over {args.runs} run(s); DDP = {args.nproc} gloo ranks")
    print(f"{'':8s} {'wall s':>8s} {'train s':>8s} {'measure s':>10s} {'per meas. s':>12s} {'measure/train':>14s}")
    for k, m in med.items():
        print(
            f"{k:8s} {m['wall_s']:8.2f} {m['train_s']:8.2f} {m['measure_s']:10.2f} {m['per_measurement_s']:12.3f} "
            f"{m['measure/train']:14.3f}"
        )
    s, d = med["single"], med["ddp"]
    print(f"ratio DDP / single: measurement time {d['measure_s'] / s['measure_s']:.2f}x, ", end="")
    print(f"training time {d['train_s'] / s['train_s']:.2f}x, overhead {d['measure/train'] / s['measure/train']:.2f}x")


if __name__ == "__main__":
    main()
