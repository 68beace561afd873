"""Sweep scheduling overhead per trial: the same trials as a plain loop of ``train()`` calls, as
``run_sweep(local=True)`` and as ``run_sweep()`` on a local Ray instance (1 CPU, so the trials run one after
another there too and the difference is scheduling, not parallelism; and with 2 CPUs / 2 workers for the wall
time). Each trial is an ordinary run directory (the tiny digits MLP); the overhead per trial is
``(T_mode - T_plain) / n_trials``, and Ray's own start and shutdown (``ray.init`` + ``ray.shutdown`` with no
trial) is reported apart. ``--demo`` also times one CPU-scale trial: the ``nclab demo`` CE config (200 epochs).

    .venv/bin/python benchmarks/bench_sweep.py [--trials 4] [--epochs 5] [--demo]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import yaml

from _native import kernels_line, native_blas

TINY = {
    "name": "bench",
    "data": {"name": "digits", "per_class": 40, "test_per_class": 10},
    "model": {"name": "mlp", "options": {"widths": [32, 32]}},
    "train": {"batch_size": 32, "threads": 1},
    "measure": {"num_log": 4},
    "report": False,
}


def _files(tmp: Path, trials: int, epochs: int) -> Path:
    (tmp / "base.yaml").write_text(yaml.safe_dump({**TINY, "train": {**TINY["train"], "epochs": epochs}}))
    (tmp / "sweep.yaml").write_text(
        yaml.safe_dump({"base": "base.yaml", "seeds": list(range(trials)), "resources": {"cpus_per_trial": 1}})
    )
    return tmp / "sweep.yaml"


def plain(sweep: Path, out: Path) -> float:
    from nclab.train import train
    from nclab.train.sweep import expand_trials, load_sweep

    spec, base, _ = load_sweep(sweep)
    t0 = time.perf_counter()
    for t in expand_trials(spec, base):
        train(t.config, out / t.trial_id, progress=False)
    return time.perf_counter() - t0


def swept(sweep: Path, out: Path, **kw) -> float:
    from nclab.train.sweep import run_sweep

    t0 = time.perf_counter()
    result = run_sweep(sweep, out, **kw)
    assert not result.failed, result.rows
    return time.perf_counter() - t0


def ray_start_stop(num_cpus: int) -> float:
    import ray

    t0 = time.perf_counter()
    ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False, configure_logging=False)
    ray.shutdown()
    return time.perf_counter() - t0


def demo_trial() -> float:
    from nclab.experiments.demo import demo_config
    from nclab.train import resolve_config, train

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        train(resolve_config({**demo_config("ce"), "report": False}), Path(tmp) / "ce", progress=False)
        return time.perf_counter() - t0


def main() -> None:
    native_blas()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=4)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--demo", action="store_true", help="also time one demo CE run (200 epochs)")
    args = ap.parse_args()
    print(kernels_line())
    n = args.trials
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        sweep = _files(tmp, n, args.epochs)
        plain(sweep, tmp / "warmup")  # imports, dataset cache, first-call costs out of the timed runs
        t_plain = plain(sweep, tmp / "plain")
        t_local = swept(sweep, tmp / "local", local=True)
        t_ray1 = swept(sweep, tmp / "ray1", num_cpus=1)
        t_ray2 = swept(sweep, tmp / "ray2", num_cpus=2)
        t_start = ray_start_stop(1)
    print(f"{n} trials of the tiny digits MLP, {args.epochs} epochs each (seconds, wall clock)")
    print(f"plain loop of train()            {t_plain:7.2f}  ({t_plain / n:.2f} s per trial)")
    print(f"run_sweep(local=True)            {t_local:7.2f}  overhead {(t_local - t_plain) / n:+.3f} s per trial")
    print(f"run_sweep() Ray, 1 CPU           {t_ray1:7.2f}  overhead {(t_ray1 - t_plain) / n:+.3f} s per trial")
    print(f"  of which ray.init + shutdown   {t_start:7.2f}  (once per sweep)")
    print(f"  per trial without start/stop   {(t_ray1 - t_start - t_plain) / n:+.3f} s")
    print(f"run_sweep() Ray, 2 CPUs          {t_ray2:7.2f}  ({t_ray2 / t_ray1:.2f}x the 1-CPU Ray sweep)")
    if args.demo:
        print(f"one demo CE run (200 epochs)     {demo_trial():7.2f}")


if __name__ == "__main__":
    main()
