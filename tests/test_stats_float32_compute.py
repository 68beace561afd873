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


@pytest.mark.parametrize("batch", [37, 1000, 5000])
def test_ordinary_float32_features_within_1e6(rng, batch):
    """float32 features of ordinary scale, batches smaller, near and larger than a Gram block."""
    K, d, N = 7, 48, 12_000
    y = rng.integers(0, K, N)
    H = (rng.normal(size=(K, d))[y] + rng.normal(size=(N, d)) * rng.uniform(0.1, 3.0, d)).astype(np.float32)
    ref = brute_stats(H, y, K)
    s = _stream(torch.from_numpy(H), torch.from_numpy(y), K, batch, compute_dtype="float32")
    assert _fro_rel(s.sigma_w(), ref["sw"]) < 1e-6
    assert _fro_rel(s.sigma_t(), ref["st"]) < 1e-6
    np.testing.assert_allclose(s.means, ref["means"], rtol=1e-12, atol=1e-12)


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
    assert ClassStats(2, 512).gram_block_rows() == 2048
    assert ClassStats(2, 4096).gram_block_rows() == 512
    # light: a full-track d = 100,000 state (74.5 GiB scatter) is refused before allocation; the rule depends on d only
    assert ClassStats(2, 100_000, track="light").gram_block_rows() == 256
    assert ClassStats(2, 3).gram_block_rows() == 2048


@pytest.mark.parametrize("bad", ["float16", "bfloat16", "double", None, torch.float32])
def test_bad_compute_dtype_names_the_keyword(bad):
    with pytest.raises(ValueError, match="compute_dtype must be 'float32' or 'float64'"):
        ClassStats(3, 4, compute_dtype=bad)
    with pytest.raises(ValueError, match="compute_dtype"):
        ClassStats.from_arrays(np.zeros((4, 2)), np.arange(4) % 2, compute_dtype=bad)
