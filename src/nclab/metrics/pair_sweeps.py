"""Pair sweeps at vocabulary scale: the K(K-1)/2 pairs of class rows in square tiles, never a K x K matrix.

The pairwise metrics (CDNV, the cosine statistics of equiangularity and max_angle, the uniformity kernels, the
classifier's decisions at the class means) read the Gram ``X X^T`` of K rows. At K = 20,000 and more, one pass
over it costs K^2 d multiply-adds, and each metric's own pass (with its float64 elementwise work) made the
report take minutes. Here one pass serves them all, in tiles of ``tile x tile`` (``O(tile^2)`` memory), with
torch on the statistics' device:

* the Gram tiles are float64 GEMMs while ``K^2 d <= FLOAT32_MIN_WORK``, float32 GEMMs above (the pair values then
  carry ~1e-7 relative error, the sums over pairs are float64); pairs whose distance the expansion
  ``||a||^2 + ||b||^2 - 2 a.b`` would lose digits for are recomputed from their rows in float64;
* the classifier's decisions are exact whatever the GEMM precision: a class whose own logit is within the float32
  error bound of another's is decided again in float64.

Progress: :func:`progress_scope` (used by ``collapse_report``) shows a bar on a terminal's stderr, or calls a
callback, when the estimated time exceeds a few seconds.
"""

from __future__ import annotations

import contextlib
import math
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

__all__ = [
    "ENGINE_MIN_K",
    "FLOAT32_MIN_WORK",
    "PairMoments",
    "class_pair_sweep",
    "decisions_at_means",
    "estimate_seconds",
    "gram_dtype",
    "means_pair_sweep",
    "progress_scope",
    "stats_device",
    "unit_pair_sweep",
]

#: Pair metrics of K classes at least this many go through the sweeps here (below, the float64 numpy paths).
ENGINE_MIN_K = 2048
#: ``K^2 d`` above which the Gram tiles are float32 GEMMs (below: float64); 2^33 is K = 3,300 at d = 768.
FLOAT32_MIN_WORK = 2**33
#: Default tile side: a 1,024 x 1,024 tile is 4 MiB in float32 and its elementwise work stays in cache.
TILE = 1024
# Squared distances below this fraction of ||a||^2 + ||b||^2 are recomputed from the rows (the expansion lost
# > 3 digits there); as in nclab.metrics.cdnv and nclab.metrics.uniformity.
_CANCEL_RATIO = 1e-3
_LOG2 = math.log(2.0)
# Multiply-adds per second assumed by the time estimate (a 2-core CPU at float32; a GPU is faster).
_RATE = {torch.float32: 6e10, torch.float64: 2.5e10}


def gram_dtype(K: int, d: int, exact: bool | None = None) -> torch.dtype:
    """float64 when ``exact`` (or, by default, when ``K^2 d <= FLOAT32_MIN_WORK``), else float32."""
    if exact is None:
        exact = K * K * d <= FLOAT32_MIN_WORK
    return torch.float64 if exact else torch.float32


def estimate_seconds(K: int, d: int, passes: float, exact: bool | None = None) -> float:
    """Rough seconds of ``passes`` half-Gram sweeps (``K^2 d / 2`` multiply-adds each, plus their elementwise
    work) on this machine's CPU: what decides whether a report shows progress."""
    dt = gram_dtype(K, d, exact)
    return passes * (K * K * (d / 2 + 12)) / _RATE[dt]


# ---------------------------------------------------------------------------------------------- progress
@dataclass
class _Progress:
    total: float
    callback: Callable[[float, float], None] | None
    bar: Any = None
    task: Any = None
    done: float = 0.0
    start: float = field(default_factory=time.perf_counter)

    def advance(self, work: float) -> None:
        self.done += work
        if self.callback is not None:
            self.callback(min(self.done, self.total), self.total)
        if self.bar is not None:
            self.bar.update(self.task, completed=min(self.done, self.total))


_current: list[_Progress] = []


@contextlib.contextmanager
def progress_scope(
    work: float, seconds: float, progress: bool | Callable[[float, float], None] | None
) -> Iterator[None]:
    """Within it, the sweeps report their work (``K^2 d`` units per half Gram) against ``work``:
    ``progress=None`` shows a rich bar on stderr when ``seconds`` exceeds 5 and stderr is a terminal; ``True``
    always shows it, ``False`` never; a callable gets ``(done, total)`` after each tile."""
    if progress is False or work <= 0:
        yield
        return
    callback = progress if callable(progress) else None
    show = progress is True or (progress is None and seconds > 5.0 and sys.stderr.isatty())
    state = _Progress(float(work), callback)
    bar = None
    if show and not sys.stderr.isatty():  # no live bar off a terminal: the estimate, once
        print(f"collapse report: about {seconds:.0f} s estimated for the pair sweeps", file=sys.stderr, flush=True)
    elif show:
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

        bar = Progress(
            TextColumn(f"collapse report (about {seconds:.0f} s estimated)"),
            BarColumn(),
            TimeRemainingColumn(),
            console=Console(stderr=True),
            transient=True,
        )
        state.bar, state.task = bar, bar.add_task("pairs", total=float(work))
        bar.start()
    _current.append(state)
    try:
        yield
    finally:
        _current.remove(state)
        state.advance(max(state.total - state.done, 0.0))  # the estimate's remainder: the bar ends full
        if bar is not None:
            bar.stop()


def _advance(work: float) -> None:
    if _current:
        _current[-1].advance(work)


# ---------------------------------------------------------------------------------------------- tiles
def _tiles(K: int, tile: int) -> Iterator[tuple[int, int, int, int]]:
    """Square tiles ``(i0, i1, j0, j1)`` of the upper triangle ``j0 >= i0``."""
    for i0 in range(0, K, tile):
        for j0 in range(i0, K, tile):
            yield i0, min(i0 + tile, K), j0, min(j0 + tile, K)


def _device_of(device: Any) -> torch.device:
    return torch.device("cpu") if device is None else torch.device(device)


@dataclass
class PairMoments:
    """Count, mean and sum of squared deviations of pair values (Chan-merged over tiles, float64), and their sum
    of absolute values; ``inf`` when a value was infinite."""

    n: int = 0
    mean: float = 0.0
    m2: float = 0.0
    abs_sum: float = 0.0
    inf: bool = False

    def merge(self, nb: int, mb: float, m2b: float) -> None:
        """Chan's merge of a tile's count, mean and sum of squared deviations."""
        if nb == 0:
            return
        if not (math.isfinite(mb) and math.isfinite(m2b)):
            self.inf = True
            return
        delta, tot = mb - self.mean, self.n + nb
        self.mean += delta * nb / tot
        self.m2 += m2b + delta * delta * self.n * nb / tot
        self.n = tot

    def add(self, values: torch.Tensor) -> None:
        """A tile's values (one fused pass: ``torch.var_mean``, in the values' precision)."""
        nb = int(values.numel())
        if nb:
            var, mean = torch.var_mean(values, correction=0)
            self.merge(nb, float(mean), float(var) * nb)


def _strict_upper(block: torch.Tensor, diagonal: bool) -> torch.Tensor:
    """The entries of a tile above the diagonal (a diagonal tile), or all of them (a view: no copy)."""
    if not diagonal:
        return block.reshape(-1)
    r, c = block.shape
    mask = torch.ones(r, c, dtype=torch.bool, device=block.device).triu_(1)
    return block[mask]


def _moments(values: torch.Tensor, scratch: torch.Tensor | None = None) -> tuple[float, float]:
    """Mean and sum of squared deviations of a tile's values, both accumulated in float64: the mean from the sum,
    then the squared deviations about it (two reductions, no float32 running variance: ``torch.var_mean`` cost
    4x the tile's other elementwise work). ``scratch`` (the values' shape) takes the deviations; without it they
    are subtracted in place."""
    nb = values.numel()
    mean = float(values.sum(dtype=torch.float64)) / nb
    dev = values.sub_(mean) if scratch is None else torch.sub(values, mean, out=scratch)
    m2 = float(torch.linalg.vector_norm(dev, dtype=torch.float64)) ** 2
    return mean, m2


def unit_pair_sweep(
    U: np.ndarray,
    *,
    shift: float,
    kernel: str | None = None,
    s: float = 0.0,
    exact: bool | None = None,
    tile: int | None = None,
    device: Any = None,
) -> dict[str, Any]:
    """Moments over the pairs ``k < l`` of unit rows ``U (K, d)`` of the shifted cosines ``u_k . u_l + shift``
    (with their absolute sum) and, with a ``kernel`` of :func:`nclab.metrics.hyperspherical_uniformity`
    ("log", "riesz" with exponent ``s``, "distance"), of its values at ``r = ||u_k - u_l||`` (an infinite value
    makes the kernel's moments ``inf``). One sweep over the Gram tiles."""
    K, d = U.shape
    tile = TILE if tile is None else tile
    dev = _device_of(device)
    dt = gram_dtype(K, d, exact)
    U64 = torch.as_tensor(U, dtype=torch.float64, device=dev)
    Ut = U64.to(dt)
    log = kernel == "log" or (kernel == "riesz" and s == 0)

    def one(t: tuple[int, int, int, int]) -> tuple[Any, ...] | None:
        i0, i1, j0, j1 = t
        c = _strict_upper(Ut[i0:i1] @ Ut[j0:j1].T, i0 == j0)
        nb = int(c.numel())
        if nb == 0:
            return None
        scratch = torch.empty_like(c)
        mean, m2 = _moments(c, scratch)  # the spread does not move with the shift
        cos = (nb, mean + shift, m2)
        abs_sum = float(torch.linalg.vector_norm(torch.add(c, shift, out=scratch), ord=1, dtype=torch.float64))
        ker = None
        if kernel is not None:
            d2 = torch.mul(c, -2.0).add_(2.0).clamp_(min=0.0)  # ||u_k - u_l||^2
            if float(d2.min()) < _CANCEL_RATIO:  # nearby directions: from their rows, in float64
                near = d2 < _CANCEL_RATIO
                d2 = d2.to(torch.float64)
                ii, jj = _pair_index(i0, i1, j0, j1, i0 == j0, dev)
                diff = U64[ii[near]] - U64[jj[near]]
                d2[near] = (diff * diff).sum(dim=1)
            if log:  # -log r = -0.5 log r^2: the moments of log r^2 scaled (an infinite mean: coincident pairs)
                mean_l, m2_l = _moments(d2.log_())
                ker = (nb, -0.5 * mean_l, 0.25 * m2_l)
            else:
                if kernel == "riesz":  # float64: r^(-s) leaves float32's range at moderate s
                    values = math.copysign(1.0, s) * d2.to(torch.float64).pow_(-0.5 * s)
                else:
                    values = d2.to(torch.float64).sqrt_()
                mean_k, m2_k = _moments(values)
                ker = (nb, mean_k, m2_k)
        _advance((i1 - i0) * (j1 - j0) * d)
        return cos, abs_sum, ker

    cos_m, ker_m = PairMoments(), PairMoments()
    for res in _map_tiles(one, list(_tiles(K, tile)), dev):  # merged in tile order: the same sums every run
        if res is None:
            continue
        cos, abs_sum, ker = res
        cos_m.merge(*cos)
        cos_m.abs_sum += abs_sum
        if ker is not None:
            ker_m.merge(*ker)
    return {"cos": cos_m, "kernel": ker_m}


def class_pair_sweep(
    U: np.ndarray,
    norms: np.ndarray,
    var: np.ndarray,
    *,
    shift: float,
    exponent: float,
    thresh: float,
    exact: bool | None = None,
    tile: int | None = None,
    device: Any = None,
) -> dict[str, Any]:
    """One sweep over the Gram tiles of the unit centred class means ``U (K, d)`` for every pairwise statistic
    of a report: the moments of the shifted cosines (equiangularity, max_angle), of the log kernel (uniformity)
    and the CDNV sum with ``norms`` (the O(1)-scaled norms of the centred means) and ``var`` (the class
    variances on that scale): ``||v_k - v_l||^2 = n_k^2 + n_l^2 - 2 n_k n_l cos_kl``, recomputed from the rows in
    float64 where the expansion loses digits (cosines above ``1 - _CANCEL_RATIO``; a squared distance ``<=
    thresh`` makes the CDNV ``inf``).

    Returns ``{"cos": PairMoments, "kernel": PairMoments, "cdnv": {exponent: sum over pairs}}``.
    """
    K, d = U.shape
    tile = TILE if tile is None else tile
    dev = _device_of(device)
    dt = gram_dtype(K, d, exact)
    U64 = torch.as_tensor(U, dtype=torch.float64, device=dev)
    n64 = torch.as_tensor(norms, dtype=torch.float64, device=dev)
    v64 = torch.as_tensor(var, dtype=torch.float64, device=dev)
    Ut, nt = U64.to(dt), n64.to(dt)
    sq = nt * nt

    def one(t: tuple[int, int, int, int]) -> tuple[Any, ...] | None:
        i0, i1, j0, j1 = t
        diagonal = i0 == j0
        G = Ut[i0:i1] @ Ut[j0:j1].T
        c = _strict_upper(G, diagonal)
        nb = int(c.numel())
        if nb == 0:
            return None
        scratch = torch.empty_like(c)
        mean_c, m2_c = _moments(c, scratch)  # the spread does not move with the shift
        cos = (nb, mean_c + shift, m2_c)
        abs_sum = float(torch.linalg.vector_norm(torch.add(c, shift, out=scratch), ord=1, dtype=torch.float64))
        close = float(c.max()) >= 1.0 - _CANCEL_RATIO  # else no distance below _CANCEL_RATIO of its scale
        # the log kernel: -log r = -0.5 (log 2 + log h) with r^2 = 2 h, h = 1 - cos (> _CANCEL_RATIO / 2 unless
        # close; the close pairs from their rows in float64, never negative)
        h = torch.rsub(c, 1.0)
        if close:
            near = h < 0.5 * _CANCEL_RATIO
            if bool(near.any()):
                h = h.to(torch.float64)
                ii, jj = _pair_index(i0, i1, j0, j1, diagonal, dev)
                diff = U64[ii[near]] - U64[jj[near]]
                h[near] = 0.5 * (diff * diff).sum(dim=1)
        mean_l, m2_l = _moments(h.log_())
        ker = (nb, -0.5 * (mean_l + _LOG2), 0.25 * m2_l)
        # CDNV: (var_k + var_l) / (2 d2^e) summed as v . (R 1) + (1^T R) . v
        d2 = torch.addcmul(sq[i0:i1, None] + sq[None, j0:j1], nt[i0:i1, None] * nt[None, j0:j1], G, value=-2.0)
        fix, coincide = 0.0, False
        if diagonal:
            d2.masked_fill_(~torch.ones_like(d2, dtype=torch.bool).triu_(1), math.inf)
        if close or diagonal:
            bad = d2 <= (sq[i0:i1, None] + sq[None, j0:j1]).mul_(_CANCEL_RATIO)
            if bool(bad.any()):
                ri, ci = torch.nonzero(bad, as_tuple=True)
                diff = U64[ri + i0] * n64[ri + i0, None] - U64[ci + j0] * n64[ci + j0, None]
                dd = (diff * diff).sum(dim=1)
                coincide = bool((dd <= thresh).any())
                fix = float(((v64[ri + i0] + v64[ci + j0]) / (2.0 * dd**exponent)).sum())
                d2[bad] = math.inf
        R = d2.reciprocal_() if exponent == 1 else d2.pow_(-float(exponent))
        rows = R.sum(dim=1, dtype=torch.float64)
        cols = R.sum(dim=0, dtype=torch.float64)
        part = 0.5 * float(v64[i0:i1] @ rows + v64[j0:j1] @ cols) + fix
        _advance((i1 - i0) * (j1 - j0) * d)
        return cos, abs_sum, ker, part, coincide

    cos_m, ker_m = PairMoments(), PairMoments()
    total, coincide = 0.0, False
    for res in _map_tiles(one, list(_tiles(K, tile)), dev):  # merged in tile order: the same sums every run
        if res is None:
            continue
        cos, abs_sum, ker, part, hit = res
        cos_m.merge(*cos)
        cos_m.abs_sum += abs_sum
        ker_m.merge(*ker)
        total += part
        coincide = coincide or hit
    return {"cos": cos_m, "kernel": ker_m, "cdnv": {exponent: math.inf if coincide else total}}


def _map_tiles(fn: Callable[[Any], Any], tiles: list[Any], dev: torch.device) -> list[Any]:
    """``[fn(t) for t in tiles]``; on the CPU with several torch threads, the tiles go to as many Python threads
    each running torch single-threaded (torch releases the GIL): one tile per core instead of every core on each
    elementwise pass of a tile (whose fork-join overhead dominated on a busy 2-core machine, 3x measured)."""
    workers = torch.get_num_threads()
    if dev.type != "cpu" or workers <= 1 or len(tiles) <= 1:
        return [fn(t) for t in tiles]
    from concurrent.futures import ThreadPoolExecutor

    def single(t: Any) -> Any:
        torch.set_num_threads(1)  # this thread's torch pool (OpenMP's setting is per thread)
        return fn(t)

    prev = torch.get_num_threads()
    try:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return list(pool.map(single, tiles))
    finally:
        torch.set_num_threads(prev)


def stats_device(stats: Any) -> torch.device:
    """The device a ClassStats (or its view) keeps its state on (CPU for anything else)."""
    base = getattr(stats, "_stats", stats)
    dev = getattr(base, "_device", None)
    return torch.device("cpu") if dev is None else torch.device(dev)


def _pair_index(
    i0: int, i1: int, j0: int, j1: int, diagonal: bool, dev: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """Row and column indices of the entries :func:`_strict_upper` keeps, in its order."""
    ii = torch.arange(i0, i1, device=dev)[:, None].expand(i1 - i0, j1 - j0)
    jj = torch.arange(j0, j1, device=dev)[None, :].expand(i1 - i0, j1 - j0)
    return _strict_upper(ii, diagonal), _strict_upper(jj, diagonal)


def means_pair_sweep(
    mu: np.ndarray,
    var: np.ndarray,
    *,
    exponent: float,
    thresh: float,
    exact: bool | None = None,
    tile: int | None = None,
    device: Any = None,
) -> float:
    """The CDNV sum over pairs ``k < l`` of ``(var_k + var_l) / (2 ||mu_k - mu_l||^(2 exponent))`` of the centred,
    O(1)-scaled means ``mu (K, d)``; ``inf`` as soon as a pair's squared distance is ``<= thresh``.

    Per tile ``sum_kl (v_k + v_l) R_kl = v . (R 1) + (1^T R) . v`` with ``R = 1 / (2 d2^exponent)``: two row and
    column sums instead of a K x K numerator; pairs whose expansion lost digits are recomputed in float64."""
    K, d = mu.shape
    tile = TILE if tile is None else tile
    dev = _device_of(device)
    dt = gram_dtype(K, d, exact)
    M64 = torch.as_tensor(mu, dtype=torch.float64, device=dev)
    Mt = M64.to(dt)
    sq = (M64 * M64).sum(dim=1).to(dt)
    v64 = torch.as_tensor(var, dtype=torch.float64, device=dev)
    total = 0.0
    for i0, i1, j0, j1 in _tiles(K, tile):
        diagonal = i0 == j0
        scale = sq[i0:i1, None] + sq[None, j0:j1]
        d2 = torch.addmm(scale, Mt[i0:i1], Mt[j0:j1].T, alpha=-2.0)  # ||a||^2 + ||b||^2 - 2 a.b
        if diagonal:  # the pairs k >= l of a diagonal tile are not pairs here
            d2.masked_fill_(~torch.ones_like(d2, dtype=torch.bool).triu_(1), math.inf)
        bad = d2 <= scale.mul_(_CANCEL_RATIO)
        fix = 0.0
        if bool(bad.any()):
            ri, ci = torch.nonzero(bad, as_tuple=True)
            diff = M64[ri + i0] - M64[ci + j0]
            dd = (diff * diff).sum(dim=1)
            if bool((dd <= thresh).any()):
                return float("inf")
            fix = float(((v64[ri + i0] + v64[ci + j0]) / (2.0 * dd**exponent)).sum())
            d2[bad] = math.inf  # counted in fix
        R = d2.reciprocal_() if exponent == 1 else d2.pow_(-float(exponent))
        rows = R.sum(dim=1, dtype=torch.float64)
        cols = R.sum(dim=0, dtype=torch.float64)
        total += 0.5 * float(v64[i0:i1] @ rows + v64[j0:j1] @ cols) + fix
        _advance((i1 - i0) * (j1 - j0) * d)
    return total


def decisions_at_means(
    M: np.ndarray,
    W: np.ndarray,
    b: np.ndarray | None,
    *,
    exact: bool | None = None,
    tile: int | None = None,
    device: Any = None,
) -> int:
    """How many classes ``k`` have ``argmax_j (w_j . mu_k + b_j) = k`` (ties to the lowest index), exactly: tiles
    of the logits in the GEMM precision of :func:`gram_dtype`, and every class whose own logit is within that
    precision's error bound of another class's decided again in float64.

    In float32, a class leaves the sweep as soon as another class's logit exceeds its own by more than the error
    bound (it has lost, whatever the ties): the later column tiles are computed for the classes still undecided
    only. A classifier that decides most class means wrong (an untrained head) then costs a few column tiles,
    one that decides them right the full K x K logits."""
    K, d = M.shape
    tile = TILE if tile is None else tile
    dev = _device_of(device)
    dt = gram_dtype(K, d, exact)
    M64 = torch.as_tensor(M, dtype=torch.float64, device=dev)
    W64 = torch.as_tensor(W, dtype=torch.float64, device=dev)
    b64 = None if b is None else torch.as_tensor(b, dtype=torch.float64, device=dev)
    own = torch.empty(K, dtype=torch.float64, device=dev)  # the own logits, float64 (row blocks: no K x d temporary)
    for s in range(0, K, tile):
        torch.sum(M64[s : s + tile] * W64[s : s + tile], dim=1, out=own[s : s + tile])
    if b64 is not None:
        own += b64
    if dt == torch.float64:
        bound = torch.zeros(K, dtype=torch.float64, device=dev)
    else:
        # |fl32(m . w + b) - (m . w + b)| <= (d + 2) u (||m|| ||w|| + |b|) for float32's unit roundoff u
        u = float(np.finfo(np.float32).eps)
        wmax = float(W64.norm(dim=1).max()) + (0.0 if b64 is None else float(b64.abs().max()))
        bound = 2.0 * (d + 2) * u * (M64.norm(dim=1) + 1.0) * wmax
    Mt, Wt = M64.to(dt), W64.to(dt)
    bt = None if b64 is None else b64.to(dt)

    def one(i0: int) -> tuple[int, torch.Tensor | None]:
        """The sure hits among the classes i0..i0 + tile and the classes to decide again in float64."""
        i1 = min(i0 + tile, K)
        if dt == torch.float64:
            return _hits_exact(Mt, Wt, bt, i0, i1, tile), None
        return _hits_float32(Mt, Wt, bt, own[i0:i1], bound[i0:i1], i0, tile)

    hits = 0
    unsure: list[torch.Tensor] = []
    for n_hit, again in _map_tiles(one, list(range(0, K, tile)), dev):
        hits += n_hit
        if again is not None:
            unsure.append(again)
    if unsure:
        idx = torch.cat(unsure)
        for s in range(0, int(idx.numel()), tile):
            sel = idx[s : s + tile]
            L = M64[sel] @ W64.T
            if b64 is not None:
                L += b64
            hits += int((torch.argmax(L, dim=1) == sel).sum())
    return hits


def _logits(Ma: torch.Tensor, Wt: torch.Tensor, bt: torch.Tensor | None, j0: int, j1: int) -> torch.Tensor:
    """The logits of the rows ``Ma`` against the classes ``j0..j1``."""
    return Ma @ Wt[j0:j1].T if bt is None else torch.addmm(bt[j0:j1], Ma, Wt[j0:j1].T)


def _hits_exact(Mt: torch.Tensor, Wt: torch.Tensor, bt: torch.Tensor | None, i0: int, i1: int, tile: int) -> int:
    """The classes ``i0..i1`` decided right by float64 logit tiles (the first maximum: ties to the lowest index)."""
    K, d = Wt.shape
    best = torch.full((i1 - i0,), -math.inf, dtype=Mt.dtype, device=Mt.device)  # argmax over the tiles so far
    arg = torch.zeros(i1 - i0, dtype=torch.int64, device=Mt.device)
    for j0 in range(0, K, tile):
        j1 = min(j0 + tile, K)
        value, where = _logits(Mt[i0:i1], Wt, bt, j0, j1).max(dim=1)
        better = value > best
        best = torch.where(better, value, best)
        arg = torch.where(better, where + j0, arg)
        _advance((i1 - i0) * (j1 - j0) * d)
    return int((arg == torch.arange(i0, i1, device=Mt.device)).sum())


def _hits_float32(
    Mt: torch.Tensor,
    Wt: torch.Tensor,
    bt: torch.Tensor | None,
    own: torch.Tensor,
    tol: torch.Tensor,
    i0: int,
    tile: int,
) -> tuple[int, torch.Tensor | None]:
    """The sure hits among the classes ``i0..i0 + own.numel()`` by float32 logit tiles, and the classes to decide
    again in float64 (own logit ``own`` and error bound ``tol`` per class, float64). A class whose largest other
    logit exceeds its own by more than the bound has lost (whatever the ties) and leaves the sweep: the later
    column tiles are computed for the classes still undecided only."""
    K, d = Wt.shape
    i1 = i0 + int(own.numel())
    alive = torch.arange(i0, i1, device=Mt.device)  # the classes not yet known to lose
    other = torch.full((i1 - i0,), -math.inf, dtype=torch.float64, device=Mt.device)  # max over j != k so far
    for j0 in range(0, K, tile):
        j1 = min(j0 + tile, K)
        n_alive = int(alive.numel())
        if n_alive:
            L = _logits(Mt[i0:i1] if n_alive == i1 - i0 else Mt.index_select(0, alive), Wt, bt, j0, j1)
            if j0 < i1 and i0 < j1:  # the own logits in this tile: out of the others' maximum
                r = torch.nonzero((alive >= j0) & (alive < j1)).squeeze(1)
                L[r, alive[r] - j0] = -math.inf
            pos = alive - i0
            other_a = torch.maximum(other[pos], L.max(dim=1).values.to(torch.float64))
            other[pos] = other_a
            live = other_a <= own[pos] + tol[pos]
            if not bool(live.all()):
                alive = alive[live]
        _advance((i1 - i0) * (j1 - j0) * d)
    pos = alive - i0
    sure_hit = other[pos] < own[pos] - tol[pos]
    near = alive[~sure_hit]
    return int(sure_hit.sum()), (near if int(near.numel()) else None)
