"""ClassStats on whatever CUDA GPU is present, against the peer baseline and the GPU's own matmul.

    python benchmarks/bench_gpu.py [--n 1000000] [--d 2048] [--k 1000] [--batch 10000] [--repeats 3]
        [--report-only] [--no-train] [--smoke]

At N = 10^6, d = 2,048, K = 1,000 (features generated on the device, chunk by chunk from per-chunk seeds, so
the N x d matrix is never held), it times, each ending with Sigma_W in hand and synchronised:

  * nclab ``ClassStats`` with ``compute_dtype="float64"`` and ``"float32"`` (float32 O(B d) passes and Gram
    blocks, TF32 off), the latter also with ``unit_sums=False``,
  * the peer's two-pass method (one-hot matmul class means, then per-batch ``D^T D``) in float32 and float64,
  * the plain Gram ``sum X_b^T X_b`` of the same chunks in float32 with TF32 off and with TF32 on (the floor),

then ``collapse_report`` of the float64 statistics with its linear algebra on the device (``ClassMoments(stats,
linalg="torch")``, what ``"auto"`` runs on CUDA; target at d = 2,048, K = 1,000: <= 0.5 s) and on the host
(``linalg="numpy"``: the d x d matrices copied off the GPU, the path before the device backend), the largest
relative difference of their values, and the device linear algebra part by part (the K x d SVD with each cuSOLVER
driver and through a QR first, the d x d eigenvalues, the Cholesky factor); then the demo training run
(``nclab demo`` CE config) on ``train.device: cuda`` with its measurement overhead (measurement time / training
time, from the run's timers).
``--report-only`` skips the ClassStats timings. Without CUDA it says so and exits 0; ``--smoke`` runs everything
at a tiny size on the CPU instead (N = 4,000, d = 64, K = 10, one round, no training): a check that the script
runs, not a measurement.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time

import torch

from _native import kernels_line, native_blas


def chunks(n, d, k, batch, device):
    """``(features (B, d) float32, labels (B,))`` chunks, the same on every call (per-chunk seeds)."""
    g = torch.Generator(device=device)
    gm = torch.Generator(device=device).manual_seed(12345)
    means = 3.0 * torch.randn(k, d, generator=gm, device=device)
    for i, start in enumerate(range(0, n, batch)):
        g.manual_seed(i)
        b = min(batch, n - start)
        y = torch.randint(0, k, (b,), generator=g, device=device)
        yield means[y] + torch.randn(b, d, generator=g, device=device), y


def nclab(args, device, compute_dtype, **kwargs):
    from nclab.stats import ClassStats

    s = ClassStats(args.k, args.d, compute_dtype=compute_dtype, device=device, **kwargs)
    for x, y in chunks(args.n, args.d, args.k, args.batch, device):
        s.update(x, y)
    s.sigma_w(copy=False)
    return s


def peer(args, device, dtype):
    sums = torch.zeros(args.k, args.d, dtype=dtype, device=device)
    counts = torch.zeros(args.k, dtype=dtype, device=device)
    for x, y in chunks(args.n, args.d, args.k, args.batch, device):
        onehot = torch.nn.functional.one_hot(y, args.k).to(dtype)
        sums += onehot.T @ x.to(dtype)
        counts += onehot.sum(0)
    means = sums / counts[:, None]
    S = torch.zeros(args.d, args.d, dtype=dtype, device=device)
    for x, y in chunks(args.n, args.d, args.k, args.batch, device):
        D = x.to(dtype) - means[y]
        S += D.T @ D
    return (S / args.n).cpu()


def gram(args, device, tf32):
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    try:
        G = torch.zeros(args.d, args.d, device=device)
        for x, _ in chunks(args.n, args.d, args.k, args.batch, device):
            G.addmm_(x.T, x)
        return G.cpu()
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev


def generate_only(args, device):
    for x, _ in chunks(args.n, args.d, args.k, args.batch, device):
        x.sum()


def sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def timed(fn):
    sync()
    t0 = time.perf_counter()
    fn()
    sync()
    return time.perf_counter() - t0


def report_timings(stats, args):
    """``collapse_report`` with the linear algebra on the statistics' device and on the host, and its parts."""
    import math
    import warnings

    from nclab.metrics import collapse_report
    from nclab.metrics._linalg import stats_between_eig, stats_eigvals
    from nclab.metrics.common import whitened_between
    from nclab.stats import ClassMoments

    warnings.simplefilter("ignore")  # the report's expected warnings (unattainable targets at K > d + 1)
    runs = {linalg: lambda linalg=linalg: collapse_report(ClassMoments(stats, linalg=linalg)) for linalg in LINALG}
    values = {linalg: run() for linalg, run in runs.items()}  # also the warm-up: kernels, cuSOLVER handles
    times = {linalg: [] for linalg in runs}
    for r in range(args.repeats):
        for linalg in LINALG if r % 2 == 0 else LINALG[::-1]:
            times[linalg].append(timed(runs[linalg]))
    a, b = values["torch"], values["numpy"]
    diff = max(abs(a[k] - b[k]) / max(abs(b[k]), 1e-300) for k in b if math.isfinite(b[k]))
    dev = stats.device
    print(
        f"  collapse_report (d={args.d}, K={args.k}), linear algebra on {dev} (linalg='torch'): "
        f"{statistics.median(times['torch']):.3f} s (target <= 0.5 s at d = 2,048 on the GPU); on the host "
        f"(linalg='numpy'): {statistics.median(times['numpy']):.3f} s; largest relative difference {diff:.1e}"
    )
    view = ClassMoments(stats, linalg="torch")  # its parts, in the order a report computes them, each cached
    parts = {
        "Sigma_W (d x d, from the Gram)": lambda: view.matrix("within"),
        "Sigma_B eigenpairs (K x d SVD)": lambda: stats_between_eig(view),
        "Sigma_T (d x d)": lambda: view.matrix("total"),
        "whitened between factor (Cholesky, estimate, solve, SVD)": lambda: whitened_between(view, 1e-12),
        "Sigma_T eigenvalues (d x d)": lambda: stats_eigvals(view, "total"),
    }
    for name, fn in parts.items():
        print(f"    {name:58s} {timed(fn):8.3f} s")
    A = view.backend.asarray(view.between_factor())
    ST, SW = view.matrix("total"), view.matrix("within")

    def qr_svd():  # the thin SVD through a QR first: the SVD of the min(K, d)-square triangular factor
        if A.shape[0] <= A.shape[1]:
            Q, R = torch.linalg.qr(A.mT)  # A = R^T Q^T
            U, s, Wt = torch.linalg.svd(R.mT)
            return U, s, Wt @ Q.mT
        Q, R = torch.linalg.qr(A)
        U, s, Vt = torch.linalg.svd(R)
        return Q @ U, s, Vt

    raw = {
        "torch.linalg.svd(K x d), default driver": lambda: torch.linalg.svd(A, full_matrices=False),
        "QR, then svd of the triangular factor (K x d)": qr_svd,
        "torch.linalg.eigvalsh(d x d)": lambda: torch.linalg.eigvalsh(ST),
        "torch.linalg.eigh(d x d)": lambda: torch.linalg.eigh(ST),
        "torch.linalg.cholesky_ex(d x d)": lambda: torch.linalg.cholesky_ex(SW),
    }
    if dev.type == "cuda":
        for driver in ("gesvd", "gesvdj", "gesvda"):
            raw[f"torch.linalg.svd(K x d), driver={driver}"] = lambda driver=driver: torch.linalg.svd(
                A, full_matrices=False, driver=driver
            )
    for name, fn in raw.items():
        try:
            fn()  # warm-up
            print(f"    {name:58s} {timed(fn):8.3f} s")
        except RuntimeError as err:  # a driver that rejects this shape
            print(f"    {name:58s} failed: {str(err).splitlines()[0]}")


LINALG = ("torch", "numpy")


def main():
    native_blas()
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--d", type=int, default=2048)
    ap.add_argument("--k", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-train", action="store_true", help="skip the demo training run")
    ap.add_argument("--report-only", action="store_true", help="time collapse_report only (no ClassStats timings)")
    ap.add_argument("--smoke", action="store_true", help="a tiny run on the CPU: checks that the script runs")
    args = ap.parse_args()
    print(kernels_line())
    if args.smoke:
        args.n, args.d, args.k, args.batch, args.repeats, args.no_train = 4000, 64, 10, 1000, 1, True
        device = torch.device("cpu")
        print(
            f"bench_gpu --smoke: N={args.n} d={args.d} K={args.k} on the CPU (a check that it runs, not a measurement)"
        )
    elif not torch.cuda.is_available():
        print("bench_gpu: no CUDA device (torch.cuda.is_available() is False); nothing to measure")
        return 0
    else:
        device = torch.device("cuda")
        print(f"{torch.cuda.get_device_name(device)}, torch {torch.__version__}, CUDA {torch.version.cuda}")
    print(f"N={args.n} d={args.d} K={args.k} batch={args.batch}, {args.repeats} interleaved rounds (median s)")
    if args.report_only:
        report_timings(nclab(args, device, "float64"), args)
        return 0
    fns = {
        "generate chunks only": lambda a: generate_only(a, device),
        "nclab float64": lambda a: nclab(a, device, "float64"),
        "nclab float32": lambda a: nclab(a, device, "float32"),
        "nclab f32 no unit sums": lambda a: nclab(a, device, "float32", unit_sums=False),
        "peer float32": lambda a: peer(a, device, torch.float32),
        "peer float64": lambda a: peer(a, device, torch.float64),
        "float32 Gram (TF32 off)": lambda a: gram(a, device, False),
        "TF32 Gram": lambda a: gram(a, device, True),
    }
    warm = argparse.Namespace(**{**vars(args), "n": 2 * args.batch})
    for fn in fns.values():  # kernels, the caching allocator, cuBLAS handles
        fn(warm)
    times = {name: [] for name in fns}
    names = list(fns)
    for r in range(args.repeats):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            times[name].append(timed(lambda name=name: fns[name](args)))
    for name, ts in times.items():
        print(f"  {name:26s} {statistics.median(ts):8.3f}")
    med = {n: statistics.median(ts) for n, ts in times.items()}
    gen = med["generate chunks only"]
    print(f"  ratios after subtracting generation ({gen:.3f} s):")
    for a, b in [
        ("nclab float32", "peer float32"),
        ("nclab float32", "float32 Gram (TF32 off)"),
        ("nclab float32", "TF32 Gram"),
        ("nclab float64", "peer float64"),
        ("nclab float64", "nclab float32"),
    ]:
        print(f"    {a} / {b}: {(med[a] - gen) / max(med[b] - gen, 1e-9):.2f}")

    report_timings(nclab(args, device, "float64"), args)

    if not args.no_train:
        from nclab.experiments.demo import demo_config
        from nclab.train import resolve_config, train

        cfg = resolve_config({**demo_config("ce"), "report": False}, ["train.device=cuda"])
        with tempfile.TemporaryDirectory() as tmp:
            r = train(cfg, tmp, progress=False)
        t = r.timings
        print(
            f"  demo CE run on cuda: train {t['train_s']:.2f} s, measure {t['measure_s']:.2f} s, "
            f"measure/train {t['measure_s'] / t['train_s']:.2%}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
