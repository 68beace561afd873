"""The linear probe's L2 path (nclab.transfer) against scikit-learn's LogisticRegression(solver="lbfgs").

    python benchmarks/bench_probe.py [--small] [--n 50000] [--d 512] [--k 100] [--grid 20] [--threads 2]

Synthetic features: a Gaussian mixture, ``N`` training rows and ``N / 5`` test rows, ``d`` dimensions, ``K``
classes with class means at distance ~ noise (test accuracy well below 1, so the penalty matters). A grid of
``--grid`` strengths ``lam`` in [1e-5, 10] (scikit-learn's ``C = 1 / (lam N)``, same minimiser).

* nclab: :func:`nclab.transfer.logistic_path`, float64, strongest penalty first, warm-started;
* scikit-learn, cold: one ``LogisticRegression`` per strength (how a grid search fits it);
* scikit-learn, warm: ``warm_start=True`` along the same order (its best case).

Both solvers stop at the same gradient tolerance (``--tol``, on the same mean-scaled objective) and the same
iteration cap. Reported: wall time of each, the ratio, the largest difference of test accuracy over the grid and
the largest relative coefficient difference.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from nclab._threads import blas_threads, torch_threads
from nclab.transfer import logistic_path, sklearn_c, top1_accuracy


def data(n: int, d: int, k: int, seed: int = 0) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    means = rng.normal(size=(k, d)) * (2.5 / np.sqrt(2 * d))  # mean distance ~2.5 noise sds
    y = rng.integers(0, k, n + n // 5)
    X = means[y] + rng.normal(size=(y.size, d))
    return X[:n], y[:n], X[n:], y[n:]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--small", action="store_true", help="N=10,000, d=128, K=20, grid 10 (minutes on 2 cores)")
    ap.add_argument("--n", type=int, default=50_000)
    ap.add_argument("--d", type=int, default=512)
    ap.add_argument("--k", type=int, default=100)
    ap.add_argument("--grid", type=int, default=20)
    ap.add_argument("--tol", type=float, default=1e-6)
    ap.add_argument("--max-iter", type=int, default=1000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    if args.small:
        args.n, args.d, args.k, args.grid = 10_000, 128, 20, 10
    from sklearn.linear_model import LogisticRegression

    Xtr, ytr, Xte, yte = data(args.n, args.d, args.k)
    lams = np.logspace(1, -5, args.grid)  # strongest first: the order both warm starts use
    print(f"N={args.n} d={args.d} K={args.k} grid={args.grid} tol={args.tol} threads={args.threads}")
    with torch_threads(args.threads), blas_threads(args.threads):
        t0 = time.perf_counter()
        path = logistic_path(
            Xtr, ytr, lams, num_classes=args.k, tol=args.tol, max_iter=args.max_iter, device=args.device
        )
        acc_nc = [top1_accuracy(yte, p.predict(Xte)) for p in path]
        t_nc = time.perf_counter() - t0
        results = {}
        for warm in (False, True):
            t0 = time.perf_counter()
            clf = LogisticRegression(solver="lbfgs", tol=args.tol, max_iter=args.max_iter, warm_start=warm)
            accs, coefs = [], []
            for lam in lams:
                clf.set_params(C=sklearn_c(lam, args.n))
                clf.fit(Xtr, ytr)
                accs.append(clf.score(Xte, yte))
                coefs.append(clf.coef_.copy())
            results[warm] = (time.perf_counter() - t0, accs, coefs)
    iters = sum(p.n_iter for p in path)
    print(f"nclab logistic_path: {t_nc:.2f} s ({iters} L-BFGS iterations over the path)")
    for warm, (t, accs, coefs) in results.items():
        dacc = max(abs(a - b) for a, b in zip(acc_nc, accs, strict=True))
        dcoef = max(
            float(np.abs(p.coef.cpu().numpy() - c).max() / np.abs(c).max()) for p, c in zip(path, coefs, strict=True)
        )
        name = "sklearn warm_start" if warm else "sklearn cold"
        print(f"{name:19s}: {t:.2f} s  ratio {t / t_nc:.2f}x  max |d acc| {dacc:.4f}  max rel |d coef| {dcoef:.1e}")
    best = int(np.argmax(acc_nc))
    print(
        f"best test accuracy {acc_nc[best]:.4f} at lam={lams[best]:.3g} (sklearn cold: {results[False][1][best]:.4f})"
    )
    if torch.cuda.is_available() and args.device == "cpu":
        print("(CUDA is available: --device cuda runs the nclab path on the GPU)")


if __name__ == "__main__":
    main()
