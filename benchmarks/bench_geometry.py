"""Margins of many classes and the Softmax Code solver [Jiang et al. 2024], with baselines measured in the same run.

    python benchmarks/bench_geometry.py [--d 512] [--ks 1000 10000] [--sample 20] [--code-restarts 4]

For each K (random unit rows, d = 512):
  * ``rho_one_vs_rest(W)``: wall time and peak traced memory (numpy allocations, tracemalloc);
  * baseline: the blocked Gram pass ``W W^T`` it cannot avoid (nearest neighbours and lower bounds), time;
  * per-class cost: the candidate + violator solver vs the full QP over all K-1 other classes, on ``--sample``
    classes (same answers, checked), and the peak memory of both;
  * the dense ``K x K`` Gram matrix a naive implementation would hold, for scale.
Softmax Code (d=10, K=100): best-of-``--code-restarts`` wall time and value, against one restart (baseline) and
the Thm 3.9 bounds.

Code searches, new vs old (``--codes-only`` runs just this part): ``nclab.geometry.codes`` (multi-start at a fixed
temperature, SQP polish, Newton on the KKT equations) against the previous search, re-implemented below as the
baseline (torch Adam on the smoothed objective with the temperature continuation 0.2 -> 1e-4, 1500 + 5K
steps, 8 restarts), on Tammes (3, 13), (3, 14), (3, 24) and Softmax Codes (3, 9), (4, 10), (3, 13): wall time,
value, and the KKT residual of the new code.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_geometry.py --codes-only

Softmax Code pieces, dense vs generic (``--pieces``): one value + gradient evaluation of the ``K (K - 1)`` pieces
``<w_k, h_k> - <w_j, h_k>`` at ``K = 1000``, ``d = 8`` (a step of ``gnc-bounds-vs-d``'s search), by the dense
``(K, K)`` products :func:`~nclab.geometry.codes.softmax_code_search` uses against the generic gather / bincount
path of the base class (the baseline, same numbers), at 1 and 2 BLAS threads.

    python benchmarks/bench_geometry.py --pieces
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

import numpy as np

from _native import kernels_line, native_blas
from nclab.geometry import (
    one_vs_one,
    one_vs_rest,
    random_oblique,
    rho_one_vs_rest,
    softmax_code_bounds,
    softmax_code_search,
    tammes_search,
)
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


def old_search(kind: str, d: int, K: int, restarts: int = 8, seed: int = 0) -> float:
    """The earlier smoothed search (baseline): Adam + retraction on the smoothed objective, ``tau`` 0.2 (Softmax)
    or 0.1 (Tammes) -> 1e-4 and step size 0.05 -> 1e-4 geometrically over ``1500 + 5K`` steps, restarts batched;
    the best exact value."""
    import torch

    from nclab.ufm.spherical import smoothed_hardmax

    def unit(X):
        return X / torch.linalg.vector_norm(X, dim=-1, keepdim=True)

    def tammes_loss(W, tau):
        iu = torch.triu_indices(K, K, offset=1)
        C = W @ W.transpose(-1, -2)
        return tau * torch.logsumexp(C[..., iu[0], iu[1]] / tau, dim=-1)

    gen = torch.Generator().manual_seed(seed)
    W0 = unit(torch.randn((restarts, K, d), generator=gen, dtype=torch.float64))
    ps = [W0.clone().requires_grad_(True)] + ([W0.clone().requires_grad_(True)] if kind == "softmax" else [])
    opt = torch.optim.Adam(ps, lr=0.05)
    steps, tau0 = 1500 + 5 * K, (0.2 if kind == "softmax" else 0.1)
    torch.set_num_threads(1)
    for s in range(steps):
        t = s / (steps - 1)
        for g in opt.param_groups:
            g["lr"] = 0.05 * (1e-4 / 0.05) ** t
        tau = tau0 * (1e-4 / tau0) ** t
        opt.zero_grad()
        U = [unit(p) for p in ps]
        loss = smoothed_hardmax(U[0], U[1].unsqueeze(-2), tau) if kind == "softmax" else tammes_loss(U[0], tau)
        loss.sum().backward()
        opt.step()
        with torch.no_grad():
            for p in ps:
                p.copy_(unit(p))
    Ws = [w.detach().numpy() for w in unit(ps[0])]
    return max(one_vs_one(w).chordal if kind == "tammes" else one_vs_rest(w).rho for w in Ws)


def bench_searches(seed: int) -> None:
    for kind, d, K in [("tammes", 3, 13), ("tammes", 3, 14), ("tammes", 3, 24), ("softmax", 3, 9),
                       ("softmax", 4, 10), ("softmax", 3, 13)]:  # fmt: skip
        old, t_old, _ = timed(lambda kind=kind, d=d, K=K: old_search(kind, d, K, seed=seed))
        fn = tammes_search if kind == "tammes" else softmax_code_search
        new, t_new, _ = timed(lambda fn=fn, d=d, K=K: fn(d, K, seed=seed))

        def show(v: float, kind: str = kind) -> str:
            return f"{v:.9f}" + (f" ({np.degrees(2 * np.arcsin(v / 2)):.6f} deg)" if kind == "tammes" else "")

        print(
            f"{kind:>7} (d={d}, K={K}): old {show(old)} in {t_old:5.2f} s | new {show(new.value)} in "
            f"{t_new:5.2f} s, KKT residual {new.kkt.residual:.1e} ({len(new.kkt.multipliers)} active)"
        )


def bench_pieces(K: int = 1000, d: int = 8, repeats: int = 5, seed: int = 0) -> None:
    """Dense vs generic Softmax Code pieces: best of ``repeats`` of values + gradient, ratio in the same run."""
    from threadpoolctl import threadpool_limits

    from nclab.geometry import codes

    pieces = codes._softmax_pieces(K)  # the benchmark times the private paths the search chooses between
    gen = np.random.default_rng(seed)
    X, P = gen.normal(size=(1, 2 * K, d)), gen.random((1, K * (K - 1)))
    paths = {
        "dense": lambda: (pieces.values(X), pieces.grad(X, P)),
        "generic": lambda: (codes._Pieces.values(pieces, X), codes._Pieces.grad(pieces, X, P)),
    }
    dense, generic = (f() for f in paths.values())
    gap = max(float(np.max(np.abs(a - b))) for a, b in zip(dense, generic, strict=True))
    print(f"Softmax Code pieces, K = {K}, d = {d}: max |dense - generic| = {gap:.1e}")
    for threads in (1, 2):
        with threadpool_limits(threads):
            best = {}
            for name, f in paths.items():
                times = []
                for _ in range(repeats):
                    t = time.perf_counter()
                    f()
                    times.append(time.perf_counter() - t)
                best[name] = min(times)
        print(f"  {threads} thread(s): dense {best['dense'] * 1e3:.1f} ms, generic {best['generic'] * 1e3:.1f} ms, "
              f"generic / dense = {best['generic'] / best['dense']:.1f}")  # fmt: skip


def main() -> None:
    native_blas()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--d", type=int, default=512)
    ap.add_argument("--ks", type=int, nargs="+", default=[1000, 10000])
    ap.add_argument("--sample", type=int, default=20)
    ap.add_argument("--code-restarts", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--skip-code", action="store_true")
    ap.add_argument("--codes-only", action="store_true", help="only the new-vs-old code searches")
    ap.add_argument("--pieces", action="store_true", help="only the dense vs generic Softmax Code pieces")
    args = ap.parse_args()
    print(kernels_line())
    if args.pieces:
        bench_pieces(seed=args.seed)
        return
    if args.codes_only:
        bench_searches(args.seed)
        return
    for K in args.ks:
        bench_rho(K, args.d, args.sample, args.seed)
    if not args.skip_code:
        bench_code(args.code_restarts, args.seed)


if __name__ == "__main__":
    main()
