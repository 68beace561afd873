"""Training throughput of the nclab trainer against the same loop in plain PyTorch.

ResNet-18 (CIFAR variant: 3x3 stem, no max-pool; 11.2M parameters at 10 classes) trained on synthetic 32x32 RGB
images with crop (pad 4) + horizontal flip augmentation, SGD momentum 0.9, weight decay 5e-4, CE, batch 128,
drop_last. Both sides train the same network object in the same process, in interleaved rounds (one epoch each,
the order alternating), on the same device and thread count:

* **nclab**: ``Trainer.epoch()`` of a run config (``data.augment: cifar`` on a CIFAR-10 folder the benchmark
  writes: ``--images`` train images + 256 test images in ``data_batch_1..5`` / ``test_batch``), with the
  measurement planned at epoch 0 only and no checkpoint before the last epoch, so an epoch is the training pass:
  the order drawn from ``(seed, epoch)``, the per-batch augmentation on the device, the loss, the step and the
  running loss / error;
* **plain**: the loop a user would write: ``randperm``, slice, pad + random crop + flip with tensor ops,
  normalise, forward, ``cross_entropy``, backward, ``SGD.step`` -- on the same uint8 -> [0, 1] tensors.

Reported per thread count: images/s of each side (median over rounds), their ratio, the measurement overhead
(one ``Trainer.measure()`` -- train and test splits, every measured layer as a run measures by default, and the
penultimate layer only -- against the median nclab epoch), and each loop's own cost per batch: an epoch's
batches (order, slices, augmentation) without the network, in 5 interleaved rounds -- a figure a loaded machine
disturbs much less than whole epochs, whose spread there is tens of percent. Also the load average before and
after, torch's threads and the BLAS / OpenMP pools (threadpoolctl): on a shared machine the figures are not
idle-machine figures.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python benchmarks/bench_throughput.py \\
        [--images 2048] [--rounds 3] [--threads 1 2] [--device cpu|cuda] [--precision fp32|bf16] \\
        [--layers all|penultimate] [--json OUT.json]

An epoch of 2,048 images takes 1.5-3 minutes per side on this 2-core machine (loaded), so the default run (3
rounds, 1 and 2 threads) takes about half an hour; ``--images 256 --rounds 1`` is a quick run. ``--device cuda``
gives the GPU figure (``--precision bf16`` the mixed-precision one; ``--channels-last`` too).
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

CIFAR_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR_STD = (0.2470, 0.2435, 0.2616)


def write_cifar(root: Path, n_train: int, n_test: int = 256, seed: int = 0) -> None:
    """A CIFAR-10 python folder of synthetic images: class k has mean colour k/10 in one channel, plus noise."""
    rng = np.random.default_rng(seed)
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)

    def batch(n: int) -> dict[bytes, Any]:
        y = rng.integers(0, 10, n)
        base = np.zeros((n, 3, 32, 32))
        base[np.arange(n), y % 3] = 25.0 * y[:, None, None]
        x = np.clip(base + 60 + rng.normal(0, 40, size=(n, 3, 32, 32)), 0, 255).astype(np.uint8)
        return {b"data": x.reshape(n, -1), b"labels": y.tolist()}

    parts = np.array_split(np.arange(n_train), 5)
    for i, part in enumerate(parts, start=1):
        (folder / f"data_batch_{i}").write_bytes(pickle.dumps(batch(len(part))))
    (folder / "test_batch").write_bytes(pickle.dumps(batch(n_test)))


def run_config(root: Path, args: argparse.Namespace) -> dict[str, Any]:
    return {
        "name": "throughput",
        "data": {"name": "cifar10", "root": str(root), "augment": "cifar"},
        "model": {"name": "resnet18"},
        "loss": {"name": "ce"},
        "optim": {"name": "sgd", "lr": 0.1, "momentum": 0.9, "weight_decay": 5e-4},
        "schedule": {"name": "constant"},
        "train": {
            "epochs": 10_000,  # never reached: no checkpoint but the first
            "batch_size": args.batch_size,
            "device": args.device,
            "precision": args.precision,
            "channels_last": args.channels_last,
        },
        "measure": {"epochs": [0], "layers": args.layers, "zero_error_gate": 0.0},
        "report": False,
    }


class PlainLoop:
    """The same training written in plain PyTorch: its own ResNet-18, built as the trainer builds its own (same
    seed, so the same initial weights; a separate allocation, as a user's loop would have)."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor, args: argparse.Namespace) -> None:
        from nclab.nets import build_model

        torch.manual_seed(0)
        self.device = torch.device(args.device)
        self.model = build_model("resnet18", (3, 32, 32), 10).to(self.device)
        self.x, self.y, self.bs = x, y, args.batch_size
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
        self.mean = torch.tensor(CIFAR_MEAN, device=self.device).view(1, 3, 1, 1)
        self.std = torch.tensor(CIFAR_STD, device=self.device).view(1, 3, 1, 1)
        self.dtype = {"fp32": None, "bf16": torch.bfloat16}[args.precision]
        self.channels_last = args.channels_last
        if self.channels_last:
            self.model.to(memory_format=torch.channels_last)

    def augment(self, xb: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        B = xb.shape[0]
        padded = F.pad(xb, (4, 4, 4, 4))
        i = torch.randint(0, 9, (B,), generator=gen).to(xb.device)
        j = torch.randint(0, 9, (B,), generator=gen).to(xb.device)
        rows = (i[:, None] + torch.arange(32, device=xb.device))[:, None, :, None]
        cols = (j[:, None] + torch.arange(32, device=xb.device))[:, None, None, :]
        b = torch.arange(B, device=xb.device)[:, None, None, None]
        c = torch.arange(3, device=xb.device)[None, :, None, None]
        out = padded[b, c, rows, cols]
        flip = (torch.rand(B, generator=gen) < 0.5).to(xb.device)[:, None, None, None]
        return (torch.where(flip, out.flip(-1), out) - self.mean) / self.std

    def data_path(self, epoch: int) -> None:
        """The epoch's batches (order, slices, augmentation) without the network: the loop's own cost."""
        gen = torch.Generator().manual_seed(epoch)
        perm = torch.randperm(len(self.y), generator=gen)
        for s in range(0, len(perm) - self.bs + 1, self.bs):
            idx = perm[s : s + self.bs]
            self.augment(self.x[idx].to(self.device), gen), self.y[idx].to(self.device)

    def epoch(self, epoch: int, max_batches: int | None = None) -> None:
        self.model.train()
        gen = torch.Generator().manual_seed(epoch)
        perm = torch.randperm(len(self.y), generator=gen)
        starts = range(0, len(perm) - self.bs + 1, self.bs)
        for s in starts if max_batches is None else starts[:max_batches]:
            idx = perm[s : s + self.bs]
            xb = self.augment(self.x[idx].to(self.device), gen)
            yb = self.y[idx].to(self.device)
            if self.channels_last:
                xb = xb.contiguous(memory_format=torch.channels_last)
            with torch.autocast(self.device.type, dtype=self.dtype, enabled=self.dtype is not None):
                logits = self.model(xb)
            loss = F.cross_entropy(logits.float(), yb)
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            self.opt.step()
            float(loss.detach())  # the running loss a loop reports (a device sync, as the trainer's)


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def bench(threads: int, args: argparse.Namespace, root: Path) -> dict[str, Any]:
    from nclab.train import Trainer, resolve_config

    torch.set_num_threads(threads)
    cfg = resolve_config(run_config(root, args))
    with tempfile.TemporaryDirectory() as out, Trainer(cfg, out) as trainer:
        data = trainer.data.train.data  # the unstandardised [0, 1] images the recipe augments
        plain = PlainLoop(data.x, data.y, args)
        n = trainer.data.train.num_batches() * args.batch_size
        # warm-up (allocator, kernels), not timed: the first round's order alternates with the next ones'
        plain.epoch(0, max_batches=3)
        times: dict[str, list[float]] = {"nclab": [], "plain": []}
        for r in range(args.rounds):
            order = ("nclab", "plain") if r % 2 == 0 else ("plain", "nclab")
            for side in order:
                sync(args.device)
                t0 = time.perf_counter()
                if side == "nclab":
                    trainer.epoch()
                else:
                    plain.epoch(r + 1)
                sync(args.device)
                times[side].append(time.perf_counter() - t0)
        measure_s = {}
        for layers in dict.fromkeys([args.layers, "penultimate"]):
            trainer.cfg.measure.layers = layers
            sync(args.device)
            t0 = time.perf_counter()
            trainer.measure()
            sync(args.device)
            measure_s[layers] = time.perf_counter() - t0
        # the loops' own cost: each side's batches of an epoch without the network, 5 interleaved rounds
        feed, path = trainer.data.train, {"nclab": [], "plain": []}
        for r in range(5):
            t0 = time.perf_counter()
            for _ in feed.batches(100 + r):
                pass
            sync(args.device)
            path["nclab"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            plain.data_path(100 + r)
            sync(args.device)
            path["plain"].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) for k, v in times.items()}
    batches = n // args.batch_size
    return {
        "threads": threads,
        "images_per_epoch": n,
        "epoch_s": times,
        "nclab_img_s": n / med["nclab"],
        "plain_img_s": n / med["plain"],
        "ratio": med["plain"] / med["nclab"],  # throughput of nclab over plain's (median epoch times)
        "measure_s": measure_s,
        "measure_over_epoch": {k: v / med["nclab"] for k, v in measure_s.items()},
        "data_path_ms_per_batch": {k: 1e3 * statistics.median(v) / batches for k, v in path.items()},
        "step_ms_per_batch": {k: 1e3 * v / batches for k, v in med.items()},
    }


def environment() -> dict[str, Any]:
    try:
        from threadpoolctl import threadpool_info

        pools = [
            {k: p.get(k) for k in ("internal_api", "num_threads", "version", "architecture")} for p in threadpool_info()
        ]
    except ImportError:  # pragma: no cover
        pools = []
    return {
        "torch": torch.__version__,
        "cpu_count": os.cpu_count(),
        "pools": pools,
        "env": {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")},
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--images", type=int, default=2048)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--device", default="cpu")
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    p.add_argument("--channels-last", action="store_true")
    p.add_argument("--layers", choices=["all", "penultimate"], default="all")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args()
    load_before = os.getloadavg()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        write_cifar(Path(tmp), args.images)
        for threads in args.threads:
            res = bench(threads, args, Path(tmp))
            results.append(res)
            epochs = {k: [round(t, 2) for t in v] for k, v in res["epoch_s"].items()}
            measured = ", ".join(
                f"{k} layers {v:.1f} s = {res['measure_over_epoch'][k]:.2f} x an epoch"
                for k, v in res["measure_s"].items()
            )
            dp = res["data_path_ms_per_batch"]
            print(
                f"threads {threads}: nclab {res['nclab_img_s']:.1f} img/s, plain PyTorch {res['plain_img_s']:.1f} "
                f"img/s, throughput nclab / plain = {res['ratio']:.3f}; epochs (s) {epochs}; one measurement: "
                f"{measured}; batches without the network: nclab {dp['nclab']:.1f} ms, plain {dp['plain']:.1f} ms "
                f"per batch (a training step: {res['step_ms_per_batch']['nclab']:.0f} ms)",
                flush=True,
            )
    report = {
        "args": vars(args) | {"json": None if args.json is None else str(args.json)},
        "load_avg_before": load_before,
        "load_avg_after": os.getloadavg(),
        "environment": environment(),
        "results": results,
    }
    print(f"load average (1, 5, 15 min) before {load_before}, after {report['load_avg_after']}")
    print(json.dumps(report["environment"]))
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
