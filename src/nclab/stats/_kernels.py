"""Accumulation kernels shared by the streaming accumulators: the CPU / accelerator test, row chunking, the
per-thread work buffers, the symmetric rank-k updates of the Gram accumulator (``syrk_update``; ``gram_add``, the
block Gram through the routine measured fastest) and the float32-exact matmul context.

Free functions with no accumulator state: :class:`~nclab.stats.ClassStats` and
:class:`~nclab.stats.NCCAccumulator` call them from their ``update``; :class:`~nclab.stats.ClassMoments` mirrors
the Gram accumulator with :func:`strict_upper`.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np
import torch

__all__ = [
    "WORK_POOL_MAX",
    "accelerated",
    "chunk_rows",
    "exact_float32_matmul",
    "gram_add",
    "strict_upper",
    "syrk_update",
    "work_buffers",
]


def accelerated(device: torch.device) -> bool:
    """Whether work on ``device`` runs on an accelerator (every device but the CPU): the one test behind every
    CPU / accelerator choice of the accumulation code (cache-sized chunks, BLAS routines, threads, device syncs),
    so that a test can take the accelerator paths on the CPU by replacing it."""
    return device.type != "cpu"


def chunk_rows(rows: int, d: int) -> int:
    """Rows per chunk of an O(B d) float64 pass over a ``(rows, d)`` batch (ClassStats, NCC): the whole batch
    while its float64 copy fits in ~8 MB (L3), else ~1 MB chunks (measured 1.3x faster at d = 4096, slower when
    chunks are small, benchmarks/RESULTS.md)."""
    return rows if rows * d <= (1 << 20) else max(32, (1 << 17) // d)


@functools.lru_cache(maxsize=4)
def strict_upper(d: int) -> np.ndarray:
    """Boolean mask of the strict upper triangle of a d x d matrix (cached: rebuilt per call it costs as much as
    the mirroring it serves)."""
    return np.triu(np.ones((d, d), dtype=bool), 1)


class _WorkPool(threading.local):
    """One flat float64 work buffer per thread, reused by every accumulator on the CPU."""

    buf: torch.Tensor | None = None


_WORK_POOL = _WorkPool()
#: Work buffers up to this many float64 entries (32 MB) are kept between calls, per thread.
WORK_POOL_MAX = 1 << 22


def work_buffers(count: int, rows: int, d: int, device: torch.device) -> tuple[torch.Tensor, ...]:
    """``count`` disjoint float64 work arrays ``(rows, d)``, contents undefined, valid until the next call in
    this thread (no accumulator method calls another while it holds them).

    Why a pool shared by all instances: fresh multi-MB temporaries are returned to the operating system when
    freed and page-fault again on the next use, which costs more than the O(B d) arithmetic that fills them;
    measurements create new ClassStats / NCC accumulators per split and per layer, so a per-instance buffer is
    not enough (benchmarks/RESULTS.md). Accelerators allocate per call (their caching allocators reuse memory).
    """
    n = rows * d
    if accelerated(device) or count * n > WORK_POOL_MAX:
        return tuple(torch.empty((count, rows, d), dtype=torch.float64, device=device).unbind(0))
    buf = _WORK_POOL.buf
    if buf is None or buf.numel() < count * n:
        buf = _WORK_POOL.buf = torch.empty(max(count * n, 1 << 16), dtype=torch.float64)
    return tuple(buf[i * n : (i + 1) * n].view(rows, d) for i in range(count))


def _tf32_switch() -> tuple[Callable[[], None], Callable[[], None]] | None:
    """``(turn off, restore)`` for TF32 in cuBLAS float32 matmuls, through the API the process set it with;
    ``None`` when TF32 is off already.

    torch has three ways to set it: the legacy flag ``torch.backends.cuda.matmul.allow_tf32``, the global
    ``torch.set_float32_matmul_precision``, and (torch >= 2.9) the per-backend ``...matmul.fp32_precision``. Once a
    process has used the legacy flag and the newer API both, torch raises on reads through the other one
    ("mix of the legacy and new APIs"; seen with torch 2.11 on an H200 as soon as a user sets ``allow_tf32``), so
    this reads defensively and switches through the same API the setting came from: a user's later reads of
    their own flag keep working."""
    mm = torch.backends.cuda.matmul
    per_backend = getattr(mm, "fp32_precision", None)  # torch >= 2.9; it also reflects the legacy flag
    if per_backend == "ieee":
        return None
    if per_backend == "tf32":
        try:
            legacy = bool(mm.allow_tf32)  # raises when the per-backend API set it
        except RuntimeError:
            legacy = False
        if legacy:
            return lambda: setattr(mm, "allow_tf32", False), lambda: setattr(mm, "allow_tf32", True)
        return lambda: setattr(mm, "fp32_precision", "ieee"), lambda: setattr(mm, "fp32_precision", "tf32")
    try:  # "none" (or an older torch): the global precision decides
        prev = torch.get_float32_matmul_precision()
    except RuntimeError:  # the APIs were mixed: cuBLAS follows the legacy flag
        if not mm.allow_tf32:
            return None
        return lambda: setattr(mm, "allow_tf32", False), lambda: setattr(mm, "allow_tf32", True)
    if prev == "highest":
        return None
    return lambda: torch.set_float32_matmul_precision("highest"), lambda: torch.set_float32_matmul_precision(prev)


@contextmanager
def exact_float32_matmul() -> Iterator[None]:
    """CUDA float32 matmuls in full float32 precision inside the block, whatever the user chose: TF32 (10-bit
    mantissa, u = 2^-11) would void the float32-compute error bound of ClassStats. The user's setting is restored
    on exit, through the API it was made with (:func:`_tf32_switch`)."""
    switch = _tf32_switch()
    if switch is None:
        yield
        return
    off, restore = switch
    off()
    try:
        yield
    finally:
        restore()


def syrk_update(C: torch.Tensor, z: torch.Tensor, beta: float = 1.0) -> None:
    """``C = beta C + z^T z`` (only the lower triangle is guaranteed on the CPU; see
    :meth:`ClassMoments.within_scatter <nclab.stats.ClassMoments.within_scatter>`); float32 or float64, ``C`` and
    ``z`` of the same dtype."""
    if not accelerated(C.device):
        from scipy.linalg.blas import dsyrk, ssyrk

        syrk = ssyrk if C.dtype == torch.float32 else dsyrk
        # A C-ordered (B, d) array is a Fortran-ordered (d, B) one: syrk(trans=0) gives (d, d) = z^T z,
        # written in place into C.T (Fortran-ordered view of the C-ordered accumulator), upper triangle of C.T.
        Cn = C.numpy()
        out = syrk(1.0, z.numpy().T, beta=beta, c=Cn.T, trans=0, lower=0, overwrite_c=1)
        if out.ctypes.data != Cn.ctypes.data:  # scipy copied instead of writing in place
            Cn[...] = out.T
    else:
        C.addmm_(z.T, z, beta=beta)


#: Widest features whose float32 block Gram numpy's ``X.T @ X`` forms fastest (scipy's ``ssyrk`` beyond).
NUMPY_GRAM_MAX_DIM = 512


def gram_add(
    C: torch.Tensor, block: torch.Tensor, gram: torch.Tensor | None, parallel: bool = False
) -> torch.Tensor | None:
    """``C += block^T block`` for rows ``block (b, d)`` (float32 or float64) into the float64 accumulator
    ``C (d, d)``: the product in the block's dtype (every inner product of ``b`` terms), the sum in float64 (the
    lower triangle of ``C`` on the CPU). Returns the work matrix ``gram`` (the block's dtype) to pass back next
    time (CPU; allocated when ``None``). ``parallel``: other threads make BLAS calls at the same time.

    The routine is the fastest measured per block on this CPU (one core, per row, against one whole-matrix
    ``X.T @ X``; ``benchmarks/bench_gram_block.py``): float32 up to d = 512, numpy's ``block.T @ block``, which
    numpy runs as one ``syrk`` of its own OpenBLAS and mirrors (1.02-1.05x at 4,096 rows, against 1.05-1.22x for
    scipy's ``ssyrk``, an older OpenBLAS in the wheels); wider, scipy's ``ssyrk`` (1.07x at d = 1,024, numpy
    1.11-1.18x: the mirror costs more there); torch's MKL ``sgemm`` is 1.7-2.1x (no ``syrk``, and MKL on an AMD
    CPU). With ``parallel`` always numpy: scipy's BLAS calls from two threads take as long as one after the other
    (measured on 2 cores), numpy's run at once. On CUDA a matmul, float32 with TF32 off
    (:func:`exact_float32_matmul`)."""
    if accelerated(C.device):
        with exact_float32_matmul():
            C.add_(block.T @ block)
        return gram
    gram = gram_product(block, gram, parallel)
    C.add_(gram)
    return gram


def gram_product(block: torch.Tensor, gram: torch.Tensor | None, parallel: bool = False) -> torch.Tensor:
    """``gram = block^T block`` for CPU rows ``block (b, d)``, in the block's dtype, by the routine of
    :func:`gram_add` (numpy's product up to :data:`NUMPY_GRAM_MAX_DIM` or with ``parallel``, else scipy's
    ``ssyrk``/``dsyrk``, which writes the lower triangle); ``gram (d, d)`` is allocated when ``None`` or of another
    dtype. One place for the product, so that the block Grams formed on worker threads
    (``nclab.stats._gram_pipeline``) are those of one thread bit for bit."""
    d = block.shape[1]
    if gram is None or gram.dtype != block.dtype:
        gram = torch.zeros((d, d), dtype=block.dtype)  # scipy writes one triangle: the other stays zero
    if parallel or d <= NUMPY_GRAM_MAX_DIM:
        bn = block.numpy()
        np.matmul(bn.T, bn, out=gram.numpy())
    else:
        syrk_update(gram, block, beta=0.0)
    return gram
