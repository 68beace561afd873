"""In-process A/B of ClassStats between the working tree and a git commit, against the machine's float32 and
float64 ``X.T @ X`` and the peer's float32 two passes (torch), interleaved.

The base commit's ``src/nclab`` is extracted as a package ``nclab_base`` (as in ``ab_measure.py``); each round
runs every method once, in a rotated order, each after a short pause, on the same data: nclab float32 and float64
compute, new and base, nclab float32 without unit sums (new), the peer (torch float32 two passes), numpy's
float32 and float64 ``X.T @ X`` (the float64 copy made once, outside the timing). Prints medians and the median
over rounds of each within-round ratio, with the load average.

    python benchmarks/ab_stats.py [--base COMMIT] [--threads 1,2] [--rounds 5] [--clock wall|cpu] [--configs 0,1,2]

``--clock cpu`` times the process's CPU time (one thread only: on a loaded machine other processes then disturb
it far less; with two threads it would add the threads' times). Runs on the kernels a user's machine selects.
"""

from __future__ import annotations

import argparse
import importlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from threadpoolctl import threadpool_limits

from _native import kernels_line, native_blas
from ab_measure import extract_base
from bench_stats import CONFIGS, peer_sigma_w_torch


def run(cls, X, y, K, batch, **kwargs):
    s = cls(K, X.shape[1], **kwargs)
    for i in range(0, X.shape[0], batch):
        s.update(X[i : i + batch], y[i : i + batch])
    s.sigma_w(copy=False)


def time_config(new, old, N, d, K, args, clock, rng):
    """Interleaved rounds of every method on one configuration: times per method, load averages per round."""
    yn = rng.integers(0, K, N)
    Xn = (rng.normal(size=(K, d))[yn] + rng.normal(size=(N, d))).astype(np.float32)
    X64 = Xn.astype(np.float64)
    X, y, b = torch.from_numpy(Xn), torch.from_numpy(yn), args.batch
    fns = {
        "new float32": lambda: run(new, X, y, K, b, compute_dtype="float32"),
        "base float32": lambda: run(old, X, y, K, b, compute_dtype="float32"),
        "new float64": lambda: run(new, X, y, K, b),
        "base float64": lambda: run(old, X, y, K, b),
        "new f32 no unit sums": lambda: run(new, X, y, K, b, compute_dtype="float32", unit_sums=False),
        "peer float32 (torch)": lambda: peer_sigma_w_torch(X, y, K, b),
        "float32 X.T @ X": lambda: Xn.T @ Xn,
        "float64 X.T @ X": lambda: X64.T @ X64,
    }
    names = list(fns)
    times: dict[str, list[float]] = {n: [] for n in names}
    loads = []
    for r in range(args.rounds):
        for n in names[r % len(names) :] + names[: r % len(names)]:
            time.sleep(0.3)
            t0 = clock()
            fns[n]()
            times[n].append(clock() - t0)
        loads.append(os.getloadavg()[0])
    return times, loads


def report(N, d, K, threads, times, loads):
    print(f"\nN={N} d={d} K={K}, {threads} thread(s), load {min(loads):.2f}-{max(loads):.2f}:")
    for n, ts in times.items():
        print(f"  {n:22s} {statistics.median(ts):.4f} s")
    for a, c in [
        ("new float32", "float32 X.T @ X"),
        ("base float32", "float32 X.T @ X"),
        ("new float32", "peer float32 (torch)"),
        ("new f32 no unit sums", "float32 X.T @ X"),
        ("new float64", "float64 X.T @ X"),
        ("base float64", "float64 X.T @ X"),
        ("new float32", "base float32"),
        ("new float64", "base float64"),
    ]:
        r = statistics.median(x / z for x, z in zip(times[a], times[c], strict=True))
        print(f"  {a} / {c}: {r:.2f}")


def main() -> None:
    native_blas()
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", default="HEAD", help="commit to compare the working tree against (default HEAD)")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall")
    ap.add_argument("--configs", default="0,1,2", help="indices into bench_stats.CONFIGS")
    ap.add_argument("--batch", type=int, default=1000)
    args = ap.parse_args()
    tmp = tempfile.TemporaryDirectory()
    extract_base(args.base, Path(tmp.name))
    sys.path.insert(0, tmp.name)
    old = importlib.import_module("nclab_base.stats").ClassStats
    from nclab.stats import ClassStats as new

    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    print(kernels_line())
    print(f"base {args.base}, {args.rounds} interleaved rounds, {args.clock} clock")
    rng = np.random.default_rng(0)
    for threads in (int(t) for t in args.threads.split(",")):
        if threads > 1 and args.clock == "cpu":
            print(f"skipping {threads} threads: the cpu clock adds the threads' times")
            continue
        torch.set_num_threads(threads)
        with threadpool_limits(threads, user_api="blas"):
            for N, d, K in (CONFIGS[int(i)] for i in args.configs.split(",")):
                times, loads = time_config(new, old, N, d, K, args, clock, rng)
                report(N, d, K, threads, times, loads)
    tmp.cleanup()


if __name__ == "__main__":
    main()
