"""``open_images(name, split, root=None, ...)``: every streamed image dataset by name, found like :func:`load`'s.

Root resolution is :func:`nclab.data.loaders.candidate_folders` (``root`` and ``root/<name>``; else
``$NCLAB_DATA/<name>``, ``$NCLAB_DATA``, ``/usr/share/datasets/<name>``), and inside each candidate the folder
the dataset's archive extracts to (``oxford-iiit-pet``, ``tiny-imagenet-200``, Kaggle's ``ILSVRC/Data/CLS-LOC``,
...). The first folder that has the dataset's marker files is read; when none has, :class:`DatasetNotFoundError`
lists every folder tried, the layout expected and how to get the files. Nothing is ever downloaded.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nclab.data import probe_sets
from nclab.data.errors import DatasetNotFoundError
from nclab.data.folders import ImageFiles, read_image_folder, read_imagenet, read_tiny_imagenet
from nclab.data.loaders import DATASETS, candidate_folders, dataset_source, find_dataset_files

__all__ = ["IMAGE_DATASETS", "IMAGE_SPLITS", "describe_dataset", "find_dataset", "open_images"]


@dataclass(frozen=True)
class _Spec:
    reader: Callable[..., ImageFiles]
    splits: tuple[str, ...]
    subfolders: tuple[str, ...]
    marker: Callable[[Path, str], bool]
    layout: str
    how_to_get: str


def _has(*parts: str) -> Callable[[Path, str], bool]:
    """Marker: every part exists in the folder (a trailing ``/`` means a folder, else a file)."""

    def check(folder: Path, split: str) -> bool:
        return all((folder / p).is_dir() if p.endswith("/") else (folder / p).is_file() for p in parts)

    return check


_SPECS: dict[str, _Spec] = {
    "image-folder": _Spec(
        lambda folder, split, **kw: read_image_folder(folder, split=split, **kw),
        ("train", "val", "test"),
        ("{split}",),
        lambda folder, split: folder.is_dir() and not (folder / split).is_dir(),
        "root/<class>/<images> (or root/<split>/<class>/<images>)",
        "one sub-folder per class holding its images",
    ),
    "imagenet": _Spec(
        read_imagenet,
        ("train", "val"),
        ("ILSVRC/Data/CLS-LOC", "ILSVRC2012", "imagenet"),
        lambda folder, split: (folder / split).is_dir(),
        "train/<wnid>/*.JPEG; val/<wnid>/*.JPEG, or val/*.JPEG with LOC_val_solution.csv or the ILSVRC2012 devkit",
        "extract ILSVRC2012_img_train.tar (and each class tar inside) and ILSVRC2012_img_val.tar from image-net.org, "
        "or Kaggle's ImageNet Object Localization Challenge archive",
    ),
    "tiny-imagenet": _Spec(
        read_tiny_imagenet,
        ("train", "val"),
        ("tiny-imagenet-200",),
        _has("wnids.txt"),
        "wnids.txt, train/<wnid>/images/*.JPEG, val/images/*.JPEG, val/val_annotations.txt",
        "extract tiny-imagenet-200.zip (Stanford CS231n)",
    ),
    "oxford-pets": _Spec(
        probe_sets.read_oxford_pets,
        ("trainval", "test"),
        ("oxford-iiit-pet",),
        _has("annotations/", "images/"),
        "images/*.jpg, annotations/{trainval,test}.txt",
        "extract images.tar.gz and annotations.tar.gz of the Oxford-IIIT Pet dataset (Oxford VGG)",
    ),
    "flowers102": _Spec(
        probe_sets.read_flowers102,
        ("train", "val", "test"),
        ("flowers-102", "flowers102"),
        _has("setid.mat"),
        "jpg/image_*.jpg, imagelabels.mat, setid.mat",
        "put 102flowers.tgz (extracted), imagelabels.mat and setid.mat of Oxford Flowers-102 (Oxford VGG) there",
    ),
    "fgvc-aircraft": _Spec(
        probe_sets.read_fgvc_aircraft,
        ("train", "val", "trainval", "test"),
        ("fgvc-aircraft-2013b",),
        _has("data/"),
        "data/images/*.jpg, data/variants.txt, data/images_variant_{train,val,trainval,test}.txt",
        "extract fgvc-aircraft-2013b.tar.gz (Oxford VGG)",
    ),
    "stanford-cars": _Spec(
        probe_sets.read_stanford_cars,
        ("train", "test"),
        ("stanford_cars", "stanford-cars"),
        _has("devkit/"),
        "devkit/{cars_meta.mat, cars_train_annos.mat}, cars_train/, cars_test/, cars_test_annos_withlabels.mat",
        "the Stanford Cars images, devkit and cars_test_annos_withlabels.mat (e.g. from Kaggle's copy)",
    ),
    "dtd": _Spec(
        probe_sets.read_dtd,
        ("train", "val", "test"),
        ("dtd", "dtd/dtd"),
        _has("images/", "labels/"),
        "images/<class>/*.jpg, labels/{train,val,test}{1..10}.txt",
        "extract dtd-r1.0.1.tar.gz (Oxford VGG)",
    ),
    "food101": _Spec(
        probe_sets.read_food101,
        ("train", "test"),
        ("food-101",),
        _has("meta/", "images/"),
        "images/<class>/*.jpg, meta/{train,test}.txt, meta/classes.txt",
        "extract food-101.tar.gz (ETH Zurich)",
    ),
    "caltech101": _Spec(
        probe_sets.read_caltech101,
        ("train", "test"),
        ("caltech101", "caltech-101"),
        _has("101_ObjectCategories/"),
        "101_ObjectCategories/<class>/image_*.jpg",
        "extract 101_ObjectCategories.tar.gz (Caltech)",
    ),
    "sun397": _Spec(
        probe_sets.read_sun397,
        ("train", "test"),
        ("SUN397", "sun397"),
        _has("ClassName.txt"),
        "ClassName.txt, <letter>/<class>/sun_*.jpg, Partitions/{Training,Testing}_01..10.txt",
        "extract SUN397.tar.gz and Partitions.zip (Princeton)",
    ),
}

#: Names accepted by :func:`open_images`.
IMAGE_DATASETS: tuple[str, ...] = tuple(_SPECS)

#: The splits each streamed dataset accepts (its official ones; ``image-folder``: train, val, test).
IMAGE_SPLITS: dict[str, tuple[str, ...]] = {name: spec.splits for name, spec in _SPECS.items()}


def _folder(name: str, split: str, root: str | Path | None) -> Path:
    spec, looked = _SPECS[name], []
    for cand in candidate_folders(name, root):
        for sub in ("", *(s.format(split=split) for s in spec.subfolders)):
            folder = cand / sub if sub else cand
            looked.append(folder)
            if spec.marker(folder, split):
                return folder
    raise DatasetNotFoundError(name, list(dict.fromkeys(looked)), spec.layout, spec.how_to_get)


def find_dataset(name: str, split: str | None = None, root: str | Path | None = None) -> Path | None:
    """The folder dataset ``name`` (in memory: :data:`nclab.data.DATASETS`, or streamed: :data:`IMAGE_DATASETS`) is
    read from, found as :func:`nclab.data.load` / :func:`open_images` find it, without reading its files (the
    streamed ones' ``split``, default its first split); ``None`` for the datasets that need no files (``digits``,
    ``gaussian``, ``features``). Raises :class:`DatasetNotFoundError` (where nclab looked, the layout expected,
    how to get the files) when it is not there."""
    if name in _SPECS:
        return _folder(name, split or _SPECS[name].splits[0], root)
    return find_dataset_files(name, root)


def describe_dataset(name: str) -> dict[str, Any]:
    """What dataset ``name`` needs on disk: ``{"name", "where", "layout", "how_to_get"}``, ``where`` the folders
    nclab looks in now (``$NCLAB_DATA/<name>``, ``$NCLAB_DATA``, ``/usr/share/datasets/<name>``).

    Examples
    --------
    >>> describe_dataset("digits")["how_to_get"]
    'always available'
    """
    if name in _SPECS:
        layout, how = _SPECS[name].layout, _SPECS[name].how_to_get
    elif name in DATASETS:
        layout, how = dataset_source(name)
    else:
        raise ValueError(f"unknown dataset {name!r}; in memory: {', '.join(DATASETS)}; streamed: "
                         f"{', '.join(_SPECS)}")  # fmt: skip
    return {"name": name, "where": [str(p) for p in candidate_folders(name, None)], "layout": layout,
            "how_to_get": how}  # fmt: skip


def open_images(
    name: str,
    split: str = "train",
    root: str | Path | None = None,
    *,
    transform: Any = None,
    classes: Iterable[int | str] | None = None,
    per_class: int | None = None,
    seed: int = 0,
    mode: str = "RGB",
    **options: Any,
) -> ImageFiles:
    """One split of the streamed image dataset ``name`` as :class:`~nclab.data.folders.ImageFiles`.

    Parameters
    ----------
    name : str
        One of :data:`IMAGE_DATASETS`: ``image-folder`` (any ``root/<class>/<images>``; ``root/<split>/`` is
        tried too), ``imagenet``, ``tiny-imagenet``, and the probe datasets of :mod:`nclab.data.probe_sets`.
    split : str, default="train"
        The dataset's official splits (``imagenet``: train / val; ``oxford-pets``: trainval / test; ...).
    root : str or pathlib.Path, optional
        Where the dataset is (its folder or the one above); default ``$NCLAB_DATA/<name>``, then
        ``/usr/share/datasets/<name>``.
    transform : callable ``(x, generator) -> tensor``, optional
        Applied per item to the decoded ``uint8 (C, H, W)`` image (see :mod:`nclab.data.augment`).
    classes : list of int or str, optional
        Keep only these classes, relabelled in the order given (:meth:`ImageFiles.select`).
    per_class : int, optional
        A balanced subset of this many images per class, drawn with ``seed``.
    seed : int, default=0
        Seed of the subset and of the per-item augmentation.
    mode : {"RGB", "L"}, default="RGB"
        Pillow mode the images are converted to (3 channels, or 1).
    **options
        Reader options: ``partition`` (dtd, sun397), ``annotation_level`` (fgvc-aircraft), ``train_per_class``
        and ``split_seed`` (caltech101), ``extensions`` (image-folder).

    Returns
    -------
    ImageFiles
        The split's files with integer labels (``targets (N,)``, ``classes``), decoded one image at a time.

    Raises
    ------
    ValueError
        An unknown dataset or split, or ``image-folder`` without ``root``.
    DatasetNotFoundError
        The dataset is in none of the folders looked in (named in the message, with how to get it).
    CorruptDatasetError
        The files are there but inconsistent (e.g. a class folder without images).

    See Also
    --------
    nclab.data.load : the in-memory datasets.

    Examples
    --------
    >>> import tempfile, numpy as np
    >>> from PIL import Image
    >>> tmp = tempfile.TemporaryDirectory()
    >>> for c in ("ant", "bee", "cat"):
    ...     (Path(tmp.name) / "val" / c).mkdir(parents=True)
    ...     for i in range(2):
    ...         Image.fromarray(np.zeros((5, 5), np.uint8)).save(Path(tmp.name) / "val" / c / f"{i}.png")
    >>> ds = open_images("image-folder", "val", tmp.name, classes=["cat", "ant"], mode="L")
    >>> len(ds), ds.classes, ds.targets.tolist(), tuple(ds[0][0].shape)
    (4, ['cat', 'ant'], [1, 1, 0, 0], (1, 5, 5))
    >>> tmp.cleanup()
    """
    if name not in _SPECS:
        raise ValueError(f"unknown image dataset {name!r}; known: {', '.join(IMAGE_DATASETS)}")
    spec = _SPECS[name]
    if name == "image-folder" and root is None:
        raise ValueError("image dataset 'image-folder' needs root=<folder of class folders, or of <split>/ folders>")
    if split not in spec.splits:
        raise ValueError(f"image dataset {name!r} has splits {spec.splits}, not {split!r}")
    folder = _folder(name, split, root)
    ds = spec.reader(folder, split, transform=transform, mode=mode, seed=seed, **options)
    if classes is not None or per_class is not None:
        ds = ds.select(classes, per_class, seed)
    return ds
