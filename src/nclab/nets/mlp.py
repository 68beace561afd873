"""Fully connected networks: the plain MLP and the fully connected ResNet of [Wang et al. 2024]."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

from nclab.nets.base import CollapseNet, Residual

__all__ = ["MLP", "FCResNet"]


def _act(name: str) -> nn.Module:
    acts = {"relu": nn.ReLU, "tanh": nn.Tanh, "gelu": nn.GELU}
    if name not in acts:
        raise ValueError(f"unknown activation {name!r}; known: {sorted(acts)}")
    return acts[name]()


class MLP(CollapseNet):
    """``x -> flatten -> [Linear -> (BatchNorm) -> act] x L -> head``. Measured layers ``layer1..layerL``
    (post-activation outputs); ``layerL`` is the penultimate layer (``d = widths[-1]``).

    Parameters
    ----------
    input_shape : sequence of int
        Shape of one input; it is flattened to ``D = prod(input_shape)``.
    K : int
        Number of classes.
    widths : sequence of int, default=(256, 256, 256)
        Widths of the hidden layers, one per layer.
    batchnorm : bool, default=False
        A ``BatchNorm1d`` after each linear layer.
    activation : {"relu", "tanh", "gelu"}, default="relu"
        Activation.
    head : nn.Module, optional
        Classifier on the ``(B, d)`` features (default: a linear layer ``d -> K``).

    Examples
    --------
    ``(16 * 8 + 8) + (8 * 8 + 8) + (8 * 3 + 3) = 235`` parameters:

    >>> import torch
    >>> from nclab.nets import MLP
    >>> net = MLP((1, 4, 4), 3, widths=(8, 8))
    >>> n_params = sum(p.numel() for p in net.parameters())
    >>> n_params, list(net.measured_layers()), tuple(net(torch.zeros(2, 1, 4, 4)).shape)
    (235, ['layer1', 'layer2'], (2, 3))
    """

    def __init__(
        self,
        input_shape: Sequence[int],
        K: int,
        widths: Sequence[int] = (256, 256, 256),
        *,
        batchnorm: bool = False,
        activation: str = "relu",
        head: nn.Module | None = None,
    ) -> None:
        super().__init__()
        if not widths:
            raise ValueError("an MLP needs at least one hidden layer (widths is empty)")
        self.K, self.d = int(K), int(widths[-1])
        d_in = int(math.prod(input_shape))
        blocks = []
        for w in widths:
            mods: list[nn.Module] = [nn.Linear(d_in, int(w))]
            if batchnorm:
                mods.append(nn.BatchNorm1d(int(w)))
            mods.append(_act(activation))
            blocks.append(nn.Sequential(*mods))
            d_in = int(w)
        self.blocks = nn.ModuleList(blocks)
        self.head = head if head is not None else nn.Linear(self.d, K)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        x = x.flatten(1)
        for b in self.blocks:
            x = b(x)
        return x

    def _layers(self) -> list[tuple[str, nn.Module]]:
        return [(f"layer{i + 1}", b) for i, b in enumerate(self.blocks)]


class _FCBlock(Residual):
    """``x + v(x)``: ``v = act(W x)`` (``"single"``, the form of the [Wang et al. 2024] theory, Thm 1) or
    ``Linear -> (BN) -> act -> Linear`` (``"double"``)."""

    def __init__(self, width: int, kind: str, activation: str, batchnorm: bool) -> None:
        super().__init__()
        if kind == "single":
            mods: list[nn.Module] = [nn.Linear(width, width)]
            if batchnorm:
                mods.append(nn.BatchNorm1d(width))
            mods.append(_act(activation))
        elif kind == "double":
            mods = [nn.Linear(width, width)]
            if batchnorm:
                mods.append(nn.BatchNorm1d(width))
            mods += [_act(activation), nn.Linear(width, width)]
        else:
            raise ValueError(f"block must be 'single' or 'double', got {kind!r}")
        self.v = nn.Sequential(*mods)


class FCResNet(CollapseNet):
    """The fully connected ResNet of [Wang et al. 2024] (MNIST row of Table I: width 1000, 10 blocks): an input
    embedding ``D -> d`` (Linear + act, measured as ``layer0``) then ``L`` residual blocks
    ``x^(l+1) = x^(l) + v_l(x^(l))`` of constant width ``d`` (measured as ``layer1..layerL``; ``layerL`` is
    the penultimate layer). All measured layers have the same dimension, as the PFC analysis needs.

    Parameters
    ----------
    input_shape : sequence of int
        Shape of one input; it is flattened to ``D = prod(input_shape)``.
    K : int
        Number of classes.
    width : int, default=1000
        Width ``d`` of the embedding and of every block.
    num_blocks : int, default=10
        Number of residual blocks ``L``.
    block : {"single", "double"}, default="single"
        Residual branch ``v_l``: one linear layer and activation, or two linear layers with an activation between.
    activation : {"relu", "tanh", "gelu"}, default="relu"
        Activation.
    batchnorm : bool, default=False
        A ``BatchNorm1d`` in each branch.
    head : nn.Module, optional
        Classifier on the ``(B, d)`` features (default: a linear layer ``d -> K``).

    Examples
    --------
    Embedding ``16 * 8 + 8``, two single-layer blocks ``2 (8 * 8 + 8)``, head ``8 * 3 + 3``: 307 parameters.

    >>> import torch
    >>> from nclab.nets import FCResNet
    >>> net = FCResNet((1, 4, 4), 3, width=8, num_blocks=2)
    >>> n_params = sum(p.numel() for p in net.parameters())
    >>> n_params, list(net.measured_layers()), tuple(net.features(torch.zeros(2, 1, 4, 4)).shape)
    (307, ['layer0', 'layer1', 'layer2'], (2, 8))
    """

    def __init__(
        self,
        input_shape: Sequence[int],
        K: int,
        width: int = 1000,
        num_blocks: int = 10,
        *,
        block: str = "single",
        activation: str = "relu",
        batchnorm: bool = False,
        head: nn.Module | None = None,
    ) -> None:
        super().__init__()
        if num_blocks < 1:
            raise ValueError(f"num_blocks must be >= 1, got {num_blocks}")
        self.K, self.d = int(K), int(width)
        self.embed = nn.Sequential(nn.Linear(int(math.prod(input_shape)), width), _act(activation))
        self.blocks = nn.ModuleList(_FCBlock(width, block, activation, batchnorm) for _ in range(num_blocks))
        self.head = head if head is not None else nn.Linear(width, K)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        x = self.embed(x.flatten(1))
        for b in self.blocks:
            x = b(x)
        return x

    def _layers(self) -> list[tuple[str, nn.Module]]:
        return [("layer0", self.embed)] + [(f"layer{i + 1}", b) for i, b in enumerate(self.blocks)]
