"""Exact NCC accuracy along the straight line between two layers' features (the [Wang et al. 2024] PFC3(t), second
pass).

Each sample moves on ``h_i(t) = (1 - t) h0_i + t e_i`` with ``e_i = h1_i`` (measured end) or ``e_i = nu_{y_i}``
(collapsed end: the sample sits at its class's end mean); class means move on the same lines,
``mu_c(t) = (1 - t) mu0_c + t nu_c``. The squared distance to class c's mean at time t is the quadratic

    ||h_i(t) - mu_c(t)||^2 = (1-t)^2 a + 2 t (1-t) b + t^2 c,
    a = ||h0_i - mu0_c||^2,   b = <h0_i - mu0_c, e_i - nu_c>,   c = ||e_i - nu_c||^2,

so three ``(B, d) x (d, K)`` products per batch give the NCC decision at every t of the grid. Which end means
``nu`` a variant of the geodesic model uses is the model's business (:func:`nclab.theory.geodesic.geodesic_ncc`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import torch

from nclab.stats.accumulator import Accumulator
from nclab.stats.class_stats import check_label_range, check_labels_dtype, to_tensor

__all__ = ["GeodesicNCC"]


class GeodesicNCC(Accumulator):
    """Second pass: exact NCC accuracy ``PFC3(t)`` of the interpolated features on ``t_grid``.

    Feed the same ``(h0, h1, y)`` batches as the first pass with :meth:`update`. Per batch: three
    ``(B, d) x (d, K)`` products, then ``O(B K T)``. Ties go to the lower class index (``argmin``), as in
    :class:`~nclab.stats.NCCAccumulator`. Counts are ``"sum"`` states of the accumulator protocol; the means and
    the grid are buffers (equal on both sides of a merge, saved with the counts).

    Parameters
    ----------
    start_means : array_like, shape (K, d)
        Class means ``mu0`` of the start layer.
    end_means : array_like, shape (K, d)
        Class means ``nu`` of the end (the measured end's means, or a collapsed end's).
    t_grid : array_like, shape (T,)
        Times in [0, 1].
    collapsed_end : bool, default False
        Place each sample's end at its class's end mean instead of its measured ``h1``.
    device : str or torch.device, optional
        Where to count. Default: the device of the first features passed to :meth:`update`.

    Examples
    --------
    Well separated classes translated rigidly stay separated along the whole line:

    >>> from nclab.stats import ClassStats
    >>> h0, y = np.array([[0.0, 0.0], [1.0, 0.0], [5.0, 5.0], [6.0, 5.0]]), np.array([0, 0, 1, 1])
    >>> mu0 = ClassStats.from_arrays(h0, y, K=2).means
    >>> ncc = GeodesicNCC(mu0, mu0 + 1.0, [0.0, 0.5, 1.0]).update(h0, h0 + 1.0, y)
    >>> ncc.accuracy().tolist()
    [1.0, 1.0, 1.0]
    """

    buffer_labels: ClassVar[Mapping[str, str]] = {"start_means": "start means", "end_means": "end means", "t": "t_grid"}

    def __init__(
        self,
        start_means: Any,
        end_means: Any,
        t_grid: Any,
        *,
        collapsed_end: bool = False,
        device: str | torch.device | None = None,
    ) -> None:
        mu0 = np.array(start_means, dtype=np.float64)
        mu1 = np.array(end_means, dtype=np.float64)
        if mu0.ndim != 2 or mu0.shape != mu1.shape or mu0.shape[0] < 2:
            raise ValueError(
                f"start_means and end_means must have the same shape (K, d) with K >= 2, "
                f"got {mu0.shape} and {mu1.shape}"
            )
        if not (np.isfinite(mu0).all() and np.isfinite(mu1).all()):
            raise ValueError("start_means and end_means must be finite")
        t = np.array(t_grid, dtype=np.float64).ravel()
        if t.size == 0 or not np.isfinite(t).all():
            raise ValueError("t_grid must be a non-empty array of finite times")
        self.K, self.d = mu0.shape
        self.t = t
        self.collapsed_end = bool(collapsed_end)
        self._mu0, self._mu1 = mu0, mu1
        super().__init__(device)
        self.add_state("correct", (t.size,), torch.int64, nonnegative=True)
        self.add_state("count", (), torch.int64, nonnegative=True)
        if self._device is not None:
            self._allocate(self._device)

    # ------------------------------------------------------------------ accumulator protocol
    def _config(self) -> dict[str, Any]:
        return {
            "K": self.K,
            "d": self.d,
            "num_times": int(self.t.size),
            "collapsed_end": self.collapsed_end,
        }

    def _check_consistency(self, sd: Mapping[str, Any]) -> None:
        st = sd["state"]
        if st is not None and (np.asarray(st["correct"]) > np.asarray(st["count"])).any():
            raise ValueError(f"state is inconsistent: correct {int(np.max(st['correct']))} > count {int(st['count'])}")

    def _buffers(self) -> dict[str, np.ndarray]:
        return {"start_means": self._mu0, "end_means": self._mu1, "t": self.t}

    @classmethod
    def _from_config(
        cls, config: Mapping[str, Any], buffers: Mapping[str, np.ndarray], device: torch.device | None
    ) -> GeodesicNCC:
        missing = [k for k in ("start_means", "end_means", "t") if k not in buffers]
        if missing:
            raise ValueError(f"missing buffers {missing}")
        return cls(
            buffers["start_means"],
            buffers["end_means"],
            buffers["t"],
            collapsed_end=bool(config["collapsed_end"]),
            device=device,
        )

    def _allocate(self, device: torch.device) -> None:
        super()._allocate(device)
        # centre both ends by their mean of class means: the expanded distances then cancel far less
        f64 = torch.float64
        self._g0 = torch.as_tensor(self._mu0.mean(axis=0), dtype=f64, device=device)
        self._g1 = torch.as_tensor(self._mu1.mean(axis=0), dtype=f64, device=device)
        self._m0 = torch.as_tensor(self._mu0, dtype=f64, device=device) - self._g0
        self._m1 = torch.as_tensor(self._mu1, dtype=f64, device=device) - self._g1
        tt = torch.as_tensor(self.t, dtype=f64, device=device)
        self._w = torch.stack([(1 - tt) ** 2, 2 * tt * (1 - tt), tt**2])  # (3, T)

    # ------------------------------------------------------------------ accumulation
    @property
    def start_means(self) -> np.ndarray:
        return self._mu0.copy()

    @property
    def end_means(self) -> np.ndarray:
        return self._mu1.copy()

    def update(self, h0: Any, h1: Any, y: Any) -> GeodesicNCC:
        """Accumulate paired features ``h0, h1 (B, d)`` (any float dtype/device) with labels ``y (B,)``."""
        x0, x1 = to_tensor(h0, "h0"), to_tensor(h1, "h1")
        yt = to_tensor(y, "labels")
        check_labels_dtype(yt)  # float labels are an error, not silently truncated
        if x0.ndim != 2 or x0.shape != x1.shape or x0.shape[1] != self.d or tuple(yt.shape) != (x0.shape[0],):
            raise ValueError(
                f"expected h0, h1 (B, {self.d}) and y (B,), got {tuple(x0.shape)}, {tuple(x1.shape)}, {tuple(yt.shape)}"
            )
        if not (x0.is_floating_point() and x1.is_floating_point()):
            raise TypeError(f"h0 and h1 must have a floating dtype, got {x0.dtype} and {x1.dtype}")
        if self._state is None:
            self._allocate(x0.device)
        dev = self._device
        yt = yt.to(device=dev, dtype=torch.int64)
        if yt.numel():
            check_label_range(yt, self.K)
        u = x0.to(device=dev, dtype=torch.float64) - self._g0
        if self.collapsed_end:
            v = self._m1[yt]
        else:
            v = x1.to(device=dev, dtype=torch.float64) - self._g1
        m0, m1 = self._m0, self._m1
        a = (u * u).sum(1, keepdim=True) - 2 * u @ m0.T + (m0 * m0).sum(1)
        c = (v * v).sum(1, keepdim=True) - 2 * v @ m1.T + (m1 * m1).sum(1)
        b = (u * v).sum(1, keepdim=True) - u @ m1.T - v @ m0.T + (m0 * m1).sum(1)
        dist = torch.einsum("bk,t->btk", a, self._w[0]) + torch.einsum("bk,t->btk", b, self._w[1])
        dist += torch.einsum("bk,t->btk", c, self._w[2])
        pred = dist.argmin(dim=2)  # (B, T)
        st = self._state
        assert st is not None
        st["correct"] += (pred == yt[:, None]).sum(dim=0)
        st["count"] += yt.numel()
        return self

    @property
    def N(self) -> int:
        return 0 if self._state is None else int(self._state["count"])

    def accuracy(self) -> np.ndarray:
        """``PFC3(t)`` on the grid, ``(T,)``."""
        n = self.N
        if n == 0:
            raise ValueError("GeodesicNCC has seen no sample: feed the (h0, h1, y) batches with update()")
        assert self._state is not None
        return self._state["correct"].cpu().numpy() / n

    def __repr__(self) -> str:
        return (
            f"GeodesicNCC(K={self.K}, d={self.d}, num_times={self.t.size}, "
            f"collapsed_end={self.collapsed_end}, N={self.N})"
        )
