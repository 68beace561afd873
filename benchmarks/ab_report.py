"""In-process A/B of ``collapse_report`` of full statistics between the working tree and a git commit.

The base commit's ``src/nclab`` is extracted as a package ``nclab_base`` (as in ``ab_measure.py``); both versions
build ClassStats of the same features and time ``collapse_report`` alternately (A B A B ..., the order swapped every
round), so that a shared machine's drifting speed hits both alike. Prints, per (d, K), the median and best times
(wall clock, and the process's CPU time: the steadier measure on a shared machine with ``--threads 1``), the paired
median ratio new / base with its quartiles, the largest relative difference of the reported values, and the load
average before and after.

    python benchmarks/ab_report.py [--base COMMIT] [--configs 512x100,512x1000,2048x100,2048x1000] [--rounds 5]
        [--linalg numpy|torch|auto] [--threads N]

``--linalg torch`` times the working tree's torch backend on the CPU (``ClassMoments(stats, linalg="torch")``,
what a GPU runs, here with torch's CPU kernels) against the base's numpy path.
"""

from __future__ import annotations

import argparse
import importlib
import math
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch
from threadpoolctl import threadpool_limits

from _native import kernels_line, native_blas
from ab_measure import extract_base


def features(d: int, K: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """float32 features of K Gaussian classes, at least 8 per class and 2 d in all (Sigma_W of full rank)."""
    n = max(8, math.ceil(2 * d / K))
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(K), n)
    H = (rng.normal(size=(K, d))[y] + 0.5 * rng.normal(size=(K * n, d))).astype(np.float32)
    return H, y


def build(pkg: str, H: np.ndarray, y: np.ndarray, K: int) -> Any:
    stats = importlib.import_module(f"{pkg}.stats").ClassStats(K, H.shape[1])
    for i in range(0, len(y), 4096):
        stats.update(H[i : i + 4096], y[i : i + 4096])
    return stats


def summary(new: list[float], base: list[float]) -> str:
    """Medians, minima and the paired median ratio new / base with its quartiles."""
    ratios = sorted(x / z for x, z in zip(new, base, strict=True))
    q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
    return (
        f"base {statistics.median(base):.3f} s (best {min(base):.3f}), new {statistics.median(new):.3f} s "
        f"(best {min(new):.3f}), paired ratio {statistics.median(ratios):.3f} (quartiles {q[0]:.3f}-{q[2]:.3f})"
    )


def main() -> None:
    native_blas()
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", default="HEAD")
    ap.add_argument("--configs", default="512x100,512x1000,2048x100,2048x1000")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--linalg", default="auto", choices=["auto", "numpy", "torch"])
    ap.add_argument("--threads", type=int, default=None, help="BLAS and torch threads (default: theirs)")
    args = ap.parse_args()
    if args.threads is not None:
        threadpool_limits(args.threads)
        torch.set_num_threads(args.threads)
    warnings.simplefilter("ignore")  # the reports' expected warnings (unattainable ETF targets at K > d + 1)
    print(kernels_line())
    with tempfile.TemporaryDirectory() as tmp:
        extract_base(args.base, Path(tmp))
        sys.path.insert(0, tmp)
        new_report = importlib.import_module("nclab.metrics").collapse_report
        old_report = importlib.import_module("nclab_base.metrics").collapse_report
        ClassMoments = importlib.import_module("nclab.stats").ClassMoments
        for config in args.configs.split(","):
            d, K = (int(v) for v in config.split("x"))
            H, y = features(d, K)
            new_stats, old_stats = build("nclab", H, y, K), build("nclab_base", H, y, K)
            del H

            def new(s: Any = new_stats) -> dict[str, float]:
                return dict(new_report(ClassMoments(s, linalg=args.linalg)))

            def old(s: Any = old_stats) -> dict[str, float]:
                return dict(old_report(s))

            load0 = os.getloadavg()[0]
            a, b = new(), old()  # warm-up, and the values compared
            diff = max(abs(a[k] - b[k]) / max(abs(b[k]), 1e-300) for k in b if math.isfinite(b[k]))
            tn, to, cn, co = [], [], [], []  # wall and process CPU seconds, new and base
            for r in range(args.rounds):
                for fn, ts, cs in ((new, tn, cn), (old, to, co)) if r % 2 == 0 else ((old, to, co), (new, tn, cn)):
                    t0, c0 = time.perf_counter(), time.process_time()
                    fn()
                    ts.append(time.perf_counter() - t0)
                    cs.append(time.process_time() - c0)
            print(
                f"d={d} K={K} N={len(y)} linalg={args.linalg} threads={args.threads or 'default'}, "
                f"{args.rounds} rounds: wall {summary(tn, to)}; CPU time {summary(cn, co)}; "
                f"largest relative value difference {diff:.1e}; load {load0:.2f} -> {os.getloadavg()[0]:.2f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
