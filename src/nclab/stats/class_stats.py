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
scatter-adds (``nclab.stats._lanes``: split between threads on the CPU); ``track="light"`` skips ``C`` and keeps
O(K d) memory, for wide intermediate layers. ``compute_dtype="float32"`` does the O(B d) work of float32
features in float32 on the shifted rows and forms each block's Gram in float32, adding every sum into the
float64 accumulators (error bounds in :class:`ClassStats`, derivation in docs/stats.md).

Covariance conventions (shared by all five papers, see ``docs/conventions.md``): Sigma_W and Sigma_T are
divided by the total count N (population, not N - 1 or N - K); Sigma_B is divided by K (balanced) or
weighted by n_k / N (empirical).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Hashable, Mapping
from contextlib import AbstractContextManager, nullcontext
from functools import partial
from typing import Any, Literal, NamedTuple, cast

import numpy as np
import torch

from nclab._threads import single_blas_thread, torch_threads
from nclab.memory import check_allocation, format_bytes
from nclab.stats._kernels import NUMPY_GRAM_MAX_DIM, accelerated, chunk_rows, work_buffers
from nclab.stats._lanes import MAX_LANES, MIN_LANE_ROWS, Lane, LaneSpec, run_lanes
from nclab.stats.accumulator import Accumulator
from nclab.stats.moments import ClassMoments, Weighting, check_weighting
from nclab.validation import check_bool, check_unmasked

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
    """``x`` (numpy array, scalar, list or torch tensor) as a detached tensor, without a copy where possible.

    A numpy masked array with a masked entry is refused (:func:`nclab.validation.check_unmasked`), and so is a
    dtype torch cannot hold (``float128`` / ``np.longdouble``, strings), naming ``name``."""
    if isinstance(x, torch.Tensor):
        return x.detach()
    if isinstance(x, np.ndarray) or np.isscalar(x) or isinstance(x, list | tuple):
        arr = np.asarray(check_unmasked(x, name=name))
        if arr.dtype == object:
            raise TypeError(f"{name} must be a numeric array, got an object array")
        if arr.dtype.kind in "fc" and arr.dtype not in _TORCH_FLOATS:
            raise TypeError(
                f"{name} must have a floating dtype torch can hold (float16, float32 or float64), got {arr.dtype}"
                f"{' (numpy longdouble)' if arr.dtype == np.longdouble else ''}: convert with .astype(np.float64) "
                f"first (statistics accumulate in float64)"
            )
        if arr.dtype.kind not in "biufc":
            raise TypeError(f"{name} must be a numeric array, got dtype {arr.dtype}")
        if not arr.flags.writeable:  # torch.from_numpy warns on read-only (memory-mapped) arrays
            arr = np.array(arr)
        return torch.from_numpy(np.ascontiguousarray(arr))
    raise TypeError(f"{name} must be a numpy array or a torch tensor, got {type(x).__name__}")


#: The numpy floating and complex dtypes ``torch.from_numpy`` takes (not ``longdouble`` / ``clongdouble``).
_TORCH_FLOATS = tuple(np.dtype(t) for t in (np.float16, np.float32, np.float64, np.complex64, np.complex128))


class AccessorDeprecationWarning(DeprecationWarning):
    """A deprecated forwarding accessor of :class:`ClassStats` was used (``stats.sigma_w()``): read it from
    ``stats.moments()`` (:class:`~nclab.stats.ClassMoments`), the one home of the derived statistics."""


def _warn_forward(name: str, stacklevel: int = 4) -> None:
    warnings.warn(
        f"ClassStats.{name} is deprecated and will be removed in the next release: use stats.moments().{name} "
        "(ClassMoments, the one home of the derived statistics)",
        AccessorDeprecationWarning,
        stacklevel=stacklevel,
    )


class ClassStats(Accumulator):
    """Streaming class statistics of features ``H: (N, d)`` with labels ``y: (N,)`` in ``[0, K)``.

    An :class:`~nclab.stats.Accumulator`: :meth:`update` per batch, accessors to read, :meth:`merge` and
    :meth:`all_reduce` to combine (exact: the moments are re-expressed about common shifts), :meth:`reset`,
    :meth:`state_dict` / :meth:`save` / :meth:`load` to persist. Accumulation is float64 on
    the device of the first features seen (a torch CUDA tensor keeps the state on the GPU); accessors return
    float64 numpy arrays.

    Parameters
    ----------
    K : int
        Number of classes, K >= 2.
    d : int
        Feature dimension, d >= 1.
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
        ``"float64"`` (default): every product and sum in float64; Sigma_W exact to ~1e-13 relative even near
        collapse. ``"float32"``: float32 features (and float16 / bfloat16) are shifted, summed and squared in
        float32 and only the sums are kept in float64: ``z = x - s_y`` is formed in float32 (one rounding),
        class sums ``S_k`` and the unit-sum part ``sum w z`` go into float32 partial sums of at most ``m`` rows
        of a class (64, or the rows of the class in one batch piece, at most ``b``) before each is added into
        float64, ``||z||^2`` per row in float32 and summed in float64, and the Gram of blocks of at most ``b``
        rows (:meth:`gram_block_rows`) in float32 (on CUDA with TF32 off). With ``u = 2^-24``,
        ``gamma_m = m u / (1 - m u)`` [Higham 2002, Sec. 3.1], ``rho = sum_k n_k ||s_k - mu_k||^2 /
        sum_k class_ss_k`` (how far the shifts, first samples, lie from the class means; ``rho ~ 1``):
        ``||d Sigma_W||_F <= 3 gamma_{b+2} (1 + rho) Tr Sigma_W``; per class ``||d mu_k|| <= gamma_{m+1}
        sqrt(class_ss_k / n_k + ||s_k - mu_k||^2)`` and ``|d class_ss_k| <= (gamma_{d+3} + 2 gamma_{m+1})
        (class_ss_k + n_k ||s_k - mu_k||^2)``; each unit vector's length is 1 within ``gamma_{d+2}``. With
        independent rounding errors each ``gamma_m`` is ``~ sqrt(m) u`` [Higham & Mary 2019]; measured
        ~2e-7 relative Frobenius error of Sigma_W, near collapse included (docs/stats.md). Rows outside the
        float32-safe range (norms outside ``[2^-30, 2^30]`` other than exact zeros, or after a float64 shift) and
        float64 features take the float64 passes, with the float32 Gram of the rounded ``z``.
    unit_sums : bool
        Keep the per-class sums of unit vectors :attr:`unit_sums` (default): the cosine metrics
        (``within_class_cosine``, ``class_separation``) and GNC3 read them. ``False`` skips their three O(B d)
        passes per batch and their K x d state; ``unit_sums`` then raises ``ValueError`` and
        :func:`~nclab.metrics.collapse_report` leaves those metrics out. Statistics merge only with statistics of
        the same setting.

    Threads: on the CPU an update uses up to ``torch.get_num_threads()`` cores (at most 4, one per 256 rows of the
    batch, while a lane's buffers stay under 64 MB): the rows are split into lanes that run on threads of their
    own, each with torch and the BLAS at one thread (restored after; the BLAS only for the updates that form a
    block's Gram); the first read after an update adds the rows the lanes still hold, each lane on its own thread.
    The result is the same up to rounding. float32 rows of the full track with ``compute_dtype="float32"``
    (d <= 512) take one lane instead, and worker threads form its block Grams while the next blocks fill (the
    calling thread helps when they fall behind); the sums are added in block order, so the result is the
    one-thread result bit for bit. While the workers form Grams the BLAS stays at one thread (a product begun
    with more threads would round differently); the caller's setting comes back at the first update or read after
    they are idle, and after every read.
    Raises :class:`nclab.memory.AllocationTooLarge` (a ``MemoryError`` and a ``ValueError``) before allocating
    state larger than the available memory or the ``NCLAB_MAX_BYTES`` cap (``24 K d`` bytes, ``16 K d`` without
    unit sums, plus ``8 d^2`` for ``track="full"``), suggesting ``track="light"`` when the d x d scatter is the bulk.

    Examples
    --------
    Stream two batches of features ``(B, d)`` with their labels, then read the statistics:

    >>> import numpy as np
    >>> from nclab.stats import ClassStats
    >>> H = np.array([[1.0, 0.0], [3.0, 0.0], [0.0, 2.0], [0.0, 4.0]])
    >>> y = np.array([0, 0, 1, 1])
    >>> stats = ClassStats(K=2, d=2)
    >>> stats.update(H[:2], y[:2]).update(H[2:], y[2:])
    ClassStats(K=2, d=2, track='full', N=4, device=cpu)
    >>> print(stats.means)
    [[2. 0.]
     [0. 3.]]

    The one-call constructor gives the same statistics:

    >>> stats2 = ClassStats.from_arrays(H, y, K=2)
    >>> bool(np.allclose(stats2.means, stats.means))
    True
    """

    def __init__(
        self,
        K: int,
        d: int,
        *,
        track: Track = "full",
        device: str | torch.device | None = None,
        check_finite: bool = True,
        compute_dtype: ComputeDtype = "float64",
        unit_sums: bool = True,
    ) -> None:
        if isinstance(K, bool) or not isinstance(K, int | np.integer):
            raise TypeError(f"K must be an int, got {type(K).__name__}")
        if K < 2:
            raise ValueError(f"K must be >= 2 (collapse needs at least two classes), got {K}")
        if isinstance(d, bool) or not isinstance(d, int | np.integer) or d < 1:
            raise ValueError(f"d must be a positive int, got {d!r}")
        if track not in ("full", "light"):
            raise ValueError(f"track must be 'full' or 'light', got {track!r}")
        if compute_dtype not in ("float32", "float64"):
            raise ValueError(f"compute_dtype must be 'float32' or 'float64', got {compute_dtype!r}")
        self.K = int(K)
        self.d = int(d)
        self.track: Track = track
        self.unit_sums_kept = check_bool(unit_sums, name="unit_sums")
        _check_state_size(self.K, self.d, track, self.unit_sums_kept)
        self.check_finite = bool(check_finite)
        self.compute_dtype: ComputeDtype = compute_dtype
        # The lanes (`nclab.stats._lanes`) hold what an update has not yet added into the state: pending Gram
        # rows, float32 partial sums, and the accumulators of lanes other than lane 0. `_flush` adds them in
        # before anything reads the state. `_shift32`: the shifts in float32, for the float32 lanes.
        self._lanes: list[Lane] = []
        self._shift32: torch.Tensor | None = None
        self._shift32_checked = False
        super().__init__(device)
        K, d = self.K, self.d
        self.add_state("counts", (K,), torch.int64, nonnegative=True)
        self.add_state("shift", (K, d), reduce="shift")
        self.add_state("sum_dev", (K, d))
        self.add_state("sq_dev", (K,), nonnegative=True)
        if self.unit_sums_kept:
            self.add_state("unit_sums", (K, d))
        if track == "full":
            self.add_state("scatter_dev", (d, d))
        # Per state (emptied by `_touch` whenever the statistics change): the derived values that `moments()`
        # caches, and the checks and read-only views of the raw state (`raw`, `N`, `require_nonempty`)
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
        K: int | None = None,
        track: Track = "full",
        *,
        batch_size: int | None = None,
        check_finite: bool = True,
        compute_dtype: ComputeDtype = "float64",
        unit_sums: bool = True,
    ) -> ClassStats:
        """Statistics of ``H: (N, d)`` with labels ``y: (N,)``; K defaults to ``max(y) + 1``.

        ``batch_size`` streams the rows in chunks (useful for memory-mapped arrays); ``compute_dtype`` and
        ``unit_sums`` as in :class:`ClassStats`.
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
        if K is None:
            if yt.numel() == 0:
                raise ValueError("cannot infer K from empty labels; pass K")
            check_labels_dtype(yt)
            K = max(int(yt.max()) + 1, 2)
        stats = cls(
            K,
            shape[1],
            track=track,
            check_finite=check_finite,
            compute_dtype=compute_dtype,
            unit_sums=unit_sums,
        )
        if batch_size is None:
            stats.update(Ht, yt)
        else:
            for start in range(0, shape[0], batch_size):
                stats.update(H[start : start + batch_size], yt[start : start + batch_size])
        return stats

    def _allocate(self, device: torch.device) -> None:
        super()._allocate(device)
        self._all_shifted = False
        for lane in self._lanes:  # Grams still being formed belong to the state being replaced
            lane.discard()
        self._lanes = []  # their buffers belong to a device and a block size
        self._forget_shift32()

    def _forget_shift32(self) -> None:
        self._shift32 = None
        self._shift32_checked = False

    # ------------------------------------------------------------------ accumulator protocol
    def _config(self) -> dict[str, Any]:
        config: dict[str, Any] = {"K": self.K, "d": self.d, "track": self.track}
        if not self.unit_sums_kept:  # only when off: states saved before the option load as they did
            config["unit_sums"] = False
        return config

    # compute_dtype is not part of `_config`: it changes rounding, not the meaning of the state, so statistics
    # of either compute dtype merge and load into each other; state_dict records it and `load` restores it.
    @classmethod
    def _from_config(
        cls, config: Mapping[str, Any], buffers: Mapping[str, np.ndarray], device: torch.device | None
    ) -> ClassStats:
        return cls(
            int(config["K"]),
            int(config["d"]),
            track=config["track"],
            device=device,
            # a str from the file: __init__ checks that it is one of the two names
            compute_dtype=cast(ComputeDtype, str(config.get("compute_dtype", "float64"))),
            unit_sums=bool(config.get("unit_sums", True)),
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
        self._forget_shift32()
        for lane in self._lanes:  # rows of a replaced state (every combining operation flushed them first)
            lane.discard()

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
        S, q = np.asarray(st["sum_dev"]), np.asarray(st["sq_dev"])
        U = np.asarray(st["unit_sums"]) if "unit_sums" in st else np.zeros_like(S)
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

    def __getstate__(self) -> dict[str, Any]:
        """As the protocol's, with every block Gram still being formed on a worker thread added first (a pickled
        or deep-copied lane holds no threads)."""
        for lane in self._lanes:
            if lane.pipe is not None:
                lane.pipe.drain()
        return super().__getstate__()

    def copy(self) -> ClassStats:
        """An independent copy (same configuration and state, same device)."""
        self._flush()
        out = ClassStats(
            self.K,
            self.d,
            track=self.track,
            check_finite=self.check_finite,
            compute_dtype=self.compute_dtype,
            unit_sums=self.unit_sums_kept,
        )
        if self._state is not None:
            out._device = self._device
            out._state = {k: v.clone() for k, v in self._state.items()}
        out._reduced = self._reduced  # the same samples of every rank: reducing the copy again would double them
        return out

    # ------------------------------------------------------------------ accumulation
    def update(self, features: Any, labels: Any) -> ClassStats:
        """Accumulate a batch: ``features (B, d)`` of any float dtype, ``labels (B,)`` integers in ``[0, K)``."""
        x, y = check_batch(features, labels, self.d)
        B = x.shape[0]
        if B == 0:
            return self
        # The O(B d) passes run on one torch thread per lane and the BLAS calls of several lanes on one BLAS thread
        # each: a library's own workers keep spinning after each call on the cores the next call needs (measured
        # 2-3x slower, benchmarks/RESULTS.md). Rows are split between lanes, one per core in the torch budget.
        lanes = self._lane_count(B, x.device if self._device is None else self._device)
        threads = torch.get_num_threads()  # torch's budget, before the update sets it to one thread
        with torch_threads(1, x.device):
            # Every check runs on the batch's own device before the state is allocated or touched: a rejected
            # batch leaves no trace, not even the device the first batch would pin.
            screen = self._screen(x, y)
            if self._lanes and self._lanes[0].pipe is not None:
                self._lanes[0].pipe.check()  # a failed block Gram: nothing more is added to incomplete sums
            if self._state is None:
                self._allocate(x.device)
            dev = self._device
            assert dev is not None and self._state is not None
            x, norms = screen.rows, screen.norms
            if x.device != dev:
                x, y, norms = x.to(dev), y.to(dev), None if norms is None else norms.to(dev)
            if y.dtype != torch.int64:
                y = y.long()
            self._set_new_shifts(x, y)
            shift32 = self._float32_shift() if screen.fast else None
            if screen.fast and shift32 is None:  # a shift set by a float64 batch is not a float32 number
                screen, norms = _Screen(False, True, x, None), None
            per_class = self._count(y, dev)
            gram32 = self.compute_dtype == "float32" and screen.safe
            shift32 = shift32 if screen.fast else None
            # float32 rows of the full track: one lane does the O(B d) passes and worker threads form the Grams
            workers = self._gram_workers(dev, threads) if shift32 is not None else 0
            lanes = 1 if workers else lanes
            tasks = self._lane_tasks(lanes, x, y, norms, shift32, per_class, gram32, screen.zero_rows, workers)
            pipe = self._lanes[0].pipe
            context: AbstractContextManager[None]
            if pipe is not None:  # a session (the BLAS at one thread) when blocks wait or fill
                if not (pipe.busy or self._lanes[0].gram_due(B)):
                    pipe.settle()  # the workers are idle: the caller's BLAS setting back
                context = pipe.session() if pipe.busy or self._lanes[0].gram_due(B) else nullcontext()
            else:  # the BLAS at one thread while several lanes may call it; the float32 lanes call it for a Gram
                context = single_blas_thread(
                    lanes > 1
                    and (
                        shift32 is None
                        or any(self._lanes[i].gram_due(B * (i + 1) // lanes - B * i // lanes) for i in range(lanes))
                    )
                )
            with context:
                run_lanes(tasks)
        self._touch()
        return self

    def _screen(self, x: torch.Tensor, y: torch.Tensor) -> _Screen:
        """Check the labels and features of a batch, on its own device and before anything changes, and choose
        its path. Rows whose norms lie in ``[2^-30, 2^30]`` (or are exact zeros) are *float32-safe*: no float32
        square, product or block sum of them or of their shifted values over- or underflows. With
        ``compute_dtype="float32"``, float32-safe float32 (or narrower) rows take the float32 lanes, other
        float32-safe rows the float64 passes with a float32 Gram, and the rest the float64 passes with a float64
        Gram (exact, where float32 would overflow or lose the small values).

        float32 rows are screened with one float32 pass (their norms, which NaN and inf reach; one device sync
        for them and the labels' range): such rows cannot over- or underflow float64, so finiteness is all that
        float64 accumulation needs. Rows that fail it, and float64 rows, take the exact float64 checks of
        :meth:`_row_norms`, which name the problem."""
        if x.dtype not in _FLOAT32_EXACT:
            check_label_range(y, self.K)
            norms, lo, hi = self._row_norms(x)
            return _Screen(False, _float32_safe(x, norms.flatten(), lo, hi), x, norms.flatten())
        x32 = x.float()
        norms = torch.linalg.vector_norm(x32, dim=1)
        ylo, yhi = torch.aminmax(y)
        lo_t, hi_t = torch.aminmax(norms)
        if not accelerated(x.device):
            labels, (lo, hi) = (int(ylo), int(yhi)), (float(lo_t), float(hi_t))
        else:  # one device sync
            both = torch.stack([ylo.double(), yhi.double(), lo_t.double(), hi_t.double()]).tolist()
            labels, (lo, hi) = (int(both[0]), int(both[1])), (both[2], both[3])
        _check_label_bounds(*labels, self.K, y)
        if not hi < float("inf"):  # NaN or inf in a row, or a square that overflowed float32
            norms64, lo, hi = self._row_norms(x)
            return _Screen(False, _float32_safe(x, norms64.flatten(), lo, hi), x, norms64.flatten())
        safe = _float32_safe(x32, norms, lo, hi)
        if self.compute_dtype == "float32" and safe:
            return _Screen(True, True, x32, norms, lo == 0)
        return _Screen(False, safe, x, None)  # the lanes compute float64 norms from their float64 copy

    def _set_new_shifts(self, x: torch.Tensor, y: torch.Tensor) -> None:
        """Fix the shift of every class seen for the first time: its first sample in this batch (skipped, with
        its device sync, once every class has a shift)."""
        if self._all_shifted:
            return
        st = self._state
        assert st is not None
        B = x.shape[0]
        first = torch.full((self.K,), B, dtype=torch.int64, device=x.device)
        first.scatter_reduce_(0, y, torch.arange(B, device=x.device), reduce="amin")
        new = (first < B) & (st["counts"] == 0)
        if bool(new.any()):
            rows = x[first[new]].to(torch.float64)
            st["shift"][new] = rows
            if self._shift32 is not None:
                self._shift32[new] = rows.float()
                if not bool((self._shift32[new] == rows).all()):
                    self._shift32 = None  # rebuilt (and found not float32) by _float32_shift
        self._all_shifted = bool(((first < B) | (st["counts"] > 0)).all())

    def _count(self, y: torch.Tensor, device: torch.device) -> torch.Tensor | None:
        """Add the batch's labels to the counts; returns the batch's counts per class (the bound of the float32
        partial sums), or None on accelerators, where ``bincount`` would sync the device."""
        assert self._state is not None  # allocated before the first batch is counted
        counts = self._state["counts"]
        if accelerated(device):
            counts.index_add_(0, y, torch.ones_like(y))
            return None
        per_class = torch.bincount(y, minlength=self.K)
        counts += per_class
        return per_class

    def _float32_shift(self) -> torch.Tensor | None:
        """The shifts in float32, or None when one is not a float32 number (set by float64 rows, a merge or a
        load): the float32 lanes subtract them in float32 and must subtract exactly the float64 shift."""
        if self._shift32 is None and not self._shift32_checked:
            assert self._state is not None
            s = self._state["shift"]
            s32 = s.float()
            self._shift32_checked = True
            self._shift32 = s32 if bool((s32 == s).all()) else None
        return self._shift32

    def _lane_count(self, rows: int, device: torch.device) -> int:
        """Lanes (threads) for a batch: one per thread of torch's budget (``torch.get_num_threads()``), at most
        :data:`MAX_LANES` and one per :data:`MIN_LANE_ROWS` rows, on the CPU only, and only while a lane's own
        accumulators and buffers stay under 64 MB (d <= ~2,000)."""
        if accelerated(device):
            return 1
        n = min(torch.get_num_threads(), MAX_LANES, rows // MIN_LANE_ROWS)
        if n <= 1:
            return 1
        K, d, b = self.K, self.d, self.gram_block_rows()
        dd = d * d if self.track == "full" else 0
        own = 8 * (3 * K * d + dd)  # float64 accumulators
        buffers = 8 * b * d + 4 * b * d + 8 * dd + 4 * 2 * K * d  # Gram block, scratch, Gram, partial sums
        return n if own + buffers <= _LANE_BYTES else 1

    def _gram_workers(self, device: torch.device, threads: int) -> int:
        """Worker threads that form the float32 block Grams of the full track (``nclab.stats._gram_pipeline``):
        one per core of torch's budget (``threads``) beyond the caller's, at most :data:`MAX_LANES` - 1, on the
        CPU, for d up to ``NUMPY_GRAM_MAX_DIM`` (512), where the one-thread path forms its block Grams with the
        same numpy product (wider, it uses scipy's ``ssyrk``: the workers would change the rounding). Their buffers
        are then small: at most 6 blocks of at most 8 MB and 5 float32 products of at most 1 MB."""
        if self.track != "full" or accelerated(device) or self.d > NUMPY_GRAM_MAX_DIM:
            return 0
        return max(0, min(threads, MAX_LANES) - 1)

    def _lane_tasks(
        self,
        lanes: int,
        x: torch.Tensor,
        y: torch.Tensor,
        norms: torch.Tensor | None,
        shift32: torch.Tensor | None,
        per_class: torch.Tensor | None,
        gram32: bool,
        zero_rows: bool,
        workers: int = 0,
    ) -> list[Callable[[], None]]:
        """One task per lane, each over a contiguous share of the rows; lane 0 adds into the state itself. With
        ``shift32`` the rows go through the float32 lanes (``norms``: float32 norms), else the float64 ones
        (``norms``: float64 norms, or None). ``workers``: threads that form lane 0's float32 block Grams (0: lane 0
        forms them, after any it queued before)."""
        fast = shift32 is not None
        st = self._state
        assert st is not None
        assert self._device is not None  # set with the state
        while len(self._lanes) < lanes:
            self._lanes.append(Lane(self._lane_spec(), self._device))
        for lane in self._lanes:
            lane.parallel = lanes > 1
        self._lanes[0].use_pipeline(workers)
        aux = None
        if fast:  # per row: ||z||^2 (filled by the lanes), w = 1 / ||x|| (0 for a zero row) with unit sums
            assert norms is not None
            aux = torch.empty((x.shape[0], 2 if self.unit_sums_kept else 1), dtype=torch.float32, device=x.device)
            if self.unit_sums_kept:
                w = torch.reciprocal(norms, out=aux[:, 1])
                if zero_rows:  # a zero row has no direction: it adds the zero vector
                    w.masked_fill_(norms == 0, 0.0)
        B = x.shape[0]
        tasks: list[Callable[[], None]] = []
        for i in range(lanes):
            a, b = B * i // lanes, B * (i + 1) // lanes
            lane, target = self._lanes[i], st if i == 0 else self._lanes[i].own()
            if shift32 is not None:
                assert aux is not None
                shifts = (st["shift"], shift32)
                tasks.append(partial(lane.add_float32, x[a:b], y[a:b], aux[a:b], per_class, shifts, target))
            else:
                ni = None if norms is None else norms[a:b]
                tasks.append(partial(lane.add_float64, x[a:b], y[a:b], ni, st["shift"], target, gram32))
        return tasks

    def _lane_spec(self) -> LaneSpec:
        return LaneSpec(
            K=self.K,
            d=self.d,
            full=self.track == "full",
            unit_sums=self.unit_sums_kept,
            block_rows=self.gram_block_rows(),
        )

    def gram_block_rows(self) -> int:
        """Rows ``b`` of the blocks whose float32 Gram is formed at once (and most rows of one class in a float32
        partial sum): 4,096, fewer for wide features on the CPU (the block buffer is at most 2M entries, 8 MB in
        float32), at least 256. Measured on one core at d = 256-512 (numpy's ``syrk`` of the block plus the
        float64 add, per row, against one whole-matrix float32 ``X.T @ X``): 1.05-1.09x at 4,096 rows,
        1.07-1.12x at 2,048, 1.11-1.27x at 1,024 (benchmarks/RESULTS.md)."""
        if self._device is not None and accelerated(self._device):
            return 4096
        return max(256, min(4096, (1 << 21) // self.d))

    def _flush(self) -> None:
        """Add everything the lanes hold (pending Gram rows, float32 partial sums, the accumulators of the lanes
        other than lane 0) into the state."""
        st = self._state
        if st is None:
            return
        dirty = [i for i, lane in enumerate(self._lanes) if lane.dirty]
        if not dirty:
            return

        def flush(i: int) -> None:
            self._lanes[i].flush(st["shift"], st if i == 0 else self._lanes[i].own())

        # K x d and d x d additions: one torch thread (an OpenMP team on arrays this small only waits for its
        # members, measured 0.2-0.3 s instead of ~1 ms for the merge at d = 512 on a busy 2-core machine)
        with torch_threads(1, self._device):
            if len(dirty) > 1 and self._device is not None and not accelerated(self._device):
                # each lane forms the Gram of its pending block on a core of its own (up to 2 x 4,096 rows: ~5%
                # of the Gram of 100,000 rows, formed one after the other before, with the BLAS's own threads)
                for i in dirty:
                    self._lanes[i].parallel = True
                with single_blas_thread(True):
                    run_lanes([partial(flush, i) for i in dirty])
            else:
                for i in dirty:
                    flush(i)
            for i in dirty:
                if i > 0:
                    self._lanes[i].merge_own_into(st)

    def _row_norms(self, x: torch.Tensor) -> tuple[torch.Tensor, float, float]:
        """Float64 row norms ``(B, 1)`` (the unit sums need them) and their smallest and largest value; NaN/inf
        anywhere in a row makes its norm non-finite, which rejects the batch before any accumulator changes (a
        rejected batch leaves no trace)."""
        # on the CPU in chunks: the float64 upcast inside the norm stays in cache
        chunk = x.shape[0] if accelerated(x.device) else chunk_rows(x.shape[0], self.d)
        parts = [
            torch.linalg.vector_norm(x[i : i + chunk], dim=1, keepdim=True, dtype=torch.float64)
            for i in range(0, x.shape[0], chunk)
        ]
        norms = parts[0] if len(parts) == 1 else torch.cat(parts)
        lo, hi = (float(v) for v in torch.stack(tuple(torch.aminmax(norms))).tolist())  # one device sync
        if not self.check_finite:
            return norms, lo, hi
        # NaN fails both comparisons, and exact zero rows (lo = 0) take the exact check below, which allows them
        if not (lo >= _MIN_ROW_NORM and hi <= _MAX_ROW_NORM):
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
        return norms, lo, hi

    def clear_memo(self) -> None:
        """Drop the derived values cached by :meth:`moments` (the d x d matrices the accessors and metrics called
        on this ClassStats computed; they are recomputed on demand). A cache whose lifetime a caller controls is a
        :class:`~nclab.stats.ClassMoments` view of its own."""
        self._derived.clear()

    # ------------------------------------------------------------------ accessors
    def _get(self, key: str) -> np.ndarray:
        if key not in ("counts", "shift"):
            self._flush()
        if self._state is None:
            if key == "counts":
                return np.zeros(self.K, dtype=np.int64)
            if key == "scatter_dev":
                return np.zeros((self.d, self.d))
            if key == "sq_dev":
                return np.zeros(self.K)
            return np.zeros((self.K, self.d))
        t = self._state[key]
        arr = t.numpy() if t.device.type == "cpu" else t.cpu().numpy()
        if key in _OVERFLOWABLE and not self._finite(key, arr):
            # every accepted row is finite with finite squares, so only many rows near the bound get here
            raise ValueError(
                f"the accumulated {key} overflowed float64 ({self.N} samples whose norms lie near "
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
                if name == "unit_sums":
                    raise ValueError(_NO_UNIT_SUMS)
                raise ValueError(f"unknown raw moment {name!r}; these ClassStats hold {', '.join(self._specs)}")
            view = self._get(name).view()
            view.setflags(write=False)
            self._checked[("raw", name)] = view
        elif name not in ("counts", "shift"):
            self._flush()  # rows still held by the lanes belong to this state
        return view

    def raw_tensor(self, name: str) -> torch.Tensor:
        """The raw moment ``name`` (as :meth:`raw`) as the state's own tensor on the statistics' device, no copy:
        what a :class:`~nclab.stats.ClassMoments` view with a torch backend reads to form the d x d statistics
        where they live (the GPU's Gram accumulator never goes to the host). Do not modify it. Zeros on the CPU
        before the first batch; the same overflow check as :meth:`raw` (on the device, once per state)."""
        if name not in self._specs:
            self.raw(name)  # raises the error that names the moments these statistics hold
        if name not in ("counts", "shift"):
            self._flush()
        if self._state is None:
            return torch.from_numpy(self._get(name))
        t = self._state[name]
        if name in _OVERFLOWABLE:
            done = self._checked.get(("finite", name))
            if done is None:
                done = self._checked[("finite", name)] = bool(torch.isfinite(t).all())
            if not done:
                self._get(name)  # raises the overflow error of `raw`
        return t

    @property
    def counts(self) -> np.ndarray:
        """Samples per class, ``(K,)`` int64 (zeros mark empty classes)."""
        return self._get("counts").copy()

    @property
    def N(self) -> int:
        """Total sample count N."""
        n = self._checked.get("N")
        if n is None:
            n = self._checked["N"] = int(self._get("counts").sum())
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
                f"{what} need a mean for every class, but {empty.size} of {self.K} classes are empty "
                f"(classes {shown}); pass classes='present' (or use stats.drop_empty()) to measure the classes present"
            )
        return counts

    @property
    def unit_sums(self) -> np.ndarray:
        """Per-class sums of L2-normalised features ``sum_{y_i=k} h_i / ||h_i||``, ``(K, d)``; ``ValueError``
        for statistics built with ``unit_sums=False``."""
        if not self.unit_sums_kept:
            raise ValueError(_NO_UNIT_SUMS)
        return self._get("unit_sums").copy()

    # ------------------------------------------------------------------ derived statistics (ClassMoments)
    def moments(self) -> ClassMoments:
        """The derived statistics of these statistics (:class:`~nclab.stats.ClassMoments`), over the cache that this
        ClassStats keeps for its own accessors below: its values live as long as this ClassStats, until the
        statistics change or :meth:`clear_memo`. For a cache whose lifetime the caller controls (a report's, say),
        build an independent view: ``ClassMoments(stats)``."""
        return ClassMoments(self, cache=self._derived)

    # `means` is the one derived statistic read from the ClassStats itself (the everyday accessor, and the NCC's
    # centres); every other one has its one home in `moments()` (ClassMoments: the computations, their cache and
    # their documentation). The forwarding accessors below are deprecated: they warn, then read `moments()`.
    @property
    def means(self) -> np.ndarray:
        """Class means ``mu_k``, ``(K, d)``; raises :class:`EmptyClassError` if a class is empty
        (:attr:`ClassMoments.means <nclab.stats.ClassMoments.means>`)."""
        return self.moments().means

    def global_mean(self, weighting: Weighting = "balanced") -> np.ndarray:
        """Deprecated: ``stats.moments().global_mean(weighting)``."""
        return self._forward("global_mean")(weighting)  # type: ignore[no-any-return]

    def centered_means(self, weighting: Weighting = "balanced") -> np.ndarray:
        """Deprecated: ``stats.moments().centered_means(weighting)``."""
        return self._forward("centered_means")(weighting)  # type: ignore[no-any-return]

    @property
    def class_ss(self) -> np.ndarray:
        """Deprecated: ``stats.moments().class_ss``."""
        _warn_forward("class_ss", stacklevel=3)
        return self.moments().class_ss

    def within_scatter(self, copy: bool = True) -> np.ndarray:
        """Deprecated: ``stats.moments().within_scatter(copy)``."""
        return self._forward("within_scatter")(copy)  # type: ignore[no-any-return]

    def sigma_w(self, copy: bool = True) -> np.ndarray:
        """Deprecated: ``stats.moments().sigma_w(copy)``."""
        return self._forward("sigma_w")(copy)  # type: ignore[no-any-return]

    def sigma_b(self, weighting: Weighting = "balanced", copy: bool = True) -> np.ndarray:
        """Deprecated: ``stats.moments().sigma_b(weighting, copy)``."""
        return self._forward("sigma_b")(weighting, copy)  # type: ignore[no-any-return]

    def between_factor(self, weighting: Weighting = "balanced") -> np.ndarray:
        """Deprecated: ``stats.moments().between_factor(weighting)``."""
        return self._forward("between_factor")(weighting)  # type: ignore[no-any-return]

    def sigma_t(self, copy: bool = True) -> np.ndarray:
        """Deprecated: ``stats.moments().sigma_t(copy)``."""
        return self._forward("sigma_t")(copy)  # type: ignore[no-any-return]

    def trace_w(self) -> float:
        """Deprecated: ``stats.moments().trace_w()``."""
        return self._forward("trace_w")()  # type: ignore[no-any-return]

    def trace_b(self, weighting: Weighting = "balanced") -> float:
        """Deprecated: ``stats.moments().trace_b(weighting)``."""
        return self._forward("trace_b")(weighting)  # type: ignore[no-any-return]

    def mean_gram(self, center: bool = True, weighting: Weighting = "balanced") -> np.ndarray:
        """Deprecated: ``stats.moments().mean_gram(center, weighting)``."""
        return self._forward("mean_gram")(center, weighting)  # type: ignore[no-any-return]

    def _forward(self, name: str) -> Callable[..., Any]:
        _warn_forward(name)
        return getattr(self.moments(), name)  # type: ignore[no-any-return]

    def drop_empty(self) -> ClassStats:
        """A copy restricted to the classes that have samples (relabelled 0..K'-1 in order)."""
        keep = np.flatnonzero(self._get("counts") > 0)
        if keep.size < 2:
            raise ValueError(f"only {keep.size} class(es) have samples; collapse metrics need at least 2")
        return self.select_classes(keep)

    def select_classes(self, keep: Any) -> ClassStats:
        """A copy restricted to the classes ``keep`` (increasing class indices, at least 2), relabelled
        0..K'-1 in that order (:func:`nclab.metrics.present_classes` chooses them)."""
        keep = np.asarray(keep, dtype=np.int64)
        if keep.ndim != 1 or keep.size < 2 or np.any(np.diff(keep) <= 0) or keep[0] < 0 or keep[-1] >= self.K:
            raise ValueError(f"keep must be >= 2 increasing class indices in [0, {self.K}), got {keep.size} indices")
        self._flush()
        out = ClassStats(
            int(keep.size),
            self.d,
            track=self.track,
            check_finite=self.check_finite,
            compute_dtype=self.compute_dtype,
            unit_sums=self.unit_sums_kept,
        )
        assert self._state is not None
        idx = torch.as_tensor(keep, device=self._device)
        out._device = self._device
        out._state = {k: (v.clone() if k == "scatter_dev" else v.index_select(0, idx)) for k, v in self._state.items()}
        out._reduced = self._reduced
        return out

    def __repr__(self) -> str:
        return f"ClassStats(K={self.K}, d={self.d}, track={self.track!r}, N={self.N}, device={self._device}" + (
            f", compute_dtype={self.compute_dtype!r})" if self.compute_dtype != "float64" else ")"
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
# Feature dtypes whose values float32 holds exactly (the float32 lanes take them), and the range of squared row
# norms those lanes accept: within it no float32 square, product or block sum over- or underflows.
_FLOAT32_EXACT = frozenset({torch.float32, torch.float16, torch.bfloat16})
_LO_NORM, _HI_NORM = 2.0**-30, 2.0**30
#: Most memory one extra lane may hold (its float64 accumulators and float32 buffers).
_LANE_BYTES = 64 << 20
_NO_UNIT_SUMS = (
    "these ClassStats were built with unit_sums=False (no per-class sums of unit vectors); the cosine metrics "
    "and GNC3 need them: build the statistics with unit_sums=True (the default)"
)


class _Screen(NamedTuple):
    """The path a screened batch takes: ``fast`` (float32 lanes; ``rows`` in float32, ``norms`` their float32
    norms) or not (float64 lanes; ``norms`` float64 row norms, or None to compute them in the lanes);
    ``safe``: the rows are float32-safe (a float32 Gram may take them)."""

    fast: bool
    safe: bool
    rows: torch.Tensor
    norms: torch.Tensor | None
    zero_rows: bool = False  # some row is exactly zero


def _float32_safe(x: torch.Tensor, norms: torch.Tensor, lo: float, hi: float) -> bool:
    """Whether every row's norm lies in ``[2^-30, 2^30]`` or the row is exactly zero (``lo``, ``hi``: the
    smallest and largest of ``norms``): within that range no float32 square, product or sum of ``b`` of them
    over- or underflows. Exact zero rows are fine (no direction, zero moments); rows with tiny nonzero
    norms are not."""
    if not (hi <= _HI_NORM):  # NaN too
        return False
    if lo >= _LO_NORM:
        return True
    small = norms < _LO_NORM
    return lo == 0 and bool((norms[small] == 0).all()) and not bool(x[small].any())


def _check_state_size(K: int, d: int, track: Track, unit_sums: bool = True) -> None:
    """Refuse (:class:`nclab.memory.AllocationTooLarge`) state that does not fit: three K x d float64 arrays
    (two without unit sums), plus the d x d scatter for ``track="full"``."""
    kd, dd = (3.0 if unit_sums else 2.0) * 8 * K * d, 8.0 * d * d if track == "full" else 0.0
    if track == "full" and dd >= kd:
        alternative = (
            "use track='light' (trace ratio, CDNV, cosines and the NC2/NC3 metrics need only the K x d state; "
            "`nclab measure --track light`), or reduce d (e.g. a random projection)"
        )
    else:
        alternative = "use fewer classes (check the labels: is K right?) or reduce d"
    check_allocation(
        kd + dd,
        what=f"ClassStats(K={K}, d={d}, track={track!r})"
        + (f" (the d x d scatter alone: {format_bytes(dd)})" if dd else ""),
        alternative=alternative,
    )


def check_labels_dtype(y: torch.Tensor) -> None:
    """Labels must have an integer dtype (float labels are an error, not silently truncated)."""
    if y.is_floating_point() or y.is_complex() or y.dtype == torch.bool:
        raise TypeError(f"labels must have an integer dtype, got {y.dtype}")


def check_batch(features: Any, labels: Any, d: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Validate one ``(features (B, d), labels (B,))`` batch; return them as tensors (no copy when possible).

    The one place for batch validation of every streaming accumulator (ClassStats, NCCAccumulator, ...):
    2-D float features of dimension ``d``, 1-D integer labels with one entry per row.
    """
    x = to_tensor(features, "features")
    y = to_tensor(labels, "labels")
    for name, t in (("features", x), ("labels", y)):
        if t.device.type == "meta":  # no data to read: every value check below would fail obscurely
            raise ValueError(f"{name} are on the 'meta' device (no data); move them to 'cpu' or 'cuda' first")
    if x.ndim != 2:
        raise ValueError(f"features must be 2-D (B, d), got shape {tuple(x.shape)}")
    if x.shape[1] != d:
        raise ValueError(f"features have {x.shape[1]} columns, but these statistics were built for d = {d}")
    if not x.is_floating_point():
        raise TypeError(f"features must have a floating dtype, got {x.dtype}")
    if y.ndim != 1 or y.shape[0] != x.shape[0]:
        raise ValueError(
            f"labels must be 1-D with one entry per feature row: features {tuple(x.shape)}, labels {tuple(y.shape)}"
        )
    check_labels_dtype(y)
    return x, y


def check_label_range(y: torch.Tensor, K: int) -> None:
    """Labels (non-empty) must lie in ``[0, K)``."""
    lo, hi = torch.aminmax(y)
    _check_label_bounds(int(lo), int(hi), K)


def _check_label_bounds(ymin: int, ymax: int, K: int, y: torch.Tensor | None = None) -> None:
    if ymin < 0 or ymax >= K:
        if y is not None:  # exact values (the screen may have read them through float64)
            ymin, ymax = int(y.min()), int(y.max())
        bad = ymin if ymin < 0 else ymax
        raise ValueError(f"label {bad} is out of range [0, {K})")
