"""Rows 40, 86 and 142 of the second reliability probe: the NCC pass at many classes.

With K = 20,000 the NCC pass grew to 4.8-5.2 GB (the (B, 2K) score block, its temporaries, and a kept (B, K) logit
matrix) and died in the allocator, through the monitor, the API and ``nclab measure -w``. Now its O(K d) state is
estimated and refused upfront when it cannot fit (``AllocationTooLarge`` naming K and d), and the scores are
formed block by block within a working budget, with the same counts. The tests use small K and the public
``NCLAB_MAX_BYTES`` cap (or a patched budget / available memory) instead of gigabytes; working sets are checked
with tracemalloc (the score blocks are numpy arrays) and by the estimate's arithmetic.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tracemalloc
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

import nclab.memory
from nclab import CollapseMonitor
from nclab.cli import app
from nclab.memory import AllocationTooLarge
from nclab.stats import ClassStats, NCCAccumulator

MiB = 1 << 20


def _classes(K: int, n: int, d: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``n`` float32 samples per class around K random means (shuffled), and a random classifier ``(W, b)``."""
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(K), n)
    rng.shuffle(y)
    H = (rng.normal(size=(K, d))[y] + 0.8 * rng.normal(size=(K * n, d))).astype(np.float32)
    return H, y, rng.normal(size=(K, d)), rng.normal(size=K)


def _traced_peak(fn) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


# ---------------------------------------------------------------------------------------------- row 142 (API)
def test_p2_row_142_ncc_scores_in_blocks_within_the_budget_with_the_same_counts(monkeypatch):
    """One update of 3,000 rows against K = 1,000 classes with a classifier: before, one (3000, 2000) float64 score
    block (48 MB) plus as much again in temporaries and kept logits; under a 2 MiB cap the state and one block of
    score rows stay within the cap (by the estimate, and as traced), and every count is that of the unbounded pass."""
    K, d = 1000, 16
    H, y, W, b = _classes(K, 3, d)
    stats = ClassStats.from_arrays(H, y, K=K, track="light")
    ref = NCCAccumulator(stats, W=W, b=b).update(H, y)
    monkeypatch.setenv("NCLAB_MAX_BYTES", "2M")
    acc = NCCAccumulator(stats, W=W, b=b)
    fixed = acc.memory_bytes()
    assert fixed == 8 * K * d * 3 + 16 * (2 * K) * d + 64 * K  # means, centred means, W; (d, 2K) twice; counters
    assert acc.memory_bytes(len(y)) <= 2 * MiB
    acc.update(H, y)
    # the block of (rows, 2K) scores is the only large numpy allocation of the update; traced in a fresh
    # interpreter, where no other thread allocates meanwhile (pytest-xdist's message thread added ~150 kB here)
    peak, budget = _peak_of_update_in_subprocess(K, 3, d)
    assert peak <= budget + 64 * 1024
    assert peak < 2 * MiB
    for key, counts in ref.per_class().items():
        np.testing.assert_array_equal(acc.per_class()[key], counts, err_msg=key)
    assert acc.compute()["ncc_accuracy"] == ref.compute()["ncc_accuracy"]
    np.testing.assert_array_equal(acc.ncc_predict(H).numpy(), ref.ncc_predict(H).numpy())


_PEAK_OF_UPDATE = """
import sys, tracemalloc
import nclab.memory
from nclab.stats import ClassStats, NCCAccumulator
from tests.test_probe2_stats import _classes
K, n, d = map(int, sys.argv[1:])
H, y, W, b = _classes(K, n, d)
acc = NCCAccumulator(ClassStats.from_arrays(H, y, K=K, track="light"), W=W, b=b)
tracemalloc.start()
acc.update(H, y)
print(tracemalloc.get_traced_memory()[1], nclab.memory.work_budget(acc.memory_bytes()))
"""


def _peak_of_update_in_subprocess(K: int, n: int, d: int) -> tuple[int, int]:
    """Traced peak of one ``NCCAccumulator.update`` (with a classifier) under ``NCLAB_MAX_BYTES=2M``, and the
    working budget, measured in a fresh interpreter."""
    env = {**os.environ, "NCLAB_MAX_BYTES": "2M", "OMP_NUM_THREADS": "1"}
    root = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join([root, env.get("PYTHONPATH", "")])
    out = subprocess.run(
        [sys.executable, "-c", _PEAK_OF_UPDATE, str(K), str(n), str(d)], env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    peak, budget = map(int, out.stdout.split())
    return peak, budget


@pytest.mark.parametrize("index", ["exact", "hnsw"])
def test_p2_row_142_every_block_size_gives_the_same_counts(monkeypatch, index):
    """Blocks of 1, 7 and 1,000 rows (patched budgets) and the whole batch give identical counts and predictions:
    each row is scored and decided on its own, without and with a classifier and bias."""
    if index == "hnsw":
        pytest.importorskip("faiss")
    K, d = 60, 5
    H, y, W, b = _classes(K, 8, d, seed=3)
    stats = ClassStats.from_arrays(H, y, K=K, track="light")
    for kw in ({}, {"W": W}, {"W": W, "b": b}):
        ref = NCCAccumulator(stats, index=index, **kw).update(H, y)
        for rows in (1, 7, 1000):
            row_bytes = ref._row_bytes  # the per-row estimate of this configuration
            monkeypatch.setattr(nclab.memory, "WORK_BLOCK_BYTES", rows * row_bytes)
            acc = NCCAccumulator(stats, index=index, **kw)
            assert acc._score_rows(len(y)) == min(rows, len(y))
            acc.update(H, y)
            for key, counts in ref.per_class().items():
                np.testing.assert_array_equal(acc.per_class()[key], counts, err_msg=f"{kw.keys()} {rows} {key}")
            monkeypatch.undo()


def test_p2_row_142_ncc_state_that_cannot_fit_is_refused_upfront(monkeypatch):
    """The probe's K = 20,000, d = 256 with a classifier: 275 MiB of O(K d) state. With less memory available
    it is refused at construction, naming K, d and the estimate (before: 5.2 GB, then a MemoryError in _matmul);
    the same under a cap. The arrays passed in are zeros (not committed memory)."""
    K, d = 20000, 256
    means, W = np.zeros((K, d)), np.zeros((K, d))
    monkeypatch.setattr(nclab.memory, "available_bytes", lambda: 200 * MiB)
    with pytest.raises(AllocationTooLarge) as err:
        NCCAccumulator.from_means(means, W=W)
    msg = str(err.value)
    assert msg.startswith(f"NCCAccumulator(K={K}, d={d}, classifier=True, index='exact')")
    assert "would allocate about 275 MiB, more than the memory available now (200 MiB)" in msg
    assert "use fewer classes (check the labels: is K right?) or reduce d" in msg
    assert err.value.nbytes == 8 * K * d * 3 + 16 * (2 * K) * d + 64 * K + 8 * (2 * K + d) + 64
    monkeypatch.undo()
    monkeypatch.setenv("NCLAB_MAX_BYTES", "100M")
    with pytest.raises(AllocationTooLarge, match=r"more than the cap NCLAB_MAX_BYTES/max_bytes \(100 MiB\)"):
        NCCAccumulator.from_means(means)


# ---------------------------------------------------------------------------------------------- row 40 (monitor)
def _monitor_peak(K: int, N: int) -> tuple[int, dict[str, float]]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, K))
    x, y = torch.randn(N, 8), torch.arange(N) % K
    monitor = CollapseMonitor(model, K)
    out: dict[str, dict[str, float]] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # K > d + 1: the ETF targets are unattainable (a warning per metric)
        peak = _traced_peak(lambda: out.update(monitor.measure((x, y)).reports))
    return peak, out["penultimate"]


def test_p2_row_040_monitor_ncc_pass_is_bounded_whatever_the_split_size(monkeypatch):
    """Through CollapseMonitor (public API): K = 200 classes, the whole split's cached features scored in one NCC
    update. Before, the score block grew with the split (12,000 rows: 37 MB traced, 24,000: 74 MB, plus the torch
    temporaries: 4.8 GB at the probe's K = 20,000). Under a 4 MiB cap the peak is the same for 6,000 and 24,000
    rows, and the NCC metrics are measured."""
    monkeypatch.setenv("NCLAB_MAX_BYTES", "4M")
    small, rep = _monitor_peak(200, 6000)
    large, rep_large = _monitor_peak(200, 24000)
    assert large - small < MiB and large < 16 * MiB
    for report in (rep, rep_large):
        assert 0.0 <= report["ncc_accuracy"] <= 1.0 and "ncc_mismatch" in report and "classifier_accuracy" in report


# ---------------------------------------------------------------------------------------------- row 86 (CLI)
def _measure_files(tmp_path, K: int, n: int, d: int) -> list[str]:
    H, y, W, b = _classes(K, n, d, seed=1)
    for name, arr in (("h", H), ("y", y), ("w", W), ("b", b)):
        np.save(tmp_path / f"{name}.npy", arr)
    return ["measure", str(tmp_path / "h.npy"), str(tmp_path / "y.npy"), "-w", str(tmp_path / "w.npy")]


def test_p2_row_086_measure_with_a_classifier_scores_within_the_cap(tmp_path, monkeypatch):
    """``nclab measure -w W.npy`` with K = 200 and 12,000 rows (batches of 8,192): before, each batch's scores took
    (8192, 400) float64 = 26 MB at once (at K = 20,000: 1.3 GB, then rc 1 with an allocator traceback); under a
    4 MiB cap the whole command peaks below 16 MiB traced and reports the NCC metrics."""
    args = _measure_files(tmp_path, 200, 60, 16)
    monkeypatch.setenv("NCLAB_MAX_BYTES", "4M")
    runner = CliRunner()
    holder = {}
    peak = _traced_peak(lambda: holder.update(res=runner.invoke(app, [*args, "--format", "json"])))
    res = holder["res"]
    assert res.exit_code == 0, res.output
    assert peak < 16 * MiB
    assert '"ncc_mismatch"' in res.stdout and '"classifier_accuracy"' in res.stdout


def test_p2_row_086_measure_refuses_an_ncc_state_that_cannot_fit(tmp_path, monkeypatch):
    """Under a cap that holds the class statistics (77 KiB) but not the NCC pass's O(K d) arrays (191 KiB), the
    command exits 2 with one error paragraph naming K, d and the estimate, no traceback."""
    args = _measure_files(tmp_path, 200, 2, 16)
    monkeypatch.setenv("NCLAB_MAX_BYTES", "128K")
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 2, res.output
    assert "error: NCCAccumulator(K=200, d=16, classifier=True, index='exact')" in res.output
    assert "would allocate about 191 KiB, more than the cap NCLAB_MAX_BYTES/max_bytes (128 KiB)" in res.output
    assert "Traceback" not in res.output


def test_p2_row_086_classifier_accuracy_on_means_tiles_its_logits():
    """The next allocation of the same command after the NCC pass: ``classifier_accuracy_on_means`` formed the K x K
    logits twice (6.4 GB at K = 20,000). Now in row tiles of 32 MB: at K = 3,000 (two K x K copies: 144 MB) the
    traced peak stays under 48 MiB, and the value is the brute-force one."""
    from nclab.metrics import classifier_accuracy_on_means

    rng = np.random.default_rng(2)
    K, d = 3000, 8
    M, W, b = rng.normal(size=(K, d)), rng.normal(size=(K, d)), rng.normal(size=K)
    W[::3] = 10 * M[::3]  # some classes see their own mean best
    got: dict[str, float] = {}
    peak = _traced_peak(lambda: got.update(v=classifier_accuracy_on_means(M, W=W, b=b)))
    assert peak < 48 * MiB
    assert got["v"] == np.mean(np.argmax(M @ W.T + b, axis=1) == np.arange(K))
    assert 0.0 < got["v"] < 1.0
