"""Tables of dicts as CSV: the one writer the experiments, the transfer study and the ``-f csv`` output share."""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["column_names", "csv_text"]


def column_names(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Every key of ``rows``, in order of first appearance (rows may have different keys).

    Examples
    --------
    >>> column_names([{"a": 1}, {"b": 2, "a": 3}])
    ['a', 'b']
    """
    keys: list[str] = []
    for row in rows:
        keys += [k for k in row if k not in keys]
    return keys


def csv_text(rows: Sequence[Mapping[str, Any]], *, exact_floats: bool = False) -> str:
    """``rows`` as CSV text with a header of :func:`column_names` (missing cells empty); ``exact_floats`` writes
    floats with ``repr`` so they read back bit-identically.

    Examples
    --------
    >>> print(csv_text([{"K": 3, "rho": 0.5}, {"K": 4}]), end="")
    K,rho
    3,0.5
    4,
    """
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=column_names(rows), lineterminator="\n")
    writer.writeheader()
    if exact_floats:
        rows = [{k: repr(v) if isinstance(v, float) else v for k, v in row.items()} for row in rows]
    writer.writerows(rows)
    return buf.getvalue()
