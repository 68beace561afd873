"""scikit-learn's bundled handwritten digits (1,797 images, 8 x 8, 10 classes), embedded in nclab."""

from __future__ import annotations

import gzip
from importlib import resources

import numpy as np

NUM_CLASSES = 10


def load_digits(*, normalize: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Return ``X (1797, 64)`` float64 pixels and ``y (1797,)`` int64 labels in 0..9.

    ``normalize`` divides the pixel values (0..16) by 16.
    """
    with resources.files("nclab.data").joinpath("_embedded/digits.csv.gz").open("rb") as raw:
        data = np.loadtxt(gzip.open(raw), delimiter=",", dtype=np.float64)
    X, y = data[:, :-1], data[:, -1].astype(np.int64)
    if normalize:
        X = X / 16.0
    return X, y
