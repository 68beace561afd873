"""The statistics' float32 compute path is reachable wherever a collapse is measured: the monitor, the trainer's
config and ``nclab measure`` (it used to be reachable only by building a ClassStats by hand)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn
from typer.testing import CliRunner

from nclab import CollapseMonitor
from nclab.cli import app


def _data():
    g = torch.Generator().manual_seed(0)
    y = torch.arange(300) % 3
    x = 3.0 * torch.randn(3, 6, generator=g)[y] + torch.randn(300, 6, generator=g)
    return x, y


def _net():
    torch.manual_seed(1)
    return nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_monitor_measures_with_the_compute_dtype_it_is_given(dtype):
    x, y = _data()
    mon = CollapseMonitor(_net(), K=3, layers=["1", "penultimate"], compute_dtype=dtype)
    res = mon.measure([(x, y)], epoch=0)
    assert {s.compute_dtype for s in res.stats.values()} == {dtype}
    ref = CollapseMonitor(_net(), K=3, layers=["1", "penultimate"]).measure([(x, y)], epoch=0)
    got = {(r.layer, r.metric): r.value for r in res.rows}
    for r in ref.rows:  # the same numbers to float32 accuracy
        assert got[(r.layer, r.metric)] == pytest.approx(r.value, rel=1e-4, abs=1e-6), (r.layer, r.metric)
    if dtype == "float32":
        assert mon.settings["compute_dtype"] == "float32"
    with pytest.raises(ValueError, match="compute_dtype"):
        CollapseMonitor(_net(), K=3, compute_dtype="float16")


def test_the_trainer_config_takes_the_compute_dtype():
    from nclab.train import resolve_config

    cfg = resolve_config({"measure": {"compute_dtype": "float32"}})
    assert cfg.measure.compute_dtype == "float32"
    assert "compute_dtype" not in resolve_config({}).to_dict()["measure"]  # old configs stay as they were
    with pytest.raises(ValueError, match="compute_dtype"):
        resolve_config({"measure": {"compute_dtype": "float16"}})


def test_nclab_measure_takes_compute_dtype(tmp_path):
    x, y = _data()
    np.save(tmp_path / "h.npy", x.numpy())
    np.save(tmp_path / "y.npy", y.numpy())
    runner = CliRunner()
    args = ["measure", str(tmp_path / "h.npy"), str(tmp_path / "y.npy"), "-f", "json"]
    import json

    f64 = json.loads(runner.invoke(app, args).output)
    res = runner.invoke(app, [*args, "--compute-dtype", "float32"])
    assert res.exit_code == 0, res.output
    f32 = json.loads(res.output)
    assert f32["nc1"] == pytest.approx(f64["nc1"], rel=1e-4)
    bad = runner.invoke(app, [*args, "--compute-dtype", "float16"])
    assert bad.exit_code == 2 and "compute_dtype" in bad.output
