"""Tables of dicts as CSV (the one writer the experiments, the transfer study and the ``-f csv`` output share) and
as pandas DataFrames (:func:`to_frame`, when pandas is installed)."""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["column_names", "csv_text", "to_frame"]


def column_names(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Every key of ``rows``, in order of first appearance (rows may have different keys).

    Parameters
    ----------
    rows : sequence of mapping of str to object
        The table's rows.

    Returns
    -------
    list of str
        The column names.

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
    r"""``rows`` as CSV text with a header of :func:`column_names` (missing cells empty); ``exact_floats`` writes
    floats with ``repr`` so they read back bit-identically.

    Parameters
    ----------
    rows : sequence of mapping of str to object
        The table's rows.
    exact_floats : bool, default False
        Write floats with ``repr`` (every digit) instead of ``str``.

    Returns
    -------
    str
        The CSV text, ``\n`` line ends, a header line first.

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


def _as_mapping(row: Any) -> Mapping[str, Any]:
    if isinstance(row, Mapping):
        return row
    if hasattr(row, "_asdict"):  # NamedTuple rows such as nclab.io.MetricRow
        fields: dict[str, Any] = row._asdict()
        return fields
    raise TypeError(f"rows must be mappings or named tuples, got {type(row).__name__}")


def to_frame(rows: Sequence[Any] | Mapping[str, Any]) -> Any:
    """A ``pandas.DataFrame`` of ``rows`` (mappings or named tuples, one row each; columns in the order of
    :func:`column_names`), or of one summary mapping (a single row).

    pandas is optional: without it this raises ``ImportError`` naming the package to install.

    Parameters
    ----------
    rows : sequence of mappings or named tuples, or one mapping
        The rows, or a single summary row.

    Returns
    -------
    pandas.DataFrame
        One row per row, columns in order of first appearance.

    Raises
    ------
    ImportError
        pandas is not installed.
    TypeError
        A row is neither a mapping nor a named tuple.

    Examples
    --------
    >>> frame = to_frame([{"K": 3, "rho": 0.5}, {"K": 4}])
    >>> list(frame.columns), frame.shape
    (['K', 'rho'], (2, 2))
    """
    try:
        import pandas as pd
    except ImportError as exc:  # pragma: no cover - pandas is in the dev extra
        raise ImportError("to_frame needs pandas: pip install pandas") from exc
    records = [_as_mapping(rows)] if isinstance(rows, Mapping) else [_as_mapping(r) for r in rows]
    return pd.DataFrame.from_records(records, columns=column_names(records))
