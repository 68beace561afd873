"""Streaming per-class sufficient statistics of features: the one pass every collapse metric reads.

Numerical method
----------------
Every class ``k`` gets a *shift* ``s_k``: the first sample of that class ever seen. The accumulators hold
moments of the shifted features ``z = x - s_y``,

    n_k,   S_k = sum_{i: y_i = k} z_i,   q_k = sum_{i: y_i = k} ||z_i||^2,   C = sum_i z_i z_i^T  (full only),

all in float64. Since ``s_k`` is itself a sample of class ``k``, ``z`` has the scale of the within-class
spread, not of the class mean, so the centred quantities

    class_ss_k = q_k - ||S_k||^2 / n_k,     within scatter = C - sum_k S_k S_k^T / n_k

do not suffer the catastrophic cancellation of raw second moments: features ``1e6 * mu_k + 1e-3 * noise``
keep ~10 significant digits of Sigma_W (a raw ``sum x x^T`` keeps none). Shifts never change once set;
:meth:`ClassStats.merge` and :meth:`ClassStats.all_reduce` re-express one side's moments about the other's
shifts exactly (``sum (z + delta)(z + delta)^T = C + delta S^T + S delta^T + n delta delta^T``), so merging
is exact, whatever the split of the data. Per batch, the cost is one symmetric rank-B update of ``C``
(BLAS ``syrk`` on the CPU, ``addmm`` on accelerators; small batches coalesced into blocks first) plus O(B d)
scatter-adds; ``track="light"`` skips ``C`` and keeps O(K d) memory, for wide intermediate layers.
``compute_dtype="float32"`` forms each block's Gram in float32 and adds it to the float64 ``C`` (error bound in
:class:`ClassStats`, derivation in docs/stats.md).

Covariance conventions (shared by all five papers, see ``docs/conventions.md``): Sigma_W and Sigma_T are
divided by the total count N (population, not N - 1 or N - K); Sigma_B is divided by K (balanced) or
weighted by n_k / N (empirical).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any, Literal

import numpy as np
import torch

from nclab._threads import torch_threads
from nclab.memory import check_allocation, format_bytes
from nclab.stats._kernels import (
    TORCH_DTYPES,
    chunk_rows,
    exact_float32_matmul,
    syrk_update,
    work_buffers,
)
from nclab.stats.accumulator import Accumulator
from nclab.stats.moments import ClassMoments, Weighting, check_weighting

__all__ = [
    "ClassStats",
    "ComputeDtype",
    "EmptyClassError",
    "Weighting",
    "check_batch",
    "check_label_range",
    "check_labels_dtype",
    "check_weighting",
    "chunk_rows",
    "to_tensor",
    "work_buffers",
]

Track = Literal["full", "light"]
ComputeDtype = Literal["float32", "float64"]


class EmptyClassError(ValueError):
    """A quantity that needs a class mean was asked for while some classes have no sample."""


def to_tensor(x: Any, name: str) -> torch.Tensor:
    """``x`` (numpy array, scalar, list or torch tensor) as a detached tensor, without a copy where possible."""
    if isinstance(x, torch.Tensor):
        return x.detach()
    if isinstance(x, np.ndarray) or np.isscalar(x) or isinstance(x, list | tuple):
        arr = np.asarray(x)
        if arr.dtype == object:
            raise TypeError(f"{name} must be a numeric array, got an object array")
        if not arr.flags.writeable:  # torch.from_numpy warns on read-only (memory-mapped) arrays
            arr = np.array(arr)
        return torch.from_numpy(np.ascontiguousarray(arr))
    raise TypeError(f"{name} must be a numpy array or a torch tensor, got {type(x).__name__}")


class ClassStats(Accumulator):
    """Streaming class statistics of features ``H: (N, d)`` with labels ``y: (N,)`` in ``[0, K)``.

    An :class:`~nclab.stats.Accumulator`: :meth:`update` per batch, accessors to read, :meth:`merge` and
    :meth:`all_reduce` to combine (exact: the moments are re-expressed about common shifts), :meth:`reset`,
    :meth:`state_dict` / :meth:`save` / :meth:`load` to persist. Accumulation is float64 on
    the device of the first features seen (a torch CUDA tensor keeps the state on the GPU); accessors return
    float64 numpy arrays.

    Parameters
    ----------
    num_classes : int
        K >= 2.
    dim : int
        Feature dimension d >= 1.
    track : {"full", "light"}
        ``"full"`` keeps the d x d within-class scatter (needed for Sigma_W, Sigma_T, NC1, VCI, ...);
        ``"light"`` keeps only O(K d) state (means, per-class sums of squares, unit sums), enough for trace
        ratios, CDNV, NCC and cosine metrics; asking it for a d x d matrix raises ``ValueError``.
    device : torch device, optional
        Where to accumulate. Default: the device of the first features passed to :meth:`update`.
    check_finite : bool
        Reject NaN/inf features, and nonzero rows whose squared norms overflow or underflow float64 (norms
        above ~8.4e152 or below ~1.5e-151: their variances would be inf or lose every digit; one extra O(B d)
        scan per batch). A rejected batch leaves no trace, not even the device it would have pinned.
    compute_dtype : {"float64", "float32"}
        Precision of the Gram ``sum z z^T`` of the shifted features (full track). ``"float64"`` (default): every
        product in float64, Sigma_W exact to ~1e-13 relative even near collapse. ``"float32"``: the shifted rows
        are rounded to float32, coalesced into blocks of up to ``b`` rows (:meth:`gram_block_rows`) and each
        block's Gram is formed in float32 (``ssyrk``; on CUDA a float32 matmul with TF32 switched off) and added
        to the float64 accumulator; counts, class sums and means stay float64. Error bound, entrywise
        [Higham 2002, Sec. 3.1]: ``|dC_ij| <= gamma_{b+2} sqrt(C_ii C_jj)`` with ``gamma_m = m u / (1 - m u)``,
        ``u = 2^-24``, hence
        ``||d Sigma_W||_F <= gamma_{b+2} (1 + rho) Tr Sigma_W`` where ``rho = sum_k n_k ||s_k - mu_k||^2 /
        sum_k class_ss_k`` measures how far the shifts (first samples) lie from the class means (``rho ~ 1``
        for first-sample shifts). With independent rounding errors ``gamma_b`` is ``~ sqrt(b) u`` with high
        probability [Higham & Mary 2019] (~3e-6 at b = 2,048); measured ~1e-7 relative Frobenius error of
        Sigma_W, near collapse included (docs/stats.md). The default stays float64: the guaranteed bound at
        b = 2,048 (~1.2e-4 (1 + rho)) is far from float64's, and the gain on the CPU is the float32 Gram's only.

    Raises :class:`nclab.memory.AllocationTooLarge` (a ``MemoryError`` and a ``ValueError``) before allocating
    state larger than the available memory or the ``NCLAB_MAX_BYTES`` cap (``24 K d`` bytes, plus ``8 d^2``
    for ``track="full"``), suggesting ``track="light"`` when the d x d scatter is the bulk.

    Examples
    --------
    Stream two batches of features ``(B, d)`` with their labels, then read the statistics:

    >>> import numpy as np
    >>> from nclab.stats import ClassStats
    >>> H = np.array([[1.0, 0.0], [3.0, 0.0], [0.0, 2.0], [0.0, 4.0]])
    >>> y = np.array([0, 0, 1, 1])
    >>> stats = ClassStats(num_classes=2, dim=2)
    >>> stats.update(H[:2], y[:2]).update(H[2:], y[2:])
    ClassStats(num_classes=2, dim=2, track='full', num_samples=4, device=cpu)
    >>> print(stats.means)
    [[2. 0.]
     [0. 3.]]

    The one-call constructor gives the same statistics:

    >>> stats2 = ClassStats.from_arrays(H, y, num_classes=2)
    >>> bool(np.allclose(stats2.means, stats.means))
    True
    """

    def __init__(
        self,
        num_classes: int,
        dim: int,
        *,
        track: Track = "full",
        device: str | torch.device | None = None,
        check_finite: bool = True,
        compute_dtype: ComputeDtype = "float64",
    ) -> None:
        if isinstance(num_classes, bool) or not isinstance(num_classes, int | np.integer):
            raise TypeError(f"num_classes must be an int, got {type(num_classes).__name__}")
        if num_classes < 2:
            raise ValueError(f"num_classes must be >= 2 (collapse needs at least two classes), got {num_classes}")
        if isinstance(dim, bool) or not isinstance(dim, int | np.integer) or dim < 1:
            raise ValueError(f"dim must be a positive int, got {dim!r}")
        if track not in ("full", "light"):
            raise ValueError(f"track must be 'full' or 'light', got {track!r}")
        if compute_dtype not in ("float32", "float64"):
            raise ValueError(f"compute_dtype must be 'float32' or 'float64', got {compute_dtype!r}")
        self.num_classes = int(num_classes)
        self.dim = int(dim)
        self.track: Track = track
        _check_state_size(self.num_classes, self.dim, track)
        self.check_finite = bool(check_finite)
        self.compute_dtype: ComputeDtype = compute_dtype
        # Shifted rows waiting for their Gram (`_gram_add`): the first `_pending` rows of `_block` (b x d, in the
        # compute dtype), and the float32 Gram output reused per block. Always flushed before the state is read.
        self._block: torch.Tensor | None = None
        self._gram32: torch.Tensor | None = None
        self._pending = 0
        super().__init__(device)
        K, d = self.num_classes, self.dim
        self.add_state("counts", (K,), torch.int64, nonnegative=True)
        self.add_state("shift", (K, d), reduce="shift")
        self.add_state("sum_dev", (K, d))
        self.add_state("sq_dev", (K,), nonnegative=True)
        self.add_state("unit_sums", (K, d))
        if track == "full":
            self.add_state("scatter_dev", (d, d))
        # Per state (emptied by `_touch` whenever the statistics change): the derived values that `moments()`
        # caches, and the checks and read-only views of the raw state (`raw`, `num_samples`, `require_nonempty`)
        self._derived: dict[Hashable, Any] = {}
        self._checked: dict[Hashable, Any] = {}
        self._version = 0
        self._all_shifted = False  # True once every class has its shift (counts never decrease but on load)
        if self._device is not None:
            self._allocate(self._device)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_arrays(
        cls,
        H: Any,
        y: Any,
        num_classes: int | None = None,
        track: Track = "full",
        *,
        batch_size: int | None = None,
        check_finite: bool = True,
        compute_dtype: ComputeDtype = "float64",
    ) -> ClassStats:
        """Statistics of ``H: (N, d)`` with labels ``y: (N,)``; K defaults to ``max(y) + 1``.

        ``batch_size`` streams the rows in chunks (useful for memory-mapped arrays); ``compute_dtype`` as in
        :class:`ClassStats`.
        """
        if batch_size is not None and (isinstance(batch_size, bool) or batch_size < 1):
            raise ValueError(f"batch_size must be a positive int or None, got {batch_size!r}")
        if not hasattr(H, "shape"):
            H = np.asarray(H)
        Ht = to_tensor(H, "features") if batch_size is None else None
        shape = tuple(H.shape)
        if len(shape) != 2:
            raise ValueError(f"features must be 2-D (N, d), got shape {shape}")
        yt = to_tensor(y, "labels")
        if num_classes is None:
            if yt.numel() == 0:
                raise ValueError("cannot infer num_classes from empty labels; pass num_classes")
            check_labels_dtype(yt)
            num_classes = max(int(yt.max()) + 1, 2)
        stats = cls(num_classes, shape[1], track=track, check_finite=check_finite, compute_dtype=compute_dtype)
        if batch_size is None:
            stats.update(Ht, yt)
        else:
            for start in range(0, shape[0], batch_size):
                stats.update(H[start : start + batch_size], yt[start : start + batch_size])
        return stats

    def _allocate(self, device: torch.device) -> None:
        super()._allocate(device)
        self._all_shifted = False

    # ------------------------------------------------------------------ accumulator protocol
    def _config(self) -> dict[str, Any]:
        return {"num_classes": self.num_classes, "dim": self.dim, "track": self.track}

    # compute_dtype is not part of `_config`: it changes rounding, not the meaning of the state, so statistics
    # of either compute dtype merge and load into each other; state_dict records it and `load` restores it.
    @classmethod
    def _from_config(
        cls, config: Mapping[str, Any], buffers: Mapping[str, np.ndarray], device: torch.device | None
    ) -> ClassStats:
        return cls(
            int(config["num_classes"]),
            int(config["dim"]),
            track=config["track"],
            device=device,
            compute_dtype=str(config.get("compute_dtype", "float64")),  # type: ignore[arg-type]
        )

    def state_dict(self) -> dict[str, Any]:
        """The protocol's state dict (pending Gram rows flushed first) plus ``compute_dtype``."""
        self._flush()
        return {**super().state_dict(), "compute_dtype": self.compute_dtype}

    def merge(self, other: ClassStats) -> ClassStats:
        """Add the statistics of ``other`` (disjoint data, same configuration; its ``compute_dtype`` may differ,
        ``self`` keeps its own) into ``self``, exactly; returns ``self``."""
        self._flush()
        if isinstance(other, ClassStats):
            other._flush()
        return super().merge(other)

    def _before_reduce(self) -> None:
        self._flush()  # pending Gram rows belong to this rank's sum

    def _touch(self) -> None:
        """The statistics changed: a new state version, and the values of the previous one dropped."""
        self._version += 1
        self._derived.clear()
        self._checked.clear()

    def _changed(self) -> None:
        self._touch()
        self._all_shifted = False  # a loaded or reset state may lack shifts the skip assumed
        self._pending = 0  # rows of a replaced state (every combining operation flushed them first)

    def _shift_counts(self) -> torch.Tensor:
        assert self._state is not None
        return self._state["counts"]

    def _check_consistency(self, sd: Mapping[str, Any]) -> None:
        """Identities of the moments about the shifts ``z = h - s_y`` (rounding allowed for, relative 1e-6): a
        class with no samples has zero sums; ``||sum z||^2 <= n sum ||z||^2`` (Cauchy-Schwarz);
        ``||sum h/||h|| || <= n``; ``trace(scatter_dev) = sum_k sq_dev_k`` with a nonnegative diagonal."""
        st = sd["state"]
        if st is None:
            return
        n = np.asarray(st["counts"]).astype(np.float64)
        S, q, U = (np.asarray(st[k]) for k in ("sum_dev", "sq_dev", "unit_sums"))
        empty = n == 0
        if (S[empty] != 0).any() or (q[empty] != 0).any() or (U[empty] != 0).any():
            k = int(np.flatnonzero(empty & ((S != 0).any(1) | (q != 0) | (U != 0).any(1)))[0])
            raise ValueError(f"state is inconsistent: class {k} has no samples but nonzero sums")
        rtol = 1e-6
        s2 = (S * S).sum(axis=1)
        bad = s2 > n * q * (1 + rtol) + np.finfo(np.float64).tiny
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            raise ValueError(
                f"state is inconsistent: class {k} has ||sum_dev||^2 = {s2[k]:.6g} > counts * sq_dev = "
                f"{n[k] * q[k]:.6g} (impossible for {int(n[k])} samples)"
            )
        u = np.sqrt((U * U).sum(axis=1))
        bad = u > n * (1 + rtol)
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            raise ValueError(f"state is inconsistent: class {k} has ||unit_sums|| = {u[k]:.6g} > counts = {int(n[k])}")
        if "scatter_dev" in st:
            diag = np.diagonal(np.asarray(st["scatter_dev"]))
            if (diag < 0).any():
                raise ValueError("state is inconsistent: scatter_dev has a negative diagonal entry")
            tr, total = float(diag.sum()), float(q.sum())
            if abs(tr - total) > rtol * max(tr, total):
                raise ValueError(f"state is inconsistent: trace(scatter_dev) = {tr:.6g} but sum(sq_dev) = {total:.6g}")

    def _reshift(
        self, state: Mapping[str, torch.Tensor], counts: torch.Tensor, to: Mapping[str, torch.Tensor]
    ) -> dict[str, torch.Tensor]:
        """Moments about ``to["shift"]``: with ``delta = shift - to`` per class, ``S + n delta``,
        ``q + 2 <delta, S> + n ||delta||^2`` and ``C + delta^T S + S^T delta + sum_k n_k delta_k delta_k^T``."""
        has = counts > 0
        delta = torch.where(has[:, None], state["shift"] - to["shift"], torch.zeros_like(to["shift"]))
        S = state["sum_dev"]
        nf = counts.to(torch.float64)
        out = {
            "sum_dev": S + nf[:, None] * delta,
            "sq_dev": state["sq_dev"] + 2 * (delta * S).sum(dim=1) + nf * (delta * delta).sum(dim=1),
        }
        if "scatter_dev" in state:
            C = state["scatter_dev"]
            # CPU accumulators hold one triangle (syrk); mirroring a full symmetric matrix leaves it unchanged
            C = torch.tril(C) + torch.tril(C, -1).T
            cross = delta.T @ S
            out["scatter_dev"] = C + cross + cross.T + (delta * nf[:, None]).T @ delta
        return out

    def __add__(self, other: ClassStats) -> ClassStats:
        out = self.copy()
        return out.merge(other)

    def copy(self) -> ClassStats:
        """An independent copy (same configuration and state, same device)."""
        self._flush()
        out = ClassStats(
            self.num_classes,
            self.dim,
            track=self.track,
            check_finite=self.check_finite,
            compute_dtype=self.compute_dtype,
        )
        if self._state is not None:
            out._device = self._device
            out._state = {k: v.clone() for k, v in self._state.items()}
        out._reduced = self._reduced  # the same samples of every rank: reducing the copy again would double them
        return out

    # ------------------------------------------------------------------ accumulation
    def update(self, features: Any, labels: Any) -> ClassStats:
        """Accumulate a batch: ``features (B, d)`` of any float dtype, ``labels (B,)`` integers in ``[0, K)``."""
        x, y = check_batch(features, labels, self.dim)
        B = x.shape[0]
        if B == 0:
            return self
        # Every check runs on the batch's own device before the state is allocated or touched: a rejected
        # batch leaves no trace, not even the device the first batch would pin.
        check_label_range(y, self.num_classes)
        # The O(B d) passes below are memory-bound; on the CPU they run on one torch thread so that torch's
        # OpenMP workers do not spin on the cores that the BLAS syrk needs next (measured 2-3x slower otherwise,
        # benchmarks/RESULTS.md). Row chunks bound the float64 work memory whatever the batch size.
        with torch_threads(1, x.device):
            norms = self._row_norms(x)
        if self._state is None:
            self._allocate(x.device)
        dev = self._device
        # x keeps its own float dtype: each operation below promotes to float64 as it reads it, which saves
        # materialising a float64 copy of the batch (these passes are memory-bound on the CPU).
        x = x.to(device=dev)
        y = y.to(device=dev, dtype=torch.int64)
        norms = norms.to(device=dev)
        rows = self._update_rows(B)
        with torch_threads(1, dev):
            for start in range(0, B, rows):
                stop = start + rows
                z = self._accumulate_light(x[start:stop], y[start:stop], norms[start:stop])
                if self.track == "full":
                    self._gram_add(z)
        self._touch()
        return self

    def gram_block_rows(self) -> int:
        """Rows ``b`` of the blocks whose Gram is formed at once: 2,048, fewer for wide features (the block buffer
        is at most 2M entries, 8 MB in float32), at least 256. Measured on 2 CPU cores at d = 256-512: float32
        ``ssyrk`` plus the float64 add per block is within noise of its best per row from 1,024 to 4,096 rows,
        10-25% slower at 256 (benchmarks/RESULTS.md)."""
        return max(256, min(2048, (1 << 21) // self.dim))

    def _gram_add(self, z: torch.Tensor) -> None:
        """``C += z^T z`` for shifted float64 rows ``z``, through the block buffer: rows are coalesced until a
        block of :meth:`gram_block_rows` is full, so that small batches still give efficient rank-b updates.
        float64 batches of at least half a block (1,024 rows at d <= 1,024), arriving with nothing pending, go
        straight to ``dsyrk`` without the copy (smaller ones pair up: one copy buys a rank-2B update)."""
        b = self.gram_block_rows()
        rows = z.shape[0]
        if self.compute_dtype == "float64" and self._pending == 0 and 2 * rows >= b:
            syrk_update(self._state["scatter_dev"], z)  # type: ignore[index]
            return
        if self._block is None or self._block.device != z.device:
            self._block = torch.empty((b, self.dim), dtype=TORCH_DTYPES[self.compute_dtype], device=z.device)
        start = 0
        while start < rows:
            take = min(rows - start, b - self._pending)
            self._block[self._pending : self._pending + take].copy_(z[start : start + take])
            self._pending += take
            start += take
            if self._pending == b:
                self._flush()

    def _flush(self) -> None:
        """Add the Gram of the pending rows of the block buffer to the float64 scatter accumulator."""
        if self._pending == 0 or self._state is None:
            self._pending = 0
            return
        block = self._block[: self._pending]  # type: ignore[index]
        self._pending = 0
        C = self._state["scatter_dev"]
        if block.dtype == torch.float64:
            syrk_update(C, block)
            return
        if C.device.type == "cpu":
            if self._gram32 is None:
                self._gram32 = torch.zeros((self.dim, self.dim), dtype=torch.float32)
            syrk_update(self._gram32, block, beta=0.0)
            C.add_(self._gram32)  # the other triangle of the float32 Gram stays zero, C's is not maintained
        else:
            with exact_float32_matmul():
                C.add_(block.T @ block)

    def _update_rows(self, rows: int) -> int:
        """Rows per accumulation chunk. Light: :meth:`_chunk_rows` (cache-sized). Full: one rank-B syrk for
        batches of up to 2M entries, else chunks of that size (two float64 work buffers of at most 16 MB each;
        rank updates of a few hundred rows or more keep the syrk efficient)."""
        if self.track == "light":
            return self._chunk_rows(rows)
        return rows if rows * self.dim <= (1 << 21) else max(64, (1 << 21) // self.dim)

    def _chunk_rows(self, rows: int) -> int:
        return chunk_rows(rows, self.dim)

    def _row_norms(self, x: torch.Tensor) -> torch.Tensor:
        """Float64 row norms ``(B, 1)`` (the unit sums need them); NaN/inf anywhere in a row makes its norm
        non-finite, which rejects the batch before any accumulator changes (a rejected batch leaves no trace)."""
        rows = self._chunk_rows(x.shape[0])  # chunks: the float64 upcast inside the norm stays in cache
        parts = [
            torch.linalg.vector_norm(x[i : i + rows], dim=1, keepdim=True, dtype=torch.float64)
            for i in range(0, x.shape[0], rows)
        ]
        norms = parts[0] if len(parts) == 1 else torch.cat(parts)
        if not self.check_finite:
            return norms
        lo, hi = torch.aminmax(norms)
        # one reduction and one device sync in the common case; NaN fails both comparisons, and exact zero rows
        # (lo = 0) take the exact check below, which allows them
        if not bool((lo >= _MIN_ROW_NORM) & (hi <= _MAX_ROW_NORM)):
            small = norms < _MIN_ROW_NORM
            bad = ~torch.isfinite(x).all(dim=1)
            if bool(bad.any()):
                rows = torch.nonzero(bad).flatten()[:5].tolist()
                raise ValueError(f"features contain NaN or inf (first bad rows of this batch: {rows})")
            large = norms.flatten() > _MAX_ROW_NORM
            if bool(large.any()):
                rows = torch.nonzero(large).flatten()[:5].tolist()
                raise ValueError(
                    f"features are too large for float64 accumulation (squared norms overflow above "
                    f"{_MAX_ROW_NORM:.2g}; first rows of this batch: {rows}); divide the features by a constant "
                    f"(the collapse metrics are scale-invariant)"
                )
            # exact zero rows (e.g. dead ReLU features) are fine; nonzero rows whose squares underflow are not
            tiny = small.flatten() & (x != 0).any(dim=1)
            if bool(tiny.any()):
                rows = torch.nonzero(tiny).flatten()[:5].tolist()
                raise ValueError(
                    f"features are too small for float64 accumulation (squared norms underflow below "
                    f"{_MIN_ROW_NORM:.2g}; first rows of this batch: {rows}); multiply the features by a constant "
                    f"(the collapse metrics are scale-invariant)"
                )
        return norms

    def clear_memo(self) -> None:
        """Drop the derived values cached by :meth:`moments` (the d x d matrices the accessors and metrics called
        on this ClassStats computed; they are recomputed on demand). A cache whose lifetime a caller controls is a
        :class:`~nclab.stats.ClassMoments` view of its own."""
        self._derived.clear()

    def _accumulate_light(self, x: torch.Tensor, y: torch.Tensor, norms: torch.Tensor) -> torch.Tensor:
        """Add a validated batch (with its row norms) to every O(K d) accumulator; returns the shifted z."""
        dev = self._device
        B = x.shape[0]
        st = self._state
        assert st is not None
        # Two (B, d) float64 work buffers from the per-thread pool (`work_buffers`): fresh multi-MB temporaries
        # cost more in page faults than the arithmetic itself (benchmarks/RESULTS.md). u holds x in float64 (one
        # conversion; mixed-dtype arithmetic is slower in torch), z the shifted features.
        z, u = self._scratch(B)
        u.copy_(x)
        # Fix the shift of every class seen for the first time: its first sample in this batch (skipped, with
        # its device sync, once every class has a shift).
        if not self._all_shifted:
            first = torch.full((self.num_classes,), B, dtype=torch.int64, device=dev)
            first.scatter_reduce_(0, y, torch.arange(B, device=dev), reduce="amin")
            new = (first < B) & (st["counts"] == 0)
            if bool(new.any()):
                st["shift"][new] = u[first[new]]
            self._all_shifted = bool(((first < B) | (st["counts"] > 0)).all())

        torch.index_select(st["shift"], 0, y, out=z)
        torch.sub(u, z, out=z)
        st["counts"] += torch.bincount(y, minlength=self.num_classes)
        st["sum_dev"].index_add_(0, y, z)
        st["sq_dev"].index_add_(0, y, torch.linalg.vecdot(z, z))
        # A zero feature has no direction: it contributes the zero vector to the unit sums.
        st["unit_sums"].index_add_(0, y, u.mul_(torch.where(norms > 0, norms, torch.ones_like(norms)).reciprocal()))
        return z

    def _scratch(self, rows: int) -> tuple[torch.Tensor, torch.Tensor]:
        return work_buffers(2, rows, self.dim, self._device)  # type: ignore[arg-type]

    # ------------------------------------------------------------------ accessors
    def _get(self, key: str) -> np.ndarray:
        if key == "scatter_dev":
            self._flush()
        if self._state is None:
            if key == "counts":
                return np.zeros(self.num_classes, dtype=np.int64)
            if key == "scatter_dev":
                return np.zeros((self.dim, self.dim))
            if key == "sq_dev":
                return np.zeros(self.num_classes)
            return np.zeros((self.num_classes, self.dim))
        t = self._state[key]
        arr = t.numpy() if t.device.type == "cpu" else t.cpu().numpy()
        if key in _OVERFLOWABLE and not self._finite(key, arr):
            # every accepted row is finite with finite squares, so only many rows near the bound get here
            raise ValueError(
                f"the accumulated {key} overflowed float64 ({self.num_samples} samples whose norms lie near "
                f"{_MAX_ROW_NORM:.2g}); divide the features by a constant (the collapse metrics are scale-invariant)"
            )
        return arr

    def _finite(self, key: str, arr: np.ndarray) -> bool:
        """Whether the state part ``key`` is finite (scanned once per state)."""
        done = self._checked.get(("finite", key))
        if done is None:
            done = self._checked[("finite", key)] = bool(np.isfinite(arr).all())
        return done

    @property
    def state_version(self) -> int:
        """A number that changes whenever the statistics change (update, merge, all_reduce, load, reset): how a
        :class:`~nclab.stats.ClassMoments` view knows that its cached values are stale."""
        return self._version

    def raw(self, name: str) -> np.ndarray:
        """The raw moment ``name`` of the state, a read-only float64 (``counts``: int64) numpy view, no copy on the
        CPU: ``counts (K,)``, ``shift (K, d)`` (the first sample of each class), ``sum_dev (K, d)`` and
        ``sq_dev (K,)`` (sums of ``z = h - shift_y`` and of ``||z||^2``), ``unit_sums (K, d)`` and, with
        ``track="full"``, ``scatter_dev (d, d)`` (``sum z z^T``; on the CPU only its lower triangle is maintained,
        :meth:`ClassMoments.within_scatter <nclab.stats.ClassMoments.within_scatter>` mirrors it). Zeros before the
        first batch. Raises ``ValueError`` when a sum of squares overflowed float64."""
        view = self._checked.get(("raw", name))
        if view is None:
            if name not in self._specs:
                raise ValueError(f"unknown raw moment {name!r}; these ClassStats hold {', '.join(self._specs)}")
            view = self._get(name).view()
            view.setflags(write=False)
            self._checked[("raw", name)] = view
        elif name == "scatter_dev":
            self._flush()  # rows still pending in the Gram block belong to this state
        return view

    @property
    def counts(self) -> np.ndarray:
        """Samples per class, ``(K,)`` int64 (zeros mark empty classes)."""
        return self._get("counts").copy()

    @property
    def num_samples(self) -> int:
        """Total sample count N."""
        n = self._checked.get("num_samples")
        if n is None:
            n = self._checked["num_samples"] = int(self._get("counts").sum())
        return n

    @property
    def empty_classes(self) -> np.ndarray:
        """Indices of classes with no sample."""
        return np.flatnonzero(self._get("counts") == 0)

    def require_nonempty(self, what: str) -> np.ndarray:
        """Counts ``(K,)``; raises :class:`EmptyClassError` naming the empty classes (``what`` needs them all)."""
        checked = self._checked.get("nonempty")  # checked once per state
        if checked is None:
            counts = self._get("counts").copy()
            counts.setflags(write=False)
            checked = self._checked["nonempty"] = (counts, np.flatnonzero(counts == 0))
        counts, empty = checked
        if empty.size:
            shown = ", ".join(map(str, empty[:10])) + (" ..." if empty.size > 10 else "")
            raise EmptyClassError(
                f"{what} need a mean for every class, but {empty.size} of {self.num_classes} classes are empty "
                f"(classes {shown}); use stats.drop_empty() to measure the classes present"
            )
        return counts

    @property
    def unit_sums(self) -> np.ndarray:
        """Per-class sums of L2-normalised features ``sum_{y_i=k} h_i / ||h_i||``, ``(K, d)``."""
        return self._get("unit_sums").copy()

    # ------------------------------------------------------------------ derived statistics (ClassMoments)
    def moments(self) -> ClassMoments:
        """The derived statistics of these statistics (:class:`~nclab.stats.ClassMoments`), over the cache that this
        ClassStats keeps for its own accessors below: its values live as long as this ClassStats, until the
        statistics change or :meth:`clear_memo`. For a cache whose lifetime the caller controls (a report's, say),
        build an independent view: ``ClassMoments(stats)``."""
        return ClassMoments(self, cache=self._derived)

    # The accessors below read `moments()` (the computations and their documentation live in ClassMoments).
    @property
    def means(self) -> np.ndarray:
        """Class means ``mu_k``, ``(K, d)``; raises :class:`EmptyClassError` if a class is empty
        (:attr:`ClassMoments.means <nclab.stats.ClassMoments.means>`)."""
        return self.moments().means

    def global_mean(self, weighting: Weighting = "balanced") -> np.ndarray:
        """``(d,)``: the mean of class means (``"balanced"``) or the sample mean (``"empirical"``)."""
        return self.moments().global_mean(weighting)

    def centered_means(self, weighting: Weighting = "balanced") -> np.ndarray:
        """``M = mu_k - mu_G``, ``(K, d)``."""
        return self.moments().centered_means(weighting)

    @property
    def class_ss(self) -> np.ndarray:
        """Per-class sum of squared deviations ``sum_{y_i=k} ||h_i - mu_k||^2``, ``(K,)`` (0 for empty classes)."""
        return self.moments().class_ss

    def within_scatter(self, copy: bool = True) -> np.ndarray:
        """Pooled within-class scatter, ``(d, d)`` (:meth:`ClassMoments.within_scatter
        <nclab.stats.ClassMoments.within_scatter>`; ``copy=False``: the read-only cached array)."""
        return self.moments().within_scatter(copy)

    def sigma_w(self, copy: bool = True) -> np.ndarray:
        """Within-class covariance ``Sigma_W``, ``(d, d)`` (:meth:`ClassMoments.sigma_w
        <nclab.stats.ClassMoments.sigma_w>`; ``copy=False``: the read-only cached array)."""
        return self.moments().sigma_w(copy)

    def sigma_b(self, weighting: Weighting = "balanced", copy: bool = True) -> np.ndarray:
        """Between-class covariance ``Sigma_B``, ``(d, d)`` (:meth:`ClassMoments.sigma_b
        <nclab.stats.ClassMoments.sigma_b>`)."""
        return self.moments().sigma_b(weighting, copy)

    def between_factor(self, weighting: Weighting = "balanced") -> np.ndarray:
        """``A``, ``(K, d)``, with ``sigma_b(weighting) = A^T A`` (:meth:`ClassMoments.between_factor
        <nclab.stats.ClassMoments.between_factor>`)."""
        return self.moments().between_factor(weighting)

    def sigma_t(self, copy: bool = True) -> np.ndarray:
        """Total covariance about the sample mean, ``(d, d)`` (:meth:`ClassMoments.sigma_t
        <nclab.stats.ClassMoments.sigma_t>`)."""
        return self.moments().sigma_t(copy)

    def trace_w(self) -> float:
        """``Tr Sigma_W = (1/N) sum_k class_ss_k`` (available in light mode)."""
        return self.moments().trace_w()

    def trace_b(self, weighting: Weighting = "balanced") -> float:
        """``Tr Sigma_B`` (available in light mode)."""
        return self.moments().trace_b(weighting)

    def mean_gram(self, center: bool = True, weighting: Weighting = "balanced") -> np.ndarray:
        """Gram matrix of class means ``M M^T``, ``(K, K)``; centred about ``global_mean(weighting)``."""
        return self.moments().mean_gram(center, weighting)

    def drop_empty(self) -> ClassStats:
        """A copy restricted to the classes that have samples (relabelled 0..K'-1 in order)."""
        keep = np.flatnonzero(self._get("counts") > 0)
        if keep.size < 2:
            raise ValueError(f"only {keep.size} class(es) have samples; collapse metrics need at least 2")
        self._flush()
        out = ClassStats(
            int(keep.size),
            self.dim,
            track=self.track,
            check_finite=self.check_finite,
            compute_dtype=self.compute_dtype,
        )
        assert self._state is not None
        idx = torch.as_tensor(keep, device=self._device)
        out._device = self._device
        out._state = {
            k: (v.clone() if k == "scatter_dev" else v.index_select(0, idx).clone()) for k, v in self._state.items()
        }
        out._reduced = self._reduced
        return out

    def __repr__(self) -> str:
        return (
            f"ClassStats(num_classes={self.num_classes}, dim={self.dim}, track={self.track!r}, "
            f"num_samples={self.num_samples}, device={self._device}"
            + (f", compute_dtype={self.compute_dtype!r})" if self.compute_dtype != "float64" else ")")
        )


# ---------------------------------------------------------------------- helpers
# Rows with a norm below this (sqrt of 2^20 times the smallest normal float64, ~1.5e-151) have squares that
# underflow to subnormals or 0: their variances and scatter would lose every digit.
_MIN_ROW_NORM = float(np.sqrt(np.finfo(np.float64).tiny * 2.0**20))
# Rows with a norm above this (~8.4e152) have squares within 2^8 of the largest float64: sums of squares over a
# class and the cross terms of the scatter overflow partway and lose every digit (probe row 26: 1e153).
_MAX_ROW_NORM = float(np.sqrt(np.finfo(np.float64).max / 2.0**8))
# Sums of squares that more rows near _MAX_ROW_NORM than that headroom could still overflow: checked when read.
_OVERFLOWABLE = frozenset({"sum_dev", "sq_dev", "scatter_dev"})


def _check_state_size(K: int, d: int, track: Track) -> None:
    """Refuse (:class:`nclab.memory.AllocationTooLarge`) state that does not fit: three K x d float64 arrays,
    plus the d x d scatter for ``track="full"``."""
    kd, dd = 3.0 * 8 * K * d, 8.0 * d * d if track == "full" else 0.0
    if track == "full" and dd >= kd:
        alternative = (
            "use track='light' (trace ratio, CDNV, cosines and the NC2/NC3 metrics need only the K x d state; "
            "`nclab measure --track light`), or reduce d (e.g. a random projection)"
        )
    else:
        alternative = "use fewer classes (check the labels: is K right?) or reduce d"
    check_allocation(
        kd + dd,
        what=f"ClassStats(num_classes={K}, dim={d}, track={track!r})"
        + (f" (the d x d scatter alone: {format_bytes(dd)})" if dd else ""),
        alternative=alternative,
    )


def check_labels_dtype(y: torch.Tensor) -> None:
    """Labels must have an integer dtype (float labels are an error, not silently truncated)."""
    if y.is_floating_point() or y.is_complex() or y.dtype == torch.bool:
        raise TypeError(f"labels must have an integer dtype, got {y.dtype}")


def check_batch(features: Any, labels: Any, dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Validate one ``(features (B, d), labels (B,))`` batch; return them as tensors (no copy when possible).

    The one place for batch validation of every streaming accumulator (ClassStats, NCCAccumulator, ...):
    2-D float features of dimension ``dim``, 1-D integer labels with one entry per row.
    """
    x = to_tensor(features, "features")
    y = to_tensor(labels, "labels")
    for name, t in (("features", x), ("labels", y)):
        if t.device.type == "meta":  # no data to read: every value check below would fail obscurely
            raise ValueError(f"{name} are on the 'meta' device (no data); move them to 'cpu' or 'cuda' first")
    if x.ndim != 2:
        raise ValueError(f"features must be 2-D (B, d), got shape {tuple(x.shape)}")
    if x.shape[1] != dim:
        raise ValueError(f"features have dim {x.shape[1]}, but these statistics were built for dim {dim}")
    if not x.is_floating_point():
        raise TypeError(f"features must have a floating dtype, got {x.dtype}")
    if y.ndim != 1 or y.shape[0] != x.shape[0]:
        raise ValueError(
            f"labels must be 1-D with one entry per feature row: features {tuple(x.shape)}, labels {tuple(y.shape)}"
        )
    check_labels_dtype(y)
    return x, y


def check_label_range(y: torch.Tensor, num_classes: int) -> None:
    """Labels (non-empty) must lie in ``[0, num_classes)``."""
    lo, hi = torch.aminmax(y)
    ymin, ymax = int(lo), int(hi)
    if ymin < 0 or ymax >= num_classes:
        bad = ymin if ymin < 0 else ymax
        raise ValueError(f"label {bad} is out of range [0, {num_classes})")
