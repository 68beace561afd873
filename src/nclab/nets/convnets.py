"""A small convolutional network for CPU-scale runs, and the global average pool the conv nets share.

The papers' networks are in :mod:`nclab.nets.resnet`, :mod:`nclab.nets.vgg`, :mod:`nclab.nets.densenet` and
:mod:`nclab.nets.vit`. Intermediate measured layers are conv feature maps, flattened ``C x H x W``
([Wang et al. 2024] measures flattened, not pooled, features).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from nclab.nets.base import CollapseNet
from nclab.validation import check_int

__all__ = ["GlobalPool", "SmallCNN"]


def _conv_bn(c_in: int, c_out: int, batchnorm: bool = True) -> list[nn.Module]:
    mods: list[nn.Module] = [nn.Conv2d(c_in, c_out, 3, padding=1, bias=not batchnorm)]
    if batchnorm:
        mods.append(nn.BatchNorm2d(c_out))
    mods.append(nn.ReLU(inplace=True))
    return mods


class GlobalPool(nn.Sequential):
    """Global average pool + flatten, ``(B, C, H, W) -> (B, C)``: the penultimate layer of the conv nets (no
    parameters, so it adds no state-dict key)."""

    def __init__(self) -> None:
        super().__init__(nn.AdaptiveAvgPool2d(1), nn.Flatten(1))


class SmallCNN(CollapseNet):
    """``[conv3x3 -> BN -> ReLU -> maxpool2] x len(channels) -> flatten -> Linear(hidden) -> BN -> ReLU
    [-> Linear(d)] -> head``. Measured: ``block1..blockS`` (feature maps) and ``fc`` (penultimate, ``d = hidden``,
    or the bottleneck's ``d``). ``batchnorm=False`` drops every BN. The BN of the hidden layer keeps its ReLU units
    alive under the large effective learning rate of the [Han et al. 2022] summed MSE: without it, 56-95 of 128
    units died in the Fashion-MNIST CPU-scale runs and MSE stalled at 0.1-0.4% training error (docs/training.md).

    Parameters
    ----------
    input_shape : sequence of int
        Image shape ``(C, H, W)``.
    K : int
        Number of classes.
    channels : sequence of int, default=(32, 64)
        Output channels of each convolutional block.
    hidden : int, default=128
        Width of the hidden linear layer: the penultimate layer (``d = hidden``) when ``d`` is not given, the
        input of the bottleneck otherwise.
    d : int, optional
        A linear bottleneck ``hidden -> d`` (with bias, no activation) after the hidden layer's ReLU, the features
        then: e.g. ``d < K`` for generalized collapse [Jiang et al. 2024], whose ResNet18 ends in a ``d = 10``
        layer. Without an activation the features span all directions of ``R^d`` (a ReLU would confine them to
        the positive orthant). Default: no bottleneck, ``d = hidden``.
    batchnorm : bool, default=True
        The batch norms.
    head : nn.Module, optional
        Classifier on the ``(B, d)`` features (default: a linear layer ``d -> K``).

    Examples
    --------
    >>> import torch
    >>> from nclab.nets import SmallCNN
    >>> net = SmallCNN((1, 8, 8), 3, channels=(4, 8), hidden=16)
    >>> list(net.measured_layers()), tuple(net.features(torch.zeros(2, 1, 8, 8)).shape)
    (['block1', 'block2', 'fc'], (2, 16))
    >>> SmallCNN((1, 8, 8), 10, channels=(4, 8), hidden=16, d=2).d
    2
    """

    def __init__(
        self,
        input_shape: Sequence[int],
        K: int,
        channels: Sequence[int] = (32, 64),
        hidden: int = 128,
        *,
        d: int | None = None,
        batchnorm: bool = True,
        head: nn.Module | None = None,
    ) -> None:
        super().__init__()
        if d is not None:
            check_int(d, name="d", low=1)
        c, h, w = (int(s) for s in input_shape)
        blocks = []
        for ch in channels:
            pool = h >= 2 and w >= 2
            blocks.append(nn.Sequential(*_conv_bn(c, ch, batchnorm), *([nn.MaxPool2d(2)] if pool else [])))
            c, h, w = ch, (h // 2 if pool else h), (w // 2 if pool else w)
        self.blocks = nn.ModuleList(blocks)
        fc: list[nn.Module] = [nn.Flatten(1), nn.Linear(c * h * w, hidden, bias=not batchnorm)]
        fc += [*([nn.BatchNorm1d(hidden)] if batchnorm else []), nn.ReLU(inplace=True)]
        self.fc = nn.Sequential(*fc, *([nn.Linear(hidden, int(d))] if d is not None else []))
        self.K, self.d = int(K), int(hidden if d is None else d)
        self.head = head if head is not None else nn.Linear(self.d, K)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        for b in self.blocks:
            x = b(x)
        return self.fc(x)

    def _layers(self) -> list[tuple[str, nn.Module]]:
        return [*((f"block{i + 1}", b) for i, b in enumerate(self.blocks)), ("fc", self.fc)]
