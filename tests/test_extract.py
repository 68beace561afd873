"""Feature export: extract_features streams to memory-mapped .npy files that ``nclab measure`` reads back to the
monitor's numbers; ``nclab extract`` on a training run directory."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

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
    paths = nclab.extract_features(net, batches, ["1", "penultimate"], out=tmp_path, K=K)
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
    npy = nclab.extract_features(net, batches, ["1", "penultimate"], out=tmp_path / "npy", K=K)
    st = nclab.extract_features(net, batches, ["1", "penultimate"], out=tmp_path / "st", K=K, format="safetensors")
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
        nclab.extract_features(net, batches, out=tmp_path / "x", K=K, format="hdf5")


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


# ------------------------------------------------------------------------ all-or-nothing commit, manifest checks
def _extract(out, n=70, **kw) -> dict:
    net, (x, y) = _net(), _data()
    return nclab.extract_features(net, [(x[:n], y[:n])], ["1", "penultimate"], out=out, K=K, **kw)


def test_npy_appender_discards_its_file_on_an_error(tmp_path):
    target = tmp_path / "a.npy"
    with pytest.raises(RuntimeError, match="stop"), NpyAppender(target, np.float32) as w:
        w.append(np.ones((3, 2)))
        raise RuntimeError("stop")
    assert list(tmp_path.iterdir()) == []  # no truncated-but-valid file, no temporary file
    with NpyAppender(target, np.float32) as w:
        w.append(np.arange(6.0).reshape(3, 2))
    raw = target.read_bytes()
    assert w.data_offset == 256 and w.sha256 == hashlib.sha256(raw[256:]).hexdigest() and w.shape == (3, 2)


def test_manifest_records_each_file_and_readers_refuse_files_that_disagree(tmp_path):
    from nclab.io import CorruptFileError, load_array

    paths = _extract(tmp_path)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["format"] == "nclab-features" and manifest["num_samples"] == 70
    assert sorted(manifest["files"]) == ["1.npy", "W.npy", "b.npy", "labels.npy", "penultimate.npy"]
    for name, entry in manifest["files"].items():
        raw = (tmp_path / name).read_bytes()
        assert entry["bytes"] == len(raw) and entry["sha256"] == hashlib.sha256(raw[entry["data_offset"] :]).hexdigest()
    assert manifest["files"]["1.npy"]["arrays"] == {"1": {"dtype": "float32", "shape": [70, 9], "rows": 70}}

    # a valid .npy of 40 rows (128 + 960 bytes) in place of the 70 extracted (256 + 1680): refused
    np.save(paths["penultimate"], np.load(paths["penultimate"])[:40])
    with pytest.raises(CorruptFileError, match=r"holds 1088 bytes but .*manifest.json records 1936"):
        load_array(paths["penultimate"])
    # the manifest of nclab before the staged commit (shapes only) is checked too
    old = {k: manifest[k] for k in ("layers", "num_samples", "num_classes", "penultimate", "classifier")}
    (tmp_path / "manifest.json").write_text(json.dumps(old))
    with pytest.raises(CorruptFileError, match=r"shape \(40, 6\) but .* records \(70, 6\)"):
        load_array(paths["penultimate"])


def test_measure_verifies_checksums_on_request(tmp_path):
    paths = _extract(tmp_path)
    H = paths["penultimate"]
    with open(H, "r+b") as fh:  # one flipped bit in the data: size, shape and dtype still agree
        fh.seek(300)
        byte = fh.read(1)
        fh.seek(300)
        fh.write(bytes([byte[0] ^ 1]))
    args = ["measure", str(H), str(paths["labels"]), "-f", "json"]
    assert runner.invoke(app, args).exit_code == 0  # cheap checks only by default
    res = runner.invoke(app, [*args, "--verify-checksum"])
    assert res.exit_code == 2 and "penultimate.npy: checksum mismatch" in res.output, res.output
    res = runner.invoke(app, ["measure", str(paths["1"]), str(paths["labels"]), "-f", "json", "--verify-checksum"])
    assert res.exit_code == 0, res.output


def test_an_interrupted_commit_is_refused_by_readers_and_finished_by_the_next_extraction(tmp_path, monkeypatch):
    from nclab.io import load_array

    _extract(tmp_path, n=40)
    replace, moves = os.replace, []

    def crash_after_two(src, dst):
        if Path(dst).parent == tmp_path:  # a move of the commit, not a write into the staging folder
            if len(moves) == 2:
                raise KeyboardInterrupt  # as a kill: the commit stops between two renames
            moves.append(dst)
        replace(src, dst)

    monkeypatch.setattr(os, "replace", crash_after_two)
    with pytest.raises(KeyboardInterrupt):
        _extract(tmp_path, n=70, overwrite=True)
    monkeypatch.setattr(os, "replace", replace)
    assert not (tmp_path / "manifest.json").exists() and len(list(tmp_path.glob(".staging-*/COMMIT.json"))) == 1
    with pytest.raises(ValueError, match="in the middle of replacing one extraction by another"):
        load_array(tmp_path / "labels.npy")

    with pytest.warns(UserWarning, match="finished the commit of"):
        with pytest.raises(FileExistsError, match="70 samples"):  # the interrupted extraction, now complete
            _extract(tmp_path, n=10)
    assert not list(tmp_path.glob(".staging-*"))
    for name in ("1", "penultimate", "labels"):
        assert load_array(tmp_path / f"{name}.npy").shape[0] == 70


def test_safetensors_extraction_is_listed_and_checked(tmp_path):
    pytest.importorskip("safetensors")
    from nclab.io import load_array

    _extract(tmp_path, format="safetensors")
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    entry = manifest["files"]["features.safetensors"]
    assert sorted(entry["arrays"]) == ["1", "W", "b", "labels", "penultimate"]
    raw = (tmp_path / "features.safetensors").read_bytes()
    assert entry["sha256"] == hashlib.sha256(raw[entry["data_offset"] :]).hexdigest()
    H = load_array(f"{tmp_path / 'features.safetensors'}:penultimate")
    assert isinstance(H, np.memmap) and H.shape == (70, 6)
    res = runner.invoke(
        app,
        [
            "measure",
            f"{tmp_path}/features.safetensors:1",
            f"{tmp_path}/features.safetensors:labels",
            "--verify-checksum",
        ],
    )
    assert res.exit_code == 0, res.output


def test_the_output_folder_is_locked_while_an_extraction_writes_it(tmp_path):
    from nclab.train.rundir import RunDirBusyError, acquire_run_lock

    with acquire_run_lock(tmp_path):  # another writer holds the folder
        with pytest.raises(RunDirBusyError, match="in use by another nclab process"):
            _extract(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == []
    _extract(tmp_path)  # free again: the lock file is gone after the extraction
    assert not (tmp_path / "run.lock").exists() and (tmp_path / "manifest.json").is_file()


def test_temporary_files_of_older_killed_extractions_are_removed(tmp_path):
    # nclab before the staging folder wrote .NAME.XXXXXXXX.tmp beside the results; a kill -9 left them there
    for name in (".layer1.npy.k2j4x8qz.tmp", ".labels.npy.p0a9c3rt.tmp"):
        (tmp_path / name).write_bytes(b"\0" * 2**19)
    (tmp_path / "notes.txt").write_text("the user's own file")
    with pytest.warns(
        UserWarning, match=r"removed 2 temporary files \(1\.0 MB\) left by an extraction that was killed"
    ):
        _extract(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "1.npy",
        "W.npy",
        "b.npy",
        "labels.npy",
        "manifest.json",
        "notes.txt",
        "penultimate.npy",
    ]


# ------------------------------------------------------------------ extract of a run: its data, its file names, probe
def _tiny_run(tmp_path, data: dict, model: dict, seed: int = 3):
    from nclab.train import resolve_config, train

    cfg = {
        "seed": seed,
        "data": data,
        "model": model,
        "train": {"epochs": 1, "batch_size": 20, "threads": 1},
        "measure": {"epochs": [1], "splits": ["train"]},
        "report": False,
    }
    return train(resolve_config(cfg), tmp_path / "run", progress=False)


def _measured(run, metric: str) -> float:
    return next(r.value for r in run.rows if r.layer == run.penultimate and r.split == "train" and r.metric == metric)


def _extract_and_measure(run, tmp_path, monkeypatch, *args) -> dict:
    """``nclab extract RUN`` with its defaults (the files under runs/), then the `nclab measure` line it prints."""
    monkeypatch.chdir(tmp_path)
    res = runner.invoke(app, ["extract", str(run.out), *args])
    assert res.exit_code == 0, res.output
    line = next(ln for ln in res.stderr.splitlines() if ln.startswith("measure with: nclab measure "))
    measure = line.removeprefix("measure with: nclab ").split()
    for path in measure[1:]:
        assert path.startswith("-") or Path(path).is_file(), path  # every file the command names exists
    res = runner.invoke(app, [*measure, "-f", "json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_extract_of_a_run_uses_its_subset_and_seed_and_reproduces_its_numbers(tmp_path, monkeypatch):
    from nclab.data import load

    run = _tiny_run(tmp_path, {"name": "digits", "per_class": 10}, {"name": "mlp", "options": {"widths": [16, 12]}})
    got = _extract_and_measure(run, tmp_path, monkeypatch)  # no DATA, no --per-class: the run's own
    out = tmp_path / "runs" / "features" / "run-digits-train"
    labels = np.load(out / "labels.npy")
    np.testing.assert_array_equal(labels, load("digits", "train", per_class=10, seed=3).y.numpy())
    assert not np.array_equal(labels, load("digits", "train", per_class=10, seed=0).y.numpy())
    # the features the run measured at its last epoch: the same numbers, from the files
    for metric in ("nc1", "trace_ratio", "etf_gram_error", "ncc_mismatch"):
        assert got[metric] == pytest.approx(_measured(run, metric), rel=1e-6, abs=1e-12), metric
    assert (out / f"{run.penultimate}.npy").is_file() and run.penultimate == "layer2"


@pytest.mark.skipif(not Path("/usr/share/datasets/fashion-mnist").is_dir(), reason="Fashion-MNIST not installed")
def test_extract_of_a_padded_fashion_mnist_run(tmp_path, monkeypatch):
    """The shipped config's preprocessing (28 x 28 padded to 32 x 32): before, a size-mismatch traceback."""
    data = {"name": "fashion-mnist", "per_class": 4, "test_per_class": 2, "pad_to": 32}
    run = _tiny_run(tmp_path, data, {"name": "cnn", "options": {"channels": [4, 4], "hidden": 8}})
    got = _extract_and_measure(run, tmp_path, monkeypatch, "fashion-mnist", "-o", "feats")
    assert got["nc1"] == pytest.approx(_measured(run, "nc1"), rel=1e-6)
    assert json.loads((tmp_path / "feats" / "manifest.json").read_text())["layers"] == {"fc": [40, 8]}


def test_extract_help_names_the_files_it_writes():
    text = " ".join(runner.invoke(app, ["extract", "-h"], env={"COLUMNS": "200"}).output.replace("│", " ").split())
    assert "OUT/LAYER.npy per layer" in text and "layer3.npy for an nclab MLP" in text
    assert "OUT/penultimate.npy OUT/labels.npy" not in text  # the old promise, false for nclab networks


def test_extract_writes_the_probe_layout(tmp_path):
    from nclab.transfer import linear_probe

    run = _tiny_run(tmp_path, {"name": "digits", "per_class": 10, "test_per_class": 5}, {"name": "mlp"})
    out = tmp_path / "task"
    res = runner.invoke(app, ["extract", str(run.out), "--layout", "probe", "-o", str(out), "-f", "json"])
    assert res.exit_code == 0, res.output
    files = json.loads(res.stdout)
    assert sorted(files) == ["test", "train"]
    assert f"probe with: nclab probe FEATURES LABELS -t digits={out}" in res.stderr
    arrays = {s: (np.load(files[s][run.penultimate]), np.load(files[s]["labels"])) for s in ("train", "test")}
    assert [len(arrays[s][1]) for s in ("train", "test")] == [100, 50]  # the run's own subsets
    # the same arrays in the hand-made layout probe the same
    plain = tmp_path / "plain"
    plain.mkdir()
    for s, (H, y) in arrays.items():
        np.save(plain / f"{s}_features.npy", H)
        np.save(plain / f"{s}_labels.npy", y)
    H, y = arrays["train"]
    np.save(tmp_path / "h.npy", H)
    np.save(tmp_path / "y.npy", y)
    args = ["probe", str(tmp_path / "h.npy"), str(tmp_path / "y.npy"), "--lams", "1e-3,1", "-f", "json"]
    a = json.loads(runner.invoke(app, [*args, "-t", f"t={out}"]).stdout)
    b = json.loads(runner.invoke(app, [*args, "-t", f"t={plain}"]).stdout)
    assert a["tasks"] == b["tasks"]
    want = linear_probe(arrays["train"], arrays["test"], lams=np.array([1e-3, 1.0]))
    assert a["tasks"]["t"]["accuracy"] == want.accuracy
    res = runner.invoke(app, ["extract", str(run.out), "--layout", "probe", "-l", "layer1", "-l", "layer2"])
    assert res.exit_code == 2 and "--layout probe extracts one layer" in res.stderr
