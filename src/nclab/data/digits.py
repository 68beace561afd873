"""scikit-learn's bundled handwritten digits (1,797 images, 8 x 8, 10 classes), embedded in nclab."""

from __future__ import annotations

import gzip
from importlib import resources

import numpy as np

NUM_CLASSES = 10


def load_digits(*, normalize: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Return ``X (1797, 64)`` float64 pixels and ``y (1797,)`` int64 labels in 0..9.

    ``normalize`` divides the pixel values (0..16) by 16.

    Parameters
    ----------
    normalize : bool, default=True
        Scale the pixels to [0, 1].

    Returns
    -------
    X : numpy.ndarray, shape (1797, 64)
        Float64 pixels of the 8 x 8 images, row-major.
    y : numpy.ndarray, shape (1797,)
        Int64 labels in ``0 .. 9``.

    See Also
    --------
    nclab.data.load : ``load("digits", split)``, the fixed train / test split as an ArrayDataset.

    Examples
    --------
    >>> X, y = load_digits()
    >>> X.shape, float(X.max()), float(load_digits(normalize=False)[0].max()), np.bincount(y).tolist()
    ((1797, 64), 1.0, 16.0, [178, 182, 177, 183, 181, 182, 181, 179, 174, 180])
    """
    with resources.files("nclab.data").joinpath("_embedded/digits.csv.gz").open("rb") as raw:
        data = np.loadtxt(gzip.open(raw), delimiter=",", dtype=np.float64)
    X, y = data[:, :-1], data[:, -1].astype(np.int64)
    if normalize:
        X = X / 16.0
    return X, y
