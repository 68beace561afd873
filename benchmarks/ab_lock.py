"""The cost of the accumulator lock: ``ClassStats.update`` through its lock against the same update unlocked
(``ClassStats.update.__wrapped__``), interleaved in one process on the same data, with the load average.

    python benchmarks/ab_lock.py [--rounds 7] [--threads 1] [--batches 1000,100]

Each round times both, in a rotated order, on the bench_stats quick configurations (N, d, K) = (20,000, 512,
100), (10,000, 256, 1,000), (10,000, 384, 60) in float32 batches; the ratio is the median over rounds of the
within-round ratio locked / unlocked. It also times one uncontended acquire and release of the lock. Runs on the
kernels a user's machine selects (``_native.native_blas``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time

import numpy as np
import torch
from threadpoolctl import threadpool_limits

from _native import kernels_line, native_blas
from bench_stats import QUICK
from nclab.stats import ClassStats

UNLOCKED = ClassStats.update.__wrapped__  # type: ignore[attr-defined]


def feed(X, y, K, batch, locked):
    s = ClassStats(K, X.shape[1])
    for i in range(0, X.shape[0], batch):
        if locked:
            s.update(X[i : i + batch], y[i : i + batch])
        else:
            UNLOCKED(s, X[i : i + batch], y[i : i + batch])
    return s


def main() -> None:
    native_blas()
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--batches", default="1000,100")
    args = p.parse_args()
    print(kernels_line())
    lock = threading.RLock()
    n = 200_000
    t0 = time.perf_counter()
    for _ in range(n):
        with lock:
            pass
    print(f"uncontended RLock acquire+release: {(time.perf_counter() - t0) / n * 1e9:.0f} ns")
    rng = np.random.default_rng(0)
    torch.set_num_threads(args.threads)
    with threadpool_limits(args.threads):
        for N, d, K in QUICK:
            y = rng.integers(0, K, N)
            X = torch.from_numpy((rng.normal(size=(K, d))[y] + rng.normal(size=(N, d))).astype(np.float32))
            yt = torch.from_numpy(y)
            for batch in map(int, args.batches.split(",")):
                a = feed(X, yt, K, batch, True)
                b = feed(X, yt, K, batch, False)
                assert np.array_equal(a.counts, b.counts) and np.allclose(a.means, b.means, rtol=0, atol=0)
                ratios, times, loads = [], {True: [], False: []}, []
                for r in range(args.rounds):
                    got = {}
                    for locked in (True, False) if r % 2 == 0 else (False, True):
                        time.sleep(0.2)
                        t0 = time.perf_counter()
                        feed(X, yt, K, batch, locked)
                        got[locked] = time.perf_counter() - t0
                        times[locked].append(got[locked])
                    ratios.append(got[True] / got[False])
                    loads.append(os.getloadavg()[0])
                print(
                    f"N={N} d={d} K={K} batch={batch}: locked {statistics.median(times[True]):.3f} s, unlocked "
                    f"{statistics.median(times[False]):.3f} s, ratio {statistics.median(ratios):.4f} "
                    f"(min {min(ratios):.4f}, max {max(ratios):.4f}); load average {min(loads):.2f}-{max(loads):.2f}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
