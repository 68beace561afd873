"""Streamed image datasets: folders of JPEG / PNG files, decoded one at a time with Pillow.

:class:`ImageFiles` holds only the file paths and the labels (two numpy arrays: no per-item Python objects,
so DataLoader workers forked from the main process do not copy them page by page as reference counts change);
``__getitem__`` opens one file, decodes it to ``uint8 (C, H, W)`` and applies the dataset's ``transform``
(see :mod:`nclab.data.augment`) with the item's generator ``(seed, epoch, index)``. Nothing decoded is kept, so
memory stays at a batch of images whatever the dataset's size; with ``DataLoader(num_workers=n)`` the decoding
runs in the workers.

Readers of the standard layouts (each takes the dataset's own folder; :func:`nclab.data.catalog.open_images`
finds that folder from a root and names what it expects when it cannot):

* :func:`read_image_folder` -- ``root/<class>/**/<image>`` (torchvision's ``ImageFolder``): classes are the
  sub-folder names sorted, files found recursively, sorted, kept when their lower-cased name ends with one of
  :data:`IMG_EXTENSIONS`.
* :func:`read_imagenet` -- ILSVRC-2012: ``train/<wnid>/*.JPEG``; ``val/`` either as class folders
  ``val/<wnid>/*.JPEG`` or flat ``val/ILSVRC2012_val_<8 digits>.JPEG`` with the labels of Kaggle's
  ``LOC_val_solution.csv`` (first token of ``PredictionString``) or of the devkit's
  ``ILSVRC2012_validation_ground_truth.txt`` (line ``n`` = ILSVRC2012_ID of image ``n``) mapped to wnids by
  the devkit's ``meta.mat``. Class index = position of the wnid in the sorted wnids (torchvision's order).
* :func:`read_tiny_imagenet` -- ``wnids.txt``, ``train/<wnid>/images/*.JPEG``, ``val/images/*.JPEG`` with
  ``val/val_annotations.txt`` (``file<TAB>wnid<TAB>box``); classes = the wnids of ``wnids.txt`` sorted.
"""

from __future__ import annotations

import copy
import csv
import os
import threading
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from nclab.data.augment import apply_transform
from nclab.data.errors import CorruptDatasetError, DatasetNotFoundError
from nclab.data.loaders import balanced_subset
from nclab.validation import check_choice, check_int

__all__ = [
    "IMG_EXTENSIONS",
    "ImageFiles",
    "check_listed_files",
    "check_unique_entries",
    "decode_image",
    "default_max_pixels",
    "read_image_folder",
    "read_imagenet",
    "read_tiny_imagenet",
]

#: File name endings (lower-cased) taken as images, as torchvision's ``IMG_EXTENSIONS``.
IMG_EXTENSIONS: tuple[str, ...] = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")

_MODES = ("RGB", "L")


#: Pillow modes of 16-bit single-channel images (PNG and TIFF greyscale): scaled to 8 bits, not clipped.
_MODES_16BIT = ("I;16", "I;16L", "I;16B", "I;16N")

#: Pillow modes whose value range is not known (32-bit integers, 32-bit floats): refused, never clipped.
_MODES_UNSCALED = ("I", "F")

# Pillow's decompression-bomb limit is a process-wide setting (PIL.Image.MAX_IMAGE_PIXELS): it is lifted only
# while this lock is held, to read a header whose size nclab then checks against its own limit.
_PILLOW_LIMIT = threading.Lock()


def default_max_pixels() -> int | None:
    """The largest image (in pixels) :func:`decode_image` decodes by default: the size above which Pillow refuses
    a file as a decompression bomb, ``2 * PIL.Image.MAX_IMAGE_PIXELS`` (178,956,970 unless changed), or ``None``
    (no limit) when ``PIL.Image.MAX_IMAGE_PIXELS`` is ``None``.

    Examples
    --------
    >>> default_max_pixels()
    178956970
    """
    from PIL import Image

    return None if Image.MAX_IMAGE_PIXELS is None else 2 * int(Image.MAX_IMAGE_PIXELS)


def _open_image(path: Path, max_pixels: int | None) -> Any:
    """``Image.open(path)`` (the header only) with its size checked against ``max_pixels`` instead of Pillow's
    global limit, so that the limit can be set per dataset."""
    from PIL import Image

    limit = default_max_pixels() if max_pixels is None else max_pixels
    with _PILLOW_LIMIT:
        saved = Image.MAX_IMAGE_PIXELS
        Image.MAX_IMAGE_PIXELS = None
        try:
            im = Image.open(path)
        finally:
            Image.MAX_IMAGE_PIXELS = saved
    width, height = im.size
    if limit is not None and width * height > limit:
        im.close()
        raise CorruptDatasetError(
            path,
            f"{width} x {height} = {width * height} pixels, more than the limit of {limit} (a guard against "
            f"decompression bombs, small files that decode to huge images); if the file is trusted, raise the "
            f"limit with max_pixels={width * height} (in a run config: data.options.max_pixels)",
        )
    return im


def _to_mode(im: Any, mode: str, path: Path) -> np.ndarray:
    """The pixels of the opened image ``im`` converted to ``mode`` as a writable ``uint8`` array: 16-bit
    greyscale scaled to 8 bits (``round(v / 257)``: 0 -> 0, 65535 -> 255), modes of unknown range refused."""
    from PIL import Image

    if im.mode in _MODES_16BIT:
        v = np.asarray(im, dtype=np.float64)  # native order whatever the file's byte order
        im = Image.fromarray(np.rint(v / 257.0).astype(np.uint8))
    elif im.mode in _MODES_UNSCALED:
        kind = "32-bit integer" if im.mode == "I" else "32-bit floating-point"
        raise CorruptDatasetError(
            path,
            f"a {kind} image (Pillow mode {im.mode!r}) has no known value range, so it cannot be converted to "
            f"8-bit {mode} without clipping; save it as 8- or 16-bit (PNG, JPEG) first",
        )
    return np.array(im.convert(mode))  # a writable copy; convert() decodes the whole file


def decode_image(path: str | Path, mode: str = "RGB", *, max_pixels: int | None = None) -> torch.Tensor:
    """Decode one image file with Pillow to ``uint8 (C, H, W)`` (``mode="RGB"``: C = 3; ``"L"``: C = 1), a
    channel-first view of the decoded ``(H, W, C)`` array.

    Every Pillow mode of 8 bits per channel (greyscale, palette, RGBA, CMYK, ...) is converted by Pillow;
    16-bit greyscale (``I;16``: 16-bit PNG and TIFF) is scaled to 8 bits, ``round(v / 257)``; 32-bit integer
    and floating-point images (modes ``I``, ``F``) have no known range and are refused.

    Parameters
    ----------
    path : str or pathlib.Path
        The image file.
    mode : {"RGB", "L"}, default="RGB"
        The mode the pixels are converted to.
    max_pixels : int, optional
        Refuse images of more pixels (width x height) than this, read from the header before anything is
        decoded; default :func:`default_max_pixels` (Pillow's decompression-bomb limit).

    Returns
    -------
    torch.Tensor
        ``uint8 (C, H, W)``.

    Raises
    ------
    CorruptDatasetError
        Naming the file: missing, not decodable (truncated, not an image), larger than ``max_pixels`` (the
        message says which ``max_pixels`` would admit it), or of a mode without a known range.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from PIL import Image
    >>> f = pathlib.Path(tempfile.mkdtemp()) / "deep.png"
    >>> Image.fromarray(np.array([[0, 900, 65535]], np.uint16)).save(f)  # 16-bit greyscale
    >>> decode_image(f, "L").tolist()
    [[[0, 4, 255]]]
    """
    from PIL import Image, UnidentifiedImageError

    path = Path(path)
    if max_pixels is not None:
        max_pixels = check_int(max_pixels, name="max_pixels", low=1)
    try:
        with _open_image(path, max_pixels) as im:
            arr = _to_mode(im, mode, path)
    except FileNotFoundError as err:
        raise CorruptDatasetError(path, "listed in the dataset but not on disk") from err
    except CorruptDatasetError:
        raise
    except Image.DecompressionBombError as err:  # a frame larger than the header said (GIF, ICO)
        raise CorruptDatasetError(
            path, f"{err} Raise the limit with max_pixels=... (data.options.max_pixels) if the file is trusted"
        ) from err
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as err:  # Pillow's ways of failing
        raise CorruptDatasetError(path, f"cannot decode the image ({type(err).__name__}: {err})") from err
    if arr.ndim == 2:
        arr = arr[:, :, None]
    # a (C, H, W) view of Pillow's (H, W, C) pixels: no second copy (transforms and collation make their own)
    return torch.from_numpy(arr).permute(2, 0, 1)


class ImageFiles(torch.utils.data.Dataset):
    """Image files with integer labels, decoded on access: ``ds[i] = (transform(image), label)``.

    Parameters
    ----------
    paths : sequence of paths
        One file per sample.
    labels : sequence of int
        In ``0 .. len(classes) - 1``.
    classes : sequence of str
        Class names; the label is the position in this list.
    name, split : str
        For messages and ``repr``.
    transform : callable ``(x, generator) -> tensor``, optional
        Applied to the decoded ``uint8 (C, H, W)`` image with :func:`nclab.data.rng.item_generator`
        ``(seed, epoch, index)``. Without it, items are the raw ``uint8`` images (of varying sizes: give a
        transform that makes them equal before batching them).
    mode : "RGB" | "L"
        Pillow mode the images are converted to.
    seed : int
        Seed of the per-item augmentation (``set_epoch`` changes the epoch part).
    max_pixels : int, optional
        Refuse images of more pixels than this (:func:`decode_image`); default Pillow's decompression-bomb
        limit (:func:`default_max_pixels`).
    info : dict, optional
        Where the samples came from (kept as :attr:`info`; default empty).

    Attributes
    ----------
    targets : ndarray of int64, (N,)
    classes : list of str
    info : dict
        Where the samples came from (layout notes of the reader).

    Examples
    --------
    >>> import numpy as np, tempfile, pathlib
    >>> from PIL import Image
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> for k, c in enumerate(["cat", "dog"]):
    ...     (root / c).mkdir()
    ...     Image.fromarray(np.full((4, 6, 3), 100 * k, np.uint8)).save(root / c / "a.png")
    >>> ds = read_image_folder(root)
    >>> x, y = ds[1]
    >>> ds.classes, tuple(x.shape), int(x[0, 0, 0]), y
    (['cat', 'dog'], (3, 4, 6), 100, 1)
    """

    def __init__(
        self,
        paths: Sequence[str | Path],
        labels: Sequence[int] | np.ndarray,
        classes: Sequence[str],
        *,
        name: str = "images",
        split: str = "train",
        transform: Any = None,
        mode: str = "RGB",
        seed: int = 0,
        max_pixels: int | None = None,
        info: dict[str, Any] | None = None,
    ) -> None:
        self._paths = np.array([os.fsencode(str(p)) for p in paths], dtype=np.bytes_)
        self.targets = np.asarray(labels, dtype=np.int64).reshape(-1)
        self.classes = [str(c) for c in classes]
        if self.targets.shape[0] != self._paths.shape[0]:
            raise ValueError(f"{name}/{split}: {self._paths.shape[0]} files but {self.targets.shape[0]} labels")
        if self.targets.size and (self.targets.min() < 0 or self.targets.max() >= len(self.classes)):
            raise ValueError(
                f"{name}/{split}: labels must lie in 0..{len(self.classes) - 1}, got "
                f"[{self.targets.min()}, {self.targets.max()}]"
            )
        if transform is not None and not callable(transform):
            raise TypeError(f"transform must be callable (x, generator) -> tensor, got {transform!r}")
        self.name, self.split, self.transform = name, split, transform
        self.mode = check_choice(mode, _MODES, name="mode")
        self.seed = check_int(seed, name="seed", low=0)
        self.max_pixels = None if max_pixels is None else check_int(max_pixels, name="max_pixels", low=1)
        self.epoch = 0
        self.info = dict(info or {})

    # ------------------------------------------------------------------ dataset protocol
    def __len__(self) -> int:
        return int(self.targets.shape[0])

    def path(self, index: int) -> Path:
        """The file of sample ``index``."""
        return Path(os.fsdecode(bytes(self._paths[index])))

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        index = int(index)
        if not -len(self) <= index < len(self):
            raise IndexError(f"index {index} out of range for {len(self)} samples")
        index %= len(self)
        x = decode_image(self.path(index), self.mode, max_pixels=self.max_pixels)
        return apply_transform(self.transform, x, self.seed, self.epoch, index), int(self.targets[index])

    def set_epoch(self, epoch: int) -> None:
        """Draw the augmentation of epoch ``epoch`` (call before iterating a DataLoader over this dataset; with
        ``persistent_workers=True`` the workers keep the epoch they started with)."""
        self.epoch = check_int(epoch, name="epoch", low=0)

    # ------------------------------------------------------------------ views
    @property
    def K(self) -> int:
        return len(self.classes)

    @property
    def class_counts(self) -> np.ndarray:
        return np.bincount(self.targets, minlength=self.K)

    def with_transform(self, transform: Any, *, seed: int | None = None) -> ImageFiles:
        """The same files with another ``transform`` (and ``seed``); the path arrays are shared, not copied."""
        out = copy.copy(self)
        out.transform = transform
        out.seed = self.seed if seed is None else check_int(seed, name="seed", low=0)
        out.info = dict(self.info)
        return out

    def select(
        self, classes: Iterable[int | str] | None = None, per_class: int | None = None, seed: int = 0
    ) -> ImageFiles:
        """A subset: only ``classes`` (indices or names), relabelled ``0 .. len(classes) - 1`` in the order
        given (pretrain on some classes, probe on others), then ``per_class`` samples of every class drawn
        with :func:`nclab.data.balanced_subset` (``seed``)."""
        paths, y, names = self._paths, self.targets, list(self.classes)
        if classes is not None:
            keep = [self._class_index(c) for c in classes]
            if not keep or len(set(keep)) != len(keep):
                raise ValueError(f"classes must be distinct classes of {self.name!r}, got {list(classes)}")
            relabel = np.full(self.K, -1, dtype=np.int64)
            relabel[keep] = np.arange(len(keep))
            mask = relabel[y] >= 0
            paths, y, names = paths[mask], relabel[y[mask]], [names[k] for k in keep]
        if per_class is not None:
            idx = balanced_subset(y, int(per_class), len(names), seed)
            paths, y = paths[idx], y[idx]
        out = copy.copy(self)
        out._paths, out.targets, out.classes = paths, y, names
        out.info = dict(self.info, classes=None if classes is None else names, per_class=per_class)
        return out

    def _class_index(self, c: int | str) -> int:
        if isinstance(c, str):
            if c not in self.classes:
                raise ValueError(f"{c!r} is not a class of {self.name!r} (e.g. {self.classes[:3]})")
            return self.classes.index(c)
        k = int(c)
        if not 0 <= k < self.K:
            raise ValueError(f"class index {k} outside 0..{self.K - 1} of {self.name!r}")
        return k

    def __repr__(self) -> str:
        return f"ImageFiles({self.name}/{self.split}: N={len(self)}, K={self.K}, transform={self.transform!r})"


# -------------------------------------------------------------------------------------------- listing
def _is_image(name: str, extensions: tuple[str, ...]) -> bool:
    return name.lower().endswith(extensions)


def _images_under(
    folder: Path, extensions: tuple[str, ...], recursive: bool = True, seen: dict[str, Path] | None = None
) -> list[Path]:
    """Image files under ``folder``, in torchvision's order (sorted walk, sorted names).

    Folder symlinks are followed, each real folder at most once: ``seen`` maps the real path of every folder
    already listed (shared by the class folders of one dataset) to where it was met. A link back to a folder that
    holds it (``cat/up -> ..``, a loop that would list the root's other classes under this one, again and again),
    or to a folder already listed (its images would count twice, perhaps under another class), raises
    :class:`CorruptDatasetError` naming the link.
    """
    if not recursive:
        return sorted(p for p in folder.iterdir() if p.is_file() and _is_image(p.name, extensions))
    seen = {} if seen is None else seen
    top = os.path.realpath(folder)
    listed: list[tuple[str, list[str]]] = []
    for here, dirs, files in os.walk(folder, followlinks=True):
        real = os.path.realpath(here)
        if here != str(folder) and (top == real or top.startswith(real.rstrip(os.sep) + os.sep)):
            raise CorruptDatasetError(
                here,
                f"a symlink loop: it leads to {real}, a folder that holds it, so the walk would list that folder's "
                f"images (other classes too) under {folder.name} again and again; remove the link",
            )
        if real in seen:
            raise CorruptDatasetError(
                here,
                f"the same folder as {seen[real]} (through a symlink; both are {real}): its images would be listed "
                f"twice; remove one of them",
            )
        seen[real] = Path(here)
        dirs.sort()
        listed.append((here, sorted(f for f in files if _is_image(f, extensions))))
    return [Path(here) / f for here, files in sorted(listed) for f in files]


def _subfolders(folder: Path) -> list[str]:
    return sorted(e.name for e in os.scandir(folder) if e.is_dir())


def read_image_folder(
    root: str | Path,
    *,
    classes: Sequence[str] | None = None,
    extensions: Sequence[str] = IMG_EXTENSIONS,
    name: str = "image-folder",
    split: str = "train",
    **kwargs: Any,
) -> ImageFiles:
    """``root/<class>/**/<image>``, labels from the folder names (torchvision's ``ImageFolder`` order).

    ``classes``: the class list to label with (e.g. the training split's, for a validation folder); every
    class folder must be in it, listed classes without a folder have no samples. Default: the sub-folders of
    ``root``, sorted. A class folder with no image raises :class:`CorruptDatasetError`. ``kwargs`` go to
    :class:`ImageFiles` (``transform``, ``mode``, ``seed``).

    Parameters
    ----------
    root : str or pathlib.Path
        The folder of class folders.
    classes : sequence of str, optional
        The class list to label with; default: the sub-folders of ``root``, sorted.
    extensions : sequence of str, default=IMG_EXTENSIONS
        File name endings read as images (case-insensitive).
    name : str, default="image-folder"
        The dataset's name, for messages and ``repr``.
    split : str, default="train"
        The split's name.
    **kwargs
        Passed to :class:`ImageFiles`: ``transform``, ``mode``, ``seed``.

    Returns
    -------
    ImageFiles
        One sample per image file, in torchvision's order (classes in turn, sorted walk), labelled by the
        position of its class folder's name in ``classes``.

    Raises
    ------
    DatasetNotFoundError
        If ``root`` is not a folder or holds no class folder.
    CorruptDatasetError
        If a class folder is not in ``classes`` or holds no image.

    Examples
    --------
    >>> import tempfile
    >>> from PIL import Image
    >>> tmp = tempfile.TemporaryDirectory()
    >>> for c, count in (("b", 1), ("a", 2)):
    ...     (Path(tmp.name) / c).mkdir()
    ...     for i in range(count):
    ...         Image.fromarray(np.zeros((3, 3, 3), np.uint8)).save(Path(tmp.name) / c / f"{i}.jpg")
    >>> ds = read_image_folder(tmp.name)
    >>> ds.classes, ds.targets.tolist(), read_image_folder(tmp.name, classes=["b", "a", "z"]).targets.tolist()
    (['a', 'b'], [0, 0, 1], [1, 1, 0])
    >>> tmp.cleanup()
    """
    root = Path(root).expanduser()
    exts = tuple(e.lower() for e in extensions)
    if not root.is_dir():
        raise DatasetNotFoundError(name, [root], "root/<class>/<images>", "point root at the folder of class folders")
    found = _subfolders(root)
    if not found:
        raise DatasetNotFoundError(
            name,
            [root],
            "root/<class>/<images> (no class folder found)",
            "one sub-folder per class, holding its images",
        )
    names = list(found) if classes is None else list(classes)
    index = {c: k for k, c in enumerate(names)}
    unknown = [c for c in found if c not in index]
    if unknown:
        raise CorruptDatasetError(root, f"class folder(s) {unknown[:5]} are not among the {len(names)} given classes")
    paths: list[Path] = []
    labels: list[int] = []
    seen: dict[str, Path] = {os.path.realpath(root): root}  # every folder once: see _images_under
    for c in found:
        files = _images_under(root / c, exts, seen=seen)
        if not files:
            raise CorruptDatasetError(root / c, f"class folder holds no image file ({', '.join(exts)})")
        paths += files
        labels += [index[c]] * len(files)
    return ImageFiles(paths, labels, names, name=name, split=split, info={"root": str(root)}, **kwargs)


# ------------------------------------------------------------------------------------------- ImageNet
_IMAGENET_SPLITS = ("train", "val")


def _first_file(folders: Iterable[Path], names: Sequence[str]) -> Path | None:
    for folder in folders:
        for n in names:
            if (folder / n).is_file():
                return folder / n
    return None


def _imagenet_label_places(folder: Path) -> list[Path]:
    # Kaggle: <top>/LOC_val_solution.csv beside <top>/ILSVRC/Data/CLS-LOC/{train,val}
    return list(dict.fromkeys([folder, folder / "val", *list(folder.parents)[:3]]))


def _imagenet_classes(folder: Path, places: list[Path]) -> list[str] | None:
    if (folder / "train").is_dir() and _subfolders(folder / "train"):
        return _subfolders(folder / "train")
    mapping = _first_file(places, ["LOC_synset_mapping.txt"])
    if mapping is not None:
        entries = [(n, line.split()[0]) for n, line in enumerate(mapping.read_text().splitlines(), 1) if line.strip()]
        check_unique_entries([w for _, w in entries], [n for n, _ in entries], mapping, what="wnid")
        return sorted(w for _, w in entries)
    meta = _first_file([p / "ILSVRC2012_devkit_t12" / "data" for p in places] + places, ["meta.mat"])
    if meta is not None:
        return sorted(_devkit_wnids(meta).values())
    return None


def _devkit_wnids(meta: Path) -> dict[int, str]:
    """ILSVRC2012_ID -> wnid of the 1000 leaf synsets (``num_children == 0``) of the devkit's ``meta.mat``."""
    import scipy.io

    try:
        synsets = scipy.io.loadmat(meta, squeeze_me=True)["synsets"]
        ids, wnids, children = synsets["ILSVRC2012_ID"], synsets["WNID"], synsets["num_children"]
    except Exception as err:  # scipy's MatReadError / ValueError, or a missing field
        raise CorruptDatasetError(meta, f"not the devkit's synsets table ({type(err).__name__}: {err})") from err
    leaves = [
        (n, int(i), str(w))
        for n, (i, w, c) in enumerate(
            zip(np.atleast_1d(ids), np.atleast_1d(wnids), np.atleast_1d(children), strict=True), start=1
        )
        if int(c) == 0
    ]
    entries = [n for n, _, _ in leaves]
    check_unique_entries([str(i) for _, i, _ in leaves], entries, meta, what="ILSVRC2012_ID", unit="entry")
    check_unique_entries([w for _, _, w in leaves], entries, meta, what="WNID", unit="entry")
    return {i: w for _, i, w in leaves}


def _val_labels_csv(path: Path) -> dict[str, str]:
    ids, wnids, lines = [], [], []
    with path.open(newline="") as fh:
        rows = csv.reader(fh)
        header = next(rows, None)
        if header is None or [h.strip() for h in header[:2]] != ["ImageId", "PredictionString"]:
            raise CorruptDatasetError(path, f"expected the header 'ImageId,PredictionString', found {header}")
        for row in rows:
            n = rows.line_num
            if len(row) < 2 or not row[1].split():
                raise CorruptDatasetError(path, f"line {n}: expected '<ImageId>,<wnid> <box> ...', got {row}")
            ids.append(row[0].strip())
            wnids.append(row[1].split()[0])
            lines.append(n)
    check_unique_entries(ids, lines, path, what="ImageId", labels=wnids)
    return dict(zip(ids, wnids, strict=True))


def _val_labels_devkit(truth: Path, meta: Path) -> dict[str, str]:
    wnid_of = _devkit_wnids(meta)
    out = {}
    for n, line in enumerate(truth.read_text().split(), start=1):
        if not line.isdigit() or int(line) not in wnid_of:
            raise CorruptDatasetError(truth, f"line {n}: {line!r} is not an ILSVRC2012_ID of {meta.name}")
        out[f"ILSVRC2012_val_{n:08d}"] = wnid_of[int(line)]
    return out


def _imagenet_val_flat(folder: Path, classes: list[str] | None, **kwargs: Any) -> ImageFiles:
    val, places = folder / "val", _imagenet_label_places(folder)
    csv_path = _first_file(places, ["LOC_val_solution.csv"])
    devkit = [p / "ILSVRC2012_devkit_t12" / "data" for p in places] + places
    truth = _first_file(devkit, ["ILSVRC2012_validation_ground_truth.txt"])
    meta = _first_file(devkit, ["meta.mat"])
    if csv_path is not None:
        labels_file, wnid_of = csv_path, _val_labels_csv(csv_path)
    elif truth is not None and meta is not None:
        labels_file, wnid_of = truth, _val_labels_devkit(truth, meta)
    else:
        raise DatasetNotFoundError(
            "imagenet",
            places,
            "val/ as class folders, or flat val/*.JPEG with LOC_val_solution.csv (Kaggle) or "
            "ILSVRC2012_devkit_t12/data/{ILSVRC2012_validation_ground_truth.txt, meta.mat}",
            "the validation labels come with the ILSVRC2012 devkit or Kaggle's ImageNet archive",
        )
    files = _images_under(val, tuple(IMG_EXTENSIONS), recursive=False)
    missing = [f.name for f in files if f.stem not in wnid_of]
    if missing:
        raise CorruptDatasetError(labels_file, f"has no label for {len(missing)} image(s) of {val}, e.g. {missing[0]}")
    wnids = [wnid_of[f.stem] for f in files]
    names = classes if classes is not None else sorted(set(wnid_of.values()))
    index = {c: k for k, c in enumerate(names)}
    unknown = sorted({w for w in wnids if w not in index})
    if unknown:
        raise CorruptDatasetError(
            labels_file, f"labels {len(unknown)} wnid(s) outside the class list, e.g. {unknown[0]}"
        )
    absent = len(wnid_of) - len(files)
    if absent > 0:
        warnings.warn(f"imagenet/val: {absent} image(s) labelled in {labels_file.name} are not in {val}", stacklevel=3)
    info = {"root": str(folder), "val_labels": str(labels_file), "labelled_but_absent": max(absent, 0)}
    return ImageFiles(files, [index[w] for w in wnids], names, name="imagenet", split="val", info=info, **kwargs)


def read_imagenet(folder: str | Path, split: str = "train", **kwargs: Any) -> ImageFiles:
    """ILSVRC-2012 in ``folder`` (holding ``train/`` and / or ``val/``; layouts in the module docstring).
    ``kwargs`` go to :class:`ImageFiles`."""
    split = check_choice(split, _IMAGENET_SPLITS, name="split")
    folder = Path(folder).expanduser()
    places = _imagenet_label_places(folder)
    if split == "train":
        return read_image_folder(folder / "train", name="imagenet", split="train", **kwargs)
    classes = _imagenet_classes(folder, places)
    if (folder / "val").is_dir() and _subfolders(folder / "val"):
        return read_image_folder(folder / "val", classes=classes, name="imagenet", split="val", **kwargs)
    return _imagenet_val_flat(folder, classes, **kwargs)


# -------------------------------------------------------------------------------------- Tiny-ImageNet
def read_tiny_imagenet(folder: str | Path, split: str = "train", **kwargs: Any) -> ImageFiles:
    """Tiny-ImageNet (200 classes of 64 x 64 images) in ``folder`` (``tiny-imagenet-200/``; layout in the module
    docstring). The test split has no labels and is not offered. ``kwargs`` go to :class:`ImageFiles`."""
    split = check_choice(split, ("train", "val"), name="split")
    folder = Path(folder).expanduser()
    wnids_file = folder / "wnids.txt"
    if not wnids_file.is_file():
        raise DatasetNotFoundError("tiny-imagenet", [folder], _TINY_LAYOUT, _TINY_HOW)
    listed = [(n, line.strip()) for n, line in enumerate(wnids_file.read_text().splitlines(), 1) if line.strip()]
    check_unique_entries([w for _, w in listed], [n for n, _ in listed], wnids_file, what="wnid")
    classes = sorted(w for _, w in listed)
    index = {c: k for k, c in enumerate(classes)}
    exts = tuple(IMG_EXTENSIONS)
    paths: list[Path] = []
    labels: list[int] = []
    if split == "train":
        for c in classes:
            images = folder / "train" / c / "images"
            if not images.is_dir():
                raise CorruptDatasetError(wnids_file, f"lists {c}, but {images} is not a folder")
            files = _images_under(images, exts, recursive=False)
            paths += files
            labels += [index[c]] * len(files)
    else:
        ann = folder / "val" / "val_annotations.txt"
        if not ann.is_file():
            raise DatasetNotFoundError("tiny-imagenet", [folder / "val"], _TINY_LAYOUT, _TINY_HOW)
        lines: list[int] = []
        for n, line in enumerate(ann.read_text().splitlines(), start=1):
            if not line.strip():
                continue
            parts = line.split("\t") if "\t" in line else line.split()
            if len(parts) < 2 or parts[1] not in index:
                raise CorruptDatasetError(ann, f"line {n}: expected '<file>\\t<wnid of wnids.txt>\\t...', got {line!r}")
            paths.append(folder / "val" / "images" / parts[0])
            labels.append(index[parts[1]])
            lines.append(n)
        check_unique_entries([p.name for p in paths], lines, ann, labels=[classes[k] for k in labels])
        check_listed_files(paths, ann)
    return ImageFiles(paths, labels, classes, name="tiny-imagenet", split=split, info={"root": str(folder)}, **kwargs)


_TINY_LAYOUT = "wnids.txt, train/<wnid>/images/*.JPEG, val/images/*.JPEG, val/val_annotations.txt"
_TINY_HOW = "extract tiny-imagenet-200.zip (Stanford CS231n) into the folder"


def check_listed_files(paths: Sequence[Path], listing: Path) -> None:
    """Every file a split file lists exists (checked once per folder listing, not per file)."""
    present: dict[Path, set[str]] = {}
    missing = []
    for p in paths:
        names = present.get(p.parent)
        if names is None:
            names = present[p.parent] = set(os.listdir(p.parent)) if p.parent.is_dir() else set()
        if p.name not in names:
            missing.append(p)
    if missing:
        raise CorruptDatasetError(listing, f"lists {len(missing)} image(s) that are not on disk, e.g. {missing[0]}")


def check_unique_entries(
    keys: Sequence[str],
    lines: Sequence[int],
    listing: Path,
    *,
    what: str = "image",
    labels: Sequence[Any] | None = None,
    unit: str = "line",
) -> None:
    """Every entry of a label or split file once: the first key listed a second time raises
    :class:`CorruptDatasetError` naming the file, both lines and, when ``labels`` are given, whether the two
    lines agree (a duplicate with another label would relabel the sample silently, the last line winning; one
    with the same label would count it twice).

    Parameters
    ----------
    keys : sequence of str
        What must be unique (image ids, file names, class names), one per entry.
    lines : sequence of int
        The line number of each entry in ``listing`` (1-based), for the message.
    listing : pathlib.Path
        The file, for the message.
    what : str, default="image"
        What a key is, for the message.
    labels : sequence, optional
        The label of each entry.
    unit : str, default="line"
        What ``lines`` count (``"entry"`` for the positions in an array of a ``.mat`` file).

    Raises
    ------
    CorruptDatasetError
        ``line 7: image 'x' is listed again (first at line 5) with another label (n01 here, n02 there)``.

    Examples
    --------
    >>> check_unique_entries(["a", "b"], [2, 3], Path("labels.csv"))
    >>> try:
    ...     check_unique_entries(["a", "b", "a"], [2, 3, 4], Path("val.csv"), labels=[0, 1, 1])
    ... except CorruptDatasetError as err:
    ...     print(str(err).replace(") with", ")\\nwith"))
    corrupt dataset file val.csv: line 4: image 'a' is listed again (first at line 2)
    with another label (1 here, 0 there); remove one of the two lines
    """
    first: dict[str, int] = {}
    for i, key in enumerate(keys):
        if key not in first:
            first[key] = i
            continue
        j = first[key]
        agree = ""
        if labels is not None:
            same = labels[i] == labels[j]
            agree = " with the same label" if same else f" with another label ({labels[i]} here, {labels[j]} there)"
        raise CorruptDatasetError(
            listing,
            f"{unit} {lines[i]}: {what} {key!r} is listed again (first at {unit} {lines[j]}){agree}; "
            f"remove one of the two {unit}s",
        )
