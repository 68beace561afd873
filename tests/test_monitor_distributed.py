"""CollapseMonitor under torch.distributed (gloo, 2 processes): each rank measures its shard; the reduced rows
equal one process measuring everything (1e-12 relative; counts exactly), and rank 0 alone writes the table."""

from __future__ import annotations

import json
import os

import pytest
import torch
import torch.multiprocessing as mp
from torch import nn

from nclab.io.run_table import read_metrics
from nclab.monitor import CollapseMonitor
from tests._distributed import free_port, gloo_group

pytestmark = pytest.mark.distributed

K, D = 5, 6


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(D, 12), nn.Tanh(), nn.Linear(12, 8), nn.ReLU(), nn.Linear(8, K))


def _data():
    g = torch.Generator().manual_seed(5)
    y = torch.arange(150) % K
    y[75:][y[75:] == 4] = 1  # class 4 only on rank 0's shard: the class mix differs between ranks
    x = 3.0 * torch.randn(K, D, generator=g)[y] + torch.randn(150, D, generator=g)
    xt = torch.randn(60, D, generator=g) + 3.0 * torch.randn(K, D, generator=g)[torch.arange(60) % K]
    return x, y, xt, torch.arange(60) % K


def _worker(rank, world, port, out_dir):
    torch.set_num_threads(1)
    with gloo_group(rank, world, port):
        monitor = CollapseMonitor(_model(), K=K, layers=["1", "penultimate"], out=out_dir)
        half = slice(0, 75) if rank == 0 else slice(75, None)
        test_half = slice(0, 30) if rank == 0 else slice(30, None)
        x, y, xt, yt = _data()
        train = monitor.measure([(x[half][i : i + 20], y[half][i : i + 20]) for i in range(0, 75, 20)], epoch=1)
        test = monitor.measure([(xt[test_half], yt[test_half])], split="test", epoch=1)
        rows = {f"{r.split}/{r.layer}/{r.metric}": r.value for r in train.rows + test.rows}
        counts = train.stats["penultimate"].counts.tolist()
        with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as fh:
            json.dump({"rows": rows, "counts": counts}, fh)


def test_reduced_rows_equal_a_single_process_measurement(tmp_path):
    mp.spawn(_worker, args=(2, free_port(), str(tmp_path)), nprocs=2, join=True)
    single = CollapseMonitor(_model(), K=K, layers=["1", "penultimate"])
    x, y, xt, yt = _data()
    train = single.measure([(x[i : i + 20], y[i : i + 20]) for i in range(0, 150, 20)], epoch=1)
    test = single.measure([(xt, yt)], split="test", epoch=1)
    ref = {f"{r.split}/{r.layer}/{r.metric}": r.value for r in train.rows + test.rows}
    assert "test/penultimate/ncc_mismatch" in ref and "train/output/error" in ref
    for rank in range(2):
        with open(tmp_path / f"rank{rank}.json") as fh:
            got = json.load(fh)
        assert got["counts"] == train.stats["penultimate"].counts.tolist()
        assert set(got["rows"]) == set(ref)
        for key, v in ref.items():
            assert got["rows"][key] == pytest.approx(v, rel=1e-12, abs=1e-13), (rank, key)
    table = read_metrics(tmp_path)  # written by rank 0 alone: one copy of each row
    assert len(table) == len(ref)
