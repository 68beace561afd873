"""DenseNets [Huang et al. 2017]: DenseNet-121 as torchvision builds it, and the 3-block CIFAR DenseNet(-BC) family.

:class:`DenseNet121` is [vision (pytorch)] ``torchvision/models/densenet.py``'s ``densenet121`` (growth 32, blocks
``(6, 12, 24, 16)``, 64 initial features, bottleneck ``4 k``, compression 0.5) with torchvision's modules under the
same names, except the two that nclab's network protocol reserves: torchvision's ``features`` is ``body``
(``features(x)`` is the penultimate representation of every nclab network) and its ``classifier`` is ``head``;
:func:`nclab.nets.reference_key_map` renames both. ``variant="cifar"`` (the small-image variant [Jiang et al.
2024, App. B.3] trains on CIFAR-100) makes ``conv0`` a 3x3 stride-1 convolution and ``pool0`` an ``nn.Identity``;
``"auto"`` picks it for inputs whose smaller side is at most 64 pixels. Initialisation as torchvision:
convolutions ``kaiming_normal_`` (fan-in, ReLU gain), batch norms weight 1 and bias 0, linear layers PyTorch's
default weight and zero bias.

:class:`CifarDenseNet` is the CIFAR architecture of [Huang et al. 2017, Sec. 3-4]: a 3x3 convolution with 16
channels (``2 k`` for DenseNet-BC), 3 dense blocks of ``n`` layers (``n = (depth - 4) / 3``, or ``/ 6`` with
bottlenecks), transitions BN-ReLU-conv1x1-avgpool (compression 0.5 for DenseNet-BC, 1 for DenseNet), then
BN-ReLU-global average pool. DenseNet-40 (k = 12) is ``depth=40, growth=12, bottleneck=False``; DenseNet-BC-100
(k = 12) ``depth=100, growth=12``. Initialised as :class:`DenseNet121`.

A 2x2 average pool whose input is already 1 pixel on a side is an ``nn.Identity`` (small inputs).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from nclab.nets.base import CollapseNet, FeatureLayer, Variant, check_feature_bottleneck, resolve_variant

__all__ = ["CifarDenseNet", "DenseNet121"]


class _DenseLayer(nn.Module):
    """torchvision's ``_DenseLayer``: ``conv2(relu2(norm2(conv1(relu1(norm1(x))))))``, ``k`` new channels, with the
    1x1 bottleneck ``conv1`` of ``bn_size * k`` channels; without ``bn_size`` (DenseNet, not -BC)
    ``conv1(relu1(norm1(x)))`` with ``conv1`` the 3x3 convolution. Dropout ``drop_rate`` after."""

    def __init__(self, c_in: int, growth: int, bn_size: int | None, drop_rate: float) -> None:
        super().__init__()
        self.norm1 = nn.BatchNorm2d(c_in)
        self.relu1 = nn.ReLU(inplace=True)
        self.conv2: nn.Module | None = None
        if bn_size is None:
            self.conv1 = nn.Conv2d(c_in, growth, 3, padding=1, bias=False)
        else:
            self.conv1 = nn.Conv2d(c_in, bn_size * growth, 1, bias=False)
            self.norm2 = nn.BatchNorm2d(bn_size * growth)
            self.relu2 = nn.ReLU(inplace=True)
            self.conv2 = nn.Conv2d(bn_size * growth, growth, 3, padding=1, bias=False)
        self.drop_rate = float(drop_rate)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.conv1(self.relu1(self.norm1(x)))
        if self.conv2 is not None:
            out = self.conv2(self.relu2(self.norm2(out)))
        return F.dropout(out, p=self.drop_rate, training=self.training) if self.drop_rate > 0 else out


class _DenseBlock(nn.ModuleDict):
    """``denselayer1..n``; each layer reads the concatenation of the block input and every earlier layer's
    output, and the block outputs the concatenation of all of them (``c_in + n k`` channels)."""

    def __init__(self, n: int, c_in: int, growth: int, bn_size: int | None, drop_rate: float) -> None:
        super().__init__()
        for i in range(n):
            self[f"denselayer{i + 1}"] = _DenseLayer(c_in + i * growth, growth, bn_size, drop_rate)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        feats = [x]
        for layer in self.values():
            feats.append(layer(torch.cat(feats, 1)))
        return torch.cat(feats, 1)


class _Transition(nn.Sequential):
    def __init__(self, c_in: int, c_out: int, pool: bool) -> None:
        super().__init__(
            OrderedDict(
                norm=nn.BatchNorm2d(c_in),
                relu=nn.ReLU(inplace=True),
                conv=nn.Conv2d(c_in, c_out, 1, bias=False),
                pool=nn.AvgPool2d(2, stride=2) if pool else nn.Identity(),
            )
        )


class _FinalPool(nn.Sequential):
    """ReLU then global average pool: torchvision's ``F.relu -> adaptive_avg_pool2d -> flatten`` after
    ``norm5`` (not in place, so that a hook on ``norm5`` keeps its output)."""

    def __init__(self) -> None:
        super().__init__(nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(1))


def _torchvision_init(net: nn.Module) -> None:
    for m in net.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight)
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Linear):
            nn.init.zeros_(m.bias)


class _DenseNetBase(CollapseNet):
    """What both DenseNets share: the head, the bottleneck option, torchvision's initialisation."""

    bottleneck: nn.Linear | None
    pool: nn.Module

    def _finish(self, c: int, K: int, d: int | None, head: nn.Module | None) -> None:
        self.pool = _FinalPool()
        self.bottleneck = nn.Linear(c, d) if d is not None else None
        self.K, self.d = int(K), (c if d is None else int(d))
        self.head = nn.Linear(self.d, K)
        _torchvision_init(self)
        if head is not None:
            self.head = head

    def init_linear(self, module: nn.Linear) -> None:
        """torchvision's DenseNet keeps the default linear weight and zeroes the bias."""
        if module.bias is not None:
            nn.init.zeros_(module.bias)


class DenseNet121(_DenseNetBase):
    """torchvision's ``densenet121`` (see the module docstring); 7,978,856 parameters at 1,000 classes
    (``variant="imagenet"``).

    Parameters
    ----------
    input_shape : sequence of int
        Image shape ``(C, H, W)``.
    K : int
        Number of classes.
    head : nn.Module, optional
        Classifier on the ``(B, d)`` features (default: a linear layer ``d -> K``).
    variant : {"auto", "imagenet", "cifar"}
        The stem (module docstring).
    growth_rate, num_init_features, bn_size : int
        ``k``, the stem's channels and the bottleneck factor (32, 64 and 4 in the reference).
    drop_rate : float
        Dropout after each dense layer (0 in the reference).
    d, feature_layer
        An inserted linear layer of width ``d`` before the head (``"linear"``, the only one).

    Measured layers: ``stem`` (the output of ``pool0``), ``denseblock1..4`` (each dense block's output, before
    its transition) and ``pool`` (norm5-ReLU-global pool, the classifier input, d = 1024), then ``bottleneck``.

    Examples
    --------
    >>> from nclab.nets import DenseNet121
    >>> net = DenseNet121((3, 32, 32), 10, growth_rate=4, num_init_features=8)
    >>> list(net.measured_layers()), net.d
    (['stem', 'denseblock1', 'denseblock2', 'denseblock3', 'denseblock4', 'pool'], 128)
    """

    reference_renames = (("body.", "features."), ("head.", "classifier."))
    reference = "torchvision.models.densenet121"

    def __init__(
        self,
        input_shape: Sequence[int],
        K: int,
        *,
        variant: Variant = "auto",
        growth_rate: int = 32,
        num_init_features: int = 64,
        bn_size: int = 4,
        drop_rate: float = 0.0,
        d: int | None = None,
        feature_layer: FeatureLayer = "linear",
        head: nn.Module | None = None,
    ) -> None:
        super().__init__()
        d = check_feature_bottleneck(d, feature_layer, ("linear",), model="DenseNet121")
        self.variant = resolve_variant(variant, input_shape)
        imagenet = self.variant == "imagenet"
        c, side = num_init_features, min(int(s) for s in input_shape[1:])
        stem = nn.Conv2d(
            int(input_shape[0]),
            c,
            7 if imagenet else 3,
            stride=2 if imagenet else 1,
            padding=3 if imagenet else 1,
            bias=False,
        )
        mods: OrderedDict[str, nn.Module] = OrderedDict(
            conv0=stem,
            norm0=nn.BatchNorm2d(c),
            relu0=nn.ReLU(inplace=True),
            pool0=nn.MaxPool2d(3, stride=2, padding=1) if imagenet else nn.Identity(),
        )
        if imagenet:  # conv0 (stride 2, padding 3) and pool0 (stride 2, padding 1) each give ceil(side / 2)
            side = math.ceil(math.ceil(side / 2) / 2)
        self.block_names: list[str] = []
        for i, n in enumerate((6, 12, 24, 16)):
            mods[f"denseblock{i + 1}"] = _DenseBlock(n, c, growth_rate, bn_size, drop_rate)
            self.block_names.append(f"denseblock{i + 1}")
            c += n * growth_rate
            if i < 3:
                mods[f"transition{i + 1}"] = _Transition(c, c // 2, pool=side >= 2)
                c, side = c // 2, (side // 2 if side >= 2 else side)
        mods["norm5"] = nn.BatchNorm2d(c)
        self.body = nn.Sequential(mods)
        self._finish(c, K, d, head)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(self.body(x))
        return x if self.bottleneck is None else self.bottleneck(x)

    def _layers(self) -> list[tuple[str, nn.Module]]:
        out = [("stem", self.body.get_submodule("pool0")), *((n, self.body.get_submodule(n)) for n in self.block_names)]
        out.append(("pool", self.pool))
        if self.bottleneck is not None:
            out.append(("bottleneck", self.bottleneck))
        return out


class CifarDenseNet(_DenseNetBase):
    """The CIFAR DenseNet / DenseNet-BC of [Huang et al. 2017] (see the module docstring).

    Parameters
    ----------
    input_shape : sequence of int
        Image shape ``(C, H, W)``.
    K : int
        Number of classes.
    head : nn.Module, optional
        Classifier on the ``(B, d)`` features (default: a linear layer ``d -> K``).
    depth, growth : int
        ``L`` and ``k``: DenseNet-BC-100 (k = 12) is ``depth=100, growth=12``; the CPU default is a small
        DenseNet-BC (depth 22).
    bottleneck : bool
        DenseNet-BC's 1x1 bottleneck (``4 k`` channels) in each layer.
    compression : float, optional
        The transitions' ``theta``; default 0.5 with ``bottleneck`` (DenseNet-BC), 1 without (DenseNet).
    init_channels : int, optional
        Channels of the first convolution; default ``2 k`` with ``bottleneck``, 16 without.
    drop_rate : float
        Dropout on each dense layer's output ([Huang et al. 2017] use 0.2 without data augmentation).
    d, feature_layer
        An inserted linear layer of width ``d`` before the head (``"linear"``, the only one).

    Measured layers: ``block1..block3`` (the output of each dense block, after its transition for blocks 1-2) and
    ``pool`` (BN-ReLU-global pool, the classifier input), then ``bottleneck``.

    Examples
    --------
    >>> import torch
    >>> from nclab.nets import CifarDenseNet
    >>> net = CifarDenseNet((3, 32, 32), 10, depth=10, growth=4)
    >>> list(net.measured_layers()), tuple(net.features(torch.zeros(2, 3, 32, 32)).shape)
    (['block1', 'block2', 'block3', 'pool'], (2, 9))
    """

    def __init__(
        self,
        input_shape: Sequence[int],
        K: int,
        depth: int = 22,
        growth: int = 12,
        *,
        bottleneck: bool = True,
        compression: float | None = None,
        init_channels: int | None = None,
        drop_rate: float = 0.0,
        d: int | None = None,
        feature_layer: FeatureLayer = "linear",
        head: nn.Module | None = None,
    ) -> None:
        super().__init__()
        per = (depth - 4) // (6 if bottleneck else 3)
        if per < 1 or (depth - 4) % (6 if bottleneck else 3):
            raise ValueError(f"DenseNet depth {depth} is not 4 + {'6' if bottleneck else '3'} n for n >= 1")
        theta = (0.5 if bottleneck else 1.0) if compression is None else float(compression)
        if not 0.0 < theta <= 1.0:
            raise ValueError(f"compression must be in (0, 1], got {compression}")
        d = check_feature_bottleneck(d, feature_layer, ("linear",), model="CifarDenseNet")
        c = (2 * growth if bottleneck else 16) if init_channels is None else int(init_channels)
        self.stem = nn.Conv2d(int(input_shape[0]), c, 3, padding=1, bias=False)
        side = int(min(input_shape[1:]))
        stages = []
        for s in range(3):
            mods: list[nn.Module] = [_DenseBlock(per, c, growth, 4 if bottleneck else None, drop_rate)]
            c += per * growth
            if s < 2:
                mods.append(_Transition(c, int(c * theta), pool=side >= 2))
                c, side = int(c * theta), (side // 2 if side >= 2 else side)
            stages.append(nn.Sequential(*mods))
        self.stages = nn.ModuleList(stages)
        self.norm = nn.BatchNorm2d(c)
        self._finish(c, K, d, head)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        for s in self.stages:
            x = s(x)
        x = self.pool(self.norm(x))
        return x if self.bottleneck is None else self.bottleneck(x)

    def _layers(self) -> list[tuple[str, nn.Module]]:
        out: list[tuple[str, nn.Module]] = [(f"block{i + 1}", s) for i, s in enumerate(self.stages)]
        out.append(("pool", self.pool))
        if self.bottleneck is not None:
            out.append(("bottleneck", self.bottleneck))
        return out
