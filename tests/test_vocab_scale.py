"""Collapse over the classes present, and the tiled pair sweeps of the pairwise metrics at vocabulary scale."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch
from torch import nn
from typer.testing import CliRunner

from nclab.cli import app
from nclab.metrics import (
    cdnv,
    collapse_report,
    equiangularity,
    etf_gram_error,
    hyperspherical_uniformity,
    max_angle,
    pair_sweeps,
    present_classes,
    select_classes,
)
from nclab.metrics.means_geometry import classifier_accuracy_on_means
from nclab.monitor import CollapseMonitor
from nclab.stats import ClassStats, EmptyClassError, NCCAccumulator

# a report's values that are counts or exact fractions (compared with ==), the others to 1e-12 relative
_EXACT = {"classifier_accuracy_on_means", "ncc_accuracy", "ncc_mismatch", "classifier_accuracy", "numerical_rank"}


def _data(K: int = 8, d: int = 5, seed: int = 0):
    """Features of K classes of which 1, 4 and 6 are empty and 3 has one sample (the others 2..5)."""
    rng = np.random.default_rng(seed)
    counts = np.array([4, 0, 3, 1, 0, 5, 0, 2])[:K]
    y = np.repeat(np.arange(K), counts)
    H = 3.0 * rng.standard_normal((K, d))[y] + rng.standard_normal((y.size, d))
    W = rng.standard_normal((K, d))
    b = rng.standard_normal(K)
    return H, y, W, b


def _hand_subset(H, y, W, b, keep):
    """The report of the kept classes built by hand: relabelled samples, W's rows and b's entries."""
    relabel = {int(k): i for i, k in enumerate(keep)}
    mask = np.isin(y, keep)
    y2 = np.array([relabel[int(v)] for v in y[mask]])
    stats = ClassStats.from_arrays(H[mask], y2, K=len(keep))
    ncc = NCCAccumulator(stats, W=W[keep], b=b[keep]).update(H[mask], y2)
    return collapse_report(stats, W=W[keep], b=b[keep], ncc=ncc)


@pytest.mark.parametrize("min_count", [None, 2])
def test_present_report_equals_the_report_of_the_hand_subset(min_count):
    H, y, W, b = _data()
    stats = ClassStats.from_arrays(H, y, K=8)
    keep = np.array([0, 2, 3, 5, 7]) if min_count is None else np.array([0, 2, 5, 7])
    sub, Ws, bs, kept = select_classes(stats, W, b, classes="present", min_count=min_count)
    np.testing.assert_array_equal(kept, keep)
    ncc = NCCAccumulator(sub, W=Ws, b=bs)  # type: ignore[arg-type]
    mask = np.isin(y, keep)
    ncc.update(H[mask], np.searchsorted(keep, y[mask]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = collapse_report(stats, W=W, b=b, ncc=ncc, classes="present", min_count=min_count)
        want = _hand_subset(H, y, W, b, keep)
    assert got.pop("K_present") == keep.size
    assert got.pop("present_min_count") == (1 if min_count is None else min_count)
    assert set(got) == set(want) and {"self_duality", "classifier_accuracy_on_means", "ncc_accuracy"} <= set(got)
    for key, value in want.items():
        if key in _EXACT:
            assert got[key] == value, key
        else:
            assert got[key] == pytest.approx(value, rel=1e-12, abs=1e-15), key


def test_min_count_keeps_the_classes_with_enough_samples():
    np.testing.assert_array_equal(present_classes([4, 0, 3, 1, 0, 5], 1), [0, 2, 3, 5])
    np.testing.assert_array_equal(present_classes([4, 0, 3, 1, 0, 5], 3), [0, 2, 5])
    np.testing.assert_array_equal(present_classes([4, 0, 3, 1, 0, 5], 5), [5])
    H, y, _, _ = _data()
    stats = ClassStats.from_arrays(H, y, K=8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert collapse_report(stats, classes="present", min_count=3)["K_present"] == 3  # classes 0, 2, 5
        with pytest.raises(ValueError, match="keeps 1 of 8 classes"):
            collapse_report(stats, classes="present", min_count=5)
    with pytest.raises(ValueError, match="min_count=2 applies to classes='present' only"):
        collapse_report(stats, min_count=2)
    with pytest.raises(ValueError, match="classes must be 'all' or 'present'"):
        collapse_report(stats, classes="seen")
    with pytest.raises(ValueError, match="min_count must be an int >= 1"):
        collapse_report(stats, classes="present", min_count=0)
    # every class kept: the statistics themselves, and the same numbers as classes="all"
    full = ClassStats.from_arrays(H, np.arange(y.size) % 4, K=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a, p = collapse_report(full), collapse_report(full, classes="present")
    assert p.pop("K_present") == 4 and p.pop("present_min_count") == 1 and p == a


def test_empty_classes_under_all_name_the_present_option():
    H, y, W, b = _data()
    with pytest.raises(EmptyClassError, match=r"3 of 8 classes are empty.*classes='present'"):
        collapse_report(ClassStats.from_arrays(H, y, K=8), W=W, b=b)


def test_monitor_with_more_classes_than_samples_warns_and_present_measures():
    torch.manual_seed(0)
    x = torch.randn(10, 4)
    net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 50))
    with pytest.warns(UserWarning, match=r"produced no metric: .*40 of 50 classes are empty.*classes='present'"):
        res = CollapseMonitor(net, 50).measure([(x, torch.arange(10))])
    assert "penultimate" not in res.reports
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the simplex ETF of 10 classes does not fit in d = 8
        warnings.simplefilter("error", RuntimeWarning)
        mon = CollapseMonitor(net, 50, classes="present")
        res = mon.measure([(x, torch.arange(10))])
    rep = res.reports["penultimate"]
    assert rep["K_present"] == 10 and rep["present_min_count"] == 1
    # the numbers of a report over the ten classes with the classifier's first ten rows
    H = net[1](net[0](x)).detach().double().numpy()
    W = net[2].weight.detach().double().numpy()[:10]
    b = net[2].bias.detach().double().numpy()[:10]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = _hand_subset(H, np.arange(10), W, b, np.arange(10))
    for key in ("self_duality", "classifier_accuracy_on_means", "cdnv", "ncc_accuracy", "ncc_mismatch"):
        assert rep[key] == pytest.approx(want[key], rel=1e-9), key
    assert mon.settings["classes"] == "present"
    with pytest.raises(ValueError, match="min_count=3 applies to classes='present' only"):
        CollapseMonitor(net, 50, min_count=3)


def test_cli_measure_classes_present(tmp_path):
    H, y, W, b = _data()
    for name, arr in (("h", H), ("y", y), ("w", W), ("b", b)):
        np.save(tmp_path / f"{name}.npy", arr)
    base = ["measure", str(tmp_path / "h.npy"), str(tmp_path / "y.npy"), "-w", str(tmp_path / "w.npy")]
    base += ["-b", str(tmp_path / "b.npy"), "-K", "8", "-f", "json"]
    runner = CliRunner()
    bad = runner.invoke(app, base)
    assert bad.exit_code == 2 and "--present" in bad.output
    res = runner.invoke(app, [*base, "--present", "--min-count", "2"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    keep = np.array([0, 2, 5, 7])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = _hand_subset(H, y, W, b, keep)
    assert out["K_present"] == 4
    for key in ("self_duality", "classifier_accuracy_on_means", "ncc_accuracy", "nc1"):
        assert out[key] == pytest.approx(want[key], rel=1e-9), key


# ---------------------------------------------------------------------------------------------- tiled sweeps
def _random_stats(K: int, d: int, seed: int = 1):
    """Fresh light statistics (a cache of their own) of random data, and the generator that drew them."""
    rng = np.random.default_rng(seed)
    y = np.concatenate([np.arange(K), rng.integers(0, K, 2 * K)])
    H = 2.0 * rng.standard_normal((K, d))[y] + rng.standard_normal((y.size, d))
    return ClassStats.from_arrays(H, y, K=K, track="light"), rng


@pytest.fixture()
def engine(monkeypatch):
    """Every pairwise metric through the tiled sweeps, in 64 x 64 tiles; ``exact`` picks the GEMM precision."""
    monkeypatch.setattr(pair_sweeps, "ENGINE_MIN_K", 2)
    monkeypatch.setattr(pair_sweeps, "TILE", 64)

    def use(exact: bool) -> None:
        monkeypatch.setattr(pair_sweeps, "FLOAT32_MIN_WORK", 2**62 if exact else 0)

    return use


def _metrics(stats, W, b):
    out = {
        "cdnv": cdnv(stats),
        "cdnv2": cdnv(stats, exponent=2),
        "equiangularity": equiangularity(stats),
        "max_angle": max_angle(stats),
        "etf_gram_error": etf_gram_error(stats),
        "etf_gram_error_w": etf_gram_error(W),
        "equiangularity_w": equiangularity(W),
        "max_angle_w": max_angle(W),
        "nc4": classifier_accuracy_on_means(stats, W=W, b=b),
    }
    for kernel, s in (("log", None), ("riesz", 1.5), ("distance", None)):
        u = hyperspherical_uniformity(stats, kernel, s=s)  # type: ignore[arg-type]
        out[f"{kernel}_mean"], out[f"{kernel}_var"] = u["mean"], u["var"]
    return out


@pytest.mark.parametrize("d", [16, 400])  # d < K (closed-form ETF Gram error) and d > K (tiles)
def test_tiled_sweeps_equal_the_dense_path(engine, d):
    K = 300
    stats, rng = _random_stats(K, d)
    Mc = stats.means - stats.means.mean(axis=0)
    W = rng.standard_normal((K, d)) + 0.05 * Mc  # a classifier that decides some class means right
    b = 0.1 * rng.standard_normal(K)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dense = _metrics(stats, W, b)
        engine(True)
        tiled = _metrics(_random_stats(K, d)[0], W, b)  # the same statistics, a fresh cache
        engine(False)  # float32 GEMMs: the pair values to ~1e-7, the decisions exactly
        fast = _metrics(_random_stats(K, d)[0], W, b)
    assert 0.0 < dense["nc4"] < 1.0
    for key, value in dense.items():
        assert tiled[key] == pytest.approx(value, rel=1e-10), key
        assert fast[key] == pytest.approx(value, rel=1e-5), key
    assert fast["nc4"] == dense["nc4"]


def test_float32_decisions_are_exact_at_ties(engine):
    """Duplicated classifier rows tie exactly: float64 gives the lower class, and so must the float32 tiles."""
    K, d = 200, 12
    stats, rng = _random_stats(K, d, seed=3)
    M = stats.means
    W = M - M.mean(axis=0)
    W[1::2] = W[0::2]  # class 2k+1 ties with 2k, which wins: half the classes lose their own mean
    W[10] = W[11] + 1e-9 * rng.standard_normal(d)  # a near tie that float32 cannot resolve
    dense = classifier_accuracy_on_means(stats, W=W)
    engine(False)
    assert pair_sweeps.gram_dtype(K, d) == torch.float32
    assert classifier_accuracy_on_means(stats, W=W) == dense
    assert dense <= 0.5 + 1.0 / K


def test_sweeps_read_only_tiles(engine, monkeypatch):
    """No product of the sweeps is larger than one tile (64 x 64) at K = 300: never the K x K matrix."""
    engine(False)
    largest = []
    matmul, addmm = torch.Tensor.__matmul__, torch.addmm

    def spy_matmul(a, b):
        out = matmul(a, b)
        largest.append(out.numel())
        return out

    def spy_addmm(*args, **kwargs):
        out = addmm(*args, **kwargs)
        largest.append(out.numel())
        return out

    monkeypatch.setattr(torch.Tensor, "__matmul__", spy_matmul)
    monkeypatch.setattr(torch, "addmm", spy_addmm)
    stats, rng = _random_stats(300, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        collapse_report(stats, W=rng.standard_normal((300, 8)), b=rng.standard_normal(300))
    # tiles of 64 x 64; a class decided again in float64 reads one row of K logits per class (64 x K at most)
    assert largest and max(largest) <= 64 * 300 < 300 * 300


def test_large_K_report_stays_far_below_a_K_by_K_matrix():
    """K = 24,000 (a K x K float64 matrix: 4.6 GB, float32 2.3 GB) with the default tiles: the whole process
    (python, torch and the statistics included, ~0.4 GB of it; about 0.5 GB in all on a quiet machine) stays below
    2 GB, less than one K x K float32 matrix. The bound leaves room for the tile workers' temporaries, whose
    overlap depends on the machine's load (1.6 GB seen at K = 16,000 under load)."""
    code = (
        "import resource, warnings, numpy as np\n"
        "from nclab.stats import ClassStats\n"
        "from nclab.metrics import collapse_report\n"
        "K, d = 24000, 8; r = np.random.default_rng(0); y = np.arange(3 * K) % K\n"
        "s = ClassStats(K, d, track='light'); s.update(r.normal(size=(3 * K, d)), y)\n"
        "warnings.simplefilter('ignore')\n"
        "rep = collapse_report(s, progress=False)\n"
        "assert np.isfinite(rep['cdnv']) and np.isfinite(rep['uniformity_log_energy'])\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, check=True)
    peak = int(out.stdout.split()[-1]) * 1024
    assert peak < 2.0e9, f"peak RSS {peak / 1e9:.2f} GB"


def test_progress_callback_reaches_the_total(monkeypatch):
    monkeypatch.setattr(pair_sweeps, "ENGINE_MIN_K", 2)
    monkeypatch.setattr(pair_sweeps, "TILE", 64)
    stats, rng = _random_stats(200, 6)
    seen: list[tuple[float, float]] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        collapse_report(stats, W=rng.standard_normal((200, 6)), progress=lambda done, total: seen.append((done, total)))
    assert seen and seen[-1][0] == pytest.approx(seen[-1][1])
    assert all(a[0] <= b[0] for a, b in itertools.pairwise(seen))


def test_progress_is_said_only_when_asked_or_long(monkeypatch, capsys):
    monkeypatch.setattr(pair_sweeps, "ENGINE_MIN_K", 2)
    stats, _ = _random_stats(100, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        collapse_report(stats)  # a short report, stderr not a terminal: nothing
        assert capsys.readouterr().err == ""
        collapse_report(_random_stats(100, 4)[0], progress=True)
    assert "estimated for the pair sweeps" in capsys.readouterr().err


def _dense_hits(M, W, b):
    """Brute force: the whole K x K logits in float64, argmax per class (ties to the lowest index)."""
    L = M @ W.T + (0.0 if b is None else b)
    return int(np.count_nonzero(np.argmax(L, axis=1) == np.arange(M.shape[0])))


@pytest.mark.parametrize("head", ["random", "ncc", "mixed"])
def test_decisions_leave_the_sweep_once_lost_and_stay_exact(monkeypatch, head):
    """At K = 2,100 (the default tiled path, float32 logits forced): a class leaves the sweep once another class's
    logit beats its own by more than the float32 error bound; the count equals the dense float64 argmax for a
    head that decides almost every class wrong (random), every class right (the NCC head), and a mix with ties."""
    monkeypatch.setattr(pair_sweeps, "FLOAT32_MIN_WORK", 0)
    K, d = 2100, 8
    assert K >= pair_sweeps.ENGINE_MIN_K
    rng = np.random.default_rng(7)
    M = 3.0 * rng.standard_normal((K, d))
    if head == "random":
        W, b = rng.standard_normal((K, d)), 0.1 * rng.standard_normal(K)
    else:  # the NCC head: argmax_j -||mu_k - mu_j||^2 / 2 = k for every class
        W, b = M.copy(), -0.5 * np.einsum("kd,kd->k", M, M)
        if head == "mixed":
            W[1::3], b[1::3] = W[0::3][: W[1::3].shape[0]], b[0::3][: W[1::3].shape[0]]  # exact ties: the lower wins
            W[5] = W[4] + 1e-9 * rng.standard_normal(d)  # a near tie below float32's resolution
            W[200:400] = rng.standard_normal((200, d))  # a block of random rows
    want = _dense_hits(M, W, b)
    assert pair_sweeps.gram_dtype(K, d) == torch.float32
    assert pair_sweeps.decisions_at_means(M, W, b, tile=256) == want
    assert pair_sweeps.decisions_at_means(M, W, None, tile=256) == _dense_hits(M, W, None)
    if head == "random":
        assert want < K // 100
    elif head == "ncc":
        assert want == K
    else:
        assert 0 < want < K


# ---------------------------------------------------------------------------------------------- brute force, K >= 2,048
def _brute_pairs(stats, W):
    """The report's pairwise and per-class values from whole K x K matrices and unit rows (float64, numpy)."""
    M = stats.moments().means
    V = M - M.mean(axis=0)
    U = V / np.linalg.norm(V, axis=1)[:, None]
    K = V.shape[0]
    iu = np.triu_indices(K, 1)
    C = (U @ U.T)[iu]
    s = C + 1.0 / (K - 1)
    D2 = (np.sum(V * V, axis=1)[:, None] + np.sum(V * V, axis=1)[None, :] - 2.0 * V @ V.T)[iu]
    var = stats.moments().class_ss / stats.counts
    R = np.sum(U * U, axis=1)[:, None] + np.sum(U * U, axis=1)[None, :] - 2.0 * U @ U.T
    logk = -0.5 * np.log(R[iu])
    both = np.concatenate([s, s])  # the K(K-1) off-diagonal entries, each pair twice
    Uw = W / np.linalg.norm(W, axis=1)[:, None]
    sw = (Uw @ Uw.T)[iu] + 1.0 / (K - 1)
    Wn, Mn = W / np.linalg.norm(W), V / np.linalg.norm(V)
    cos_wm = np.sum(Uw * U, axis=1)
    hbar = stats.moments().unit_sums / stats.counts[:, None]
    return {
        "equiangularity": float(np.std(both, ddof=1)),
        "max_angle": float(np.mean(np.abs(s))),
        "cdnv": float(np.mean((var[iu[0]] + var[iu[1]]) / (2.0 * D2))),
        "uniformity_log_energy": float(np.mean(logk)),
        "uniformity_log_var": float(np.var(logk)),
        "equiangularity_w": float(np.std(np.concatenate([sw, sw]), ddof=1)),
        "max_angle_w": float(np.mean(np.abs(sw))),
        "self_duality": float(np.sum((Wn - Mn) ** 2)),
        "uniform_duality": float(np.var(cos_wm, ddof=1)),
        "gnc3": float(np.mean(1.0 - np.sum(Uw * hbar, axis=1))),
    }


@pytest.mark.parametrize("gemm", ["float64", "float32"])
def test_report_at_K_2100_equals_brute_force(monkeypatch, gemm):
    """K = 2,100 >= ENGINE_MIN_K with the default tiles: the report's sweep values (tile moments accumulated in
    float64), NC3 in row blocks and the per-class cosines from row norms equal whole-matrix float64 numpy; the
    float32 GEMMs (forced) to 1e-6 relative."""
    if gemm == "float32":
        monkeypatch.setattr(pair_sweeps, "FLOAT32_MIN_WORK", 0)
    K, d = 2100, 8
    assert K >= pair_sweeps.ENGINE_MIN_K
    stats, rng = _random_stats(K, d, seed=5)
    W = rng.standard_normal((K, d))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rep = collapse_report(stats, W=W, b=0.1 * rng.standard_normal(K), progress=False)
    want = _brute_pairs(stats, W)
    rel = 1e-10 if gemm == "float64" else 1e-6
    for key, value in want.items():
        assert rep[key] == pytest.approx(value, rel=rel), key


def test_self_duality_in_row_blocks_equals_the_whole_array_form(monkeypatch):
    """The Frobenius NC3 summed over row blocks (forced to 7 rows) equals the whole-array formula, also for rows
    of extreme magnitude (exact power-of-two scaling)."""
    from nclab.metrics import means_geometry, self_duality

    rng = np.random.default_rng(2)
    M, W = rng.standard_normal((50, 6)), rng.standard_normal((50, 6))
    whole = float(np.sum((W / np.linalg.norm(W) - (M - M.mean(0)) / np.linalg.norm(M - M.mean(0))) ** 2))
    monkeypatch.setattr(means_geometry, "_BLOCK_ENTRIES", 7 * 6)
    assert self_duality(M, W=W) == pytest.approx(whole, rel=1e-13)
    assert self_duality(1e200 * M, W=1e-200 * W) == pytest.approx(whole, rel=1e-13)
    assert self_duality(M, W=W, squared=False) == pytest.approx(np.sqrt(whole), rel=1e-13)


def test_row_norms_in_blocks_are_numpys_bit_for_bit():
    from nclab.metrics.common import row_norms

    rng = np.random.default_rng(3)
    V = rng.standard_normal((5000, 300))  # several blocks of 2^19 entries
    np.testing.assert_array_equal(row_norms(V), np.linalg.norm(V, axis=1))
    np.testing.assert_array_equal(row_norms(-V[:7]), np.linalg.norm(V[:7], axis=1))
    assert row_norms(1e200 * V[:3]) == pytest.approx(1e200 * np.linalg.norm(V[:3], axis=1), rel=1e-15)


def test_read_only_rows_pass_without_a_copy_and_are_still_checked():
    from nclab.validation import as_rows

    W = np.random.default_rng(0).standard_normal((6, 3))
    assert as_rows(W) is not W and as_rows(W).flags.writeable  # a caller's writable array: a copy
    W.setflags(write=False)
    assert as_rows(W) is W  # read-only float64: neither side can change it
    bad = W.copy()
    bad[2, 1] = np.nan
    bad.setflags(write=False)
    with pytest.raises(ValueError, match="W contains NaN or inf"):
        as_rows(bad, name="W")
    huge = np.full((2, 2), 1e308)  # the sum overflows, every entry is finite: accepted
    huge.setflags(write=False)
    assert as_rows(huge) is huge


def test_present_subset_copies_only_the_kept_rows_and_checks_all():
    H, y, W, b = _data()
    stats = ClassStats.from_arrays(H, y, K=8)
    sub, Ws, _, keep = select_classes(stats, W, b, classes="present")
    np.testing.assert_array_equal(Ws, W[keep])
    assert not Ws.flags.writeable and not np.shares_memory(Ws, W)
    _, Wt, _, _ = select_classes(stats, torch.as_tensor(W, dtype=torch.float32), b, classes="present")
    np.testing.assert_array_equal(Wt, W[keep].astype(np.float32).astype(np.float64))
    W_bad = W.copy()
    W_bad[1, 0] = np.inf  # class 1 is empty, and still W must be finite
    with pytest.raises(ValueError, match="W contains NaN or inf"):
        select_classes(stats, W_bad, b, classes="present")
    with pytest.raises(ValueError, match=r"W must be \(K, d\) = \(8, 5\)"):
        select_classes(stats, W[keep], b, classes="present")
    view = sub.moments()
    assert view.class_means(copy=False) is view.class_means(copy=False)
    assert not view.class_means(copy=False).flags.writeable and view.class_means().flags.writeable
    np.testing.assert_array_equal(view.centered_means(copy=False), view.centered_means())


def test_tile_moments_equal_the_old_var_mean_and_float64():
    """The tile moments (float64-accumulated mean, then the squared float32 deviations summed in float64) equal
    torch.var_mean of the tile in float64 to the deviations' float32 rounding (1e-8), and the old float32
    torch.var_mean to its float32 accuracy."""
    g = torch.Generator().manual_seed(0)
    c = (0.03 * torch.randn(300, 200, generator=g) - 1.0 / 4000).to(torch.float32)
    var64, mean64 = torch.var_mean(c.double(), correction=0)
    var32, mean32 = torch.var_mean(c, correction=0)  # the old tiles' reduction
    mean, m2 = pair_sweeps._moments(c.clone(), torch.empty_like(c))
    assert mean == pytest.approx(float(mean64), rel=1e-12)
    assert m2 == pytest.approx(float(var64) * c.numel(), rel=1e-8)
    assert m2 == pytest.approx(float(var32) * c.numel(), rel=1e-5)
    assert mean == pytest.approx(float(mean32), rel=1e-4)
    mean_in, m2_in = pair_sweeps._moments(c.clone())  # without scratch: in place
    assert (mean_in, m2_in) == (mean, m2)
