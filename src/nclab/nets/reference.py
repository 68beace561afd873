"""State dicts of the reference implementations (torchvision, timm) for nclab's networks.

nclab's networks keep the reference implementations' module names, except where nclab's network protocol needs
its own: the classifier is always ``head`` (torchvision: ``fc``, ``classifier`` or ``classifier.6``), and
torchvision's ``features`` container (VGG, DenseNet) is ``body`` (``features(x)`` is the penultimate
representation of every nclab network). Each network lists these renames as ``reference_renames``
(``(nclab prefix, reference prefix)`` pairs); :func:`reference_key_map` applies them to every key.

Layers nclab adds (the ``d`` bottleneck) have no reference key and keep their name: load a reference
state dict into such a network with ``strict=False`` (the bottleneck and, if its width changed, the head stay
as initialised).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

__all__ = ["load_reference_state_dict", "reference_key_map", "to_reference_state_dict"]


def reference_key_map(model: nn.Module) -> dict[str, str]:
    """``{nclab key: reference key}`` for every key of ``model.state_dict()``.

    Parameters
    ----------
    model : nn.Module
        An nclab network (its class's ``reference_renames`` give the renaming; none: names kept).

    Returns
    -------
    dict of str to str
        nclab state-dict key to the reference implementation's key.

    Examples
    --------
    >>> from nclab.nets import build_model
    >>> keys = reference_key_map(build_model("resnet18", (3, 32, 32), 10, width=4))
    >>> keys["conv1.weight"], keys["layer4.1.bn2.running_var"], keys["head.bias"]
    ('conv1.weight', 'layer4.1.bn2.running_var', 'fc.bias')
    """
    renames: tuple[tuple[str, str], ...] = tuple(getattr(model, "reference_renames", ()))
    out = {}
    for key in model.state_dict():
        ref = key
        for ours, theirs in renames:
            if key.startswith(ours):
                ref = theirs + key[len(ours) :]
                break
        out[key] = ref
    return out


def to_reference_state_dict(model: nn.Module) -> OrderedDict[str, torch.Tensor]:
    """``model.state_dict()`` with the reference implementation's key names (same tensors, same order).

    Parameters
    ----------
    model : nn.Module
        An nclab network.

    Returns
    -------
    OrderedDict of str to torch.Tensor
        Its state dict under the reference names.

    Examples
    --------
    >>> from nclab.nets import build_model, to_reference_state_dict
    >>> sd = to_reference_state_dict(build_model("resnet18", (3, 32, 32), 10, width=4))
    >>> next(iter(sd)), list(sd)[-2:]
    ('conv1.weight', ['fc.weight', 'fc.bias'])
    """
    names = reference_key_map(model)
    return OrderedDict((names[k], v) for k, v in model.state_dict().items())


def load_reference_state_dict(model: nn.Module, state_dict: Mapping[str, Any], *, strict: bool = True) -> Any:
    """Load ``state_dict``, saved by the reference implementation (e.g. ``torchvision.models.resnet18().
    state_dict()``), into ``model``: keys are renamed by :func:`reference_key_map`, then
    ``model.load_state_dict(..., strict=strict)`` checks names and shapes (its error names each missing,
    unexpected or mis-shaped key). Returns what ``load_state_dict`` returns (the missing and unexpected keys).

    A small-image variant (``variant="cifar"``) has a 3x3 first convolution: a reference (ImageNet) state dict
    fails on its shape, as it should.

    Parameters
    ----------
    model : nn.Module
        The nclab network to load into.
    state_dict : mapping of str to tensor
        A state dict with the reference implementation's key names.
    strict : bool, default=True
        Passed to ``load_state_dict``: every key must match.

    Returns
    -------
    torch.nn.modules.module._IncompatibleKeys
        The missing and unexpected keys (empty when ``strict``).

    Raises
    ------
    RuntimeError
        From ``load_state_dict``, naming each missing, unexpected or mis-shaped key.

    Examples
    --------
    A round trip through the reference names:

    >>> from nclab.nets import build_model, load_reference_state_dict, to_reference_state_dict
    >>> src = build_model("resnet18", (3, 32, 32), 10, width=4)
    >>> dst = build_model("resnet18", (3, 32, 32), 10, width=4)
    >>> res = load_reference_state_dict(dst, to_reference_state_dict(src))
    >>> res.missing_keys, res.unexpected_keys, bool((dst.head.weight == src.head.weight).all())
    ([], [], True)
    """
    if not isinstance(state_dict, Mapping):
        raise TypeError(f"state_dict must be a mapping of key -> tensor, got {type(state_dict).__name__}")
    ours = {theirs: mine for mine, theirs in reference_key_map(model).items()}
    converted = OrderedDict((ours.get(k, k), v) for k, v in state_dict.items())
    return model.load_state_dict(converted, strict=strict)
