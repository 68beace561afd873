"""ClassStats(compute_dtype="float32"): float32 Gram blocks of the shifted features, float64 accumulation."""

import numpy as np
import pytest
import torch

from nclab.stats import ClassStats
from tests.conftest import brute_stats


def _fro_rel(a, b):
    return np.linalg.norm(a - b) / np.linalg.norm(b)


def _stream(H, y, K, batch, **kwargs):
    s = ClassStats(K, H.shape[1], **kwargs)
    for i in range(0, len(y), batch):
        s.update(H[i : i + batch], y[i : i + batch])
    return s


def test_near_collapse_float32_compute_within_1e6(rng):
    """1e6 mu + 1e-3 noise (float64 features): the raw second moment is ~1e18 times the within-class scatter,
    yet the float32 Gram of the shifted rows keeps Sigma_W within 1e-6 (measured ~1e-7, docs/stats.md)."""
    K, d, N = 10, 64, 20_000
    mu = rng.normal(size=(K, d))
    y = rng.integers(0, K, N)
    H = 1e6 * mu[y] + 1e-3 * rng.normal(size=(N, d))
    ref = brute_stats(H, y, K)
    s = _stream(H, y, K, 1000, compute_dtype="float32")
    err = _fro_rel(s.sigma_w(), ref["sw"])
    assert err < 1e-6
    # the float32 rounding is real (the test would not notice a silent float64 path) ...
    assert err > 1e-10
    # ... and a float32 Gram of the unshifted features, the cancellation the shift avoids, is hopeless
    H32 = H.astype(np.float32)
    raw = (H32.T @ H32).astype(np.float64) - sum(
        ref["counts"][k] * np.outer(ref["means"][k], ref["means"][k]) for k in range(K)
    )
    assert _fro_rel(raw / N, ref["sw"]) > 1.0
    # the O(B d) sums stay float64: means and per-class sums of squares as exact as with float64 compute
    exact = _stream(H, y, K, 1000)
    np.testing.assert_array_equal(s.means, exact.means)
    np.testing.assert_array_equal(s.class_ss, exact.class_ss)


U32 = 2.0**-24


def _gamma(m):
    return m * U32 / (1 - m * U32)


def _bounds(s, ref):
    """The documented worst-case bounds of float32 compute (ClassStats docstring, docs/stats.md) for statistics
    ``s`` of the data whose exact statistics are ``ref``: on Sigma_W (Frobenius), on each class mean (norm), on
    each class_ss."""
    b, d = s.gram_block_rows(), s.d
    n = ref["counts"].astype(np.float64)
    shift = s.raw("shift")
    drift = n * ((shift - ref["means"]) ** 2).sum(axis=1)  # n_k ||s_k - mu_k||^2
    rho = drift.sum() / ref["ss"].sum()
    sw = 3 * _gamma(b + 2) * (1 + rho) * np.trace(ref["sw"])
    means = _gamma(b + 1) * np.sqrt(ref["ss"] / n + drift / n**2)
    ss = (_gamma(d + 3) + 2 * _gamma(b + 1)) * (ref["ss"] + drift)
    return sw, means, ss


@pytest.mark.parametrize("batch", [37, 1000, 5000])
def test_ordinary_float32_features_within_1e6(rng, batch):
    """float32 features of ordinary scale, batches smaller, near and larger than a Gram block: every statistic
    within its documented bound, and Sigma_W within 1e-6 (the O(B d) sums of float32 features run in float32
    on the shifted rows, so means and class_ss carry float32 rounding too, at the scale of the within-class
    spread)."""
    K, d, N = 7, 48, 12_000
    y = rng.integers(0, K, N)
    H = (rng.normal(size=(K, d))[y] + rng.normal(size=(N, d)) * rng.uniform(0.1, 3.0, d)).astype(np.float32)
    ref = brute_stats(H, y, K)
    s = _stream(torch.from_numpy(H), torch.from_numpy(y), K, batch, compute_dtype="float32")
    assert _fro_rel(s.sigma_w(), ref["sw"]) < 1e-6
    assert _fro_rel(s.sigma_t(), ref["st"]) < 1e-6
    sw_bound, mean_bound, ss_bound = _bounds(s, ref)
    assert np.linalg.norm(s.sigma_w() - ref["sw"]) <= sw_bound
    assert (np.linalg.norm(s.means - ref["means"], axis=1) <= mean_bound).all()
    assert (np.abs(s.class_ss - ref["ss"]) <= ss_bound).all()
    # the float32 rounding is real: the means differ from float64 compute's, by a few u of the spread
    exact = _stream(torch.from_numpy(H), torch.from_numpy(y), K, batch)
    err = np.abs(s.means - exact.means).max()
    assert 1e-12 < err < 1e-5


def test_float32_features_near_collapse_within_the_bound(rng):
    """float32 features near collapse (class means ~1e3, within-class spread 1e-2: the raw second moment is 1e10
    times the within-class scatter): the float32 O(B d) work on the shifted rows keeps Sigma_W, the means, the
    class sums of squares within their documented bounds, Sigma_W within 5e-6; the cosine metrics (float32 row
    norms) within a few u of float64 compute; the peer's float32 two-pass method loses Sigma_W."""
    from nclab.metrics import class_separation, within_class_cosine

    K, d, N = 10, 64, 20_000
    mu = rng.normal(size=(K, d))
    y = rng.integers(0, K, N)
    H = (1e3 * mu[y] + 1e-2 * rng.normal(size=(N, d))).astype(np.float32)
    ref = brute_stats(H, y, K)  # the exact statistics of these float32 numbers
    s = _stream(H, y, K, 1000, compute_dtype="float32")
    err = _fro_rel(s.sigma_w(), ref["sw"])
    # measured 1.7e-6, all of it the float32 Gram of the 2,000-row blocks (the same with the float64 O(B d)
    # passes of the previous code): the float32 sums of the shifted rows are exact here
    assert err < 5e-6
    assert err > 1e-10  # the float32 path ran (float64 compute is exact to ~1e-13 here)
    sw_bound, mean_bound, ss_bound = _bounds(s, ref)
    assert np.linalg.norm(s.sigma_w() - ref["sw"]) <= sw_bound
    assert (np.linalg.norm(s.means - ref["means"], axis=1) <= mean_bound).all()
    assert (np.abs(s.class_ss - ref["ss"]) <= ss_bound).all()
    exact = _stream(H, y, K, 1000)
    assert within_class_cosine(s) == pytest.approx(within_class_cosine(exact), abs=8 * U32)
    assert class_separation(s) == pytest.approx(class_separation(exact), abs=8 * U32)
    # the peer: class means in float32, then centred D^T D in float32
    H32, sums = H.astype(np.float32), np.zeros((K, d), np.float32)
    np.add.at(sums, y, H32)
    D = H32 - (sums / np.bincount(y, minlength=K)[:, None].astype(np.float32))[y]
    assert _fro_rel((D.T @ D).astype(np.float64) / N, ref["sw"]) > 1e-2


def test_float32_fast_path_edge_rows(rng):
    """Exact zero rows stay on the float32 path (no direction: zero unit vector); rows whose float32 squares
    would over- or underflow, and shifts that are not float32 numbers, take the float64 passes; a NaN is
    refused with no trace."""
    K, d = 3, 8
    H = (rng.normal(size=(600, d)) + 4.0).astype(np.float32)
    y = np.arange(600) % K
    H[5] = 0.0
    for scale in (1.0, 1e20, 1e-25):  # 1e20: squares overflow float32; 1e-25: they underflow
        Hs = (H * np.float32(scale)).astype(np.float32)
        ref = brute_stats(Hs, y, K)
        s = _stream(Hs, y, K, 200, compute_dtype="float32")
        assert _fro_rel(s.sigma_w(), ref["sw"]) < 1e-6
        np.testing.assert_allclose(s.means, ref["means"], rtol=1e-6)
        n = np.linalg.norm(Hs.astype(np.float64), axis=1, keepdims=True)
        U = np.stack([(Hs / np.where(n > 0, n, 1))[y == k].sum(0) for k in range(K)])
        np.testing.assert_allclose(s.unit_sums, U, rtol=1e-5, atol=1e-5)
    # a float64 batch first: its shifts are not float32 numbers, so the float32 batches take the float64 passes
    H64 = rng.normal(size=(300, d)) + 4.0
    s = ClassStats(K, d, compute_dtype="float32").update(H64, y[:300]).update(H[300:], y[300:])
    both = brute_stats(np.concatenate([H64, H[300:].astype(np.float64)]), y, K)
    assert _fro_rel(s.sigma_w(), both["sw"]) < 1e-6
    assert s._float32_shift() is None
    sd = s.state_dict()
    bad = H[:100].copy()
    bad[7, 2] = np.inf
    with pytest.raises(ValueError, match=r"NaN or inf \(first bad rows of this batch: \[7\]\)"):
        s.update(bad, y[:100])
    for k, v in s.state_dict()["state"].items():
        np.testing.assert_array_equal(v, sd["state"][k])


def test_block_coalescing_is_invisible_to_every_reader(rng):
    """Rows pending in the block buffer are in every result: accessors, copy, state_dict, drop_empty."""
    K, d = 3, 5
    H = rng.normal(size=(50, d))
    y = np.arange(50) % K
    ref = brute_stats(H, y, K)
    for cd in ("float32", "float64"):
        s = _stream(H, y, K, 7, compute_dtype=cd)  # 50 rows: far below one block, all pending
        tol = 1e-6 if cd == "float32" else 1e-12
        assert _fro_rel(s.copy().sigma_w(), ref["sw"]) < tol
        sd = s.state_dict()
        assert sd["compute_dtype"] == cd
        t = ClassStats(K, d, compute_dtype=cd).load_state_dict(sd)
        assert _fro_rel(t.sigma_w(), ref["sw"]) < tol
        assert _fro_rel(s.drop_empty().sigma_w(), ref["sw"]) < tol
        assert _fro_rel(s.sigma_w(), ref["sw"]) < tol
        # more rows after a read keep accumulating correctly
        s.update(H, y)
        both = brute_stats(np.concatenate([H, H]), np.concatenate([y, y]), K)
        assert _fro_rel(s.sigma_w(), both["sw"]) < tol


def test_merge_save_load_keep_compute_dtype(rng, tmp_path):
    K, d = 4, 6
    H = rng.normal(size=(400, d)) + 50.0
    y = rng.integers(0, K, 400)
    ref = brute_stats(H, y, K)
    a = ClassStats.from_arrays(H[:150], y[:150], K, compute_dtype="float32", batch_size=20)
    b = ClassStats.from_arrays(H[150:], y[150:], K, compute_dtype="float32", batch_size=20)
    merged = a + b
    assert merged.compute_dtype == "float32"
    assert _fro_rel(merged.sigma_w(), ref["sw"]) < 1e-6
    # statistics of either compute dtype combine (the state is float64 in both); self keeps its own
    c = ClassStats.from_arrays(H[150:], y[150:], K).merge(
        ClassStats.from_arrays(H[:150], y[:150], K, compute_dtype="float32")
    )
    assert c.compute_dtype == "float64"
    assert _fro_rel(c.sigma_w(), ref["sw"]) < 1e-6
    for suffix in (".npz", ".safetensors"):
        path = merged.save(tmp_path / f"s{suffix}")
        back = ClassStats.load(path)
        assert back.compute_dtype == "float32"
        np.testing.assert_array_equal(back.sigma_w(), merged.sigma_w())
    assert "compute_dtype='float32'" in repr(merged)


def test_float32_compute_after_reset_and_new_classes(rng):
    K, d = 3, 4
    s = ClassStats(K, d, compute_dtype="float32")
    s.update(rng.normal(size=(10, d)), np.arange(10) % K)
    s.reset()  # pending rows of the discarded state must not leak into the next one
    H = rng.normal(size=(30, d)) + 1e3
    y = np.arange(30) % K
    s.update(H, y)
    assert _fro_rel(s.sigma_w(), brute_stats(H, y, K)["sw"]) < 1e-6


def test_light_track_ignores_compute_dtype(rng):
    H = rng.normal(size=(90, 8))
    y = np.arange(90) % 3
    a = ClassStats.from_arrays(H, y, 3, track="light", compute_dtype="float32")
    b = ClassStats.from_arrays(H, y, 3, track="light")
    np.testing.assert_array_equal(a.class_ss, b.class_ss)
    np.testing.assert_array_equal(a.means, b.means)


def test_gram_block_rows_bounded():
    assert ClassStats(2, 512).gram_block_rows() == 4096
    assert ClassStats(2, 1024).gram_block_rows() == 2048
    assert ClassStats(2, 4096).gram_block_rows() == 512
    # light: the d x d scatter of d = 100,000 (80 GB) is refused before allocation; the block size depends on d only
    assert ClassStats(2, 100_000, track="light").gram_block_rows() == 256
    assert ClassStats(2, 3).gram_block_rows() == 4096


@pytest.mark.parametrize("bad", ["float16", "bfloat16", "double", None, torch.float32])
def test_bad_compute_dtype_names_the_keyword(bad):
    with pytest.raises(ValueError, match="compute_dtype must be 'float32' or 'float64'"):
        ClassStats(3, 4, compute_dtype=bad)
    with pytest.raises(ValueError, match="compute_dtype"):
        ClassStats.from_arrays(np.zeros((4, 2)), np.arange(4) % 2, compute_dtype=bad)
