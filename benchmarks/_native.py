"""Speed benchmarks run on the BLAS kernels a user's machine selects, and say which ones those were.

The project's machines set ``OPENBLAS_CORETYPE`` (forcing OpenBLAS onto its Haswell kernels) and
``OPENBLAS_L2_SIZE`` as a workaround for old OpenBLAS builds; a user's machine has neither, and on this CPU the
native (SkylakeX) kernels run a float32 ``X.T @ X`` 1.6x faster on two threads (benchmarks/RESULTS.md).
:func:`native_blas` re-executes the benchmark without them -- in that command alone: tests and CI keep the
environment they are given -- and returns one line per BLAS library with the kernel it selected
(``threadpoolctl``'s ``architecture``), for the benchmark to print with its figures.

    from _native import native_blas, kernels_line
    native_blas()               # first thing in main(): re-executes once if needed
    print(kernels_line())       # e.g. "numpy openblas 0.3.31 SkylakeX, scipy openblas 0.3.30 SkylakeX, torch MKL"
"""

from __future__ import annotations

import os
import sys

#: Environment variables that override OpenBLAS's choice of kernels or its cache model.
OVERRIDES = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
_MARK = "NCLAB_BENCH_NATIVE_BLAS"  # set in the re-executed process: never loop


def native_blas() -> None:
    """Re-execute this benchmark without :data:`OVERRIDES` if any is set (OpenBLAS reads them when it loads, so
    the process must start without them). ``NCLAB_BENCH_KEEP_BLAS_ENV=1`` keeps them (to measure the forced
    kernels on purpose)."""
    drop = [k for k in OVERRIDES if k in os.environ]
    if not drop or os.environ.get(_MARK) or os.environ.get("NCLAB_BENCH_KEEP_BLAS_ENV") == "1":
        return
    env = {k: v for k, v in os.environ.items() if k not in OVERRIDES}
    env[_MARK] = "1"
    print(f"[benchmark] re-running without {', '.join(drop)} (the kernels a user's machine selects)", flush=True)
    os.execve(sys.executable, [sys.executable, *sys.argv], env)


def kernels() -> list[dict[str, str]]:
    """Each BLAS library loaded (numpy's, scipy's, torch's): which, its version and the kernel it runs."""
    import numpy  # noqa: F401  (load the libraries threadpoolctl reports)
    import scipy.linalg  # noqa: F401
    import torch
    from threadpoolctl import threadpool_info

    out = []
    for info in threadpool_info():
        if info["user_api"] != "blas":
            continue
        path = info["filepath"]
        owner = "numpy" if "numpy" in path else "scipy" if "scipy" in path else os.path.basename(path)
        out.append(
            {
                "owner": owner,
                "library": f"{info['internal_api']} {info.get('version') or '?'}",
                "kernel": str(info.get("architecture") or "?"),
            }
        )
    mkl = "MKL" if torch.backends.mkl.is_available() else "no MKL"
    out.append({"owner": "torch", "library": f"torch {torch.__version__} CPU BLAS", "kernel": mkl})
    return out


def kernels_line() -> str:
    """:func:`kernels` in one line, with the overrides still set (if any) and the load average."""
    parts = [f"{k['owner']}: {k['library']} {k['kernel']}" for k in kernels()]
    forced = [f"{k}={os.environ[k]}" for k in OVERRIDES if k in os.environ]
    load = os.getloadavg()
    return (
        "BLAS kernels: "
        + "; ".join(parts)
        + (f" (forced: {', '.join(forced)})" if forced else " (native: no OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE)")
        + f"; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )
