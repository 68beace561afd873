"""Argument validation shared by nclab's functions (modelled on scikit-learn's ``sklearn.utils.validation``).

Every helper takes the checked argument's ``name`` (keyword-only, like every option here) and puts it in its
error message, so that a user sees ``ValueError: W must be ...`` for the argument they passed, not a message
about some internal variable. Each helper either returns the validated value (converted: float64 numpy arrays,
``int``, ``float``) or raises:

* ``TypeError`` for a wrong kind of value (a float where an int is needed, float labels, ``bool`` as a number);
* ``ValueError`` for a right kind with a wrong value (shape, range, NaN/inf, unknown choice).

Array inputs may be numpy arrays, nested lists or torch tensors (any device, with or without
``requires_grad``); tensors are detached and copied to the CPU. Vocabulary: ``K`` classes, ``N`` samples,
``d`` dimension; rows are classes (``W (K, d)``, class means) or samples (``H (N, d)``).

The one row normalisation of nclab is :func:`unit_rows`. A zero row has no direction, and what to do with it
depends on the caller, so each caller states its policy with ``zero=`` (see docs/conventions.md, "Validation").

This module imports nothing from nclab (every package may use it without an import cycle).
"""

from __future__ import annotations

import difflib
import os
import typing
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "ZeroRowPolicy",
    "as_rows",
    "check_bool",
    "check_choice",
    "check_features",
    "check_finite",
    "check_int",
    "check_labels",
    "check_number",
    "check_output_dir",
    "check_output_file",
    "check_positive",
    "check_unmasked",
    "did_you_mean",
    "infer_num_classes",
    "unit_rows",
]

ZeroRowPolicy = Literal["raise", "keep", "nan"]

# The ignore-index sentinels of the usual training losses (torch's CrossEntropyLoss default is -100): a label
# equal to one of them is named as such, because the fix (drop those samples) differs from a wrong K.
_IGNORE_INDEX_SENTINELS = (-100, -1)


def _to_numpy(X: Any, name: str) -> Any:
    if hasattr(X, "detach"):  # torch tensors, also with requires_grad or on an accelerator
        return X.detach().cpu().numpy()
    return check_unmasked(X, name=name)


def check_unmasked(X: Any, *, name: str) -> Any:
    """``X`` itself, or the data of a numpy masked array none of whose entries is masked; a masked array with a
    masked entry is refused (numpy's conversions drop the mask, so the values under it would be measured).

    Parameters
    ----------
    X : any
        The argument; only ``numpy.ma.MaskedArray`` is looked at.
    name : str
        The argument's name, used in the message.

    Returns
    -------
    any
        ``X``, or ``X.data`` for a masked array without a masked entry.

    Raises
    ------
    ValueError
        ``"{name} is a numpy masked array with M masked entries: ..."``, with the two ways out (drop the samples
        that have a masked entry, or fill them).

    Examples
    --------
    >>> import numpy as np
    >>> check_unmasked(np.ma.masked_array([1.0, 2.0], mask=[False, False]), name="H")
    array([1., 2.])
    >>> check_unmasked(np.ma.masked_array([1.0, 2.0], mask=[False, True]), name="H")
    Traceback (most recent call last):
        ...
    ValueError: H is a numpy masked array with 1 masked entry: nclab does not skip masked values (numpy's \
conversions drop the mask, and the values under it would be measured); drop the samples with a masked entry \
first (keep = ~H.mask.any(axis=1), then H[keep].data and the labels' [keep]), or fill them (H.filled(value))
    """
    if not isinstance(X, np.ma.MaskedArray):
        return X
    masked = int(np.count_nonzero(np.ma.getmaskarray(X)))
    if masked == 0:
        return X.data
    raise ValueError(
        f"{name} is a numpy masked array with {masked} masked entr{'y' if masked == 1 else 'ies'}: nclab does not "
        f"skip masked values (numpy's conversions drop the mask, and the values under it would be measured); drop "
        f"the samples with a masked entry first (keep = ~{name}.mask.any(axis=1), then {name}[keep].data and the "
        f"labels' [keep]), or fill them ({name}.filled(value))"
    )


def check_finite(X: Any, *, name: str) -> NDArray[np.float64]:
    """``X`` as a float64 numpy array (any shape, scalars too), checked to contain no NaN or inf.

    Parameters
    ----------
    X : array-like or torch tensor, any shape
        The values to check; tensors are detached and copied to the CPU.
    name : str
        The argument's name, used in the error message.

    Returns
    -------
    numpy.ndarray of float64, same shape as ``X``
        A new array (never a view of ``X``).

    Raises
    ------
    ValueError
        ``"{name} contains NaN or inf (non-finite values)"``.

    Examples
    --------
    >>> check_finite([1, 2], name="b")
    array([1., 2.])
    >>> check_finite([1.0, float("nan")], name="b")
    Traceback (most recent call last):
        ...
    ValueError: b contains NaN or inf (non-finite values)
    """
    A = np.array(_to_numpy(X, name), dtype=np.float64)
    if not np.all(np.isfinite(A)):
        raise ValueError(f"{name} contains NaN or inf (non-finite values)")
    return A


def as_rows(X: Any, *, name: str = "X", min_rows: int = 2) -> NDArray[np.float64]:
    """A float64 numpy copy of the matrix ``X (rows, columns)``, checked: 2-D, at least ``min_rows`` rows and
    one column, all finite.

    ``X`` holds one row per class (``W (K, d)``, class means; default ``min_rows=2``: a class geometry needs two
    classes) or per sample (``H (N, d)``, pass ``min_rows=1``).

    Parameters
    ----------
    X : array-like or torch tensor, shape (K, d) or (N, d)
        The matrix, one row per class or per sample.
    name : str, default "X"
        The argument's name, used in every message.
    min_rows : int, default 2
        Fewest rows accepted.

    Returns
    -------
    numpy.ndarray of float64, shape (K, d) or (N, d)
        A copy of ``X``; ``X`` itself when it is a read-only float64 numpy array (which neither side can change:
        a caller that validates rows once and makes them read-only passes them on without further copies).

    Raises
    ------
    ValueError
        Naming ``name``: not 2-D, too few rows, no column, NaN or inf.

    Examples
    --------
    >>> as_rows([[1, 0], [0, 1]], name="W").dtype
    dtype('float64')
    >>> as_rows([[1.0, 0.0]], name="W")
    Traceback (most recent call last):
        ...
    ValueError: W needs at least 2 rows, got 1
    """
    if type(X) is np.ndarray and X.dtype == np.float64 and not X.flags.writeable:
        A = X  # read-only: neither the caller nor this function's user can change it, so no copy is needed
    else:
        A = np.array(_to_numpy(X, name), dtype=np.float64)
    if A.ndim != 2:
        raise ValueError(f"{name} must be 2-D (one row per class or sample), got shape {A.shape}")
    if A.shape[0] < min_rows:
        raise ValueError(f"{name} needs at least {min_rows} rows, got {A.shape[0]}")
    if A.shape[1] < 1:
        raise ValueError(f"{name} needs at least one column, got shape {A.shape}")
    # the sum is finite iff every entry is (or a finite sum overflowed: then the entries are checked one by one),
    # without the K x d boolean array of np.isfinite
    with np.errstate(over="ignore", invalid="ignore"):
        finite = bool(np.isfinite(np.add.reduce(A, axis=None)))
    if not (finite or np.isfinite(A).all()):
        raise ValueError(f"{name} contains NaN or inf (non-finite values)")
    return A


def check_features(H: Any, *, name: str = "H", d: int | None = None) -> np.ndarray:
    """Features ``H (N, d)``, one row per sample, as a finite float64 numpy array with at least one row.

    Parameters
    ----------
    H : array-like or torch tensor, shape (N, d)
        One row per sample.
    name : str, default "H"
        The argument's name, used in every message.
    d : int or None, default None
        The required dimension; None accepts any.

    Returns
    -------
    numpy.ndarray of float64, shape (N, d)
        A copy of ``H``.

    Raises
    ------
    ValueError
        Naming ``name``: not 2-D, no row, wrong dimension, NaN or inf.

    Examples
    --------
    >>> check_features([[1, 2, 3]], d=3).shape
    (1, 3)
    >>> check_features([[1, 2, 3]], d=2)
    Traceback (most recent call last):
        ...
    ValueError: H has dimension 3, expected d = 2
    """
    A = as_rows(H, name=name, min_rows=1)
    if d is not None and A.shape[1] != d:
        raise ValueError(f"{name} has dimension {A.shape[1]}, expected d = {d}")
    return A


def check_labels(y: Any, *, K: int | None, name: str = "y", num_rows: int | None = None) -> np.ndarray:
    """Integer class labels ``y (N,)`` in ``0 .. K-1`` as an int64 numpy array.

    Parameters
    ----------
    y : array-like or torch tensor of integers, shape (N,)
        One label per sample.
    K : int or None
        Number of classes; None checks only ``y >= 0`` (the caller infers ``K = max(y) + 1``).
    name : str, default "y"
        The argument's name, used in every message.
    num_rows : int or None, default None
        Required number of labels (one per row of the features).

    Returns
    -------
    numpy.ndarray of int64, shape (N,)
        The labels (an empty array for ``N = 0``).

    Raises
    ------
    TypeError
        A float, complex or bool dtype (labels are class indices, never scores or one-hot rows).
    ValueError
        Not 1-D, wrong length, or a label outside ``[0, K)``. A negative label equal to an ignore-index
        sentinel (-100, -1) is reported as such: those samples must be dropped before measuring.

    Examples
    --------
    >>> check_labels([0, 2, 1], K=3).tolist()
    [0, 2, 1]
    >>> check_labels([0, 3], K=3)
    Traceback (most recent call last):
        ...
    ValueError: y: label 3 is out of range [0, 3)
    """
    Y = np.asarray(_to_numpy(y, name))
    if Y.dtype.kind not in "iu":
        raise TypeError(f"{name} must have an integer dtype (class indices), got {Y.dtype}")
    if Y.ndim != 1:
        raise ValueError(f"{name} must be 1-D (one label per sample), got shape {Y.shape}")
    if num_rows is not None and Y.shape[0] != num_rows:
        raise ValueError(f"{name} must have one label per row: {num_rows} rows, got {Y.shape[0]} labels")
    Y = Y.astype(np.int64)
    if Y.size == 0:
        return Y
    lo = int(Y.min())
    if lo < 0:
        if lo in _IGNORE_INDEX_SENTINELS:
            count = int(np.sum(Y == lo))
            raise ValueError(
                f"{name} contains {count} label(s) {lo}, an ignore-index sentinel (e.g. torch's "
                f"CrossEntropyLoss ignore_index): drop those samples before measuring"
            )
        raise ValueError(f"{name}: label {lo} is out of range [0, {K if K is not None else 'K'})")
    hi = int(Y.max())
    if K is not None and hi >= K:
        raise ValueError(f"{name}: label {hi} is out of range [0, {K})")
    return Y


# Large positive labels used as "ignore" markers (int32/int64/uint16/uint32 maxima): named as sentinels.
_LARGE_SENTINELS = (2**15 - 1, 2**16 - 1, 2**31 - 1, 2**32 - 1, 2**63 - 1)


def infer_num_classes(y: Any, *, name: str = "labels") -> int:
    """K = max label + 1 (at least 2) of integer labels ``y (N,)``, refused when it is implausible.

    An inferred K above ``max(1000, 10 x the number of distinct labels)`` would allocate state for classes that
    never occur (a sentinel such as 2**31 - 1 asks for terabytes). Negative labels: :func:`check_labels`.

    Parameters
    ----------
    y : array-like or torch tensor of integers, shape (N,)
        One label per sample.
    name : str, default "labels"
        The argument's name, used in every message.

    Returns
    -------
    int
        ``K = max(max(y) + 1, 2)``; 2 for empty ``y``.

    Raises
    ------
    ValueError
        Naming the label, calling it an ignore-index sentinel when it is one of the usual markers or an outlier
        far above the other labels, and the fix (drop those samples, relabel, or give K explicitly).

    Examples
    --------
    >>> infer_num_classes([0, 4, 1])
    5
    >>> infer_num_classes([0, 0])
    2
    """
    Y = check_labels(y, K=None, name=name)
    if Y.size == 0:
        return 2
    hi = int(Y.max())
    K = max(hi + 1, 2)
    distinct = np.unique(Y)
    if K <= max(1000, 10 * distinct.size):
        return K
    below = int(distinct[-2]) if distinct.size > 1 else 0
    count = int(np.sum(Y == hi))
    if hi in _LARGE_SENTINELS or hi > 10 * (below + 1):
        why = (
            f"label {hi} ({count} sample(s)) looks like an ignore-index sentinel (the other labels are <= {below}): "
            f"drop those samples before measuring, or give the number of classes explicitly"
        )
    else:
        why = "relabel them to 0..K-1 (np.unique(y, return_inverse=True)) or give the number of classes explicitly"
    raise ValueError(
        f"{name}: the largest label {hi} would make K = {K} classes, but only {distinct.size} distinct labels "
        f"occur; {why}"
    )


def check_bool(value: Any, *, name: str) -> bool:
    """``value`` as a Python ``bool``: only ``True`` / ``False`` (and numpy's ``np.True_`` / ``np.False_``) pass.

    Truthiness is never used: the strings ``"no"``, ``"false"``, ``"0"`` are truthy in Python, so reading them
    as booleans would turn a user's "no" into ``True``. A YAML or command-line value must be written ``true`` or
    ``false``.

    Parameters
    ----------
    value : object
        The value to check.
    name : str
        The argument's name, used in the error message.

    Returns
    -------
    bool
        ``value`` as a Python bool.

    Raises
    ------
    TypeError
        Ints (``0``, ``1``), strings and ``None``, naming ``name``.

    Examples
    --------
    >>> check_bool(np.True_, name="normalize")
    True
    >>> check_bool("no", name="center_w")
    Traceback (most recent call last):
        ...
    TypeError: center_w must be true or false (a bool), got 'no' (str)
    """
    if isinstance(value, bool | np.bool_):
        return bool(value)
    raise TypeError(f"{name} must be true or false (a bool), got {value!r} ({type(value).__name__})")


def check_choice(value: Any, choices: Any, *, name: str) -> Any:
    """``value`` if it is one of ``choices``.

    Parameters
    ----------
    value : object
        The value to check; ``True`` never passes for a choice ``1`` (bools are compared as bools).
    choices : iterable or typing.Literal
        The allowed values, or a ``typing.Literal`` whose arguments are read.
    name : str
        The argument's name, used in the error message.

    Returns
    -------
    object
        ``value`` itself.

    Raises
    ------
    ValueError
        ``"{name} must be one of 'a', 'b', got 'c'"``.

    Examples
    --------
    >>> check_choice("gram", Literal["frobenius", "gram"], name="variant")
    'gram'
    >>> check_choice("grm", ["frobenius", "gram"], name="variant")
    Traceback (most recent call last):
        ...
    ValueError: variant must be one of 'frobenius', 'gram', got 'grm'
    """
    allowed = typing.get_args(choices) if typing.get_origin(choices) is Literal else tuple(choices)
    for c in allowed:
        # bools are ints: True must not pass for a choice 1
        if isinstance(value, bool) == isinstance(c, bool) and _equal(value, c):
            return value
    listed = ", ".join(repr(c) for c in allowed)
    raise ValueError(f"{name} must be one of {listed}, got {value!r}")


def did_you_mean(key: str, known: Iterable[str]) -> str:
    """The suggestion that ends every unknown-key message (config keys, ``--set`` keys, sweep and study files,
    ``--convention`` keys).

    Parameters
    ----------
    key : str
        The unknown key the user wrote.
    known : iterable of str
        The keys that exist.

    Returns
    -------
    str
        ``" (did you mean 'x'?)"`` naming the closest of ``known`` (``difflib`` ratio at least 0.6), or ``""``
        when none is close.

    Examples
    --------
    >>> did_you_mean("optim.lrr", ["optim.lr", "optim.momentum", "train.epochs"])
    " (did you mean 'optim.lr'?)"
    >>> did_you_mean("colour", ["seed", "name"])
    ''
    """
    close = difflib.get_close_matches(key, list(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _equal(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except (TypeError, ValueError):  # an array compared with a string has no single truth value
        return False


def check_int(value: Any, *, name: str, low: int | None = None, high: int | None = None) -> int:
    """``value`` as a Python ``int``, checked ``low <= value <= high`` (either bound optional).

    Parameters
    ----------
    value : object
        Python and numpy integers pass; ``bool`` and floats (also integral ones such as ``3.0``) do not.
    name : str
        The argument's name, used in every message.
    low, high : int or None, default None
        Inclusive bounds; None leaves that side open.

    Returns
    -------
    int
        ``value`` as a Python int.

    Raises
    ------
    TypeError
        ``bool``, floats and non-numbers, naming ``name``.
    ValueError
        A value outside ``[low, high]``, naming ``name``.

    Examples
    --------
    >>> check_int(np.int64(3), name="K", low=2)
    3
    >>> check_int(1, name="K", low=2)
    Traceback (most recent call last):
        ...
    ValueError: K must be an int >= 2, got 1
    """
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise TypeError(f"{name} must be an int, got {value!r} ({type(value).__name__})")
    v = int(value)
    if (low is not None and v < low) or (high is not None and v > high):
        if high is None:
            raise ValueError(f"{name} must be an int >= {low}, got {v}")
        if low is None:
            raise ValueError(f"{name} must be an int <= {high}, got {v}")
        raise ValueError(f"{name} must be an int in [{low}, {high}], got {v}")
    return v


def _as_float(value: Any, name: str) -> float:
    """``value`` as a float, or ``TypeError`` naming ``name`` for ``bool`` and non-numbers (the one type rule of
    :func:`check_number` and :func:`check_positive`)."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise TypeError(f"{name} must be a number, got {value!r} ({type(value).__name__})")
    return float(value)


def check_number(value: Any, *, name: str) -> float:
    """``value`` as a finite ``float`` (a fill value, an offset: any sign, never NaN or inf).

    Parameters
    ----------
    value : int or float
        The number to check (numpy scalars too; not ``bool``).
    name : str
        The argument's name, used in every message.

    Returns
    -------
    float
        ``value`` as a Python float.

    Raises
    ------
    TypeError
        ``bool`` and non-numbers, naming ``name``.
    ValueError
        NaN and inf, naming ``name``.

    Examples
    --------
    >>> check_number(-3, name="fill")
    -3.0
    >>> check_number(float("nan"), name="fill")
    Traceback (most recent call last):
        ...
    ValueError: fill must be a finite number, got nan
    """
    v = _as_float(value, name)
    if not np.isfinite(v):
        raise ValueError(f"{name} must be a finite number, got {v}")
    return v


def check_positive(value: Any, *, name: str, strict: bool = True) -> float:
    """``value`` as a finite ``float``, checked ``> 0`` (``strict=True``) or ``>= 0``.

    Parameters
    ----------
    value : int or float
        The number to check (numpy scalars too; not ``bool``).
    name : str
        The argument's name, used in every message.
    strict : bool, default True
        True requires ``value > 0``, False ``value >= 0``.

    Returns
    -------
    float
        ``value`` as a Python float.

    Raises
    ------
    TypeError
        ``bool`` and non-numbers, naming ``name``.
    ValueError
        NaN, inf and out-of-range values, naming ``name``.

    Examples
    --------
    >>> check_positive(2, name="lr")
    2.0
    >>> check_positive(0.0, name="lr")
    Traceback (most recent call last):
        ...
    ValueError: lr must be a finite number > 0, got 0.0
    """
    v = _as_float(value, name)
    if not np.isfinite(v) or (v <= 0 if strict else v < 0):
        raise ValueError(f"{name} must be a finite number {'>' if strict else '>='} 0, got {value!r}")
    return v


def unit_rows(X: Any, *, zero: ZeroRowPolicy, atol: float = 0.0, name: str = "X") -> Any:
    """Every row of ``X`` (along the last axis) divided by its L2 norm: ``U_i = X_i / ||X_i||``.

    Parameters
    ----------
    X : array-like or torch tensor, shape (..., d)
        Numpy/list in: float64 numpy out. Torch in: torch out, same dtype and device (half precision is
        normalised in float32 and cast back), differentiable; no device synchronisation unless
        ``zero="raise"``.
    zero : {"raise", "keep", "nan"}
        What a zero row (``||X_i|| <= atol``, no direction) becomes; no default, every caller states it:
        ``"raise"`` a ``ValueError`` naming ``name`` and the rows; ``"keep"`` stays as it is (zero when
        ``atol = 0``, as ``torch.nn.functional.normalize``); ``"nan"`` a row of NaN (a metric built on it is
        then NaN, and the caller can find the rows with ``isnan``).
    atol : float
        Norm at or below which a row counts as zero (default 0: exactly zero rows only). Callers that centre
        their rows pass a threshold relative to the uncentred scale, since centring equal rows leaves roundoff.
    name : str
        The argument's name, used in the error message.

    Returns
    -------
    The normalised rows, same shape as ``X``.

    Examples
    --------
    >>> unit_rows([[3.0, 4.0], [0.0, 0.0]], zero="keep").tolist()
    [[0.6, 0.8], [0.0, 0.0]]
    """
    if zero not in ("raise", "keep", "nan"):  # the common case skips the general check (a hot path of the metrics)
        check_choice(zero, ZeroRowPolicy, name="zero")
    if hasattr(X, "detach"):
        import torch

        work = X if X.dtype in (torch.float32, torch.float64) else X.float()
        norms = torch.linalg.vector_norm(work, dim=-1, keepdim=True)
        bad = norms <= atol
        if zero == "raise" and bool(bad.any()):
            _raise_zero_rows(bad.reshape(-1).cpu().numpy(), name)
        fill = torch.ones_like(norms) if zero == "keep" else torch.full_like(norms, float("nan"))
        out = work / torch.where(bad, fill, norms)
        return out.to(X.dtype)
    A = np.asarray(_to_numpy(X, name), dtype=np.float64)  # no copy needed: the result is a new array
    norms = np.linalg.norm(A, axis=-1, keepdims=True)
    bad = norms <= atol
    if not bad.any():
        return A / norms
    if zero == "raise":
        _raise_zero_rows(bad.reshape(-1), name)
    return A / np.where(bad, 1.0 if zero == "keep" else np.nan, norms)


def _raise_zero_rows(bad: np.ndarray, name: str) -> None:
    idx = np.flatnonzero(bad)
    listed = ", ".join(map(str, idx[:10])) + (" ..." if idx.size > 10 else "")
    raise ValueError(f"{name} has {idx.size} zero row(s) ({listed}): a zero row has no direction")


def _nearest_existing(path: Path) -> Path:
    for parent in (path, *path.parents):
        if parent.exists() or parent.is_symlink():
            return parent
    return Path(".")


def _check_writable_folder(folder: Path, path: Path, name: str) -> None:
    if not folder.is_dir():
        raise NotADirectoryError(f"{name} {path}: {folder} is a file, not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise PermissionError(f"{name} {path}: the folder {folder} is not writable")


def check_output_dir(path: str | os.PathLike[str], *, name: str, create: bool = False) -> Path:
    """``path`` as a ``Path``, checked to be usable as an output folder before any work starts: an existing
    writable folder, or a missing one whose nearest existing ancestor is a writable folder.

    Parameters
    ----------
    path : str or os.PathLike
        The output folder.
    name : str
        The argument's name (e.g. ``"--out"``), used in every message.
    create : bool, default False
        Make the missing folders (an ``OSError`` of the file system, e.g. a read-only mount, is re-raised as
        ``PermissionError`` naming ``path``).

    Returns
    -------
    pathlib.Path
        ``path``.

    Raises
    ------
    NotADirectoryError
        ``path`` or an ancestor is a regular file.
    PermissionError
        Not writable, or cannot be created.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     out = check_output_dir(Path(tmp) / "a" / "b", name="out", create=True)
    ...     out.is_dir()
    True
    """
    path = Path(path)
    _check_writable_folder(_nearest_existing(path), path, name)
    if create:
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise PermissionError(f"{name} {path}: cannot create it ({err.strerror or err})") from None
    return path


def check_output_file(path: str | os.PathLike[str], *, name: str, suffix: str | None = None) -> Path:
    """``path`` as a ``Path``, checked to be writable as an output file before any work starts: its folder
    exists and is writable, ``path`` is not a folder, and its name ends in ``suffix``, so the file written is
    exactly the one named.

    Parameters
    ----------
    path : str or os.PathLike
        The output file.
    name : str
        The argument's name (e.g. ``"--out"``), used in every message.
    suffix : str or None, default None
        Required suffix, e.g. ``".npy"``; None accepts any.

    Returns
    -------
    pathlib.Path
        ``path``.

    Raises
    ------
    FileNotFoundError
        The folder does not exist.
    NotADirectoryError, IsADirectoryError, PermissionError
        An ancestor is a file, ``path`` is a folder, or the folder is not writable.
    ValueError
        Wrong suffix. Every message names ``name`` and ``path``.

    Examples
    --------
    >>> check_output_file("features.npz", name="out", suffix=".npy")
    Traceback (most recent call last):
        ...
    ValueError: out features.npz: the file name must end in .npy
    """
    path = Path(path)
    if suffix is not None and path.suffix != suffix:
        raise ValueError(f"{name} {path}: the file name must end in {suffix}")
    if path.is_dir():
        raise IsADirectoryError(f"{name} {path}: is a folder; give a file name")
    folder = path.parent
    nearest = _nearest_existing(folder)
    if nearest != folder and nearest.is_dir():
        raise FileNotFoundError(f"{name} {path}: the folder {folder} does not exist")
    _check_writable_folder(nearest, path, name)
    return path
