"""Sizes are checked before allocation: a tiny NCLAB_MAX_BYTES cap makes every entry point refuse with
AllocationTooLarge naming the size and the alternative, before allocating; sentinel labels are named; a rejected
batch (meta device) leaves no trace in the accumulator."""

from __future__ import annotations

import json
import tracemalloc

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from nclab.cli import app
from nclab.geometry.codes import softmax_code_search, tammes_search
from nclab.memory import AllocationTooLarge, check_allocation, configured_cap, format_bytes
from nclab.metrics import (
    collapse_report,
    etf_gram_error,
    orthogonal_frame_error,
    self_duality,
    trace_ratio,
)
from nclab.metrics import means_geometry as mg
from nclab.stats import ClassStats
from nclab.theory.central_path import simulate
from nclab.ufm import solve
from nclab.validation import infer_num_classes


def test_cap_from_env_and_keyword(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NCLAB_MAX_BYTES", "2K")
    assert configured_cap() == 2048
    assert configured_cap("1M") == 1 << 20
    check_allocation(2048, what="x", alternative="y")  # at the cap: allowed
    with pytest.raises(AllocationTooLarge) as err:
        check_allocation(2049, what="the thing", alternative="do less")
    assert isinstance(err.value, MemoryError) and isinstance(err.value, ValueError)
    assert err.value.nbytes == 2049 and err.value.limit == 2048
    assert "the thing would allocate about 2 KiB" in str(err.value) and "do less" in str(err.value)
    monkeypatch.setenv("NCLAB_MAX_BYTES", "lots")
    with pytest.raises(ValueError, match="NCLAB_MAX_BYTES must be a number of bytes"):
        configured_cap()


def test_available_memory_bounds_without_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NCLAB_MAX_BYTES", raising=False)
    with pytest.raises(AllocationTooLarge, match="the memory available now"):
        check_allocation(2.0**80, what="a yottabyte", alternative="none")


def test_format_bytes() -> None:
    assert format_bytes(512) == "512 B"
    assert format_bytes(3 * 2**30) == "3 GiB"
    assert format_bytes(80e9) == "74.5 GiB"


def test_class_stats_full_refused_suggests_light(monkeypatch: pytest.MonkeyPatch) -> None:  # probe row 63
    monkeypatch.setenv("NCLAB_MAX_BYTES", "100K")
    d = 200  # full: 8 d^2 = 320 KB scatter > cap; light: 3 x 8 K d = 14.4 KB
    with pytest.raises(AllocationTooLarge) as err:
        ClassStats(3, d)
    msg = str(err.value)
    assert "d=200" in msg and "327 KiB" in msg and "312 KiB" in msg and "track='light'" in msg
    light = ClassStats(3, d, track="light")
    assert light.track == "light"
    with pytest.raises(AllocationTooLarge, match="fewer classes"):
        ClassStats(100_000, d, track="light")


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda: solve("mse-bias", K=400, n=2, d=4, lams={"W": 5e-3, "H": 5e-3}), id="ufm-solve"),
        pytest.param(lambda: softmax_code_search(3, 400, restarts=1), id="codes-softmax"),
        pytest.param(lambda: tammes_search(3, 400, restarts=1), id="codes-tammes"),
        pytest.param(lambda: simulate(400, 2, 2, 1.0), id="theory-simulate"),
    ],
)
def test_solvers_refuse_before_allocating(monkeypatch: pytest.MonkeyPatch, call) -> None:
    # probe rows 105, 108, 114 (ufm solve; codes softmax / tammes; theory simulate): allocator tracebacks
    monkeypatch.setenv("NCLAB_MAX_BYTES", "1M")  # K = 400: K^2 float64 alone is 1.2 MiB
    with pytest.raises(AllocationTooLarge) as err:
        call()
    msg = str(err.value)
    assert "K=400" in msg and "MiB" in msg and ("smaller" in msg or "fewer" in msg)


# probe row 105 (`nclab ufm solve -K 4 -n 1000000`): the estimate counted 24 copies of the variables, the
# L-BFGS-B workspace alone is 2 maxcor + 5 = 25 of them, so a solve estimated at 6.3 GB passed a 6.8 GB limit and
# died in scipy's allocator. The estimate must bound the measured peak, in both regimes: variables dominant
# (d K n >> K^2 n) and targets dominant (K^2 n >> d K n).
@pytest.mark.parametrize("solver", ["lbfgs", "central", "gd", "alternating"])
@pytest.mark.parametrize("K,n,d", [(4, 4000, 8), (120, 20, 2)], ids=["variables-dominant", "targets-dominant"])
def test_ufm_estimate_bounds_measured_peak(
    monkeypatch: pytest.MonkeyPatch, solver: str, K: int, n: int, d: int
) -> None:

    estimates: list[float] = []
    monkeypatch.setattr("nclab.ufm.solvers.check_allocation", lambda nbytes, **kw: estimates.append(nbytes))
    options = {"maxiter": 3} if solver in ("lbfgs", "central") else {"iters": 3} if solver == "gd" else {}
    tracemalloc.start()
    try:
        solve("mse-bias", K=K, n=n, d=d, lams={"W": 5e-3, "H": 5e-3}, solver=solver, theory=False, **options)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(estimates) == 1
    assert peak <= estimates[0] <= 4 * peak


def test_ufm_estimate_follows_maxcor(monkeypatch: pytest.MonkeyPatch) -> None:
    estimates: list[float] = []
    monkeypatch.setattr("nclab.ufm.solvers.check_allocation", lambda nbytes, **kw: estimates.append(nbytes))
    for maxcor in (10, 50):
        solve("mse-bias", K=3, n=2, d=4, lams={"W": 5e-3, "H": 5e-3}, theory=False, maxcor=maxcor, maxiter=2)
    variables = 4 * 3 * 2 + 3 * 4 + 3
    assert estimates[1] - estimates[0] == pytest.approx(8.0 * 2 * 40 * variables)  # 2 (50 - 10) more copies


@pytest.mark.parametrize("sentinel", [2**31 - 1, 2**63 - 1, 50_000])
def test_sentinel_label_named(sentinel: int) -> None:  # probe row 62
    y = np.repeat(np.arange(3), 5).astype(np.int64)
    y[4] = sentinel
    with pytest.raises(ValueError, match=f"label {sentinel} .1 sample.s.. looks like an ignore-index sentinel"):
        infer_num_classes(y)


def test_negative_sentinel_named() -> None:
    with pytest.raises(ValueError, match="-100, an ignore-index sentinel"):
        infer_num_classes(np.array([0, 1, 2, -100]))


def test_infer_num_classes_accepts_gaps() -> None:
    assert infer_num_classes(np.array([0, 5, 999])) == 1000  # below the 1000 floor: K is plausible
    assert infer_num_classes(np.array([1, 1])) == 2
    with pytest.raises(ValueError, match=r"relabel them to 0\.\.K-1"):
        infer_num_classes(np.arange(0, 60_000, 20))  # 3000 labels spread evenly over 60000: no outlier


def test_meta_batch_rejected_without_trace() -> None:  # probe row 19: the meta device stayed pinned
    s = ClassStats(3, 4)
    y = torch.tensor([0, 0, 1, 1, 2, 2])
    with pytest.raises(ValueError, match="'meta' device"):
        s.update(torch.empty(6, 4, device="meta"), y)
    assert s.device is None and s.N == 0
    H = np.arange(24, dtype=np.float64).reshape(6, 4)
    s.update(H, y.numpy())
    assert s.device == torch.device("cpu")
    np.testing.assert_allclose(s.means, H.reshape(3, 2, 4).mean(axis=1), rtol=1e-15)


def test_rejected_first_batch_pins_no_device() -> None:
    s = ClassStats(3, 2)
    with pytest.raises(ValueError, match="out of range"):
        s.update(np.ones((2, 2)), np.array([0, 7]))
    with pytest.raises(ValueError, match="NaN or inf"):
        s.update(np.array([[np.nan, 0.0]]), np.array([0]))
    assert s.device is None and s.N == 0


@pytest.mark.filterwarnings("ignore::nclab.metrics.TargetUnattainableWarning")
@pytest.mark.parametrize("d", [8, 60], ids=["d<K (Gram norm from d x d)", "d>=K (Gram norm from the tiles)"])
def test_etf_gram_error_tiled_matches_direct(monkeypatch: pytest.MonkeyPatch, d: int) -> None:
    """The K x K Gram is formed in row tiles for large K: same value as the one-block form."""
    rng = np.random.default_rng(44)
    M, W = rng.normal(size=(50, d)), rng.normal(size=(50, d))
    direct = (etf_gram_error(M), orthogonal_frame_error(M), self_duality(M, "gram", W=W))
    monkeypatch.setattr(mg, "_GRAM_TILE_ENTRIES", 7 * 50)  # 7 rows per tile
    tiled = (etf_gram_error(M), orthogonal_frame_error(M), self_duality(M, "gram", W=W))
    np.testing.assert_allclose(tiled, direct, rtol=1e-13)
    # and against the explicit formula
    V = M - M.mean(axis=0)
    G = V @ V.T
    T = (np.eye(50) - 1 / 50) / np.sqrt(49)
    assert direct[0] == pytest.approx(np.linalg.norm(G / np.linalg.norm(G) - T), rel=1e-13)


def test_collapse_report_full_refused_light_works(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(5)
    y = np.repeat(np.arange(3), 4)
    H = rng.normal(size=(12, 40)) + 3 * rng.normal(size=(3, 40))[y]
    full = ClassStats.from_arrays(H, y, 3)  # 12.5 KiB d x d scatter
    light = ClassStats.from_arrays(H, y, 3, track="light")
    monkeypatch.setenv("NCLAB_MAX_BYTES", "30K")  # the report needs ~4 d x d = 50 KiB
    with pytest.raises(AllocationTooLarge, match=r"d=40 .* track='light'"):
        collapse_report(full)
    assert collapse_report(light)["trace_ratio"] == pytest.approx(trace_ratio(full), rel=1e-12)


# probe row 44: a light collapse_report of K = 20,000 classes died allocating the 2.98 GiB K x K Gram of
# etf_gram_error. Every metric of a light report must now fit well under one K x K float64 matrix.
def test_light_report_of_many_classes_forms_no_k_by_k(monkeypatch: pytest.MonkeyPatch) -> None:
    K = 6000  # K x K float64: 288 MB; the tiles (a few temporaries of at most 32 MB) and the state stay below
    y = np.repeat(np.arange(K), 2)
    stats = ClassStats.from_arrays(np.random.default_rng(0).normal(size=(2 * K, 8)), y, K, track="light")
    tracemalloc.start()
    try:
        report = collapse_report(stats)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 * K * K
    # the value by the d x d identity: with centred means V, G = V V^T and T = (I - 11^T/K)/sqrt(K-1) of unit
    # norm, <G, T> = tr G / sqrt(K-1) (1^T G 1 = 0) and ||G||_F = ||V^T V||_F, so ||G/||G|| - T||^2 = 2 - 2 <G,T>/||G||
    V = stats.means - stats.means.mean(axis=0)
    inner = np.trace(V.T @ V) / np.sqrt(K - 1) / np.linalg.norm(V.T @ V)
    assert report["etf_gram_error"] == pytest.approx(np.sqrt(2 - 2 * inner), rel=1e-10)


# ------------------------------------------------------------------------------------------- nclab measure
def _measure(tmp_path, H: np.ndarray, y: np.ndarray, *extra: str):
    np.save(tmp_path / "h.npy", H)
    np.save(tmp_path / "y.npy", y)
    return CliRunner().invoke(app, ["measure", str(tmp_path / "h.npy"), str(tmp_path / "y.npy"), *extra])


def test_measure_sentinel_label_is_named(tmp_path) -> None:  # probe row 62
    y = np.repeat(np.arange(3), 4)
    y[0] = 2**31 - 1
    res = _measure(tmp_path, np.random.default_rng(0).normal(size=(12, 3)), y)
    assert res.exit_code == 2
    assert "2147483647" in res.output and "ignore-index sentinel" in res.output


def test_measure_wide_features_suggests_track_light(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:  # row 63
    monkeypatch.setenv("NCLAB_MAX_BYTES", "1M")
    d = 1000  # the d x d scatter: 7.6 MiB
    rng = np.random.default_rng(1)
    y = np.repeat(np.arange(3), 2)
    H = rng.normal(size=(6, d)) + 4 * rng.normal(size=(3, d))[y]
    res = _measure(tmp_path, H, y)
    assert res.exit_code == 2 and "--track light" in res.output and "7.63 MiB" in res.output
    res = _measure(tmp_path, H, y, "--track", "light", "--format", "json")
    assert res.exit_code == 0, res.output
    expected = ClassStats.from_arrays(H, y, 3, track="light")
    assert float(json.loads(res.stdout)["trace_ratio"]) == pytest.approx(trace_ratio(expected), rel=1e-12)


def test_measure_nan_bias_rejected_before_streaming(tmp_path) -> None:
    np.save(tmp_path / "w.npy", np.ones((3, 3)))
    np.save(tmp_path / "b.npy", np.array([0.0, np.nan, 1.0]))
    y = np.repeat(np.arange(3), 4)
    res = _measure(
        tmp_path,
        np.random.default_rng(2).normal(size=(12, 3)),
        y,
        "-w",
        str(tmp_path / "w.npy"),
        "-b",
        str(tmp_path / "b.npy"),
    )
    assert res.exit_code == 2 and "b contains NaN or inf" in res.output


def test_address_space_limit_bounds_available_memory() -> None:
    """Under ``ulimit -v`` (as the reliability probe ran), what the limit leaves is the bound, not the RAM."""
    import subprocess
    import sys

    code = "from nclab.memory import available_bytes; print(available_bytes())"
    limit_kib = 4_000_000
    out = subprocess.run(
        ["bash", "-c", f"ulimit -v {limit_kib} && {sys.executable} -c '{code}'"],
        capture_output=True,
        text=True,
        check=True,
    )
    left = int(out.stdout)
    assert 0 < left < limit_kib * 1024


def test_measure_unknown_track_names_the_flag(tmp_path) -> None:
    # --track is a plain string option: it is checked by its CLI name before any pass, not by ClassStats' keyword
    y = np.repeat(np.arange(3), 4)
    res = _measure(tmp_path, np.random.default_rng(0).normal(size=(12, 3)), y, "--track", "heavy")
    assert res.exit_code == 2
    assert "--track must be one of 'full', 'light', got 'heavy'" in res.output
    assert "Traceback" not in res.output
