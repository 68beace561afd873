"""The interface every nclab network implements: a feature extractor, a classifier head, and named layers to
measure.

``forward(x) = head(features(x))``; ``features(x)`` is the penultimate representation ``(B, d)`` (the input of
the classifier, where [Xu & Liu 2023; Han et al. 2022] measure collapse); ``measured_layers()`` is an ordered dict
``name -> module`` whose **outputs** are measured (flattened to ``(B, d_l)``), from the input side to the
penultimate layer, which is always its last entry (``penultimate_name``).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Literal

import torch
from torch import nn

from nclab.validation import check_choice, check_int

__all__ = [
    "SMALL_IMAGE_SIDE",
    "CollapseNet",
    "FeatureLayer",
    "Residual",
    "Variant",
    "check_feature_bottleneck",
    "resolve_variant",
]

#: ``"imagenet"``: the reference network as torchvision builds it; ``"cifar"``: its small-image variant (a 3x3
#: stride-1 first convolution without max-pool; VGG: a global-average-pooled single linear head); ``"auto"``:
#: ``"cifar"`` when the input's smaller side is at most :data:`SMALL_IMAGE_SIDE` pixels, else ``"imagenet"``.
Variant = Literal["auto", "imagenet", "cifar"]

#: The largest input side (pixels) that ``variant="auto"`` treats as a small image: MNIST (28), CIFAR (32) and
#: Tiny-ImageNet (64) get the small-image variant, STL-10 (96) and ImageNet (224) the reference one.
SMALL_IMAGE_SIDE = 64

#: How the option ``d`` sets the feature dimension: ``"linear"`` inserts a ``Linear(d_backbone, d)`` (with bias)
#: between the pooled features and the head ([Jiang et al. 2024, App. B.3]); ``"last_block"`` sets the output
#: width of the last residual block to ``d`` (its last convolution and batch norm) and gives that block a 1x1
#: convolution + batch-norm shortcut to ``d`` channels ([Jiang et al. 2024, App. B.1]: "the number of channels in
#: the second convolutional layer of the last residual block"); residual networks only.
FeatureLayer = Literal["linear", "last_block"]


def resolve_variant(variant: str, input_shape: Sequence[int]) -> Literal["imagenet", "cifar"]:
    """The variant ``"imagenet"`` or ``"cifar"`` that ``variant`` (see :data:`Variant`) selects for images of
    ``input_shape = (C, H, W)``.

    Examples
    --------
    >>> [resolve_variant("auto", (3, s, s)) for s in (32, 64, 96, 224)]
    ['cifar', 'cifar', 'imagenet', 'imagenet']
    >>> resolve_variant("cifar", (3, 224, 224))
    'cifar'
    """
    check_choice(variant, Variant, name="variant")
    if len(input_shape) != 3:
        raise ValueError(f"input_shape must be (C, H, W) for an image network, got {tuple(input_shape)}")
    if variant != "auto":  # "cifar" or "imagenet" (checked above)
        return "cifar" if variant == "cifar" else "imagenet"
    return "cifar" if min(int(s) for s in input_shape[1:]) <= SMALL_IMAGE_SIDE else "imagenet"


def check_feature_bottleneck(d: int | None, feature_layer: str, allowed: Sequence[str], *, model: str) -> int | None:
    """``d`` checked (``None`` or an int ``>= 1``) and ``feature_layer`` one of ``allowed`` (a subset of
    :data:`FeatureLayer`) for network ``model``; returns ``d``."""
    check_choice(feature_layer, FeatureLayer, name="feature_layer")
    if feature_layer not in allowed:
        raise ValueError(
            f"feature_layer={feature_layer!r} is not available for {model} (available: {', '.join(allowed)}); "
            "'last_block' needs a residual network"
        )
    return None if d is None else check_int(d, name="d", low=1)


class CollapseNet(nn.Module):
    """Base class: subclasses set ``self.head`` and implement :meth:`features` and :meth:`_layers`.

    Parameters
    ----------
    *args, **kwargs
        Passed to :class:`torch.nn.Module`.

    Examples
    --------
    A minimal subclass: one measured hidden layer, whose output is the penultimate feature.

    >>> import torch
    >>> from torch import nn
    >>> from nclab.nets import CollapseNet
    >>> class Tiny(CollapseNet):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.hidden, self.head = nn.Linear(4, 3), nn.Linear(3, 2)
    ...     def features(self, x):
    ...         return self.hidden(x)
    ...     def _layers(self):
    ...         return [("hidden", self.hidden)]
    >>> net = Tiny()
    >>> net.penultimate_name, tuple(net(torch.zeros(5, 4)).shape), tuple(net.classifier_weight.shape)
    ('hidden', (5, 2), (2, 3))
    """

    head: nn.Module
    K: int
    d: int
    #: ``(nclab prefix, reference prefix)`` pairs renaming state-dict keys to those of the reference
    #: implementation (:func:`nclab.nets.reference_key_map`); keys without a listed prefix are equal.
    reference_renames: tuple[tuple[str, str], ...] = ()
    #: The reference implementation whose modules and state-dict keys this network follows (``None``: none).
    reference: str | None = None

    def init_linear(self, module: nn.Linear) -> None:
        """Initialise a linear layer added after construction (a head built by :func:`nclab.nets.build_model`)
        as the reference implementation initialises its classifier; the base class keeps PyTorch's default."""

    def features(self, x: torch.Tensor) -> torch.Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))

    def _layers(self) -> list[tuple[str, nn.Module]]:  # pragma: no cover - abstract
        raise NotImplementedError

    def measured_layers(self) -> OrderedDict[str, nn.Module]:
        """Ordered ``name -> module`` (input side first); the output of the last one is the penultimate
        feature ``features(x)``."""
        return OrderedDict(self._layers())

    @property
    def penultimate_name(self) -> str:
        return next(reversed(self.measured_layers()))

    @property
    def penultimate(self) -> nn.Module:
        """The module whose output is the classifier input ``(B, d)``."""
        return self.measured_layers()[self.penultimate_name]

    @property
    def classifier_weight(self) -> torch.Tensor:
        """``W (K, d)`` of the head (rows = classes)."""
        weight = self.head.weight
        if not isinstance(weight, torch.Tensor):
            raise TypeError(f"the head {type(self.head).__name__} has no weight tensor (its classifier W)")
        return weight

    @property
    def classifier_bias(self) -> torch.Tensor | None:
        return getattr(self.head, "bias", None)


class Residual(nn.Module):
    """``x + v(x)`` with the residual branch ``self.v`` set by the subclass; nothing after the sum, so the block is
    exactly the identity plus its residual (the [Wang et al. 2024] ``x^(l+1) = x^(l) + v_l(x^(l))``)."""

    v: nn.Module

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.v(x)
