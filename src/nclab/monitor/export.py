"""Features of a model streamed to disk for ``nclab measure``: :func:`extract_features`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from nclab.io.atomic import atomic_save_npy, atomic_write_text
from nclab.io.npy_stream import NpyAppender, write_safetensors
from nclab.measure import Batch, PassSink, forward_pass
from nclab.monitor.monitor import PENULTIMATE, CollapseMonitor

__all__ = ["extract_features"]


class _Writer(PassSink):
    """Each layer's batch appended to ``out/LAYER.npy`` (float32), the labels once per batch to ``labels.npy``."""

    def __init__(self, out: Path, first: str) -> None:
        self.out, self.first = out, first
        self.files: dict[str, NpyAppender] = {}
        self.labels = NpyAppender(out / "labels.npy", np.int64)

    def __call__(self, name: str, f: torch.Tensor, batch: Batch) -> None:
        w = self.files.get(name)
        if w is None:
            w = self.files[name] = NpyAppender(self.out / f"{name}.npy", np.float32)
        w.append(f.detach().to("cpu", torch.float32).numpy())
        if name == self.first:  # one label row per feature row, written with the first layer's rows
            self.labels.append(batch.labels.detach().cpu().numpy())

    def close(self) -> dict[str, Path]:
        paths = {n: w.close() for n, w in self.files.items()}
        paths["labels"] = self.labels.close()
        return paths


@torch.no_grad()
def extract_features(
    model: nn.Module,
    data: Any,
    layers: str | Sequence[str] = PENULTIMATE,
    *,
    out: str | Path,
    num_classes: int | None = None,
    classifier: Any = None,
    device: str | torch.device | None = None,
    format: str = "npy",
) -> dict[str, Path]:
    """Stream eval-mode features of ``layers`` over ``data`` (any iterable of ``(x, y)`` batches) to ``out``.

    Writes ``out/LAYER.npy`` ``(N, d)`` float32 per layer and ``out/labels.npy`` ``(N,)`` int64, one batch at a
    time (memory: one batch, whatever ``N``); with a classifier also ``out/W.npy`` ``(K, d)`` and ``out/b.npy``
    (float64), and ``out/manifest.json`` (layers, shapes, ``K``, the penultimate layer). Layers and the
    classifier follow :class:`~nclab.monitor.CollapseMonitor` (``"penultimate"`` is the classifier's input);
    ``num_classes`` (default: the classifier's rows) finds the classifier. Each file reads back memory-mapped:
    ``nclab measure out/penultimate.npy out/labels.npy -w out/W.npy -b out/b.npy``.

    ``format="safetensors"``: the same arrays as named tensors of one file ``out/features.safetensors`` (the
    manifest in its metadata too), copied from the streamed ``.npy`` files in chunks, which are then removed
    (disk: twice the features for a moment; memory: one chunk);
    ``nclab measure out/features.safetensors:penultimate out/features.safetensors:labels``. Every returned path
    is then that file, the key naming the tensor.

    Returns
    -------
    dict[str, Path]
        ``{layer: path}`` plus ``"labels"`` (and ``"W"``, ``"b"``).

    Examples
    --------
    >>> import tempfile
    >>> net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    >>> x, y = torch.randn(10, 4), torch.arange(10) % 3
    >>> paths = extract_features(net, [(x[:6], y[:6]), (x[6:], y[6:])], out=tempfile.mkdtemp(), num_classes=3)
    >>> np.load(paths["penultimate"], mmap_mode="r").shape, np.load(paths["labels"]).tolist()[:4]
    ((10, 8), [0, 1, 2, 0])
    """
    if format not in ("npy", "safetensors"):
        raise ValueError(f"format must be 'npy' or 'safetensors', got {format!r}")
    if num_classes is None:
        if classifier is None:
            raise ValueError("extract_features needs num_classes (to find the classifier) or classifier=")
        W = classifier[0] if isinstance(classifier, tuple | list) else getattr(classifier, "weight", None)
        num_classes = int(W.shape[0]) if W is not None else 2
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # no classifier is fine here: the features are still exported
        monitor = CollapseMonitor(model, num_classes, layers=layers, classifier=classifier, device=device)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    plan = monitor.plan()
    sink = _Writer(out, next(iter(plan.layers)))
    modes = {m: m.training for m in model.modules()}
    try:
        forward_pass(model, monitor.batches(data), plan, sink)
    finally:
        paths = sink.close()
        for m, was in modes.items():
            m.train(was)
    manifest: dict[str, Any] = {
        "layers": {n: list(np.load(p, mmap_mode="r").shape) for n, p in paths.items() if n != "labels"},
        "num_samples": int(np.load(paths["labels"], mmap_mode="r").shape[0]),
        "num_classes": monitor.num_classes,
        "penultimate": monitor.penultimate,
        "classifier": None if monitor.classifier is None else monitor.classifier.name,
    }
    if plan.W is not None:
        atomic_save_npy(out / "W.npy", plan.W)
        paths["W"] = out / "W.npy"
        if plan.b is not None:
            atomic_save_npy(out / "b.npy", plan.b)
            paths["b"] = out / "b.npy"
    if format == "safetensors":
        arrays = {name: np.load(p, mmap_mode="r") for name, p in paths.items()}
        target = write_safetensors(out / "features.safetensors", arrays, metadata={"nclab": json.dumps(manifest)})
        del arrays  # the memory maps, before their files go
        for p in paths.values():
            p.unlink()
        paths = dict.fromkeys(paths, target)
    atomic_write_text(out / "manifest.json", json.dumps(manifest, indent=2) + "\n")
    return paths
