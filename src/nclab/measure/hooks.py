"""Forward hooks on named layers of any ``nn.Module``: features flattened to ``(B, d)`` and handed to a sink
while the forward pass runs (before any later in-place op can change them).

Layers are chosen by ``resolve_layers(model, spec)``: ``None`` -> the model's own ``measured_layers()`` (nclab
networks); a list of names from ``model.named_modules()``; a string -> a regular expression matched in full
against those names; or a ready ``{name: module}`` mapping. For nclab networks the names of
``measured_layers()`` are accepted besides the module names.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

__all__ = ["FeatureHooks", "collect_features", "eval_mode", "resolve_layers"]

LayerSpec = None | str | Sequence[str] | Mapping[str, nn.Module]
Sink = Callable[[str, torch.Tensor], None]


def resolve_layers(model: nn.Module, spec: LayerSpec = None) -> OrderedDict[str, nn.Module]:
    """Ordered ``name -> module`` for ``spec`` (see the module docstring); unknown names raise ``KeyError``
    listing the available ones."""
    if isinstance(spec, Mapping):
        return OrderedDict(spec)
    if spec is None:
        if not hasattr(model, "measured_layers"):
            raise TypeError(
                f"{type(model).__name__} has no measured_layers(): name the layers (a list of module names or a regex)"
            )
        return OrderedDict(model.measured_layers())
    named = OrderedDict((n, m) for n, m in model.named_modules() if n)
    if hasattr(model, "measured_layers"):  # the model's own layer names ("layer1", "pool", ...) come first
        named = OrderedDict([*model.measured_layers().items(), *named.items()])
    if isinstance(spec, str):
        pattern = re.compile(spec)
        out = OrderedDict((n, m) for n, m in named.items() if pattern.fullmatch(n))
        if not out:
            raise KeyError(f"no module name matches the regex {spec!r}; names: {', '.join(list(named)[:40])}")
        return out
    out = OrderedDict()
    for name in spec:
        if name not in named:
            close = [n for n in named if name in n or n in name][:10]
            raise KeyError(f"no module named {name!r} in {type(model).__name__}; similar: {close or list(named)[:20]}")
        out[name] = named[name]
    return out


def _first_tensor(output: Any) -> torch.Tensor:
    if isinstance(output, torch.Tensor):
        return output
    if isinstance(output, list | tuple) and output and isinstance(output[0], torch.Tensor):
        return output[0]
    raise TypeError(f"cannot measure a layer whose output is {type(output).__name__}")


class FeatureHooks:
    """Context manager registering one forward hook per layer. Each hook flattens the output to ``(B, d)``
    (detached; ``flatten=False`` keeps its shape, e.g. ``(B, T, d)`` for a sequence model) and calls
    ``sink(name, features)``; without a sink the last batch's features are kept in ``self.features`` (cloned).
    Layers named in ``inputs`` are measured at their module's first input instead of its output (a classifier's
    input is the penultimate feature of a model where no module outputs exactly it)."""

    def __init__(
        self,
        model: nn.Module,
        layers: LayerSpec = None,
        sink: Sink | None = None,
        *,
        inputs: Collection[str] = (),
        flatten: bool = True,
    ) -> None:
        self.layers = resolve_layers(model, layers)
        unknown = set(inputs) - set(self.layers)
        if unknown:
            raise KeyError(f"inputs {sorted(unknown)} are not among the layers {list(self.layers)}")
        self.sink = sink
        self.inputs = frozenset(inputs)
        self.flatten = flatten
        self.features: dict[str, torch.Tensor] = {}
        self._handles: list[Any] = []

    def _emit(self, name: str, value: Any) -> None:
        feats = _first_tensor(value).detach()
        if self.flatten:
            feats = feats.flatten(1)
        if self.sink is not None:
            self.sink(name, feats)
        else:
            self.features[name] = feats.clone()

    def _hook(self, name: str) -> Callable[..., None]:
        def fn(module: nn.Module, inputs: Any, output: Any) -> None:
            self._emit(name, output)

        return fn

    def _pre_hook(self, name: str) -> Callable[..., None]:
        def fn(module: nn.Module, inputs: Any) -> None:
            self._emit(name, inputs)

        return fn

    def __enter__(self) -> FeatureHooks:
        self._handles = [
            m.register_forward_pre_hook(self._pre_hook(n))
            if n in self.inputs
            else m.register_forward_hook(self._hook(n))
            for n, m in self.layers.items()
        ]
        return self

    def remove(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []

    def __exit__(self, *exc: Any) -> None:
        self.remove()


@contextmanager
def eval_mode(model: nn.Module) -> Iterator[None]:
    """``model`` in eval mode inside the block (batch norm on its running statistics, no dropout), then back in
    the mode it was in, even when the block raises.

    Examples
    --------
    >>> net = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.5))
    >>> with eval_mode(net):
    ...     net.training
    False
    >>> net.training
    True
    """
    was = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was)


@torch.no_grad()
def collect_features(
    model: nn.Module, x: torch.Tensor, layers: LayerSpec = None, batch_size: int = 1024
) -> dict[str, torch.Tensor]:
    """Eval-mode features of every layer for inputs ``x``, in memory: ``{name: (N, d_l)}`` float32 tensors.

    For features too large for memory, :func:`nclab.extract_features` streams them to memory-mapped files."""
    chunks: dict[str, list[torch.Tensor]] = {}
    with eval_mode(model), FeatureHooks(model, layers, sink=lambda n, f: chunks.setdefault(n, []).append(f.clone())):
        for start in range(0, x.shape[0], batch_size):
            model(x[start : start + batch_size])
    return {n: torch.cat(c) for n, c in chunks.items()}
