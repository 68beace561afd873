"""nclab.data.load on every format: tiny fixtures written in each real format, the embedded digits, and the
real Fashion-MNIST files when installed."""

import gzip
import pickle
import struct
from pathlib import Path

import numpy as np
import pytest
import torch

from nclab.data import CorruptDatasetError, DatasetNotFoundError, balanced_subset, load
from nclab.data.formats import read_idx

FMNIST = Path("/usr/share/datasets/fashion-mnist")


def _idx_bytes(arr: np.ndarray) -> bytes:
    return struct.pack(">HBB", 0, 0x08, arr.ndim) + struct.pack(f">{arr.ndim}I", *arr.shape) + arr.tobytes()


def _write_idx_set(folder: Path, rng, n_train=20, n_test=10, gz=True):
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for stem, n in (("train", n_train), ("t10k", n_test)):
        imgs = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
        labs = (np.arange(n) % 10).astype(np.uint8)
        for kind, arr in (("images-idx3", imgs), ("labels-idx1", labs)):
            name = f"{stem}-{kind}-ubyte" + (".gz" if gz else "")
            data = _idx_bytes(arr)
            (folder / name).write_bytes(gzip.compress(data) if gz else data)
        out[stem] = (imgs, labs)
    return out


@pytest.mark.parametrize("gz", [True, False])
def test_idx_roundtrip_gz_and_raw(tmp_path, rng, gz):
    ref = _write_idx_set(tmp_path / "mnist", rng, gz=gz)
    tr = load("mnist", "train", root=tmp_path, normalize=False)
    te = load("mnist", "test", root=tmp_path / "mnist", normalize=False)
    assert tr.x.shape == (20, 1, 28, 28) and te.x.shape == (10, 1, 28, 28)
    np.testing.assert_array_equal(tr.x[:, 0].numpy(), ref["train"][0] / np.float32(255))
    np.testing.assert_array_equal(te.y.numpy(), ref["t10k"][1])
    # normalisation: MNIST's (0.1307, 0.3081); padding 28 -> 32 adds 2 zero pixels each side before it
    n = load("mnist", "train", root=tmp_path, pad_to=32)
    assert n.x.shape == (20, 1, 32, 32)
    np.testing.assert_allclose(n.x[:, 0, 0, 0].numpy(), -0.1307 / 0.3081, rtol=1e-6)
    np.testing.assert_allclose(
        n.x[:, 0, 2:30, 2:30].numpy(), (tr.x[:, 0].numpy() - 0.1307) / 0.3081, rtol=1e-5, atol=1e-6
    )


def test_idx_corrupt_files(tmp_path, rng):
    _write_idx_set(tmp_path / "fashion-mnist", rng, gz=False)
    f = tmp_path / "fashion-mnist" / "train-images-idx3-ubyte"
    good = f.read_bytes()
    f.write_bytes(good[:-7])  # truncated
    with pytest.raises(CorruptDatasetError, match="implies"):
        load("fashion-mnist", "train", root=tmp_path)
    f.write_bytes(b"\x12\x34" + good[2:])  # bad magic
    with pytest.raises(CorruptDatasetError, match="magic"):
        load("fashion-mnist", "train", root=tmp_path)
    g = tmp_path / "bad.gz"
    g.write_bytes(b"not gzip at all")
    with pytest.raises(CorruptDatasetError, match="cannot read"):
        read_idx(g)


def test_missing_dataset_message(tmp_path, monkeypatch):
    monkeypatch.delenv("NCLAB_DATA", raising=False)
    with pytest.raises(DatasetNotFoundError) as info:
        load("fashion-mnist", "train", root=tmp_path / "nowhere")
    msg = str(info.value)
    assert str(tmp_path / "nowhere") in msg and "t10k-labels-idx1-ubyte" in msg and "dataset-fashion-mnist" in msg
    monkeypatch.setenv("NCLAB_DATA", str(tmp_path))
    # the system location is searched last: point it at an empty folder so a machine that has
    # /usr/share/datasets/cifar10 does not change the outcome
    monkeypatch.setattr("nclab.data.loaders.SYSTEM_DATA", tmp_path / "system")
    with pytest.raises(DatasetNotFoundError, match="cifar-10-batches-py"):
        load("cifar10", "test")


def _cifar_pickle(path: Path, n: int, label_key: str, K: int, rng):
    data = rng.integers(0, 256, size=(n, 3072), dtype=np.uint8)
    labels = [int(i % K) for i in range(n)]
    path.write_bytes(pickle.dumps({b"data": data, label_key.encode(): labels, b"batch_label": b"x"}))
    return data, labels


def test_cifar10_and_cifar100_pickles(tmp_path, rng):
    d10 = tmp_path / "cifar10" / "cifar-10-batches-py"
    d10.mkdir(parents=True)
    parts = [_cifar_pickle(d10 / f"data_batch_{i}", 4, "labels", 10, rng) for i in range(1, 6)]
    _cifar_pickle(d10 / "test_batch", 3, "labels", 10, rng)
    tr = load("cifar10", "train", root=tmp_path, normalize=False)
    assert tr.x.shape == (20, 3, 32, 32) and tr.K == 10
    # channel-major rows: the first 1024 bytes are the red plane, row by row
    np.testing.assert_array_equal((tr.x[4] * 255).round().to(torch.uint8).numpy().reshape(-1), parts[1][0][0])
    d100 = tmp_path / "cifar-100-python"
    d100.mkdir()
    data = rng.integers(0, 256, size=(5, 3072), dtype=np.uint8)
    (d100 / "train").write_bytes(
        pickle.dumps({b"data": data, b"fine_labels": [0, 99, 5, 7, 1], b"coarse_labels": [0, 19, 3, 4, 1]})
    )
    (d100 / "test").write_bytes(pickle.dumps({b"data": data, b"fine_labels": [1] * 5, b"coarse_labels": [2] * 5}))
    fine = load("cifar100", "train", root=tmp_path)
    coarse = load("cifar100", "train", root=tmp_path, label="coarse")
    assert fine.K == 100 and fine.y.tolist() == [0, 99, 5, 7, 1]
    assert coarse.K == 20 and coarse.y.tolist() == [0, 19, 3, 4, 1]
    with pytest.raises(ValueError, match="unknown option"):
        load("cifar10", "train", root=tmp_path, label="coarse")


def test_cifar_pickle_refuses_code(tmp_path):
    d = tmp_path / "cifar-10-batches-py"
    d.mkdir()

    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    (d / "test_batch").write_bytes(pickle.dumps({b"data": Evil(), b"labels": [0]}))
    with pytest.raises(CorruptDatasetError, match="refusing"):
        load("cifar10", "test", root=tmp_path)


def test_svhn_mat(tmp_path, rng):
    scipy_io = pytest.importorskip("scipy.io")
    X = rng.integers(0, 256, size=(32, 32, 3, 6), dtype=np.uint8)
    y = np.array([[10], [1], [2], [3], [10], [9]], dtype=np.uint8)
    scipy_io.savemat(tmp_path / "test_32x32.mat", {"X": X, "y": y})
    ds = load("svhn", "test", root=tmp_path, normalize=False)
    assert ds.y.tolist() == [0, 1, 2, 3, 0, 9]
    np.testing.assert_array_equal((ds.x[2] * 255).round().to(torch.uint8).numpy(), X[:, :, :, 2].transpose(2, 0, 1))
    (tmp_path / "train_32x32.mat").write_bytes(b"garbage")
    with pytest.raises(CorruptDatasetError):
        load("svhn", "train", root=tmp_path)


def test_stl10_binary_column_major(tmp_path, rng):
    d = tmp_path / "stl10_binary"
    d.mkdir()
    imgs = rng.integers(0, 256, size=(3, 3, 96, 96), dtype=np.uint8)  # (N, C, H, W)
    # the file stores each channel column-major: transpose H and W before writing C-order bytes
    (d / "train_X.bin").write_bytes(np.ascontiguousarray(imgs.transpose(0, 1, 3, 2)).tobytes())
    (d / "train_y.bin").write_bytes(bytes([1, 10, 4]))
    ds = load("stl10", "train", root=tmp_path, normalize=False)
    assert ds.y.tolist() == [0, 9, 3]
    np.testing.assert_array_equal((ds.x * 255).round().to(torch.uint8).numpy(), imgs)
    (d / "train_y.bin").write_bytes(bytes([1, 2]))
    with pytest.raises(CorruptDatasetError, match="2 labels for 3 images"):
        load("stl10", "train", root=tmp_path)


def test_gaussian_and_features(tmp_path):
    a = load("gaussian", "train", K=3, d=5, n=4, separation=10.0, seed=1)
    b = load("gaussian", "test", K=3, d=5, n=4, separation=10.0, seed=1)
    assert a.x.shape == (12, 5) and a.class_counts.tolist() == [4, 4, 4]
    # the class means are shared by the splits, the noise is not
    ma = np.stack([a.x[a.y == k].mean(0).numpy() for k in range(3)])
    mb = np.stack([b.x[b.y == k].mean(0).numpy() for k in range(3)])
    assert np.linalg.norm(ma - mb, axis=1).max() < 3.0 < np.linalg.norm(ma[0] - ma[1])
    assert not torch.equal(a.x, b.x)
    np.save(tmp_path / "train_features.npy", np.ones((6, 4), np.float32))
    np.save(tmp_path / "train_labels.npy", np.array([0, 1, 2, 0, 1, 2]))
    f = load("features", "train", root=tmp_path)
    assert f.x.shape == (6, 4) and f.K == 3
    with pytest.raises(DatasetNotFoundError, match=r"split\}_features\.npy"):
        load("features", "test", root=tmp_path)


def test_digits_split_and_balanced_subset():
    tr, te = load("digits", "train"), load("digits", "test")
    assert len(tr) + len(te) == 1797 and (len(tr), len(te)) == (1352, 445)
    assert tr.input_shape == (1, 8, 8) and float(tr.x.max()) == 1.0
    assert np.ptp(tr.class_counts) <= 7 and np.ptp(te.class_counts) <= 2
    sub = load("digits", "train", per_class=30, seed=3)
    assert sub.class_counts.tolist() == [30] * 10
    assert torch.equal(sub.x, load("digits", "train", per_class=30, seed=3).x)
    assert not torch.equal(sub.x, load("digits", "train", per_class=30, seed=4).x)
    with pytest.raises(ValueError, match="class 0 has only"):
        balanced_subset(np.array([0, 1, 1]), 2, 2)


@pytest.mark.skipif(not FMNIST.is_dir(), reason="Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)")
def test_real_fashion_mnist():
    tr = load("fashion-mnist", "train", per_class=50, pad_to=32)
    te = load("fashion-mnist", "test")
    assert tr.x.shape == (500, 1, 32, 32) and tr.class_counts.tolist() == [50] * 10
    assert len(te) == 10000 and te.class_counts.tolist() == [1000] * 10
    # standardised with the conventional constants: the full test split has mean ~0, std ~1
    assert abs(float(te.x.mean())) < 0.02 and abs(float(te.x.std()) - 1) < 0.02


def test_class_subset_relabels_in_given_order():
    full = load("digits", "train", normalize=False)
    sub = load("digits", "train", classes=[7, 2], normalize=False)
    assert sub.K == 2
    y = full.y.numpy()
    keep = (y == 7) | (y == 2)
    np.testing.assert_array_equal(sub.x.numpy(), full.x.numpy()[keep])
    np.testing.assert_array_equal(sub.y.numpy(), np.where(y[keep] == 7, 0, 1))
    bal = load("digits", "train", classes=[7, 2], per_class=5)
    np.testing.assert_array_equal(bal.class_counts, [5, 5])
    with pytest.raises(ValueError, match="classes must be distinct"):
        load("digits", "train", classes=[1, 1])
    with pytest.raises(ValueError, match="classes must be distinct"):
        load("digits", "train", classes=[10])
