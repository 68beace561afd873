"""Convolutional networks for small images (no torchvision): a small CNN, VGG-11-BN, ResNet-18 with the
CIFAR stem (the [Han et al. 2022] MNIST/CIFAR recipe), and a CIFAR-style DenseNet. ``width`` scales every channel
count (``width=64`` is the standard size for ResNet/VGG; CPU-scale configs use 8-16). Intermediate measured
layers are conv feature maps, flattened ``C x H x W`` ([Wang et al. 2024] measures flattened, not pooled, features).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from nclab.nets.base import CollapseNet

__all__ = ["VGG11", "DenseNet", "ResNet18", "SmallCNN"]


def _conv_bn(c_in: int, c_out: int, batchnorm: bool = True) -> list[nn.Module]:
    mods: list[nn.Module] = [nn.Conv2d(c_in, c_out, 3, padding=1, bias=not batchnorm)]
    if batchnorm:
        mods.append(nn.BatchNorm2d(c_out))
    mods.append(nn.ReLU(inplace=True))
    return mods


class _Pool(nn.Sequential):
    """Global average pool + flatten: the penultimate layer of the conv nets."""

    def __init__(self) -> None:
        super().__init__(nn.AdaptiveAvgPool2d(1), nn.Flatten(1))


class SmallCNN(CollapseNet):
    """``[conv3x3 -> BN -> ReLU -> maxpool2] x len(channels) -> flatten -> Linear(hidden) -> BN -> ReLU -> head``.
    Measured: ``block1..blockS`` (feature maps) and ``fc`` (penultimate, ``d = hidden``). ``batchnorm=False``
    drops every BN. The BN of the hidden layer keeps its ReLU units alive under the large effective learning rate of
    the [Han et al. 2022] summed MSE: without it, 56-95 of 128 units died in the Fashion-MNIST CPU-scale runs and MSE
    stalled
    at 0.1-0.4% training error (docs/training.md)."""

    def __init__(
        self,
        input_shape: Sequence[int],
        num_classes: int,
        channels: Sequence[int] = (32, 64),
        hidden: int = 128,
        *,
        batchnorm: bool = True,
        head: nn.Module | None = None,
    ) -> None:
        super().__init__()
        c, h, w = (int(s) for s in input_shape)
        blocks = []
        for ch in channels:
            pool = h >= 2 and w >= 2
            blocks.append(nn.Sequential(*_conv_bn(c, ch, batchnorm), *([nn.MaxPool2d(2)] if pool else [])))
            c, h, w = ch, (h // 2 if pool else h), (w // 2 if pool else w)
        self.blocks = nn.ModuleList(blocks)
        fc: list[nn.Module] = [nn.Flatten(1), nn.Linear(c * h * w, hidden, bias=not batchnorm)]
        self.fc = nn.Sequential(*fc, *([nn.BatchNorm1d(hidden)] if batchnorm else []), nn.ReLU(inplace=True))
        self.num_classes, self.feature_dim = int(num_classes), int(hidden)
        self.head = head if head is not None else nn.Linear(hidden, num_classes)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        for b in self.blocks:
            x = b(x)
        return self.fc(x)

    def _layers(self) -> list[tuple[str, nn.Module]]:
        return [*((f"block{i + 1}", b) for i, b in enumerate(self.blocks)), ("fc", self.fc)]


_VGG11 = (1, "M", 2, "M", 4, 4, "M", 8, 8, "M", 8, 8, "M")  # channels in units of width: 64, M, 128, M, ...


class VGG11(CollapseNet):
    """VGG-11 with batch norm (Simonyan & Zisserman config A; PNAS / [Han et al. 2022] use BN VGGs), global average
    pooling and a linear head (the PNAS VGG head is unspecified, [Han et al. 2022, App. A.2]). A max-pool is skipped
    when the map is already 1x1 (small inputs). Measured: ``stage1..stage5`` (after each pool) and ``pool``
    (penultimate, ``d = 8 * width``; 512 at ``width=64``)."""

    def __init__(
        self, input_shape: Sequence[int], num_classes: int, width: int = 64, *, head: nn.Module | None = None
    ) -> None:
        super().__init__()
        c, h = int(input_shape[0]), int(min(input_shape[1:]))
        stages, cur = [], []
        for item in _VGG11:
            if item == "M":
                if h >= 2:
                    cur.append(nn.MaxPool2d(2))
                    h //= 2
                stages.append(nn.Sequential(*cur))
                cur = []
            else:
                ch = int(item) * width
                cur += _conv_bn(c, ch)
                c = ch
        self.stages = nn.ModuleList(stages)
        self.pool = _Pool()
        self.num_classes, self.feature_dim = int(num_classes), c
        self.head = head if head is not None else nn.Linear(c, num_classes)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        for s in self.stages:
            x = s(x)
        return self.pool(x)

    def _layers(self) -> list[tuple[str, nn.Module]]:
        return [*((f"stage{i + 1}", s) for i, s in enumerate(self.stages)), ("pool", self.pool)]


class _BasicBlock(nn.Module):
    """torchvision's post-activation BasicBlock: ``relu(bn(conv(relu(bn(conv x)))) + shortcut(x))``."""

    def __init__(self, c_in: int, c_out: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or c_in != c_out:
            self.shortcut = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False), nn.BatchNorm2d(c_out))
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(out)) + self.shortcut(x))


class ResNet18(CollapseNet):
    """ResNet-18 with the small-image ("CIFAR") stem of the [Han et al. 2022] Colab: a 3x3 stride-1 conv (no bias) and
    no max-pool; stages of 2 BasicBlocks with ``width * (1, 2, 4, 8)`` channels. Measured: ``stem``, every
    block ``layer{s}.{b}`` and ``pool`` (penultimate, ``d = 8 * width``; 512 at ``width=64``)."""

    def __init__(
        self,
        input_shape: Sequence[int],
        num_classes: int,
        width: int = 64,
        blocks_per_stage: Sequence[int] = (2, 2, 2, 2),
        *,
        head: nn.Module | None = None,
    ) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(int(input_shape[0]), width, 3, padding=1, bias=False),
            nn.BatchNorm2d(width),
            nn.ReLU(inplace=True),
        )
        blocks: list[tuple[str, nn.Module]] = []
        c = width
        for s, n in enumerate(blocks_per_stage):
            c_out = width * 2**s
            for b in range(n):
                blocks.append((f"layer{s + 1}.{b}", _BasicBlock(c, c_out, 2 if (b == 0 and s > 0) else 1)))
                c = c_out
        self.block_names = [n for n, _ in blocks]
        self.blocks = nn.ModuleList(m for _, m in blocks)
        self.pool = _Pool()
        self.num_classes, self.feature_dim = int(num_classes), c
        self.head = head if head is not None else nn.Linear(c, num_classes)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        for b in self.blocks:
            x = b(x)
        return self.pool(x)

    def _layers(self) -> list[tuple[str, nn.Module]]:
        return [("stem", self.stem), *zip(self.block_names, self.blocks, strict=True), ("pool", self.pool)]


class _DenseLayer(nn.Module):
    def __init__(self, c_in: int, growth: int, bottleneck: bool) -> None:
        super().__init__()
        mods: list[nn.Module] = []
        if bottleneck:
            mods += [nn.BatchNorm2d(c_in), nn.ReLU(inplace=True), nn.Conv2d(c_in, 4 * growth, 1, bias=False)]
            c_in = 4 * growth
        mods += [nn.BatchNorm2d(c_in), nn.ReLU(inplace=True), nn.Conv2d(c_in, growth, 3, padding=1, bias=False)]
        self.f = nn.Sequential(*mods)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([x, self.f(x)], dim=1)


class DenseNet(CollapseNet):
    """CIFAR-style DenseNet [Huang et al. 2017]: 3 dense blocks of ``n`` layers with growth rate ``growth``,
    ``n = (depth - 4) / 3`` (``/ 6`` with bottlenecks, "-BC"), transitions BN-ReLU-conv1x1(compression)-avgpool.
    DenseNet-40 (k = 12) is ``depth=40, growth=12``; the CPU default is a small DenseNet-BC (depth 22).
    Measured: ``block1..block3`` (the output of each dense block, after its transition for blocks 1-2) and
    ``pool`` (BN-ReLU-global pool, penultimate)."""

    def __init__(
        self,
        input_shape: Sequence[int],
        num_classes: int,
        depth: int = 22,
        growth: int = 12,
        *,
        bottleneck: bool = True,
        compression: float = 0.5,
        head: nn.Module | None = None,
    ) -> None:
        super().__init__()
        per = (depth - 4) // (6 if bottleneck else 3)
        if per < 1 or (depth - 4) % (6 if bottleneck else 3):
            raise ValueError(f"DenseNet depth {depth} is not 4 + {'6' if bottleneck else '3'} n for n >= 1")
        c = 2 * growth
        self.stem = nn.Conv2d(int(input_shape[0]), c, 3, padding=1, bias=False)
        h = int(min(input_shape[1:]))
        stages = []
        for s in range(3):
            mods: list[nn.Module] = []
            for _ in range(per):
                mods.append(_DenseLayer(c, growth, bottleneck))
                c += growth
            if s < 2:
                c_out = int(c * compression)
                mods += [nn.BatchNorm2d(c), nn.ReLU(inplace=True), nn.Conv2d(c, c_out, 1, bias=False)]
                if h >= 2:
                    mods.append(nn.AvgPool2d(2))
                    h //= 2
                c = c_out
            stages.append(nn.Sequential(*mods))
        self.stages = nn.ModuleList(stages)
        self.pool = nn.Sequential(nn.BatchNorm2d(c), nn.ReLU(inplace=True), _Pool())
        self.num_classes, self.feature_dim = int(num_classes), c
        self.head = head if head is not None else nn.Linear(c, num_classes)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        for s in self.stages:
            x = s(x)
        return self.pool(x)

    def _layers(self) -> list[tuple[str, nn.Module]]:
        return [*((f"block{i + 1}", s) for i, s in enumerate(self.stages)), ("pool", self.pool)]
