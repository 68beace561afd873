"""Networks with named measured layers (``measured_layers()``, ``penultimate``) and classifier heads.

``build_model(name, input_shape, K, head=None, **options)`` builds one of :data:`NET_MODELS`; ``head``
is a dict for :func:`make_head` (``{"kind": "cosine", "tau": 0.1}``) or a ready ``nn.Module``.

The papers' networks are the reference implementations': with no options, ``build_model(name, (3, 224, 224),
1000)`` is torchvision's ``resnet18`` / ``resnet34`` / ``resnet50`` / ``resnext50_32x4d`` / ``vgg11`` /
``vgg11_bn`` / ``vgg13`` / ``vgg13_bn`` / ``densenet121`` and timm's ``deit_tiny_patch16_224`` /
``deit_small_patch16_224`` (parameter counts equal; state dicts load through :func:`load_reference_state_dict`).
On inputs of at most 64 pixels a side the CNNs take their small-image ("CIFAR") variant unless
``variant="imagenet"`` is given (:data:`nclab.nets.base.Variant`). Any ``nn.Module`` (a torchvision or timm model
included) can be measured and trained instead: see ``nclab.measure.resolve_layers``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from torch import nn

from nclab.nets.base import CollapseNet
from nclab.nets.convnets import SmallCNN
from nclab.nets.densenet import CifarDenseNet, DenseNet121
from nclab.nets.heads import CMFHead, CosineHead, FixedHead, LinearHead, make_head, resolve_tau
from nclab.nets.mlp import MLP, FCResNet
from nclab.nets.pfc_resnet import TABLE_I, PFCResNet
from nclab.nets.reference import load_reference_state_dict, reference_key_map, to_reference_state_dict
from nclab.nets.resnet import ResNet, ResNet18, ResNet34, ResNet50, ResNeXt50_32x4d
from nclab.nets.vgg import VGG, VGG11, VGG11BN, VGG13, VGG13BN
from nclab.nets.vit import DeiTSmall, DeiTTiny, VisionTransformer

__all__ = [
    "MLP",
    "NET_MODELS",
    "TABLE_I",
    "VGG",
    "VGG11",
    "VGG11BN",
    "VGG13",
    "VGG13BN",
    "CMFHead",
    "CifarDenseNet",
    "CollapseNet",
    "CosineHead",
    "DeiTSmall",
    "DeiTTiny",
    "DenseNet121",
    "FCResNet",
    "FixedHead",
    "LinearHead",
    "PFCResNet",
    "ResNeXt50_32x4d",
    "ResNet",
    "ResNet18",
    "ResNet34",
    "ResNet50",
    "SmallCNN",
    "VisionTransformer",
    "build_model",
    "load_reference_state_dict",
    "make_head",
    "reference_key_map",
    "resolve_tau",
    "to_reference_state_dict",
]

#: name -> class. The constructor signature is ``cls(input_shape, K, ..., head=None)``.
NET_MODELS: dict[str, type[CollapseNet]] = {
    "mlp": MLP,
    "fc_resnet": FCResNet,
    "pfc_resnet": PFCResNet,
    "cnn": SmallCNN,
    "resnet18": ResNet18,
    "resnet34": ResNet34,
    "resnet50": ResNet50,
    "resnext50_32x4d": ResNeXt50_32x4d,
    "vgg11": VGG11,
    "vgg11_bn": VGG11BN,
    "vgg13": VGG13,
    "vgg13_bn": VGG13BN,
    "densenet121": DenseNet121,
    "densenet": CifarDenseNet,
    "vit": VisionTransformer,
    "deit_tiny": DeiTTiny,
    "deit_small": DeiTSmall,
}


def build_model(
    name: str,
    input_shape: Sequence[int],
    K: int,
    head: Mapping[str, Any] | nn.Module | None = None,
    **options: Any,
) -> CollapseNet:
    """Build model ``name`` (see :data:`NET_MODELS`) with the given head.

    The head's input width is the model's feature dimension ``d``, known only once the body is built, so the body
    is built first with its default head, which a ``head`` spec then replaces; a linear head built from a spec is
    initialised as the reference implementation initialises its classifier (:meth:`CollapseNet.init_linear`).
    A ready ``nn.Module`` head is used as it is.

    Parameters
    ----------
    name : str
        A key of :data:`NET_MODELS`.
    input_shape : sequence of int
        Shape of one input, ``(C, H, W)`` for the image networks.
    K : int
        Number of classes.
    head : mapping or nn.Module, optional
        A head spec (keyword arguments of :func:`make_head`, ``kind`` included), a ready head, or None for the
        network's default linear head.
    **options
        The network's own keyword arguments (e.g. ``width``, ``d``, ``variant``).

    Returns
    -------
    CollapseNet
        The network, ``forward(x) = head(features(x))``.

    Raises
    ------
    ValueError
        If ``name`` is unknown.

    Examples
    --------
    >>> net = build_model("resnet18", (3, 224, 224), 1000)
    >>> sum(p.numel() for p in net.parameters()), net.conv1.kernel_size, net.penultimate_name
    (11689512, (7, 7), 'pool')
    >>> build_model("resnet18", (3, 32, 32), 10, head={"kind": "linear", "bias": False}).conv1.kernel_size
    (3, 3)
    """
    if name not in NET_MODELS:
        raise ValueError(f"unknown model {name!r}; known: {', '.join(NET_MODELS)}")
    model = NET_MODELS[name](tuple(input_shape), K, **options)
    if isinstance(head, nn.Module):
        model.head = head
    elif head is not None:
        spec = dict(head)
        kind = spec.pop("kind", "linear")
        model.head = make_head(kind, model.d, K, **spec)
        if isinstance(model.head, nn.Linear):
            model.init_linear(model.head)
    return model
