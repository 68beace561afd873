"""The interface every nclab network implements: a feature extractor, a classifier head, and named layers to
measure.

``forward(x) = head(features(x))``; ``features(x)`` is the penultimate representation ``(B, d)`` (the input of
the classifier, where [Xu & Liu 2023; Han et al. 2022] measure collapse); ``measured_layers()`` is an ordered dict
``name -> module`` whose **outputs** are measured (flattened to ``(B, d_l)``), from the input side to the
penultimate layer, which is always its last entry (``penultimate_name``).
"""

from __future__ import annotations

from collections import OrderedDict

import torch
from torch import nn

__all__ = ["CollapseNet", "Residual"]


class CollapseNet(nn.Module):
    """Base class: subclasses set ``self.head`` and implement :meth:`features` and :meth:`_layers`."""

    head: nn.Module
    num_classes: int
    feature_dim: int

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
        """The module whose output is the classifier input ``(B, feature_dim)``."""
        return self.measured_layers()[self.penultimate_name]

    @property
    def classifier_weight(self) -> torch.Tensor:
        """``W (K, d)`` of the head (rows = classes)."""
        return self.head.weight

    @property
    def classifier_bias(self) -> torch.Tensor | None:
        return getattr(self.head, "bias", None)


class Residual(nn.Module):
    """``x + v(x)`` with the residual branch ``self.v`` set by the subclass; nothing after the sum, so the block is
    exactly the identity plus its residual (the [Wang et al. 2024] ``x^(l+1) = x^(l) + v_l(x^(l))``)."""

    v: nn.Module

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.v(x)
