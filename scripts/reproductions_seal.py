"""The seal of the reproductions page's result files, and the strict reading of their summaries.

A result file (``docs/reproductions/<experiment>.json``, written by ``scripts/reproductions_doc.py``) carries under
``"sha256"`` the :func:`checksum` of its other fields; :func:`load` refuses a file that does not parse, lacks a
field, has one of the wrong JSON type or does not match its checksum. :func:`strict` hands a summary to the claims'
criteria so that a string, or a boolean where a number is read, raises :class:`ResultFileError` instead of becoming
a verdict. Every refusal is one line naming the file, the problem and the fix. No git here, no nclab import: this
is the file format only.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["FIELD_TYPES", "SEAL", "Refusal", "ResultFileError", "checksum", "fix", "load", "strict"]

#: The key of a result file's checksum (:func:`checksum` of its other fields).
SEAL = "sha256"


class Refusal(Exception):
    """What the generator refuses to do, in one line naming the cause and the fix (the command: exit 2)."""


class ResultFileError(Refusal):
    """A result file the page cannot rest on; the message is one line naming the file, the problem and the fix.
    Not a ``ValueError``: a criterion that catches those (a value it cannot use) must not turn it into a verdict."""


#: The JSON type of each field of a result file (a bool is never taken for an int).
FIELD_TYPES: dict[str, type | tuple[type, ...]] = {
    "experiment": str,
    "scale": str,
    "seed": int,
    "commit": str,
    "command": str,
    "date": str,
    "seconds": (int, float),
    "summary": dict,
}


def _type_words(want: type | tuple[type, ...]) -> str:
    return "a string" if want is str else "an integer" if want is int else "an object" if want is dict else "a number"


def fix(path: Path) -> str:
    """What to do about a bad result file: restore it from git, or re-run its experiment."""
    return f"restore it (git checkout -- {path}) or re-run it (python scripts/reproductions.py --only {path.stem})"


def checksum(fields: Mapping[str, Any]) -> str:
    """The seal of a result file: sha256 (hex) of its fields as canonical JSON (keys sorted, no spaces, ASCII).

    Examples
    --------
    >>> checksum({"b": 1, "a": [0.5, None]}) == checksum({"a": [0.5, None], "b": 1})
    True
    >>> checksum({"slope": -0.5}) == checksum({"slope": "-0.5"})
    False
    """
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def load(path: Path, fields: Sequence[str], *, sealed: bool = True) -> dict[str, Any]:
    """The JSON object of the result file at ``path``, checked: it parses, holds exactly ``fields`` (and the seal),
    each of its JSON type (:data:`FIELD_TYPES`), and (``sealed=True``) its ``"sha256"`` is :func:`checksum` of the
    rest. Anything else raises :class:`ResultFileError`, one line naming the file, the problem and the fix."""
    path = Path(path)
    how = fix(path)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ResultFileError(f"{path}: missing: {how}") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ResultFileError(f"{path}: cannot be read ({err}): {how}") from None
    except json.JSONDecodeError as err:
        raise ResultFileError(
            f"{path}: not valid JSON ({err.msg}, line {err.lineno} column {err.colno}: cut short or edited by "
            f"hand): {how}"
        ) from None
    if not isinstance(raw, dict):
        raise ResultFileError(f"{path}: holds a JSON {type(raw).__name__}, not a result file's object: {how}")
    missing = [k for k in fields if k not in raw]
    if missing:
        raise ResultFileError(f"{path}: result file lacks {missing}: {how}")
    unknown = [k for k in raw if k not in fields and k != SEAL]
    if unknown:
        raise ResultFileError(f"{path}: keys a result file does not have: {unknown}: {how}")
    if sealed:
        if SEAL not in raw:
            raise ResultFileError(
                f"{path}: carries no checksum ({SEAL!r}), so an edit would go unseen: re-run it (python "
                f"scripts/reproductions.py --only {path.stem}); a file from before the seal: "
                "python scripts/reproductions.py --seal"
            )
        if raw[SEAL] != checksum({k: raw[k] for k in fields}):
            raise ResultFileError(
                f"{path}: its content does not match its checksum (edited after it was written): {how}"
            )
    for key, want in FIELD_TYPES.items():
        v = raw[key]
        if isinstance(v, bool) or not isinstance(v, want):
            raise ResultFileError(f"{path}: {key!r} is {v!r} ({type(v).__name__}), not {_type_words(want)}: {how}")
    if not re.fullmatch(r"[0-9a-f]{40}", raw["commit"]):
        raise ResultFileError(f"{path}: 'commit' is {raw['commit']!r}, not a full 40-digit commit hash: {how}")
    return raw


class _Strict(Mapping[str, Any]):
    """A summary (or a part of one) as a claim reads it: the values come out through :func:`strict`."""

    def __init__(self, node: Mapping[str, Any], where: Path, path: tuple[str | int, ...]) -> None:
        self._node, self._where, self._path = node, where, path

    def __getitem__(self, key: str) -> Any:
        return strict(self._node[key], self._where, (*self._path, key))

    def __iter__(self) -> Iterator[str]:
        return iter(self._node)

    def __len__(self) -> int:
        return len(self._node)


class _Flag:
    """A boolean summary value: equal to ``True`` / ``False``, but a number nowhere (``float`` refuses it)."""

    def __init__(self, value: bool, where: Path, path: tuple[str | int, ...]) -> None:
        self.value, self._where, self._path = value, where, path

    def __eq__(self, other: object) -> bool:
        return self.value == (other.value if isinstance(other, _Flag) else other)

    def __hash__(self) -> int:
        return hash(self.value)

    def __bool__(self) -> bool:
        return self.value

    def __str__(self) -> str:
        return str(self.value).lower()

    def __float__(self) -> float:
        raise _type_error(self._where, self._path, self.value, "a boolean")


class _Text(str):
    """A string summary value (a run's label, say): a string everywhere, but a number nowhere (``float`` refuses
    it, naming the file and the key), so a value stored as ``"-0.5"`` can never pass for -0.5."""

    def __new__(cls, value: str, where: Path, path: tuple[str | int, ...]) -> _Text:
        out = super().__new__(cls, value)
        out._where, out._path = where, path  # type: ignore[attr-defined]
        return out

    def __float__(self) -> float:
        raise _type_error(self._where, self._path, str(self), "a string")  # type: ignore[attr-defined]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, bool | _Flag):  # "true" where the claim reads a boolean
            raise _type_error(self._where, self._path, str(self), "a string")  # type: ignore[attr-defined]
        return str.__eq__(self, other)

    __hash__ = str.__hash__


def _type_error(where: Path, path: tuple[str | int, ...], value: Any, what: str) -> ResultFileError:
    key = str(path[0]) + "".join(f"[{p!r}]" for p in path[1:]) if path else "summary"
    return ResultFileError(
        f"{where}: summary value {key} is {what} ({value!r}) where a claim reads a number: the experiment must "
        f"return numbers (or null for 'not reached'): {fix(where)}"
    )


def strict(value: Any, where: Path, path: tuple[str | int, ...]) -> Any:
    """``value`` for a criterion: mappings stay lazy (:class:`_Strict`), lists are checked item by item, a string
    becomes a :class:`_Text` and a boolean a :class:`_Flag` (neither converts to a number: reading one as a number
    raises :class:`ResultFileError`); numbers and ``None`` pass unchanged."""
    if isinstance(value, Mapping):
        return _Strict(value, where, path)
    if isinstance(value, list):
        return [strict(v, where, (*path, i)) for i, v in enumerate(value)]
    if isinstance(value, str):
        return _Text(value, where, path)
    if isinstance(value, bool):
        return _Flag(value, where, path)
    return value
