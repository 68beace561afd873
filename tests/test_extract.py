"""Feature export: extract_features streams to memory-mapped .npy files that ``nclab measure`` reads back to the
monitor's numbers; ``nclab extract`` on a training run directory."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from torch import nn
from typer.testing import CliRunner

import nclab
from nclab.cli import app
from nclab.io.npy_stream import NpyAppender

runner = CliRunner()
K, D = 3, 5


def _net() -> nn.Module:
    torch.manual_seed(2)
    return nn.Sequential(nn.Linear(D, 9), nn.ReLU(), nn.Linear(9, 6), nn.Tanh(), nn.Linear(6, K))


def _data():
    g = torch.Generator().manual_seed(4)
    y = torch.arange(70) % K
    return 2.0 * torch.randn(K, D, generator=g)[y] + torch.randn(70, D, generator=g), y


def test_npy_appender_round_trip_and_shape_checks(tmp_path):
    rows = np.arange(12.0).reshape(4, 3)
    with NpyAppender(tmp_path / "a.npy", np.float64) as w:
        w.append(rows[:1])
        w.append(rows[1:])
        with pytest.raises(ValueError, match="columns"):
            w.append(np.zeros((2, 4)))
    np.testing.assert_array_equal(np.load(tmp_path / "a.npy", mmap_mode="r"), rows)
    with NpyAppender(tmp_path / "empty.npy", np.float32):
        pass
    assert np.load(tmp_path / "empty.npy").shape == (0,)


def test_extracted_features_measure_to_the_monitors_numbers(tmp_path):
    net, (x, y) = _net(), _data()
    batches = ((x[i : i + 16], y[i : i + 16]) for i in range(0, 70, 16))  # a generator: one pass only
    paths = nclab.extract_features(net, batches, ["1", "penultimate"], out=tmp_path, num_classes=K)
    assert set(paths) == {"1", "penultimate", "labels", "W", "b"}
    H = np.load(paths["penultimate"], mmap_mode="r")
    assert isinstance(H, np.memmap) and H.shape == (70, 6) and H.dtype == np.float32
    with torch.no_grad():
        np.testing.assert_array_equal(H, net[3](net[2](net[1](net[0](x)))).numpy())
    np.testing.assert_array_equal(np.load(paths["labels"]), y.numpy())
    np.testing.assert_array_equal(np.load(paths["W"]), net[4].weight.detach().double().numpy())
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["layers"]["1"] == [70, 9] and manifest["classifier"] == "4"

    files = [str(paths["penultimate"]), str(paths["labels"]), "-w", str(paths["W"]), "-b", str(paths["b"])]
    res = runner.invoke(app, ["measure", *files, "-f", "json"])
    assert res.exit_code == 0, res.output
    cli = json.loads(res.stdout)
    # float32 on disk, float64 statistics either way: the monitor's numbers to float32 rounding
    ref = nclab.CollapseMonitor(_net(), K).measure((x, y)).reports["penultimate"]
    for met in ("nc1", "self_duality", "ncc_mismatch", "trace_ratio"):
        assert cli[met] == pytest.approx(ref[met], rel=1e-6), met


def test_safetensors_export_holds_the_npy_arrays_and_measures_the_same(tmp_path):
    pytest.importorskip("safetensors", reason="reading .safetensors needs safetensors (pip install nclab[io])")
    from safetensors.numpy import load_file

    net, (x, y) = _net(), _data()
    batches = [(x[i : i + 16], y[i : i + 16]) for i in range(0, 70, 16)]
    npy = nclab.extract_features(net, batches, ["1", "penultimate"], out=tmp_path / "npy", num_classes=K)
    st = nclab.extract_features(
        net, batches, ["1", "penultimate"], out=tmp_path / "st", num_classes=K, format="safetensors"
    )
    target = tmp_path / "st" / "features.safetensors"
    assert set(st) == set(npy) and set(st.values()) == {target}
    assert sorted(p.name for p in (tmp_path / "st").iterdir()) == ["features.safetensors", "manifest.json"]
    tensors = load_file(str(target))
    for name, path in npy.items():
        ref = np.load(path)
        assert tensors[name].dtype == ref.dtype and tensors[name].shape == ref.shape
        np.testing.assert_array_equal(tensors[name], ref)

    def measure(paths: dict, spec) -> dict:
        files = [spec(paths, "penultimate"), spec(paths, "labels"), "-w", spec(paths, "W"), "-b", spec(paths, "b")]
        res = runner.invoke(app, ["measure", *files, "-f", "json"])
        assert res.exit_code == 0, res.output
        return json.loads(res.stdout)

    from_npy = measure(npy, lambda p, k: str(p[k]))
    from_st = measure(st, lambda p, k: f"{p[k]}:{k}")
    assert from_st.keys() == from_npy.keys()
    for key, v in from_npy.items():
        assert from_st[key] == v or (np.isnan(v) and np.isnan(from_st[key])), key
    with pytest.raises(ValueError, match="format"):
        nclab.extract_features(net, batches, out=tmp_path / "x", num_classes=K, format="hdf5")


def test_extract_command_on_a_run_directory(tmp_path):
    from nclab.data import load
    from nclab.train import resolve_config, train

    cfg = {
        "data": {"name": "digits", "per_class": 10, "test_per_class": 5},
        "model": {"name": "mlp", "options": {"widths": [16, 12]}},
        "train": {"epochs": 1, "batch_size": 50, "threads": 1},
        "measure": {"epochs": [1], "splits": ["train"]},
        "report": False,
    }
    run = train(resolve_config(cfg), tmp_path / "run", progress=False)
    out = tmp_path / "feats"
    res = runner.invoke(app, ["extract", str(run.out), "digits", "--split", "test", "--per-class", "4", "-o", str(out)])
    assert res.exit_code == 0, res.output
    test = load("digits", "test", per_class=4)
    pen = json.loads((out / "manifest.json").read_text())["penultimate"]
    assert pen == run.penultimate  # an nclab network's own penultimate layer names the file
    H = np.load(out / f"{pen}.npy", mmap_mode="r")
    assert H.shape == (40, 12)
    np.testing.assert_array_equal(np.load(out / "labels.npy"), test.y.numpy())
    args = ["extract", str(run.out), "digits", "--split", "test", "--per-class", "4", "-o", str(out / "st")]
    res = runner.invoke(app, [*args, "--file-format", "safetensors"])
    assert res.exit_code == 0, res.output
    assert (out / "st" / "features.safetensors").stat().st_size > H.nbytes and not list((out / "st").glob("*.npy"))
    bad = runner.invoke(app, ["extract", str(tmp_path / "nowhere.pt"), "digits", "-o", str(out)])
    assert bad.exit_code == 2 and "error" in bad.output
