"""Data as the passes read it: a re-iterable ``batches()`` of ``(inputs, labels)`` pairs (:data:`Batches`).

:func:`tensor_batches` cuts tensors ``x (N, ...)``, ``y (N,)`` into row batches (the built-in trainer's splits);
:func:`iterable_batches` reads any iterable of batches -- a ``DataLoader``, a list, a generator; ``(x, y, ...)``
sequences or mappings with ``labels`` (Hugging Face style) -- onto a device. :func:`call_model` runs a batch's
inputs through a model and returns its logits, and :func:`check_label_batch` is the check every batch's labels
pass before the model runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import torch
from torch import nn

from nclab.stats.class_stats import check_labels_dtype

__all__ = [
    "Batches",
    "call_model",
    "check_label_batch",
    "is_one_shot",
    "iterable_batches",
    "split_batch",
    "tensor_batches",
    "to_device",
]

#: A re-iterable pass: each call returns an iterable of ``(inputs, labels (n,))`` pairs.
Batches = Callable[[], Iterable[tuple[Any, torch.Tensor]]]


def tensor_batches(x: torch.Tensor, y: torch.Tensor, batch_size: int) -> Batches:
    """A re-iterable pass over ``(x, y)`` in row batches of ``batch_size``.

    Parameters
    ----------
    x : torch.Tensor, shape (N, ...)
        Inputs, one sample per row.
    y : torch.Tensor, shape (N,)
        Class indices.
    batch_size : int
        Rows per batch; the last batch holds the remaining ``N mod batch_size`` rows when that is not 0.

    Returns
    -------
    Batches
        A function that returns a fresh iterator over the ``(x[i:j], y[i:j])`` views at each call (nothing is
        copied), so a pass can be repeated.

    Examples
    --------
    >>> batches = tensor_batches(torch.zeros(5, 2), torch.arange(5), 2)
    >>> [len(y) for _, y in batches()], [len(y) for _, y in batches()]
    ([2, 2, 1], [2, 2, 1])
    """

    def batches() -> Iterable[tuple[torch.Tensor, torch.Tensor]]:
        for start in range(0, int(y.shape[0]), batch_size):
            yield x[start : start + batch_size], y[start : start + batch_size]

    return batches


def to_device(obj: Any, device: torch.device) -> Any:
    """``obj`` with every tensor in it (through mappings, tuples and lists) on ``device``."""
    if isinstance(obj, torch.Tensor):
        return obj.to(device, non_blocking=True)
    if isinstance(obj, Mapping):
        return {k: to_device(v, device) for k, v in obj.items()}
    if isinstance(obj, tuple | list):
        return type(obj)(to_device(v, device) for v in obj)
    return obj


def split_batch(batch: Any) -> tuple[Any, Any]:
    """``(inputs, labels)`` of a batch: a ``(x, y, ...)`` sequence, or a mapping with ``labels`` (Hugging Face
    style; the rest are the model's keyword inputs; labels ``None`` when it has none)."""
    if isinstance(batch, Mapping):
        inputs = {k: v for k, v in batch.items() if k not in ("labels", "label")}
        return inputs, batch.get("labels", batch.get("label"))
    if isinstance(batch, tuple | list) and len(batch) >= 2:
        return batch[0], batch[1]
    raise TypeError(f"a batch must be (x, y) or a mapping with 'labels', got {type(batch).__name__}")


def call_model(model: nn.Module, x: Any) -> Any:
    """The model's outputs for one batch of inputs: ``model(**x)`` for a mapping (keyword inputs), else
    ``model(x)``; the ``logits`` of an output object that has them (Hugging Face ``ModelOutput``).

    Parameters
    ----------
    model : torch.nn.Module
        The network.
    x : torch.Tensor or Mapping[str, Any]
        One batch of inputs: a tensor ``(n, ...)``, or the model's keyword inputs.

    Returns
    -------
    Any
        The model's output, or its ``logits`` attribute when it has one (logits ``(n, K)`` for a classifier).

    Examples
    --------
    >>> model = nn.Linear(3, 2)
    >>> tuple(call_model(model, torch.zeros(4, 3)).shape)
    (4, 2)
    """
    out = model(**x) if isinstance(x, Mapping) else model(x)
    logits = getattr(out, "logits", None)
    return out if logits is None else logits


def check_label_batch(y: Any, K: int) -> None:
    """The labels of one batch, checked before the model runs (shape and dtype only: no value is read, so no
    device synchronises): a 1-D integer tensor ``(n,)``. One-hot rows ``(n, K)`` are named as such.

    Examples
    --------
    >>> check_label_batch(torch.eye(3)[[0, 2]], 3)
    Traceback (most recent call last):
        ...
    ValueError: labels have shape (2, 3), one-hot rows (n, K): pass class indices (n,) instead, e.g. y.argmax(dim=1)
    """
    if not isinstance(y, torch.Tensor):
        raise TypeError(f"labels must be a tensor of class indices, got {type(y).__name__}")
    if y.ndim == 2 and y.shape[1] == K:
        raise ValueError(
            f"labels have shape {tuple(y.shape)}, one-hot rows (n, K): pass class indices (n,) instead, "
            "e.g. y.argmax(dim=1)"
        )
    if y.ndim != 1:
        raise ValueError(f"labels must be 1-D (one class index per sample), got shape {tuple(y.shape)}")
    check_labels_dtype(y)


def is_one_shot(data: Any) -> bool:
    """Whether ``data`` can be iterated once only (a generator, ``iter(...)``, ``itertools.cycle``): an iterator
    rather than a re-iterable collection."""
    return isinstance(data, Iterator)


def _labels_on(y: Any, device: torch.device) -> torch.Tensor:
    y = torch.as_tensor(y)
    if y.device.type == "meta":
        raise ValueError("labels are on the 'meta' device, which holds no data: load them on 'cpu' or 'cuda'")
    try:
        return y.to(device, non_blocking=True)
    except (RuntimeError, NotImplementedError) as err:
        raise ValueError(f"labels on device {y.device} cannot be moved to {device}: {err}") from err


def iterable_batches(data: Any, device: torch.device, *, need_labels: bool = True) -> Batches:
    """A pass over ``data`` as ``(inputs, labels)`` on ``device``: any iterable of batches (see
    :func:`split_batch`) or one ``(x, y)`` pair of tensors. A batch without labels is refused unless
    ``need_labels`` is false (a ``targets_fn`` gives them), when it gets zeros. Nothing is copied or kept: a
    one-shot iterator (:func:`is_one_shot`) gives one pass only.

    Parameters
    ----------
    data : iterable of batches, or tuple of torch.Tensor
        A ``DataLoader``, list or generator of ``(x, y, ...)`` sequences or mappings with ``labels``; or one
        pair ``(x (N, ...), y (N,))``, read as a single batch.
    device : torch.device
        Where every batch's tensors are moved.
    need_labels : bool, default=True
        Whether a batch without labels is an error; when false it gets zero labels ``(n,)``.

    Returns
    -------
    Batches
        A function that returns an iterator over ``(inputs, labels (n,))`` pairs on ``device`` at each call.

    Raises
    ------
    TypeError
        If ``data`` is neither iterable nor an ``(x, y)`` pair of tensors.
    ValueError
        When iterated: if a batch has no labels and ``need_labels`` is true.

    Examples
    --------
    >>> loader = [(torch.zeros(2, 3), torch.tensor([0, 1])), (torch.zeros(1, 3), torch.tensor([1]))]
    >>> batches = iterable_batches(loader, torch.device("cpu"))
    >>> [y.tolist() for _, y in batches()]
    [[0, 1], [1]]
    """
    if isinstance(data, tuple) and len(data) == 2 and all(isinstance(t, torch.Tensor) for t in data):
        data = [data]  # one batch of tensors
    elif not hasattr(data, "__iter__"):
        raise TypeError(f"measure needs an iterable of (x, y) batches or an (x, y) pair, got {type(data).__name__}")

    def batches() -> Iterable[tuple[Any, torch.Tensor]]:
        for batch in data:
            x, y = split_batch(batch)
            x = to_device(x, device)
            if y is None:
                if need_labels:
                    raise ValueError("a batch has no labels (and no targets_fn gives them)")
                first = next(iter(x.values())) if isinstance(x, Mapping) else x
                y = torch.zeros(first.shape[0], dtype=torch.long, device=device)
            yield x, _labels_on(y, device)

    return batches
