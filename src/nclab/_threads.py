"""Thread-count contexts for torch's intra-op pool and numpy/scipy's BLAS (one place for both).

Why they exist: on a few cores, torch's OpenMP workers keep spinning for a while after each parallel torch
operation, and a multi-threaded BLAS call issued then waits for cores they occupy. Measured on 2 cores
(benchmarks/RESULTS.md): a d = 128 ``collapse_report`` right after a torch convolution took 30 ms with 2 BLAS
threads and 3-4 ms with one; the NCC pass at d = 4,096 was 46x slower with 2 torch threads than with one.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

__all__ = ["blas_threads", "scipy_blas_threads", "single_blas_thread", "torch_threads"]

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
    prev, _BLAS_LIMIT = _BLAS_LIMIT, int(n)
    try:
        with _controller().limit(limits=int(n), user_api="blas"):
            yield
    finally:
        _BLAS_LIMIT = prev


@contextmanager
def single_blas_thread(active: bool = True) -> Iterator[None]:
    """Run the block with every BLAS that threadpoolctl finds (numpy's and scipy's OpenBLAS) at one thread, for
    code that makes BLAS calls from several threads of its own (each call single-threaded: no pool's workers
    spin on the cores the other threads use); restored after. ``active=False``, or inside ``blas_threads(1)``:
    a no-op. Cheap: one get and at most two sets per library (direct calls, no library scan)."""
    if not active or _BLAS_LIMIT == 1:
        yield
        return
    libs = [c for c in _controller().lib_controllers if c.user_api == "blas"]
    prev = [c.num_threads for c in libs]
    for c, n in zip(libs, prev, strict=True):
        if n != 1:
            c.set_num_threads(1)
    try:
        yield
    finally:
        for c, n in zip(libs, prev, strict=True):
            if n != 1:
                c.set_num_threads(n)


def _controller() -> Any:
    global _CONTROLLER
    if _CONTROLLER is None:
        # the controller knows the libraries loaded when it is built: load scipy's BLAS/LAPACK (a separate
        # OpenBLAS from numpy's, the one that runs syrk, Cholesky and eigh here) first
        import scipy.linalg  # noqa: F401
        from threadpoolctl import ThreadpoolController

        _CONTROLLER = ThreadpoolController()
    return _CONTROLLER


@contextmanager
def scipy_blas_threads(n: int) -> Iterator[None]:
    """Run the block with scipy's own BLAS at ``n`` threads and numpy's unchanged, when they are two libraries.

    Why: the pip wheels of numpy and scipy each bundle an OpenBLAS with its own thread pool, and a pool keeps its
    threads spinning for a while after each call. Code that alternates between the two (scipy's L-BFGS-B, whose
    level-1 BLAS on the parameter vector runs on scipy's pool, around a loss whose products run on numpy's) has
    the idle pool's spinning threads take the cores the busy one needs: measured on 2 cores (the linear probe of
    ``nclab.transfer``, 20,000 x 512, K = 100), 137 ms per loss evaluation instead of 85 ms, plus 30 ms instead of
    2 ms per L-BFGS-B update. With one shared library (conda's MKL, a system OpenBLAS) nothing is changed.
    """
    import numpy
    import scipy

    def under(pkg: Any) -> tuple[str, ...]:
        root = Path(pkg.__file__).parent
        return (str(root) + os.sep, str(root) + ".libs" + os.sep)  # the wheel's package and its vendored libraries

    libs = [c for c in _controller().lib_controllers if c.user_api == "blas"]
    numpy_files = {c.filepath for c in libs if c.filepath.startswith(under(numpy))}
    own = [c for c in libs if c.filepath.startswith(under(scipy)) and c.filepath not in numpy_files]
    prev = [c.num_threads for c in own]
    for c in own:
        c.set_num_threads(int(n))
    try:
        yield
    finally:
        for c, k in zip(own, prev, strict=True):
            c.set_num_threads(k)
