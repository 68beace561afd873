"""ClassStats throughput against the machine's limit for this work, measured in the same run.

    python benchmarks/bench_stats.py [--n 100000] [--d 512] [--k 100] [--batch 1000] [--repeats 3]

Prints the best-of-`repeats` wall time of
  * ClassStats(track="full") over all float32 batches (float64 accumulation included),
  * the float64 Gram X^T X of the same data already in float64 (numpy, one BLAS call: the GEMM floor),
  * a straightforward two-pass per-class reference over the same batches (means first, then per-class
    centred scatter D_k^T D_k per batch),
  * light vs full ClassStats at d = 4096,
and the ratios the targets are stated in (benchmarks/RESULTS.md).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from nclab.stats import ClassStats


def best(fn, repeats):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def two_pass_reference(X, y, K, batch):
    N, d = X.shape
    sums = np.zeros((K, d))
    counts = np.zeros(K)
    for s in range(0, N, batch):
        xb = X[s : s + batch].astype(np.float64)
        yb = y[s : s + batch]
        for k in np.unique(yb):
            sums[k] += xb[yb == k].sum(axis=0)
            counts[k] += (yb == k).sum()
    means = sums / counts[:, None]
    S = np.zeros((d, d))
    for s in range(0, N, batch):
        xb = X[s : s + batch].astype(np.float64)
        yb = y[s : s + batch]
        for k in np.unique(yb):
            D = xb[yb == k] - means[k]
            S += D.T @ D
    return S / N


def run_stats(X, y, K, batch, track):
    s = ClassStats(K, X.shape[1], track=track)
    for i in range(0, X.shape[0], batch):
        s.update(X[i : i + batch], y[i : i + batch])
    return s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--d", type=int, default=512)
    ap.add_argument("--k", type=int, default=100)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--wide-d", type=int, default=4096)
    ap.add_argument("--wide-n", type=int, default=20_000)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    N, d, K, B = args.n, args.d, args.k, args.batch
    y = rng.integers(0, K, N)
    X = (rng.normal(size=(K, d))[y] + rng.normal(size=(N, d))).astype(np.float32)
    X64 = X.astype(np.float64)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, N={N} d={d} K={K} batch={B}")

    t_stats = best(lambda: run_stats(X, y, K, B, "full"), args.repeats)
    t_gemm = best(lambda: X64.T @ X64, args.repeats)
    t_ref = best(lambda: two_pass_reference(X, y, K, B), max(1, args.repeats - 1))
    # correctness guard: the benchmark measures the real computation
    ref = two_pass_reference(X[:5000], y[:5000], K, B)
    got = run_stats(X[:5000], y[:5000], K, B, "full").sigma_w()
    assert np.allclose(got, ref, rtol=1e-9, atol=1e-12), "ClassStats disagrees with the reference"

    print(f"ClassStats full           {t_stats:8.3f} s")
    print(f"float64 X^T X (GEMM)      {t_gemm:8.3f} s")
    print(f"two-pass reference        {t_ref:8.3f} s")
    print(f"ratio ClassStats / GEMM   {t_stats / t_gemm:8.2f}   (target <= 1.5)")
    print(f"speed-up vs two-pass      {t_ref / t_stats:8.2f}   (target >= 5)")

    dw, nw = args.wide_d, args.wide_n
    yw = rng.integers(0, K, nw)
    Xw = rng.normal(size=(nw, dw)).astype(np.float32)
    t_full_w = best(lambda: run_stats(Xw, yw, K, B, "full"), max(1, args.repeats - 1))
    t_light_w = best(lambda: run_stats(Xw, yw, K, B, "light"), args.repeats)
    print(f"d={dw} N={nw}: full {t_full_w:.3f} s, light {t_light_w:.3f} s")
    print(f"speed-up light vs full    {t_full_w / t_light_w:8.2f}   (target >= 10)")


if __name__ == "__main__":
    main()
