"""Measurement overhead of ``CollapseMonitor`` in a plain PyTorch loop against the built-in trainer's.

The same run twice per round, in one process: (a) the built-in trainer on a demo config (``bench_train.overhead``:
digits MLP 128x3 + BN, 200 epochs, 16 log-spaced measured epochs + the zero-error epoch when it is not among
them, train + test split, 3 layers); (b) a plain loop training the same model (same config: data, initialisation,
optimizer, cosine learning rate, batch 128, one thread) and a ``CollapseMonitor`` on the same layers with the
log-spaced schedule (``Schedule.log(200, 16)``) and the same loss row, measuring the two splits in the
trainer's eval batches of 256 rows (a list of tensor batches; ``--dataloader``: ``DataLoader(TensorDataset)``,
which adds the loader's per-sample indexing and collation, a cost of the data pipeline rather than of the
measurement). Figure: measurement time / training time, raw (totals) and robust (measurements x median
measurement / epochs x median epoch). Median over rounds; target: the monitor within 2 points of the trainer.

    .venv/bin/python benchmarks/bench_monitor.py [--runs 3] [--epochs N] [--loss ce|mse] [--dataloader]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import torch
from torch.utils.data import DataLoader, TensorDataset

from bench_train import overhead


def monitor_overhead(epochs: int | None, loss: str = "ce", dataloader: bool = False) -> dict[str, float]:
    from nclab._threads import blas_threads, torch_threads
    from nclab.data import load
    from nclab.experiments.training import demo_config
    from nclab.measure import Schedule
    from nclab.monitor import CollapseMonitor
    from nclab.nets import build_model
    from nclab.train import resolve_config
    from nclab.train.losses import make_loss
    from nclab.train.optim import lr_at, make_optimizer

    cfg = resolve_config({**demo_config(loss), "report": False}, [f"train.epochs={epochs}"] if epochs else [])
    n_epochs, d, bs = cfg.train.epochs, cfg.data, cfg.train.batch_size
    with torch_threads(cfg.train.threads), blas_threads(cfg.train.threads):
        train = load(d.name, "train", per_class=d.per_class, seed=cfg.seed)
        test = load(d.name, "test", per_class=d.test_per_class, seed=cfg.seed)
        torch.manual_seed(cfg.seed)
        model = build_model(
            cfg.model.name, train.input_shape, 10, head=cfg.model.head.build_kwargs(), **cfg.model.options
        )
        opt, loss_fn = make_optimizer(model, cfg.optim), make_loss(cfg.loss, 10)
        monitor = CollapseMonitor(
            model,
            10,
            layers=list(model.measured_layers()),
            schedule=Schedule.log(n_epochs, cfg.measure.num_log),
            loss_fn=lambda out, y: loss_fn(out, y, out),
        )
        eval_bs = cfg.measure.batch_size

        def batches(x: torch.Tensor, y: torch.Tensor) -> Any:
            if dataloader:
                return DataLoader(TensorDataset(x, y), batch_size=eval_bs)
            return [(x[i : i + eval_bs], y[i : i + eval_bs]) for i in range(0, len(y), eval_bs)]

        train_eval, test_eval = batches(train.x, train.y), batches(test.x, test.y)
        gen = torch.Generator().manual_seed(cfg.seed)
        per_epoch: list[float] = []
        per_measure: list[float] = []

        def measure(epoch: int) -> None:
            t0 = time.perf_counter()
            monitor.measure(train_eval, split="train", epoch=epoch)
            monitor.measure(test_eval, split="test", epoch=epoch)
            per_measure.append(time.perf_counter() - t0)

        measure(0)
        for epoch in range(1, n_epochs + 1):
            t0 = time.perf_counter()
            for group in opt.param_groups:
                group["lr"] = lr_at(epoch - 1, cfg.optim.lr, cfg.schedule, n_epochs)
            model.train()
            perm = torch.randperm(len(train.y), generator=gen)
            for i in range(0, len(perm), bs):
                idx = perm[i : i + bs]
                xb, yb = train.x[idx], train.y[idx]
                h = model.features(xb)
                out = loss_fn(model.head(h), yb, h)
                opt.zero_grad(set_to_none=True)
                out.backward()
                opt.step()
            per_epoch.append(time.perf_counter() - t0)
            if monitor.due(epoch):
                measure(epoch)
    robust = len(per_measure) * statistics.median(per_measure) / (len(per_epoch) * statistics.median(per_epoch))
    return {
        "train_s": sum(per_epoch),
        "measure_s": sum(per_measure),
        "measure/train": sum(per_measure) / sum(per_epoch),
        "robust measure/train": robust,
        "median epoch ms": 1e3 * statistics.median(per_epoch),
        "median measurement ms": 1e3 * statistics.median(per_measure),
        "measured_epochs": len(per_measure),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=None, help="shorten the demo run (default: its 200 epochs)")
    ap.add_argument("--runs", type=int, default=3, help="rounds (trainer run, then monitor run); medians over them")
    ap.add_argument("--loss", default="ce", choices=["ce", "mse"], help="which demo config")
    ap.add_argument("--dataloader", action="store_true", help="the monitor reads DataLoaders, not tensor batches")
    args = ap.parse_args()
    figures: dict[str, dict[str, list[float]]] = {"trainer": {}, "monitor": {}}
    for i in range(args.runs):
        for who in ("trainer", "monitor"):
            if who == "trainer":
                res = overhead(args.epochs, args.loss)
            else:
                res = monitor_overhead(args.epochs, args.loss, args.dataloader)
            print(f"{who}, round {i + 1}/{args.runs}:")
            for k in ("train_s", "measure_s", "measure/train", "robust measure/train", "measured_epochs"):
                print(f"  {k:>22}: {res[k]:,.3f}")
            for k in ("measure/train", "robust measure/train", "median measurement ms", "median epoch ms"):
                figures[who].setdefault(k, []).append(res[k])
    med = {who: {k: statistics.median(v) for k, v in f.items()} for who, f in figures.items()}
    for who, m in med.items():
        print(
            f"{who}: measurement overhead {100 * m['measure/train']:.1f}% of training time "
            f"(robust {100 * m['robust measure/train']:.1f}%; median measurement {m['median measurement ms']:.1f} ms, "
            f"median epoch {m['median epoch ms']:.1f} ms; median of {args.runs})"
        )
    gap = 100 * (med["monitor"]["measure/train"] - med["trainer"]["measure/train"])
    gap_r = 100 * (med["monitor"]["robust measure/train"] - med["trainer"]["robust measure/train"])
    print(f"monitor - trainer: {gap:+.1f} points (robust {gap_r:+.1f}); target within 2 points")


if __name__ == "__main__":
    main()
