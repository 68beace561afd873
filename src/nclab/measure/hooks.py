"""Forward hooks on named layers of any ``nn.Module``: features flattened to ``(B, d)`` and handed to a sink
while the forward pass runs (before any later in-place op can change them).

Layers are chosen by ``resolve_layers(model, spec)``: ``None`` -> the model's own ``measured_layers()`` (nclab
networks); a list of names from ``model.named_modules()``; a string -> a regular expression matched in full
against those names; or a ready ``{name: module}`` mapping. For nclab networks the names of
``measured_layers()`` are accepted besides the module names.

A layer whose output is not one tensor (an ``nn.LSTM``'s ``(output, (h, c))``, a block returning
``(features, attention)``) is measured only with an explicit ``select``: an index into the tuple, or a callable
``output -> tensor``, per layer (``select={"rnn": 0}``) or for every layer. Without one the hook raises,
naming the layer and the tuple's elements: taking the first element silently measured the wrong tensor
whenever the features were not first.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

__all__ = ["FeatureHooks", "LayerSpec", "SelectSpec", "collect_features", "eval_mode", "resolve_layers"]

LayerSpec = None | str | Sequence[str] | Mapping[str, nn.Module]
Sink = Callable[[str, torch.Tensor], None]
#: Which tensor of a layer's output to measure: an index into a tuple / list output, or ``output -> tensor``.
Selector = int | Callable[[Any], torch.Tensor]
#: One selector for every layer, or ``{layer: selector}``.
SelectSpec = None | Selector | Mapping[str, Selector]


def resolve_layers(model: nn.Module, spec: LayerSpec = None) -> OrderedDict[str, nn.Module]:
    """Ordered ``name -> module`` for ``spec`` (see the module docstring); unknown names raise ``KeyError``
    listing the available ones.

    Parameters
    ----------
    model : torch.nn.Module
        The network.
    spec : None, str, sequence of str or Mapping[str, torch.nn.Module], default=None
        ``None``: the model's ``measured_layers()``; a regular expression matched in full against the module
        names; a list of names; or a ready ``{name: module}`` mapping (returned as it is).

    Returns
    -------
    collections.OrderedDict of str to torch.nn.Module
        The chosen layers, in the model's order for a regex, in the given order for a list.

    Raises
    ------
    KeyError
        If a name is unknown or a regex matches no module.
    TypeError
        If ``spec`` is ``None`` and the model has no ``measured_layers()``.

    Examples
    --------
    >>> net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    >>> list(resolve_layers(net, "[02]")), list(resolve_layers(net, ["1"]))
    (['0', '2'], ['1'])
    """
    if isinstance(spec, Mapping):
        return OrderedDict(spec)
    own_layers = getattr(model, "measured_layers", None)  # an nclab network's own layer names
    if spec is None:
        if own_layers is None:
            raise TypeError(
                f"{type(model).__name__} has no measured_layers(): name the layers (a list of module names or a regex)"
            )
        return OrderedDict(own_layers())
    named = OrderedDict((n, m) for n, m in model.named_modules() if n)
    if own_layers is not None:  # the model's own layer names ("layer1", "pool", ...) come first
        named = OrderedDict([*own_layers().items(), *named.items()])
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


def _describe(output: Any) -> str:
    """``output`` in a few words: ``Tensor (30, 8)``, ``a tuple of 2 (Tensor (30, 1), Tensor (30, 8))``."""
    if isinstance(output, torch.Tensor):
        return f"Tensor {tuple(output.shape)}"
    if isinstance(output, tuple | list):
        inner = ", ".join(_describe(o) for o in output)
        return f"a {type(output).__name__} of {len(output)} ({inner})"
    return f"a {type(output).__name__}"


def _check_selector(name: str, selector: Any) -> Selector:
    if callable(selector):
        return selector
    if isinstance(selector, bool) or not isinstance(selector, int):
        raise TypeError(
            f"select for layer {name!r} must be an int (an index into the layer's tuple output) or a callable "
            f"output -> tensor, got {selector!r} ({type(selector).__name__})"
        )
    return selector


def _select(name: str, output: Any, selector: Selector | None) -> torch.Tensor:
    """The tensor of ``output`` to measure at layer ``name`` (see the module docstring)."""
    if selector is None:
        if isinstance(output, torch.Tensor):
            return output
        raise TypeError(
            f"layer {name!r} returned {_describe(output)}, not a tensor: say what to measure with "
            f"select={{{name!r}: i}} (the index of the features in the tuple) or select={{{name!r}: fn}} "
            "(a callable output -> tensor)"
        )
    if callable(selector):
        out = selector(output)
        what = f"select={{{name!r}: {getattr(selector, '__name__', 'fn')}}}"
    else:
        what = f"select={{{name!r}: {selector}}}"
        if not isinstance(output, tuple | list) or not -len(output) <= selector < len(output):
            raise ValueError(
                f"{what} indexes a tuple output that has an element {selector}, but layer {name!r} returned "
                f"{_describe(output)}"
            )
        out = output[selector]
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"{what} gave {_describe(out)} at layer {name!r}, not a tensor")
    return out


class FeatureHooks:
    """Context manager registering one forward hook per layer. Each hook takes the layer's output (through
    ``select`` for a layer that returns a tuple, see the module docstring), flattens it to ``(B, d)`` (detached;
    ``flatten=False`` keeps its shape, e.g. ``(B, T, d)`` for a sequence model) and calls ``sink(name,
    features)``; without a sink the last batch's features are kept in ``self.features`` (cloned). Layers named
    in ``inputs`` are measured at their module's first positional input instead of its output (a classifier's
    input is the penultimate feature of a model where no module outputs exactly it).

    Parameters
    ----------
    model : torch.nn.Module
        The network whose layers are hooked.
    layers : None, str, sequence of str or Mapping[str, torch.nn.Module], default=None
        Which layers, as :func:`resolve_layers` reads them.
    sink : callable, optional
        ``sink(name, features (B, d))``, called once per layer and batch; without one the last batch's features
        are kept in ``self.features``.
    inputs : collection of str, default=()
        Layers measured at their module's first positional input rather than its output.
    flatten : bool, default=True
        Flatten each output to ``(B, d)``; false keeps its shape.
    select : int, callable or Mapping[str, int or callable], optional
        Which tensor of a tuple output to measure, for every layer or per layer (see the module docstring).

    Raises
    ------
    KeyError
        If a layer in ``inputs`` or ``select`` is not among ``layers`` (or :func:`resolve_layers` raises).

    See Also
    --------
    collect_features : every layer's features for a tensor of inputs, in memory.

    Examples
    --------
    >>> net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    >>> with FeatureHooks(net, ["1", "2"], inputs=["2"]) as hooks:
    ...     _ = net(torch.randn(5, 4))
    >>> {name: tuple(f.shape) for name, f in hooks.features.items()}
    {'1': (5, 8), '2': (5, 8)}
    >>> torch.equal(hooks.features["1"], hooks.features["2"])  # the ReLU's output is the classifier's input
    True
    """

    def __init__(
        self,
        model: nn.Module,
        layers: LayerSpec = None,
        sink: Sink | None = None,
        *,
        inputs: Collection[str] = (),
        flatten: bool = True,
        select: SelectSpec = None,
    ) -> None:
        self.layers = resolve_layers(model, layers)
        unknown = set(inputs) - set(self.layers)
        if unknown:
            raise KeyError(f"inputs {sorted(unknown)} are not among the layers {list(self.layers)}")
        self.sink = sink
        self.inputs = frozenset(inputs)
        self.flatten = flatten
        self.selectors = _selectors(select, self.layers, self.inputs)
        self.features: dict[str, torch.Tensor] = {}
        self._handles: list[Any] = []

    def _emit(self, name: str, value: Any) -> None:
        feats = _select(name, value, self.selectors.get(name)).detach()
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


def _selectors(select: SelectSpec, layers: Mapping[str, nn.Module], inputs: frozenset[str]) -> dict[str, Selector]:
    """``{layer: selector}`` of ``select``, checked; an ``inputs`` layer reads its module's first positional
    input (index 0 of the positional inputs) unless ``select`` says otherwise."""
    if isinstance(select, Mapping):
        unknown = [n for n in select if n not in layers]
        if unknown:
            raise KeyError(f"select names {unknown}, which are not among the measured layers {list(layers)}")
        chosen = {n: _check_selector(n, s) for n, s in select.items()}
    elif select is not None:  # one selector for every layer's output (inputs layers keep their first input)
        chosen = {n: _check_selector(n, select) for n in layers if n not in inputs}
    else:
        chosen = {}
    return {**dict.fromkeys(inputs, 0), **chosen}


@contextmanager
def eval_mode(model: nn.Module) -> Iterator[None]:
    """``model`` in eval mode inside the block (batch norm on its running statistics, no dropout), then every
    module back in the mode it was in (a frozen batch norm inside a training model stays frozen), even when the
    block raises.

    Parameters
    ----------
    model : torch.nn.Module
        The network.

    Returns
    -------
    contextlib.AbstractContextManager
        A context manager (yielding ``None``) for a ``with`` block.

    Examples
    --------
    >>> net = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.5))
    >>> with eval_mode(net):
    ...     net.training
    False
    >>> net.training
    True
    """
    modes = [(m, m.training) for m in model.modules()]
    model.eval()
    try:
        yield
    finally:
        first = modes[0][1]
        if all(was == first for _, was in modes):
            model.train(first)
        else:  # parents first (modules() order), so each module ends in its own mode; train() overrides still run
            for m, was in modes:
                m.train(was)


@torch.no_grad()
def collect_features(
    model: nn.Module, x: torch.Tensor, layers: LayerSpec = None, batch_size: int = 1024, *, select: SelectSpec = None
) -> dict[str, torch.Tensor]:
    """Eval-mode features of every layer for inputs ``x``, in memory: ``{name: (N, d_l)}`` float32 tensors
    (``select``: see the module docstring).

    For features too large for memory, :func:`nclab.extract_features` streams them to memory-mapped files.

    Parameters
    ----------
    model : torch.nn.Module
        The network, run in eval mode and without gradients (its modes are restored afterwards).
    x : torch.Tensor, shape (N, ...)
        Inputs.
    layers : None, str, sequence of str or Mapping[str, torch.nn.Module], default=None
        Which layers, as :func:`resolve_layers` reads them.
    batch_size : int, default=1024
        Rows per forward pass.
    select : int, callable or Mapping[str, int or callable], optional
        Which tensor of a tuple output to measure (see the module docstring).

    Returns
    -------
    dict of str to torch.Tensor
        ``{layer: features (N, d_l)}``, each layer's outputs flattened per sample; empty when ``N`` is 0.

    Examples
    --------
    >>> net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    >>> feats = collect_features(net, torch.zeros(7, 4), ["0", "2"], batch_size=3)
    >>> {name: tuple(f.shape) for name, f in feats.items()}
    {'0': (7, 8), '2': (7, 3)}
    """
    chunks: dict[str, list[torch.Tensor]] = {}
    sink = lambda n, f: chunks.setdefault(n, []).append(f.clone())  # noqa: E731
    with eval_mode(model), FeatureHooks(model, layers, sink=sink, select=select):
        for start in range(0, x.shape[0], batch_size):
            model(x[start : start + batch_size])
    return {n: torch.cat(c) for n, c in chunks.items()}
