"""Streamed image datasets (nclab.data.folders, nclab.data.catalog) on small folders the tests write: the
ImageFolder / ImageNet / Tiny-ImageNet layouts, labels and class order, subsets, per-item seeded augmentation
with DataLoader workers, bounded memory, and one augmented training epoch measured with CollapseMonitor; and
the same ``transform`` hook on the in-memory datasets."""

import csv
import gc
import tracemalloc
import weakref

import numpy as np
import pytest
import scipy.io
import torch
from PIL import Image
from torch import nn
from torch.utils.data import DataLoader

import nclab
from nclab.data import CorruptDatasetError, DatasetNotFoundError, load, normalization
from nclab.data.augment import Compose, Normalize, RandomCrop, RandomHorizontalFlip, ToFloat, cifar_train_transform
from nclab.data.catalog import IMAGE_DATASETS, open_images
from nclab.data.folders import ImageFiles, decode_image, read_image_folder, read_imagenet, read_tiny_imagenet

WNIDS = ["n01440764", "n01443537", "n01484850", "n01491361"]


def save(path, arr):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(arr).save(path)


def colour(k, size=8, rng=None):
    """A class-coded image: class k has mean colour (60 k, 255 - 60 k, 100) plus small noise."""
    base = np.array([60 * k, 255 - 60 * k, 100], dtype=np.int64)
    noise = np.zeros((size, size, 3), np.int64) if rng is None else rng.integers(-20, 21, size=(size, size, 3))
    return np.clip(base + noise, 0, 255).astype(np.uint8)


def write_imagenet(root, rng, per_class=3, val_per_class=2, size=8, val="flat-csv"):
    """ILSVRC-2012 layout: train/<wnid>/<wnid>_<n>.JPEG; val flat + LOC_val_solution.csv, or class folders,
    or flat + devkit. Returns the val labels in file order."""
    for k, w in enumerate(WNIDS):
        for n in range(per_class):
            save(root / "train" / w / f"{w}_{n}.JPEG", colour(k, size, rng))
    labels = []
    n_val = val_per_class * len(WNIDS)
    order = rng.permutation(np.arange(n_val) % len(WNIDS))
    for i, k in enumerate(order, start=1):
        name = f"ILSVRC2012_val_{i:08d}.JPEG"
        save((root / "val" / WNIDS[k] / name) if val == "folders" else (root / "val" / name), colour(int(k), size))
        labels.append(int(k))
    if val == "flat-csv":
        with (root / "LOC_val_solution.csv").open("w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["ImageId", "PredictionString"])
            for i, k in enumerate(order, start=1):
                w.writerow([f"ILSVRC2012_val_{i:08d}", f"{WNIDS[k]} 1 2 3 4 {WNIDS[k]} 0 0 5 5"])
    elif val == "flat-devkit":
        data = root / "ILSVRC2012_devkit_t12" / "data"
        data.mkdir(parents=True)
        # ILSVRC2012_IDs 1..4 for the leaves (in an order other than sorted), plus one inner node with children
        ids = [3, 1, 4, 2]
        synsets = np.array(
            [(ids[k], w, 0) for k, w in enumerate(WNIDS)] + [(1001, "n00000001", 4)],
            dtype=[("ILSVRC2012_ID", "O"), ("WNID", "O"), ("num_children", "O")],
        )
        scipy.io.savemat(data / "meta.mat", {"synsets": synsets})
        (data / "ILSVRC2012_validation_ground_truth.txt").write_text("".join(f"{ids[k]}\n" for k in order))
    return labels


# ------------------------------------------------------------------------------------------ ImageFolder
def test_image_folder_order_labels_and_exact_png_decoding(tmp_path, rng):
    arrays = {}
    for c in ["zebra", "ant", "Bee"]:  # sorted: 'Bee' < 'ant' < 'zebra' (Python string order, as torchvision)
        for sub in ["b.png", "a.PNG", "deep/c.png"]:
            a = rng.integers(0, 256, (5, 7, 3), dtype=np.uint8)
            save(tmp_path / c / sub, a)
            arrays[(c, sub)] = a
        (tmp_path / c / "notes.txt").write_text("not an image")
    ds = read_image_folder(tmp_path)
    assert ds.classes == ["Bee", "ant", "zebra"] and len(ds) == 9
    assert ds.targets.tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert [ds.path(i).relative_to(tmp_path).as_posix() for i in range(3)] == [
        "Bee/a.PNG",
        "Bee/b.png",
        "Bee/deep/c.png",
    ]
    x, y = ds[4]
    assert x.dtype == torch.uint8 and tuple(x.shape) == (3, 5, 7) and y == 1
    np.testing.assert_array_equal(x.permute(1, 2, 0).numpy(), arrays[("ant", "b.png")])
    gray = ImageFiles([ds.path(0)], [0], ["only"], mode="L")[0][0]
    assert gray.shape == (1, 5, 7)
    assert ds.class_counts.tolist() == [3, 3, 3]


def test_image_folder_errors_name_the_problem(tmp_path):
    with pytest.raises(DatasetNotFoundError, match="looked in"):
        read_image_folder(tmp_path / "absent")
    (tmp_path / "empty_class").mkdir()
    save(tmp_path / "full" / "a.png", np.zeros((2, 2, 3), np.uint8))
    with pytest.raises(CorruptDatasetError, match=r"empty_class.*holds no image"):
        read_image_folder(tmp_path)
    (tmp_path / "empty_class" / "bad.jpg").write_bytes(b"\xff\xd8 definitely not a jpeg")
    ds = read_image_folder(tmp_path)
    with pytest.raises(CorruptDatasetError, match=r"bad\.jpg.*cannot decode"):
        ds[0]
    with pytest.raises(CorruptDatasetError, match="not among the 1 given classes"):
        read_image_folder(tmp_path, classes=["full"])
    with pytest.raises(CorruptDatasetError, match="not on disk"):
        decode_image(tmp_path / "gone.png")


# ------------------------------------------------------------------------------------------ ImageNet
@pytest.mark.parametrize("val", ["flat-csv", "folders", "flat-devkit"])
def test_imagenet_layouts(tmp_path, rng, val):
    labels = write_imagenet(tmp_path, rng, val=val)
    train = read_imagenet(tmp_path, "train")
    assert (
        train.classes == WNIDS and len(train) == 12 and train.targets.tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]
    )
    ds = read_imagenet(tmp_path, "val")
    assert ds.classes == WNIDS and len(ds) == 8
    if val == "folders":
        assert sorted(ds.targets.tolist()) == sorted(labels)
    else:  # flat: file order = ILSVRC2012_val_00000001 ..., labels from the csv / the devkit
        assert ds.targets.tolist() == labels
    # the decoded colour matches the label's colour (JPEG: within a few levels)
    for i in range(len(ds)):
        x, y = ds[i]
        assert np.abs(x.float().mean((1, 2)).numpy() - colour(y)[0, 0]).max() < 6


def test_imagenet_kaggle_layout_through_open_images(tmp_path, rng, monkeypatch):
    top = tmp_path / "imagenet"
    labels = write_imagenet(top / "ILSVRC" / "Data" / "CLS-LOC", rng)
    (top / "ILSVRC" / "Data" / "CLS-LOC" / "LOC_val_solution.csv").rename(top / "LOC_val_solution.csv")
    monkeypatch.setenv("NCLAB_DATA", str(tmp_path))
    val = open_images("imagenet", "val")
    assert val.targets.tolist() == labels and val.K == 4
    sub = open_images("imagenet", "train", classes=[WNIDS[2], 0], per_class=2, seed=1)
    assert sub.classes == [WNIDS[2], WNIDS[0]] and sub.class_counts.tolist() == [2, 2]
    assert all(WNIDS[2] in str(sub.path(i)) for i in range(len(sub)) if sub.targets[i] == 0)


def test_imagenet_val_label_problems(tmp_path, rng):
    write_imagenet(tmp_path, rng)
    rows = (tmp_path / "LOC_val_solution.csv").read_text().splitlines()
    (tmp_path / "LOC_val_solution.csv").write_text("\n".join(rows[:-1]) + "\n")  # one image loses its label
    with pytest.raises(CorruptDatasetError, match="has no label for 1 image"):
        read_imagenet(tmp_path, "val")
    (tmp_path / "LOC_val_solution.csv").write_text("\n".join([*rows, "ILSVRC2012_val_00000099,n09999999 1 1 2 2"]))
    with pytest.warns(UserWarning, match=r"1 image.* not in"):
        ds = read_imagenet(tmp_path, "val")
    assert ds.info["labelled_but_absent"] == 1
    (tmp_path / "LOC_val_solution.csv").write_text(
        "\n".join(
            [
                rows[0],
                rows[1].replace(WNIDS[0], "n0").replace(WNIDS[1], "n0").replace(WNIDS[2], "n0").replace(WNIDS[3], "n0"),
                *rows[2:],
            ]
        )
    )
    with pytest.raises(CorruptDatasetError, match="outside the class list"):
        read_imagenet(tmp_path, "val")
    (tmp_path / "LOC_val_solution.csv").unlink()
    with pytest.raises(DatasetNotFoundError, match=r"LOC_val_solution\.csv"):
        read_imagenet(tmp_path, "val")


def test_tiny_imagenet_layout(tmp_path, rng):
    root = tmp_path / "tiny-imagenet-200"
    wnids = ["n02", "n01", "n03"]
    (root).mkdir()
    (root / "wnids.txt").write_text("\n".join(wnids) + "\n")
    for k, w in enumerate(sorted(wnids)):
        for n in range(2):
            save(root / "train" / w / "images" / f"{w}_{n}.JPEG", colour(k))
        (root / "train" / w / f"{w}_boxes.txt").write_text("ignored")
    lines = []
    for i, w in enumerate(["n03", "n01", "n02", "n01"]):
        save(root / "val" / "images" / f"val_{i}.JPEG", colour(sorted(wnids).index(w)))
        lines.append(f"val_{i}.JPEG\t{w}\t0\t0\t7\t7")
    (root / "val" / "val_annotations.txt").write_text("\n".join(lines) + "\n")
    tr = open_images("tiny-imagenet", "train", root=tmp_path)
    assert tr.classes == ["n01", "n02", "n03"] and tr.targets.tolist() == [0, 0, 1, 1, 2, 2]
    va = read_tiny_imagenet(root, "val")
    assert va.targets.tolist() == [2, 0, 1, 0]
    (root / "val" / "images" / "val_3.JPEG").unlink()
    with pytest.raises(CorruptDatasetError, match=r"1 image.*not on disk"):
        read_tiny_imagenet(root, "val")


def test_open_images_reports_where_it_looked(tmp_path, monkeypatch):
    monkeypatch.setenv("NCLAB_DATA", str(tmp_path))
    with pytest.raises(DatasetNotFoundError) as err:
        open_images("food101", "train")
    msg = str(err.value)
    assert str(tmp_path / "food101") in msg and "food-101" in msg and "meta/{train,test}.txt" in msg
    with pytest.raises(ValueError, match="splits"):
        open_images("food101", "val")
    with pytest.raises(ValueError, match="unknown image dataset"):
        open_images("imagenet-21k")
    assert len(IMAGE_DATASETS) == 11


# ------------------------------------------------------------------------------------------ subsets
def test_select_classes_and_balanced_per_class(tmp_path):
    paths = [tmp_path / f"{i}.png" for i in range(30)]
    ds = ImageFiles(paths, np.arange(30) % 3, ["a", "b", "c"])
    sub = ds.select(classes=["c", 0])
    assert sub.classes == ["c", "a"] and len(sub) == 20
    assert all((int(sub.path(i).stem) % 3 == 2) == (sub.targets[i] == 0) for i in range(20))
    bal = ds.select(per_class=4, seed=3)
    assert bal.class_counts.tolist() == [4, 4, 4]
    assert [str(p) for p in map(bal.path, range(12))] == [
        str(p) for p in map(ds.select(per_class=4, seed=3).path, range(12))
    ]
    assert len(ds) == 30  # the original is untouched
    with pytest.raises(ValueError, match="not a class"):
        ds.select(classes=["d"])
    with pytest.raises(ValueError, match="per_class=11"):
        ds.select(per_class=11)


# ------------------------------------------------------------------------------------------ augmentation
def test_per_item_augmentation_is_the_same_with_any_number_of_workers(tmp_path, rng):
    for k in range(2):
        for n in range(6):
            save(tmp_path / f"c{k}" / f"{n}.png", rng.integers(0, 256, (12, 12, 3), dtype=np.uint8))
    t = Compose([RandomCrop(10, padding=2), RandomHorizontalFlip(), ToFloat()])
    ds = read_image_folder(tmp_path, transform=t, seed=7)

    def epoch(workers, e):
        ds.set_epoch(e)
        return torch.cat([x for x, _ in DataLoader(ds, batch_size=4, num_workers=workers)])

    a0 = epoch(0, 0)
    assert torch.equal(a0, epoch(2, 0))  # workers decode and augment; same draws
    a1 = epoch(0, 1)
    assert not torch.equal(a0, a1)  # the next epoch draws anew
    assert torch.equal(ds.with_transform(None)[3][0], decode_image(ds.path(3)))


def test_in_memory_datasets_gain_the_same_hook_without_changing_defaults():
    plain = load("digits", "train")
    aug = load("digits", "train", transform=RandomCrop(8, padding=1), seed=3)
    assert torch.equal(plain.x, aug.x)  # x keeps the untransformed inputs
    x0, y0 = plain[5]
    assert torch.equal(x0, plain.x[5]) and y0 == plain.y[5]
    xa, ya = aug[5]
    assert ya == y0 and xa.shape == (1, 8, 8)
    epoch0 = [aug[i][0] for i in range(50)]
    assert torch.equal(xa, epoch0[5])  # seeded by (seed, epoch, index)
    shifted = [not torch.equal(epoch0[i], aug.x[i]) for i in range(50)]
    assert 30 < sum(shifted) < 50  # 8 of the 9 offsets move the image (a blank border may hide a few)
    aug.set_epoch(1)
    assert sum(not torch.equal(aug[i][0], epoch0[i]) for i in range(50)) > 30
    batch = next(iter(DataLoader(aug, batch_size=16)))
    assert batch[0].shape == (16, 1, 8, 8)
    t = cifar_train_transform(*normalization("mnist"), size=8, padding=1)
    assert load("digits", "train", transform=t)[0][0].shape == (1, 8, 8)


# ------------------------------------------------------------------------------------------ memory
def _write_many(root, rng, per_class, size, classes=WNIDS):
    for k, w in enumerate(classes):
        for n in range(per_class):
            save(root / "train" / w / f"{w}_{n}.JPEG", colour(k, size, rng))


def test_streamed_dataset_holds_no_decoded_images(tmp_path, rng, monkeypatch):
    _write_many(tmp_path, rng, per_class=75, size=64)
    ds = read_imagenet(tmp_path, "train")
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
    whole = len(ds) * 3 * 64 * 64  # bytes of every decoded image at once
    gc.collect()
    tracemalloc.start()
    try:
        for _ in DataLoader(ds, batch_size=10, num_workers=0):
            pass
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        kept = [real(ds.path(i)) for i in range(len(ds))]  # control: holding them all is seen
        _, peak_all = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(decoded) == 300 and len(set(decoded)) == 300  # one decode per item per epoch, nothing cached
    assert most[0] <= 10  # never more than one batch of decoded images alive
    assert peak_all > whole and len(kept) == 300
    assert peak < whole / 5, (peak, whole)  # a batch of decoded arrays (10 x 12 KiB), the loader's objects


# ------------------------------------------------------------------------------------------ one epoch
class TinyNet(nn.Module):
    def __init__(self, K):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
            nn.Linear(16, 16), nn.ReLU(),
        )  # fmt: skip
        self.head = nn.Linear(16, K)

    def forward(self, x):
        return self.head(self.features(x))


def test_one_augmented_epoch_on_a_streamed_imagenet_folder_is_measured(tmp_path, rng):
    _write_many(tmp_path, rng, per_class=75, size=32)
    mean, std = (0.5, 0.5, 0.5), (0.25, 0.25, 0.25)
    train_t = Compose([RandomCrop(32, padding=4), RandomHorizontalFlip(), ToFloat(), Normalize(mean, std)])
    eval_t = Compose([ToFloat(), Normalize(mean, std)])
    train = read_imagenet(tmp_path, "train", transform=train_t, seed=0)
    assert len(train) == 300 and train.class_counts.tolist() == [75] * 4
    torch.manual_seed(0)
    net = TinyNet(4)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    train.set_epoch(0)
    loader = DataLoader(train, batch_size=25, shuffle=True, generator=torch.Generator().manual_seed(0))
    gc.collect()
    tracemalloc.start()
    losses, seen = [], 0
    try:
        for x, y in loader:
            loss = nn.functional.cross_entropy(net(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
            seen += len(y)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert seen == 300 and len(losses) == 12 and all(np.isfinite(losses))
    assert peak < 300 * 3 * 32 * 32 / 3  # a few batches of decoded images at most, never the whole set
    monitor = nclab.CollapseMonitor(net, K=4)
    res = monitor.measure(DataLoader(train.with_transform(eval_t), batch_size=50), split="train", epoch=1)
    stats = res.stats["penultimate"]
    assert stats.counts.tolist() == [75] * 4
    for metric in ("nc1", "self_duality", "ncc_mismatch"):
        assert np.isfinite(res.value("penultimate", metric)), metric
    assert 0.0 <= res.value("output", "error") <= 1.0
