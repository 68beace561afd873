"""ClassStats against a peer collapse library's accumulator and the machine's GEMM, measured in one run.

    python benchmarks/bench_stats.py [--repeats 3] [--threads 1,2] [--quick] [--loop-reference] [--configs 0,1,2]
    python benchmarks/bench_stats.py --float32-target [--breakdown]   # the float32 targets alone, 1 and 2 threads

Runs on the BLAS kernels a user's machine selects: ``OPENBLAS_CORETYPE`` / ``OPENBLAS_L2_SIZE`` are dropped for
this command alone (``_native.native_blas``), and the kernel of each BLAS library is printed (threadpoolctl).
For each thread count (torch and both OpenBLAS pools set alike) and each configuration (N, d, K) =
(100,000, 512, 100), (50,000, 256, 1,000), (50,000, 384, 60), float32 features in batches of 1,000, it times

  * nclab ``ClassStats`` (full track, its defaults: counts, shifts, class sums, per-class sums of squares, unit
    sums and the d x d scatter) with ``compute_dtype="float64"`` (the default) and ``"float32"``, the float32
    one also without unit sums (``unit_sums=False``), and ``track="light"`` (float32 compute),
  * the peer's method (two passes: class means by a one-hot matmul, then per-batch centred outer products
    ``D^T D`` accumulated in the compute dtype) with torch, as the peer library runs it (MKL), in float32, and
    with numpy (OpenBLAS, the faster BLAS on an AMD CPU) in float32 and float64,
  * numpy's float64 and float32 ``X.T @ X`` of the same data (one BLAS ``syrk`` each: the floor; the float64
    copy of the data is made once, outside the timing),

each ending with Sigma_W (d x d) in hand. The methods run interleaved, ``--repeats`` rounds in a rotated order,
each after a pause (``COOLDOWN_S``) so that no method shares the cores with the BLAS threads the previous one left
spinning, and each ratio is the median over rounds of the ratio within a round (both timed under the same load).
Then each method's relative Frobenius error of Sigma_W on two near-collapse cases against a two-pass float64
computation of the centred data: ``1e6 mu + 1e-3 noise`` in float64 (float32 methods round the features as they
read them) and ``1e3 mu + 1e-2 noise`` in float32. Targets: nclab float32 <= 0.5x the peer's float32
(torch) and <= 1.5x float32 ``X.T @ X`` (<= 2.5x at K = 1,000); nclab float64 <= 1.3x float64 ``X.T @ X``; at 1
and at 2 threads.

``--loop-reference`` adds the per-class two-pass loop reference and light vs full at d = 4,096.

``--float32-target`` (alone, ~2 min idle) times only what the float32 targets compare, at (100,000, 512, 100):
nclab float32 (full track, its defaults), the peer's float32 two passes (torch) and numpy's float32 ``X.T @ X``,
``--repeats`` rounds (default 7 here) interleaved as above, at 1 and 2 threads, and prints the two ratios (median
of the within-round ratios, and the ratio of the minima) against their targets: <= 0.45x the peer, <= 1.6x the Gram,
with what makes the figures self-contained: the date, the CPU count, the kernels, the torch and BLAS thread counts,
the load average before, after and per round, and how ClassStats ran (lanes per update). ``--breakdown`` adds one
run of nclab timed inside (block Grams of the calling thread, the rest of the updates, the final flush).
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time

import numpy as np
import torch
from threadpoolctl import threadpool_info, threadpool_limits

from _native import kernels_line, native_blas
from nclab.stats import ClassStats

CONFIGS = [(100_000, 512, 100), (50_000, 256, 1000), (50_000, 384, 60)]
#: Idle time before each timed call. numpy and scipy each bundle an OpenBLAS with its own thread pool, whose threads
#: spin for a while after a call: a method timed right after one that used the other pool shares the cores with
#: those spinning threads (measured at d = 512: ClassStats 0.66-0.87 s right after numpy's X.T @ X, 0.60-0.63 s
#: after a 0.5 s pause; X.T @ X 0.44-0.48 s right after ClassStats, 0.36-0.37 s after the pause).
COOLDOWN_S = 0.5
QUICK = [(20_000, 512, 100), (10_000, 256, 1000), (10_000, 384, 60)]


def peer_sigma_w(X, y, K, batch, dtype):
    """The peer's two-pass accumulator with numpy: class sums by a one-hot matmul, then sum of per-batch
    ``D^T D`` with ``D`` the batch centred by its class means, every product and sum in ``dtype``."""
    N, d = X.shape
    sums = np.zeros((K, d), dtype=dtype)
    counts = np.zeros(K, dtype=dtype)
    eye = np.eye(K, dtype=dtype)
    for s in range(0, N, batch):
        onehot = eye[y[s : s + batch]]
        sums += onehot.T @ X[s : s + batch].astype(dtype, copy=False)
        counts += onehot.sum(axis=0)
    means = sums / counts[:, None]
    S = np.zeros((d, d), dtype=dtype)
    for s in range(0, N, batch):
        D = X[s : s + batch].astype(dtype, copy=False) - means[y[s : s + batch]]
        S += D.T @ D
    return S / dtype(N)


def peer_sigma_w_torch(X, y, K, batch):
    """The same two passes as the peer library runs them: torch float32 (its CPU matmuls are MKL's)."""
    N, d = X.shape
    sums = torch.zeros(K, d)
    counts = torch.zeros(K)
    for s in range(0, N, batch):
        onehot = torch.nn.functional.one_hot(y[s : s + batch], K).float()
        sums += onehot.T @ X[s : s + batch]
        counts += onehot.sum(0)
    means = sums / counts[:, None]
    S = torch.zeros(d, d)
    for s in range(0, N, batch):
        D = X[s : s + batch] - means[y[s : s + batch]]
        S += D.T @ D
    return (S / N).numpy()


def nclab_sigma_w(X, y, K, batch, compute_dtype, **kwargs):
    stats = ClassStats(K, X.shape[1], compute_dtype=compute_dtype, **kwargs)
    for s in range(0, X.shape[0], batch):
        stats.update(X[s : s + batch], y[s : s + batch])
    view = stats.moments()
    return view.sigma_w(copy=False) if stats.track == "full" else view.class_ss


def gram_sigma_w(X, y, K, dtype):
    """Raw second moment: ``(X^T X - sum_k n_k mu_k mu_k^T) / N`` (means in float64): the cancellation case."""
    Xc = X.astype(dtype, copy=False)
    G = (Xc.T @ Xc).astype(np.float64)
    counts = np.bincount(y, minlength=K).astype(np.float64)
    mu = np.zeros((K, X.shape[1]))
    np.add.at(mu, y, X.astype(np.float64))
    mu /= counts[:, None]
    return (G - (mu * counts[:, None]).T @ mu) / X.shape[0]


def methods(X, X64, y, K, batch):
    Xt, yt = torch.from_numpy(X), torch.from_numpy(y)
    return {
        "nclab float64": lambda: nclab_sigma_w(Xt, yt, K, batch, "float64"),
        "nclab float32": lambda: nclab_sigma_w(Xt, yt, K, batch, "float32"),
        "nclab f32 no units": lambda: nclab_sigma_w(Xt, yt, K, batch, "float32", unit_sums=False),
        "nclab light": lambda: nclab_sigma_w(Xt, yt, K, batch, "float32", track="light"),
        "peer float32": lambda: peer_sigma_w_torch(Xt, yt, K, batch),
        "peer f32 numpy": lambda: peer_sigma_w(X, y, K, batch, np.float32),
        "peer f64 numpy": lambda: peer_sigma_w(X, y, K, batch, np.float64),
        "float64 X.T @ X": lambda: X64.T @ X64,
        "float32 X.T @ X": lambda: X.T @ X,
    }


def time_config(N, d, K, batch, repeats, rng):
    y = rng.integers(0, K, N)
    X = (rng.normal(size=(K, d))[y] + rng.normal(size=(N, d))).astype(np.float32)
    X64 = X.astype(np.float64)
    fns = methods(X, X64, y, K, batch)
    names = list(fns)
    times = {n: [] for n in names}
    for r in range(repeats):
        for n in names[r % len(names) :] + names[: r % len(names)]:  # rotated: no method always runs first
            time.sleep(COOLDOWN_S)
            t0 = time.perf_counter()
            fns[n]()
            times[n].append(time.perf_counter() - t0)
    return times


def ratio(times, a, b):
    return statistics.median(x / y for x, y in zip(times[a], times[b], strict=True))


def near_collapse_errors(rng, batch, scale=1e6, noise=1e-3, dtype=np.float64):
    K, d, N = 10, 64, 20_000
    mu = rng.normal(size=(K, d))
    y = rng.integers(0, K, N)
    H = (scale * mu[y] + noise * rng.normal(size=(N, d))).astype(dtype)
    H64 = H.astype(np.float64)  # the exact statistics of the numbers as given
    means = np.stack([H64[y == k].mean(axis=0) for k in range(K)])
    D = H64 - means[y]
    ref = D.T @ D / N
    got = {
        "nclab float64": nclab_sigma_w(H, y, K, batch, "float64"),
        "nclab float32": nclab_sigma_w(H, y, K, batch, "float32"),
        "peer float32": peer_sigma_w_torch(torch.from_numpy(H.astype(np.float32)), torch.from_numpy(y), K, batch),
        "peer f32 numpy": peer_sigma_w(H, y, K, batch, np.float32),
        "peer float64": peer_sigma_w(H, y, K, batch, np.float64),
        "float64 X.T @ X": gram_sigma_w(H, y, K, np.float64),
        "float32 X.T @ X": gram_sigma_w(H, y, K, np.float32),
    }
    return {n: float(np.linalg.norm(g - ref) / np.linalg.norm(ref)) for n, g in got.items()}


def check_agreement(rng, batch):
    """The timed functions compute the real thing: every method agrees on ordinary data."""
    N, d, K = 5000, 32, 7
    y = rng.integers(0, K, N)
    X = (rng.normal(size=(K, d))[y] + rng.normal(size=(N, d))).astype(np.float32)
    ref = peer_sigma_w(X, y, K, batch, np.float64)
    for name, fn in methods(X, X.astype(np.float64), y, K, batch).items():
        if "X.T @ X" in name or "light" in name:
            continue
        got = fn()
        assert np.linalg.norm(got - ref) <= 1e-5 * np.linalg.norm(ref), name


def loop_reference(args, rng):
    """The loop-reference rows: speed-up over a per-class two-pass loop, light vs full at d = 4,096."""

    def loop_reference(X, y, K, batch):
        N, d = X.shape
        sums, counts = np.zeros((K, d)), np.zeros(K)
        for s in range(0, N, batch):
            xb, yb = X[s : s + batch].astype(np.float64), y[s : s + batch]
            for k in np.unique(yb):
                sums[k] += xb[yb == k].sum(axis=0)
                counts[k] += (yb == k).sum()
        means = sums / counts[:, None]
        S = np.zeros((d, d))
        for s in range(0, N, batch):
            xb, yb = X[s : s + batch].astype(np.float64), y[s : s + batch]
            for k in np.unique(yb):
                D = xb[yb == k] - means[k]
                S += D.T @ D
        return S / N

    def run(X, y, K, track):
        s = ClassStats(K, X.shape[1], track=track)
        for i in range(0, X.shape[0], args.batch):
            s.update(X[i : i + args.batch], y[i : i + args.batch])

    def best(fn, repeats):
        out = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t0)
        return min(out)

    N, d, K = CONFIGS[0]
    y = rng.integers(0, K, N)
    X = (rng.normal(size=(K, d))[y] + rng.normal(size=(N, d))).astype(np.float32)
    t_stats = best(lambda: run(X, y, K, "full"), args.repeats)
    t_ref = best(lambda: loop_reference(X, y, K, args.batch), max(1, args.repeats - 1))
    print(f"\nspeed-up vs per-class two-pass loop {t_ref / t_stats:.2f}   (target >= 5)")
    yw = rng.integers(0, K, 20_000)
    Xw = rng.normal(size=(20_000, 4096)).astype(np.float32)
    t_full = best(lambda: run(Xw, yw, K, "full"), max(1, args.repeats - 1))
    t_light = best(lambda: run(Xw, yw, K, "light"), args.repeats)
    print(f"d=4096 N=20000 full {t_full:.3f} s, light {t_light:.3f} s: {t_full / t_light:.2f}x (target >= 10)")


TARGETS = [  # (numerator, denominator, target, configurations it applies to; None: all)
    ("nclab float32", "peer float32", 0.5, None),
    ("nclab float32", "float32 X.T @ X", 1.5, {512, 384}),
    ("nclab float32", "float32 X.T @ X", 2.5, {256}),
    ("nclab float64", "float64 X.T @ X", 1.3, None),
]
EXTRA_RATIOS = [
    ("nclab f32 no units", "float32 X.T @ X"),
    ("nclab light", "float32 X.T @ X"),
    ("nclab float32", "peer f32 numpy"),
    ("nclab float64", "peer f64 numpy"),
    ("peer float32", "float32 X.T @ X"),
]


def report(N, d, K, threads, times):
    print(f"\nN={N} d={d} K={K}, {threads} thread(s), load {os.getloadavg()[0]:.2f}: median s (min s) per method")
    for n, ts in times.items():
        print(f"  {n:18s} {statistics.median(ts):8.3f}  ({min(ts):.3f})")
    for a, b, target, where in TARGETS:
        if where is None or d in where:
            r = ratio(times, a, b)
            print(f"  {a} / {b}: {r:6.2f}  (target <= {target}: {'met' if r <= target else 'NOT met'})")
    for a, b in EXTRA_RATIOS:
        print(f"  {a} / {b}: {ratio(times, a, b):6.2f}")


FLOAT32_TARGETS = [("peer float32", 0.45), ("float32 X.T @ X", 1.6)]  # nclab float32 / each, at (100k, 512, 100)


def float32_layout(X, y, K, batch):
    """How ClassStats' float32 path ran at the current thread budget: the lanes (threads) an update split its rows
    between and the worker threads that formed lane 0's block Grams (``ClassStats._lanes``, ``Lane.pipe``;
    private, read here to make the output self-contained)."""
    stats = ClassStats(K, X.shape[1], compute_dtype="float32")
    for s in range(0, min(X.shape[0], 5 * batch), batch):
        stats.update(X[s : s + batch], y[s : s + batch])
    pipe = stats._lanes[0].pipe
    stats.raw("scatter_dev")  # nothing left in flight
    return f"{len(stats._lanes)} lane(s) per update of {batch} rows, {pipe.workers if pipe else 0} Gram worker(s)"


def float32_breakdown(X, y, K, batch):
    """One extra nclab float32 run, timed inside: wall time of the block Grams in the calling thread
    (``Lane.flush_gram`` of lane 0: with Gram workers, queuing a block and the Grams the calling thread forms
    itself when the workers fall behind; the other lanes form theirs at the same time), of the final flush and
    Sigma_W, and the rest (screen, O(B d) passes, waiting for the other lanes), in ms."""
    from nclab.stats import _lanes

    spent = {"gram": 0.0}
    real = _lanes.Lane.flush_gram
    main = threading.get_ident()

    def timed(self, target):
        t0 = time.perf_counter()
        real(self, target)
        if threading.get_ident() == main:
            spent["gram"] += time.perf_counter() - t0

    _lanes.Lane.flush_gram = timed
    try:
        time.sleep(COOLDOWN_S)
        stats = ClassStats(K, X.shape[1], compute_dtype="float32")
        t0 = time.perf_counter()
        for s in range(0, X.shape[0], batch):
            stats.update(X[s : s + batch], y[s : s + batch])
        t1 = time.perf_counter()
        gram_in_updates = spent["gram"]
        stats.moments().sigma_w(copy=False)
        t2 = time.perf_counter()
    finally:
        _lanes.Lane.flush_gram = real
    rest = (t1 - t0) - gram_in_updates
    return (
        f"updates {1e3 * (t1 - t0):.1f} ms (block Grams in the calling thread {1e3 * gram_in_updates:.1f}, "
        f"the rest {1e3 * rest:.1f}), final flush + Sigma_W {1e3 * (t2 - t1):.1f} ms"
    )


def float32_target(args, rng):
    """The float32 targets alone: nclab float32 against the peer's float32 and the float32 Gram, 1 and 2 threads."""
    N, d, K = CONFIGS[0]
    y = rng.integers(0, K, N)
    X = (rng.normal(size=(K, d))[y] + rng.normal(size=(N, d))).astype(np.float32)
    Xt, yt = torch.from_numpy(X), torch.from_numpy(y)
    fns = {
        "nclab float32": lambda: nclab_sigma_w(Xt, yt, K, args.batch, "float32"),
        "peer float32": lambda: peer_sigma_w_torch(Xt, yt, K, args.batch),
        "float32 X.T @ X": lambda: X.T @ X,
    }
    names = list(fns)
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} CPUs")
    for threads in (int(t) for t in args.threads.split(",")):
        torch.set_num_threads(threads)
        with threadpool_limits(threads, user_api="blas"):
            times = {n: [] for n in names}
            loads = [os.getloadavg()[0]]
            for r in range(args.repeats):
                for n in names[r % len(names) :] + names[: r % len(names)]:
                    time.sleep(COOLDOWN_S)
                    t0 = time.perf_counter()
                    fns[n]()
                    times[n].append(time.perf_counter() - t0)
                loads.append(os.getloadavg()[0])
            layout = float32_layout(Xt, yt, K, args.batch)
            breakdown = float32_breakdown(Xt, yt, K, args.batch) if args.breakdown else None
            blas = sorted({i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"})
            torch_n = torch.get_num_threads()
        print(
            f"\nN={N} d={d} K={K}, {threads} thread(s) (torch {torch_n}, BLAS {blas}), load {loads[0]:.2f} -> "
            f"{loads[-1]:.2f} (per round {min(loads[1:]):.2f}-{max(loads[1:]):.2f}): median s (min s)"
        )
        print(f"  nclab float32 ran: {layout}")
        if breakdown:
            print(f"  nclab float32, one timed run: {breakdown}")
        for n, ts in times.items():
            print(f"  {n:16s} {statistics.median(ts):7.3f}  ({min(ts):.3f})")
        for other, target in FLOAT32_TARGETS:
            r, rmin = ratio(times, "nclab float32", other), min(times["nclab float32"]) / min(times[other])
            verdict = "met" if r <= target else "NOT met"
            print(f"  nclab float32 / {other}: {r:5.2f} (ratio of minima {rmin:5.2f}; target <= {target}: {verdict})")


def main():
    native_blas()
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=None, help="rounds (default 3; 7 with --float32-target)")
    ap.add_argument("--threads", default="1,2", help="thread counts (torch and BLAS), comma-separated")
    ap.add_argument("--configs", default=None, help="indices into CONFIGS, comma-separated (default: all)")
    ap.add_argument("--quick", action="store_true", help="N / 5 (a smoke run; the targets are stated at full N)")
    ap.add_argument("--loop-reference", action="store_true")
    ap.add_argument("--float32-target", action="store_true", help="only the float32 targets at (100k, 512, 100)")
    ap.add_argument("--breakdown", action="store_true", help="with --float32-target: one run of nclab timed inside")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    args.repeats = args.repeats or (7 if args.float32_target else 3)
    print(f"torch {torch.__version__}, numpy {np.__version__}, batch {args.batch}, {args.repeats} interleaved rounds")
    print(kernels_line())
    if args.float32_target:
        float32_target(args, rng)
        return
    check_agreement(rng, args.batch)
    configs = QUICK if args.quick else CONFIGS
    if args.configs:
        configs = [configs[int(i)] for i in args.configs.split(",")]
    for threads in (int(t) for t in args.threads.split(",")):
        torch.set_num_threads(threads)
        with threadpool_limits(threads, user_api="blas"):
            for N, d, K in configs:
                report(N, d, K, threads, time_config(N, d, K, args.batch, args.repeats, rng))
    print("\nnear collapse, N=20000 d=64 K=10: relative Frobenius error of Sigma_W")
    cases = {"1e6 mu + 1e-3 noise, float64": {}, "1e3 mu + 1e-2 noise, float32": {"scale": 1e3, "noise": 1e-2}}
    for label, kw in cases.items():
        errs = near_collapse_errors(rng, args.batch, dtype=np.float32 if "float32" in label else np.float64, **kw)
        print(f"  {label}: " + ", ".join(f"{n} {e:.1e}" for n, e in errs.items()))
    if args.loop_reference:
        loop_reference(args, rng)


if __name__ == "__main__":
    main()
