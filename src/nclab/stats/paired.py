"""Streaming statistics of two layers' features of the same samples, for the geodesic model of [Wang et al. 2024].

:class:`PairedClassStats` reads ``(h0, h1, y)`` batches (layer-0 and last-layer features of the same samples,
same dimension d) and keeps, in float64, what the closed-form geodesic needs: a :class:`~nclab.stats.ClassStats`
for each end (class means, within-class sums of squares; their shift-at-first-sight method, reused, not
copied) plus the per-class cross sums

    cross_k = sum_{y_i = k} <h0_i - mu0_k, h1_i - mu1_k>,

accumulated like ClassStats' moments: about per-class shifts ``(s0_k, s1_k)`` = the first paired sample of class
k, ``c_k = sum <h0 - s0_k, h1 - s1_k>`` and ``S0_k = sum (h0 - s0_k)``, ``S1_k = sum (h1 - s1_k)``, centred at read
time by ``cross_k = c_k - <S0_k, S1_k> / n_k``. Every factor has the scale of the within-class spread (the shift is
a sample of the class), so nearly collapsed features far from the origin keep their digits [Wang et al. 2024];
``S0, S1`` are kept here rather than read back from the ClassStats means, because ``mu - s`` recomputed from an
absolute mean would cancel. ``(s0, s1)`` are the accumulator's ``"shift"`` states: merging and ``all_reduce``
re-express the sums about common shifts exactly (:mod:`nclab.stats.accumulator`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import torch

from nclab.stats.accumulator import Accumulator
from nclab.stats.class_stats import ClassStats, Track, to_tensor

__all__ = ["PairedClassStats"]


class PairedClassStats(Accumulator):
    """Per-class statistics of paired features ``h0 (B, d)``, ``h1 (B, d)`` (same samples, same order).

    Attributes ``start`` and ``end`` are the ClassStats of ``h0`` and ``h1`` (the accumulator's children): every
    metric of either end reads them.

    Parameters
    ----------
    K : int
        Number of classes, ``K >= 2``.
    d : int
        The common feature dimension of both layers.
    track : {"light", "full"}, default "light"
        ClassStats mode of both ends; ``"light"`` (O(K d) memory) is all the geodesic needs.
    device : str or torch.device, optional
        Where to accumulate. Default: the device of the first features passed to :meth:`update`.

    Examples
    --------
    Moving every sample by the same vector ``(1, 1)``: the transport cost is ``||(1, 1)||^2 = 2`` and the cross
    term equals Tr Sigma_W of either end (1/4 here).

    >>> h0 = np.array([[0.0, 0.0], [1.0, 0.0], [5.0, 5.0], [6.0, 5.0]])
    >>> paired = PairedClassStats.from_arrays(h0, h0 + 1.0, np.array([0, 0, 1, 1]))
    >>> paired.coupling_cost(), paired.trace_w_cross()
    (2.0, 0.25)
    """

    children: ClassVar[tuple[str, ...]] = ("start", "end")

    def __init__(self, K: int, d: int, *, track: Track = "light", device: str | torch.device | None = None) -> None:
        self.start = ClassStats(K, d, track=track, device=device)
        self.end = ClassStats(K, d, track=track, device=device)
        self.K = K = self.start.K
        self.d = d = self.start.d
        super().__init__(device)
        self.add_state("shift0", (K, d), reduce="shift")
        self.add_state("shift1", (K, d), reduce="shift")
        self.add_state("cross", (K,))  # sum <h0 - s0, h1 - s1>
        self.add_state("sum0", (K, d))  # sum (h0 - s0)
        self.add_state("sum1", (K, d))  # sum (h1 - s1)
        self.add_state("coupling", (), nonnegative=True)  # sum ||h1 - h0||^2 (identity-coupling transport cost)
        if self._device is not None:
            self._allocate(self._device)

    @classmethod
    def from_arrays(cls, h0: Any, h1: Any, y: Any, K: int | None = None, *, track: Track = "light") -> PairedClassStats:
        y_arr = np.asarray(y.cpu() if isinstance(y, torch.Tensor) else y)
        K = max(int(y_arr.max()) + 1, 2) if K is None else K
        out = cls(K, int(np.shape(h0)[1]), track=track)
        return out.update(h0, h1, y)

    # ------------------------------------------------------------------ accumulator protocol
    def _config(self) -> dict[str, Any]:
        return {"K": self.K, "d": self.d, "track": self.start.track}

    @classmethod
    def _from_config(
        cls, config: Mapping[str, Any], buffers: Mapping[str, np.ndarray], device: torch.device | None
    ) -> PairedClassStats:
        return cls(int(config["K"]), int(config["d"]), track=config["track"], device=device)

    def _shift_counts(self) -> torch.Tensor:
        return torch.as_tensor(self.start.counts, device=self._device)

    def _reshift(
        self, state: Mapping[str, torch.Tensor], counts: torch.Tensor, to: Mapping[str, torch.Tensor]
    ) -> dict[str, torch.Tensor]:
        """With ``d = shift - to`` per class: ``sum <z0 + d0, z1 + d1> = c + <d0, S1> + <S0, d1> + n <d0, d1>``
        and ``sum (z + d) = S + n d``."""
        has = (counts > 0)[:, None]
        n = counts.to(torch.float64)
        d0 = torch.where(has, state["shift0"] - to["shift0"], torch.zeros_like(to["shift0"]))
        d1 = torch.where(has, state["shift1"] - to["shift1"], torch.zeros_like(to["shift1"]))
        S0, S1 = state["sum0"], state["sum1"]
        return {
            "cross": state["cross"] + (d0 * S1).sum(1) + (S0 * d1).sum(1) + n * (d0 * d1).sum(1),
            "sum0": S0 + n[:, None] * d0,
            "sum1": S1 + n[:, None] * d1,
        }

    def _check_consistency(self, sd: Mapping[str, Any]) -> None:
        start, end = sd["start"]["state"], sd["end"]["state"]
        n0 = np.zeros(self.K, np.int64) if start is None else np.asarray(start["counts"])
        n1 = np.zeros(self.K, np.int64) if end is None else np.asarray(end["counts"])
        if not np.array_equal(n0, n1):
            raise ValueError("state is inconsistent: the two ends have different class counts")
        if sd["state"] is None and n0.any():
            raise ValueError("state is inconsistent: samples counted but no paired sums")
        if sd["state"] is not None:
            empty = n0 == 0
            st = sd["state"]
            if (np.asarray(st["cross"])[empty] != 0).any() or any(
                (np.asarray(st[k])[empty] != 0).any() for k in ("sum0", "sum1")
            ):
                raise ValueError("state is inconsistent: a class with no samples has nonzero paired sums")

    # ------------------------------------------------------------------ accumulation
    def update(self, h0: Any, h1: Any, y: Any) -> PairedClassStats:
        """Accumulate a batch of paired features (any float dtype/device) with labels ``y (B,)``."""
        x0 = to_tensor(h0, "h0")
        x1 = to_tensor(h1, "h1")
        if x0.ndim != 2 or tuple(x0.shape) != tuple(x1.shape):
            raise ValueError(
                f"h0 and h1 must be 2-D with the same shape (B, d): got {tuple(x0.shape)} and {tuple(x1.shape)}"
            )
        # Both ClassStats validate (d, labels, finiteness) before they change any state; the end is
        # checked on a throw-away copy first, so a batch rejected by either side leaves no trace anywhere.
        self.end.copy().update(x1, y)
        seen = torch.as_tensor(self.start.counts > 0)  # before this batch: its new classes get shifts below
        self.start.update(x0, y)
        self.end.update(x1, y)
        yt = to_tensor(y, "labels").to(torch.int64)
        B = x0.shape[0]
        if B == 0:
            return self
        if self._state is None:
            self._allocate(self.start.device or x0.device)
        st = self._state
        assert st is not None
        dev = self._device
        u0 = x0.to(device=dev, dtype=torch.float64)
        u1 = x1.to(device=dev, dtype=torch.float64)
        yt = yt.to(dev)
        first = torch.full((self.K,), B, dtype=torch.int64, device=dev)
        first.scatter_reduce_(0, yt, torch.arange(B, device=dev), reduce="amin")
        new = (first < B) & ~seen.to(dev)
        if bool(new.any()):
            st["shift0"][new] = u0[first[new]]
            st["shift1"][new] = u1[first[new]]
        z0 = u0 - st["shift0"][yt]
        z1 = u1 - st["shift1"][yt]
        st["cross"].index_add_(0, yt, (z0 * z1).sum(dim=1))
        st["sum0"].index_add_(0, yt, z0)
        st["sum1"].index_add_(0, yt, z1)
        st["coupling"] += ((u1 - u0) ** 2).sum()
        return self

    # ------------------------------------------------------------------ accessors
    @property
    def counts(self) -> np.ndarray:
        return self.start.counts

    @property
    def N(self) -> int:
        return self.start.N

    def cross_within(self) -> np.ndarray:
        """``(K,)``: ``sum_{y_i = k} <h0_i - mu0_k, h1_i - mu1_k>`` (0 for empty classes)."""
        if self._state is None:
            return np.zeros(self.K)
        counts = self.start.counts.astype(np.float64)
        out = self._state["cross"].cpu().numpy().copy()
        S0 = self._state["sum0"].cpu().numpy()
        S1 = self._state["sum1"].cpu().numpy()
        nz = counts > 0
        out[nz] -= np.einsum("kd,kd->k", S0[nz], S1[nz]) / counts[nz]
        return out

    def trace_w_cross(self) -> float:
        """``A01 = (1/N) sum_k cross_k``: the cross term of ``Tr Sigma_W(t)`` along the line
        [Wang et al. 2024, Fig. 3]."""
        n = self.N
        if n == 0:
            raise ValueError("PairedClassStats are empty")
        return float(self.cross_within().sum() / n)

    def coupling_cost(self) -> float:
        """``(1/N) sum_i ||h1_i - h0_i||^2``: the identity-coupling transport cost (= the kinetic energy of the
        straight line; >= W_2^2 of the two empirical measures)."""
        n = self.N
        if n == 0:
            raise ValueError("PairedClassStats are empty")
        assert self._state is not None
        return float(self._state["coupling"]) / n

    def __repr__(self) -> str:
        return f"PairedClassStats(K={self.K}, d={self.d}, N={self.N})"
