"""Datasets from local files only (nclab never downloads). The embedded default is ``digits``.

``load(name, split, root=None, per_class=None, seed=0, *, pad_to=None, normalize=True, transform=None,
**options)`` returns an in-memory :class:`ArrayDataset` (``x`` float32 ``(N, *input_shape)``, ``y`` int64
``(N,)``). ``open_images(name, split, root=None, *, transform=None, classes=None, per_class=None, ...)`` returns
a streamed :class:`ImageFiles` (ImageNet, Tiny-ImageNet, any class-folder tree, the linear-probe datasets),
decoded one image at a time.

Augmentation (:mod:`nclab.data.augment`, :mod:`nclab.data.autoaugment`, :mod:`nclab.data.mixing`): both kinds
of dataset take ``transform``, a callable ``(x, generator) -> tensor`` applied per item with a generator seeded
by ``(seed, epoch, index)``; every transform also runs on whole batches, on any device.
"""

from nclab.data.catalog import IMAGE_DATASETS, describe_dataset, find_dataset, open_images
from nclab.data.digits import load_digits
from nclab.data.errors import CorruptDatasetError, DatasetNotFoundError
from nclab.data.folders import ImageFiles, read_image_folder
from nclab.data.loaders import (
    DATASETS,
    ArrayDataset,
    balanced_subset,
    digits_split_indices,
    load,
    normalization,
)

__all__ = [
    "DATASETS",
    "IMAGE_DATASETS",
    "ArrayDataset",
    "CorruptDatasetError",
    "DatasetNotFoundError",
    "ImageFiles",
    "balanced_subset",
    "describe_dataset",
    "digits_split_indices",
    "find_dataset",
    "load",
    "load_digits",
    "normalization",
    "open_images",
    "read_image_folder",
]
