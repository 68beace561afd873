"""Collapse at vocabulary scale: stream token statistics, then one full report over the classes present.

    python benchmarks/bench_vocab.py [--k 50257] [--d 768] [--n 200000] [--threads 2] [--zipf 1.1] [--uniform] [--no-w]
        [--ncc-head] [--profile]

Zipf-distributed tokens (p_k proportional to k^-1.1, as a text's unigram frequencies) over a vocabulary of K classes,
features ``h = mu_y + noise`` with random class centres, a random classifier ``W (K, d)``, ``b (K,)``. Prints the
kernels (threadpoolctl), the load average, the time to stream the statistics (``track="light"``), the time of
``collapse_report(stats, W=W, b=b, classes="present")`` (NC3 and NC4 included) and the process's peak resident
memory (``ru_maxrss``: data generation included), and the report's CPU time (all threads: on a machine others load,
less noisy than the wall time). ``--ncc-head`` replaces the random classifier by the nearest
class-mean head of the classes present (``w_k = mu_k``, ``b_k = -||mu_k||^2 / 2``: every class mean decided right),
the slowest case of NC4, whose classes leave the logit sweep only once they lose. ``--profile`` prints cProfile's top
entries of the report.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import resource
import time
import warnings

import numpy as np
import torch

from _native import kernels_line, native_blas


def _rss_gib() -> float:
    """The process's resident memory now (Linux /proc), GiB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 2**20
    return float("nan")


def main() -> None:
    native_blas()
    ap = argparse.ArgumentParser()
    ap.add_argument("--k", type=int, default=50_257)
    ap.add_argument("--d", type=int, default=768)
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--zipf", type=float, default=1.1, help="Zipf exponent s (1.1: ~21,700 of 50,257 classes seen)")
    ap.add_argument("--uniform", action="store_true", help="labels arange(N) %% K (every class seen), not Zipf")
    ap.add_argument("--no-w", action="store_true", help="report without the classifier (no NC3 / NC4)")
    ap.add_argument("--ncc-head", action="store_true", help="W, b: the nearest-class-mean head (NC4's slowest case)")
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()

    from threadpoolctl import threadpool_limits

    from nclab.metrics import collapse_report
    from nclab.stats import ClassStats

    torch.set_num_threads(args.threads)
    threadpool_limits(args.threads)
    print(kernels_line())
    print(f"threads {args.threads}; load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    K, d, N = args.k, args.d, args.n
    rng = np.random.default_rng(0)
    p = np.arange(1, K + 1) ** -args.zipf  # Zipf's law over the vocabulary: p_k proportional to k^-s
    y = np.arange(N) % K if args.uniform else rng.choice(K, size=N, p=p / p.sum())
    centres = rng.standard_normal((K, d), dtype=np.float32)
    W = rng.standard_normal((K, d))
    b = 0.1 * rng.standard_normal(K)

    t0 = time.perf_counter()
    stats = ClassStats(K, d, track="light")
    for i in range(0, N, 8192):
        yb = y[i : i + 8192]
        hb = centres[yb] + rng.standard_normal((yb.size, d), dtype=np.float32)
        stats.update(hb, yb)
    t_stats = time.perf_counter() - t0
    present = int(np.count_nonzero(stats.counts))
    print(f"K={K} d={d} N={N}: {present} classes present; statistics streamed in {t_stats:.2f} s")
    if args.ncc_head:  # argmax_j (mu_j . mu_k - ||mu_j||^2 / 2) = argmin_j ||mu_k - mu_j||: every class right
        keep = np.flatnonzero(stats.counts)
        sub = stats.select_classes(keep)  # freed below, before the report (its peak stays the report's)
        means = sub.moments().class_means(copy=False)
        W[keep] = means
        b[keep] = -0.5 * np.einsum("kd,kd->k", means, means)
        del sub, means
        print("classifier: the nearest-class-mean head of the classes present (every class mean decided right)")

    before = _rss_gib()
    prof = cProfile.Profile() if args.profile else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the imbalance note of Zipf counts
        t0, c0 = time.perf_counter(), time.process_time()
        if prof is not None:
            prof.enable()
        rep = collapse_report(stats, W=None if args.no_w else W, b=None if args.no_w else b, classes="present")
        if prof is not None:
            prof.disable()
        t_rep, c_rep = time.perf_counter() - t0, time.process_time() - c0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB -> GiB
    print(
        f"collapse_report over K_present={int(rep['K_present'])} ({len(rep)} values"
        f"{'' if args.no_w else ', NC3 and NC4 included'}): {t_rep:.2f} s; peak RSS {peak:.2f} GiB "
        f"(RSS {before:.2f} GiB before the report: data, W and the statistics)"
    )
    # CPU seconds of the process (every thread): less sensitive to other engineers' load than the wall time
    print(f"report CPU time {c_rep:.2f} s (user + system, all threads; wall {t_rep:.2f} s)")
    for key in ("cdnv", "equiangularity", "max_angle", "etf_gram_error", "uniformity_log_energy", "self_duality"):
        if key in rep:
            print(f"  {key} {rep[key]:.6g}")
    if "classifier_accuracy_on_means" in rep:
        print(f"  classifier_accuracy_on_means {rep['classifier_accuracy_on_means']:.6g}")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if prof is not None:
        pstats.Stats(prof).sort_stats("cumulative").print_stats(18)


if __name__ == "__main__":
    main()
