"""``nclab train`` on a streamed image dataset: an ImageNet-layout folder of a few hundred 16x16 images that the
test writes, trained one epoch with augmentation and measured, each image decoded once per pass and never more
than a batch of them alive (memory bounded); the same run with DataLoader workers gives the same numbers."""

import json
import weakref

import numpy as np
import pytest
import yaml
from PIL import Image
from typer.testing import CliRunner

import nclab.data.folders
from nclab.cli.train import app as train_app
from nclab.io import read_metrics

runner = CliRunner()
WNIDS = ["n01440764", "n01443537", "n01484850", "n01491361"]
PER_CLASS, VAL_PER_CLASS, SIDE = 75, 10, 16


@pytest.fixture(scope="module")
def imagenet(tmp_path_factory):
    """train/<wnid>/*.JPEG (4 x 75) and val/<wnid>/*.JPEG (4 x 10): class k has mean colour (60 k, 255 - 60 k,
    100) plus noise, so the classes are learnable."""
    root = tmp_path_factory.mktemp("imagenet")
    rng = np.random.default_rng(0)
    for split, n in (("train", PER_CLASS), ("val", VAL_PER_CLASS)):
        for k, w in enumerate(WNIDS):
            (root / split / w).mkdir(parents=True)
            base = np.array([60 * k, 255 - 60 * k, 100])
            for i in range(n):
                img = np.clip(base + rng.integers(-40, 41, size=(SIDE, SIDE, 3)), 0, 255).astype(np.uint8)
                Image.fromarray(img).save(root / split / w / f"{w}_{i}.JPEG")
    return root


def config(root, **data):
    return {
        "name": "streamed",
        "data": {"name": "imagenet", "root": str(root), "image_size": SIDE, "augment": "imagenet", **data},
        "model": {"name": "resnet18", "options": {"width": 8}},
        "optim": {"lr": 0.05},
        "schedule": {"name": "constant"},
        "train": {"epochs": 1, "batch_size": 25, "threads": 1},
        "measure": {"epochs": [0, 1], "batch_size": 50},
        "report": False,
    }


def test_one_augmented_epoch_through_nclab_train_is_measured_memory_bounded(imagenet, tmp_path, monkeypatch):
    real = nclab.data.folders.decode_image
    decoded, alive, most = [], set(), [0]

    def counting(path, mode="RGB", **options):  # every decoded image, and how many are alive at once
        x = real(path, mode, **options)
        decoded.append(str(path))
        alive.add(id(x))
        weakref.finalize(x, alive.discard, id(x))
        most[0] = max(most[0], len(alive))
        return x

    monkeypatch.setattr(nclab.data.folders, "decode_image", counting)
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(config(imagenet)))
    res = runner.invoke(train_app, ["train", str(path), "--out", str(tmp_path / "run"), "--no-progress"])
    assert res.exit_code == 0, res.output
    N, V = 4 * PER_CLASS, 4 * VAL_PER_CLASS
    # epoch 0: measure train + val (pass 2 reads pass 1's cached features); epoch 1: train 12 batches, measure
    assert len(decoded) == (N + V) + N + (N + V) == 980
    assert len(set(decoded)) == N + V
    # never more than one measurement batch of decoded images alive. (At 16x16 the decoded images, 230 KB in all,
    # are smaller than the Python heap a training epoch moves through, ~140-200 KB measured with tracemalloc, so
    # counting the decoded arrays alive is the check that tells streaming from holding.)
    assert most[0] <= 50
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert (summary["train_samples"], summary["test_samples"], summary["num_classes"]) == (N, V, 4)
    rows = read_metrics(tmp_path / "run")
    nc1 = {(r.epoch, r.split): r.value for r in rows if r.layer == "pool" and r.metric == "nc1"}
    assert set(nc1) == {(0, "train"), (0, "test"), (1, "train"), (1, "test")}
    assert all(np.isfinite(v) and v > 0 for v in nc1.values())
    counts = [r.value for r in rows if r.metric == "running_error"]
    assert len(counts) == 1 and 0 <= counts[0] <= 1


def test_workers_do_not_change_the_numbers(imagenet, tmp_path):
    """Each item is augmented with the generator (seed, epoch, index): two persistent workers give the rows of
    the in-process loader exactly."""
    outs = {}
    for workers in (0, 2):
        data = {"workers": workers, "persistent_workers": workers > 0}
        path = tmp_path / f"w{workers}.yaml"
        path.write_text(
            yaml.safe_dump({**config(imagenet, **data), "train": {**config(imagenet)["train"], "epochs": 2}})
        )
        res = runner.invoke(train_app, ["train", str(path), "--out", str(tmp_path / f"w{workers}"), "--no-progress"])
        assert res.exit_code == 0, res.output
        outs[workers] = [tuple(r) for r in read_metrics(tmp_path / f"w{workers}")]
    assert len(outs[0]) > 100 and outs[0] == outs[2]
