"""Thread-count contexts for torch's intra-op pool and numpy/scipy's BLAS (one place for both).

Why they exist: on a few cores, torch's OpenMP workers keep spinning for a while after each parallel torch
operation, and a multi-threaded BLAS call issued then waits for cores they occupy. Measured on 2 cores
(benchmarks/RESULTS.md): a d = 128 ``collapse_report`` right after a torch convolution took 30 ms with 2 BLAS
threads and 3-4 ms with one; the NCC pass at d = 4,096 was 46x slower with 2 torch threads than with one.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

__all__ = ["blas_threads", "torch_threads"]

_CONTROLLER: Any = None  # threadpoolctl.ThreadpoolController, created on first use (it scans the loaded libraries)
_BLAS_LIMIT: int | None = None  # the limit set by the innermost enclosing blas_threads block, None outside any


@contextmanager
def torch_threads(n: int | None, device: torch.device | None = None) -> Iterator[None]:
    """Run the block with torch's intra-op pool at ``n`` threads, restored after (``None``, or work on an
    accelerator ``device``: unchanged)."""
    prev = torch.get_num_threads()
    if n is None or prev == n or (device is not None and device.type != "cpu"):
        yield
        return
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(prev)


@contextmanager
def blas_threads(n: int | None) -> Iterator[None]:
    """Run the block with numpy's and scipy's BLAS/LAPACK at ``n`` threads (``None``: unchanged). torch's own
    BLAS is not affected (threadpoolctl's ``user_api="blas"`` finds only the OpenBLAS of numpy and scipy)."""
    global _CONTROLLER, _BLAS_LIMIT
    # inside a block that set the same limit (a measurement inside a training run) there is nothing to change:
    # threadpoolctl's limit and restore cost ~0.1 ms each, twice per measured split
    if n is None or n == _BLAS_LIMIT:
        yield
        return
    if _CONTROLLER is None:
        # the controller knows the libraries loaded when it is built: load scipy's BLAS/LAPACK (a separate
        # OpenBLAS from numpy's, the one that runs syrk, Cholesky and eigh here) first
        import scipy.linalg  # noqa: F401
        from threadpoolctl import ThreadpoolController

        _CONTROLLER = ThreadpoolController()
    prev, _BLAS_LIMIT = _BLAS_LIMIT, int(n)
    try:
        with _CONTROLLER.limit(limits=int(n), user_api="blas"):
            yield
    finally:
        _BLAS_LIMIT = prev
