"""Training benchmark on the demo configs (digits MLP; the CE and the MSE run of `nclab demo`).

1. Measurement overhead: each demo run's measurement time (eval-mode passes, ClassStats, NCC, metrics, plus the
   zero-error checks) as a fraction of its training time, from the run's own timers; target < 15 %. Two figures
   per run: the raw ratio of the totals, and a robust one, (number of measurements x their median) / (epochs x
   median epoch), which a few stalls of a shared machine (single measurements or epochs taking 2-3x their usual
   time) do not move. ``--runs`` repeats the run and prints the medians over runs.
2. Training throughput (samples/s) without hooks and with FeatureHooks on every measured layer feeding light
   ClassStats (what on-the-fly measurement during training would cost), measured in the same process.

    .venv/bin/python benchmarks/bench_train.py [--epochs N] [--runs R] [--losses ce mse]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import torch

from _native import kernels_line, native_blas


def overhead(epochs: int | None, loss: str = "ce") -> dict[str, float]:
    from nclab.experiments.demo import demo_config
    from nclab.train import resolve_config, train

    cfg = resolve_config({**demo_config(loss), "report": False}, [f"train.epochs={epochs}"] if epochs else [])
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        r = train(cfg, tmp, progress=False)
        wall = time.perf_counter() - t0
    t = r.timings
    per_epoch = [tr for _, tr, _ in r.epoch_timings if tr > 0]
    per_measure = [m for e, _, m in r.epoch_timings if e in set(r.measured_epochs)]
    robust = len(per_measure) * statistics.median(per_measure) / (len(per_epoch) * statistics.median(per_epoch))
    return {
        "wall_s": wall,
        **t,
        "measure/train": t["measure_s"] / t["train_s"],
        "robust measure/train": robust,
        "median epoch ms": 1e3 * statistics.median(per_epoch),
        "median measurement ms": 1e3 * statistics.median(per_measure),
        "checkpoint/train": t["checkpoint_s"] / t["train_s"],
        "measured_epochs": len(r.measured_epochs),
    }


def throughput(steps: int = 300) -> dict[str, float]:
    from nclab.data import load
    from nclab.measure import FeatureHooks
    from nclab.nets import build_model
    from nclab.stats import ClassStats

    torch.set_num_threads(1)
    data = load("digits", "train", per_class=130)
    torch.manual_seed(0)
    model = build_model("mlp", data.input_shape, 10, widths=[128, 128, 128], batchnorm=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    xb, yb = data.x[:128], data.y[:128]

    def run(n: int) -> float:
        t0 = time.perf_counter()
        for _ in range(n):
            loss = torch.nn.functional.cross_entropy(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
        return n * 128 / (time.perf_counter() - t0)

    run(20)  # warm-up
    plain = run(steps)
    stats: dict[str, ClassStats] = {}

    def sink(name: str, f: torch.Tensor) -> None:
        stats.setdefault(name, ClassStats(10, f.shape[1], track="light")).update(f, yb)

    with FeatureHooks(model, sink=sink):
        hooked = run(steps)
    return {"samples_per_s_plain": plain, "samples_per_s_hooks": hooked, "hooks/plain": hooked / plain}


def main() -> None:
    native_blas()
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=None, help="shorten the demo run (default: its 200 epochs)")
    ap.add_argument("--runs", type=int, default=1, help="repeat the demo runs and report medians over runs")
    ap.add_argument("--losses", nargs="+", default=["ce", "mse"], choices=["ce", "mse"], help="which demo runs")
    args = ap.parse_args()
    print(kernels_line())
    tp = throughput()
    print("training throughput, digits MLP 128x3 + BN, batch 128, 1 thread:")
    for k, v in tp.items():
        print(f"  {k:>22}: {v:,.3f}")
    results: dict[str, dict[str, list[float]]] = {}
    for i in range(args.runs):
        for loss in args.losses:
            ov = overhead(args.epochs, loss)
            print(f"measurement overhead of the demo's {loss.upper()} run, run {i + 1}/{args.runs}:")
            for k, v in ov.items():
                print(f"  {k:>22}: {v:,.3f}")
            res = results.setdefault(loss, {"raw": [], "robust": []})
            res["raw"].append(ov["measure/train"])
            res["robust"].append(ov["robust measure/train"])
    for loss, res in results.items():
        raw, robust = res["raw"], res["robust"]
        print(
            f"{loss.upper()} run: measurement overhead = {100 * statistics.median(raw):.1f}% of training time "
            f"(range {100 * min(raw):.1f}-{100 * max(raw):.1f}%; robust: {100 * statistics.median(robust):.1f}%; "
            f"median of {args.runs} run(s); target < 15%)"
        )


if __name__ == "__main__":
    main()
