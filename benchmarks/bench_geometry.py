"""Margins of many classes and the Softmax Code solver (paper 003), with baselines measured in the same run.

    python benchmarks/bench_geometry.py [--d 512] [--ks 1000 10000] [--sample 20] [--code-restarts 4]

For each K (random unit rows, d = 512):
  * ``rho_one_vs_rest(W)``: wall time and peak traced memory (numpy allocations, tracemalloc);
  * baseline: the blocked Gram pass ``W W^T`` it cannot avoid (nearest neighbours and lower bounds), time;
  * per-class cost: the candidate + violator solver vs the full QP over all K-1 other classes, on ``--sample``
    classes (same answers, checked), and the peak memory of both;
  * the dense ``K x K`` Gram matrix a naive implementation would hold, for scale.
Softmax Code (d=10, K=100): best-of-``--code-restarts`` wall time and value, against one restart (baseline) and
the Thm 3.9 bounds.
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

import numpy as np

from nclab.geometry import random_oblique, rho_one_vs_rest, softmax_code_bounds
from nclab.geometry.hull import _class_distance, _num_candidates, _scan


def timed(fn):
    tracemalloc.start()
    t0 = time.perf_counter()
    out = fn()
    dt = time.perf_counter() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return out, dt, peak / 2**20


def bench_rho(K: int, d: int, sample: int, seed: int) -> None:
    W = random_oblique(K, d, seed)
    rho, t_rho, m_rho = timed(lambda: rho_one_vs_rest(W))
    _, t_gram, m_gram = timed(lambda: _scan(W, None))
    num = _num_candidates(K, d, -1)
    _, cand = _scan(W, num)
    ks = np.random.default_rng(seed).choice(K, size=min(sample, K), replace=False)
    r_c, t_c, m_c = timed(lambda: [_class_distance(W, int(k), None if cand is None else cand[k]) for k in ks])
    r_f, t_f, m_f = timed(lambda: [_class_distance(W, int(k), None) for k in ks])
    err = max(abs(a.distance - b.distance) for a, b in zip(r_c, r_f, strict=True))
    supp = np.mean([r.support.size for r in r_c])
    print(f"K={K:>6} d={d}: rho_one_vs_rest = {rho:.6f}  time {t_rho:8.2f} s  peak {m_rho:7.1f} MiB")
    print(
        f"    baseline blocked Gram pass: {t_gram:6.2f} s (peak {m_gram:.1f} MiB) -> rho / Gram = {t_rho / t_gram:.1f}x"
    )
    print(
        f"    per class ({len(ks)} sampled, mean support {supp:.0f}, candidates {num}): "
        f"candidates {1e3 * t_c / len(ks):.1f} ms (peak {m_c:.1f} MiB) vs full QP {1e3 * t_f / len(ks):.1f} ms "
        f"(peak {m_f:.1f} MiB) -> speed-up {t_f / t_c:.2f}x, max |diff| {err:.1e}"
    )
    print(
        f"    a dense K x K float64 Gram would hold {K * K * 8 / 2**20:.0f} MiB; W itself {K * d * 8 / 2**20:.0f} MiB"
    )


def bench_code(restarts: int, seed: int) -> None:
    from nclab.ufm.spherical import softmax_code_search

    d, K = 10, 100
    one, t1, _ = timed(lambda: softmax_code_search(d, K, restarts=1, seed=seed))
    best, tb, mb = timed(lambda: softmax_code_search(d, K, restarts=restarts, seed=seed))
    b = softmax_code_bounds(d, K)
    print(
        f"softmax_code (d={d}, K={K}): best of {restarts} restarts rho = {best.value:.5f} in {tb:.1f} s "
        f"(peak {mb:.1f} MiB); one restart rho = {one.value:.5f} in {t1:.1f} s -> {tb / t1:.2f}x for "
        f"{restarts}x the restarts; restart values {np.round(best.values, 5).tolist()}; "
        f"Thm 3.9 [{b.lower:.4f}, {b.upper:.4f}]; max duality gap {best.max_gap:.1e}; "
        f"min angle {best.min_angle_deg:.2f} deg"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--d", type=int, default=512)
    ap.add_argument("--ks", type=int, nargs="+", default=[1000, 10000])
    ap.add_argument("--sample", type=int, default=20)
    ap.add_argument("--code-restarts", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--skip-code", action="store_true")
    args = ap.parse_args()
    for K in args.ks:
        bench_rho(K, args.d, args.sample, args.seed)
    if not args.skip_code:
        bench_code(args.code_restarts, args.seed)


if __name__ == "__main__":
    main()
