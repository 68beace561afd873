"""Count the public functions and classes whose docstrings lack numpydoc sections.

    python docs/_tools/docstring_sections.py [--list]

The public names are those of the API reference (each namespace's ``__all__``, every object counted once, where it
is defined; see docs/_ext/nclab_api.py). A function needs ``Parameters`` (when it takes any), ``Returns`` (unless
it returns None) and ``Examples``; a class needs ``Parameters`` (when its constructor takes any) and ``Examples``.
Sections are read with numpydoc's own parser, as the documentation build reads them. ``--list`` prints each name
with what it lacks.
"""

from __future__ import annotations

import inspect
import sys
import warnings
from collections import Counter
from pathlib import Path

from numpydoc.docscrape import NumpyDocString

sys.path[:0] = [str(Path(__file__).resolve().parents[2] / "src"), str(Path(__file__).resolve().parents[1] / "_ext")]

from nclab_api import public_namespaces, section_of  # noqa: E402


def _takes_arguments(obj: object) -> bool:
    try:
        params = inspect.signature(obj).parameters  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    return any(name not in ("self", "cls") for name in params)


def _returns_something(obj: object) -> bool:
    try:
        annotation = inspect.signature(obj).return_annotation  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return True
    return annotation not in (None, "None", inspect.Signature.empty) or annotation is inspect.Signature.empty


def missing_sections(obj: object) -> list[str]:
    if not (getattr(obj, "__doc__", None) or "").strip():  # its own docstring, not one inherited from a base
        return ["docstring"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        doc = NumpyDocString(inspect.getdoc(obj) or "")
    wanted = []
    if _takes_arguments(obj):
        wanted.append("Parameters")
    if inspect.isroutine(obj) and _returns_something(obj):
        wanted.append("Returns")
    wanted.append("Examples")
    # a generator documents what it yields (numpydoc's Yields), not what it returns
    return [s for s in wanted if not (doc[s] or (s == "Returns" and doc["Yields"]))]


def main(show: bool) -> None:
    total, complete = Counter(), Counter()
    lacking: Counter[str] = Counter()
    for ns in public_namespaces():
        for entry in ns.entries:
            if entry.home != ns.name or entry.alias_of or section_of(entry.obj) not in ("Functions", "Classes"):
                continue
            package = ".".join(ns.name.split(".")[:2])
            missing = missing_sections(entry.obj)
            total[package] += 1
            complete[package] += not missing
            lacking.update(missing)
            if show and missing:
                print(f"{entry.fullname}: no {', '.join(missing)}")
    width = max(map(len, total))
    print(f"{'package':<{width}}  public  numpydoc-complete")
    for package in sorted(total):
        print(f"{package:<{width}}  {total[package]:6d}  {complete[package]:6d}")
    n, c = sum(total.values()), sum(complete.values())
    print(
        f"{'all':<{width}}  {n:6d}  {c:6d}  ({n - c} lack a section: "
        + ", ".join(f"{k} {v}" for k, v in lacking.most_common())
        + ")"
    )


if __name__ == "__main__":
    main("--list" in sys.argv)
