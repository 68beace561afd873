"""``nclab.data.load(name, split, ...)``: every supported dataset from local files, as in-memory tensors.

Root resolution for file-backed datasets (first folder holding the expected files wins): ``root`` (and
``root/<name>``) when given; otherwise ``$NCLAB_DATA/<name>`` and ``$NCLAB_DATA``; then
``/usr/share/datasets/<name>`` (where Debian's ``dataset-fashion-mnist`` package puts its files). Inside
each candidate the dataset's customary sub-folder (``cifar-10-batches-py``, ``stl10_binary``, ...) is tried
too. Nothing is ever downloaded: a missing dataset raises :class:`DatasetNotFoundError` saying where nclab
looked, which files it expects and how to get them.

Preprocessing (deterministic, no augmentation, as [Wang et al. 2024; Han et al. 2022] measure collapse on the training
split with
test-time transforms): images are scaled to [0, 1], optionally zero-padded to ``pad_to`` pixels ([Han et al. 2022]
pads 28x28 (Fashion-)MNIST to 32x32 before normalising, like ``transforms.Pad(2)``), then standardised per
channel with the conventional constants of each dataset (``normalize=True``; e.g. MNIST 0.1307 / 0.3081 as
in the reference Colab of [Han et al. 2022]), so the train and test splits get the same affine map.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from nclab.data.augment import apply_transform
from nclab.data.digits import load_digits
from nclab.data.errors import CorruptDatasetError, DatasetNotFoundError
from nclab.data.formats import read_cifar_batch, read_idx, read_stl10, read_svhn_mat
from nclab.validation import unit_rows

__all__ = [
    "DATASETS",
    "ArrayDataset",
    "balanced_subset",
    "candidate_folders",
    "dataset_source",
    "digits_split_indices",
    "find_dataset_files",
    "load",
    "normalization",
]

SYSTEM_DATA = Path("/usr/share/datasets")

# Conventional per-channel (mean, std) of the [0, 1]-scaled training images.
_NORM: dict[str, tuple[tuple[float, ...], tuple[float, ...]]] = {
    "mnist": ((0.1307,), (0.3081,)),
    "fashion-mnist": ((0.2860,), (0.3530,)),
    "cifar10": ((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)),
    "cifar100": ((0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762)),
    "svhn": ((0.4377, 0.4438, 0.4728), (0.1980, 0.2010, 0.1970)),
    "stl10": ((0.4467, 0.4398, 0.4066), (0.2603, 0.2566, 0.2713)),
}


def normalization(name: str) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """The conventional per-channel ``(mean, std)`` of dataset ``name``'s [0, 1]-scaled training images, the
    constants ``load(..., normalize=True)`` standardises with (for a :class:`~nclab.data.augment.Normalize` at
    the end of an augmentation pipeline run on ``load(..., normalize=False)``).

    Parameters
    ----------
    name : str
        An image dataset with constants: ``mnist``, ``fashion-mnist``, ``cifar10``, ``cifar100``, ``svhn``,
        ``stl10``.

    Returns
    -------
    tuple of (tuple of float, tuple of float)
        ``(mean, std)``, one value per channel (1 for grey-scale, 3 for RGB).

    Raises
    ------
    ValueError
        If ``name`` has no constants (``digits``, ``gaussian``, ``features`` are used as stored).

    Examples
    --------
    >>> normalization("mnist")
    ((0.1307,), (0.3081,))
    """
    if name not in _NORM:
        raise ValueError(f"no normalisation constants for {name!r}; datasets with constants: {', '.join(_NORM)}")
    return _NORM[name]


@dataclass
class ArrayDataset(torch.utils.data.Dataset):
    """One split of a dataset held in memory: ``x`` float32 ``(N, *input_shape)``, ``y`` int64 ``(N,)``.

    ``transform`` (optional, a callable ``(x, generator) -> tensor`` of :mod:`nclab.data.augment`) is applied
    by ``__getitem__`` to the one input ``x[i]`` with :func:`nclab.data.rng.item_generator` ``(seed, epoch,
    i)``; ``set_epoch`` moves to the next epoch's draws. ``x`` itself always holds the untransformed inputs
    (what collapse is measured on), and without a transform items are ``(x[i], y[i])`` exactly. A loop that
    slices batches itself applies the transform to the batch: ``ds.transform(ds.x[idx].to(device),
    generator)``.

    Parameters
    ----------
    x : torch.Tensor, shape (N, ...)
        The inputs, float32: ``(N, *input_shape)``.
    y : torch.Tensor, shape (N,)
        Class indices, int64, in ``0 .. K - 1``.
    K : int
        ``K``, the number of classes (a class may have no sample in a subset).
    name : str
        The dataset's name, for messages and ``repr``.
    split : str
        The split's name.
    info : dict, default={}
        How the split was loaded (root, subset, seed, padding).
    transform : callable, optional
        ``(x, generator) -> tensor``, applied per item by ``__getitem__``.
    seed : int, default=0
        Seed of the per-item augmentation.

    Raises
    ------
    ValueError
        If ``x`` and ``y`` have different numbers of rows.
    TypeError
        If ``transform`` is given and not callable.

    See Also
    --------
    load : a dataset's split from local files.

    Examples
    --------
    >>> ds = ArrayDataset(torch.zeros(4, 2), torch.tensor([0, 1, 1, 2]), 3, "toy", "train")
    >>> len(ds), ds.input_shape, ds.class_counts.tolist(), ds[2][1].item()
    (4, (2,), [1, 2, 1], 1)
    """

    x: torch.Tensor
    y: torch.Tensor
    K: int
    name: str
    split: str
    info: dict[str, Any] = field(default_factory=dict)
    transform: Any = None
    seed: int = 0
    epoch: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        if self.x.shape[0] != self.y.shape[0]:
            raise ValueError(f"{self.name}/{self.split}: {self.x.shape[0]} inputs but {self.y.shape[0]} labels")
        if self.transform is not None and not callable(self.transform):
            raise TypeError(f"transform must be callable (x, generator) -> tensor, got {self.transform!r}")

    def __len__(self) -> int:
        return int(self.y.shape[0])

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self.transform is None:
            return self.x[i], self.y[i]
        index = int(i) % len(self)
        return apply_transform(self.transform, self.x[index], self.seed, self.epoch, index), self.y[index]

    def set_epoch(self, epoch: int) -> None:
        """Draw the augmentation of epoch ``epoch`` in ``__getitem__``."""
        if int(epoch) < 0:
            raise ValueError(f"epoch must be >= 0, got {epoch}")
        self.epoch = int(epoch)

    def with_transform(self, transform: Any, *, seed: int | None = None) -> ArrayDataset:
        """The same tensors (shared, not copied) with another ``transform`` (and augmentation ``seed``)."""
        return ArrayDataset(
            self.x,
            self.y,
            self.K,
            self.name,
            self.split,
            dict(self.info),
            transform,
            self.seed if seed is None else int(seed),
        )

    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(self.x.shape[1:])

    @property
    def class_counts(self) -> np.ndarray:
        return np.bincount(self.y.numpy(), minlength=self.K)

    def __repr__(self) -> str:
        return f"ArrayDataset({self.name}/{self.split}: N={len(self)}, input_shape={self.input_shape}, K={self.K})"


# ---------------------------------------------------------------------------------------------- helpers
def balanced_subset(y: np.ndarray, per_class: int, K: int, seed: int = 0) -> np.ndarray:
    """Indices of ``per_class`` samples of every class, drawn without replacement with
    ``numpy.random.default_rng(seed)`` (one permutation per class, in class order), returned sorted.

    Parameters
    ----------
    y : numpy.ndarray, shape (N,)
        Class indices.
    per_class : int
        ``n``, the samples kept per class, ``n >= 1``.
    K : int
        ``K``: classes ``0 .. K - 1`` are drawn from.
    seed : int, default=0
        Seed of the draw.

    Returns
    -------
    numpy.ndarray of int
        ``K n`` sorted indices into ``y``, ``n`` of each class.

    Raises
    ------
    ValueError
        If ``per_class < 1`` or a class has fewer than ``per_class`` samples.

    Examples
    --------
    >>> y = np.array([0, 1, 0, 1, 0, 1, 2, 2])
    >>> idx = balanced_subset(y, 2, 3, seed=0)
    >>> np.bincount(y[idx]).tolist(), np.array_equal(idx, balanced_subset(y, 2, 3, seed=0))
    ([2, 2, 2], True)
    """
    if per_class < 1:
        raise ValueError(f"per_class must be >= 1, got {per_class}")
    rng = np.random.default_rng(seed)
    picks = []
    for k in range(K):
        idx = np.flatnonzero(y == k)
        if idx.size < per_class:
            raise ValueError(f"per_class={per_class}, but class {k} has only {idx.size} samples in this split")
        picks.append(idx[rng.permutation(idx.size)[:per_class]])
    return np.sort(np.concatenate(picks))


def digits_split_indices(y: np.ndarray, split: str) -> np.ndarray:
    """The fixed stratified split of the digits set: within each class, in file order, every 4th sample
    (positions 3, 7, 11, ...) is test, the rest train; 1,352 train / 445 test images, classes balanced to
    within one sample. No RNG is involved, so it never changes.

    Parameters
    ----------
    y : numpy.ndarray, shape (N,)
        The labels, in file order.
    split : {"train", "test"}
        Which side; anything but ``"test"`` is the training side.

    Returns
    -------
    numpy.ndarray of int
        Sorted indices into ``y``.

    Examples
    --------
    >>> digits_split_indices(np.array([0, 0, 0, 0, 1, 1, 1, 1, 0]), "test").tolist()
    [3, 7]
    >>> y = load_digits()[1]
    >>> len(digits_split_indices(y, "train")), len(digits_split_indices(y, "test"))
    (1352, 445)
    """
    pos = np.zeros_like(y)
    for k in np.unique(y):
        idx = np.flatnonzero(y == k)
        pos[idx] = np.arange(idx.size)
    test = pos % 4 == 3
    return np.flatnonzero(test if split == "test" else ~test)


def candidate_folders(name: str, root: str | Path | None) -> list[Path]:
    """Where dataset ``name`` may be, in order: ``root`` and ``root/<name>`` when ``root`` is given; else
    ``$NCLAB_DATA/<name>``, ``$NCLAB_DATA`` (when set) and ``/usr/share/datasets/<name>``."""
    if root is not None:
        root = Path(root).expanduser()
        return [root, root / name]
    out = []
    env = os.environ.get("NCLAB_DATA")
    if env:
        out += [Path(env).expanduser() / name, Path(env).expanduser()]
    out.append(SYSTEM_DATA / name)
    return out


def _first_existing(folder: Path, names: Sequence[str]) -> Path | None:
    for n in names:
        p = folder / n
        if p.is_file():
            return p
    return None


def _locate(
    name: str, root: str | Path | None, subdirs: Sequence[str], required: Sequence[Sequence[str]]
) -> tuple[Path, list[Path]]:
    """The first folder (candidate or candidate/subdir) that holds one of each group of ``required`` names."""
    looked = []
    for cand in candidate_folders(name, root):
        for sub in ("", *subdirs):
            folder = cand / sub if sub else cand
            looked.append(folder)
            files = [f for f in (_first_existing(folder, group) for group in required) if f is not None]
            if len(files) == len(required):
                return folder, files
    spec = _SPECS[name]
    raise DatasetNotFoundError(name, list(dict.fromkeys(looked)), spec.layout, spec.how_to_get)


def _pad(x: torch.Tensor, pad_to: int, name: str) -> torch.Tensor:
    """Zero-pad ``(N, C, H, W)`` images to ``pad_to x pad_to``, centred (odd remainders go right / bottom)."""
    if x.ndim != 4:
        raise ValueError(f"pad_to applies to images (N, C, H, W); {name} has inputs of shape {tuple(x.shape[1:])}")
    h, w = x.shape[-2:]
    if pad_to < max(h, w):
        raise ValueError(f"pad_to={pad_to} is smaller than the {h}x{w} images of {name}")
    top, left = (pad_to - h) // 2, (pad_to - w) // 2
    return torch.nn.functional.pad(x, (left, pad_to - w - left, top, pad_to - h - top))


def _to_float(images: np.ndarray, name: str, pad_to: int | None, normalize: bool) -> torch.Tensor:
    x = torch.from_numpy(np.ascontiguousarray(images)).to(torch.float32).div_(255.0)
    if pad_to is not None:
        x = _pad(x, pad_to, name)
    if normalize:
        mean, std = _NORM[name]
        m = torch.tensor(mean, dtype=torch.float32).view(1, -1, 1, 1)
        s = torch.tensor(std, dtype=torch.float32).view(1, -1, 1, 1)
        x = (x - m) / s
    return x.contiguous()


# ---------------------------------------------------------------------------------------------- datasets
@dataclass(frozen=True)
class _Spec:
    splits: tuple[str, ...]
    K: int | None
    layout: str
    how_to_get: str
    reader: Callable[..., tuple[np.ndarray, np.ndarray, int]]


def _read_digits(split: str, root: Any, opts: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, int]:
    X, y = load_digits(normalize=True)  # pixel values 0..16 -> [0, 1]
    idx = digits_split_indices(y, split)
    X = X[idx].reshape(-1, 1, 8, 8)
    return X.astype(np.float32), y[idx], 10


def _idx_reader(name: str) -> Callable[..., Any]:
    def read(split: str, root: Any, opts: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, int]:
        stem = "train" if split == "train" else "t10k"
        img_names = [f"{stem}-images-idx3-ubyte.gz", f"{stem}-images-idx3-ubyte", f"{stem}-images.idx3-ubyte"]
        lab_names = [f"{stem}-labels-idx1-ubyte.gz", f"{stem}-labels-idx1-ubyte", f"{stem}-labels.idx1-ubyte"]
        _, (ipath, lpath) = _locate(name, root, ("raw",), [img_names, lab_names])
        images, labels = read_idx(ipath), read_idx(lpath).astype(np.int64)
        if images.ndim != 3:
            raise CorruptDatasetError(ipath, f"expected a 3-D image array (N, H, W), header says {images.shape}")
        if labels.ndim != 1 or labels.shape[0] != images.shape[0]:
            raise CorruptDatasetError(lpath, f"{labels.shape} labels for {images.shape[0]} images in {ipath.name}")
        if labels.size and (labels.min() < 0 or labels.max() > 9):
            raise CorruptDatasetError(lpath, f"labels outside 0..9: [{labels.min()}, {labels.max()}]")
        return images[:, None], labels, 10

    return read


def _cifar_reader(name: str) -> Callable[..., Any]:
    def read(split: str, root: Any, opts: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, int]:
        if name == "cifar10":
            files = [f"data_batch_{i}" for i in range(1, 6)] if split == "train" else ["test_batch"]
            key, K = "labels", 10
            sub = ("cifar-10-batches-py",)
        else:
            files = ["train" if split == "train" else "test"]
            coarse = opts.pop("label", "fine") == "coarse"
            key, K = ("coarse_labels", 20) if coarse else ("fine_labels", 100)
            sub = ("cifar-100-python",)
        _, paths = _locate(name, root, sub, [[f] for f in files])
        parts = [read_cifar_batch(p, key) for p in paths]
        X = np.concatenate([p[0] for p in parts])
        y = np.concatenate([p[1] for p in parts])
        if y.size and (y.min() < 0 or y.max() >= K):
            raise CorruptDatasetError(paths[0].parent, f"labels outside 0..{K - 1}: [{y.min()}, {y.max()}]")
        return X, y, K

    return read


def _read_svhn(split: str, root: Any, opts: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, int]:
    _, (path,) = _locate("svhn", root, (), [[f"{split}_32x32.mat"]])
    X, y = read_svhn_mat(path)
    return X, y, 10


def _read_stl10(split: str, root: Any, opts: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, int]:
    _, (xp, yp) = _locate("stl10", root, ("stl10_binary",), [[f"{split}_X.bin"], [f"{split}_y.bin"]])
    X, y = read_stl10(xp, yp)
    assert y is not None
    return X, y, 10


def _read_gaussian(split: str, root: Any, opts: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, int]:
    K = int(opts.pop("K", 10))
    d = int(opts.pop("d", 32))
    n = int(opts.pop("n", 100))
    sep = float(opts.pop("separation", 3.0))
    seed = int(opts.pop("_seed"))
    if K < 2 or d < 1 or n < 1:
        raise ValueError(f"gaussian needs K >= 2, d >= 1, n >= 1; got K={K}, d={d}, n={n}")
    # class means: shared by the splits (seeded by `seed` alone); noise: seeded by (seed, split)
    g = np.random.default_rng([seed, 0]).standard_normal((K, d))
    means = sep * unit_rows(g, zero="raise", name="class means")
    rng = np.random.default_rng([seed, 1 + ("train", "test").index(split)])
    y = np.repeat(np.arange(K), n)
    X = means[y] + rng.standard_normal((K * n, d))
    return X.astype(np.float32), y.astype(np.int64), K


def _extraction(folder: Path) -> tuple[Any, Any]:
    """The features (its one layer, else its penultimate layer) and labels of the ``nclab extract`` folder
    ``folder``, as :func:`nclab.io.arrays.load_array` specs; ``(None, None)`` without an nclab manifest."""
    from nclab.io.manifest import MANIFEST_NAME, read_manifest

    found = read_manifest(folder)
    if found is None:
        return None, None
    layers = list(found.get("layers") or {})
    layer = layers[0] if len(layers) == 1 else found.get("penultimate")
    if layer not in layers:
        raise CorruptDatasetError(
            folder / MANIFEST_NAME, f"lists the layers {', '.join(layers)}: a probe folder holds one layer's features"
        )
    if (folder / "features.safetensors").is_file():
        return f"{folder / 'features.safetensors'}:{layer}", f"{folder / 'features.safetensors'}:labels"
    return folder / f"{layer}.npy", folder / "labels.npy"


def _read_features(split: str, root: Any, opts: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, int]:
    from nclab.io.arrays import load_array

    if root is None:
        raise ValueError("dataset 'features' needs root=<folder holding {split}_features.npy and {split}_labels.npy>")
    folder = Path(root).expanduser()
    feats = _first_existing(folder, [f"{split}_features.{s}" for s in ("npy", "pt", "pth")])
    labs = _first_existing(folder, [f"{split}_labels.{s}" for s in ("npy", "pt", "pth")])
    if feats is None and labs is None and (folder / split).is_dir():  # `nclab extract --layout probe`
        feats, labs = _extraction(folder / split)
    if feats is None or labs is None:
        spec = _SPECS["features"]
        raise DatasetNotFoundError("features", [folder], spec.layout, spec.how_to_get)
    try:
        X = np.asarray(load_array(feats, mmap=False), dtype=np.float32)
        y = np.asarray(load_array(labs, mmap=False))
    except (ValueError, KeyError) as err:
        raise CorruptDatasetError(feats, str(err)) from err
    if X.ndim != 2:
        raise CorruptDatasetError(feats, f"features must be 2-D (N, d), got shape {X.shape}")
    if y.ndim != 1 or y.shape[0] != X.shape[0] or not np.issubdtype(y.dtype, np.integer):
        raise CorruptDatasetError(labs, f"labels must be integer (N,) with N = {X.shape[0]}, got {y.dtype} {y.shape}")
    if y.size and int(y.min()) < 0:
        raise CorruptDatasetError(labs, f"labels must lie in 0..K-1, got a label {int(y.min())}")
    if not np.isfinite(X).all():
        bad = np.argwhere(~np.isfinite(X))[0]
        raise CorruptDatasetError(
            feats, f"features contain NaN or inf (first at row {bad[0]}, column {bad[1]}; {X.dtype} after loading)"
        )
    K = int(opts.pop("K", 0)) or int(y.max()) + 1
    if y.size and int(y.max()) >= K:
        raise CorruptDatasetError(labs, f"labels must lie in 0..{K - 1} (K={K}), got a label {int(y.max())}")
    return X, y.astype(np.int64), K


_IDX_LAYOUT = (
    "train-images-idx3-ubyte[.gz], train-labels-idx1-ubyte[.gz], t10k-images-idx3-ubyte[.gz], "
    "t10k-labels-idx1-ubyte[.gz]"
)
_SPECS: dict[str, _Spec] = {
    "digits": _Spec(("train", "test"), 10, "embedded in nclab", "always available", _read_digits),
    "mnist": _Spec(
        ("train", "test"),
        10,
        _IDX_LAYOUT,
        "copy the four IDX files of MNIST (LeCun et al.) into the folder, e.g. from the Debian package "
        "'mnist' or any mirror of the original files",
        _idx_reader("mnist"),
    ),
    "fashion-mnist": _Spec(
        ("train", "test"),
        10,
        _IDX_LAYOUT,
        "apt-get install dataset-fashion-mnist (Debian; installs to /usr/share/datasets/fashion-mnist), or copy "
        "the four IDX files of Zalando's Fashion-MNIST there or into $NCLAB_DATA/fashion-mnist",
        _idx_reader("fashion-mnist"),
    ),
    "cifar10": _Spec(
        ("train", "test"),
        10,
        "cifar-10-batches-py/{data_batch_1..5, test_batch} (the 'CIFAR-10 python version' archive, extracted)",
        "extract cifar-10-python.tar.gz (from the CIFAR page of the University of Toronto) into the folder",
        _cifar_reader("cifar10"),
    ),
    "cifar100": _Spec(
        ("train", "test"),
        None,
        "cifar-100-python/{train, test} (the 'CIFAR-100 python version' archive, extracted)",
        "extract cifar-100-python.tar.gz (from the CIFAR page of the University of Toronto) into the folder",
        _cifar_reader("cifar100"),
    ),
    "svhn": _Spec(
        ("train", "test", "extra"),
        10,
        "{train,test,extra}_32x32.mat (SVHN format 2, cropped digits)",
        "copy the cropped-digits .mat files of SVHN (Stanford) into the folder",
        _read_svhn,
    ),
    "stl10": _Spec(
        ("train", "test"),
        10,
        "stl10_binary/{train_X.bin, train_y.bin, test_X.bin, test_y.bin}",
        "extract stl10_binary.tar.gz (Coates et al., Stanford) into the folder",
        _read_stl10,
    ),
    "gaussian": _Spec(
        ("train", "test"),
        None,
        "synthetic: options K, d, n (per class), separation (norm of each class mean; unit noise)",
        "always available",
        _read_gaussian,
    ),
    "features": _Spec(
        ("train", "test"),
        None,
        "root/{split}_features.npy (N, d) float and root/{split}_labels.npy (N,) int (.pt also accepted), or "
        "root/{split}/, a folder of `nclab extract` (as `nclab extract --layout probe` writes)",
        "save precomputed features there (e.g. with numpy.save)",
        _read_features,
    ),
}

#: Names accepted by :func:`load`.
DATASETS: tuple[str, ...] = tuple(_SPECS)


def _idx_files(stem: str) -> list[list[str]]:
    return [[f"{stem}-{kind}-idx{n}-ubyte.gz", f"{stem}-{kind}-idx{n}-ubyte", f"{stem}-{kind}.idx{n}-ubyte"]
            for kind, n in (("images", 3), ("labels", 1))]  # fmt: skip


#: Per dataset read from files: the sub-folders its files may sit in and the files of its train and test splits
#: (one name of each group), as the readers above look for them.
_FILES: dict[str, tuple[tuple[str, ...], list[list[str]]]] = {
    "mnist": (("raw",), _idx_files("train") + _idx_files("t10k")),
    "fashion-mnist": (("raw",), _idx_files("train") + _idx_files("t10k")),
    "cifar10": (("cifar-10-batches-py",), [[f"data_batch_{i}"] for i in range(1, 6)] + [["test_batch"]]),
    "cifar100": (("cifar-100-python",), [["train"], ["test"]]),
    "svhn": ((), [["train_32x32.mat"], ["test_32x32.mat"]]),
    "stl10": (("stl10_binary",), [[f"{s}_{x}.bin"] for s in ("train", "test") for x in ("X", "y")]),
}


def dataset_source(name: str) -> tuple[str, str]:
    """``(layout, how to get it)`` of dataset ``name`` (one of :data:`DATASETS`), as a missing dataset's error
    says them."""
    if name not in _SPECS:
        raise ValueError(f"unknown dataset {name!r}; known: {', '.join(DATASETS)}")
    return _SPECS[name].layout, _SPECS[name].how_to_get


def find_dataset_files(name: str, root: str | Path | None = None) -> Path | None:
    """The folder holding dataset ``name``'s train and test files, found as :func:`load` finds them without reading
    them (``None`` for the datasets that need no files: ``digits``, ``gaussian``, ``features``); raises
    :class:`~nclab.data.errors.DatasetNotFoundError` when they are not there."""
    if name not in _SPECS:
        raise ValueError(f"unknown dataset {name!r}; known: {', '.join(DATASETS)}")
    if name not in _FILES:
        return None
    subdirs, groups = _FILES[name]
    folder, _ = _locate(name, root, subdirs, groups)
    return folder


def _select_classes(
    X: np.ndarray, y: np.ndarray, K: int, classes: Any, name: str
) -> tuple[np.ndarray, np.ndarray, int]:
    keep = [int(c) for c in classes]
    if not keep or len(set(keep)) != len(keep) or min(keep) < 0 or max(keep) >= K:
        raise ValueError(f"classes must be distinct labels of {name!r} in [0, {K}), got {list(classes)}")
    relabel = np.full(K, -1, dtype=np.int64)
    relabel[keep] = np.arange(len(keep))
    mask = relabel[y] >= 0
    return X[mask], relabel[y[mask]], len(keep)


def load(
    name: str,
    split: str = "train",
    root: str | Path | None = None,
    per_class: int | None = None,
    seed: int = 0,
    *,
    pad_to: int | None = None,
    normalize: bool = True,
    transform: Any = None,
    **options: Any,
) -> ArrayDataset:
    """Load one split of dataset ``name`` as an in-memory :class:`ArrayDataset`.

    Parameters
    ----------
    name : str
        One of :data:`DATASETS`: ``digits`` (embedded; 8x8, 1,352 train / 445 test, see
        :func:`digits_split_indices`), ``mnist``, ``fashion-mnist`` (IDX, gz or not), ``cifar10``, ``cifar100``
        (python pickles; ``label="coarse"`` for the 20 super-classes), ``svhn`` (.mat; ``split="extra"`` too),
        ``stl10`` (binary), ``gaussian`` (options ``K``, ``d``, ``n`` per class, ``separation``), ``features``
        (precomputed arrays in ``root``).
    split : {"train", "test"}, default="train"
        The split (``svhn`` also ``"extra"``).
    root : str or pathlib.Path, optional
        Where the files are; default ``$NCLAB_DATA/<name>``, then ``/usr/share/datasets/<name>``.
    per_class : int, optional
        Keep a balanced random subset of this many samples per class (``seed`` picks them).
    seed : int, default=0
        Seed of the subsample (and of the ``gaussian`` mixture).
    classes : list of int, optional
        A keyword of ``options``, for any dataset.
        Keep only these classes, relabelled ``0 .. len(classes) - 1`` in the order given (a pretraining task on
        some classes, a downstream task on the others).
    pad_to : int, optional
        Zero-pad images to ``pad_to x pad_to`` before normalising ([Han et al. 2022]: 28 -> 32 for (Fashion-)MNIST).
    normalize : bool, default=True
        Standardise image channels with the dataset's conventional mean / std (images only).
    transform : callable ``(x, generator) -> tensor``, optional
        Augmentation applied per item by ``__getitem__`` (see :class:`ArrayDataset`; seeded by ``seed``); ``x``
        keeps the untransformed inputs. For the recipes' black padding, load with ``normalize=False`` and end
        the pipeline with ``Normalize(*normalization(name))`` (e.g. :func:`nclab.data.augment.cifar_train_transform`).
    **options
        Dataset options: ``label`` (cifar100), ``K``, ``d``, ``n``, ``separation`` (gaussian), ``classes``.

    Returns
    -------
    ArrayDataset
        ``x`` float32 ``(N, *input_shape)`` (images ``(C, H, W)``), ``y`` int64 ``(N,)``, ``K`` classes.

    Raises
    ------
    ValueError
        An unknown dataset, split or option, or a ``per_class`` larger than a class.
    DatasetNotFoundError
        The files are in none of the folders looked in (named in the message, with how to get them).
    CorruptDatasetError
        A file is there but unreadable or inconsistent.

    Examples
    --------
    >>> ds = load("digits", "train", per_class=5, seed=0)
    >>> len(ds), ds.K, ds.input_shape, ds.class_counts.tolist()
    (50, 10, (1, 8, 8), [5, 5, 5, 5, 5, 5, 5, 5, 5, 5])
    >>> torch.equal(ds.x, load("digits", "train", per_class=5, seed=0).x)  # seeded
    True
    >>> load("gaussian", K=3, d=4, n=5)
    ArrayDataset(gaussian/train: N=15, input_shape=(4,), K=3)
    """
    if name not in _SPECS:
        raise ValueError(f"unknown dataset {name!r}; known: {', '.join(DATASETS)}")
    spec = _SPECS[name]
    if split not in spec.splits:
        raise ValueError(f"dataset {name!r} has splits {spec.splits}, not {split!r}")
    options = dict(options)
    classes = options.pop("classes", None)
    opts = dict(options, _seed=seed) if name == "gaussian" else dict(options)
    X, y, K = spec.reader(split, root, opts)
    opts.pop("_seed", None)
    if opts:
        raise ValueError(f"unknown option(s) for dataset {name!r}: {sorted(opts)}")
    if classes is not None:
        X, y, K = _select_classes(X, y, K, classes, name)
    if per_class is not None:
        idx = balanced_subset(y, int(per_class), K, seed)
        X, y = X[idx], y[idx]
    if X.dtype == np.uint8:  # raw image bytes
        x = _to_float(X, name, pad_to, normalize)
    else:  # digits (already in [0, 1]), gaussian, features: used as stored
        x = torch.from_numpy(np.ascontiguousarray(X, dtype=np.float32))
        if pad_to is not None:
            x = _pad(x, pad_to, name).contiguous()
    info = {"root": None if root is None else str(root), "per_class": per_class, "seed": seed, "pad_to": pad_to}
    return ArrayDataset(
        x=x,
        y=torch.from_numpy(np.ascontiguousarray(y, dtype=np.int64)),
        K=K,
        name=name,
        split=split,
        info=info,
        transform=transform,
        seed=seed,
    )
