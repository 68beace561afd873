"""In-process A/B of one demo measurement (train + test split) between the working tree and a git commit.

The base commit's ``src/nclab`` is extracted into a temporary folder as a package named ``nclab_base``; both
versions then measure the same trained demo model alternately (A B A B ...), so that a shared machine's drifting
speed affects both sides alike; prints the median times and the paired median ratio new/base, how many of the
measurement's rows are bit-identical, then the same timings for ``collapse_report`` on each layer (with the
largest relative difference of the reported values).

    .venv/bin/python benchmarks/ab_measure.py [--base COMMIT] [--rounds N]
"""

from __future__ import annotations

import argparse
import importlib
import io
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from threadpoolctl import threadpool_limits

from _native import kernels_line, native_blas

ROOT = Path(__file__).resolve().parents[1]


def extract_base(commit: str, dest: Path) -> None:
    """``src/nclab`` of ``commit`` as package ``nclab_base`` under ``dest``."""
    tar = subprocess.run(["git", "archive", commit, "src/nclab"], cwd=ROOT, check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(tar)) as tf:
        tf.extractall(dest, filter="data")
    pkg = dest / "nclab_base"
    (dest / "src" / "nclab").rename(pkg)
    pattern = re.compile(r"\b(from|import) nclab\b")
    for f in pkg.rglob("*.py"):
        f.write_text(pattern.sub(r"\1 nclab_base", f.read_text()))


def measurer(pkg: str, loss_fn: Any) -> Any:
    """``run(model, x, y, reference=None) -> SplitMeasurement`` of one measurement of the digits model (K = 10)
    by the package ``pkg`` (``nclab`` or ``nclab_base``), through whichever API it has: ``nclab.measure`` (a
    plan value), or ``nclab.train.measure`` (keywords) before the engine moved there."""
    try:
        mod = importlib.import_module(f"{pkg}.measure")
    except ModuleNotFoundError:
        mod = None
    if mod is not None and hasattr(mod, "MeasurePlan"):

        def run(model: Any, x: Any, y: Any, reference: Any = None) -> Any:
            plan = mod.MeasurePlan.of(model, 10, penultimate=model.penultimate_name, loss_fn=loss_fn)
            return mod.measure_split(model, (x, y), plan, reference=reference)

        return run
    old = importlib.import_module(f"{pkg}.train.measure")

    def run_old(model: Any, x: Any, y: Any, reference: Any = None) -> Any:
        return old.measure_split(
            model, x, y, 10, penultimate=model.penultimate_name, loss_fn=loss_fn, reference=reference
        )

    return run_old


def main() -> None:
    native_blas()
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", default="HEAD", help="commit to compare the working tree against (default HEAD)")
    ap.add_argument("--rounds", type=int, default=60)
    args = ap.parse_args()
    print(kernels_line())
    tmp = tempfile.TemporaryDirectory()
    extract_base(args.base, Path(tmp.name))
    sys.path.insert(0, tmp.name)
    old_metrics = importlib.import_module("nclab_base.metrics")
    import nclab.metrics as new_metrics
    from nclab.data import load
    from nclab.nets import build_model

    torch.set_num_threads(1)
    threadpool_limits(1, user_api="blas")
    tr, te = load("digits", "train", per_class=130), load("digits", "test", per_class=43)
    torch.manual_seed(0)
    model = build_model("mlp", tr.input_shape, 10, widths=[128, 128, 128], batchnorm=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-3)
    for _ in range(30):  # the demo recipe, 30 epochs: past the noisy start, features not yet collapsed
        perm = torch.randperm(len(tr.y))
        for i in range(0, len(perm), 128):
            idx = perm[i : i + 128]
            loss = torch.nn.functional.cross_entropy(model(tr.x[idx]), tr.y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()

    def loss_fn(out: torch.Tensor, y: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.cross_entropy(out, y)

    old, new = measurer("nclab_base", loss_fn), measurer("nclab", loss_fn)

    def measure(run: Any) -> tuple[float, Any, Any]:
        t0 = time.perf_counter()
        r = run(model, tr.x, tr.y)
        t = run(model, te.x, te.y, reference=r.stats)
        return time.perf_counter() - t0, r, t

    a, b = [], []
    for _ in range(args.rounds):
        a.append(measure(old)[0])
        b.append(measure(new)[0])
    ratios = sorted(y / x for x, y in zip(a, b, strict=True))
    q = len(ratios) // 4
    print(
        f"measurement (train + test): base {1e3 * statistics.median(a):.2f} ms, new {1e3 * statistics.median(b):.2f}"
        f" ms; new/base paired median {statistics.median(ratios):.3f} (quartiles {ratios[q]:.3f}-{ratios[-q - 1]:.3f})"
    )
    (_, r_old, t_old), (_, r_new, t_new) = measure(old), measure(new)
    rows_old, rows_new = r_old.rows + t_old.rows, r_new.rows + t_new.rows
    same = sum(
        ro[:2] == rn[:2] and (ro[2] == rn[2] or (ro[2] != ro[2] and rn[2] != rn[2]))  # NaN == NaN here
        for ro, rn in zip(rows_old, rows_new, strict=False)
    )
    print(f"rows (train + test): {same} of {len(rows_old)} base / {len(rows_new)} new bit-identical, in the same order")
    W = model.head.weight.detach().double().numpy()
    bias = model.head.bias.detach().double().numpy()
    for layer in r_new.stats:
        pen = layer == model.penultimate_name
        kw = {"W": W, "b": bias} if pen else {}
        ro = old_metrics.collapse_report(r_old.stats[layer], **kw)
        rn = new_metrics.collapse_report(r_new.stats[layer], **kw)
        worst = max(abs(ro[k] - rn[k]) / max(abs(ro[k]), 1e-300) for k in ro)
        ta, tb = [], []
        for _ in range(30):
            for mod, st, out in ((old_metrics, r_old, ta), (new_metrics, r_new, tb)):
                t0 = time.perf_counter()
                for _ in range(10):
                    mod.collapse_report(st.stats[layer], **kw)
                out.append((time.perf_counter() - t0) / 10)
        rat = statistics.median(y / x for x, y in zip(ta, tb, strict=True))
        print(
            f"collapse_report {layer} ({r_new.stats[layer].track}): base {1e3 * statistics.median(ta):.3f} ms, "
            f"new {1e3 * statistics.median(tb):.3f} ms, ratio {rat:.3f}; largest relative difference {worst:.1e}"
        )
    tmp.cleanup()


if __name__ == "__main__":
    main()
