"""Reading feature / label / classifier arrays from files: .npy (memory-mapped, streamed), .npz, .pt,
.safetensors. One place for file formats used by the CLI and by users who keep features on disk."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

SUFFIXES = (".npy", ".npz", ".pt", ".pth", ".safetensors")


def _pick(mapping: dict[str, Any], path: Path, key: str | None) -> Any:
    if key is not None:
        if key not in mapping:
            raise KeyError(f"{path}: no array named {key!r}; it holds {sorted(mapping)}")
        return mapping[key]
    if len(mapping) == 1:
        return next(iter(mapping.values()))
    raise ValueError(f"{path} holds several arrays {sorted(mapping)}: name one with 'file{path.suffix}:NAME'")


def split_key(spec: str | Path) -> tuple[Path, str | None]:
    """``"feats.npz:penultimate"`` -> (Path("feats.npz"), "penultimate")."""
    text = str(spec)
    for suffix in SUFFIXES:
        marker = suffix + ":"
        if marker in text:
            head, key = text.split(marker, 1)
            return Path(head + suffix), key
    return Path(text), None


def load_array(spec: str | Path, *, mmap: bool = True) -> Any:
    """Load one array. ``.npy`` is memory-mapped (``mmap=True``) so it can be streamed in chunks; a file
    holding several arrays needs ``path:NAME``. Returns a numpy array or a torch tensor (``.pt``)."""
    path, key = split_key(spec)
    if not path.exists():
        raise FileNotFoundError(f"no such file: {path}")
    suffix = path.suffix.lower()
    try:
        if suffix == ".npy":
            if key is not None:
                raise ValueError(f"{path} holds a single array; ':{key}' names an array only in .npz/.pt/.safetensors")
            return np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
        if suffix == ".npz":
            with np.load(path, allow_pickle=False) as fh:
                return np.asarray(_pick({k: fh[k] for k in fh.files}, path, key))
        if suffix in (".pt", ".pth"):
            import torch

            obj = torch.load(path, map_location="cpu", weights_only=True)
            if isinstance(obj, dict):
                obj = _pick(obj, path, key)
            if not isinstance(obj, torch.Tensor | np.ndarray):
                raise ValueError(f"{path}: expected a tensor, found {type(obj).__name__}")
            return obj
        if suffix == ".safetensors":
            try:
                from safetensors.numpy import load_file
            except ImportError as err:  # pragma: no cover - depends on the environment
                raise ImportError(
                    "reading .safetensors needs the 'safetensors' package (pip install nclab[io])"
                ) from err
            return _pick(load_file(str(path)), path, key)
    except (OSError, ValueError, RuntimeError) as err:
        if isinstance(err, FileNotFoundError | KeyError):
            raise
        raise ValueError(f"could not read {path}: {err}") from err
    raise ValueError(f"unsupported file type {suffix!r} for {path}; use one of {', '.join(SUFFIXES)}")


def iter_batches(features: Any, labels: Any, batch_size: int = 8192) -> Iterator[tuple[Any, Any]]:
    """Row chunks of ``(features, labels)``; memory-mapped features are read one chunk at a time.
    ``batch_size`` must be an int >= 1."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int | np.integer) or batch_size < 1:
        raise ValueError(f"batch_size must be an int >= 1, got {batch_size!r}")  # range(0, n, 0) would raise
    n = features.shape[0]
    if labels.shape[0] != n:
        raise ValueError(f"features have {n} rows but labels have {labels.shape[0]} entries")
    for start in range(0, n, batch_size):
        yield (
            np.asarray(features[start : start + batch_size])
            if isinstance(features, np.memmap)
            else features[start : start + batch_size],
            labels[start : start + batch_size],
        )
