"""Datasets from local files only (nclab never downloads). The embedded default is ``digits``.

``load(name, split, root=None, per_class=None, seed=0, *, pad_to=None, normalize=True, **options)`` returns an
in-memory :class:`ArrayDataset` (``x`` float32 ``(N, *input_shape)``, ``y`` int64 ``(N,)``).
"""

from nclab.data.digits import load_digits
from nclab.data.errors import CorruptDatasetError, DatasetNotFoundError
from nclab.data.loaders import DATASETS, ArrayDataset, balanced_subset, digits_split_indices, load

__all__ = [
    "DATASETS",
    "ArrayDataset",
    "CorruptDatasetError",
    "DatasetNotFoundError",
    "balanced_subset",
    "digits_split_indices",
    "load",
    "load_digits",
]
