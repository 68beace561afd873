"""The convolutional ResNet family of [Wang et al. 2024] (Table I): stages of residual blocks whose last stage is
measured.

Each stage is a *transition* (3x3 convolution with stride 1 or 2 -> BN -> ReLU, changing the channel count and
halving the side) followed by ``n`` residual blocks ``x -> x + v(x)`` that keep the shape ``C x H x W``. The
transitions live outside the blocks, so every measured block maps ``R^d -> R^d`` (``d = C H W``) and
``x^(l+1) = x^(l) + v_l(x^(l))`` holds exactly, as the geodesic analysis of [Wang et al. 2024] needs [Wang et al. 2024].
Measured ([Wang et al. 2024], [inferred] there): ``layer0`` = the input of the last stage's first block (the
output of its transition) and ``layer1..layerL`` = its blocks' outputs, flattened ``C x H x W`` (not pooled);
with ``pool=True`` a global average pool follows and is measured as ``pool`` (the classifier input).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import torch
from torch import nn

from nclab.nets.base import CollapseNet, Residual

__all__ = ["TABLE_I", "PFCResNet"]

#: [Wang et al. 2024, Table I]: per dataset, the stages ``(channels, side, blocks)``; the last stage is
#: the measured one (d = 3136 / 4096 / 18432 / 8192). The MNIST row is the fully connected ``FCResNet``.
TABLE_I: dict[str, tuple[tuple[int, int, int], ...]] = {
    "fashion-mnist": ((32, 14, 5), (64, 7, 4)),
    "cifar10": ((64, 16, 2), (128, 8, 3), (256, 4, 4)),
    "stl10": ((64, 48, 5), (128, 24, 5), (256, 12, 5), (512, 6, 5)),
    "cifar100": ((64, 32, 3), (128, 16, 3), (256, 8, 4), (512, 4, 4)),
}


class _Transition(nn.Sequential):
    def __init__(self, c_in: int, c_out: int, stride: int) -> None:
        super().__init__(
            nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU()
        )


class _ResBlock(Residual):
    """``x + v(x)`` with ``v`` a basic block: pre-activation ``BN-ReLU-conv-BN-ReLU-conv`` (default) or
    post-activation ``conv-BN-ReLU-conv-BN``; no activation after the sum in either form, so the block is exactly
    the identity plus its residual."""

    def __init__(self, c: int, kind: str) -> None:
        super().__init__()
        conv = lambda: nn.Conv2d(c, c, 3, padding=1, bias=False)  # noqa: E731
        if kind == "preact":
            mods = [nn.BatchNorm2d(c), nn.ReLU(), conv(), nn.BatchNorm2d(c), nn.ReLU(), conv()]
        elif kind == "post":
            mods = [conv(), nn.BatchNorm2d(c), nn.ReLU(), conv(), nn.BatchNorm2d(c)]
        else:
            raise ValueError(f"block must be 'preact' or 'post', got {kind!r}")
        self.v = nn.Sequential(*mods)


class PFCResNet(CollapseNet):
    """The [Wang et al. 2024] conv ResNet: ``stages`` of ``(channels, side, blocks)`` (or ``table=`` a :data:`TABLE_I`
    row).

    ``input_shape`` ``(C, H, W)`` with ``H = W``; each stage's side must be its input side or half of it (one
    stride-1 or stride-2 transition). ``block``: ``"preact"`` (default) or ``"post"``. ``pool=False`` (default,
    as Table I's measured dims): the head reads the flattened ``C x H x W`` map of the last block, which is then
    the penultimate layer; ``pool=True``: a global average pool first (``d = C``).

    Parameters
    ----------
    input_shape : sequence of int
        Image shape ``(C, H, W)``, ``H = W``.
    K : int
        Number of classes.
    stages : sequence of (int, int, int), optional
        ``(channels, side, blocks)`` per stage; give ``stages`` or ``table``.
    table : str, optional
        A row of :data:`TABLE_I` (``"fashion-mnist"``, ``"cifar10"``, ``"stl10"``, ``"cifar100"``).
    block : {"preact", "post"}, default="preact"
        Residual block type.
    pool : bool, default=False
        Global average pool before the head (``d = C``), else the flattened map (``d = C H W``).
    head : nn.Module, optional
        Classifier on the ``(B, d)`` features (default: a linear layer ``d -> K``).

    Examples
    --------
    Two stages, the last ``8`` channels on a ``4 x 4`` map: ``d = 8 * 4 * 4 = 128``.

    >>> import torch
    >>> from nclab.nets import PFCResNet
    >>> net = PFCResNet((1, 8, 8), 3, stages=[(4, 8, 1), (8, 4, 1)])
    >>> list(net.measured_layers()), tuple(net.features(torch.zeros(2, 1, 8, 8)).shape)
    (['layer0', 'layer1'], (2, 128))
    """

    def __init__(
        self,
        input_shape: Sequence[int],
        K: int,
        stages: Sequence[Sequence[int]] | None = None,
        *,
        table: str | None = None,
        block: str = "preact",
        pool: bool = False,
        head: nn.Module | None = None,
    ) -> None:
        super().__init__()
        if (stages is None) == (table is None):
            raise ValueError(f"give exactly one of stages or table (one of {', '.join(TABLE_I)})")
        if table is not None:
            if table not in TABLE_I:
                raise ValueError(f"unknown table row {table!r}; known: {', '.join(TABLE_I)}")
            stages = TABLE_I[table]
        assert stages is not None
        c, h, w = (int(s) for s in input_shape)
        if h != w:
            raise ValueError(f"PFCResNet needs square inputs, got {h}x{w}")
        transitions, groups = [], []
        for i, stage in enumerate(stages):
            if len(stage) != 3 or min(int(v) for v in stage) < 1:
                raise ValueError(f"stage {i} must be (channels, side, blocks) of positive ints, got {tuple(stage)}")
            ch, side, n = (int(v) for v in stage)
            stride = 1 if side == h else 2
            if (h - 1) // stride + 1 != side:
                raise ValueError(
                    f"stage {i}: side {side} is neither the input side {h} nor its half ({(h - 1) // 2 + 1})"
                )
            transitions.append(_Transition(c, ch, stride))
            groups.append(nn.ModuleList(_ResBlock(ch, block) for _ in range(n)))
            c, h = ch, side
        self.transitions = nn.ModuleList(transitions)
        self.stages = nn.ModuleList(groups)
        self.pool = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(1)) if pool else None
        self.flatten = nn.Flatten(1)
        self.K = int(K)
        self.d = c if pool else c * h * h
        self.measured_dim = c * h * h
        self.head = head if head is not None else nn.Linear(self.d, K)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        for transition, blocks in zip(self.transitions, self.stages, strict=True):
            x = transition(x)
            for b in cast(nn.ModuleList, blocks):  # a ModuleList of ModuleLists (torch types items as Module)
                x = b(x)
        return self.pool(x) if self.pool is not None else self.flatten(x)

    def _layers(self) -> list[tuple[str, nn.Module]]:
        last = len(self.stages) - 1
        out = [("layer0", self.transitions[last])]
        out += [(f"layer{i + 1}", b) for i, b in enumerate(cast(nn.ModuleList, self.stages[last]))]
        if self.pool is not None:
            out.append(("pool", self.pool))
        return out
