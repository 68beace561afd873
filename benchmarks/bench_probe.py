"""The linear probe's L2 path (nclab.transfer) against scikit-learn's LogisticRegression(solver="lbfgs").

    python benchmarks/bench_probe.py --small                  # N=10,000, d=128, K=20, 10 strengths (minutes)
    python benchmarks/bench_probe.py --full [--grid-subset 4]  # the issue's case: 50,000 x 512, K=100, 20 strengths
    python benchmarks/bench_probe.py --one-fit --n 5000 [--reps 4]  # one cold fit, nclab vs sklearn, interleaved
    (any size: --n --d --k --grid --threads --tol --max-iter --device)

Synthetic features: a Gaussian mixture, ``N`` training rows and ``N / 5`` test rows, ``d`` dimensions, ``K``
classes with class means at distance ~ noise (test accuracy well below 1, so the penalty matters). A grid of
``--grid`` strengths ``lam`` in [1e-5, 10] (scikit-learn's ``C = 1 / (lam N)``, same minimiser).

* nclab: :func:`nclab.transfer.logistic_path`, float64, strongest penalty first, warm-started;
* scikit-learn, cold: one ``LogisticRegression`` per strength (how a grid search fits it);
* scikit-learn, warm: ``warm_start=True`` along the same order (its best case);
* scikit-learn, cold, with scipy's BLAS on one thread (``nclab._threads.scipy_blas_threads``): the thread-pool fix
  nclab's path applies (numpy's and scipy's wheels each bundle an OpenBLAS; L-BFGS-B's vector work on scipy's
  pool spins against the loss's products on numpy's), applied to scikit-learn, to show how much of the ratio it is.

Both solvers stop at the same gradient tolerance (``--tol``, on the same mean-scaled objective) and the same
iteration cap. Reported: wall time of each, the ratio, the largest difference of test accuracy over the grid and
the largest relative coefficient difference.

``--grid-subset M`` fits only M evenly spaced strengths of the grid (the first and last included) with all
three solvers, reports the measured times and ratios on that subset, and extrapolates each time to the whole
grid as ``measured x grid / M`` -- printed as an extrapolation, never as a measurement. For the cold fits this
is a stratified estimate of the full sum; nclab's path (and sklearn's warm start) then warm-start across larger
gaps than on the full grid, so their per-strength iterations, hence their extrapolated times, are if anything
overstated.

``--one-fit``: the speed of one solve, no path: a cold fit at ``--lam`` by nclab and by scikit-learn, ``--reps``
times, interleaved (the order rotates each repetition) so both see the same machine load; reports each pair's
ratio and their median.
"""

from __future__ import annotations

import argparse
import contextlib
import time

import numpy as np
import torch

from _native import kernels_line, native_blas
from nclab._threads import blas_threads, scipy_blas_threads, torch_threads
from nclab.transfer import fit_logistic, logistic_path, sklearn_c, top1_accuracy

#: scikit-learn runs: (label, warm_start, scipy's BLAS on one thread)
SKLEARN_VARIANTS = [
    ("sklearn cold", False, False),
    ("sklearn warm_start", True, False),
    ("sklearn cold, 1 pool", False, True),
]


def data(n: int, d: int, k: int, seed: int = 0) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    means = rng.normal(size=(k, d)) * (2.5 / np.sqrt(2 * d))  # mean distance ~2.5 noise sds
    y = rng.integers(0, k, n + n // 5)
    X = means[y] + rng.normal(size=(y.size, d))
    return X[:n], y[:n], X[n:], y[n:]


def main() -> None:
    native_blas()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--small", action="store_true", help="N=10,000, d=128, K=20, grid 10 (minutes on 2 cores)")
    ap.add_argument("--full", action="store_true", help="the issue's case: N=50,000, d=512, K=100, grid 20")
    ap.add_argument("--grid-subset", type=int, default=None, help="time M evenly spaced strengths, extrapolate")
    ap.add_argument("--one-fit", action="store_true", help="one cold fit per solver, interleaved, --reps times")
    ap.add_argument("--lam", type=float, default=1e-3, help="the strength of --one-fit")
    ap.add_argument("--reps", type=int, default=4)
    ap.add_argument("--n", type=int, default=50_000)
    ap.add_argument("--d", type=int, default=512)
    ap.add_argument("--k", type=int, default=100)
    ap.add_argument("--grid", type=int, default=20)
    ap.add_argument("--tol", type=float, default=1e-6)
    ap.add_argument("--max-iter", type=int, default=1000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    print(kernels_line())
    if args.small and args.full:
        ap.error("--small and --full exclude each other")
    if args.small:
        args.n, args.d, args.k, args.grid = 10_000, 128, 20, 10
    if args.full:
        args.n, args.d, args.k, args.grid = 50_000, 512, 100, 20
    from sklearn.linear_model import LogisticRegression

    Xtr, ytr, Xte, yte = data(args.n, args.d, args.k)
    if args.one_fit:
        one_fit(args, Xtr, ytr)
        return
    lams = np.logspace(1, -5, args.grid)  # strongest first: the order both warm starts use
    scale = 1.0
    if args.grid_subset is not None:
        if not 2 <= args.grid_subset <= args.grid:
            ap.error(f"--grid-subset must be in [2, --grid={args.grid}]")
        lams = lams[np.unique(np.round(np.linspace(0, args.grid - 1, args.grid_subset)).astype(int))]
        scale = args.grid / lams.size
    print(f"N={args.n} d={args.d} K={args.k} grid={args.grid} tol={args.tol} threads={args.threads}")
    if scale != 1.0:
        print(f"timing {lams.size} of the {args.grid} strengths: {np.array2string(lams, precision=3)}")
    with torch_threads(args.threads), blas_threads(args.threads):
        t0 = time.perf_counter()
        path = logistic_path(Xtr, ytr, lams, K=args.k, tol=args.tol, max_iter=args.max_iter, device=args.device)
        acc_nc = [top1_accuracy(yte, p.predict(Xte)) for p in path]
        t_nc = time.perf_counter() - t0
        results = {}
        for name, warm, one_pool in SKLEARN_VARIANTS:
            t0 = time.perf_counter()
            clf = LogisticRegression(solver="lbfgs", tol=args.tol, max_iter=args.max_iter, warm_start=warm)
            accs, coefs = [], []
            with scipy_blas_threads(1) if one_pool else contextlib.nullcontext():
                for lam in lams:
                    clf.set_params(C=sklearn_c(lam, args.n))
                    clf.fit(Xtr, ytr)
                    accs.append(clf.score(Xte, yte))
                    coefs.append(clf.coef_.copy())
            results[name] = (time.perf_counter() - t0, accs, coefs)
    iters = sum(p.n_iter for p in path)
    print(f"nclab logistic_path: {t_nc:.2f} s ({iters} L-BFGS iterations over the path)")
    if scale != 1.0:
        others = ", ".join(f"{name} {t * scale:.0f} s" for name, (t, _, _) in results.items())
        grid = f"{args.grid}-value grid (x{scale:.2f}, not measured)"
        print(f"EXTRAPOLATED to the {grid}: nclab {t_nc * scale:.0f} s, {others}")
    for name, (t, accs, coefs) in results.items():
        dacc = max(abs(a - b) for a, b in zip(acc_nc, accs, strict=True))
        dcoef = max(
            float(np.abs(p.coef.cpu().numpy() - c).max() / np.abs(c).max()) for p, c in zip(path, coefs, strict=True)
        )
        print(f"{name:19s}: {t:.2f} s  ratio {t / t_nc:.2f}x  max |d acc| {dacc:.4f}  max rel |d coef| {dcoef:.1e}")
    best = int(np.argmax(acc_nc))
    print(
        f"best test accuracy {acc_nc[best]:.4f} at lam={lams[best]:.3g} "
        f"(sklearn cold: {results['sklearn cold'][1][best]:.4f})"
    )
    if torch.cuda.is_available() and args.device == "cpu":
        print("(CUDA is available: --device cuda runs the nclab path on the GPU)")


def one_fit(args: argparse.Namespace, X: np.ndarray, y: np.ndarray) -> None:
    from sklearn.linear_model import LogisticRegression

    def nclab_fit() -> int:
        return fit_logistic(X, y, args.lam, K=args.k, tol=args.tol, max_iter=args.max_iter).n_iter

    def sklearn_fit() -> int:
        C = sklearn_c(args.lam, X.shape[0])
        clf = LogisticRegression(solver="lbfgs", tol=args.tol, max_iter=args.max_iter, C=C).fit(X, y)
        return int(clf.n_iter_[0])

    fits = {"nclab": nclab_fit, "sklearn": sklearn_fit}
    times: dict[str, list[float]] = {name: [] for name in fits}
    print(f"one cold fit at lam={args.lam:g}: N={X.shape[0]} d={args.d} K={args.k} threads={args.threads}")
    with torch_threads(args.threads), blas_threads(args.threads):
        for r in range(args.reps):
            for name in list(fits)[r % 2 :] + list(fits)[: r % 2]:
                t0 = time.perf_counter()
                iters = fits[name]()
                times[name].append(time.perf_counter() - t0)
                print(f"  rep {r} {name:7s} {times[name][-1]:.2f} s ({iters} iterations)")
    ratios = np.array(times["sklearn"]) / np.array(times["nclab"])
    print(f"sklearn / nclab per pair: {np.round(ratios, 2).tolist()}, median {np.median(ratios):.2f}x")


if __name__ == "__main__":
    main()
