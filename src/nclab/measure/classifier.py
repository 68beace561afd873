"""The classifier ``W (K, d)``, ``b (K,)`` of a model: :func:`find_classifier`, the one set of rules for nclab
networks, the built-in trainer, :class:`~nclab.monitor.CollapseMonitor` and feature export.

Found, in order: ``model.head`` with a weight (nclab networks, and any model naming its classifier ``head``);
else, when ``K`` is given, the last ``nn.Linear`` in module order with ``K`` outputs
(``fc`` of torchvision, ``classifier`` / ``score`` of Hugging Face heads, ``lm_head`` of a language model with
``K`` = its vocabulary). A caller may name it instead: a module, a module or weight-parameter name, or a
``(W, b)`` pair of arrays.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

__all__ = ["Classifier", "find_classifier"]


def _f64(t: Any) -> np.ndarray:
    if isinstance(t, torch.Tensor):
        return t.detach().to("cpu", torch.float64).numpy()
    return np.asarray(t, dtype=np.float64)


@dataclass(frozen=True)
class Classifier:
    """A model's classifier: ``W (K, d)``, ``b (K,)`` or ``None`` (float64 arrays, read from ``module`` when
    there is one), its ``name`` (module path, or ``"(W, b)"`` when given as arrays) and ``module``.

    Parameters
    ----------
    name : str
        The module path in the model (``"head"``, ``"fc"``), or ``"(W, b)"`` for arrays given directly.
    module : torch.nn.Module or None
        The classifier module; ``None`` for arrays given directly.
    W : numpy.ndarray, shape (K, d)
        Class weights, float64, one row per class.
    b : numpy.ndarray, shape (K,), or None
        Biases, float64; ``None`` when the classifier has none.

    See Also
    --------
    find_classifier : the classifier of a model.

    Examples
    --------
    >>> c = Classifier.of_module("fc", nn.Linear(4, 3, bias=False))
    >>> c.name, c.W.shape, c.W.dtype, c.b is None
    ('fc', (3, 4), dtype('float64'), True)
    """

    name: str
    module: nn.Module | None
    W: np.ndarray
    b: np.ndarray | None

    @classmethod
    def of_module(cls, name: str, module: nn.Module) -> Classifier:
        """The classifier ``module`` (its ``weight (K, d)`` and ``bias``), called ``name``."""
        W = getattr(module, "weight", None)
        if not isinstance(W, torch.Tensor) or W.ndim != 2:
            raise TypeError(f"classifier {name!r} has no 2-D weight (K, d)")
        b = getattr(module, "bias", None)
        return cls(name, module, _f64(W), None if b is None else _f64(b))

    @property
    def cosine(self) -> bool:
        """Whether the module scores by cosine similarity (``cosine = True``, as nclab's cosine heads): the
        measurement then also reports ``gnc1`` of the unit-normalised features [Jiang et al. 2024]."""
        return bool(getattr(self.module, "cosine", False))

    def refreshed(self) -> Classifier:
        """The current weights of ``module`` (they change while training); arrays given directly stay."""
        if self.module is None:
            return self
        return Classifier.of_module(self.name, self.module)


def _by_name(model: nn.Module, spec: str) -> Classifier:
    modules = dict(model.named_modules())
    if spec in modules:
        return Classifier.of_module(spec, modules[spec])
    params = dict(model.named_parameters())
    if spec not in params:
        raise KeyError(f"classifier {spec!r} is neither a module nor a parameter of {type(model).__name__}")
    owner = spec.rsplit(".", 1)[0] if "." in spec else ""  # a weight parameter: its bias is the sibling ".bias"
    bias = params.get(f"{owner}.bias" if owner else "bias")
    module = modules.get(owner) if owner else None
    return Classifier(owner or spec, module, _f64(params[spec]), None if bias is None else _f64(bias))


def find_classifier(model: nn.Module, K: int | None = None, spec: Any = None) -> Classifier | None:
    """The classifier of ``model`` (see the module docstring), or ``None`` when there is none.

    Parameters
    ----------
    model : nn.Module
        Any model.
    K : int, optional
        ``K``: with it, a model without ``head`` is searched for its last ``nn.Linear`` with ``K`` outputs.
    spec : nn.Module, str, (W, b), None or False
        ``None`` finds the classifier; ``False`` means none; a module of ``model``; a module or
        weight-parameter name (``"fc"``, ``"fc.weight"``); a pair ``(W (K, d), b (K,) or None)`` of arrays.

    Returns
    -------
    Classifier or None
        The classifier, its ``W (K, d)`` and ``b (K,)`` copied as float64 arrays; ``None`` when ``spec`` is
        ``False``, or when it is ``None`` and the model has neither a ``head`` nor (with ``K``) an ``nn.Linear``
        with ``K`` outputs.

    Raises
    ------
    KeyError
        A name that is neither a module nor a parameter of ``model``.
    TypeError
        Any other ``spec``, or a classifier module without a 2-D weight.

    Examples
    --------
    >>> net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    >>> find_classifier(net, 3).name, find_classifier(net, 3).W.shape
    ('2', (3, 8))
    >>> find_classifier(net, 5) is None, find_classifier(net) is None
    (True, True)
    """
    if spec is False:
        return None
    if spec is None:
        head = getattr(model, "head", None)
        if isinstance(head, nn.Module) and isinstance(getattr(head, "weight", None), torch.Tensor):
            return Classifier.of_module("head", head)
        found = None
        if K is not None:
            for name, mod in model.named_modules():
                if isinstance(mod, nn.Linear) and mod.out_features == K:
                    found = (name, mod)
        return None if found is None else Classifier.of_module(*found)
    if isinstance(spec, nn.Module):
        name = next((n for n, m in model.named_modules() if m is spec), type(spec).__name__)
        return Classifier.of_module(name, spec)
    if isinstance(spec, str):
        return _by_name(model, spec)
    if isinstance(spec, tuple | list) and len(spec) == 2:
        W, b = spec
        return Classifier("(W, b)", None, _f64(W), None if b is None else _f64(b))
    raise TypeError("classifier must be None (find it), False (none), a module, a (W, b) pair or a name")
