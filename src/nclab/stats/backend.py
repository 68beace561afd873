"""Where the linear algebra of the derived statistics runs: numpy on the host, or torch on the statistics' device.

A :class:`LinalgBackend` is the array-namespace switch of :class:`~nclab.stats.ClassMoments` (Sigma_W, Sigma_B,
Sigma_T) and of the metrics' linear algebra (``nclab.metrics._linalg``: eigendecompositions, SVDs, pseudo-inverse
products, the whitened between-class factor). Each formula is written once, with what numpy and torch share
(``@``, ``.T``, ``.trace()``, ``xp.einsum``, ``xp.linalg.eigh`` / ``eigvalsh`` / ``svd`` / ``qr``,
``xp.hstack``, ``xp.where``, where ``xp`` is the module ``numpy`` or ``torch``); the backend supplies the few
operations whose spelling differs: moving arrays to and from the host, descending order, the Cholesky factor and
triangular solves.

Rules that make the two backends give the same numbers (``docs/conventions.md``, row "pseudo-inverse"):

* everything is float64;
* eigenvalues and singular values come back to the host as numpy arrays (d or K values), so that every rank
  decision (the ``rtol`` cut, the rank caps, numerical ranks) is made by the same numpy code;
* matrices (d x d, K x d) and eigenvectors stay where they were computed; only scalars and vectors of length K or
  d go to the host (the K x d class means are read on the host as before, and uploaded where needed).

``ClassMoments(stats, linalg=...)`` chooses: ``"auto"`` (default) runs torch on the statistics' device when that
is an accelerator (CUDA: the d x d matrices never leave the GPU) and numpy otherwise (measured faster on the CPU
than torch's CPU kernels: ``benchmarks/RESULTS.md``); ``"numpy"`` and ``"torch"`` force one (``"torch"`` with CPU
statistics runs torch's CPU kernels: how the tests check the device path without a GPU).
"""

from __future__ import annotations

import functools
from collections.abc import Hashable
from typing import Any, Literal

import numpy as np
import torch

from nclab.stats._kernels import accelerated, strict_upper

__all__ = ["NUMPY", "Linalg", "LinalgBackend", "backend_of", "choose_backend", "torch_backend"]

Linalg = Literal["auto", "numpy", "torch"]


class LinalgBackend:
    """The numpy backend (host arrays); :class:`TorchBackend` overrides what torch spells differently.

    Attributes
    ----------
    name : str
        ``"numpy"`` or ``"torch"``.
    xp : module
        ``numpy`` or ``torch``: the namespace of the shared operations.
    device : torch.device or None
        Where the torch backend computes (None for numpy).
    key : hashable
        Part of the cache key of a value this backend computed (None for numpy, so that the numpy values keep
        the cache names they always had).

    Examples
    --------
    >>> A = np.diag([1.0, 3.0, 2.0])
    >>> w, V = NUMPY.descending(*NUMPY.xp.linalg.eigh(A))
    >>> w.tolist(), NUMPY.to_host(V[:, 0]).tolist()
    ([3.0, 2.0, 1.0], [0.0, 1.0, 0.0])
    >>> tb = torch_backend(torch.device("cpu"))
    >>> w, V = tb.descending(*tb.xp.linalg.eigh(tb.asarray(A)))
    >>> w.tolist(), type(V).__name__
    ([3.0, 2.0, 1.0], 'Tensor')
    """

    name = "numpy"
    xp: Any = np
    device: torch.device | None = None
    key: Hashable = None

    def asarray(self, a: np.ndarray) -> Any:
        """A host float64 array as an array of this backend (numpy: ``a`` itself)."""
        return a

    def to_host(self, a: Any) -> np.ndarray:
        """An array of this backend as a float64 numpy array (numpy: ``a`` itself). Only for small results."""
        out: np.ndarray = a
        return out

    def as_float64(self, a: Any) -> Any:
        """``a`` (numpy array or array-like) as float64."""
        return np.asarray(a, dtype=np.float64)

    def descending(self, w: Any, V: Any = None) -> tuple[np.ndarray, Any]:
        """Ascending eigenvalues ``w`` (as ``eigh`` returns them) and their eigenvectors ``V`` (columns) in
        descending order: the eigenvalues on the host, the eigenvectors where they are (None stays None)."""
        return w[::-1], None if V is None else V[:, ::-1]

    def all_finite(self, a: Any) -> bool:
        """Whether every entry of ``a`` is finite."""
        return bool(np.all(np.isfinite(a)))

    def mirror_lower(self, C: Any) -> Any:
        """The symmetric matrix whose lower triangle is that of ``C`` (the Gram accumulator of ClassStats keeps
        only its lower triangle on the CPU)."""
        return np.where(strict_upper(C.shape[0]), C.T, C)

    def cholesky(self, A: Any) -> Any | None:
        """The lower Cholesky factor of the symmetric ``A``, or None when the factorisation fails (numpy: scipy's
        LAPACK ``dpotrf``, the factor ``psd_cholesky`` has always used)."""
        from scipy.linalg import lapack

        L, info = lapack.dpotrf(A, lower=1, clean=1)
        return L if info == 0 else None

    def solve_lower(self, L: Any, B: Any, *, transpose: bool = False) -> Any:
        """``L^{-1} B`` (``transpose``: ``L^{-T} B``) for the lower triangular ``L`` and ``B (d,)`` or ``(d, m)``."""
        from scipy.linalg import solve_triangular

        return solve_triangular(L, B, lower=True, trans=1 if transpose else 0, check_finite=False)

    def __repr__(self) -> str:
        return f"LinalgBackend({self.name!r})"


class TorchBackend(LinalgBackend):
    """torch.linalg in float64 on ``device`` (see :func:`torch_backend`)."""

    name = "torch"
    xp: Any = torch

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.key = ("torch", str(device))

    def asarray(self, a: np.ndarray) -> Any:
        return torch.as_tensor(np.ascontiguousarray(a), dtype=torch.float64, device=self.device)

    def to_host(self, a: Any) -> np.ndarray:
        t = a.detach()
        out: np.ndarray = (t if t.device.type == "cpu" else t.cpu()).numpy()
        return out

    def as_float64(self, a: Any) -> Any:
        return torch.as_tensor(a, dtype=torch.float64, device=self.device)

    def descending(self, w: Any, V: Any = None) -> tuple[np.ndarray, Any]:
        return self.to_host(w.flip(0)), None if V is None else V.flip(1)

    def all_finite(self, a: Any) -> bool:
        return bool(torch.isfinite(a).all())

    def mirror_lower(self, C: Any) -> Any:
        return torch.where(self._strict_upper(C.shape[0]), C.T, C)

    @functools.lru_cache(maxsize=2)  # noqa: B019 (a handful of backends live for the whole process)
    def _strict_upper(self, d: int) -> torch.Tensor:
        return torch.ones((d, d), dtype=torch.bool, device=self.device).triu_(1)

    def cholesky(self, A: Any) -> Any | None:
        L, info = torch.linalg.cholesky_ex(A)
        return L if int(info) == 0 else None

    def solve_lower(self, L: Any, B: Any, *, transpose: bool = False) -> Any:
        vector = B.ndim == 1
        rhs = B[:, None] if vector else B
        X = (
            torch.linalg.solve_triangular(L.mT, rhs, upper=True)
            if transpose
            else torch.linalg.solve_triangular(L, rhs, upper=False)
        )
        return X[:, 0] if vector else X

    def __repr__(self) -> str:
        return f"LinalgBackend('torch', device={str(self.device)!r})"


NUMPY = LinalgBackend()


@functools.lru_cache(maxsize=8)
def torch_backend(device: torch.device) -> LinalgBackend:
    """The torch backend on ``device`` (one per device)."""
    return TorchBackend(torch.device(device))


def backend_of(a: Any) -> LinalgBackend:
    """The backend of an array: torch on its device for a torch tensor, numpy otherwise."""
    return torch_backend(a.device) if isinstance(a, torch.Tensor) else NUMPY


def choose_backend(linalg: str, device: torch.device | None) -> LinalgBackend:
    """The backend of ``linalg`` ("auto", "numpy" or "torch") for statistics on ``device`` (None: not yet
    allocated, the CPU). "auto": torch where the device is an accelerator, numpy on the CPU."""
    if linalg not in ("auto", "numpy", "torch"):
        raise ValueError(f"linalg must be 'auto', 'numpy' or 'torch', got {linalg!r}")
    dev = torch.device("cpu") if device is None else torch.device(device)
    if linalg == "numpy" or (linalg == "auto" and not accelerated(dev)):
        return NUMPY
    return torch_backend(dev)
