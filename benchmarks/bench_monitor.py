"""The cost of a CollapseMonitor measurement against its floor, and against the built-in trainer's.

Default: one measurement of a split -- ``CollapseMonitor.measure`` over the split in the eval
batches of 256 rows -- against one eval-mode forward pass over the same batches in the same run (the floor: the
features must be computed), train and test split, with the breakdown of the measurement: forward (the hooked
forward pass, its feature copies and the loss), statistics (``ClassStats.update``), NCC (``NCCAccumulator``),
report (the metrics of each layer). Two models, each at 1 and 2 threads (torch and BLAS alike):

* the Fashion-MNIST CNN of ``nclab experiment run fashion-mnist-cnn --scale cpu`` (2,000 training and 1,000 test
  images padded to 32 x 32, channels 16-32, hidden 128), briefly trained; measured at the penultimate layer
  (``fc``, d = 128; target <= 1.3x the forward pass), then at the penultimate layer and the hidden ``fc.1`` (the
  hidden Linear's output, d = 128, full track; target <= 1.5x), and, for information, at the penultimate layer and
  ``block2`` (d = 2,048, light track);
* the demo MLP (digits, 128 x 3 + BN; its forward pass is ~3 ms): the same breakdown, no target.

Rounds alternate the forward pass and the measurement (train split, then test split, as a training loop would);
figures are medians over rounds; the ratio is the median of the per-round ratios.

``--vs-trainer``: the measurement overhead of ``CollapseMonitor`` in a plain PyTorch loop against the
built-in trainer's, the same run twice per round in one process: (a) the built-in trainer on a demo config
(``bench_train.overhead``: digits MLP 128x3 + BN, 200 epochs, 16 log-spaced measured epochs + the zero-error
epoch when it is not among them, train + test split, 3 layers); (b) a plain loop training the same model (same
config: data, initialisation, optimizer, cosine learning rate, batch 128, one thread) and a ``CollapseMonitor`` on
the same layers with the log-spaced schedule (``Schedule.log(200, 16)``) and the same loss row, measuring the two
splits in the trainer's eval batches of 256 rows (a list of tensor batches; ``--dataloader``:
``DataLoader(TensorDataset)``, which adds the loader's per-sample indexing and collation, a cost of the data
pipeline rather than of the measurement). Figure: measurement time / training time, raw (totals) and robust
(measurements x median measurement / epochs x median epoch). Median over rounds; target: the monitor within 2
points of the trainer.

    .venv/bin/python benchmarks/bench_monitor.py [--rounds 5] [--threads 1,2] [--models cnn,mlp]
    .venv/bin/python benchmarks/bench_monitor.py --vs-trainer [--runs 3] [--epochs N] [--loss ce|mse] [--dataloader]

Runs on the BLAS kernels a user's machine selects (``_native.native_blas``).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import torch
from torch.utils.data import DataLoader, TensorDataset

from _native import kernels_line, native_blas
from bench_train import overhead


def monitor_overhead(epochs: int | None, loss: str = "ce", dataloader: bool = False) -> dict[str, float]:
    from nclab._threads import blas_threads, torch_threads
    from nclab.data import load
    from nclab.experiments.demo import demo_config
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


# ---------------------------------------------------------------------- measurement against its floor
PHASES: dict[str, float] = defaultdict(float)


def _timed(phase: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            PHASES[phase] += time.perf_counter() - t0

    return wrapper


def instrument() -> None:
    """Time the phases of a measurement from outside: the statistics updates, the NCC accumulators (built and
    updated), the per-layer reports. What is left of a measurement is its forward pass."""
    import nclab.measure.split as split
    from nclab.stats import ClassStats, NCCAccumulator

    ClassStats.update = _timed("statistics", ClassStats.update)
    NCCAccumulator.__init__ = _timed("ncc", NCCAccumulator.__init__)
    NCCAccumulator.update = _timed("ncc", NCCAccumulator.update)
    split.layer_rows = _timed("report", split.layer_rows)


def _cnn_case(epochs: int) -> tuple[torch.nn.Module, Any, Any, dict[str, list[str]], dict[str, dict[str, str]]]:
    from nclab.data import load
    from nclab.experiments.han2022.experiments import _fashion_cfg
    from nclab.nets import build_model

    cfg = _fashion_cfg("cpu", 0, "ce")
    d = cfg.data
    train = load(d.name, "train", per_class=d.per_class, seed=cfg.seed, pad_to=d.pad_to)
    test = load(d.name, "test", per_class=d.test_per_class, seed=cfg.seed, pad_to=d.pad_to)
    torch.manual_seed(0)
    model = build_model(cfg.model.name, train.input_shape, 10, **cfg.model.options)
    _train(model, train, epochs)
    layers = {"penultimate": ["fc"], "penultimate + fc.1": ["fc.1", "fc"], "penultimate + block2": ["block2", "fc"]}
    tracks = {"penultimate + fc.1": {"fc.1": "full"}, "penultimate + block2": {"block2": "light"}}
    return model, train, test, layers, tracks


def _mlp_case(epochs: int) -> tuple[torch.nn.Module, Any, Any, dict[str, list[str]], dict[str, dict[str, str]]]:
    from nclab.data import load
    from nclab.experiments.demo import demo_config
    from nclab.nets import build_model
    from nclab.train import resolve_config

    cfg = resolve_config({**demo_config("ce"), "report": False})
    d = cfg.data
    train = load(d.name, "train", per_class=d.per_class, seed=cfg.seed)
    test = load(d.name, "test", per_class=d.test_per_class, seed=cfg.seed)
    torch.manual_seed(0)
    model = build_model(cfg.model.name, train.input_shape, 10, **cfg.model.options)
    _train(model, train, epochs)
    names = list(model.measured_layers())
    return model, train, test, {"penultimate": [names[-1]], "all 3 layers": names}, {}


def _train(model: torch.nn.Module, data: Any, epochs: int) -> None:
    """A few epochs of SGD: features past the random start (the timings hardly depend on them)."""
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    gen = torch.Generator().manual_seed(0)
    model.train()
    for _ in range(epochs):
        perm = torch.randperm(len(data.y), generator=gen)
        for i in range(0, len(perm), 128):
            idx = perm[i : i + 128]
            loss = torch.nn.functional.cross_entropy(model(data.x[idx]), data.y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()


@torch.no_grad()
def _forward(model: torch.nn.Module, batches: list[tuple[torch.Tensor, torch.Tensor]]) -> float:
    """One eval-mode forward pass over ``batches`` (the floor), the model's mode restored."""
    was = model.training
    model.eval()
    t0 = time.perf_counter()
    for x, _ in batches:
        model(x)
    dt = time.perf_counter() - t0
    model.train(was)
    return dt


def floor_figures(model_name: str, rounds: int, threads: int, epochs: int) -> list[str]:
    """Lines of the report for one model at one thread count."""
    from threadpoolctl import threadpool_limits

    from nclab.monitor import CollapseMonitor

    torch.set_num_threads(threads)
    lines = []
    with threadpool_limits(threads, user_api="blas"):
        model, train, test, layer_sets, tracks = (_cnn_case if model_name == "cnn" else _mlp_case)(epochs)
        splits = {
            s: [(d.x[i : i + 256], d.y[i : i + 256]) for i in range(0, len(d.y), 256)]
            for s, d in (("train", train), ("test", test))
        }
        for label, layers in layer_sets.items():
            monitor = CollapseMonitor(model, 10, layers=layers, track=tracks.get(label))
            rows: dict[str, list[dict[str, float]]] = {"train": [], "test": []}
            for r in range(rounds + 1):  # round 0 warms up (allocator, work buffers, lane threads)
                for split, batches in splits.items():
                    fwd = _forward(model, batches)
                    PHASES.clear()
                    t0 = time.perf_counter()
                    monitor.measure(batches, split=split, epoch=r)
                    total = time.perf_counter() - t0
                    if r:
                        other = sum(PHASES.values())
                        rows[split].append({"floor": fwd, "measure": total, "forward": total - other, **PHASES})
            for split, rs in rows.items():
                med = {k: statistics.median(x.get(k, 0.0) for x in rs) for k in rs[0]}
                ratio = statistics.median(x["measure"] / x["floor"] for x in rs)
                n = len(train.y) if split == "train" else len(test.y)
                lines.append(
                    f"  {model_name} {label:22s} {split:5s} (N={n}) threads={threads}: measurement "
                    f"{1e3 * med['measure']:7.1f} ms = {ratio:.2f}x the eval forward pass ({1e3 * med['floor']:.1f} "
                    f"ms); forward {1e3 * med['forward']:.1f}, statistics {1e3 * med.get('statistics', 0):.1f}, "
                    f"NCC {1e3 * med.get('ncc', 0):.1f}, report {1e3 * med.get('report', 0):.1f} ms"
                )
    return lines


def floor_main(args: argparse.Namespace) -> None:
    instrument()
    print(kernels_line())
    print(f"medians of {args.rounds} rounds; targets (CNN): penultimate <= 1.3x, penultimate + hidden <= 1.5x")
    for model_name in args.models.split(","):
        for threads in (int(t) for t in args.threads.split(",")):
            for line in floor_figures(model_name, args.rounds, threads, args.epochs):
                print(line, flush=True)


def main() -> None:
    native_blas()
    ap = argparse.ArgumentParser()
    ap.add_argument("--vs-trainer", action="store_true", help="the comparison with the built-in trainer")
    ap.add_argument("--rounds", type=int, default=5, help="floor mode: rounds (forward pass, then measurement)")
    ap.add_argument("--threads", default="1,2", help="floor mode: thread counts, comma-separated")
    ap.add_argument("--models", default="cnn,mlp", help="floor mode: cnn, mlp or both")
    ap.add_argument("--train-epochs", dest="epochs", type=int, default=3, help="floor mode: epochs before timing")
    ap.add_argument("--epochs", dest="trainer_epochs", type=int, default=None, help="vs-trainer: shorten the run")
    ap.add_argument("--runs", type=int, default=3, help="vs-trainer: rounds (trainer run, then monitor run)")
    ap.add_argument("--loss", default="ce", choices=["ce", "mse"], help="vs-trainer: which demo config")
    ap.add_argument("--dataloader", action="store_true", help="vs-trainer: the monitor reads DataLoaders")
    args = ap.parse_args()
    if not args.vs_trainer:
        floor_main(args)
        return
    print(kernels_line())
    figures: dict[str, dict[str, list[float]]] = {"trainer": {}, "monitor": {}}
    for i in range(args.runs):
        for who in ("trainer", "monitor"):
            if who == "trainer":
                res = overhead(args.trainer_epochs, args.loss)
            else:
                res = monitor_overhead(args.trainer_epochs, args.loss, args.dataloader)
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
