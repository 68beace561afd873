"""The float32 Gram of a block (``ClassStats.gram_block_rows``, ``_kernels.gram_add``): which routine, how
many rows. Per-row cost of the Gram of a ``(b, d)`` float32 block plus its float64 add into the accumulator, for
b = 1,024 ... 8,192 and three routines -- numpy's ``block.T @ block`` (numpy runs it as one ``ssyrk`` of its own
OpenBLAS and mirrors the triangle), scipy's ``ssyrk`` (the OpenBLAS of the scipy wheel), torch's ``block.T @ block``
(an MKL ``sgemm`` in the CPU build) -- relative to one whole-matrix float32 ``X.T @ X`` of the same rows (numpy).

    python benchmarks/bench_gram_block.py [--threads 1,2] [--rows 32768] [--rounds 5] [--clock wall|cpu]

Rounds interleave everything (the machine is shared); each item's best round is printed, as a ratio to the best
whole-matrix ``X.T @ X`` of the same thread count. ``--clock cpu`` times the process's CPU time instead of the wall
clock (one thread only: other processes on a loaded machine then disturb it far less). Runs on the kernels a
user's machine selects (``_native.native_blas``).
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import torch
from scipy.linalg.blas import ssyrk
from threadpoolctl import threadpool_limits

from _native import kernels_line, native_blas

SIZES = (1024, 2048, 4096, 8192)


def routines(X: np.ndarray) -> dict[str, object]:
    d = X.shape[1]
    G, C = np.zeros((d, d), np.float32), np.zeros((d, d))
    Xt, Gt = torch.from_numpy(X), torch.from_numpy(G)

    def numpy_blocks(b: int) -> None:
        for s in range(0, X.shape[0], b):
            blk = X[s : s + b]
            np.matmul(blk.T, blk, out=G)
            C.__iadd__(G)

    def scipy_blocks(b: int) -> None:
        for s in range(0, X.shape[0], b):
            ssyrk(1.0, X[s : s + b].T, beta=0.0, c=G.T, trans=0, lower=0, overwrite_c=1)
            C.__iadd__(G)

    def torch_blocks(b: int) -> None:
        for s in range(0, X.shape[0], b):
            blk = Xt[s : s + b]
            torch.mm(blk.T, blk, out=Gt)
            C.__iadd__(G)

    out: dict[str, object] = {"whole X.T @ X": lambda: X.T @ X}
    for b in SIZES:
        out[f"numpy b={b}"] = lambda b=b: numpy_blocks(b)
        out[f"scipy b={b}"] = lambda b=b: scipy_blocks(b)
        out[f"torch b={b}"] = lambda b=b: torch_blocks(b)
    return out


def main() -> None:
    native_blas()
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rows", type=int, default=32768)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall")
    args = ap.parse_args()
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    print(kernels_line())
    rng = np.random.default_rng(0)
    for threads in (int(t) for t in args.threads.split(",")):
        torch.set_num_threads(threads)
        with threadpool_limits(threads, user_api="blas"):
            for d in (256, 384, 512, 1024):
                X = rng.standard_normal((args.rows, d), dtype=np.float32)
                fns = routines(X)
                best = dict.fromkeys(fns, float("inf"))
                for _ in range(args.rounds):
                    for name, fn in fns.items():
                        time.sleep(0.05)
                        t0 = clock()
                        fn()  # type: ignore[operator]
                        best[name] = min(best[name], clock() - t0)
                whole = best.pop("whole X.T @ X")
                rows = "  ".join(f"{n}: {t / whole:.2f}" for n, t in best.items())
                load = os.getloadavg()[0]
                head = f"threads={threads} d={d:5d} ({args.clock} clock: whole {whole * 1e3:.1f} ms, load {load:.1f})"
                print(f"{head}  {rows}")


if __name__ == "__main__":
    main()
