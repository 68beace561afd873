"""The derived statistics of :class:`~nclab.stats.ClassStats`, cached by name: the view every metric reads.

:class:`~nclab.stats.ClassStats` accumulates raw moments about per-class shifts (counts, shifted sums, the Gram of
the shifted features). :class:`ClassMoments` turns them into the statistics the metrics use (class means, the
global mean, Sigma_W, Sigma_B, Sigma_T, their traces, the K x d factor of Sigma_B, the Gram of the means) and
caches each one under a named key of :class:`MomentKey` until the statistics change. Values the metrics derive
from these (eigendecompositions, the whitened between-class factor, ...) are cached in the same view through
:meth:`ClassMoments.memo`, also under a :class:`MomentKey` name: the one list of the cache's names.

Cache lifetime
--------------
A view's cache lives as long as the view. ``ClassMoments(stats)`` builds a view whose cache is its own: hold it
while its values are useful, drop it and the d x d matrices go with it. For example, a report and a loss
decomposition of the same statistics share Sigma_W and Sigma_T through one view::

    view = ClassMoments(stats)
    report = collapse_report(view, W=W, b=b)
    dec = mse_decomposition_from_stats(view, W, b, lam=lam)
    del view                    # frees the cached matrices

``stats.moments()`` returns a view over the cache that ``stats`` keeps for its own accessors (``stats.sigma_w()``,
``stats.means``, ...) and for metrics called on ``stats`` directly: that cache lives as long as ``stats``.
Either kind of view follows the statistics: after an ``update``, ``merge``, ``all_reduce``, ``load`` or ``reset``
its cache is emptied and every value is recomputed from the new state (:attr:`ClassStats.state_version
<nclab.stats.ClassStats.state_version>`). Cached numpy arrays are read-only, so that no caller can corrupt them.

Conventions (``docs/conventions.md``): Sigma_W and Sigma_T are divided by the total count N; Sigma_B is divided
by K (``weighting="balanced"``) or weighted by n_k / N (``"empirical"``). A view serves both weightings: the
weighting is a parameter of each accessor and part of its cache key, because Sigma_T = Sigma_W +
Sigma_B(empirical) is needed whatever weighting a report uses.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, Final, Literal, Protocol, TypeVar

import numpy as np

from nclab.stats.backend import NUMPY, Linalg, LinalgBackend, choose_backend

__all__ = ["ClassMoments", "MomentKey", "MomentSource", "Weighting", "check_weighting"]

Weighting = Literal["balanced", "empirical"]
T = TypeVar("T")


def check_weighting(weighting: str) -> None:
    """``weighting`` must be ``"balanced"`` or ``"empirical"``."""
    if weighting not in ("balanced", "empirical"):
        raise ValueError(f"weighting must be 'balanced' or 'empirical', got {weighting!r}")


class MomentKey:
    """The names of the entries of a :class:`ClassMoments` cache.

    An entry is the name alone, or ``(name, *parameters)`` for the parameters noted here;
    :meth:`ClassMoments.memo` refuses any other name.

    Notes
    -----
    Plain string constants rather than an ``Enum``: a report looks entries up a few hundred times, and a string
    hashes in C where an ``Enum`` member hashes in Python.

    Examples
    --------
    >>> MomentKey.SIGMA_W, MomentKey.GLOBAL_MEAN
    ('sigma_w', 'global_mean')
    """

    # computed by ClassMoments itself
    MEANS: Final = "means"
    CLASS_SS: Final = "class_ss"
    GLOBAL_MEAN: Final = "global_mean"  # (weighting,)
    CENTERED_MEANS: Final = "centered_means"  # (weighting,)
    WITHIN_SCATTER: Final = "within_scatter"
    SIGMA_W: Final = "sigma_w"
    SIGMA_B: Final = "sigma_b"  # (weighting,)
    SIGMA_T: Final = "sigma_t"
    TRACE_B: Final = "trace_b"  # (weighting,)
    # computed by nclab.metrics from the above, shared by the metrics of one view
    FEATURE_SCALE_SQ: Final = "feature_scale_sq"  # max_k (||mu_k||^2 + var_k)
    EIG: Final = "eig"  # (which, weighting or None): eigenvalues and eigenvectors of Sigma_W, Sigma_T or Sigma_B
    EIGVALS: Final = "eigvals"  # (which,): eigenvalues alone of Sigma_W or Sigma_T
    BETWEEN_EIG: Final = "between_eig"  # (weighting,): Sigma_B's eigenvalues and leading eigenvectors (thin SVD)
    WHITENED_BETWEEN: Final = "whitened_between"  # (rtol,): the SVD of the whitened between-class factor
    GEOMETRY_ROWS: Final = "geometry_rows"  # (center, weighting): the class-mean rows of the NC2 metrics
    ETF_PAIR_MOMENTS: Final = "etf_pair_moments"  # (weighting,): moments of the pairwise cosines about -1/(K-1)
    PAIR_SWEEP: Final = "pair_sweep"  # (weighting,): one tiled sweep of the unit centred means' pairs (large K)


_NAMES = frozenset(v for k, v in vars(MomentKey).items() if k.isupper())


class MomentSource(Protocol):
    """What a :class:`ClassMoments` view reads from its statistics (:class:`~nclab.stats.ClassStats` is one)."""

    K: int
    d: int
    unit_sums_kept: bool

    @property
    def track(self) -> str: ...  # read-only here, so that ClassStats' Literal["full", "light"] conforms

    @property
    def state_version(self) -> int: ...

    @property
    def N(self) -> int: ...

    @property
    def counts(self) -> np.ndarray: ...

    @property
    def unit_sums(self) -> np.ndarray: ...

    @property
    def empty_classes(self) -> np.ndarray: ...

    def raw(self, name: str) -> np.ndarray: ...

    def require_nonempty(self, what: str) -> np.ndarray: ...

    def drop_empty(self) -> Any: ...


def _maybe_copy(a: np.ndarray, copy: bool) -> np.ndarray:
    return a.copy() if copy else a


class ClassMoments:
    """Derived statistics of a :class:`~nclab.stats.ClassStats`, each computed on first use and cached in this
    view until the statistics change (see the module documentation for the cache's lifetime).

    Parameters
    ----------
    stats : ClassStats
        The statistics to read (any :class:`MomentSource`).
    cache : dict, optional
        Where to keep the cached values: by default a new dict that only this view holds;
        :meth:`ClassStats.moments <nclab.stats.ClassStats.moments>` passes the one ``stats`` keeps for itself.
    linalg : {"auto", "numpy", "torch"}, default "auto"
        Where the d x d statistics (:meth:`matrix`) and the metrics' linear algebra on them run
        (:mod:`nclab.stats.backend`): "auto" runs torch on the statistics' device when that is an accelerator
        (CUDA: the d x d matrices stay on the GPU, only scalars and vectors come back), numpy on the host
        otherwise; "numpy" always on the host (the d x d Gram is copied off an accelerator); "torch" with torch on
        the statistics' device, also the CPU. The host accessors (``sigma_w()``, ...) return numpy arrays
        whatever the backend.

    The view also answers the raw reads of its statistics (``K``, ``d``, ``track``,
    ``unit_sums_kept``, ``counts``, ``N``, ``unit_sums``, ``raw``, ``empty_classes``, ``require_nonempty``,
    ``drop_empty``), so that every metric takes a view or a ClassStats alike.

    Examples
    --------
    >>> import numpy as np
    >>> from nclab.stats import ClassMoments, ClassStats
    >>> H = np.array([[1.0, 0.0], [3.0, 0.0], [0.0, 2.0], [0.0, 4.0]])
    >>> stats = ClassStats.from_arrays(H, np.array([0, 0, 1, 1]))
    >>> view = ClassMoments(stats)
    >>> print(view.sigma_w())
    [[0.5 0. ]
     [0.  0.5]]
    >>> round(view.trace_b("balanced"), 12)  # ||mu_0 - mu_G||^2 / 2 + ||mu_1 - mu_G||^2 / 2, mu_G = (1, 1.5)
    3.25
    >>> view.sigma_w(copy=False) is view.sigma_w(copy=False)  # cached, read-only
    True
    """

    __slots__ = ("K", "_cache", "_stats", "_version", "backend", "d", "track", "unit_sums_kept")

    def __init__(
        self, stats: MomentSource, *, cache: dict[Hashable, Any] | None = None, linalg: Linalg = "auto"
    ) -> None:
        # the class, not the instance: a protocol isinstance would evaluate (copy) every property on Python 3.11
        if not all(hasattr(type(stats), name) for name in ("raw", "state_version", "require_nonempty")):
            raise TypeError(f"ClassMoments reads ClassStats, got {type(stats).__name__}")
        self._stats = stats
        self._cache: dict[Hashable, Any] = {} if cache is None else cache
        self._version = stats.state_version
        # fixed for the life of the statistics: plain attributes (a report reads them hundreds of times)
        self.K: int = stats.K
        self.d: int = stats.d
        self.track: str = stats.track
        self.unit_sums_kept: bool = bool(getattr(stats, "unit_sums_kept", True))
        #: where :meth:`matrix` and the metrics' linear algebra run (:mod:`nclab.stats.backend`)
        self.backend: LinalgBackend = choose_backend(linalg, getattr(stats, "device", None))

    # ------------------------------------------------------------------ the cache
    def _entries(self) -> dict[Hashable, Any]:
        """The cache, emptied first if the statistics changed since its values were computed."""
        version = self._stats.state_version
        if version != self._version:
            self._cache.clear()
            self._version = version
        return self._cache

    def memo(self, key: str, *params: Hashable, compute: Callable[[], T], backend: bool = False) -> T:
        """``compute()``, cached under ``key`` (a :class:`MomentKey` name) and ``params`` until the statistics
        change. numpy arrays in the value (or in a tuple value) are made read-only. ``backend=True``: the value
        is computed on the view's :attr:`backend`, whose key joins the parameters (views of one cache with
        different backends keep their own values; numpy values keep the parameters alone)."""
        if key not in _NAMES:
            raise ValueError(f"{key!r} is not a MomentKey name (the cache's names are listed there)")
        if backend and self.backend.key is not None:
            params = (*params, self.backend.key)
        cache = self._entries()
        entry = (key, *params) if params else key  # the name alone when unparametrised: no tuple to hash
        if entry not in cache:
            value = compute()
            for arr in value if isinstance(value, tuple) else (value,):
                if isinstance(arr, np.ndarray):
                    arr.setflags(write=False)
            cache[entry] = value
        cached: T = cache[entry]
        return cached

    def peek(self, key: str, *params: Hashable, backend: bool = False) -> Any:
        """The value cached under ``key`` and ``params`` (``backend`` as in :meth:`memo`) for the current
        statistics, or None."""
        if backend and self.backend.key is not None:
            params = (*params, self.backend.key)
        return self._entries().get((key, *params) if params else key)

    def clear(self) -> None:
        """Drop every cached value (they are recomputed on demand)."""
        self._cache.clear()

    # ------------------------------------------------------------------ raw reads of the statistics
    @property
    def stats(self) -> MomentSource:
        """The statistics this view reads."""
        return self._stats

    @property
    def counts(self) -> np.ndarray:
        """Samples per class, ``(K,)`` int64."""
        return self._stats.counts

    @property
    def N(self) -> int:
        return self._stats.N

    @property
    def unit_sums(self) -> np.ndarray:
        """Per-class sums of L2-normalised features, ``(K, d)`` (``ValueError`` if the statistics do not keep them,
        ``unit_sums_kept`` False)."""
        return self._stats.unit_sums

    @property
    def empty_classes(self) -> np.ndarray:
        return self._stats.empty_classes

    def require_nonempty(self, what: str) -> np.ndarray:
        """Counts ``(K,)``; raises ``EmptyClassError`` naming the empty classes (``what`` needs them all)."""
        return self._stats.require_nonempty(what)

    def raw(self, name: str) -> np.ndarray:
        """The statistics' raw moment ``name``: a read-only view, no copy (:meth:`ClassStats.raw
        <nclab.stats.ClassStats.raw>`)."""
        return self._stats.raw(name)

    def drop_empty(self) -> Any:
        """The statistics restricted to the classes that have samples (a new ClassStats)."""
        return self._stats.drop_empty()

    def _need_full(self, what: str) -> None:
        if self.track != "full":
            raise ValueError(
                f"{what} needs the d x d within-class scatter, which track='light' does not keep; "
                f"rebuild these ClassStats with track='full'"
            )

    # ------------------------------------------------------------------ derived statistics
    @property
    def means(self) -> np.ndarray:
        """Class means ``mu_k``, ``(K, d)``; raises ``EmptyClassError`` if a class is empty."""
        return self.class_means()

    def class_means(self, copy: bool = True) -> np.ndarray:
        """Class means ``mu_k``, ``(K, d)`` (as :attr:`means`); ``copy=False`` returns the cached array itself
        (read-only): what the metrics read, without a K x d copy per call at a vocabulary's K."""
        counts = self._stats.require_nonempty("class means")
        raw = self._stats.raw

        def compute() -> np.ndarray:
            mu: np.ndarray = raw("sum_dev") / counts[:, None]
            mu += raw("shift")  # in place: one K x d array (the same sums as shift + sum_dev / n)
            return mu

        means: np.ndarray = self.memo(MomentKey.MEANS, compute=compute)
        return _maybe_copy(means, copy)

    def global_mean(self, weighting: Weighting = "balanced") -> np.ndarray:
        """``(d,)``: the mean of class means (``"balanced"``) or the sample mean (``"empirical"``)."""
        check_weighting(weighting)
        mean: np.ndarray = self.memo(MomentKey.GLOBAL_MEAN, weighting, compute=lambda: self._global_mean(weighting))
        return mean.copy()

    def _global_mean(self, weighting: Weighting) -> np.ndarray:
        mu = self.class_means(copy=False)
        if weighting == "balanced":
            mean: np.ndarray = mu.mean(axis=0)
        else:
            mean = (self._stats.raw("counts") / self._stats.N) @ mu
        return mean

    def centered_means(self, weighting: Weighting = "balanced", copy: bool = True) -> np.ndarray:
        """``M = mu_k - mu_G``, ``(K, d)``; ``copy=False``: the cached array itself (read-only)."""
        check_weighting(weighting)
        compute = lambda: self.class_means(copy=False) - self.global_mean(weighting)  # noqa: E731
        centered: np.ndarray = self.memo(MomentKey.CENTERED_MEANS, weighting, compute=compute)
        return _maybe_copy(centered, copy)

    @property
    def class_ss(self) -> np.ndarray:
        """Per-class sum of squared deviations ``sum_{y_i=k} ||h_i - mu_k||^2``, ``(K,)`` (0 for empty classes)."""
        return self.memo(MomentKey.CLASS_SS, compute=self._class_ss).copy()

    def _class_ss(self) -> np.ndarray:
        raw = self._stats.raw
        counts = raw("counts")
        S = raw("sum_dev")
        safe = np.maximum(counts, 1)
        ss: np.ndarray = np.maximum(raw("sq_dev") - np.einsum("kd,kd->k", S, S) / safe, 0.0)
        return ss

    # d x d accessors: cached, exactly symmetric. ``copy=False`` returns the read-only cached array itself (what the
    # metrics use: a report reads Sigma_W a handful of times, and fresh d x d copies page-fault), ``copy=True``
    # (default) a private writable copy.
    def within_scatter(self, copy: bool = True) -> np.ndarray:
        """Pooled within-class scatter ``sum_i (h_i - mu_{y_i})(h_i - mu_{y_i})^T``, ``(d, d)``."""
        self._need_full("the within-class scatter")
        scatter: np.ndarray = self.memo(MomentKey.WITHIN_SCATTER, compute=lambda: self._within_scatter(NUMPY))
        return _maybe_copy(scatter, copy)

    def _raw_native(self, be: LinalgBackend, name: str) -> Any:
        """The raw moment ``name`` as an array of backend ``be``: on the statistics' device for torch."""
        if be.key is None:
            return self._stats.raw(name)
        raw_tensor = getattr(self._stats, "raw_tensor", None)  # ClassStats: the state's own tensor, no copy
        if raw_tensor is None:
            return be.asarray(self._stats.raw(name))
        return raw_tensor(name).to(device=be.device, dtype=be.xp.float64)

    def _within_scatter(self, be: LinalgBackend) -> Any:
        raw = self._stats.raw
        counts = raw("counts")
        S = raw("sum_dev")
        # syrk fills the lower triangle of this C-ordered array (the upper one is not maintained): mirror it
        W = be.mirror_lower(self._raw_native(be, "scatter_dev"))
        nz = counts > 0
        Sn = be.asarray(S[nz] / np.sqrt(counts[nz])[:, None])
        W -= Sn.T @ Sn
        return (W + W.T) / 2  # exactly symmetric, whatever the BLAS did for Sn^T Sn

    def _matrix(self, be: LinalgBackend, which: str, weighting: Weighting = "balanced") -> Any:
        """Sigma_W, Sigma_B(weighting) or Sigma_T (``which`` "within", "between", "total") computed and cached by
        backend ``be`` (numpy, or the view's own backend): the one definition of each, whatever the backend."""
        on = be.key is not None  # a value of the view's (torch) backend: cached under its key
        assert be is NUMPY or be is self.backend
        if which == "between":
            check_weighting(weighting)

            def between() -> Any:
                A = be.asarray(self.between_factor(weighting))
                B = A.T @ A
                return (B + B.T) / 2

            return self.memo(MomentKey.SIGMA_B, weighting, compute=between, backend=on)
        if which not in ("within", "total"):
            raise ValueError(f"which must be one of ['between', 'total', 'within'], got {which!r}")
        self._need_full("the within-class scatter")
        if which == "total":
            compute = lambda: self._matrix(be, "within") + self._matrix(be, "between", "empirical")  # noqa: E731
            return self.memo(MomentKey.SIGMA_T, compute=compute, backend=on)
        n = self._stats.N
        if n == 0:
            raise ValueError("sigma_w of empty ClassStats: no sample has been seen")
        # from the cached scatter if someone asked for it, else without caching the unscaled copy too
        scatter = self.peek(MomentKey.WITHIN_SCATTER, backend=on)
        compute = (lambda: scatter / n) if scatter is not None else (lambda: self._within_scatter(be) / n)
        return self.memo(MomentKey.SIGMA_W, compute=compute, backend=on)

    def matrix(self, which: str, weighting: Weighting = "balanced") -> Any:
        """Sigma_W (``which="within"``), Sigma_B(``weighting``) (``"between"``) or Sigma_T (``"total"``),
        ``(d, d)``, as an array of the view's backend (:attr:`backend`): the cached numpy array of
        :meth:`sigma_w` / :meth:`sigma_b` / :meth:`sigma_t` (read-only) on the numpy backend, a float64 torch
        tensor on the statistics' device on the torch backend (cached; do not modify it). What the metrics'
        linear algebra reads."""
        return self._matrix(self.backend, which, weighting)

    def sigma_w(self, copy: bool = True) -> np.ndarray:
        """Within-class covariance ``Sigma_W = (1/N) sum_i (h_i - mu_{y_i})(h_i - mu_{y_i})^T``, ``(d, d)``."""
        sw: np.ndarray = self._matrix(NUMPY, "within")
        return _maybe_copy(sw, copy)

    def sigma_b(self, weighting: Weighting = "balanced", copy: bool = True) -> np.ndarray:
        """Between-class covariance, ``(d, d)``: ``A^T A`` with ``A = between_factor(weighting)``.

        balanced: ``(1/K) sum_k M_k M_k^T``; empirical: ``sum_k (n_k/N) M_k M_k^T`` about the sample mean, so
        that ``sigma_t() == sigma_w() + sigma_b("empirical")`` exactly, also for imbalanced classes.
        """
        sb: np.ndarray = self._matrix(NUMPY, "between", weighting)
        return _maybe_copy(sb, copy)

    def between_factor(self, weighting: Weighting = "balanced") -> np.ndarray:
        """``A = diag(sqrt(w_k)) M``, ``(K, d)``, with ``sigma_b(weighting) = A^T A`` (w_k = 1/K or n_k/N).

        The K x d factor of Sigma_B: its thin SVD gives Sigma_B's eigenvalues (squared singular values) and
        eigenvectors in O(K^2 d) instead of an O(d^3) eigendecomposition, and resolves the small eigenvalues
        of Sigma_B more accurately than an eigendecomposition of the formed product.
        """
        M = self.centered_means(weighting, copy=False)
        factor: np.ndarray = np.sqrt(self._class_weights(weighting))[:, None] * M
        return factor

    def sigma_t(self, copy: bool = True) -> np.ndarray:
        """Total covariance ``(1/N) sum_i (h_i - mu_G)(h_i - mu_G)^T`` about the sample mean, ``(d, d)``."""
        st: np.ndarray = self._matrix(NUMPY, "total")
        return _maybe_copy(st, copy)

    def trace_w(self) -> float:
        """``Tr Sigma_W = (1/N) sum_k class_ss_k`` (available in light mode)."""
        n = self._stats.N
        if n == 0:
            raise ValueError("trace_w of empty ClassStats: no sample has been seen")
        return float(self.class_ss.sum() / n)

    def trace_b(self, weighting: Weighting = "balanced") -> float:
        """``Tr Sigma_B`` (available in light mode)."""
        return self.memo(MomentKey.TRACE_B, weighting, compute=lambda: self._trace_b(weighting))

    def _trace_b(self, weighting: Weighting) -> float:
        # Tr A^T A = ||A||_F^2 = sum_k w_k ||m_k||^2 of the between factor A: without forming A (K x d)
        M = self.centered_means(weighting, copy=False)
        return float(self._class_weights(weighting) @ np.einsum("kd,kd->k", M, M))

    def mean_gram(self, center: bool = True, weighting: Weighting = "balanced") -> np.ndarray:
        """Gram matrix of class means ``M M^T``, ``(K, K)``; centred about ``global_mean(weighting)``."""
        M = self.centered_means(weighting) if center else self.means
        gram: np.ndarray = M @ M.T
        return gram

    def _class_weights(self, weighting: Weighting) -> np.ndarray:
        check_weighting(weighting)
        if weighting == "balanced":
            return np.full(self.K, 1.0 / self.K)
        counts = self._stats.raw("counts")
        weights: np.ndarray = counts / counts.sum()
        return weights

    def __repr__(self) -> str:
        return f"ClassMoments({self._stats!r}, cached={len(self._entries())})"
