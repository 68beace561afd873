"""Accumulation lanes of :class:`~nclab.stats.ClassStats`: the O(B d) passes and the Gram of a run of rows.

A lane adds validated rows (labels in range, features screened by ``ClassStats.update``) to the float64
accumulators it is given: ``sum_dev``, ``sq_dev``, ``unit_sums`` and ``scatter_dev`` of the rows shifted by their
class's shift, ``z = x - s_y``. ``ClassStats`` splits the rows of a large batch between lanes that run on
separate threads (every library single-threaded inside a lane, so that no thread pool spins on the cores another
one needs); lane 0 adds into the statistics' own state, the others into float64 accumulators of their own that
``ClassStats`` merges on read. Counts and shifts are set by ``ClassStats`` before the lanes run.

Two ways through a lane:

``add_float32`` (``compute_dtype="float32"``, float32 rows, shifts representable in float32)
    ``z = x - s_y`` is formed in float32 directly in the Gram block (one rounding, as the float64 difference
    rounded to float32); ``sum z`` and ``sum w z`` (``w = 1 / ||x||``) go into float32 partial sums of at most
    ``b`` rows per class, flushed into the float64 state; ``||z||^2`` per row in float32, summed in float64;
    the block's Gram in float32 when it holds ``b`` rows. Unit sums are ``s_k sum w + sum w z``: the float32 part
    only carries the within-class deviations. Error bounds: docs/stats.md.
``add_float64`` (everything else)
    every O(B d) pass in float64 (the rows converted once into a per-thread work buffer); the Gram in float64
    (``dsyrk``) or, for ``compute_dtype="float32"``, in float32 blocks of the float64 ``z`` rounded once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import torch

from nclab.stats._gram_pipeline import GramPipeline
from nclab.stats._kernels import accelerated, gram_add, syrk_update, work_buffers

__all__ = ["MAX_LANES", "MIN_LANE_ROWS", "PARTIAL_ROWS", "Lane", "LaneSpec", "run_lanes"]

#: Most lanes (threads) one update uses; a lane gets at least :data:`MIN_LANE_ROWS` rows.
MAX_LANES = 4
MIN_LANE_ROWS = 256
#: Most rows of one class in a float32 partial sum before it is added into float64 (more when one piece of a batch
#: brings more rows of a class: the bound is then the piece's, at most ``block_rows``).
PARTIAL_ROWS = 64
#: float64 runs of at least this many rows get their own ``dsyrk`` (smaller ones are coalesced into a block).
DIRECT_SYRK_ROWS = 256
#: Largest float64 work chunk of ``add_float64`` in entries: 2M on the CPU (two 16 MB buffers that stay near the
#: caches), 16M on accelerators (their O(B d) passes are launch-bound, not cache-bound).
CPU_CHUNK = 1 << 21
DEVICE_CHUNK = 1 << 24


@dataclass(frozen=True)
class LaneSpec:
    """What every lane of one ClassStats needs to know."""

    K: int
    d: int
    full: bool  # keep the d x d scatter
    unit_sums: bool
    block_rows: int  # b: rows of one float32 Gram block (and of a float32 partial sum per class)


class Lane:
    """One thread's share of an update: buffers, float32 partial sums, the pending Gram block.

    ``target`` (a dict of the float64 accumulators ``sum_dev``, ``sq_dev``, ``unit_sums``, ``scatter_dev``) is
    passed to every call: lane 0 adds into the statistics' state, other lanes into :meth:`own`.
    """

    def __init__(self, spec: LaneSpec, device: torch.device) -> None:
        self.spec = spec
        self.device = device
        self.block: torch.Tensor | None = None  # (b, d) rows waiting for their Gram, float32 or float64
        self.pending = 0
        self._gram: torch.Tensor | None = None  # (d, d) work matrix of the CPU Gram, in the block's dtype
        # Set per update: other lanes run at the same time. scipy's BLAS calls then wait for each other (measured
        # on 2 cores: two threads' dsyrk take as long as one after the other, numpy's X.T @ X run at once), so
        # every Gram goes through numpy, from blocks (numpy's syrk is slow on short runs: 1.34x at 500 rows).
        self.parallel = False
        self._own: dict[str, torch.Tensor] | None = None
        # float32 partial sums since the last flush_partials (add_float32 only): sum z, sum w z, and per class
        # the sums of the two columns of the rows' `aux` (||z||^2, w)
        self._sums: torch.Tensor | None = None
        self._units: torch.Tensor | None = None
        self._aux: torch.Tensor | None = None
        self._scratch: torch.Tensor | None = None  # float32 (b, d): w z
        self._part_rows: torch.Tensor | None = None  # per class, at least its rows in the partial sums (CPU)
        self._partial = False  # the partial sums hold rows
        self.dirty = False
        # float32 block Grams formed on worker threads (lane 0 of a multi-core float32 update, :meth:`use_pipeline`)
        self.pipe: GramPipeline | None = None

    def __getstate__(self) -> dict[str, Any]:
        """A copy of the lane without its Gram workers (``ClassStats.__getstate__`` drained them): the copy makes
        its own at its next update."""
        state = dict(self.__dict__)
        if self.pipe is not None:
            if self.pipe.busy:
                raise RuntimeError("a lane with block Grams in flight cannot be copied; drain its pipeline first")
            state["pipe"] = None
        return state

    # ------------------------------------------------------------------ targets
    def own(self) -> dict[str, torch.Tensor]:
        """The float64 accumulators of a lane other than lane 0 (zeros until it adds rows)."""
        if self._own is None:
            K, d = self.spec.K, self.spec.d

            def z(*shape: int) -> torch.Tensor:
                return torch.zeros(shape, dtype=torch.float64, device=self.device)

            self._own = {"sum_dev": z(K, d), "sq_dev": z(K)}
            if self.spec.unit_sums:
                self._own["unit_sums"] = z(K, d)
            if self.spec.full:
                self._own["scatter_dev"] = z(d, d)
        return self._own

    def merge_own_into(self, state: dict[str, torch.Tensor]) -> None:
        """Add :meth:`own` into ``state`` and zero it (after :meth:`flush`)."""
        if self._own is None:
            return
        for name, t in self._own.items():
            state[name] += t
            t.zero_()

    def discard(self) -> None:
        """Forget every row not yet in a target (the state they belonged to was replaced)."""
        if self.pipe is not None:
            self.pipe.discard()
        self.pending = 0
        self._partial = False
        for t in (self._sums, self._units, self._aux, self._part_rows):
            if t is not None:
                t.zero_()
        if self._own is not None:
            for t in self._own.values():
                t.zero_()
        self.dirty = False

    # ------------------------------------------------------------------ float32 rows, float32 compute
    def add_float32(
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        aux: torch.Tensor,
        per_class: torch.Tensor | None,
        shifts: tuple[torch.Tensor, torch.Tensor],
        target: dict[str, torch.Tensor],
    ) -> None:
        """Add float32 rows ``x (n, d)`` with labels ``y (n,)``. ``aux (n, 1 or 2)``: a float32 work array whose
        second column (with unit sums) holds the rows' inverse norms ``w``; the first receives ``||z||^2``.
        ``per_class``: at least the rows of each class in ``x`` (the batch's counts; None on accelerators);
        ``shifts``: the float64 shifts and the same values in float32."""
        b = self.spec.block_rows
        shift, shift32 = shifts
        self._ensure_float32_buffers(target)
        self.dirty = True
        start, n = 0, x.shape[0]
        while start < n:
            # A run that does not fit the block starts a new one if the block is at least half full (a Gram of
            # b/2 rows is as efficient as one of b; splitting the run costs a piece's per-call overheads)
            if self.pending and self.pending + n - start > b and (2 * self.pending >= b or not self.spec.full):
                self.flush_gram(target)
            take = min(n - start, b - self.pending)
            stop = start + take
            ys, a = y[start:stop], aux[start:stop]
            self._make_room_in_partials(per_class, shift, target)
            # made by _ensure_float32_buffers above
            assert self.block is not None and self._sums is not None and self._aux is not None
            z = self.block[self.pending : self.pending + take]
            torch.index_select(shift32, 0, ys, out=z)
            torch.sub(x[start:stop], z, out=z)
            self._sums.index_add_(0, ys, z)
            # ||z||^2 from the float32 norm (a fused reduction: faster than vecdot's product and sum)
            zn = torch.linalg.vector_norm(z, dim=1)
            torch.mul(zn, zn, out=a[:, 0])
            self._aux.index_add_(0, ys, a)
            if self._units is not None:
                assert self._scratch is not None  # made with the unit sums' partials
                wz = torch.mul(z, a[:, 1:], out=self._scratch[:take])
                self._units.index_add_(0, ys, wz)
            self.pending += take
            start = stop

    def _ensure_float32_buffers(self, target: dict[str, torch.Tensor]) -> None:
        K, d, b, dev = self.spec.K, self.spec.d, self.spec.block_rows, self.device
        if self.block is None or self.block.dtype != torch.float32:
            self.flush_gram(target)  # rows of a float64 block (float64 passes of an earlier batch)
            self.block = torch.empty((b, d), dtype=torch.float32, device=dev)
        if self._sums is not None:
            return
        self._sums = torch.zeros((K, d), dtype=torch.float32, device=dev)
        self._aux = torch.zeros((K, 2 if self.spec.unit_sums else 1), dtype=torch.float32, device=dev)
        if self.spec.unit_sums:
            self._units = torch.zeros((K, d), dtype=torch.float32, device=dev)
            self._scratch = torch.empty((b, d), dtype=torch.float32, device=dev)

    def _make_room_in_partials(
        self, per_class: torch.Tensor | None, shift: torch.Tensor, target: dict[str, torch.Tensor]
    ) -> None:
        """Flush the float32 partial sums if a piece with at most ``per_class`` rows of each class could take one
        of them past :data:`PARTIAL_ROWS` rows, then count the piece in. A float32 sum of m rows that drift away
        from the shift carries a rounding error of ~sqrt(m / 3) u of its value: flushing every 64 rows of a class
        keeps it under 5 u, at one flush per ~6 batches at K = 100 and per ~64 at K = 1,000. On accelerators
        (``per_class`` None: the counts would need a device sync) the partial sums are flushed before every
        piece (a few K x d operations)."""
        if per_class is None:
            if self._partial:
                self.flush_partials(shift, target)
        else:
            if self._part_rows is None:
                self._part_rows = torch.zeros_like(per_class)
            self._part_rows += per_class
            if self._partial and int(self._part_rows.max()) > PARTIAL_ROWS:
                self.flush_partials(shift, target)
                self._part_rows.copy_(per_class)
        self._partial = True

    def flush_partials(self, shift: torch.Tensor, target: dict[str, torch.Tensor]) -> None:
        """Add the float32 partial sums into the float64 ``target``: ``sum_dev += S``, ``sq_dev += sum ||z||^2``,
        ``unit_sums += U + s_k sum_k w`` (``U`` holds ``sum w z``)."""
        if self._sums is None or self._aux is None:
            return
        target["sum_dev"] += self._sums
        self._sums.zero_()
        target["sq_dev"] += self._aux[:, 0]
        if self._units is not None:
            target["unit_sums"].add_(self._units).addcmul_(shift, self._aux[:, 1:].to(torch.float64))
            self._units.zero_()
        self._aux.zero_()
        self._partial = False
        if self._part_rows is not None:
            self._part_rows.zero_()

    # ------------------------------------------------------------------ float64 passes
    def add_float64(
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        norms: torch.Tensor | None,
        shift: torch.Tensor,
        target: dict[str, torch.Tensor],
        gram32: bool = False,
    ) -> None:
        """Add rows ``x (n, d)`` (any float dtype) with labels ``y`` and float64 row norms ``norms (n,)`` (None:
        computed here from the float64 copy), every O(B d) pass in float64, in chunks of bounded work memory;
        the Gram in float32 blocks if ``gram32`` (float32-safe rows of ``compute_dtype="float32"`` statistics),
        else in float64."""
        self.dirty = True
        n, d = x.shape
        limit = DEVICE_CHUNK if accelerated(self.device) else CPU_CHUNK
        rows = n if n * d <= limit else max(64, limit // d)
        for start in range(0, n, rows):
            stop = min(n, start + rows)
            xs, ys = x[start:stop], y[start:stop]
            z, u = work_buffers(2, stop - start, d, self.device)
            u.copy_(xs)  # one conversion: mixed-dtype arithmetic is slower in torch
            torch.index_select(shift, 0, ys, out=z)
            torch.sub(u, z, out=z)
            target["sum_dev"].index_add_(0, ys, z)
            target["sq_dev"].index_add_(0, ys, torch.linalg.vector_norm(z, dim=1).square_())
            if self.spec.unit_sums:
                nr = norms[start:stop] if norms is not None else torch.linalg.vector_norm(u, dim=1)
                # a zero feature has no direction: it contributes the zero vector to the unit sums
                u.mul_(torch.where(nr > 0, nr, torch.ones_like(nr)).reciprocal()[:, None])
                target["unit_sums"].index_add_(0, ys, u)
            if self.spec.full:
                self._gram_add64(z, target, torch.float32 if gram32 else torch.float64)

    def _gram_add64(self, z: torch.Tensor, target: dict[str, torch.Tensor], dtype: torch.dtype) -> None:
        """``C += z^T z`` for float64 rows, through the block: rows are coalesced until a block of ``b`` is full,
        so that small batches still give efficient rank-b updates. float64 runs of at least
        :data:`DIRECT_SYRK_ROWS`, arriving with nothing pending, go straight to ``dsyrk`` without the copy
        (``dsyrk`` of 250-2,000 rows is within 5% of a whole-matrix ``X.T @ X`` per row at d = 256-512)."""
        b = self.spec.block_rows
        rows = z.shape[0]
        float32_pending = self.block is not None and self.block.dtype != dtype
        direct = rows >= DIRECT_SYRK_ROWS and not self.parallel  # scipy's dsyrk: one lane at a time (below)
        if dtype == torch.float64 and (direct or float32_pending):
            syrk_update(target["scatter_dev"], z)  # the pending rows of a float32 block wait for their own Gram
            return
        if self.block is None or self.block.dtype != dtype:
            self.flush_gram(target)
            self.block = torch.empty((b, self.spec.d), dtype=dtype, device=self.device)
        start = 0
        while start < rows:
            take = min(rows - start, b - self.pending)
            self.block[self.pending : self.pending + take].copy_(z[start : start + take])
            self.pending += take
            start += take
            if self.pending == b:
                self.flush_gram(target)

    # ------------------------------------------------------------------ flushing
    def use_pipeline(self, workers: int) -> None:
        """Form this lane's float32 block Grams on ``workers`` worker threads (``nclab.stats._gram_pipeline``;
        0: in the calling thread, after the blocks already queued)."""
        if workers == (0 if self.pipe is None else self.pipe.workers):
            return
        if self.pipe is not None:
            self.pipe.drain()
        # the caller's block, up to two waiting for a worker (then the caller takes one), one per worker
        self.pipe = GramPipeline(workers, slots=workers + 3) if workers else None

    def gram_due(self, rows: int) -> bool:
        """Whether adding ``rows`` more float32 rows (:meth:`add_float32`) may form a Gram, i.e. call the BLAS:
        the caller sets the BLAS to one thread only for such updates (a pair of threadpoolctl calls per library
        costs ~10-30 us, a few percent of an update at d = 512, and the block's Gram is formed about once every
        ``b / rows`` updates). Conservative: ``True`` whenever a flush is possible."""
        if not self.spec.full:
            return False
        if self.block is not None and self.block.dtype != torch.float32 and self.pending:
            return True  # the rows of a float64 block are flushed first
        return self.pending + rows >= self.spec.block_rows

    def flush_gram(self, target: dict[str, torch.Tensor]) -> None:
        """Add the Gram of the pending block rows to ``target["scatter_dev"]``."""
        if self.pending == 0:
            return
        assert self.block is not None
        rows, block = self.pending, self.block[: self.pending]
        self.pending = 0
        if not self.spec.full:
            return
        if self.pipe is not None:
            if block.dtype == torch.float32:
                # the buffer is the job's from here on: an interrupt inside submit leaves the lane without one
                buffer, self.block = self.block, None
                self.block = self.pipe.submit(buffer, rows, target["scatter_dev"])
                return
            self.pipe.drain()  # the queued float32 blocks are added first
        if block.dtype == torch.float64 and not self.parallel:
            syrk_update(target["scatter_dev"], block)
        else:
            self._gram = gram_add(target["scatter_dev"], block, self._gram, self.parallel)

    def flush(self, shift: torch.Tensor, target: dict[str, torch.Tensor]) -> None:
        """Everything pending (Gram block, float32 partial sums) into ``target``."""
        if not self.dirty:
            return
        if self.pipe is not None:
            with self.pipe.session():
                self.flush_gram(target)
                self.pipe.drain()
        else:
            self.flush_gram(target)
        self.flush_partials(shift, target)
        self.dirty = False


# ---------------------------------------------------------------------- threads
_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=MAX_LANES - 1, thread_name_prefix="nclab-lane")
        return _POOL


def run_lanes(tasks: Sequence[Callable[[], None]]) -> None:
    """Run ``tasks`` at once: the first in the calling thread, the others on the lane threads; returns when all
    are done, raising the first exception any of them raised."""
    if len(tasks) == 1:
        tasks[0]()
        return
    futures = [_pool().submit(t) for t in tasks[1:]]
    error: BaseException | None = None
    try:
        tasks[0]()
    except BaseException as e:  # wait for the other lanes before raising: they write into shared buffers
        error = e
    for f in futures:
        try:
            f.result()
        except BaseException as e:
            error = error or e
    if error is not None:
        raise error
