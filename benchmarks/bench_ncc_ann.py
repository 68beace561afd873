"""NCC pass with the exact search vs the approximate HNSW index (``index="hnsw"``, extra ``nclab[ann]``).

    python benchmarks/bench_ncc_ann.py [--K 20000] [--d 128] [--N 50000] [--noise 0.35] [--batch 8192]

Synthetic data: K class means drawn i.i.d. N(0, I_d) (near-equidistant in high d, as at collapse), N samples with
balanced labels, each its class mean plus ``noise * N(0, I_d)``; float32 features, no classifier (the classifier
part is exact either way). Reports, for both passes, the construction time (the HNSW graph is built there) and
the time of the pass over all batches, the NCC accuracy, and the fraction of samples with the same prediction.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from _native import kernels_line, native_blas
from nclab.stats import NCCAccumulator


def main() -> None:
    native_blas()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--K", type=int, default=20_000)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--N", type=int, default=50_000)
    ap.add_argument("--noise", type=float, default=0.35)
    ap.add_argument("--batch", type=int, default=8192)
    args = ap.parse_args()
    print(kernels_line())
    rng = np.random.default_rng(0)
    means = rng.normal(size=(args.K, args.d))
    y = np.arange(args.N) % args.K
    H = (means[y] + args.noise * rng.normal(size=(args.N, args.d))).astype(np.float32)
    print(f"K = {args.K}, d = {args.d}, N = {args.N}, noise = {args.noise}")
    preds = {}
    for index in ("exact", "hnsw"):
        t0 = time.perf_counter()
        acc = NCCAccumulator.from_means(means, index=index)
        t1 = time.perf_counter()
        for s in range(0, args.N, args.batch):
            acc.update(H[s : s + args.batch], y[s : s + args.batch])
        t2 = time.perf_counter()
        preds[index] = np.concatenate(
            [acc.ncc_predict(H[s : s + args.batch]).numpy() for s in range(0, args.N, args.batch)]
        )
        out = acc.compute()
        print(
            f"{index:>5}: construction {t1 - t0:6.2f} s, pass {t2 - t1:6.2f} s, "
            f"ncc_accuracy {out['ncc_accuracy']:.6f} (ncc_index={out['ncc_index']!r})"
        )
    agree = float(np.mean(preds["exact"] == preds["hnsw"]))
    print(f"same prediction on {agree:.6f} of samples ({int(np.sum(preds['exact'] != preds['hnsw']))} differ)")


if __name__ == "__main__":
    main()
