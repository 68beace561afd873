"""The report's linear algebra on either backend (``nclab.stats.backend``): numpy on the host, or torch on the
statistics' device.

Without a GPU the torch path runs with CPU tensors (``ClassMoments(stats, linalg="torch")``): every value must
agree with the numpy path to 1e-10 relative in float64 (K > d, K < d, N < d, imbalanced classes, near collapse
where the pseudo-inverses' rank cut decides), and the torch path must never read the d x d Gram through the host
accessors. The CUDA tests (skipped without CUDA) compare a GPU report with the CPU one and count the bytes that
come back to the host.
"""

from __future__ import annotations

import contextlib
import math
import warnings

import numpy as np
import pytest
import torch
from scipy.linalg import cho_solve, lapack

import nclab.stats.backend as backend_mod
from nclab.metrics import (
    collapse_report,
    fuzziness,
    gnc1,
    normalize_features,
    psd_cholesky,
    psd_pinv,
    rank_metrics,
    spectrum,
    vci,
    within_class_split,
)
from nclab.metrics._linalg import _pocon, stats_between_eig, stats_eig, stats_eigvals
from nclab.stats import ClassMoments, ClassStats
from nclab.stats.backend import NUMPY, backend_of, choose_backend, torch_backend

CPU_TORCH = torch_backend(torch.device("cpu"))
RTOL = 1e-10
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (torch.cuda)")


def _features(rng, K, d, n, *, noise=0.5, scale=3.0, aniso=None, counts=None):
    counts = np.full(K, n) if counts is None else np.asarray(counts)
    y = np.repeat(np.arange(K), counts)
    Z = rng.normal(size=(y.size, d))
    if aniso is not None:  # within-class spread along axis j scaled by aniso[j]
        Z = Z * aniso
    H = scale * rng.normal(size=(K, d))[y] + noise * Z
    return H, y


# (name, K, d, per-class n, keywords of _features)
CASES = [
    ("K>d", 12, 5, 20, {}),
    ("K<d", 5, 12, 20, {}),
    ("N<d, singular Sigma_W", 4, 30, 5, {}),
    ("imbalanced", 6, 9, None, {"counts": [5, 9, 14, 30, 7, 11]}),
    # Sigma_W ~ 1e-14 of Sigma_B, anisotropic (cond(Sigma_W) ~ 1e8): VCI and the probe take the Sigma_T or the
    # whitened form by the conditioning test, and the 1e-12 cut drops Sigma_T's within-class directions
    ("near collapse", 6, 20, 40, {"noise": 1e-7, "aniso": np.logspace(0, -4, 20)}),
    ("near collapse, K>d", 9, 5, 30, {"noise": 1e-6}),  # K d > 40: no Softmax Code search (GNC2)
]


@contextlib.contextmanager
def _quiet():
    """Silence the reports' expected warnings (unattainable targets, imbalance) in these comparisons."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _rel(a, b):
    if a == b:
        return 0.0
    return abs(a - b) / max(abs(a), abs(b))


# Values bounded by O(1) whose exact value can be 0 (a perfect probe when N < d): roundoff of 1e-16 is their
# agreement there; every other value (the ratios that go to 0 with collapse included) is compared relatively.
ATOL = {"probe_mse_optimal": 1e-14, "vci": 1e-14}


def _agree(key, a, b, rtol):
    return (math.isnan(a) and math.isnan(b)) or _rel(a, b) <= rtol or abs(a - b) <= ATOL.get(key, 0.0)


def _assert_reports_agree(a, b, rtol=RTOL):
    assert a.keys() == b.keys()
    bad = {k: (a[k], b[k]) for k in a if not _agree(k, a[k], b[k], rtol)}
    assert not bad, bad


@pytest.mark.parametrize(("name", "K", "d", "n", "kw"), CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize(
    "conventions",
    [None, {"weighting": "empirical", "pinv_rank": "numerical", "vci_rank": "numerical"}, {"pinv_rank": 2}],
    ids=["defaults", "empirical-numerical", "rank2"],
)
def test_torch_backend_report_matches_numpy(rng, name, K, d, n, kw, conventions):
    H, y = _features(rng, K, d, n, **kw)
    stats = ClassStats.from_arrays(H, y, K=K)
    W = rng.normal(size=(K, d))
    kwargs = {"W": W, "b": rng.normal(size=K), "conventions": conventions}
    with _quiet():
        ref = collapse_report(ClassMoments(stats, linalg="numpy"), **kwargs)
        got = collapse_report(ClassMoments(stats, linalg="torch"), **kwargs)
        auto = collapse_report(stats, **kwargs)
    _assert_reports_agree(got, ref)
    assert auto == ref  # "auto" on CPU statistics is the numpy path itself


def test_near_collapse_case_exercises_the_rank_cut(rng):
    """The near-collapse case is one where the ``rtol`` cut matters: Sigma_T's numerical rank is below d, and the
    pseudo-inverse of Sigma_T drops directions that the torch path must drop too."""
    _, K, d, n, kw = CASES[4]
    H, y = _features(rng, K, d, n, **kw)
    stats = ClassStats.from_arrays(H, y, K=K)
    for linalg in ("numpy", "torch"):
        view = ClassMoments(stats, linalg=linalg)
        lam = stats_eigvals(view, "total")
        assert isinstance(lam, np.ndarray)
        kept = int(np.sum(lam > 1e-12 * lam[0]))
        assert K - 1 <= kept < d
        assert rank_metrics(view)["numerical_rank"] == kept
        pt = psd_pinv(eig=stats_eig(view, "total"), rank="numerical")
        assert pt.rank == kept and isinstance(pt.basis, torch.Tensor) == (linalg == "torch")


@pytest.mark.parametrize(("name", "K", "d", "n", "kw"), CASES, ids=[c[0] for c in CASES])
def test_torch_backend_metrics_with_their_keywords_match_numpy(rng, name, K, d, n, kw):
    H, y = _features(rng, K, d, n, **kw)
    stats = ClassStats.from_arrays(H, y, K=K)
    views = {b: ClassMoments(stats, linalg=b) for b in ("numpy", "torch")}
    calls = {
        "fuzziness rank=1": lambda v: fuzziness(v, rank=1),
        "vci balanced": lambda v: vci(v, weighting="balanced"),
        "vci rank=2": lambda v: vci(v, rank=2),
        "split normalized": lambda v: within_class_split(v, normalize=True, weighting="empirical")["orthogonal"],
        "effective rank of Sigma_W, singular values": lambda v: rank_metrics(
            v, which="within", convention="singular_values"
        )["effective_rank"],
        "stable rank of Sigma_B": lambda v: rank_metrics(v, which="between")["stable_rank"],
    }
    for what, call in calls.items():
        a, b = call(views["torch"]), call(views["numpy"])
        assert _rel(a, b) <= RTOL, (what, a, b)
    for which in ("total", "within", "between"):
        np.testing.assert_allclose(
            spectrum(views["torch"], which), spectrum(views["numpy"], which), rtol=RTOL, atol=1e-14 * np.abs(H).max()
        )
    raw_t, raw_n = spectrum(views["torch"], center=False), spectrum(views["numpy"], center=False)
    np.testing.assert_allclose(raw_t, raw_n, rtol=RTOL, atol=1e-14 * raw_n[0])


def test_torch_backend_gnc1_matches_numpy(rng):
    H, y = _features(rng, 7, 10, 25)
    stats = ClassStats.from_arrays(normalize_features(H), y, K=7)
    for kw in ({}, {"weighting": "empirical"}, {"center": True}):
        a = gnc1(ClassMoments(stats, linalg="torch"), **kw)
        b = gnc1(ClassMoments(stats, linalg="numpy"), **kw)
        assert _rel(a, b) <= RTOL, (kw, a, b)


def test_torch_path_never_reads_the_gram_on_the_host(rng, monkeypatch):
    """The d x d Gram is read as the state's own tensor (``raw_tensor``), never through the host accessors, and
    what the torch backend brings to the host is never a d x d array: at most max(K, d) values at a time."""
    K, d = 6, 40
    H, y = _features(rng, K, d, 30)
    stats = ClassStats.from_arrays(H, y, K=K)
    view = ClassMoments(stats, linalg="torch")
    sizes = []
    real_to_host = type(CPU_TORCH).to_host

    def to_host(self, a):
        sizes.append(int(a.numel()))
        return real_to_host(self, a)

    real_get = ClassStats._get

    def get(self, key):
        assert key != "scatter_dev", "the torch path read the d x d Gram through the host"
        return real_get(self, key)

    monkeypatch.setattr(type(CPU_TORCH), "to_host", to_host)
    monkeypatch.setattr(ClassStats, "_get", get)
    for name in ("sigma_w", "sigma_b", "sigma_t", "within_scatter"):
        monkeypatch.setattr(ClassMoments, name, lambda *a, _n=name, **k: pytest.fail(f"host {_n} read"))
    report = collapse_report(view, W=rng.normal(size=(K, d)))
    assert {"nc1", "vci", "probe_mse_optimal", "effective_rank"} <= report.keys()
    assert sizes and max(sizes) <= max(K, d)
    assert isinstance(view.matrix("within"), torch.Tensor)


def test_views_of_one_cache_keep_each_backends_values(rng):
    H, y = _features(rng, 5, 8, 20)
    stats = ClassStats.from_arrays(H, y, K=5)
    cache: dict = {}
    numpy_view = ClassMoments(stats, cache=cache, linalg="numpy")
    torch_view = ClassMoments(stats, cache=cache, linalg="torch")
    assert isinstance(numpy_view.matrix("total"), np.ndarray)
    assert isinstance(torch_view.matrix("total"), torch.Tensor)
    assert isinstance(stats_eig(numpy_view, "within")[1], np.ndarray)
    assert isinstance(stats_eig(torch_view, "within")[1], torch.Tensor)
    assert isinstance(stats_between_eig(torch_view)[1], torch.Tensor)
    assert isinstance(stats_between_eig(numpy_view)[1], np.ndarray)
    np.testing.assert_allclose(torch_view.matrix("total").numpy(), numpy_view.sigma_t(), rtol=1e-13, atol=1e-15)
    # the host accessors of a torch view are numpy, as always
    assert isinstance(torch_view.sigma_w(), np.ndarray) and isinstance(torch_view.matrix("within"), torch.Tensor)


def test_matrix_of_the_numpy_backend_is_the_cached_host_array(rng):
    H, y = _features(rng, 4, 6, 10)
    view = ClassMoments(ClassStats.from_arrays(H, y, K=4))
    assert view.backend is NUMPY
    assert view.matrix("within") is view.sigma_w(copy=False)
    assert view.matrix("between", "empirical") is view.sigma_b("empirical", copy=False)
    assert view.matrix("total") is view.sigma_t(copy=False)
    with pytest.raises(ValueError, match="which must be one of"):
        view.matrix("scatter")


def test_backend_choice(monkeypatch):
    assert choose_backend("auto", None) is NUMPY
    assert choose_backend("auto", torch.device("cpu")) is NUMPY
    assert choose_backend("torch", None) is CPU_TORCH
    with pytest.raises(ValueError, match="linalg must be 'auto', 'numpy' or 'torch', got 'cuda'"):
        ClassMoments(ClassStats(2, 2), linalg="cuda")
    # "auto" picks torch wherever the statistics' device is an accelerator (the one CPU / accelerator test)
    monkeypatch.setattr(backend_mod, "accelerated", lambda device: True)
    assert choose_backend("auto", torch.device("cpu")) is CPU_TORCH
    assert choose_backend("numpy", torch.device("cpu")) is NUMPY
    assert backend_of(torch.zeros(1)) is CPU_TORCH and backend_of(np.zeros(1)) is NUMPY


def test_report_of_statistics_on_an_accelerator_runs_on_the_torch_backend(rng, monkeypatch):
    """``collapse_report(stats)`` builds its own view with ``linalg="auto"``: on an accelerator (here the CPU
    taken for one, through the one CPU / accelerator test) the torch backend computes every decomposition."""
    H, y = _features(rng, 5, 9, 20)
    stats = ClassStats.from_arrays(H, y, K=5)
    with _quiet():
        ref = collapse_report(stats)
    monkeypatch.setattr(backend_mod, "accelerated", lambda device: True)
    assert stats.moments().backend is CPU_TORCH
    seen = []
    real = CPU_TORCH.descending

    def descending(w, V=None):
        seen.append(type(w).__name__)
        return real(w, V)

    monkeypatch.setattr(CPU_TORCH, "descending", descending)
    with _quiet():
        got = collapse_report(stats)
    assert seen and set(seen) == {"Tensor"}  # the d x d eigenvalues (Sigma_T's, for the ranks) by torch
    _assert_reports_agree(got, ref)


def test_raw_tensor_is_the_state_itself_with_the_raw_checks(rng):
    H, y = _features(rng, 3, 4, 5)
    stats = ClassStats.from_arrays(H, y, K=3)
    t = stats.raw_tensor("scatter_dev")
    assert t is stats._state["scatter_dev"] and t.dtype == torch.float64
    np.testing.assert_array_equal(t.numpy(), stats.raw("scatter_dev"))
    assert torch.equal(ClassStats(3, 4).raw_tensor("sum_dev"), torch.zeros(3, 4, dtype=torch.float64))
    with pytest.raises(ValueError, match="unknown raw moment 'nope'"):
        stats.raw_tensor("nope")
    stats._state["sq_dev"][0] = math.inf  # what an overflowed sum of squares looks like
    stats._checked.clear()
    with pytest.raises(ValueError, match="overflowed float64"):
        stats.raw_tensor("sq_dev")


def _spd(rng, n, cond):
    Q = np.linalg.qr(rng.normal(size=(n, n)))[0]
    A = (Q * np.logspace(0, -math.log10(cond), n)) @ Q.T
    return (A + A.T) / 2


@pytest.mark.parametrize("n", [1, 2, 7, 60])
@pytest.mark.parametrize("cond", [1.0, 1e3, 1e8, 1e13])
def test_pocon_is_lapacks_condition_estimate(rng, n, cond):
    """The port of LAPACK's dpocon (used where LAPACK cannot run: on a device) gives LAPACK's estimate."""
    A = _spd(rng, n, cond) if n > 1 else np.array([[0.37]])
    L, info = lapack.dpotrf(A, lower=1, clean=1)
    assert info == 0
    anorm = float(np.abs(A).sum(axis=0).max())
    ref, info = lapack.dpocon(L, anorm, uplo="L")
    assert info == 0
    got = _pocon(lambda x: cho_solve((L, True), x), n, anorm)
    assert _rel(got, ref) <= 1e-9, (got, ref)
    Lt = torch.from_numpy(L)
    via_torch = _pocon(
        lambda x: CPU_TORCH.to_host(torch.cholesky_solve(torch.from_numpy(x)[:, None], Lt)[:, 0]), n, anorm
    )
    assert _rel(via_torch, ref) <= 1e-9, (via_torch, ref)


def test_pocon_follows_lapack_step_for_step_on_many_matrices():
    """2,100 small SPD matrices (Grams and prescribed spectra, cond up to 1e10): the same estimate as LAPACK's in
    every one. Among them are matrices where the estimate needs more than two power steps, and one (index 2,036)
    where only the final alternating-sign vector reaches LAPACK's value."""
    gen = np.random.default_rng(1)
    for t in range(2100):
        n = int(gen.integers(2, 12))
        if t % 2 == 0:
            X = gen.normal(size=(n, n))
            A = X @ X.T + 1e-3 * np.eye(n)
        else:
            Q = np.linalg.qr(gen.normal(size=(n, n)))[0]
            A = (Q * np.logspace(0, -gen.uniform(1, 10), n)) @ Q.T
            A = (A + A.T) / 2
        L, info = lapack.dpotrf(A, lower=1, clean=1)
        assert info == 0
        anorm = float(np.abs(A).sum(axis=0).max())
        ref = lapack.dpocon(L, anorm, uplo="L")[0]
        got = _pocon(lambda x, L=L: cho_solve((L, True), x), n, anorm)
        assert _rel(got, ref) <= 1e-9, (t, got, ref)


@pytest.mark.parametrize("cond", [10.0, 1e9, 1e14])
def test_psd_cholesky_and_pinv_of_a_torch_matrix_match_numpy(rng, cond):
    A = _spd(rng, 30, cond)
    At = torch.from_numpy(A)
    a, b = psd_cholesky(At), psd_cholesky(A)
    assert (a is None) == (b is None) == (cond > 1e12)
    if b is not None:
        assert isinstance(a[0], torch.Tensor)
        assert np.abs(a[0].numpy() - b[0]).max() <= 1e-15 * math.sqrt(cond) * np.abs(b[0]).max()
        assert _rel(a[1], b[1]) <= 1e-15 * cond  # solves with factors that differ by eps cond(A)^(1/2)
    pa, pb = psd_pinv(At, rank="numerical"), psd_pinv(A, rank="numerical")
    assert pa.rank == pb.rank and isinstance(pa.basis, torch.Tensor)
    np.testing.assert_allclose(pa.eigvals, pb.eigvals, rtol=1e-10, atol=1e-15)
    # the pseudo-inverse itself is as ill-conditioned as the kept spectrum (cond x eps between two LAPACKs)
    kept = pb.eigvals[0] / pb.eigvals[pb.rank - 1]
    assert np.abs(pa.pinv.numpy() - pb.pinv).max() <= 1e-14 * kept * np.abs(pb.pinv).max()
    assert abs(pa.trace_with(At) - pb.trace_with(A)) <= 1e-14 * kept * pb.rank


# ---------------------------------------------------------------- CUDA


def _cuda_stats(H, y, K):
    return ClassStats.from_arrays(torch.from_numpy(H).cuda(), torch.from_numpy(y).cuda(), K=K)


@needs_cuda
@pytest.mark.parametrize(("name", "K", "d", "n", "kw"), CASES, ids=[c[0] for c in CASES])
def test_cuda_report_runs_on_the_gpu_and_matches_the_cpu(rng, name, K, d, n, kw):
    H, y = _features(rng, K, d, n, **kw)
    W, b = rng.normal(size=(K, d)), rng.normal(size=K)
    gpu = _cuda_stats(H, y, K)
    view = ClassMoments(gpu)
    assert view.backend.name == "torch" and view.backend.device.type == "cuda"
    assert view.matrix("within").device.type == "cuda"
    with _quiet():
        got = collapse_report(view, W=W, b=b)
        ref = collapse_report(ClassStats.from_arrays(H, y, K=K), W=W, b=b)
        host = collapse_report(ClassMoments(gpu, linalg="numpy"), W=W, b=b)
    _assert_reports_agree(got, ref)  # GPU accumulation and linear algebra against the CPU's
    _assert_reports_agree(host, ref)  # GPU accumulation alone


@needs_cuda
def test_cuda_report_copies_no_d_by_d_matrix_to_the_host(rng, monkeypatch):
    K, d = 10, 256
    H, y = _features(rng, K, d, 60)
    gpu = _cuda_stats(H, y, K)
    copied = []
    real_cpu = torch.Tensor.cpu

    def cpu(self, *args, **kwargs):
        if self.device.type == "cuda":
            copied.append(int(self.numel()))
        return real_cpu(self, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "cpu", cpu)
    report = collapse_report(gpu, W=rng.normal(size=(K, d)))
    assert {"nc1", "vci", "within_class_split_in_span", "probe_mse_optimal", "effective_rank"} <= report.keys()
    assert copied and max(copied) <= K * d < d * d  # the K x d moments at most, never the d x d Gram


@needs_cuda
def test_cuda_psd_cholesky_estimate_matches_lapack(rng):
    A = _spd(rng, 200, 1e6)
    L, rcond = psd_cholesky(torch.from_numpy(A).cuda())
    ref = psd_cholesky(A)
    assert L.device.type == "cuda"
    np.testing.assert_allclose(L.cpu().numpy(), ref[0], rtol=1e-9, atol=1e-12)
    assert _rel(rcond, ref[1]) <= 1e-9
