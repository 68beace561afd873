"""Nearest-class-centre (NCC) counts: PFC3 / NCC accuracy ([Wang et al. 2024; Jiang et al. 2024]) and NC4 mismatch
[Han et al. 2022].

NCC needs the class means first, so it is a **second pass** over the data (the same training data, or a
held-out split measured with the training means): build :class:`~nclab.stats.ClassStats` in pass 1, then::

    acc = NCCAccumulator(stats, W=W, b=b)
    for h, y in loader:            # numpy or torch batches, any float dtype, CPU or GPU
        acc.update(h, y)
    out = acc.compute()            # {"ncc_accuracy", "ncc_mismatch", "classifier_accuracy", ...}

Numerical method
----------------
Per batch, distances are computed in float64 on the accumulator's device, in coordinates shifted by the
balanced global mean ``mu_G`` (the mean of the class means): with ``h' = h - mu_G`` and ``m_k = mu_k - mu_G``,
``argmin_k ||h - mu_k||^2 = argmin_k (||m_k||^2 - 2 h'.m_k)``. Shifting first removes a common offset of the
features, which would otherwise cancel catastrophically in the expanded form (features ``1e6 * c + small``). The
classifier's decisions use ``argmax_k (W h + b)_k`` in float64, evaluated in the same shifted coordinates as
``W h' + (W mu_G + b)``, so that one matrix product ``h' [m_1 .. m_K, w_1 .. w_K]`` serves both (on the CPU
through numpy's BLAS, measured 2.7x faster than torch's float64 ``matmul`` for these narrow products).

Memory
------
The accumulator holds O(K d) float64 arrays: the class means, the centred means, the classifier and the
``(d, K)`` or ``(d, 2K)`` right-hand side of the product (estimated at construction, about
``8 K d (2 + [W]) + 16 C d`` bytes for ``C`` score columns, and refused upfront with
:class:`nclab.memory.AllocationTooLarge` naming K, d and the estimate when that does not fit the available memory
or ``NCLAB_MAX_BYTES``). Each update scores its batch in blocks of rows whose ``(rows, C)`` float64 scores fit the
working budget of :func:`nclab.memory.work_budget` (32 MiB by default, less under a cap or when memory is
short), in place, deciding each block before the next one: never ``B x K`` (at K = 20,000 with a classifier, a
batch of 4,096 rows would need 1.3 GB of scores, and a kept ``B x K`` logit matrix as much again), ``N x K`` or
``B x K x d``. Each row's scores and decisions do not depend on the block it is scored in, so the counts are those
of one product over the whole batch.

Ties: both ``argmin`` (NCC) and ``argmax`` (classifier) return the **lowest class index** among equal
computed scores (``torch.argmin`` / ``torch.argmax`` semantics). Distances equal in exact arithmetic may
differ by rounding in the computed scores, so exact ties are only guaranteed to resolve this way when the
scores are bit-identical (e.g. duplicated class means). Float64 decisions can differ from the network's own
float32 argmax in near-ties.

Approximate index (``index="hnsw"``, optional extra ``nclab[ann]``)
-------------------------------------------------------------------
For very many classes the ``(B, K)`` NCC score matrix dominates the pass. With ``index="hnsw"`` the nearest
centre is looked up in a faiss HNSW graph (Malkov & Yashunin, 2018) built once on the centred means ``m_k`` in
float32, L2 metric, with ``M = 32`` neighbours per node, ``efConstruction = 200`` and ``efSearch = 64``, built on
one thread so that the graph, and so every prediction, is reproducible. The graph returns ``8`` candidates per
sample (all of them when ``K <= 8``), which are re-scored exactly as above (float64, shifted coordinates, ties
to the lowest index), so a prediction differs from the exact pass only when the true nearest centre is not
among the candidates; classes whose own mean the graph does not return are re-scored for every sample. The
classifier decisions (``argmax W h + b``) stay exact. Results carry
``ncc_index`` (``"exact"`` or ``"hnsw"``), and passes made with different indexes refuse to merge or all-reduce.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

import numpy as np
import torch

from nclab._threads import torch_threads
from nclab.memory import check_allocation, work_budget
from nclab.stats.accumulator import Accumulator
from nclab.stats.class_stats import (
    ClassStats,
    check_batch,
    check_label_range,
    chunk_rows,
    to_tensor,
    work_buffers,
)
from nclab.validation import check_choice

__all__ = ["NCCAccumulator", "NCCIndex"]

NCCIndex = Literal["exact", "hnsw"]
"""How the nearest class centre is found: ``"exact"`` (every centre scored) or ``"hnsw"`` (faiss HNSW graph)."""

# HNSW parameters (documented in the module docstring, docs/stats.md and docs/conventions.md), chosen by
# measurement on K = 2,000 random means in d = 64: efConstruction = 80 left 3 classes unreachable, 200 none
_HNSW_M = 32
_HNSW_EF_CONSTRUCTION = 200
_HNSW_EF_SEARCH = 64
_HNSW_CANDIDATES = 8

_COUNTERS = ("class_counts", "ncc_correct", "clf_correct", "mismatch", "mismatch_nobias")


def _matrix(x: Any, name: str) -> torch.Tensor:
    t = to_tensor(x, name)
    if not (t.is_floating_point() or t.dtype in (torch.int32, torch.int64)):
        raise TypeError(f"{name} must be a real numeric array, got {t.dtype}")
    t = t.to(torch.float64)
    if not bool(torch.isfinite(t).all()):
        raise ValueError(f"{name} contains NaN or inf")
    return t


class NCCAccumulator(Accumulator):
    """Streaming NCC / NC4 counts against the class means of ``stats``.

    An :class:`~nclab.stats.Accumulator`: per-class integer counters (``"sum"`` reductions), so
    :meth:`merge`, :meth:`all_reduce`, :meth:`reset` and :meth:`save` / :meth:`load` come from the protocol; the
    class means and the classifier are its buffers (equal on both sides of a merge, saved with the counts).

    Parameters
    ----------
    stats : ClassStats
        Pass-1 statistics; only their class means are used (every class must have samples, else
        :class:`~nclab.stats.EmptyClassError`). Use training statistics for held-out splits too.
        :meth:`from_means` takes the class means directly.
    W : (K, d) array, optional
        Classifier rows (``nn.Linear`` layout). Enables ``ncc_mismatch`` (NC4) and ``classifier_accuracy``.
    b : (K,) array, optional
        Classifier bias (needs ``W``). NC4 includes it [Han et al. 2022]; ``ncc_mismatch_nobias`` is reported too.
    check_finite : bool
        Reject NaN/inf features (one extra O(B d) scan per batch).
    device : torch device, optional
        Where to count. Default: the device of the first features passed to :meth:`update`.
    index : {"exact", "hnsw"}
        How the nearest class centre is found. ``"exact"`` (default) scores every centre. ``"hnsw"`` looks up
        8 candidates in a faiss HNSW graph on the centred means (``M = 32``, ``efConstruction = 200``,
        ``efSearch = 64``) and re-scores them exactly: for very large K; needs the extra ``nclab[ann]``
        (``faiss-cpu``), else :class:`ImportError`. Measured: the same prediction as the exact pass on 100% of
        samples at K = 2,000, d = 64 and on 99.32% at K = 20,000, d = 128 (docs/stats.md), 4.2x faster there
        after a graph build that costs about as much. The classifier part stays exact.

    Raises :class:`nclab.memory.AllocationTooLarge` (a ``MemoryError`` and a ``ValueError``) at construction when
    its O(K d) arrays (:meth:`memory_bytes`) do not fit the available memory or the ``NCLAB_MAX_BYTES`` cap; the
    per-batch scores are bounded instead (see the module documentation, "Memory").

    Examples
    --------
    >>> import numpy as np
    >>> from nclab.geometry import simplex_etf
    >>> from nclab.stats import ClassStats
    >>> K, n, d = 3, 20, 4
    >>> y = np.repeat(np.arange(K), n)
    >>> H = 4 * simplex_etf(K, d)[y] + 0.5 * np.random.default_rng(0).standard_normal((K * n, d))
    >>> stats = ClassStats.from_arrays(H, y, K=K)

    >>> from nclab.stats import NCCAccumulator
    >>> W, b = simplex_etf(K, d), np.zeros(K)
    >>> acc = NCCAccumulator(stats, W, b).update(H, y)
    >>> out = acc.compute()
    >>> print(f"{out['ncc_accuracy']:.3f} {out['ncc_mismatch']:.3f}")
    1.000 0.000
    """

    buffer_labels: ClassVar[Mapping[str, str]] = {"means": "class means", "W": "classifier W", "b": "classifier b"}

    def __init__(
        self,
        stats: ClassStats,
        W: Any = None,
        b: Any = None,
        *,
        check_finite: bool = True,
        device: str | torch.device | None = None,
        index: NCCIndex = "exact",
    ) -> None:
        if not isinstance(stats, ClassStats):
            raise TypeError(f"NCCAccumulator needs ClassStats (pass 1), got {type(stats).__name__}")
        self._setup(stats.means, W, b, check_finite, device, index)  # EmptyClassError if a class is empty

    @classmethod
    def from_means(
        cls,
        means: Any,
        W: Any = None,
        b: Any = None,
        *,
        check_finite: bool = True,
        device: str | torch.device | None = None,
        index: NCCIndex = "exact",
    ) -> NCCAccumulator:
        """NCC counts against the class means ``means (K, d)`` given directly (K >= 2)."""
        out = cls.__new__(cls)
        out._setup(means, W, b, check_finite, device, index)
        return out

    def _setup(
        self, means: Any, W: Any, b: Any, check_finite: bool, device: str | torch.device | None, index: NCCIndex
    ) -> None:
        self.index: NCCIndex = check_choice(index, NCCIndex, name="index")
        mu = _matrix(means, "means")
        if mu.ndim != 2 or mu.shape[0] < 2 or mu.shape[1] < 1:
            raise ValueError(f"means must have shape (K, d) with K >= 2, got {tuple(mu.shape)}")
        self.K = K = int(mu.shape[0])
        self.d = d = int(mu.shape[1])
        # before the classifier and the right-hand side are built: refuse what cannot fit, bound the rest
        self._fixed_bytes, self._row_bytes = _memory_plan(K, d, W is not None, self.index)
        check_allocation(
            self._fixed_bytes + self._row_bytes,
            what=f"NCCAccumulator(K={K}, d={d}, classifier={W is not None}, index={self.index!r}) "
            f"(class means, classifier and score right-hand side: O(K d))",
            alternative="use fewer classes (check the labels: is K right?) or reduce d (e.g. a random projection)",
        )
        self._work_bytes = work_budget(self._fixed_bytes)
        self.check_finite = bool(check_finite)
        self._mu = mu
        self._W: torch.Tensor | None = None
        self._b: torch.Tensor | None = None
        if W is not None:
            Wt = _matrix(W, "W")
            if tuple(Wt.shape) != (K, d):
                raise ValueError(f"W must have shape (K, d) = ({K}, {d}), got {tuple(Wt.shape)}")
            self._W = Wt
        if b is not None:
            if W is None:
                raise ValueError("b was given without W: the classifier needs W")
            bt = _matrix(b, "b")
            if tuple(bt.shape) != (K,):
                raise ValueError(f"b must have shape (K,) = ({K},), got {tuple(bt.shape)}")
            self._b = bt
        # built before any state: without faiss this raises the ImportError naming the extra
        self._ann: Any = None  # a faiss index (untyped)
        self._ann_always: torch.Tensor | None = None
        if self.index == "hnsw":
            self._ann, self._ann_always = _hnsw_index(mu - mu.mean(dim=0))
        if self._ann_always is not None:  # centres re-scored for every sample: their scores, indices and order
            self._row_bytes += 24 * int(self._ann_always.numel())
        super().__init__(device)
        for key in _COUNTERS if self._W is not None else _COUNTERS[:2]:
            self.add_state(key, (K,), torch.int64, nonnegative=True)
        if self._device is not None:
            self._allocate(self._device)

    # ------------------------------------------------------------------ accumulator protocol
    def _config(self) -> dict[str, Any]:
        return {"K": self.K, "d": self.d, "index": self.index}

    def _check_consistency(self, sd: Mapping[str, Any]) -> None:
        st = sd["state"]
        if st is None:
            return
        n = np.asarray(st["class_counts"])
        for key in _COUNTERS[1:]:
            if key in st and (np.asarray(st[key]) > n).any():
                k = int(np.flatnonzero(np.asarray(st[key]) > n)[0])
                raise ValueError(
                    f"state is inconsistent: class {k} has {key} {int(st[key][k])} > class_counts {int(n[k])}"
                )

    def _validate(self, sd: Mapping[str, Any]) -> None:
        # states saved before the index option existed were all exact passes
        super()._validate({"index": "exact", **sd})

    def _buffers(self) -> dict[str, np.ndarray]:
        out = {"means": self._mu}
        if self._W is not None:
            out["W"] = self._W
        if self._b is not None:
            out["b"] = self._b
        return {k: v.cpu().numpy() for k, v in out.items()}

    @classmethod
    def _from_config(
        cls, config: Mapping[str, Any], buffers: Mapping[str, np.ndarray], device: torch.device | None
    ) -> NCCAccumulator:
        if "means" not in buffers:
            raise ValueError("missing buffer 'means'")
        return cls.from_means(
            buffers["means"],
            W=buffers.get("W"),
            b=buffers.get("b"),
            device=device,
            index=config.get("index", "exact"),
        )

    # ------------------------------------------------------------------ state
    @property
    def has_classifier(self) -> bool:
        return self._W is not None

    @property
    def has_bias(self) -> bool:
        return self._b is not None

    def _allocate(self, device: torch.device) -> None:
        super()._allocate(device)
        self._mu = self._mu.to(device)
        mu_g = self._mu.mean(dim=0)
        self._mu_g = mu_g
        m = self._mu - mu_g  # centred means
        self._m = m
        self._m_sq = (m * m).sum(dim=1)
        if self._W is not None:
            self._W = self._W.to(device)
        if self._b is not None:
            self._b = self._b.to(device)
        # one (d, K) or (d, 2K) right-hand side: NCC scores and classifier logits from one product; with the
        # HNSW index only the classifier's (d, K) part (None without a classifier)
        self._rhs: torch.Tensor | None
        if self._ann is None:
            rhs = m if self._W is None else torch.cat([m, self._W])
            self._rhs = rhs.T.contiguous()
        else:
            self._rhs = None if self._W is None else self._W.T.contiguous()
        self._w_offset = None if self._W is None else self._W @ mu_g  # W mu_G: logits in shifted coordinates

    # ------------------------------------------------------------------ accumulation
    def ncc_predict(self, features: Any) -> torch.Tensor:
        """NCC predictions ``argmin_k ||h - mu_k||`` of ``features (B, d)`` (int64, accumulator's device)."""
        return self._predict(self._features(to_tensor(features, "features")))[0]

    def _features(self, x: torch.Tensor) -> torch.Tensor:
        """Checked shape and dtype, on the accumulator's device, in their own dtype (converted per chunk)."""
        if x.ndim != 2 or x.shape[1] != self.d:
            raise ValueError(f"features must be (B, {self.d}), got shape {tuple(x.shape)}")
        if not x.is_floating_point():
            raise TypeError(f"features must have a floating dtype, got {x.dtype}")
        if self._state is None:
            self._allocate(x.device)
        return x.to(device=self._device)

    def memory_bytes(self, batch_rows: int = 0) -> int:
        """Estimated bytes of this accumulator's O(K d) arrays (class means, centred means, classifier, the
        right-hand side of the score product, the counters), plus, for an update of ``batch_rows`` rows, its
        largest working block (the float64 score rows and centred features of one block, at most the budget of
        :func:`nclab.memory.work_budget`). The features passed in are the caller's and not counted."""
        rows = self._score_rows(batch_rows) if batch_rows > 0 else 0
        return int(self._fixed_bytes + rows * self._row_bytes)

    def _score_rows(self, batch_rows: int) -> int:
        """Rows scored at once: the cache-sized chunk of :func:`chunk_rows`, fewer when their scores would exceed
        the working budget (many classes), at least one."""
        return max(1, min(chunk_rows(batch_rows, self.d), self._work_bytes // self._row_bytes))

    def _predict(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        """NCC predictions ``(B,)`` and, with a classifier, its decisions ``argmax(W h + b)`` and
        ``argmax(W h)`` ``(B,)`` (None without one; the same without a bias), in float64, block by block of
        :meth:`_score_rows` rows: each block's ``(rows, K)`` or ``(rows, 2K)`` scores are decided in place before
        the next block, so the working memory stays within the budget whatever K and B. NaN/inf is rejected here,
        before any counter changes."""
        rows = self._score_rows(x.shape[0])
        preds: list[torch.Tensor] = []
        clf: list[torch.Tensor] = []
        nobias: list[torch.Tensor] = []
        for start in range(0, x.shape[0], rows):
            xc = x[start : start + rows]
            (xs,) = work_buffers(1, xc.shape[0], self.d, xc.device)
            xs.copy_(xc).sub_(self._mu_g)  # h' = h - mu_G in float64 (one conversion, then same-dtype arithmetic)
            # a finite sum proves every entry finite (NaN / inf propagate into it); only a non-finite sum,
            # which may also be a harmless overflow, needs the O(B d) elementwise scan
            if self.check_finite and not bool(torch.isfinite(xs.sum())) and not bool(torch.isfinite(xs).all()):
                bad = torch.nonzero(~torch.isfinite(x).all(dim=1)).flatten()[:5].tolist()
                raise ValueError(f"features contain NaN or inf (first bad rows of this batch: {bad})")
            pred, with_bias, without_bias = self._decide(xs)  # the block's scores are freed before the next's exist
            preds.append(pred)
            if with_bias is not None and without_bias is not None:  # both or neither (a classifier or none)
                clf.append(with_bias)
                nobias.append(without_bias)
        if not preds:
            none = x.new_zeros(0, dtype=torch.long)
            return none, (none if self._W is not None else None), (none if self._W is not None else None)
        if self._W is None:
            return torch.cat(preds), None, None
        return torch.cat(preds), torch.cat(clf), torch.cat(nobias)

    def _decide(self, xs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        """NCC predictions of one block of centred float64 features ``xs (rows, d)``, and with a classifier its
        decisions with and without the bias (see :meth:`_predict`)."""
        K = self.K
        logits = None
        if self._ann is None:
            assert self._rhs is not None  # always set without an index
            G = _matmul(xs, self._rhs)  # (rows, K) or (rows, 2K)
            # ||h - mu_k||^2 - ||h - mu_G||^2 = ||m_k||^2 - 2 h'.m_k, in place: (-2 G) + ||m||^2 is the same float64
            # number as ||m||^2 - 2 G (the product by -2 is exact, the sum commutes), with no (rows, K) temporary
            pred = torch.argmin(G[:, :K].mul_(-2.0).add_(self._m_sq), dim=1)
            if self._w_offset is not None:
                logits = G[:, K:]
        else:
            pred = self._ann_predict(xs)
            if self._rhs is not None:  # with an index: W^T, set exactly when there is a classifier
                logits = _matmul(xs, self._rhs)
        if logits is None or self._w_offset is None:  # both set exactly when there is a classifier
            return pred, None, None
        nobias = torch.argmax(logits.add_(self._w_offset), dim=1)  # W h' + W mu_G = W h
        return pred, (torch.argmax(logits.add_(self._b), dim=1) if self._b is not None else nobias), nobias

    def _ann_predict(self, xs: torch.Tensor) -> torch.Tensor:
        """NCC predictions of centred float64 features ``xs (rows, d)`` through the HNSW index: its candidates
        re-scored exactly, in ascending class order so that ``argmin`` keeps the lowest index among ties."""
        k = min(_HNSW_CANDIDATES, self.K)
        _, found = self._ann.search(xs.to(device="cpu", dtype=torch.float32).numpy(), k)
        cand = torch.from_numpy(found).to(self._device)
        # faiss pads with -1 when the graph yields fewer than k results: repeat the best one (never changes argmin)
        cand = torch.where(cand < 0, cand[:, :1], cand)
        scores = self._m_sq[cand] - 2.0 * torch.einsum("bd,bkd->bk", xs, self._m[cand])
        assert self._ann_always is not None  # built with the index
        always = self._ann_always.to(self._device)
        if always.numel():  # centres the graph cannot reach: scored for every sample, by one small product
            cand = torch.cat([cand, always.expand(cand.shape[0], -1)], dim=1)
            scores = torch.cat([scores, self._m_sq[always] - 2.0 * (xs @ self._m[always].T)], dim=1)
        order = cand.argsort(dim=1, stable=True)  # ascending class index: argmin then keeps the lowest among ties
        cand, scores = cand.gather(1, order), scores.gather(1, order)
        return cand.gather(1, torch.argmin(scores, dim=1, keepdim=True)).squeeze(1)

    def update(self, features: Any, labels: Any) -> NCCAccumulator:
        """Accumulate a batch: ``features (B, d)`` (any float dtype), integer ``labels (B,)`` in [0, K)."""
        x, y = check_batch(features, labels, self.d)
        if x.shape[0] == 0:
            return self
        x = self._features(x)
        y = y.to(device=self._device, dtype=torch.int64)
        check_label_range(y, self.K)
        c = self._state
        assert c is not None
        # one torch thread on the CPU for these memory-bound passes: torch's OpenMP workers otherwise spin on the
        # cores that numpy's BLAS needs for the product in between (measured 46x slower at d = 4096 with 2
        # threads each; as in ClassStats.update)
        with torch_threads(1, x.device):
            ncc, clf, nobias = self._predict(x)
        flags = [torch.ones_like(y, dtype=torch.bool), ncc == y]  # one row per counter of _COUNTERS, in that order
        if clf is not None and nobias is not None:
            flags += [clf == y, clf != ncc, nobias != ncc]
        # every per-class counter in one scatter-add (boolean indexing per counter costs a sync each)
        F = torch.stack(flags).to(torch.int64)
        counts = torch.zeros((F.shape[0], self.K), dtype=torch.int64, device=self._device)
        counts.index_add_(1, y, F)
        for key, row in zip(_COUNTERS, counts, strict=False):  # without W: the first two
            c[key] += row
        return self

    # ------------------------------------------------------------------ results
    @property
    def N(self) -> int:
        return 0 if self._state is None else int(self._state["class_counts"].sum())

    def per_class(self) -> dict[str, np.ndarray]:
        """Per-class integer counts ``(K,)``: ``class_counts``, ``ncc_correct`` and, with ``W``,
        ``clf_correct``, ``mismatch``, ``mismatch_nobias`` (indexed by the true label)."""
        keys = _COUNTERS if self._W is not None else _COUNTERS[:2]
        if self._state is None:
            return {k: np.zeros(self.K, dtype=np.int64) for k in keys}
        return {k: self._state[k].cpu().numpy().copy() for k in keys}

    def compute(self) -> dict[str, Any]:
        """Fractions over all samples seen.

        ``ncc_accuracy`` (= PFC3; higher is more collapsed), ``ncc_error = 1 - ncc_accuracy``; with ``W``:
        ``ncc_mismatch`` (NC4, ``argmax(W h + b)`` vs NCC, bias included when given), ``classifier_accuracy``;
        with ``b``: ``ncc_mismatch_nobias`` (``argmax(W h)`` vs NCC). Plus ``num_samples`` (int) and
        ``class_counts`` (``(K,)`` int64), and ``ncc_index`` (``"exact"`` or ``"hnsw"``: whether ``ncc_accuracy``
        and ``ncc_mismatch`` come from the exact or the approximate nearest-centre search). Raises ``ValueError``
        if no sample has been seen.
        """
        n = self.N
        if n == 0:
            raise ValueError("NCCAccumulator.compute: no sample has been seen (call update first)")
        pc = self.per_class()
        out: dict[str, Any] = {
            "ncc_accuracy": pc["ncc_correct"].sum() / n,
            "ncc_error": 1.0 - pc["ncc_correct"].sum() / n,
        }
        if self._W is not None:
            out["ncc_mismatch"] = pc["mismatch"].sum() / n
            if self._b is not None:
                out["ncc_mismatch_nobias"] = pc["mismatch_nobias"].sum() / n
            out["classifier_accuracy"] = pc["clf_correct"].sum() / n
        out = {k: float(v) for k, v in out.items()}
        out["num_samples"] = n
        out["class_counts"] = pc["class_counts"]
        out["ncc_index"] = self.index
        return out

    def __repr__(self) -> str:
        return (
            f"NCCAccumulator(K={self.K}, d={self.d}, "
            f"classifier={self.has_classifier}, "
            f"bias={self.has_bias}, index={self.index!r}, N={self.N}, device={self._device})"
        )


def _memory_plan(K: int, d: int, classifier: bool, index: str) -> tuple[float, int]:
    """``(fixed, per_row)``: estimated bytes of the O(K d) arrays an NCC pass keeps (float64 class means, centred
    means, classifier, its offsets and the counters; the ``(d, C)`` right-hand side of the score product, formed by
    a transposed copy, hence twice at its peak; the faiss graph of ``index="hnsw"``) and the working bytes per row
    of a scored block (``C`` float64 scores and ``d`` centred features; the re-scored candidates with HNSW)."""
    hnsw = index == "hnsw"
    cols = (K if classifier else 0) + (0 if hnsw else K)  # columns of the score product
    fixed = 8.0 * K * d * (2 + classifier) + 16.0 * cols * d + 8.0 * K * 8
    per_row = 8 * (cols + d) + 64
    if hnsw:  # float32 points and ~2M neighbours per node; per row: the candidates' means and their scores
        fixed += K * (4.0 * d + 8 * _HNSW_M * 2)
        per_row += 8 * _HNSW_CANDIDATES * (d + 4) + 4 * d
    return fixed, per_row


def _hnsw_index(m: torch.Tensor) -> tuple[Any, torch.Tensor]:
    """A faiss HNSW (L2) index over the centred class means ``m (K, d)``, built on one thread (faiss inserts in
    parallel otherwise, and the graph, hence the predictions, would depend on the thread schedule), and the
    classes it does not return as their own mean's nearest centre (int64): HNSW graphs over near-equidistant
    points, the geometry of collapse, leave some nodes unreachable (3 of 2,000 random means in d = 64), and a
    class the search can never return would lose all its samples; these are re-scored for every sample."""
    try:
        import faiss
    except ImportError as err:
        raise ImportError(
            "NCCAccumulator(index='hnsw') needs faiss: install the optional extra with pip install 'nclab[ann]'"
        ) from err
    index = faiss.IndexHNSWFlat(m.shape[1], _HNSW_M, faiss.METRIC_L2)
    index.hnsw.efConstruction = _HNSW_EF_CONSTRUCTION
    index.hnsw.efSearch = _HNSW_EF_SEARCH
    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    points = np.ascontiguousarray(m.cpu().numpy(), dtype=np.float32)
    try:
        index.add(points)
    finally:
        faiss.omp_set_num_threads(threads)
    _, own = index.search(points, 1)
    return index, torch.from_numpy(np.flatnonzero(own[:, 0] != np.arange(len(points))))


def _matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` for float64 tensors; on the CPU through numpy's BLAS (zero-copy views), which is several times
    faster than torch's float64 ``matmul`` for these (B, d) x (d, <= 2K) products (measured 99 vs 270 us)."""
    if a.device.type == "cpu":
        return torch.from_numpy(a.numpy() @ b.numpy())
    return a @ b
