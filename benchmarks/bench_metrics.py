"""Cost of the metric suite from ready statistics, against the unit of work it is made of.

    python benchmarks/bench_metrics.py [--d 2048] [--k 1000] [--n-per-class 8] [--cdnv-k 20000]

Prints
  * the wall time of `collapse_report` (every metric that applies to full stats) for d x K, and the time of one
    symmetric eigendecomposition of a d x d matrix measured in the same run (the ratio says how many eigh-
    equivalents the report costs);
  * `cdnv` for K = 20,000 classes: time and peak traced memory, against the K x K float64 matrix (3.2 GB) an
    untiled computation would allocate.
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

import numpy as np

from _native import kernels_line, native_blas
from nclab.metrics import cdnv, collapse_report
from nclab.stats import ClassStats


def main() -> None:
    native_blas()
    ap = argparse.ArgumentParser()
    ap.add_argument("--d", type=int, default=2048)
    ap.add_argument("--k", type=int, default=1000)
    ap.add_argument("--n-per-class", type=int, default=8)
    ap.add_argument("--cdnv-k", type=int, default=20_000)
    ap.add_argument("--cdnv-d", type=int, default=64)
    args = ap.parse_args()
    print(kernels_line())
    rng = np.random.default_rng(0)
    d, K, n = args.d, args.k, args.n_per_class
    y = np.repeat(np.arange(K), n)
    H = (rng.normal(size=(K, d))[y] + 0.5 * rng.normal(size=(K * n, d))).astype(np.float32)
    t0 = time.perf_counter()
    stats = ClassStats(K, d)
    for i in range(0, len(y), 4096):
        stats.update(H[i : i + 4096], y[i : i + 4096])
    t_stats = time.perf_counter() - t0
    del H

    A = stats.sigma_t()
    t0 = time.perf_counter()
    np.linalg.eigh(A)
    t_eigh = time.perf_counter() - t0

    t0 = time.perf_counter()
    report = collapse_report(stats)
    t_report = time.perf_counter() - t0
    tracemalloc.start()  # a second run, traced (tracing slows allocation-heavy code: timed untraced above)
    collapse_report(stats)
    _, peak_report = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    dxd = d * d * 8 / 2**20
    print(f"d={d} K={K} N={K * n}: ClassStats {t_stats:.2f} s")
    print(f"one eigh of a {d}x{d} matrix      {t_eigh:8.3f} s")
    print(f"collapse_report ({len(report)} values)  {t_report:8.3f} s  = {t_report / t_eigh:.1f} eigh-equivalents")
    peak_mib = peak_report / 2**20
    print(f"collapse_report peak traced memory {peak_mib:.0f} MiB = {peak_mib / dxd:.1f} d x d float64 matrices")

    Kc, dc = args.cdnv_k, args.cdnv_d
    yc = np.repeat(np.arange(Kc), 3)
    Hc = rng.normal(size=(Kc, dc))[yc] + 0.1 * rng.normal(size=(3 * Kc, dc))
    sc = ClassStats.from_arrays(Hc, yc, K=Kc, track="light")
    tracemalloc.start()
    t0 = time.perf_counter()
    value = cdnv(sc)
    t_cdnv = time.perf_counter() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    full_kxk = Kc * Kc * 8
    print(
        f"cdnv K={Kc} d={dc}: {t_cdnv:.2f} s, value {value:.6g}, peak traced memory {peak / 2**20:.1f} MiB "
        f"(an untiled K x K float64 matrix: {full_kxk / 2**20:.0f} MiB, ratio {peak / full_kxk:.3f})"
    )


if __name__ == "__main__":
    main()
