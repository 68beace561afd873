"""The network's loss and error over a measurement pass, as an accumulator: :class:`PassCounts`.

The counts are plain sums, so they would need no class of their own in a single process. Declaring them as
:class:`~nclab.stats.Accumulator` states makes them reduce over ``torch.distributed`` ranks through the same
protocol (and on the same device, whatever the backend) as every statistic of the pass, and gives them merge,
``state_dict`` and the consistency checks on load for free.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from nclab.stats import Accumulator

__all__ = ["PassCounts"]


class PassCounts(Accumulator):
    """Loss and error counts of one pass over a split: sums over its batches.

    States (0-d): ``loss_sum`` (float64, ``sum_batches loss_batch * n_batch``: the loss is a batch mean),
    ``wrong`` and ``scored`` (int64: misclassified samples, and samples whose outputs were logits ``(n, K)``),
    ``seen`` (int64: every sample). The counts stay on the device of the first batch (or ``device``), so adding a
    batch never waits for the accelerator; they are read once, at the end of the pass.

    Parameters
    ----------
    device : str or torch.device, optional
        Where the counts live (default: the labels' device at the first :meth:`update`). Give the model's device
        under NCCL, so that a rank without a batch still all-reduces on the accelerator.

    Examples
    --------
    >>> c = PassCounts()
    >>> logits = torch.tensor([[2.0, 0.0], [0.0, 1.0], [3.0, 0.0]])
    >>> c.update(logits, torch.tensor([0, 1, 1]), loss=torch.tensor(0.5)).error, c.loss
    (0.3333333333333333, 0.5)
    """

    def __init__(self, device: str | torch.device | None = None) -> None:
        super().__init__(device)
        self.add_state("loss_sum", ())
        self.add_state("wrong", (), torch.int64, nonnegative=True)
        self.add_state("scored", (), torch.int64, nonnegative=True)
        self.add_state("seen", (), torch.int64, nonnegative=True)

    def update(self, out: torch.Tensor | None, y: torch.Tensor, loss: Any = None) -> PassCounts:
        """Add one batch: labels ``y (n,)``; ``out`` the network's outputs (counted as logits when they are
        ``(n, K)``, ``None`` when they are not per-sample logits); ``loss`` its mean loss (a 0-d tensor or a
        number), or ``None``. Returns ``self``."""
        if self._state is None:
            self._allocate(self._device or y.device)
        st = self._state
        assert st is not None
        n = int(y.shape[0])
        st["seen"] += n
        if isinstance(out, torch.Tensor) and out.ndim == 2 and out.shape[0] == n:
            st["wrong"] += (out.argmax(dim=1) != y).sum().to(st["wrong"].device)
            st["scored"] += n
        if loss is not None:  # float64 products and sums: the same digits as Python floats would give
            st["loss_sum"] += torch.as_tensor(loss).detach().to(st["loss_sum"].device, torch.float64) * n
        return self

    def _total(self, name: str) -> Any:
        return 0 if self._state is None else self._state[name].item()

    @property
    def seen(self) -> int:
        """Samples counted."""
        return int(self._total("seen"))

    @property
    def scored(self) -> int:
        """Samples whose outputs were logits (the error's denominator)."""
        return int(self._total("scored"))

    @property
    def error(self) -> float:
        """``wrong / scored``; NaN when no output was a logit row."""
        scored = self.scored
        return int(self._total("wrong")) / scored if scored else math.nan

    @property
    def loss(self) -> float:
        """``loss_sum / seen``, the mean loss per sample; NaN before the first sample."""
        seen = self.seen
        return float(self._total("loss_sum")) / seen if seen else math.nan

    def _config(self) -> dict[str, Any]:
        return {}

    @classmethod
    def _from_config(
        cls, config: Mapping[str, Any], buffers: Mapping[str, np.ndarray], device: torch.device | None
    ) -> PassCounts:
        return cls(device)

    def _check_consistency(self, sd: Mapping[str, Any]) -> None:
        st = sd["state"]
        if st is None:
            return
        wrong, scored, seen = (int(np.asarray(st[k])) for k in ("wrong", "scored", "seen"))
        if not wrong <= scored <= seen:
            raise ValueError(f"state is inconsistent: need wrong <= scored <= seen, got {wrong}, {scored}, {seen}")
