"""Start-up cost of the listing commands a newcomer runs first, as whole processes.

    python benchmarks/bench_cli.py [--runs 5]

Prints, per command, the median and range of wall and CPU seconds over ``--runs`` runs after one warm-up, and the
load average. Target: ``nclab experiment list`` <= 2 s wall.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time

COMMANDS = {
    "nclab experiment list": ["experiment", "list"],
    "nclab experiment list -f json": ["experiment", "list", "-f", "json"],
    "nclab --version": ["--version"],
}


def _one(argv: list[str]) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    exe = shutil.which("nclab") or os.path.join(os.path.dirname(sys.executable), "nclab")
    print(f"load average {os.getloadavg()[0]:.1f}; {args.runs} runs after one warm-up")
    for name, tail in COMMANDS.items():
        _one([exe, *tail])
        runs = [_one([exe, *tail]) for _ in range(args.runs)]
        wall, cpu = [r[0] for r in runs], [r[1] for r in runs]
        print(
            f"{name:32s} wall {statistics.median(wall):.2f} s ({min(wall):.2f}-{max(wall):.2f}), "
            f"cpu {statistics.median(cpu):.2f} s"
        )


if __name__ == "__main__":
    main()
