"""The two ways a dataset can fail to load: it is not there, or it is there but unreadable."""

from __future__ import annotations

import re
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
    """A dataset file exists but does not have the expected format (truncated, wrong magic number, ...).

    ``CorruptDatasetError(path, problem)``: the message is ``corrupt dataset file {path}: {problem}``. Built from
    one text (how torch's DataLoader re-raises an error of a worker process: ``exc_type(text)``, the text holding
    the worker's traceback), the error keeps only the original message found in it, so that a dataset read by
    workers fails with the same one-line message as one read in the main process.

    Examples
    --------
    >>> str(CorruptDatasetError("a/x.png", "cannot decode the image"))
    'corrupt dataset file a/x.png: cannot decode the image'
    >>> text = "Caught CorruptDatasetError in DataLoader worker process 0.\\nOriginal Traceback ...\\n" + (
    ...     "nclab.data.errors.CorruptDatasetError: corrupt dataset file a/x.png: cannot decode the image\\n")
    >>> err = CorruptDatasetError(text)
    >>> str(err), err.path.as_posix()
    ('corrupt dataset file a/x.png: cannot decode the image', 'a/x.png')
    """

    def __init__(self, path: str | Path, problem: str | None = None) -> None:
        if problem is None:  # one text: re-raised from elsewhere (a DataLoader worker)
            found = re.findall(r"^\S*CorruptDatasetError: (corrupt dataset file (.*?): .*)$", str(path), re.M)
            message, where = found[-1] if found else (str(path), "")
            self.path = Path(where)
            super().__init__(message)
            return
        self.path = Path(path)
        super().__init__(f"corrupt dataset file {self.path}: {problem}")
