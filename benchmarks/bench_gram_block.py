"""Rows per float32 Gram block (``ClassStats.gram_block_rows``): per-row cost of one float32 ``ssyrk`` of a
``(b, d)`` block plus its float64 add into the accumulator, for b = 256 ... 4,096.

    python benchmarks/bench_gram_block.py [--threads 1]

Rounds interleave the block sizes (the machine is shared); each size's best round is printed relative to the
best size. One BLAS thread by default: the block size is about the per-core kernel efficiency, and one thread is
far less disturbed by other processes.
"""

from __future__ import annotations

import argparse
import os


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rows", type=int, default=16384)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    os.environ["OPENBLAS_NUM_THREADS"] = str(args.threads)  # before numpy loads OpenBLAS
    import time

    import numpy as np
    from scipy.linalg.blas import ssyrk

    rng = np.random.default_rng(0)
    sizes = (256, 512, 1024, 2048, 4096)
    for d in (256, 384, 512, 1024):
        X = rng.standard_normal((args.rows, d), dtype=np.float32)
        G = np.zeros((d, d), np.float32)
        C = np.zeros((d, d))
        best = dict.fromkeys(sizes, float("inf"))
        for _ in range(args.rounds):
            for b in sizes:
                t0 = time.perf_counter()
                for s in range(0, args.rows, b):
                    ssyrk(1.0, X[s : s + b].T, beta=0.0, c=G.T, trans=0, lower=0, overwrite_c=1)
                    C += G
                best[b] = min(best[b], time.perf_counter() - t0)
        top = min(best.values())
        print(f"d={d:5d}  " + "  ".join(f"b={b}: {best[b] / top:.2f}" for b in sizes) + f"   (best {top * 1e3:.1f} ms)")


if __name__ == "__main__":
    main()
