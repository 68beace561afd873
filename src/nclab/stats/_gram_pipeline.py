"""Block Grams formed off the calling thread: the float32 path of :class:`~nclab.stats.ClassStats` on several cores.

Why: at d = 512 the float32 Gram of a block is ~70% of an update's work and the O(B d) passes (gather, subtract,
index-adds, norms) the rest. Splitting every batch's rows between threads halves the Grams but not the passes: a
1,000-row share is too small to pay for a hand-off, a wake-up and a meeting per batch (benchmarks/RESULTS.md).
Here the calling thread does every O(B d) pass, with no meeting per batch, and hands each full block to a worker
thread that forms its Gram while the next blocks fill; when the workers fall behind (two blocks waiting), the
calling thread forms the oldest waiting block's Gram itself, so the two kinds of work balance between the cores
whatever their ratio.

Exactness and reproducibility: every block's Gram is the same float32 product as on one thread
(:func:`~nclab.stats._kernels.gram_product`: numpy's ``block.T @ block`` at one BLAS thread, for d up to 512) and
the products are added into the float64 scatter in the order the blocks were filled, whichever thread formed them:
the result is bit for bit that of a one-thread run with the same blocks, however the threads were scheduled.

Threads: a product reads OpenBLAS's thread count when it begins, so every product must begin with numpy's and
scipy's BLAS at one thread (a multi-threaded product would wait for the core the other thread uses, and it rounds
differently). A :meth:`GramPipeline.session` of the calling thread (each update that queues or forms Grams, each
read) sets it to one thread, and the calling thread gives it back (:meth:`GramPipeline.settle`, at the end of a
session or at a later update or read) only once no worker forms a product; the workers begin products only while
it is held. Between two updates the setting is therefore one thread while the workers are busy (a few ms after a
block is queued) and the caller's once they are idle; a read leaves nothing in flight and the caller's setting
back. Only the calling thread sets and restores it: OpenBLAS ignores a raise of its thread count from another
thread after the main thread lowered it (measured), so a worker could not give it back.

Interrupts: a job taken off the queue is always finished (formed and added, or marked failed), and a block buffer
belongs to one job or to the caller, never both, so a ``KeyboardInterrupt`` in the calling thread leaves the
pipeline consistent; a product that could not be added makes every later call raise (:meth:`GramPipeline.check`).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass

import numpy as np
import torch

from nclab._threads import single_blas_thread
from nclab.stats._kernels import gram_product

__all__ = ["STEAL_BACKLOG", "GramPipeline"]

#: The calling thread forms a waiting block's Gram itself once this many blocks wait for a worker.
STEAL_BACKLOG = 2
MAX_WORKERS = 3

_EXECUTOR: ThreadPoolExecutor | None = None
_EXECUTOR_LOCK = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    global _EXECUTOR
    with _EXECUTOR_LOCK:
        if _EXECUTOR is None:
            _EXECUTOR = ThreadPoolExecutor(max_workers=MAX_WORKERS, thread_name_prefix="nclab-gram")
        return _EXECUTOR


@dataclass
class _Job:
    seq: int
    block: torch.Tensor  # (b, d) float32 buffer; its first `rows` rows are the block
    rows: int
    target: torch.Tensor  # (d, d) float64 accumulator
    gram: torch.Tensor | None = None  # (d, d) float32 product, once formed


class GramPipeline:
    """Queue float32 blocks, form ``block^T block`` on worker threads (and on the caller's when they fall behind),
    add each product into its float64 target in queue order.

    Parameters
    ----------
    workers : int
        Worker threads this pipeline may occupy at once (at most :data:`MAX_WORKERS`).
    slots : int
        Block buffers in existence at most (the caller's current one included): at least 2.
    """

    def __init__(self, workers: int, slots: int) -> None:
        if not 1 <= workers <= MAX_WORKERS or slots < 2:
            raise ValueError(f"workers must be in [1, {MAX_WORKERS}] and slots >= 2, got {workers}, {slots}")
        self.workers = workers
        self.slots = slots
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)  # a job was added, or a worker failed
        self._add_lock = threading.Lock()  # one thread adds products into the targets at a time, in order
        self._waiting: deque[_Job] = deque()
        self._formed: dict[int, _Job] = {}
        self._free_blocks: list[torch.Tensor] = []
        self._free_grams: list[torch.Tensor] = []
        self._buffers = 1  # the caller's current block
        self._seq = 0  # next job's number
        self._next = 0  # next job to add
        self._in_flight = 0  # queued and not yet added
        self._running = 0  # worker tasks of this pipeline
        self._apply = True
        self._sessions = 0  # the caller's open sessions (nested)
        # the caller's single_blas_thread, entered by a session and left by the caller once no product runs: the
        # workers begin products only while it is held
        self._held: AbstractContextManager[None] | None = None
        self._active = 0  # products the workers are forming
        self._error: BaseException | None = None

    def __del__(self) -> None:
        # no worker holds this pipeline any more, so none is forming a product: the caller's setting comes back
        # (from the thread that frees it; OpenBLAS ignores it from a thread other than the one that lowered it)
        try:
            if self._held is not None:
                self._held.__exit__(None, None, None)
        except Exception:  # at interpreter shutdown there is nothing left to restore for
            pass

    # ------------------------------------------------------------------ the caller's side
    @contextmanager
    def session(self) -> Iterator[None]:
        """A block of the calling thread in which blocks may be queued: the BLAS set to one thread (held until no
        worker forms a product, see :meth:`settle`), the workers started for the blocks that wait."""
        if self._held is None:
            held = single_blas_thread(True)
            held.__enter__()
            self._held = held
        with self._lock:
            self._sessions += 1
            start = min(len(self._waiting), self.workers - self._running)
            self._running += start
        for _ in range(start):
            _executor().submit(self._work)
        try:
            yield
        finally:
            with self._lock:
                self._sessions -= 1
            self.settle()

    def settle(self) -> None:
        """In the calling thread, outside a session: give the BLAS setting back if no worker forms a product
        (the workers then begin none until the next session). A product reads the BLAS thread count when it
        begins, so the setting cannot come back while one may be beginning: it is held while any runs."""
        with self._lock:
            if self._held is None or self._active or self._sessions:
                return
            held, self._held = self._held, None
        held.__exit__(None, None, None)

    def submit(self, block: torch.Tensor, rows: int, target: torch.Tensor) -> torch.Tensor:
        """Queue the Gram of ``block[:rows]`` (``block`` a contiguous float32 ``(b, d)`` CPU tensor, now the
        pipeline's) to be added into ``target`` (float64 ``(d, d)``) after every block queued before it. Returns
        an empty buffer of ``block``'s shape for the next rows. Called inside a :meth:`session`."""
        self.check()
        with self._lock:
            if not self._sessions:
                raise RuntimeError("GramPipeline.submit outside a session")
            self._waiting.append(_Job(self._seq, block, rows, target))
            self._seq += 1
            self._in_flight += 1
            start = self._running < self.workers
            self._running += start
        if start:
            _executor().submit(self._work)
        while self._run_waiting(STEAL_BACKLOG):
            pass
        return self._buffer_like(block)

    def drain(self) -> None:
        """Form and add every queued block (the caller takes the waiting ones); returns when all are added."""
        if self._in_flight:
            with self.session():
                while self._run_waiting(1):
                    pass
                with self._lock:
                    while self._in_flight and self._error is None:
                        self._changed.wait()
        self.settle()
        self.check()
        with self._lock:  # nothing in flight: keep no spare buffers between measurements
            if not self._in_flight:
                self._buffers -= len(self._free_blocks)
                self._free_blocks.clear()
                self._free_grams.clear()

    def discard(self) -> None:
        """Drop every queued block without adding it (its rows belonged to a state that was replaced); returns
        when the workers have finished the products they had begun."""
        self._apply = False
        try:
            while True:
                with self._lock:
                    if not self._waiting:
                        break
                    job = self._waiting.popleft()
                self._finish(job)
            with self._lock:
                while self._in_flight:  # every job ends in _finish, failed or not
                    self._changed.wait()
                self._error = None
        finally:
            self._apply = True
        self.settle()

    @property
    def busy(self) -> bool:
        """Whether blocks are queued or being formed."""
        return self._in_flight > 0

    def check(self) -> None:
        """Raise if a product failed or could not be added, at every call until :meth:`discard`: the sums lack
        its block."""
        if self._error is not None:
            raise RuntimeError(
                "forming a block's Gram failed, so these statistics lack its rows; reset or reload them"
            ) from self._error

    # ------------------------------------------------------------------ internals
    def _run_waiting(self, backlog: int) -> bool:
        """Form the oldest waiting block in the calling thread if at least ``backlog`` wait; whether one did."""
        with self._lock:
            if len(self._waiting) < backlog:
                return False
            job = self._waiting.popleft()
        self._run(job)
        return True

    def _buffer_like(self, block: torch.Tensor) -> torch.Tensor:
        """A free block buffer; allocates up to ``slots``, then takes waiting blocks or waits for an add."""
        while True:
            with self._lock:
                if self._free_blocks:
                    return self._free_blocks.pop()
                if self._buffers < self.slots:
                    self._buffers += 1
                    break
                if not self._waiting:
                    if self._error is None:
                        self._changed.wait()
                    if self._error is not None:
                        break
                    continue
                job = self._waiting.popleft()
            self._run(job)
        self.check()
        return torch.empty_like(block)

    def _work(self) -> None:
        """A worker task: form waiting blocks while any waits and the caller holds the BLAS at one thread."""
        try:
            while True:
                with self._lock:
                    if not self._waiting or self._held is None:
                        return
                    job = self._waiting.popleft()
                    self._active += 1  # from here until its product is formed, the setting stays held
                try:
                    self._run(job)
                finally:
                    with self._lock:
                        self._active -= 1
        finally:
            with self._lock:
                self._running -= 1

    def _run(self, job: _Job) -> None:
        """Form ``job``'s product (one BLAS thread: held), then add every product now in order;
        ``job`` is finished whatever happens (a failure is recorded and raised by :meth:`check`)."""
        try:
            if self._apply:
                with self._lock:
                    gram = self._free_grams.pop() if self._free_grams else None
                # other threads form products at the same time: numpy's, the one-thread routine up to d = 512
                job.gram = gram_product(job.block[: job.rows], gram, parallel=True)
        except BaseException as e:
            self._fail(e)  # raised by check() at the caller's next call
            if not isinstance(e, Exception):  # an interrupt of the calling thread: re-raised once the job is done
                self._finish(job)
                raise
        self._finish(job)

    def _fail(self, error: BaseException) -> None:
        with self._lock:
            self._error = self._error or error
            self._changed.notify_all()

    def _finish(self, job: _Job) -> None:
        """Mark ``job`` formed and add the products that are next in order (one thread at a time)."""
        with self._lock:
            self._formed[job.seq] = job
        with self._add_lock:
            while True:
                with self._lock:
                    ready = self._formed.pop(self._next, None)
                    if ready is None:
                        return
                    self._next += 1
                done = False
                try:
                    if ready.gram is not None and self._apply and self._error is None:
                        # numpy's add: single-threaded (torch's would start an OpenMP team from a worker thread)
                        tn = ready.target.numpy()
                        np.add(tn, ready.gram.numpy(), out=tn)
                    done = True
                finally:
                    with self._lock:
                        if not done and self._apply:
                            self._error = self._error or RuntimeError("a block's Gram was not added")
                        self._free_blocks.append(ready.block)
                        if ready.gram is not None:
                            self._free_grams.append(ready.gram)
                        ready.gram = None
                        self._in_flight -= 1
                        self._changed.notify_all()
