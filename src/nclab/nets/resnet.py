"""ResNet-18/34/50 and ResNeXt-50 (32x4d) as torchvision builds them ([He et al. 2016; Xie et al. 2017],
[vision (pytorch)] ``torchvision/models/resnet.py``, "ResNet v1.5": the stride of a bottleneck block is on its 3x3
convolution), with the same module and state-dict key names (``conv1, bn1, layer1..4, fc``; nclab's classifier is
``head``, renamed to ``fc`` by :func:`nclab.nets.reference_key_map`).

``variant`` (:data:`nclab.nets.base.Variant`): ``"imagenet"`` is torchvision's network (7x7 stride-2 ``conv1`` and a
3x3 stride-2 max-pool); ``"cifar"`` is the small-image variant the papers train on CIFAR / MNIST ([Han et al. 2022]
Colab, [Jiang et al. 2024, App. B.3]): ``conv1`` a 3x3 stride-1 convolution and no max-pool (``maxpool`` is an
``nn.Identity``, so the keys stay torchvision's); ``"auto"`` (default) picks ``"cifar"`` for inputs whose smaller side
is at most 64 pixels. Initialisation as torchvision: convolutions ``kaiming_normal_(mode="fan_out",
nonlinearity="relu")``, batch norms weight 1 and bias 0, the classifier PyTorch's ``nn.Linear`` default;
``zero_init_residual=True`` zeroes the last batch norm of every residual branch (torchvision's option, off by
default).

Measured layers: ``stem`` (the output of ``maxpool``, i.e. after conv1-bn1-relu(-maxpool)), every block
``layer{s}.{b}`` (named as its module) and ``pool`` (global average pool, the classifier input), then
``bottleneck`` when ``d`` inserts a linear layer.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from nclab.nets.base import CollapseNet, FeatureLayer, Variant, check_feature_bottleneck, resolve_variant
from nclab.nets.convnets import GlobalPool

__all__ = ["BasicBlock", "Bottleneck", "ResNeXt50_32x4d", "ResNet", "ResNet18", "ResNet34", "ResNet50"]


def _conv3x3(c_in: int, c_out: int, stride: int = 1, groups: int = 1) -> nn.Conv2d:
    return nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, groups=groups, bias=False)


def _conv1x1(c_in: int, c_out: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False)


class BasicBlock(nn.Module):
    """torchvision's ``BasicBlock``: ``relu(bn2(conv2(relu(bn1(conv1 x)))) + downsample(x))``; ``out_planes``
    overrides the width of ``conv2`` / ``bn2`` (the block's output) for the ``last_block`` feature bottleneck."""

    expansion = 1

    def __init__(
        self,
        inplanes: int,
        planes: int,
        stride: int = 1,
        downsample: nn.Module | None = None,
        groups: int = 1,
        base_width: int = 64,
        out_planes: int | None = None,
    ) -> None:
        super().__init__()
        if groups != 1 or base_width != 64:
            raise ValueError("BasicBlock only supports groups=1 and width_per_group=64 (as torchvision)")
        out = planes if out_planes is None else out_planes
        self.conv1 = _conv3x3(inplanes, planes, stride)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = _conv3x3(planes, out)
        self.bn2 = nn.BatchNorm2d(out)
        self.downsample = downsample

    @property
    def last_bn(self) -> nn.BatchNorm2d:
        return self.bn2

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class Bottleneck(nn.Module):
    """torchvision's ``Bottleneck`` (v1.5, stride on the 3x3): 1x1 to ``width = int(planes * base_width / 64) *
    groups``, grouped 3x3, 1x1 to ``4 planes`` (or ``out_planes``), plus the shortcut, then ReLU."""

    expansion = 4

    def __init__(
        self,
        inplanes: int,
        planes: int,
        stride: int = 1,
        downsample: nn.Module | None = None,
        groups: int = 1,
        base_width: int = 64,
        out_planes: int | None = None,
    ) -> None:
        super().__init__()
        width = int(planes * (base_width / 64.0)) * groups
        if width < 1:
            raise ValueError(f"the bottleneck width int({planes} * {base_width} / 64) * {groups} is 0: raise width")
        out = planes * self.expansion if out_planes is None else out_planes
        self.conv1 = _conv1x1(inplanes, width)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = _conv3x3(width, width, stride, groups)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = _conv1x1(width, out)
        self.bn3 = nn.BatchNorm2d(out)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    @property
    def last_bn(self) -> nn.BatchNorm2d:
        return self.bn3

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


_BLOCKS: dict[str, type[BasicBlock] | type[Bottleneck]] = {"basic": BasicBlock, "bottleneck": Bottleneck}


class ResNet(CollapseNet):
    """torchvision's ``ResNet`` (see the module docstring) on ``input_shape = (C, H, W)``.

    Parameters
    ----------
    input_shape : sequence of int
        Image shape ``(C, H, W)``.
    K : int
        Number of classes.
    head : nn.Module, optional
        Classifier on the ``(B, d)`` features (default: a linear layer ``d -> K``).
    block : {"basic", "bottleneck"}
        The residual block; ``layers`` the number of blocks of each of the 4 stages.
    variant : {"auto", "imagenet", "cifar"}
        The stem (module docstring).
    width : int
        Channels of the stem and of stage 1 (64 in the reference); stage ``s`` has ``width * 2**(s-1)`` planes.
    groups, width_per_group : int
        ResNeXt's cardinality and group width (1 and 64 for ResNet).
    zero_init_residual : bool
        Zero the last batch norm of each residual branch (torchvision's option).
    d, feature_layer
        The feature bottleneck (:data:`nclab.nets.base.FeatureLayer`): ``None`` keeps the backbone width
        (512 for ``basic``, 2048 for ``bottleneck`` blocks at ``width=64``).

    Examples
    --------
    >>> import torch
    >>> from nclab.nets import ResNet
    >>> net = ResNet((3, 32, 32), 10, "basic", (1, 1, 1, 1), width=4)
    >>> list(net.measured_layers()), tuple(net.features(torch.zeros(2, 3, 32, 32)).shape)
    (['stem', 'layer1.0', 'layer2.0', 'layer3.0', 'layer4.0', 'pool'], (2, 32))
    """

    reference_renames = (("head.", "fc."),)

    def __init__(
        self,
        input_shape: Sequence[int],
        K: int,
        block: str = "basic",
        layers: Sequence[int] = (2, 2, 2, 2),
        *,
        variant: Variant = "auto",
        width: int = 64,
        groups: int = 1,
        width_per_group: int = 64,
        zero_init_residual: bool = False,
        d: int | None = None,
        feature_layer: FeatureLayer = "linear",
        head: nn.Module | None = None,
    ) -> None:
        super().__init__()
        if block not in _BLOCKS:
            raise ValueError(f"block must be one of {', '.join(_BLOCKS)}, got {block!r}")
        if len(layers) != 4 or min(layers) < 1:
            raise ValueError(f"layers must be 4 block counts >= 1, got {tuple(layers)}")
        d = check_feature_bottleneck(d, feature_layer, ("linear", "last_block"), model="ResNet")
        self.variant = resolve_variant(variant, input_shape)
        self.groups, self.base_width = int(groups), int(width_per_group)
        self._block = _BLOCKS[block]
        # registered in torchvision's order, so that state dicts list their keys in the same order
        c_in = int(input_shape[0])
        imagenet = self.variant == "imagenet"
        self.conv1 = nn.Conv2d(
            c_in, width, 7 if imagenet else 3, stride=2 if imagenet else 1, padding=3 if imagenet else 1, bias=False
        )
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool: nn.Module = nn.MaxPool2d(3, stride=2, padding=1) if imagenet else nn.Identity()
        self._inplanes = width
        last_out = d if feature_layer == "last_block" else None
        self.layer1 = self._make_layer(width, layers[0], 1)
        self.layer2 = self._make_layer(width * 2, layers[1], 2)
        self.layer3 = self._make_layer(width * 4, layers[2], 2)
        self.layer4 = self._make_layer(width * 8, layers[3], 2, last_out=last_out)
        self.avgpool = GlobalPool()
        c = self._inplanes
        self.bottleneck = nn.Linear(c, d) if (d is not None and feature_layer == "linear") else None
        self.K = int(K)
        self.d = c if self.bottleneck is None else int(self.bottleneck.out_features)
        self.reference = f"torchvision ResNet ({block} blocks {tuple(layers)}, groups {groups}x{width_per_group})"
        self.head = nn.Linear(self.d, K)
        self._init_weights(zero_init_residual)
        if head is not None:
            self.head = head

    def _make_layer(self, planes: int, blocks: int, stride: int, last_out: int | None = None) -> nn.Sequential:
        """torchvision's ``_make_layer``; ``last_out`` sets the output width of the stage's last block."""
        mods = []
        natural = planes * self._block.expansion
        for b in range(blocks):
            out = last_out if (last_out is not None and b == blocks - 1) else natural
            s = stride if b == 0 else 1
            downsample = None
            if s != 1 or self._inplanes != out:  # torchvision's rule, which also adapts a bottlenecked last block
                downsample = nn.Sequential(_conv1x1(self._inplanes, out, s), nn.BatchNorm2d(out))
            block = self._block(self._inplanes, planes, s, downsample, self.groups, self.base_width, out_planes=out)
            mods.append(block)
            self._inplanes = out
        return nn.Sequential(*mods)

    def _init_weights(self, zero_init_residual: bool) -> None:
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
        if zero_init_residual:
            for m in self.modules():
                if isinstance(m, BasicBlock | Bottleneck):
                    nn.init.zeros_(m.last_bn.weight)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        x = self.avgpool(x)
        return x if self.bottleneck is None else self.bottleneck(x)

    def _layers(self) -> list[tuple[str, nn.Module]]:
        out: list[tuple[str, nn.Module]] = [("stem", self.maxpool)]
        for s in range(1, 5):
            out += [(f"layer{s}.{b}", blk) for b, blk in enumerate(getattr(self, f"layer{s}"))]
        out.append(("pool", self.avgpool))
        if self.bottleneck is not None:
            out.append(("bottleneck", self.bottleneck))
        return out


class ResNet18(ResNet):
    """torchvision's ``resnet18``: basic blocks ``(2, 2, 2, 2)``; 11,689,512 parameters at 1,000 classes
    (``variant="imagenet"``), 11,681,832 with the small-image stem. See :class:`ResNet` for the options.

    Parameters
    ----------
    input_shape : sequence of int
        Image shape ``(C, H, W)``.
    K : int
        Number of classes.
    variant, width, zero_init_residual, d, feature_layer
        As in :class:`ResNet`.
    head : nn.Module, optional
        Classifier on the ``(B, d)`` features (default: a linear layer ``d -> K``).

    Examples
    --------
    The small-image stem at 1,000 classes (the ImageNet stem's count is in :func:`build_model`):

    >>> from nclab.nets import ResNet18
    >>> net = ResNet18((3, 32, 32), 1000)
    >>> sum(p.numel() for p in net.parameters()), net.d, net.conv1.kernel_size
    (11681832, 512, (3, 3))
    """

    def __init__(
        self,
        input_shape: Sequence[int],
        K: int,
        *,
        variant: Variant = "auto",
        width: int = 64,
        zero_init_residual: bool = False,
        d: int | None = None,
        feature_layer: FeatureLayer = "linear",
        head: nn.Module | None = None,
    ) -> None:
        super().__init__(
            input_shape, K, "basic", (2, 2, 2, 2), variant=variant, width=width,
            zero_init_residual=zero_init_residual, d=d, feature_layer=feature_layer, head=head,
        )  # fmt: skip
        self.reference = "torchvision.models.resnet18"


class ResNet34(ResNet):
    """torchvision's ``resnet34``: basic blocks ``(3, 4, 6, 3)``; 21,797,672 parameters at 1,000 classes
    (``variant="imagenet"``). See :class:`ResNet` for the options.

    Parameters
    ----------
    input_shape : sequence of int
        Image shape ``(C, H, W)``.
    K : int
        Number of classes.
    variant, width, zero_init_residual, d, feature_layer
        As in :class:`ResNet`.
    head : nn.Module, optional
        Classifier on the ``(B, d)`` features (default: a linear layer ``d -> K``).

    Examples
    --------
    >>> from nclab.nets import ResNet34
    >>> net = ResNet34((3, 32, 32), 10, width=4)
    >>> sum(p.numel() for p in net.parameters()), net.d, len(net.measured_layers())  # stem, 16 blocks, pool
    (84542, 32, 18)
    """

    def __init__(
        self,
        input_shape: Sequence[int],
        K: int,
        *,
        variant: Variant = "auto",
        width: int = 64,
        zero_init_residual: bool = False,
        d: int | None = None,
        feature_layer: FeatureLayer = "linear",
        head: nn.Module | None = None,
    ) -> None:
        super().__init__(
            input_shape, K, "basic", (3, 4, 6, 3), variant=variant, width=width,
            zero_init_residual=zero_init_residual, d=d, feature_layer=feature_layer, head=head,
        )  # fmt: skip
        self.reference = "torchvision.models.resnet34"


class ResNet50(ResNet):
    """torchvision's ``resnet50``: bottleneck blocks ``(3, 4, 6, 3)``, d = 2048; 25,557,032 parameters at 1,000
    classes (``variant="imagenet"``). See :class:`ResNet` for the options.

    Parameters
    ----------
    input_shape : sequence of int
        Image shape ``(C, H, W)``.
    K : int
        Number of classes.
    variant, width, zero_init_residual, d, feature_layer
        As in :class:`ResNet`.
    head : nn.Module, optional
        Classifier on the ``(B, d)`` features (default: a linear layer ``d -> K``).

    Examples
    --------
    >>> from nclab.nets import ResNet50
    >>> net = ResNet50((3, 32, 32), 10, width=4)
    >>> sum(p.numel() for p in net.parameters()), net.d  # d = 4 * 8 * 4 (bottleneck expansion 4)
    (96302, 128)
    """

    def __init__(
        self,
        input_shape: Sequence[int],
        K: int,
        *,
        variant: Variant = "auto",
        width: int = 64,
        zero_init_residual: bool = False,
        d: int | None = None,
        feature_layer: FeatureLayer = "linear",
        head: nn.Module | None = None,
    ) -> None:
        super().__init__(
            input_shape, K, "bottleneck", (3, 4, 6, 3), variant=variant, width=width,
            zero_init_residual=zero_init_residual, d=d, feature_layer=feature_layer, head=head,
        )  # fmt: skip
        self.reference = "torchvision.models.resnet50"


class ResNeXt50_32x4d(ResNet):
    """torchvision's ``resnext50_32x4d`` [Xie et al. 2017]: bottleneck blocks ``(3, 4, 6, 3)`` with 32 groups of
    width 4 (at ``width=64``), d = 2048; 25,028,904 parameters at 1,000 classes (``variant="imagenet"``). ``width``
    must keep ``int(width * 4 / 64) >= 1`` (``width >= 16``). See :class:`ResNet` for the options.

    Parameters
    ----------
    input_shape : sequence of int
        Image shape ``(C, H, W)``.
    K : int
        Number of classes.
    variant, width, zero_init_residual, d, feature_layer
        As in :class:`ResNet`.
    head : nn.Module, optional
        Classifier on the ``(B, d)`` features (default: a linear layer ``d -> K``).

    Examples
    --------
    >>> from nclab.nets import ResNeXt50_32x4d
    >>> net = ResNeXt50_32x4d((3, 32, 32), 10, width=16)
    >>> sum(p.numel() for p in net.parameters()), net.d
    (1454010, 512)
    """

    def __init__(
        self,
        input_shape: Sequence[int],
        K: int,
        *,
        variant: Variant = "auto",
        width: int = 64,
        zero_init_residual: bool = False,
        d: int | None = None,
        feature_layer: FeatureLayer = "linear",
        head: nn.Module | None = None,
    ) -> None:
        super().__init__(
            input_shape, K, "bottleneck", (3, 4, 6, 3), variant=variant, width=width, groups=32,
            width_per_group=4, zero_init_residual=zero_init_residual, d=d,
            feature_layer=feature_layer, head=head,
        )  # fmt: skip
        self.reference = "torchvision.models.resnext50_32x4d"
