"""Which classes a collapse is measured over: all ``K`` (the default) or the classes present.

A language model's vocabulary, or any ``K`` larger than the samples seen, leaves classes without a sample; their
means do not exist, so a report over ``classes="all"`` has no value. ``classes="present"`` measures the classes
with at least ``min_count`` samples, and subsets the classifier's rows and bias with them, so that NC3 and NC4
stay. :func:`present_classes` is the one rule, :func:`select_classes` the one subsetting; every entry point
(``collapse_report``, ``CollapseMonitor``, the Lightning and Hugging Face callbacks, ``nclab measure``) goes
through them.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from nclab.stats.class_stats import ClassStats
from nclab.stats.moments import ClassMoments
from nclab.validation import as_rows, check_finite, check_unmasked

__all__ = ["ClassesRule", "check_classes", "present_classes", "select_classes"]

#: ``"all"``: every one of the K classes (an empty class makes the class-mean metrics undefined);
#: ``"present"``: the classes with at least ``min_count`` samples.
ClassesRule = Literal["all", "present"]


def check_classes(classes: Any, min_count: Any) -> tuple[ClassesRule, int]:
    """``(classes, min_count)`` checked: ``classes`` is "all" or "present"; ``min_count`` an int >= 1 that only
    "present" takes (default 1).

    Parameters
    ----------
    classes : str
        "all" or "present".
    min_count : int or None
        The samples a class needs (None: 1).

    Returns
    -------
    tuple of (str, int)
        The rule and the samples a class needs.

    Examples
    --------
    >>> check_classes("present", None)
    ('present', 1)
    >>> check_classes("all", 5)
    Traceback (most recent call last):
        ...
    ValueError: min_count=5 applies to classes='present' only (classes='all' measures every class)
    """
    if not isinstance(classes, str) or classes not in ("all", "present"):
        raise ValueError(f"classes must be 'all' or 'present', got {classes!r}")
    if min_count is None:
        return classes, 1  # type: ignore[return-value]
    if isinstance(min_count, bool) or not isinstance(min_count, int | np.integer) or min_count < 1:
        raise ValueError(f"min_count must be an int >= 1 (the samples a class needs), got {min_count!r}")
    if classes == "all":
        raise ValueError(
            f"min_count={min_count} applies to classes='present' only (classes='all' measures every class)"
        )
    return classes, int(min_count)  # type: ignore[return-value]


def present_classes(counts: Any, min_count: int = 1) -> np.ndarray:
    """Indices (increasing) of the classes with at least ``min_count`` samples.

    Parameters
    ----------
    counts : array_like, shape (K,)
        Samples per class.
    min_count : int, default 1
        The samples a class needs.

    Returns
    -------
    ndarray of int64
        The kept class indices.

    Examples
    --------
    >>> present_classes([3, 0, 1, 5], min_count=2)
    array([0, 3])
    """
    c = np.asarray(counts)
    return np.flatnonzero(c >= max(int(min_count), 1)).astype(np.int64)


def select_classes(
    stats: ClassStats | ClassMoments,
    W: Any = None,
    b: Any = None,
    *,
    classes: ClassesRule = "all",
    min_count: int | None = None,
) -> tuple[ClassStats | ClassMoments, np.ndarray | None, np.ndarray | None, np.ndarray]:
    """The statistics, classifier rows and bias restricted to the classes ``classes`` selects.

    Parameters
    ----------
    stats : ClassStats or ClassMoments
        The statistics over K classes.
    W, b : array_like, optional
        Classifier rows ``(K, d)`` and bias ``(K,)``; subset with the classes.
    classes : {"all", "present"}, default "all"
        "all" returns the inputs unchanged; "present" keeps the classes with at least ``min_count`` samples.
    min_count : int, optional
        The samples a class needs under "present" (default 1); refused with "all".

    Returns
    -------
    stats, W, b, keep
        The statistics (a ClassStats of ``K' = keep.size`` classes, relabelled 0..K'-1; the input itself under
        "all" or when every class is kept), ``W[keep]`` (float64, read-only), ``b[keep]`` (None when not given) and
        ``keep``.

    Raises
    ------
    ValueError
        Fewer than 2 classes kept (the message says how many of K have how many samples), or a bad
        ``classes`` / ``min_count``, or ``W`` / ``b`` not of K rows.

    Examples
    --------
    >>> import numpy as np
    >>> H = np.array([[0.0, 1.0], [0.0, 3.0], [2.0, 0.0], [5.0, 5.0], [4.0, 0.0]])
    >>> stats = ClassStats.from_arrays(H, np.array([0, 0, 2, 3, 2]), K=4)
    >>> sub, Ws, bs, keep = select_classes(stats, W=np.eye(4, 2), b=np.arange(4.0), classes="present",
    ...                                    min_count=2)
    >>> keep, sub.K, Ws.tolist(), bs.tolist()
    (array([0, 2]), 2, [[1.0, 0.0], [0.0, 0.0]], [0.0, 2.0])
    """
    rule, m = check_classes(classes, min_count)
    base = stats._stats if isinstance(stats, ClassMoments) else stats
    K = base.K
    counts = np.asarray(base.counts)
    keep = present_classes(counts, m) if rule == "present" else np.arange(K, dtype=np.int64)
    # too few classes kept: W is checked whole before the error below (its own errors first)
    W_arr = None if W is None else _kept_rows(W, keep if keep.size >= 2 else np.arange(K), K, base.d)
    b_arr = None if b is None else check_finite(b, name="b")
    if b_arr is not None and b_arr.shape != (K,):
        raise ValueError(f"b must be (K,) = ({K},), got {b_arr.shape}")
    if rule == "all":
        return stats, W_arr, b_arr, keep
    if keep.size < 2:
        raise ValueError(
            f"classes='present' with min_count={m} keeps {keep.size} of {K} classes (those with >= {m} samples; "
            f"{int(np.count_nonzero(counts > 0))} have any): collapse metrics need at least 2"
        )
    if keep.size == K:
        return stats, W_arr, b_arr, keep
    assert isinstance(base, ClassStats)
    sub = base.select_classes(keep)
    return sub, W_arr, None if b_arr is None else b_arr[keep], keep


def _kept_rows(W: Any, keep: np.ndarray, K: int, d: int) -> np.ndarray:
    """``W``'s rows ``keep``, validated as :func:`~nclab.validation.as_rows` (2-D, finite), read-only: one copy
    of the kept rows, not of all K (a vocabulary's W is 0.3 GB at K = 50,257, d = 768, its kept rows a fraction;
    the finite check of all K rows reads them without a copy)."""
    raw = W.detach().cpu().numpy() if hasattr(W, "detach") else check_unmasked(W, name="W")
    raw = np.asarray(raw)
    if raw.ndim == 2 and raw.shape[0] != K:
        raise ValueError(f"W must be (K, d) = ({K}, {d}), got {raw.shape}")
    if keep.size == K or raw.ndim != 2 or raw.dtype.kind not in "fiu":
        rows = as_rows(W, name="W")  # every row (or a shape or type that as_rows refuses)
    else:
        with np.errstate(over="ignore", invalid="ignore"):
            finite = bool(np.isfinite(np.add.reduce(raw, axis=None, dtype=np.float64)))
        if not (finite or np.isfinite(raw).all()):
            raise ValueError("W contains NaN or inf (non-finite values)")
        rows = np.take(raw, keep, axis=0).astype(np.float64, copy=False)
    rows.setflags(write=False)  # shared by the report's metrics without further copies (as_rows passes it on)
    return as_rows(rows, name="W")
