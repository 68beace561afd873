"""The downstream datasets of the linear-probe transfer study [Xu & Liu 2023, Sec. 6.3; Kornblith et al. 2019],
read from their official split files as streamed :class:`~nclab.data.folders.ImageFiles`.

Each reader takes the dataset's own folder (the one its archive extracts to; :func:`nclab.data.catalog.
open_images` finds it from a root) and returns the images of one split with labels ``0 .. K - 1``; every
file a split file lists must exist (:func:`~nclab.data.folders.check_listed_files`), and a malformed line
raises :class:`CorruptDatasetError` naming the file and the line, and so does an image or a class listed twice
(:func:`~nclab.data.folders.check_unique_entries`: a second line would relabel or double-count the image).

=============  ============================================================  ============================  ===
dataset        layout (inside the folder)                                    splits                        K
=============  ============================================================  ============================  ===
oxford-pets    ``images/<id>.jpg``, ``annotations/{trainval,test}.txt``      trainval, test                37
               (``<id> <class 1..37> <species> <breed>``)
flowers102     ``jpg/image_<05d>.jpg``, ``imagelabels.mat`` (``labels``,     train, val, test              102
               1..102), ``setid.mat`` (``trnid``, ``valid``, ``tstid``)
fgvc-aircraft  ``data/images/<id>.jpg``, ``data/variants.txt``,              train, val, trainval, test    100
               ``data/images_variant_<split>.txt`` (``<id> <variant>``)
stanford-cars  ``devkit/{cars_meta.mat, cars_train_annos.mat}``,             train, test                   196
               ``cars_train/``, ``cars_test/``,
               ``cars_test_annos_withlabels.mat`` (``fname``, ``class``)
dtd            ``images/<class>/<name>.jpg``, ``labels/<split><1..10>.txt``  train, val, test (partition)  47
food101        ``images/<class>/<id>.jpg``, ``meta/{train,test}.txt``        train, test                   101
               (``<class>/<id>``), ``meta/classes.txt``
caltech101     ``101_ObjectCategories/<class>/*.jpg`` (no official split)    train, test                   101
sun397         ``<letter>/<class>/sun_*.jpg``, ``ClassName.txt``,            train, test (partition)       397
               ``Partitions/{Training,Testing}_<01..10>.txt``
=============  ============================================================  ============================  ===

Class order: the order of the dataset's own class list where it has one (Pets by class id, Flowers by label,
the Aircraft variants file, the Cars meta file, Food-101's ``classes.txt``, SUN397's ``ClassName.txt``), else
the sorted folder names (DTD, Caltech-101 without ``BACKGROUND_Google``), as torchvision's readers.

**Caltech-101 split rule** (the dataset has none; [Kornblith et al. 2019] draw 30 training images per class):
within each class, the image files sorted by name are permuted with ``numpy.random.default_rng([split_seed,
k])`` (``k`` the class index); the first ``train_per_class`` (default 30) are train, the rest test. The split
depends on ``split_seed`` (default 0) only, never on a training seed.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from nclab.data.errors import CorruptDatasetError, DatasetNotFoundError
from nclab.data.folders import IMG_EXTENSIONS, ImageFiles, check_listed_files, check_unique_entries
from nclab.validation import check_choice, check_int

__all__ = [
    "read_caltech101",
    "read_dtd",
    "read_fgvc_aircraft",
    "read_flowers102",
    "read_food101",
    "read_oxford_pets",
    "read_stanford_cars",
    "read_sun397",
]


def _lines(path: Path, dataset: str, folder: Path) -> list[tuple[int, str]]:
    """The non-blank, non-comment lines of a split or class file, each with its line number (1-based)."""
    if not path.is_file():
        raise DatasetNotFoundError(dataset, [folder], f"{path.relative_to(folder)} (split file)", _HOW[dataset])
    return [
        (n, line.strip())
        for n, line in enumerate(path.read_text().splitlines(), start=1)
        if line.strip() and not line.startswith("#")
    ]


def _class_list(path: Path, dataset: str, folder: Path) -> list[str]:
    """The lines of a class-name file, each name once."""
    entries = _lines(path, dataset, folder)
    check_unique_entries([c for _, c in entries], [n for n, _ in entries], path, what="class")
    return [c for _, c in entries]


def _loadmat(path: Path, dataset: str, folder: Path) -> dict[str, Any]:
    import scipy.io

    if not path.is_file():
        raise DatasetNotFoundError(dataset, [folder], f"{path.relative_to(folder)}", _HOW[dataset])
    try:
        return scipy.io.loadmat(path, squeeze_me=True)
    except Exception as err:  # scipy raises MatReadError / ValueError / TypeError on garbage
        raise CorruptDatasetError(path, f"not a readable .mat file ({type(err).__name__}: {err})") from err


def _mat_field(mat: dict[str, Any], key: str, path: Path) -> Any:
    if key not in mat:
        raise CorruptDatasetError(path, f"expected a variable {key!r}, found {sorted(k for k in mat if k[0] != '_')}")
    return mat[key]


def _build(
    paths: Sequence[Path],
    labels: Sequence[int] | np.ndarray,
    classes: Sequence[str],
    listing: Path,
    name: str,
    split: str,
    lines: Sequence[int] | None = None,
    **kw: Any,
) -> ImageFiles:
    """The split's :class:`ImageFiles`, each image listed once (``lines``: where each was listed, for the
    message; default the entry's position in the ``.mat`` array) and on disk."""
    where = list(range(1, len(paths) + 1)) if lines is None else list(lines)
    check_unique_entries(
        [str(p) for p in paths],
        where,
        listing,
        labels=[classes[int(k)] for k in labels],
        unit="entry" if lines is None else "line",
    )
    check_listed_files(paths, listing)
    return ImageFiles(paths, labels, classes, name=name, split=split, info={"split_file": str(listing)}, **kw)


# ---------------------------------------------------------------------------------------------- readers
def read_oxford_pets(folder: str | Path, split: str = "trainval", **kwargs: Any) -> ImageFiles:
    """Oxford-IIIT Pets [Parkhi et al. 2012]: ``annotations/<split>.txt``, label = class id - 1; class names
    are the breeds (the image id without its trailing ``_<n>``), ordered by class id."""
    split = check_choice(split, ("trainval", "test"), name="split")
    folder = Path(folder).expanduser()
    listing = folder / "annotations" / f"{split}.txt"
    ids: list[str] = []
    labels: list[int] = []
    lines: list[int] = []
    breed: dict[int, str] = {}
    for n, line in _lines(listing, "oxford-pets", folder):
        parts = line.split()
        if len(parts) != 4 or not parts[1].isdigit() or not 1 <= int(parts[1]) <= 37:
            raise CorruptDatasetError(
                listing, f"line {n}: expected '<image id> <class 1..37> <species> <breed>': {line!r}"
            )
        ids.append(parts[0])
        labels.append(int(parts[1]) - 1)
        lines.append(n)
        breed.setdefault(labels[-1], parts[0].rsplit("_", 1)[0])
    classes = [breed.get(k, f"class_{k + 1}") for k in range(37)]
    paths = [folder / "images" / f"{i}.jpg" for i in ids]
    return _build(paths, labels, classes, listing, "oxford-pets", split, lines, **kwargs)


def read_flowers102(folder: str | Path, split: str = "train", **kwargs: Any) -> ImageFiles:
    """Oxford Flowers-102 [Nilsback & Zisserman 2008]: ``setid.mat`` names the image ids of each split
    (``trnid`` / ``valid`` / ``tstid``), ``imagelabels.mat`` the label 1..102 of image id ``i`` at position
    ``i - 1``; label = that - 1, class names ``"1" .. "102"`` (the files carry no names)."""
    split = check_choice(split, ("train", "val", "test"), name="split")
    folder = Path(folder).expanduser()
    setid_path, labels_path = folder / "setid.mat", folder / "imagelabels.mat"
    ids = np.atleast_1d(_mat_field(_loadmat(setid_path, "flowers102", folder), _FLOWER_KEYS[split], setid_path))
    all_labels = np.atleast_1d(_mat_field(_loadmat(labels_path, "flowers102", folder), "labels", labels_path))
    ids = ids.astype(np.int64)
    if ids.size and (ids.min() < 1 or ids.max() > all_labels.size):
        raise CorruptDatasetError(setid_path, f"image ids outside 1..{all_labels.size} (the labels in imagelabels.mat)")
    labels = all_labels.astype(np.int64)[ids - 1] - 1
    if labels.size and (labels.min() < 0 or labels.max() > 101):
        raise CorruptDatasetError(labels_path, f"labels outside 1..102: [{labels.min() + 1}, {labels.max() + 1}]")
    paths = [folder / "jpg" / f"image_{i:05d}.jpg" for i in ids.tolist()]
    return _build(paths, labels, [str(k) for k in range(1, 103)], setid_path, "flowers102", split, **kwargs)


_FLOWER_KEYS = {"train": "trnid", "val": "valid", "test": "tstid"}


def read_fgvc_aircraft(
    folder: str | Path, split: str = "trainval", *, annotation_level: str = "variant", **kwargs: Any
) -> ImageFiles:
    """FGVC-Aircraft [Maji et al. 2013]: ``data/images_<level>_<split>.txt`` lines ``<id> <class name>``
    (names may hold spaces), classes in the order of ``data/{variants,families,manufacturers}.txt``."""
    split = check_choice(split, ("train", "val", "trainval", "test"), name="split")
    level = check_choice(annotation_level, ("variant", "family", "manufacturer"), name="annotation_level")
    folder = Path(folder).expanduser()
    data = folder / "data"
    names_file = (
        data / {"variant": "variants.txt", "family": "families.txt", "manufacturer": "manufacturers.txt"}[level]
    )
    classes = _class_list(names_file, "fgvc-aircraft", folder)
    index = {c: k for k, c in enumerate(classes)}
    listing = data / f"images_{level}_{split}.txt"
    paths, labels, lines = [], [], []
    for n, line in _lines(listing, "fgvc-aircraft", folder):
        image, _, cls = line.partition(" ")
        if cls not in index:
            raise CorruptDatasetError(listing, f"line {n}: class {cls!r} is not in {names_file.name}")
        paths.append(data / "images" / f"{image}.jpg")
        labels.append(index[cls])
        lines.append(n)
    return _build(paths, labels, classes, listing, "fgvc-aircraft", split, lines, **kwargs)


def read_stanford_cars(folder: str | Path, split: str = "train", **kwargs: Any) -> ImageFiles:
    """Stanford Cars [Krause et al. 2013]: the ``annotations`` struct array (``fname``, ``class`` 1..196) of
    ``devkit/cars_train_annos.mat`` or ``cars_test_annos_withlabels.mat`` (in the folder or ``devkit/``);
    class names from ``devkit/cars_meta.mat`` (``class_names``)."""
    split = check_choice(split, ("train", "test"), name="split")
    folder = Path(folder).expanduser()
    devkit = folder / "devkit"
    meta_path = devkit / "cars_meta.mat"
    classes = [
        str(c)
        for c in np.atleast_1d(_mat_field(_loadmat(meta_path, "stanford-cars", folder), "class_names", meta_path))
    ]
    if split == "train":
        annos_path, images = devkit / "cars_train_annos.mat", folder / "cars_train"
    else:
        name = "cars_test_annos_withlabels.mat"
        annos_path, images = (folder / name if (folder / name).is_file() else devkit / name), folder / "cars_test"
    annos = np.atleast_1d(_mat_field(_loadmat(annos_path, "stanford-cars", folder), "annotations", annos_path))
    try:
        fnames, labels = [str(f) for f in annos["fname"]], np.asarray(annos["class"], dtype=np.int64) - 1
    except (ValueError, KeyError, IndexError) as err:
        raise CorruptDatasetError(annos_path, f"annotations lack the fields 'fname' and 'class' ({err})") from err
    if labels.size and (labels.min() < 0 or labels.max() >= len(classes)):
        raise CorruptDatasetError(annos_path, f"classes outside 1..{len(classes)} (cars_meta.mat)")
    return _build([images / f for f in fnames], labels, classes, annos_path, "stanford-cars", split, **kwargs)


def read_dtd(folder: str | Path, split: str = "train", *, partition: int = 1, **kwargs: Any) -> ImageFiles:
    """Describable Textures [Cimpoi et al. 2014]: ``labels/<split><partition>.txt`` lines ``<class>/<file>``;
    classes = the sorted folders of ``images/`` (47)."""
    split = check_choice(split, ("train", "val", "test"), name="split")
    partition = check_int(partition, name="partition", low=1, high=10)
    folder = Path(folder).expanduser()
    if not (folder / "images").is_dir():
        raise DatasetNotFoundError("dtd", [folder], _LAYOUT["dtd"], _HOW["dtd"])
    classes = sorted(p.name for p in (folder / "images").iterdir() if p.is_dir())
    index = {c: k for k, c in enumerate(classes)}
    listing = folder / "labels" / f"{split}{partition}.txt"
    paths, labels, lines = [], [], []
    for n, line in _lines(listing, "dtd", folder):
        cls, _, name = line.partition("/")
        if cls not in index or not name:
            raise CorruptDatasetError(listing, f"line {n}: expected '<class folder of images/>/<file>', got {line!r}")
        paths.append(folder / "images" / cls / name)
        labels.append(index[cls])
        lines.append(n)
    return _build(paths, labels, classes, listing, "dtd", split, lines, **kwargs)


def read_food101(folder: str | Path, split: str = "train", **kwargs: Any) -> ImageFiles:
    """Food-101 [Bossard et al. 2014]: ``meta/<split>.txt`` lines ``<class>/<id>`` (image
    ``images/<class>/<id>.jpg``); classes from ``meta/classes.txt`` (else the sorted classes listed)."""
    split = check_choice(split, ("train", "test"), name="split")
    folder = Path(folder).expanduser()
    listing = folder / "meta" / f"{split}.txt"
    numbered = _lines(listing, "food101", folder)
    entries = [line.partition("/") for _, line in numbered]
    classes_file = folder / "meta" / "classes.txt"
    if classes_file.is_file():
        classes = _class_list(classes_file, "food101", folder)
    else:
        classes = sorted({c for c, _, _ in entries})
    index = {c: k for k, c in enumerate(classes)}
    bad = [n for (n, _), (c, _, i) in zip(numbered, entries, strict=True) if c not in index or not i]
    if bad:
        raise CorruptDatasetError(listing, f"line {bad[0]}: expected '<class of classes.txt>/<image id>'")
    paths = [folder / "images" / c / f"{i}.jpg" for c, _, i in entries]
    labels = [index[c] for c, _, _ in entries]
    return _build(paths, labels, classes, listing, "food101", split, [n for n, _ in numbered], **kwargs)


def read_caltech101(
    folder: str | Path, split: str = "train", *, train_per_class: int = 30, split_seed: int = 0, **kwargs: Any
) -> ImageFiles:
    """Caltech-101 [Fei-Fei et al. 2004] with the seeded split rule of the module docstring
    (``train_per_class`` per class for training, the rest for testing)."""
    split = check_choice(split, ("train", "test"), name="split")
    per = check_int(train_per_class, name="train_per_class", low=1)
    seed = check_int(split_seed, name="split_seed", low=0)
    folder = Path(folder).expanduser()
    cats = folder / "101_ObjectCategories"
    if not cats.is_dir():
        raise DatasetNotFoundError("caltech101", [folder], _LAYOUT["caltech101"], _HOW["caltech101"])
    classes = sorted(p.name for p in cats.iterdir() if p.is_dir() and p.name != "BACKGROUND_Google")
    paths, labels = [], []
    for k, c in enumerate(classes):
        files = sorted(p for p in (cats / c).iterdir() if p.is_file() and p.name.lower().endswith(IMG_EXTENSIONS))
        if len(files) <= per:
            raise CorruptDatasetError(cats / c, f"{len(files)} images: train_per_class={per} leaves none for testing")
        order = np.random.default_rng([seed, k]).permutation(len(files))
        chosen = order[:per] if split == "train" else order[per:]
        paths += [files[i] for i in np.sort(chosen)]
        labels += [k] * len(chosen)
    info = {"split_rule": f"{per} per class for training (seeded by split_seed={seed}), the rest for testing"}
    return ImageFiles(paths, labels, classes, name="caltech101", split=split, info=info, **kwargs)


def read_sun397(folder: str | Path, split: str = "train", *, partition: int = 1, **kwargs: Any) -> ImageFiles:
    """SUN397 [Xiao et al. 2010]: ``Partitions/{Training,Testing}_<NN>.txt`` lines ``/<l>/<class>/sun_*.jpg``
    (``Partitions/`` in the folder or beside it); classes from ``ClassName.txt`` (``/<l>/<class>`` lines, the
    class being everything after the letter, e.g. ``bakery/shop``)."""
    split = check_choice(split, ("train", "test"), name="split")
    partition = check_int(partition, name="partition", low=1, high=10)
    folder = Path(folder).expanduser()
    classes = [line.strip("/").split("/", 1)[-1] for line in _class_list(folder / "ClassName.txt", "sun397", folder)]
    index = {c: k for k, c in enumerate(classes)}
    name = f"{'Training' if split == 'train' else 'Testing'}_{partition:02d}.txt"
    places = [folder / "Partitions", folder.parent / "Partitions", folder]
    listing = next((p / name for p in places if (p / name).is_file()), folder / "Partitions" / name)
    paths, labels, lines = [], [], []
    for n, line in _lines(listing, "sun397", folder):
        parts = line.strip("/").split("/")
        cls = "/".join(parts[1:-1])
        if len(parts) < 3 or cls not in index:
            raise CorruptDatasetError(
                listing, f"line {n}: expected '/<letter>/<class of ClassName.txt>/<file>', got {line!r}"
            )
        paths.append(folder.joinpath(*parts))
        labels.append(index[cls])
        lines.append(n)
    return _build(paths, labels, classes, listing, "sun397", split, lines, **kwargs)


_LAYOUT = {
    "dtd": "images/<class>/*.jpg, labels/{train,val,test}{1..10}.txt",
    "caltech101": "101_ObjectCategories/<class>/image_*.jpg",
}
_HOW = {
    "oxford-pets": "extract images.tar.gz and annotations.tar.gz of the Oxford-IIIT Pet dataset (Oxford VGG)",
    "flowers102": "put 102flowers.tgz (extracted: jpg/), imagelabels.mat and setid.mat (Oxford VGG) in the folder",
    "fgvc-aircraft": "extract fgvc-aircraft-2013b.tar.gz (Oxford VGG)",
    "stanford-cars": "the Stanford Cars images, devkit and cars_test_annos_withlabels.mat (e.g. from Kaggle's copy)",
    "dtd": "extract dtd-r1.0.1.tar.gz (Oxford VGG)",
    "food101": "extract food-101.tar.gz (ETH Zurich)",
    "caltech101": "extract 101_ObjectCategories.tar.gz (Caltech)",
    "sun397": "extract SUN397.tar.gz and Partitions.zip (Princeton)",
}
