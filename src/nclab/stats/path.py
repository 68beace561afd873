"""Per-block transport sums over the measured layers ``h^0..h^L`` of the same samples [Wang et al. 2024, Sec. 2.4, 2.6].

:class:`PathStats` reads all measured layers of a batch and keeps, per block ``l``, the sums of the step norms
(relative depth, :func:`relative_depth`), of the squared step norms (kinetic energy) and the squared end-to-end
displacement (straightness). Every part is a plain ``"sum"`` state of the accumulator protocol
(:mod:`nclab.stats.accumulator`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from nclab.stats.accumulator import Accumulator
from nclab.stats.class_stats import to_tensor

__all__ = ["PathStats", "relative_depth"]


def relative_depth(step_norms: Any) -> np.ndarray:
    """Relative-depth coordinates of measured layers 0..L ([Wang et al. 2024, Sec. IV-A] / [Wang et al. 2024, Fig. 3]):

        t_l = sum_{j < l} s_j / sum_j s_j,    s_j = sum_i ||h^{j+1}_i - h^j_i||   (norms not squared)

    Parameters
    ----------
    step_norms : (L,) or (L, N) array
        Per-block sums ``s_j``, or per-sample step norms (summed over samples).

    Returns
    -------
    (L + 1,) array
        From 0 to 1; ``l / L`` for constant-speed straight lines.

    See Also
    --------
    PathStats.relative_depth : the same from streamed layers.

    Examples
    --------
    >>> relative_depth([1.0, 1.0, 2.0]).tolist()
    [0.0, 0.25, 0.5, 1.0]
    """
    s = np.asarray(step_norms, dtype=np.float64)
    if s.ndim == 2:
        s = s.sum(axis=1)
    if s.ndim != 1 or s.size == 0:
        raise ValueError(f"step_norms must be (L,) or (L, N) with L >= 1, got shape {np.shape(step_norms)}")
    if np.any(s < 0) or not np.all(np.isfinite(s)):
        raise ValueError("step norms must be finite and >= 0")
    total = s.sum()
    if total == 0:
        raise ValueError("no layer moves any sample (all step norms are 0): relative depth is undefined")
    return np.concatenate([[0.0], np.cumsum(s) / total])


class PathStats(Accumulator):
    """Per-block transport sums over the measured layers ``h^0..h^L`` [Wang et al. 2024, Sec. 2.4 and 2.6].

    ``update(layers)`` takes a sequence of ``L + 1`` arrays ``(B, d)`` (the same samples at every layer) and
    accumulates ``step_norm_sums[l] = sum_i ||h^{l+1}_i - h^l_i||`` (unsquared: relative depth),
    ``step_sq_sums[l] = sum_i ||h^{l+1}_i - h^l_i||^2`` (kinetic energy) and
    ``end_sq_sum = sum_i ||h^L_i - h^0_i||^2``.

    Parameters
    ----------
    num_layers : int
        ``L + 1 >= 2``, the number of measured layers.
    device : str or torch.device, optional
        Where to accumulate. Default: the device of the first layers passed to :meth:`update`.

    Examples
    --------
    Every sample moves on a straight line in equal steps ``(1, 1)``:

    >>> h = np.array([[0.0, 0.0], [1.0, 0.0], [5.0, 5.0]])
    >>> path = PathStats(3).update([h, h + 1.0, h + 2.0])
    >>> path.straightness_index(), path.kinetic_energy().tolist(), path.relative_depth().tolist()
    (1.0, [2.0, 2.0], [0.0, 0.5, 1.0])
    """

    def __init__(self, num_layers: int, *, device: str | torch.device | None = None) -> None:
        if isinstance(num_layers, bool) or not isinstance(num_layers, int | np.integer) or num_layers < 2:
            raise ValueError(f"need at least 2 measured layers (h^0 and h^L), got {num_layers!r}")
        self.num_layers = int(num_layers)
        super().__init__(device)
        L = self.num_layers - 1
        self.add_state("step_norm_sums", (L,), nonnegative=True)
        self.add_state("step_sq_sums", (L,), nonnegative=True)
        self.add_state("end_sq_sum", (), nonnegative=True)
        self.add_state("count", (), torch.int64, nonnegative=True)
        if self._device is not None:
            self._allocate(self._device)

    # ------------------------------------------------------------------ accumulator protocol
    def _config(self) -> dict[str, Any]:
        return {"num_layers": self.num_layers}

    def _check_consistency(self, sd: Mapping[str, Any]) -> None:
        """No samples: zero sums; ``(sum ||step||)^2 <= count * sum ||step||^2`` (Cauchy-Schwarz, relative 1e-6)."""
        st = sd["state"]
        if st is None:
            return
        n = int(st["count"])
        norms, squares = np.asarray(st["step_norm_sums"]), np.asarray(st["step_sq_sums"])
        if n == 0 and (norms.any() or squares.any() or float(st["end_sq_sum"]) != 0):
            raise ValueError("state is inconsistent: count is 0 but the sums are not")
        if (norms**2 > n * squares * (1 + 1e-6) + np.finfo(np.float64).tiny).any():
            raise ValueError("state is inconsistent: (sum of step norms)^2 > count * sum of squared steps")

    @classmethod
    def _from_config(
        cls, config: Mapping[str, Any], buffers: Mapping[str, np.ndarray], device: torch.device | None
    ) -> PathStats:
        return cls(int(config["num_layers"]), device=device)

    def update(self, layers: Sequence[Any]) -> PathStats:
        """Accumulate one batch: ``L + 1`` arrays ``(B, d)`` of the same samples (any float dtype/device)."""
        if len(layers) != self.num_layers:
            raise ValueError(f"expected {self.num_layers} layers, got {len(layers)}")
        hs = [to_tensor(h, f"layer {i}") for i, h in enumerate(layers)]
        shape = tuple(hs[0].shape)
        if len(shape) != 2 or any(tuple(h.shape) != shape for h in hs):
            raise ValueError(f"all layers must be 2-D with the same shape (B, d); got {[tuple(h.shape) for h in hs]}")
        if not all(h.is_floating_point() for h in hs):
            raise TypeError(f"layers must have a floating dtype, got {[h.dtype for h in hs]}")
        if self._state is None:
            self._allocate(hs[0].device)
        st = self._state
        assert st is not None
        hs = [h.to(device=self._device, dtype=torch.float64) for h in hs]
        sq = torch.stack([((hs[i + 1] - hs[i]) ** 2).sum(dim=1) for i in range(self.num_layers - 1)])  # (L, B)
        st["step_sq_sums"] += sq.sum(dim=1)
        st["step_norm_sums"] += sq.sqrt().sum(dim=1)
        st["end_sq_sum"] += ((hs[-1] - hs[0]) ** 2).sum()
        st["count"] += shape[0]
        return self

    # ------------------------------------------------------------------ accessors
    def _get(self, key: str) -> np.ndarray:
        if self._state is None:
            spec = self._specs[key]
            return np.zeros(spec.shape, dtype=spec.numpy_dtype)
        return self._state[key].cpu().numpy().copy()

    @property
    def N(self) -> int:
        return int(self._get("count"))

    @property
    def step_norm_sums(self) -> np.ndarray:
        """``(L,)``: ``sum_i ||h^{l+1}_i - h^l_i||`` per block."""
        return self._get("step_norm_sums")

    @property
    def step_sq_sums(self) -> np.ndarray:
        """``(L,)``: ``sum_i ||h^{l+1}_i - h^l_i||^2`` per block."""
        return self._get("step_sq_sums")

    @property
    def end_sq_sum(self) -> float:
        """``sum_i ||h^L_i - h^0_i||^2``."""
        return float(self._get("end_sq_sum"))

    def relative_depth(self) -> np.ndarray:
        """``t_l``, ``(L + 1,)``: :func:`relative_depth` of the per-block step-norm sums."""
        return relative_depth(self.step_norm_sums)

    def kinetic_energy(self) -> np.ndarray:
        """Per-block ``E_l = (1/N) sum_i ||h^{l+1}_i - h^l_i||^2``, ``(L,)``; their sum is the OT regulariser."""
        if self.N == 0:
            raise ValueError("PathStats are empty")
        return self.step_sq_sums / self.N

    def straightness_index(self) -> float:
        """``sum_i ||h^L_i - h^0_i||^2 / (L sum_i sum_l ||h^{l+1}_i - h^l_i||^2)`` in ``[0, 1]``
        (an extension of [Wang et al. 2024]): 1 iff every sample moves on a straight line with equal steps
        (Cauchy-Schwarz
        per sample).
        Returns nan when nothing moves."""
        L = self.num_layers - 1
        total = float(self.step_sq_sums.sum())
        if total == 0:
            return float("nan")
        return self.end_sq_sum / (L * total)

    def __repr__(self) -> str:
        return f"PathStats(num_layers={self.num_layers}, N={self.N})"
