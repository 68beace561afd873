"""ClassStats updates split between threads (lanes), and the optional unit sums (``unit_sums=False``)."""

import threading

import numpy as np
import pytest
import torch
from threadpoolctl import threadpool_info

from nclab.metrics import collapse_report
from nclab.stats import ClassMoments, ClassStats
from tests.conftest import brute_stats


@pytest.fixture
def threads():
    """Set torch's thread budget for one test (lanes follow it), restored after."""
    prev = torch.get_num_threads()
    yield torch.set_num_threads
    torch.set_num_threads(prev)


def _stream(H, y, K, batch, **kwargs):
    s = ClassStats(K, H.shape[1], **kwargs)
    for i in range(0, len(y), batch):
        s.update(H[i : i + batch], y[i : i + batch])
    return s


def _fro_rel(a, b):
    return np.linalg.norm(a - b) / np.linalg.norm(b)


def _unit_sums(H, y, K):
    H = np.asarray(H, dtype=np.float64)
    n = np.linalg.norm(H, axis=1, keepdims=True)
    U = np.where(n > 0, H / np.where(n > 0, n, 1.0), 0.0)
    return np.stack([U[y == k].sum(axis=0) for k in range(K)])


@pytest.mark.parametrize("lanes", [2, 3, 4])
def test_lanes_give_the_one_thread_statistics(rng, threads, lanes):
    """float64 compute: the rows of each batch split between 2-4 threads give the statistics of one thread up to
    rounding (each lane sums its rows in its own order); counts and shifts exactly."""
    K, d, N = 6, 40, 6000
    y = rng.integers(0, K, N)
    H = (5.0 * rng.normal(size=(K, d))[y] + rng.normal(size=(N, d))).astype(np.float32)
    threads(1)
    one = _stream(H, y, K, 1500)
    threads(lanes)
    many = _stream(H, y, K, 1500)
    assert len(one._lanes) == 1 and len(many._lanes) == lanes  # the batches really went through the lanes
    np.testing.assert_array_equal(many.counts, one.counts)
    np.testing.assert_array_equal(many.raw("shift"), one.raw("shift"))
    np.testing.assert_allclose(many.sigma_w(), one.sigma_w(), rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(many.means, one.means, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(many.class_ss, one.class_ss, rtol=1e-12)
    np.testing.assert_allclose(many.unit_sums, _unit_sums(H, y, K), rtol=1e-12, atol=1e-11)


def test_float32_lanes_stay_within_the_float32_bound(rng, threads):
    """float32 rows of the light track (no Gram) split between 3 lanes; the full track's go through one lane and
    Gram workers instead (tests/test_stats_gram_pipeline.py)."""
    K, d, N = 5, 64, 8000
    y = rng.integers(0, K, N)
    H = (3.0 * rng.normal(size=(K, d))[y] + rng.normal(size=(N, d))).astype(np.float32)
    ref = brute_stats(H, y, K)
    threads(3)
    s = _stream(H, y, K, 2000, compute_dtype="float32", track="light")
    assert len(s._lanes) == 3
    np.testing.assert_allclose(s.class_ss, ref["ss"], rtol=1e-6)
    np.testing.assert_allclose(s.means, ref["means"], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(s.unit_sums, _unit_sums(H, y, K), rtol=1e-5, atol=1e-4)
    full = _stream(H, y, K, 2000, compute_dtype="float32")
    assert len(full._lanes) == 1 and full._lanes[0].pipe is not None
    assert _fro_rel(full.sigma_w(), ref["sw"]) < 1e-6


def test_float64_lanes_form_every_gram_on_one_blas_thread_and_flush_in_parallel(rng, threads, monkeypatch):
    """float64 lanes coalesce their shares into blocks and form every block's Gram with the BLAS at one thread
    (set for the update); the rows the lanes still hold when the statistics are read are flushed by each lane on a
    thread of its own. The result is the one-thread result up to float64 rounding."""
    from contextlib import contextmanager

    import nclab.stats.class_stats as class_stats
    from nclab.stats._lanes import Lane

    single = {"on": False}
    calls, grams = [], []
    real_ctx, real_flush = class_stats.single_blas_thread, Lane.flush_gram

    @contextmanager
    def recording_ctx(active=True):
        calls.append(active)
        with real_ctx(active):
            prev, single["on"] = single["on"], active
            try:
                yield
            finally:
                single["on"] = prev

    def recording_flush(self, target):
        if self.pending and self.spec.full and self.parallel:
            grams.append((threading.get_ident(), single["on"], self.pending))
        real_flush(self, target)

    monkeypatch.setattr(class_stats, "single_blas_thread", recording_ctx)
    monkeypatch.setattr(Lane, "flush_gram", recording_flush)
    K, d, N = 7, 64, 21_000
    y = rng.integers(0, K, N)
    H = 4.0 * rng.normal(size=(K, d))[y] + rng.normal(size=(N, d))
    threads(2)
    s = _stream(H, y, K, 1000)
    assert len(s._lanes) == 2 and s.gram_block_rows() == 4096
    assert calls[:21] == [True] * 21  # every update of float64 lanes
    formed = grams[:]
    assert len(formed) == 4 and all(on and rows == 4096 for _, on, rows in formed)  # 2 lanes x 2 full blocks
    sw = s.sigma_w()
    flushed = grams[len(formed) :]
    assert len(flushed) == 2 and all(on for _, on, _ in flushed)  # both lanes' last blocks
    assert {rows for _, _, rows in flushed} == {10_500 - 8192} and len({t for t, _, _ in flushed}) == 2
    threads(1)
    one = _stream(H, y, K, 1000)
    ref = brute_stats(H, y, K)
    assert _fro_rel(sw, ref["sw"]) < 1e-12 and _fro_rel(sw, one.sigma_w()) < 1e-13
    np.testing.assert_array_equal(s.counts, one.counts)
    np.testing.assert_allclose(s.class_ss, one.class_ss, rtol=1e-12)


def test_lane_held_rows_reach_every_reader(rng, threads):
    """Rows still held by the lanes (pending Gram rows, float32 partial sums, the accumulators of lanes 1..)
    are in every result: state_dict, copy, merge, drop_empty, the raw moments."""
    K, d = 4, 12
    H = (rng.normal(size=(3000, d)) + 10.0).astype(np.float32)
    y = rng.integers(0, K, 3000)
    ref = brute_stats(H, y, K)
    threads(2)
    for cd, tol in (("float64", 1e-12), ("float32", 1e-6)):
        s = _stream(H, y, K, 1000, compute_dtype=cd)
        t = ClassStats(K, d, compute_dtype=cd).load_state_dict(s.state_dict())
        for other in (t, s.copy(), ClassStats(K, d).merge(s), s.drop_empty(), s):
            assert _fro_rel(other.sigma_w(), ref["sw"]) < tol
            np.testing.assert_allclose(other.means, ref["means"], rtol=tol)
        C = s.raw("scatter_dev")
        assert np.trace(C) == pytest.approx(s.raw("sq_dev").sum(), rel=tol)


def test_lanes_restore_the_blas_threads_and_reject_bad_batches_without_trace(rng, threads):
    K, d = 3, 16
    H = rng.normal(size=(1200, d)).astype(np.float32)
    y = np.arange(1200) % K
    threads(2)
    before = [(i["filepath"], i["num_threads"]) for i in threadpool_info() if i["user_api"] == "blas"]
    s = ClassStats(K, d).update(H, y)
    after = [(i["filepath"], i["num_threads"]) for i in threadpool_info() if i["user_api"] == "blas"]
    assert before == after
    sd = s.state_dict()
    bad = H.copy()
    bad[700, 3] = np.nan  # in the second lane's rows
    with pytest.raises(ValueError, match=r"NaN or inf \(first bad rows of this batch: \[700\]\)"):
        s.update(bad, y)
    for k, v in s.state_dict()["state"].items():
        np.testing.assert_array_equal(v, sd["state"][k])


def test_lane_count_follows_threads_rows_and_memory(threads):
    cpu = torch.device("cpu")
    threads(8)
    assert ClassStats(10, 64)._lane_count(10_000, cpu) == 4  # at most MAX_LANES
    assert ClassStats(10, 64)._lane_count(700, cpu) == 2  # one per 256 rows
    assert ClassStats(10, 64)._lane_count(300, cpu) == 1
    assert ClassStats(10, 4096)._lane_count(10_000, cpu) == 1  # a lane's d x d float64 scatter alone is 128 MB
    assert ClassStats(10, 4096, track="light")._lane_count(10_000, cpu) == 4
    threads(1)
    assert ClassStats(10, 64)._lane_count(10_000, cpu) == 1


# ---------------------------------------------------------------------- unit_sums=False
def test_without_unit_sums_the_rest_is_unchanged(rng):
    K, d, N = 4, 10, 800
    y = rng.permutation(np.arange(N) % K)  # balanced
    H = rng.normal(size=(K, d))[y] + rng.normal(size=(N, d))
    W = rng.normal(size=(K, d))
    a = ClassStats.from_arrays(H, y, K, batch_size=100)
    b = ClassStats.from_arrays(H, y, K, batch_size=100, unit_sums=False)
    assert "unit_sums" not in b.state_dict()["state"]
    np.testing.assert_array_equal(b.sigma_w(), a.sigma_w())
    np.testing.assert_array_equal(b.means, a.means)
    np.testing.assert_array_equal(b.class_ss, a.class_ss)
    ra, rb = collapse_report(a, W=W), collapse_report(b, W=W)
    assert set(ra) - set(rb) == {"within_class_cosine", "class_separation", "gnc3"}
    assert all(rb[k] == ra[k] for k in rb)
    assert collapse_report(ClassMoments(b)).keys() == collapse_report(b).keys()
    for read in (lambda: b.unit_sums, lambda: b.raw("unit_sums"), lambda: ClassMoments(b).unit_sums):
        with pytest.raises(ValueError, match=r"unit_sums=False.*build the statistics with unit_sums=True"):
            read()


def test_unit_sums_setting_is_part_of_the_configuration(rng, tmp_path):
    H = rng.normal(size=(60, 5))
    y = np.arange(60) % 3
    on = ClassStats.from_arrays(H, y, 3)
    off = ClassStats.from_arrays(H, y, 3, unit_sums=False)
    with pytest.raises(ValueError, match="incompatible ClassStats: unit_sums"):
        on.merge(off)
    with pytest.raises(ValueError, match="incompatible ClassStats: unit_sums"):
        off.merge(on)
    with pytest.raises(ValueError, match="unit_sums"):
        ClassStats(3, 5).load_state_dict(off.state_dict())
    with pytest.raises(ValueError, match="unit_sums"):
        ClassStats(3, 5, unit_sums=False).load_state_dict(on.state_dict())
    back = ClassStats.load(off.save(tmp_path / "off.npz"))
    assert back.unit_sums_kept is False
    np.testing.assert_array_equal(back.sigma_w(), off.sigma_w())
    assert ClassStats.load(on.save(tmp_path / "on.npz")).unit_sums_kept is True
    assert off.copy().unit_sums_kept is False and off.drop_empty().unit_sums_kept is False
    with pytest.raises(TypeError, match="unit_sums must be true or false"):
        ClassStats(3, 5, unit_sums="no")


def test_accelerator_paths_on_the_cpu(rng, monkeypatch):
    """The accelerator branches of an update -- counts without ``bincount``, the screen's one stacked device read,
    float32 partial sums flushed after every piece, the full-matrix ``addmm`` / float32 matmul Gram, 16M-entry
    work chunks, 4,096-row blocks, one lane -- taken on the CPU by replacing the one test that picks them: the
    statistics are those of the exact two-pass computation, and bad batches are refused the same way."""
    import nclab.stats._lanes as lanes
    import nclab.stats.class_stats as class_stats

    for module in (lanes, class_stats):  # the two modules that ask it
        monkeypatch.setattr(module, "accelerated", lambda device: True)
    K, d, N = 5, 24, 9000
    y = rng.integers(0, K, N)
    H32 = (4.0 * rng.normal(size=(K, d))[y] + rng.normal(size=(N, d))).astype(np.float32)
    for H in (H32, H32.astype(np.float64)):
        ref = brute_stats(H, y, K)
        for cd, tol in (("float64", 1e-12), ("float32", 1e-6)):
            s = _stream(torch.from_numpy(H), torch.from_numpy(y), K, 2500, compute_dtype=cd)
            assert s.gram_block_rows() == 4096 and len(s._lanes) == 1
            assert _fro_rel(s.sigma_w(), ref["sw"]) < tol
            np.testing.assert_allclose(s.means, ref["means"], rtol=tol, atol=tol)
            np.testing.assert_allclose(s.class_ss, ref["ss"], rtol=tol)
            np.testing.assert_allclose(s.unit_sums, _unit_sums(H, y, K), rtol=1e-5, atol=1e-5)
            np.testing.assert_array_equal(s.counts, ref["counts"])
    bad = H32[:100].copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match=r"NaN or inf \(first bad rows of this batch: \[3\]\)"):
        ClassStats(K, d, compute_dtype="float32").update(bad, y[:100])
    with pytest.raises(ValueError, match=r"label 7 is out of range \[0, 5\)"):
        ClassStats(K, d).update(H32[:3], np.array([0, 7, 1]))
