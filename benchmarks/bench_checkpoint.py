"""Per-epoch cost of the trainer's sealed checkpoint: written on the training thread, or off it.

Three trainers of the same run config (digits MLP, 16 optimisation steps an epoch, SGD with momentum, measured at
epoch 0 only, no zero-error checks) train in one process, in interleaved blocks of ``--block`` epochs, the order
rotating each round:

* **sync**: the checkpoint and ``metrics.csv`` written before ``Trainer.epoch()`` returns (the trainer before the
  background writer; ``Trainer(..., background_checkpoints=False)``);
* **background**: the state copied on the training thread, sealed and written by the background writer while
  the next epoch trains (the default inside ``with Trainer``); each block ends by waiting for its last write, which
  the block's time includes;
* **none**: no checkpoint (``checkpoint.every`` past the block's epochs): the training alone, the reference.

Reported: the median per-epoch time of each (block time / epochs), each trainer's throughput against the
reference (``none / mode`` epoch time, as the GPU target "the trainer >= 0.8x a plain loop" reads), the same
paired by round (the median over rounds of each round's difference and ratio: a loaded machine's drift between
rounds cancels), the checkpoint size, and, separately (5 repeats, medians), what the training thread pays per
checkpoint: the copy of the state (``snapshot_state``) against the whole synchronous write (``--resnet18``: the
same for the 89.5 MB checkpoint of benchmarks/bench_throughput.py's ResNet-18, 3 repeats). Also the load average
before and after: on a shared machine the figures are not idle-machine figures.

    .venv/bin/python benchmarks/bench_checkpoint.py [--widths 512 512] [--rounds 5] [--block 4] \\
        [--resnet18] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch


def run_config(widths: list[int], every: int) -> dict[str, Any]:
    return {
        "name": "ckpt-bench",
        "data": {"name": "digits", "per_class": 40, "test_per_class": 5},  # 400 images: 16 steps of 25
        "model": {"name": "mlp", "options": {"widths": widths}},
        "loss": {"name": "ce"},
        "optim": {"lr": 0.01, "momentum": 0.9, "weight_decay": 5e-4},
        "schedule": {"name": "constant"},
        "train": {"epochs": 100_000, "batch_size": 25, "threads": 1},
        "measure": {"epochs": [0], "zero_error_gate": 0.0},
        "checkpoint": {"every": every},
        "report": False,
    }


def resnet18_costs(repeats: int = 3) -> dict[str, Any]:
    """What one checkpoint of the throughput benchmark's ResNet-18 (weights and SGD momentum) costs the training
    thread written synchronously (seal + atomic write) against the copy a background write needs."""
    from nclab.io.atomic import atomic_write_bytes
    from nclab.nets import build_model
    from nclab.train.checkpoint import CHECKPOINT_KEYS, checkpoint_bytes, snapshot_state

    torch.manual_seed(0)
    model = build_model("resnet18", (3, 32, 32), 10)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    logits = model(torch.randn(8, 3, 32, 32))
    torch.nn.functional.cross_entropy(logits, torch.arange(8) % 10).backward()
    opt.step()  # momentum buffers exist
    copy_s, write_s, size = [], [], 0
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(repeats):
            t0 = time.perf_counter()
            snapshot_state(model.state_dict()), snapshot_state(opt.state_dict())
            copy_s.append(time.perf_counter() - t0)
            payload = dict.fromkeys(CHECKPOINT_KEYS, 0) | {"model": model.state_dict(), "optimizer": opt.state_dict()}
            t0 = time.perf_counter()
            data = checkpoint_bytes(payload | {"rows": [], "measured": [], "timings": {}})
            atomic_write_bytes(Path(tmp, "last.pt"), data)
            write_s.append(time.perf_counter() - t0)
            size = len(data)
    return {
        "resnet18_checkpoint_mb": size / 1e6,
        "resnet18_copy_ms": [round(1e3 * t, 1) for t in copy_s],
        "resnet18_sync_write_ms": [round(1e3 * t, 1) for t in write_s],
    }


def main() -> None:
    from nclab.train import Trainer, resolve_config
    from nclab.train.checkpoint import snapshot_state

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--widths", type=int, nargs="+", default=[512, 512])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--block", type=int, default=4, help="epochs per timed block")
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--resnet18", action="store_true", help="also time one ResNet-18 checkpoint: copy vs sync write")
    args = p.parse_args()
    torch.set_num_threads(1)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        trainers = {
            "sync": Trainer(
                resolve_config(run_config(args.widths, 1)), Path(tmp, "sync"), background_checkpoints=False
            ),
            "background": Trainer(resolve_config(run_config(args.widths, 1)), Path(tmp, "bg")),
            "none": Trainer(resolve_config(run_config(args.widths, 10**9)), Path(tmp, "none")),
        }
        for t in trainers.values():
            t.__enter__()
            t.epoch()  # warm-up
            t.wait_for_writes()
        epoch_s: dict[str, list[float]] = {k: [] for k in trainers}
        names = list(trainers)
        for r in range(args.rounds):
            for name in names[r % 3 :] + names[: r % 3]:
                t = trainers[name]
                t0 = time.perf_counter()
                for _ in range(args.block):
                    t.epoch()
                t.wait_for_writes()
                epoch_s[name].append((time.perf_counter() - t0) / args.block)
        ckpt = trainers["sync"].run_dir.checkpoint
        size_mb = ckpt.stat().st_size / 1e6
        # the training thread's share of one checkpoint: the copy (background) against the whole write (sync)
        t = trainers["sync"]
        copy_s, write_s = [], []
        for _ in range(5):
            t0 = time.perf_counter()
            snapshot_state(t.model.state_dict()), snapshot_state(t.opt.state_dict())
            copy_s.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            t.checkpoint()
            write_s.append(time.perf_counter() - t0)
        for t in trainers.values():
            t.__exit__(None, None, None)
    med = {k: statistics.median(v) for k, v in epoch_s.items()}
    report = {
        "args": vars(args) | {"json": None if args.json is None else str(args.json)},
        "checkpoint_mb": size_mb,
        "epoch_s": epoch_s,
        "median_epoch_ms": {k: 1e3 * v for k, v in med.items()},
        "throughput_vs_none": {k: med["none"] / v for k, v in med.items()},
        "checkpoint_cost_ms": {k: 1e3 * (v - med["none"]) for k, v in med.items() if k != "none"},
        # paired: each round's block against the same round's reference block (a loaded machine's drift cancels)
        "paired_cost_ms": {
            k: 1e3 * statistics.median(a - b for a, b in zip(epoch_s[k], epoch_s["none"], strict=True))
            for k in ("sync", "background")
        },
        "paired_throughput_vs_none": {
            k: statistics.median(b / a for a, b in zip(epoch_s[k], epoch_s["none"], strict=True))
            for k in ("sync", "background")
        },
        "training_thread_per_checkpoint_ms": {
            "copy (background)": 1e3 * statistics.median(copy_s),
            "whole write (sync)": 1e3 * statistics.median(write_s),
        },
        "load_avg_before": load_before,
        "load_avg_after": os.getloadavg(),
        "torch": torch.__version__,
    }
    print(f"MLP {args.widths}, checkpoint {size_mb:.1f} MB, {args.rounds} rounds of {args.block} epochs (16 steps):")
    for k in trainers:
        cost = report["checkpoint_cost_ms"].get(k)
        print(
            f"  {k:>10}: median epoch {report['median_epoch_ms'][k]:7.1f} ms, throughput vs none "
            f"{report['throughput_vs_none'][k]:.2f}" + ("" if cost is None else f", checkpoint cost {cost:6.1f} ms")
        )
    pc, pt = report["paired_cost_ms"], report["paired_throughput_vs_none"]
    print(
        f"  paired by round (median): checkpoint cost sync {pc['sync']:.1f} ms, background {pc['background']:.1f} ms;"
        f" throughput vs none sync {pt['sync']:.2f}, background {pt['background']:.2f}"
    )
    tt = report["training_thread_per_checkpoint_ms"]
    copy_ms, write_ms = tt["copy (background)"], tt["whole write (sync)"]
    print(f"  training thread per checkpoint: copy {copy_ms:.1f} ms, whole write {write_ms:.1f} ms")
    print(f"load average (1, 5, 15 min) before {load_before}, after {report['load_avg_after']}")
    if args.resnet18:
        report |= resnet18_costs()
        print(
            f"ResNet-18 checkpoint {report['resnet18_checkpoint_mb']:.1f} MB: training thread per checkpoint, copy "
            f"{report['resnet18_copy_ms']} ms, whole synchronous write {report['resnet18_sync_write_ms']} ms"
        )
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
