"""VGG-11 / VGG-13, with and without batch norm, as torchvision builds them ([Simonyan & Zisserman 2015]
configurations A and B, [vision (pytorch)] ``torchvision/models/vgg.py``), with torchvision's modules under the same
names, except two that nclab's network protocol reserves: the convolutions torchvision calls ``features`` are
``body`` (``features(x)`` is the penultimate representation of every nclab network) and the classifier
torchvision calls ``classifier.6`` is ``head``; :func:`nclab.nets.reference_key_map` renames both
(``body.N`` <-> ``features.N``, ``head`` <-> ``classifier.6``), ``classifier.0`` / ``classifier.3`` keep their names.

``variant`` (:data:`nclab.nets.base.Variant`): ``"imagenet"`` is torchvision's network: the convolutional
``features``, a 7x7 adaptive average pool and the ``4096 -> 4096`` classifier (Linear-ReLU-Dropout twice) before
the head; ``"cifar"`` replaces the pool and classifier by a global average pool and the head alone (d = 512), the
small-image VGG of [Han et al. 2022] (whose VGG head [Han et al. 2022, App. A.2] leaves unspecified); ``"auto"``
(default) picks ``"cifar"`` for inputs whose smaller side is at most 64 pixels. A max-pool whose input is already
1 pixel on a side is an ``nn.Identity`` (torchvision would fail on such small inputs); the indices of
``body`` stay torchvision's. Initialisation as torchvision: convolutions ``kaiming_normal_(mode="fan_out",
nonlinearity="relu")`` with zero bias, batch norms weight 1 and bias 0, every linear layer (the head included)
``normal_(0, 0.01)`` with zero bias.

Measured layers: ``stage1..stage5`` (the output of each max-pool), then ``fc1`` and ``fc2`` (the two 4096-wide
hidden layers, after ReLU and dropout; ``fc2`` is the classifier input) for ``"imagenet"``, or ``pool`` (global
average pool, the classifier input) for ``"cifar"``; then ``bottleneck`` when ``d`` is set.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from nclab.nets.base import CollapseNet, FeatureLayer, Variant, check_feature_bottleneck, resolve_variant
from nclab.nets.convnets import GlobalPool

__all__ = ["VGG", "VGG11", "VGG11BN", "VGG13", "VGG13BN", "VGG_CONFIGS"]

#: torchvision's ``cfgs``: output channels of each 3x3 convolution, ``"M"`` a 2x2 max-pool.
VGG_CONFIGS: dict[str, tuple[int | str, ...]] = {
    "A": (64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"),
    "B": (64, 64, "M", 128, 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"),
}


class VGG(CollapseNet):
    """torchvision's ``VGG`` (see the module docstring) on ``input_shape = (C, H, W)``.

    Parameters
    ----------
    input_shape : sequence of int
        Image shape ``(C, H, W)``.
    K : int
        Number of classes.
    head : nn.Module, optional
        Classifier on the ``(B, d)`` features (default: a linear layer ``d -> K``).
    config : {"A", "B"}
        VGG-11 or VGG-13 (:data:`VGG_CONFIGS`).
    batch_norm : bool
        A ``BatchNorm2d`` after every convolution (torchvision's ``vgg11_bn``; the convolutions keep their bias).
    variant : {"auto", "imagenet", "cifar"}
        The classifier part (module docstring).
    width : int
        Channels of the first convolution (64 in the reference); every channel count scales by ``width / 64``.
    hidden : int
        Width of the two hidden linear layers of the ``"imagenet"`` classifier (4096 in the reference).
    dropout : float
        Dropout probability of the ``"imagenet"`` classifier (0.5 in the reference).
    d, feature_layer
        An inserted linear layer of width ``d`` before the head (``feature_layer="linear"``, the only
        one a VGG has).

    Examples
    --------
    >>> import torch
    >>> from nclab.nets import VGG
    >>> net = VGG((3, 32, 32), 10, "A", width=8)
    >>> list(net.measured_layers()), tuple(net(torch.zeros(2, 3, 32, 32)).shape)
    (['stage1', 'stage2', 'stage3', 'stage4', 'stage5', 'pool'], (2, 10))
    """

    def __init__(
        self,
        input_shape: Sequence[int],
        K: int,
        config: str = "A",
        *,
        batch_norm: bool = False,
        variant: Variant = "auto",
        width: int = 64,
        hidden: int = 4096,
        dropout: float = 0.5,
        d: int | None = None,
        feature_layer: FeatureLayer = "linear",
        head: nn.Module | None = None,
    ) -> None:
        super().__init__()
        if config not in VGG_CONFIGS:
            raise ValueError(f"config must be one of {', '.join(VGG_CONFIGS)}, got {config!r}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        d = check_feature_bottleneck(d, feature_layer, ("linear",), model="VGG")
        self.variant = resolve_variant(variant, input_shape)
        c, side = int(input_shape[0]), min(int(s) for s in input_shape[1:])
        mods: list[nn.Module] = []
        self._stage_ends: list[int] = []
        for item in VGG_CONFIGS[config]:
            if item == "M":
                mods.append(nn.MaxPool2d(2, stride=2) if side >= 2 else nn.Identity())
                side = side // 2 if side >= 2 else side
                self._stage_ends.append(len(mods) - 1)
                continue
            ch = int(item) * width // 64
            mods += [
                nn.Conv2d(c, ch, 3, padding=1),
                *([nn.BatchNorm2d(ch)] if batch_norm else []),
                nn.ReLU(inplace=True),
            ]
            c = ch
        self.body = nn.Sequential(*mods)
        if self.variant == "imagenet":
            self.avgpool: nn.Module = nn.Sequential(nn.AdaptiveAvgPool2d((7, 7)), nn.Flatten(1))
            self.classifier: nn.Sequential | None = nn.Sequential(
                nn.Linear(c * 7 * 7, hidden), nn.ReLU(True), nn.Dropout(dropout),
                nn.Linear(hidden, hidden), nn.ReLU(True), nn.Dropout(dropout),
            )  # fmt: skip
            c = hidden
            self.reference_renames = (("body.", "features."), ("head.", "classifier.6."))
            self.reference = f"torchvision.models.vgg{11 if config == 'A' else 13}{'_bn' if batch_norm else ''}"
        else:
            self.avgpool, self.classifier = GlobalPool(), None
            self.reference_renames = (("body.", "features."),)
        self.bottleneck = nn.Linear(c, d) if d is not None else None
        self.K, self.d = int(K), (c if d is None else int(d))
        self.head = nn.Linear(self.d, K)
        self._init_weights()
        if head is not None:
            self.head = head

    def _init_weights(self) -> None:
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                self.init_linear(m)

    def init_linear(self, module: nn.Linear) -> None:
        """torchvision's VGG linear init: ``weight ~ N(0, 0.01^2)``, zero bias."""
        nn.init.normal_(module.weight, 0.0, 0.01)
        if module.bias is not None:
            nn.init.zeros_(module.bias)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        x = self.avgpool(self.body(x))
        if self.classifier is not None:
            x = self.classifier(x)
        return x if self.bottleneck is None else self.bottleneck(x)

    def _layers(self) -> list[tuple[str, nn.Module]]:
        out: list[tuple[str, nn.Module]] = [(f"stage{i + 1}", self.body[j]) for i, j in enumerate(self._stage_ends)]
        if self.classifier is not None:
            out += [("fc1", self.classifier[2]), ("fc2", self.classifier)]
        else:
            out.append(("pool", self.avgpool))
        if self.bottleneck is not None:
            out.append(("bottleneck", self.bottleneck))
        return out


class VGG11(VGG):
    """torchvision's ``vgg11`` (configuration A, no batch norm); 132,863,336 parameters at 1,000 classes
    (``variant="imagenet"``). See :class:`VGG` for the options.

    Parameters
    ----------
    input_shape : sequence of int
        Image shape ``(C, H, W)``.
    K : int
        Number of classes.
    variant, width, hidden, dropout, d, feature_layer
        As in :class:`VGG`.
    head : nn.Module, optional
        Classifier on the ``(B, d)`` features (default: a linear layer ``d -> K``).

    Examples
    --------
    A narrow copy (``width=8``) on 32 x 32 images:

    >>> from nclab.nets import VGG11
    >>> net = VGG11((3, 32, 32), 10, width=8)
    >>> n_params = sum(p.numel() for p in net.parameters())
    >>> n_params, net.d, net.penultimate_name
    (145210, 64, 'pool')
    """

    def __init__(
        self,
        input_shape: Sequence[int],
        K: int,
        *,
        variant: Variant = "auto",
        width: int = 64,
        hidden: int = 4096,
        dropout: float = 0.5,
        d: int | None = None,
        feature_layer: FeatureLayer = "linear",
        head: nn.Module | None = None,
    ) -> None:
        super().__init__(
            input_shape, K, "A", batch_norm=False, variant=variant, width=width, hidden=hidden,
            dropout=dropout, d=d, feature_layer=feature_layer, head=head,
        )  # fmt: skip


class VGG11BN(VGG):
    """torchvision's ``vgg11_bn`` (configuration A with batch norm); 132,868,840 parameters at 1,000 classes
    (``variant="imagenet"``). See :class:`VGG` for the options.

    Parameters
    ----------
    input_shape : sequence of int
        Image shape ``(C, H, W)``.
    K : int
        Number of classes.
    variant, width, hidden, dropout, d, feature_layer
        As in :class:`VGG`.
    head : nn.Module, optional
        Classifier on the ``(B, d)`` features (default: a linear layer ``d -> K``).

    Examples
    --------
    A narrow copy (``width=8``) on 32 x 32 images:

    >>> from nclab.nets import VGG11BN
    >>> net = VGG11BN((3, 32, 32), 10, width=8)
    >>> n_params = sum(p.numel() for p in net.parameters())
    >>> n_params, net.d, net.penultimate_name
    (145898, 64, 'pool')
    """

    def __init__(
        self,
        input_shape: Sequence[int],
        K: int,
        *,
        variant: Variant = "auto",
        width: int = 64,
        hidden: int = 4096,
        dropout: float = 0.5,
        d: int | None = None,
        feature_layer: FeatureLayer = "linear",
        head: nn.Module | None = None,
    ) -> None:
        super().__init__(
            input_shape, K, "A", batch_norm=True, variant=variant, width=width, hidden=hidden,
            dropout=dropout, d=d, feature_layer=feature_layer, head=head,
        )  # fmt: skip


class VGG13(VGG):
    """torchvision's ``vgg13`` (configuration B, no batch norm); 133,047,848 parameters at 1,000 classes
    (``variant="imagenet"``). See :class:`VGG` for the options.

    Parameters
    ----------
    input_shape : sequence of int
        Image shape ``(C, H, W)``.
    K : int
        Number of classes.
    variant, width, hidden, dropout, d, feature_layer
        As in :class:`VGG`.
    head : nn.Module, optional
        Classifier on the ``(B, d)`` features (default: a linear layer ``d -> K``).

    Examples
    --------
    A narrow copy (``width=8``) on 32 x 32 images:

    >>> from nclab.nets import VGG13
    >>> net = VGG13((3, 32, 32), 10, width=8)
    >>> n_params = sum(p.numel() for p in net.parameters())
    >>> n_params, net.d, net.penultimate_name
    (148114, 64, 'pool')
    """

    def __init__(
        self,
        input_shape: Sequence[int],
        K: int,
        *,
        variant: Variant = "auto",
        width: int = 64,
        hidden: int = 4096,
        dropout: float = 0.5,
        d: int | None = None,
        feature_layer: FeatureLayer = "linear",
        head: nn.Module | None = None,
    ) -> None:
        super().__init__(
            input_shape, K, "B", batch_norm=False, variant=variant, width=width, hidden=hidden,
            dropout=dropout, d=d, feature_layer=feature_layer, head=head,
        )  # fmt: skip


class VGG13BN(VGG):
    """torchvision's ``vgg13_bn`` (configuration B with batch norm); 133,053,736 parameters at 1,000 classes
    (``variant="imagenet"``). See :class:`VGG` for the options.

    Parameters
    ----------
    input_shape : sequence of int
        Image shape ``(C, H, W)``.
    K : int
        Number of classes.
    variant, width, hidden, dropout, d, feature_layer
        As in :class:`VGG`.
    head : nn.Module, optional
        Classifier on the ``(B, d)`` features (default: a linear layer ``d -> K``).

    Examples
    --------
    A narrow copy (``width=8``) on 32 x 32 images:

    >>> from nclab.nets import VGG13BN
    >>> net = VGG13BN((3, 32, 32), 10, width=8)
    >>> n_params = sum(p.numel() for p in net.parameters())
    >>> n_params, net.d, net.penultimate_name
    (148850, 64, 'pool')
    """

    def __init__(
        self,
        input_shape: Sequence[int],
        K: int,
        *,
        variant: Variant = "auto",
        width: int = 64,
        hidden: int = 4096,
        dropout: float = 0.5,
        d: int | None = None,
        feature_layer: FeatureLayer = "linear",
        head: nn.Module | None = None,
    ) -> None:
        super().__init__(
            input_shape, K, "B", batch_norm=True, variant=variant, width=width, hidden=hidden,
            dropout=dropout, d=d, feature_layer=feature_layer, head=head,
        )  # fmt: skip
