"""Streaming statistics of two layers' features of the same samples, for the geodesic model of paper 002.

:class:`PairedClassStats` reads ``(h0, h1, y)`` batches (layer-0 and last-layer features of the same samples,
same dimension d) and keeps, in float64, what the closed-form geodesic needs: a :class:`~nclab.stats.ClassStats`
for each end (class means, within-class sums of squares; their shift-at-first-sight method, reused, not
copied) plus the per-class cross sums

    cross_k = sum_{y_i = k} <h0_i - mu0_k, h1_i - mu1_k>,

accumulated like ClassStats' moments: about per-class shifts ``(s0_k, s1_k)`` = the first paired sample of class
k, ``c_k = sum <h0 - s0_k, h1 - s1_k>`` and ``S0_k = sum (h0 - s0_k)``, ``S1_k = sum (h1 - s1_k)``, centred at read
time by ``cross_k = c_k - <S0_k, S1_k> / n_k``. Every factor has the scale of the within-class spread (the shift is
a sample of the class), so nearly collapsed features far from the origin keep their digits (spec 002, Sec. 6.3);
``S0, S1`` are kept here rather than read back from the ClassStats means, because ``mu - s`` recomputed from an
absolute mean would cancel. Merging re-expresses the other side's sums about this side's shifts exactly.

:class:`PathStats` reads all measured layers ``h^0..h^L`` of a batch and keeps the per-block transport sums of
paper 002, Sec. 2.4 / 2.6 (relative depth, kinetic energy, straightness).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from nclab.stats import ClassStats
from nclab.stats.class_stats import FORMAT_VERSION, agree_on_shifts, read_arrays, write_arrays

__all__ = ["PAIRED_FORMAT_VERSION", "PairedClassStats", "PathStats"]

PAIRED_FORMAT_VERSION = 1


def _tensor(x: Any, name: str) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        return x.detach()
    arr = np.asarray(x)
    if arr.dtype == object:
        raise TypeError(f"{name} must be a numeric array, got an object array")
    return torch.from_numpy(np.array(arr, copy=True))


def _reshifted(
    cross: torch.Tensor,
    S0: torch.Tensor,
    S1: torch.Tensor,
    n: torch.Tensor,
    shifts: tuple[torch.Tensor, torch.Tensor],
    to: tuple[torch.Tensor, torch.Tensor],
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-class sums ``c = sum <z0, z1>``, ``S0 = sum z0``, ``S1 = sum z1`` about ``shifts`` re-expressed
    exactly about the shifts ``to`` (classes with ``n = 0`` unchanged): with ``d = shift - to``,
    ``sum <z0 + d0, z1 + d1> = c + <d0, S1> + <S0, d1> + n <d0, d1>`` and ``sum (z + d) = S + n d``."""
    has = (n > 0)[:, None]
    d0 = torch.where(has, shifts[0] - to[0], torch.zeros_like(to[0]))
    d1 = torch.where(has, shifts[1] - to[1], torch.zeros_like(to[1]))
    cross = cross + (d0 * S1).sum(1) + (S0 * d1).sum(1) + n * (d0 * d1).sum(1)
    return cross, S0 + n[:, None] * d0, S1 + n[:, None] * d1


class PairedClassStats:
    """Per-class statistics of paired features ``h0 (B, d)``, ``h1 (B, d)`` (same samples, same order).

    Parameters
    ----------
    num_classes, dim : K >= 2 and the common feature dimension d of both layers.
    track : ClassStats mode of both ends; ``"light"`` (default, O(K d) memory) is all the geodesic needs.

    Attributes ``start`` and ``end`` are the ClassStats of ``h0`` and ``h1``: every metric of either end reads them.
    """

    def __init__(self, num_classes: int, dim: int, *, track: str = "light") -> None:
        self.start = ClassStats(num_classes, dim, track=track)  # type: ignore[arg-type]
        self.end = ClassStats(num_classes, dim, track=track)  # type: ignore[arg-type]
        self.num_classes = self.start.num_classes
        self.dim = self.start.dim
        self._shift0: torch.Tensor | None = None
        self._shift1: torch.Tensor | None = None
        self._cross: torch.Tensor | None = None  # (K,) sum <h0 - s0, h1 - s1>
        self._sum0: torch.Tensor | None = None  # (K, d) sum (h0 - s0)
        self._sum1: torch.Tensor | None = None  # (K, d) sum (h1 - s1)
        self._seen: torch.Tensor | None = None  # (K,) bool
        self._coupling = 0.0  # sum ||h1 - h0||^2 (identity-coupling transport cost)

    @classmethod
    def from_arrays(
        cls, h0: Any, h1: Any, y: Any, num_classes: int | None = None, *, track: str = "light"
    ) -> PairedClassStats:
        y_arr = np.asarray(y.cpu() if isinstance(y, torch.Tensor) else y)
        K = max(int(y_arr.max()) + 1, 2) if num_classes is None else num_classes
        out = cls(K, int(np.shape(h0)[1]), track=track)
        return out.update(h0, h1, y)

    def _allocate(self, device: torch.device) -> None:
        K, d = self.num_classes, self.dim
        self._shift0 = torch.zeros(K, d, dtype=torch.float64, device=device)
        self._shift1 = torch.zeros(K, d, dtype=torch.float64, device=device)
        self._cross = torch.zeros(K, dtype=torch.float64, device=device)
        self._sum0 = torch.zeros(K, d, dtype=torch.float64, device=device)
        self._sum1 = torch.zeros(K, d, dtype=torch.float64, device=device)
        self._seen = torch.zeros(K, dtype=torch.bool, device=device)

    def update(self, h0: Any, h1: Any, y: Any) -> PairedClassStats:
        """Accumulate a batch of paired features (any float dtype/device) with labels ``y (B,)``."""
        x0 = _tensor(h0, "h0")
        x1 = _tensor(h1, "h1")
        if x0.ndim != 2 or tuple(x0.shape) != tuple(x1.shape):
            raise ValueError(
                f"h0 and h1 must be 2-D with the same shape (B, d): got {tuple(x0.shape)} and {tuple(x1.shape)}"
            )
        # Both ClassStats validate (dim, labels, finiteness) before they change any state; the end is
        # checked on a throw-away copy first, so a batch rejected by either side leaves no trace anywhere.
        self.end.copy().update(x1, y)
        self.start.update(x0, y)
        self.end.update(x1, y)
        yt = _tensor(y, "labels").to(torch.int64)
        B = x0.shape[0]
        if B == 0:
            return self
        if self._cross is None:
            self._allocate(self.start.device or x0.device)
        assert self._shift0 is not None and self._shift1 is not None and self._cross is not None
        dev = self._cross.device
        u0 = x0.to(device=dev, dtype=torch.float64)
        u1 = x1.to(device=dev, dtype=torch.float64)
        yt = yt.to(dev)
        first = torch.full((self.num_classes,), B, dtype=torch.int64, device=dev)
        first.scatter_reduce_(0, yt, torch.arange(B, device=dev), reduce="amin")
        new = (first < B) & ~self._seen
        if bool(new.any()):
            self._shift0[new] = u0[first[new]]
            self._shift1[new] = u1[first[new]]
            self._seen |= new
        z0 = u0 - self._shift0[yt]
        z1 = u1 - self._shift1[yt]
        self._cross.index_add_(0, yt, (z0 * z1).sum(dim=1))
        self._sum0.index_add_(0, yt, z0)  # type: ignore[union-attr]
        self._sum1.index_add_(0, yt, z1)  # type: ignore[union-attr]
        self._coupling += float(((u1 - u0) ** 2).sum())
        return self

    def merge(self, other: PairedClassStats) -> PairedClassStats:
        """Add ``other`` (disjoint samples) into ``self`` exactly; returns ``self``."""
        if not isinstance(other, PairedClassStats):
            raise TypeError(f"can only merge PairedClassStats, got {type(other).__name__}")
        if (other.num_classes, other.dim) != (self.num_classes, self.dim):
            raise ValueError("incompatible PairedClassStats (num_classes or dim differ)")
        if other._cross is None:
            return self
        if self._cross is None:
            self._allocate(other._cross.device)
        assert self._shift0 is not None and self._shift1 is not None and self._cross is not None
        dev = self._cross.device
        s0o, s1o = other._shift0.to(dev), other._shift1.to(dev)  # type: ignore[union-attr]
        seen_o = other._seen.to(dev)  # type: ignore[union-attr]
        adopt = seen_o & ~self._seen
        self._shift0[adopt] = s0o[adopt]
        self._shift1[adopt] = s1o[adopt]
        self._seen |= seen_o
        n = torch.as_tensor(other.start.counts, dtype=torch.float64, device=dev)
        cross, S0, S1 = _reshifted(
            other._cross.to(dev),  # type: ignore[union-attr]
            other._sum0.to(dev),  # type: ignore[union-attr]
            other._sum1.to(dev),  # type: ignore[union-attr]
            n,
            (s0o, s1o),
            (self._shift0, self._shift1),
        )
        self._cross += cross
        self._sum0 += S0  # type: ignore[operator]
        self._sum1 += S1  # type: ignore[operator]
        self._coupling += other._coupling
        self.start.merge(other.start)
        self.end.merge(other.end)
        return self

    def all_reduce(self, group: Any = None) -> PairedClassStats:
        """Sum the statistics of every rank of ``torch.distributed`` in place, exactly (returns ``self``).

        As :meth:`ClassStats.all_reduce`: each class is re-expressed about the shifts of the lowest rank that saw
        it, after which the cross sums, the shifted sums and the coupling cost are plain sums.
        """
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            raise RuntimeError("all_reduce needs an initialised torch.distributed process group")
        if self._cross is None:
            self._allocate(self.start.device or torch.device("cpu"))
        assert self._shift0 is not None and self._shift1 is not None and self._cross is not None
        assert self._sum0 is not None and self._sum1 is not None and self._seen is not None
        dev = self._cross.device
        seen, (common0, common1) = agree_on_shifts(self._seen, (self._shift0, self._shift1), group)
        # this rank's sums about the common shifts (the exact re-expression of merge), then plain sums
        n = torch.as_tensor(self.start.counts, dtype=torch.float64, device=dev)
        self._cross, self._sum0, self._sum1 = _reshifted(
            self._cross, self._sum0, self._sum1, n, (self._shift0, self._shift1), (common0, common1)
        )
        self._shift0, self._shift1 = common0, common1
        coupling = torch.tensor([self._coupling], dtype=torch.float64, device=dev)
        for t in (self._cross, self._sum0, self._sum1, coupling):
            dist.all_reduce(t, op=dist.ReduceOp.SUM, group=group)
        self._coupling = float(coupling[0])
        self._seen = seen
        self.start.all_reduce(group)
        self.end.all_reduce(group)
        return self

    # ------------------------------------------------------------------ persistence
    def state_dict(self) -> dict[str, Any]:
        """Metadata, the two ends' ClassStats state dicts and CPU copies of the paired sums (numpy arrays)."""
        paired = None
        if self._cross is not None:
            paired = {
                "shift0": self._shift0,
                "shift1": self._shift1,
                "cross": self._cross,
                "sum0": self._sum0,
                "sum1": self._sum1,
            }
            paired = {k: v.cpu().numpy().copy() for k, v in paired.items()}  # type: ignore[union-attr]
            paired["coupling"] = np.array([self._coupling])
        return {
            "format_version": PAIRED_FORMAT_VERSION,
            "num_classes": self.num_classes,
            "dim": self.dim,
            "track": self.start.track,
            "start": self.start.state_dict(),
            "end": self.end.state_dict(),
            "paired": paired,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> PairedClassStats:
        """Restore :meth:`state_dict` output; everything is validated before anything changes."""
        version = int(state.get("format_version", -1))
        if version != PAIRED_FORMAT_VERSION:
            raise ValueError(
                f"unsupported PairedClassStats format_version {version} (this nclab reads {PAIRED_FORMAT_VERSION})"
            )
        track = self.start.track
        for key, mine in (("num_classes", self.num_classes), ("dim", self.dim), ("track", track)):
            if state.get(key) != mine:
                raise ValueError(f"state has {key}={state.get(key)!r}, these PairedClassStats have {key}={mine!r}")
        missing = [k for k in ("start", "end") if not isinstance(state.get(k), Mapping)]
        if missing:
            raise ValueError(f"state is missing the ClassStats state of {' and '.join(missing)}")
        device = self.start.device  # None: the CPU
        start = ClassStats(self.num_classes, self.dim, track=track, device=device)  # type: ignore[arg-type]
        end = ClassStats(self.num_classes, self.dim, track=track, device=device)  # type: ignore[arg-type]
        start.load_state_dict(state["start"])
        end.load_state_dict(state["end"])
        if not np.array_equal(start.counts, end.counts):
            raise ValueError("state is inconsistent: the two ends have different class counts")
        paired = state.get("paired")
        K, d = self.num_classes, self.dim
        shapes = {"shift0": (K, d), "shift1": (K, d), "cross": (K,), "sum0": (K, d), "sum1": (K, d), "coupling": (1,)}
        if paired is None:
            if start.num_samples:
                raise ValueError("state is inconsistent: samples counted but no paired sums")
        else:
            for key, shape in shapes.items():
                if key not in paired:
                    raise ValueError(f"state is missing paired sum {key!r}")
                arr = np.asarray(paired[key])
                if tuple(arr.shape) != shape or arr.dtype != np.float64:
                    raise ValueError(
                        f"paired sum {key!r} has shape {tuple(arr.shape)} and dtype {arr.dtype}, "
                        f"expected {shape} float64"
                    )
        self.start, self.end = start, end
        device = start.device or torch.device("cpu")
        if paired is None:
            self._shift0 = self._shift1 = self._cross = self._sum0 = self._sum1 = self._seen = None
            self._coupling = 0.0
            return self
        t = {k: torch.from_numpy(np.array(paired[k], dtype=np.float64)).to(device) for k in shapes}
        self._shift0, self._shift1, self._cross = t["shift0"], t["shift1"], t["cross"]
        self._sum0, self._sum1 = t["sum0"], t["sum1"]
        self._coupling = float(t["coupling"][0])
        self._seen = torch.as_tensor(self.start.counts > 0, device=device)  # a class is seen iff it has samples
        return self

    def save(self, path: str | Path) -> Path:
        """Write to ``.npz`` (default) or ``.safetensors``: one file, arrays named ``start__*``, ``end__*``,
        ``paired__*``."""
        sd = self.state_dict()
        meta = {k: str(sd[k]) for k in ("format_version", "num_classes", "dim", "track")}
        meta["kind"] = "PairedClassStats"
        arrays: dict[str, np.ndarray] = {}
        for part in ("start", "end"):
            arrays.update({f"{part}__{k}": v for k, v in (sd[part]["state"] or {}).items()})
        arrays.update({f"paired__{k}": v for k, v in (sd["paired"] or {}).items()})
        return write_arrays(path, meta, arrays)

    @classmethod
    def load(cls, path: str | Path, *, device: str | torch.device | None = None) -> PairedClassStats:
        meta, arrays = read_arrays(path)
        if meta.get("kind") != "PairedClassStats" or "format_version" not in meta:
            raise ValueError(f"{path} is not an nclab PairedClassStats file")
        K, d, track = int(meta["num_classes"]), int(meta["dim"]), meta["track"]
        out = cls(K, d, track=track)
        if device is not None:
            out.start = ClassStats(K, d, track=track, device=device)  # type: ignore[arg-type]
            out.end = ClassStats(K, d, track=track, device=device)  # type: ignore[arg-type]

        def part(prefix: str) -> dict[str, np.ndarray] | None:
            sub = {k[len(prefix) + 2 :]: v for k, v in arrays.items() if k.startswith(prefix + "__")}
            return sub or None

        end_meta = {"format_version": FORMAT_VERSION, "num_classes": K, "dim": d, "track": track}
        return out.load_state_dict(
            {
                "format_version": int(meta["format_version"]),
                "num_classes": K,
                "dim": d,
                "track": track,
                "start": {**end_meta, "state": part("start")},
                "end": {**end_meta, "state": part("end")},
                "paired": part("paired"),
            }
        )

    # ------------------------------------------------------------------ accessors
    @property
    def counts(self) -> np.ndarray:
        return self.start.counts

    @property
    def num_samples(self) -> int:
        return self.start.num_samples

    def cross_within(self) -> np.ndarray:
        """``(K,)``: ``sum_{y_i = k} <h0_i - mu0_k, h1_i - mu1_k>`` (0 for empty classes)."""
        if self._cross is None:
            return np.zeros(self.num_classes)
        counts = self.start.counts.astype(np.float64)
        out = self._cross.cpu().numpy().copy()
        S0 = self._sum0.cpu().numpy()  # type: ignore[union-attr]
        S1 = self._sum1.cpu().numpy()  # type: ignore[union-attr]
        nz = counts > 0
        out[nz] -= np.einsum("kd,kd->k", S0[nz], S1[nz]) / counts[nz]
        return out

    def trace_w_cross(self) -> float:
        """``A01 = (1/N) sum_k cross_k``: the cross term of ``Tr Sigma_W(t)`` along the line (spec 002, Sec. 2.5)."""
        n = self.num_samples
        if n == 0:
            raise ValueError("PairedClassStats are empty")
        return float(self.cross_within().sum() / n)

    def coupling_cost(self) -> float:
        """``(1/N) sum_i ||h1_i - h0_i||^2``: the identity-coupling transport cost (= the kinetic energy of the
        straight line; >= W_2^2 of the two empirical measures)."""
        n = self.num_samples
        if n == 0:
            raise ValueError("PairedClassStats are empty")
        return self._coupling / n

    def __repr__(self) -> str:
        return f"PairedClassStats(num_classes={self.num_classes}, dim={self.dim}, num_samples={self.num_samples})"


class PathStats:
    """Per-block transport sums over the measured layers ``h^0..h^L`` (paper 002, Secs. 2.4 and 2.6).

    ``update(layers)`` takes a sequence of ``L + 1`` arrays ``(B, d)`` (the same samples at every layer) and
    accumulates ``step_norm_sums[l] = sum_i ||h^{l+1}_i - h^l_i||`` (unsquared: relative depth),
    ``step_sq_sums[l] = sum_i ||h^{l+1}_i - h^l_i||^2`` (kinetic energy) and ``end_sq_sum = sum_i ||h^L_i - h^0_i||^2``.
    """

    def __init__(self, num_layers: int) -> None:
        if num_layers < 2:
            raise ValueError(f"need at least 2 measured layers (h^0 and h^L), got {num_layers}")
        self.num_layers = int(num_layers)
        L = self.num_layers - 1
        self.step_norm_sums = np.zeros(L)
        self.step_sq_sums = np.zeros(L)
        self.end_sq_sum = 0.0
        self.num_samples = 0

    def update(self, layers: Sequence[Any]) -> PathStats:
        if len(layers) != self.num_layers:
            raise ValueError(f"expected {self.num_layers} layers, got {len(layers)}")
        hs = [_tensor(h, f"layer {i}").to(torch.float64) for i, h in enumerate(layers)]
        shape = tuple(hs[0].shape)
        if len(shape) != 2 or any(tuple(h.shape) != shape for h in hs):
            raise ValueError(f"all layers must be 2-D with the same shape (B, d); got {[tuple(h.shape) for h in hs]}")
        hs = [h.to(hs[0].device) for h in hs]
        for i in range(self.num_layers - 1):
            sq = ((hs[i + 1] - hs[i]) ** 2).sum(dim=1)
            self.step_sq_sums[i] += float(sq.sum())
            self.step_norm_sums[i] += float(sq.sqrt().sum())
        self.end_sq_sum += float(((hs[-1] - hs[0]) ** 2).sum())
        self.num_samples += shape[0]
        return self

    def merge(self, other: PathStats) -> PathStats:
        if other.num_layers != self.num_layers:
            raise ValueError("incompatible PathStats (different number of layers)")
        self.step_norm_sums += other.step_norm_sums
        self.step_sq_sums += other.step_sq_sums
        self.end_sq_sum += other.end_sq_sum
        self.num_samples += other.num_samples
        return self

    def relative_depth(self) -> np.ndarray:
        """``t_l``, ``(L + 1,)``: see :func:`nclab.theory.geodesic.relative_depth`."""
        from nclab.theory.geodesic import relative_depth

        return relative_depth(self.step_norm_sums)

    def kinetic_energy(self) -> np.ndarray:
        """Per-block ``E_l = (1/N) sum_i ||h^{l+1}_i - h^l_i||^2``, ``(L,)``; their sum is the OT regulariser."""
        if self.num_samples == 0:
            raise ValueError("PathStats are empty")
        return self.step_sq_sums / self.num_samples

    def straightness_index(self) -> float:
        """``sum_i ||h^L_i - h^0_i||^2 / (L sum_i sum_l ||h^{l+1}_i - h^l_i||^2)`` in ``[0, 1]`` [extension, spec 002
        Sec. 6.4]: 1 iff every sample moves on a straight line with equal steps (Cauchy-Schwarz per sample).
        Returns nan when nothing moves."""
        L = self.num_layers - 1
        total = float(self.step_sq_sums.sum())
        if total == 0:
            return float("nan")
        return self.end_sq_sum / (L * total)
