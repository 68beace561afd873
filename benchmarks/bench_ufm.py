"""Time to reach |L - L*| <= 1e-8 on the bias-free UFM [Tirer & Bruna 2022, Thm. 3.1]: the float64 L-BFGS reference
solver vs the papers' GD recipe (lr 0.1, N(0, 1) init), measured in the same run; prints the ratio.

    .venv/bin/python benchmarks/bench_ufm.py            # both configurations
    .venv/bin/python benchmarks/bench_ufm.py --small    # K=10, d=64, n=100 only
    .venv/bin/python benchmarks/bench_ufm.py --large --max-gd-iters 30000   # K=100, d=512, n=20 only
"""

from __future__ import annotations

import argparse
import time

from _native import kernels_line, native_blas
from nclab.ufm import closed_forms, solve

CONFIGS = [
    # (K, d, n, lambda): c = K sqrt(n lambda^2) < 1 in both
    (10, 64, 100, 5e-3),
    (100, 512, 20, 1e-3),
]


def time_to_target(model: str, K: int, d: int, n: int, lam: float, solver: str, max_iters: int) -> tuple[float, float]:
    t0 = time.perf_counter()
    if solver == "gd":
        res = solve(
            model,
            K=K,
            n=n,
            d=d,
            lams=dict(W=lam, H=lam),
            solver="gd",
            iters=max_iters,
            stop_gap=1e-8,
            metrics_every=0,
            log_every=1000,
        )
    else:
        res = solve(model, K=K, n=n, d=d, lams=dict(W=lam, H=lam), solver=solver)
    return time.perf_counter() - t0, abs(res.gap)


def main() -> None:
    native_blas()
    ap = argparse.ArgumentParser()
    ap.add_argument("--small", action="store_true", help="only the K=10 configuration")
    ap.add_argument("--large", action="store_true", help="only the K=100 configuration")
    ap.add_argument("--max-gd-iters", type=int, default=200_000)
    args = ap.parse_args()
    print(kernels_line())
    configs = CONFIGS[:1] if args.small else CONFIGS[1:] if args.large else CONFIGS
    for K, d, n, lam in configs:
        opt = closed_forms.optimum("mse-bias-free", K=K, n=n, d=d, lams=dict(W=lam, H=lam))
        print(f"K={K} d={d} n={n} lambda={lam}: c={opt.threshold:.3f} L*={opt.loss:.12f}")
        t_ref, g_ref = time_to_target("mse-bias-free", K, d, n, lam, "lbfgs", 0)
        t_cp, g_cp = time_to_target("mse-bias-free", K, d, n, lam, "central", 0)
        t_gd, g_gd = time_to_target("mse-bias-free", K, d, n, lam, "gd", args.max_gd_iters)
        reached = "reached" if g_gd <= 1e-8 else f"NOT reached in {args.max_gd_iters} iterations"
        print(f"  L-BFGS reference : {t_ref:8.2f} s  gap {g_ref:.1e}")
        print(f"  central path     : {t_cp:8.2f} s  gap {g_cp:.1e}")
        print(f"  GD recipe        : {t_gd:8.2f} s  gap {g_gd:.1e} ({reached})")
        print(f"  ratio GD / L-BFGS: {t_gd / t_ref:8.1f}x   GD / central: {t_gd / t_cp:8.1f}x")


if __name__ == "__main__":
    main()
