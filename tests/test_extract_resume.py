"""Feature extraction at scale: ``extract_features`` / ``nclab extract`` from a streamed image dataset (decoded one
batch at a time, in DataLoader workers), and a stopped or killed extraction resumed with ``--resume`` into files
byte-identical to an uninterrupted extraction's, its progress kept in the staging folder."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import weakref
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from typer.testing import CliRunner

import nclab
import nclab.data.folders
import nclab.monitor.resume
from nclab.cli import app
from nclab.monitor import extract_features
from nclab.nets import build_model
from nclab.train import resolve_config
from nclab.train.feeds import streamed_split

runner = CliRunner()
N_PER_CLASS, K, SIDE, BATCH = 30, 4, 16, 16
LAYERS = ["layer3.1", "penultimate"]
DECODE = nclab.data.folders.decode_image


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """An image-folder tree: K classes x 30 images of 20 x 18 pixels (resized and centre-cropped to 16)."""
    root = tmp_path_factory.mktemp("images")
    rng = np.random.default_rng(0)
    for k in range(K):
        (root / f"class{k}").mkdir()
        for i in range(N_PER_CLASS):
            img = np.clip(np.array([60 * k, 200 - 40 * k, 90]) + rng.integers(-30, 31, (20, 18, 3)), 0, 255)
            Image.fromarray(img.astype(np.uint8)).save(root / f"class{k}" / f"{i:03d}.png")
    return root


@pytest.fixture(scope="module")
def net():
    torch.manual_seed(0)
    return build_model("resnet18", (3, SIDE, SIDE), K, width=8).eval()


def dataset(root):
    """The folder with the default test-time transform at 16 (what ``nclab extract --image-size 16`` reads)."""
    return streamed_split(
        resolve_config({"data": {"name": "image-folder", "root": str(root), "image_size": SIDE}}), "train"
    )


def result_files(out):
    """Each committed file's bytes; the manifest without its extraction id (the staging folder's name)."""
    files = {p.name: p.read_bytes() for p in sorted(Path(out).iterdir()) if p.is_file() and p.name != "run.lock"}
    manifest = json.loads(files.pop("manifest.json"))
    assert manifest.pop("id")
    return files, manifest


@pytest.fixture
def record_every_batch(monkeypatch):
    monkeypatch.setattr(nclab.monitor.resume, "RESUME_EVERY_S", 0.0)


def failing_decode(monkeypatch, after):
    """``decode_image`` raising on its ``after + 1``-th call (a loader that dies part-way); returns the call log."""
    real, calls = DECODE, []

    def decode(path, mode="RGB", **options):
        calls.append(path)
        if after is not None and len(calls) > after:
            raise OSError(f"disk went away reading {path}")
        return real(path, mode, **options)

    monkeypatch.setattr(nclab.data.folders, "decode_image", decode)
    return calls


def test_an_extraction_stopped_by_an_error_resumes_byte_identically(folder, net, tmp_path, monkeypatch):
    ds = dataset(folder)
    N = len(ds)
    assert N == K * N_PER_CLASS == 120
    whole = tmp_path / "whole"
    extract_features(net, ds, LAYERS, out=whole, K=K, batch_size=BATCH)
    want_files, want_manifest = result_files(whole)
    assert np.load(whole / "pool.npy").shape == (N, 64) and np.load(whole / "layer3.1.npy").shape == (N, 512)

    out = tmp_path / "cut"
    failing_decode(monkeypatch, after=70)  # sample 70 is in the 5th batch: 4 batches (64 rows) done
    with pytest.raises(OSError, match="disk went away") as info:
        extract_features(net, ds, LAYERS, out=out, K=K, batch_size=BATCH)
    assert any("stopped after 64 of 120 samples" in note and "resume=True" in note for note in info.value.__notes__)
    assert [p.name for p in out.iterdir() if not p.name.startswith(".")] == []  # nothing committed
    (stage,) = out.glob(".staging-*")
    record = json.loads((stage / "RESUME.json").read_text())
    assert (
        record["rows"] == 64 and record["num_samples"] == N and list(record["files"]) == [*LAYERS[:1], "pool", "labels"]
    )
    assert (stage / "pool.npy.part").stat().st_size == 256 + 64 * 64 * 4  # header + the rows of 4 batches

    with pytest.raises(FileExistsError, match=r"holds an interrupted extraction \(64 of 120 samples done"):
        extract_features(net, ds, LAYERS, out=out, K=K, batch_size=BATCH)
    with pytest.raises(ValueError, match="its batch_size was 16, now 32"):
        extract_features(net, ds, LAYERS, out=out, K=K, batch_size=32, resume=True)
    other = build_model("resnet18", (3, SIDE, SIDE), K, width=8)
    with pytest.raises(ValueError, match="the model's weights differ from the ones it started with"):
        extract_features(other, ds, LAYERS, out=out, K=K, batch_size=BATCH, resume=True)

    calls = failing_decode(monkeypatch, after=None)
    with pytest.warns(UserWarning, match="resuming the extraction in .* at sample 64"):
        extract_features(net, ds, LAYERS, out=out, K=K, batch_size=BATCH, resume=True)
    assert len(calls) == N - 64  # only the samples not extracted yet were read
    assert result_files(out) == (want_files, want_manifest)
    assert not list(out.glob(".staging-*"))


_KILLED = """
import os, signal, sys, torch
import nclab.data.folders, nclab.monitor.resume
from nclab.monitor import extract_features
from nclab.nets import build_model
from tests.test_extract_resume import dataset, LAYERS, K, SIDE, BATCH
nclab.monitor.resume.RESUME_EVERY_S = 0.0  # record after every batch
real, calls = nclab.data.folders.decode_image, []
def decode(path, mode="RGB", **options):
    calls.append(path)
    if len(calls) == 90:
        os.kill(os.getpid(), signal.SIGKILL)  # kill -9 in the 6th batch: no handler runs
    return real(path, mode, **options)
nclab.data.folders.decode_image = decode
torch.manual_seed(0)
net = build_model("resnet18", (3, SIDE, SIDE), K, width=8).eval()
extract_features(net, dataset(sys.argv[1]), LAYERS, out=sys.argv[2], K=K, batch_size=BATCH)
"""


def test_a_killed_extraction_resumes_from_its_last_record(folder, net, tmp_path):
    whole, out = tmp_path / "whole", tmp_path / "killed"
    extract_features(net, dataset(folder), LAYERS, out=whole, K=K, batch_size=BATCH)
    paths = [str(Path(nclab.__file__).parents[1]), str(Path(__file__).parents[1])]  # this nclab, and tests/
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(_KILLED), str(folder), str(out)], env=env,
                          capture_output=True, text=True)  # fmt: skip
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    (stage,) = out.glob(".staging-*")
    assert json.loads((stage / "RESUME.json").read_text())["rows"] == 80  # 5 batches recorded before the kill
    res = _extract_cli(folder, out, net, tmp_path, "--resume")
    assert res.exit_code == 0, res.output
    assert "resuming the extraction" in res.output and "at sample 80" in res.output
    assert result_files(out) == result_files(whole)


def _saved(net, tmp_path):
    path = tmp_path / "net.pt"
    torch.save(net, path)
    return path


def _extract_cli(folder, out, net, tmp_path, *more):
    return runner.invoke(
        app,
        ["extract", str(_saved(net, tmp_path)), "image-folder", "--root", str(folder), "--image-size", str(SIDE),
         "-l", LAYERS[0], "-l", LAYERS[1], "--batch-size", str(BATCH), "-o", str(out), *more],
    )  # fmt: skip


def test_nclab_extract_streams_a_folder_in_workers_one_batch_at_a_time(folder, net, tmp_path, monkeypatch):
    real, alive, most, decoded = DECODE, set(), [0], []

    def counting(path, mode="RGB", **options):  # in this process (workers=0): how many decoded images are alive at once
        x = real(path, mode, **options)
        decoded.append(path)
        alive.add(id(x))
        weakref.finalize(x, alive.discard, id(x))
        most[0] = max(most[0], len(alive))
        return x

    monkeypatch.setattr(nclab.data.folders, "decode_image", counting)
    res = _extract_cli(folder, tmp_path / "w0", net, tmp_path)
    assert res.exit_code == 0, res.output
    # each image once (the first twice: a saved module is first tried on it), never more than a batch alive
    assert len(decoded) == 121 and len(set(decoded)) == 120 and most[0] <= BATCH
    monkeypatch.setattr(nclab.data.folders, "decode_image", real)
    res = _extract_cli(folder, tmp_path / "w2", net, tmp_path, "--workers", "2", "--resume")
    assert res.exit_code == 0, res.output
    assert "nothing to resume" in res.output
    assert result_files(tmp_path / "w2") == result_files(tmp_path / "w0")
    w0 = tmp_path / "w0"
    code = runner.invoke(
        app,
        [
            "measure",
            str(w0 / "pool.npy"),
            str(w0 / "labels.npy"),
            "-w",
            str(w0 / "W.npy"),
            "-b",
            str(w0 / "b.npy"),
            "-f",
            "json",
        ],
    )
    assert code.exit_code == 0, code.output
    assert 0 <= json.loads(code.stdout)["ncc_accuracy"] <= 1


def test_resume_needs_an_indexable_dataset(net, tmp_path):
    x, y = torch.randn(8, 3, SIDE, SIDE), torch.arange(8) % K
    with pytest.raises(ValueError, match="resume=True needs the data as an indexable dataset"):
        extract_features(net, [(x, y)], out=tmp_path, K=K, resume=True)
