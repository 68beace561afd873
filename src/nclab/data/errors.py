"""The two ways a dataset can fail to load: it is not there, or it is there but unreadable."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

__all__ = ["CorruptDatasetError", "DatasetNotFoundError"]


class DatasetNotFoundError(FileNotFoundError):
    """The files of a dataset are missing. The message says where nclab looked, which files it expects, and
    how to get them (nclab never downloads)."""

    def __init__(self, name: str, looked_in: Sequence[Path], layout: str, how_to_get: str) -> None:
        self.name = name
        self.looked_in = [Path(p) for p in looked_in]
        where = ", ".join(str(p) for p in self.looked_in) or "(nowhere: no root given)"
        msg = (
            f"dataset {name!r} not found.\n"
            f"  looked in: {where}\n"
            f"  expected layout: {layout}\n"
            f"  how to get it: {how_to_get}\n"
            f"  (pass root=..., or set $NCLAB_DATA to the folder holding {name}/; nclab never downloads)"
        )
        super().__init__(msg)


class CorruptDatasetError(ValueError):
    """A dataset file exists but does not have the expected format (truncated, wrong magic number, ...)."""

    def __init__(self, path: str | Path, problem: str) -> None:
        self.path = Path(path)
        super().__init__(f"corrupt dataset file {self.path}: {problem}")
