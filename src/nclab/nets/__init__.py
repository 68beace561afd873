"""Networks with named measured layers (``measured_layers()``, ``penultimate``) and classifier heads.

``build_model(name, input_shape, num_classes, head=None, **options)`` builds one of :data:`NET_MODELS`; ``head``
is a dict for :func:`make_head` (``{"kind": "cosine", "tau": 0.1}``) or a ready ``nn.Module``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from torch import nn

from nclab.nets.base import CollapseNet
from nclab.nets.convnets import VGG11, DenseNet, ResNet18, SmallCNN
from nclab.nets.heads import CMFHead, CosineHead, FixedHead, LinearHead, make_head, resolve_tau
from nclab.nets.mlp import MLP, FCResNet
from nclab.nets.pfc_resnet import TABLE_I, PFCResNet

__all__ = [
    "MLP",
    "NET_MODELS",
    "TABLE_I",
    "VGG11",
    "CMFHead",
    "CollapseNet",
    "CosineHead",
    "DenseNet",
    "FCResNet",
    "FixedHead",
    "LinearHead",
    "PFCResNet",
    "ResNet18",
    "SmallCNN",
    "build_model",
    "make_head",
    "resolve_tau",
]

#: name -> class. The constructor signature is ``cls(input_shape, num_classes, ..., head=None)``.
NET_MODELS: dict[str, type[CollapseNet]] = {
    "mlp": MLP,
    "fc_resnet": FCResNet,
    "pfc_resnet": PFCResNet,
    "cnn": SmallCNN,
    "vgg11": VGG11,
    "resnet18": ResNet18,
    "densenet": DenseNet,
}


def build_model(
    name: str,
    input_shape: Sequence[int],
    num_classes: int,
    head: Mapping[str, Any] | nn.Module | None = None,
    **options: Any,
) -> CollapseNet:
    """Build model ``name`` (see :data:`NET_MODELS`) with the given head; the head's ``dim`` is the model's
    ``feature_dim``, known only once the body is built, so the body is built first with a placeholder head."""
    if name not in NET_MODELS:
        raise ValueError(f"unknown model {name!r}; known: {', '.join(NET_MODELS)}")
    model = NET_MODELS[name](tuple(input_shape), num_classes, **options)
    if isinstance(head, nn.Module):
        model.head = head
    elif head is not None:
        spec = dict(head)
        kind = spec.pop("kind", "linear")
        model.head = make_head(kind, model.feature_dim, num_classes, **spec)
    return model
