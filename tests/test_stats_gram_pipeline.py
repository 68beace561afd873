"""The float32 block Grams of ClassStats formed on worker threads (``nclab.stats._gram_pipeline``)."""

import threading
import time

import numpy as np
import pytest
import torch
from threadpoolctl import threadpool_info, threadpool_limits

import nclab.stats._gram_pipeline as gp
from nclab.stats import ClassStats
from nclab.stats._gram_pipeline import GramPipeline
from tests.conftest import brute_stats

STATE = ("counts", "shift", "sum_dev", "sq_dev", "unit_sums", "scatter_dev")


@pytest.fixture
def threads():
    """Set torch's thread budget for one test (the Gram workers follow it), restored after."""
    prev = torch.get_num_threads()
    yield torch.set_num_threads
    torch.set_num_threads(prev)


def _blas():
    """numpy's and scipy's BLAS (the products run on numpy's), not another library's a test module loaded."""
    libs = [i for i in threadpool_info() if i["user_api"] == "blas"]
    return [(i["filepath"], i["num_threads"]) for i in libs if "numpy" in i["filepath"] or "scipy" in i["filepath"]]


def _stream(H, y, K, batch, **kwargs):
    s = ClassStats(K, H.shape[1], compute_dtype="float32", **kwargs)
    for i in range(0, len(y), batch):
        s.update(H[i : i + batch], y[i : i + batch])
    return s


def _one_thread(H, y, K, batch, threads):
    """The reference: one torch thread (no pipeline), the BLAS at one thread too."""
    threads(1)
    with threadpool_limits(1, user_api="blas"):
        s = _stream(H, y, K, batch)
        s.raw("scatter_dev")  # flushed here, under the limit
    assert s._lanes[0].pipe is None
    return s


def _data(rng, K=7, d=64, N=21_000):
    y = rng.integers(0, K, N)
    H = (4.0 * rng.normal(size=(K, d))[y] + rng.normal(size=(N, d))).astype(np.float32)
    return H, y


@pytest.mark.parametrize(("n_threads", "batch"), [(2, 1000), (2, 333), (3, 5000), (4, 4096)])
def test_several_threads_give_the_one_thread_statistics_bit_for_bit(rng, threads, n_threads, batch):
    """One lane does the passes, ``n_threads - 1`` workers form the block Grams, the products are added in block
    order: every accumulator equals the one-thread run's exactly, and the float32 bound against brute force."""
    K = 7
    H, y = _data(rng, K)
    one = _one_thread(H, y, K, batch, threads)
    threads(n_threads)
    many = _stream(H, y, K, batch)
    assert len(many._lanes) == 1 and many._lanes[0].pipe is not None
    assert many._lanes[0].pipe.workers == n_threads - 1
    for name in STATE:
        np.testing.assert_array_equal(many.raw(name), one.raw(name), err_msg=name)
    ref = brute_stats(H, y, K)
    sw = many.moments().sigma_w()
    assert np.linalg.norm(sw - ref["sw"]) / np.linalg.norm(ref["sw"]) < 1e-6


def test_products_are_added_in_block_order_whatever_the_schedule(rng, threads, monkeypatch):
    """A worker slowed on every third block: the calling thread forms waiting blocks itself (both threads form
    products, some out of order), every product begins with the BLAS at one thread, and the sums are still the
    one-thread run's bit for bit."""
    K = 7
    H, y = _data(rng, K, N=40_000)
    one = _one_thread(H, y, K, 1000, threads)
    log, current = [], threading.local()
    real_run, real_product = GramPipeline._run, gp.gram_product

    def run(self, job):
        worker = threading.current_thread() is not threading.main_thread()
        if worker and job.seq % 3 == 0:
            time.sleep(0.03)  # between taking the job and beginning its product: the caller's update may end here
        current.seq = job.seq
        real_run(self, job)

    def product(block, gram, parallel=False):
        worker = threading.current_thread() is not threading.main_thread()
        log.append((current.seq, worker, max(n for _, n in _blas())))  # the BLAS as the product begins
        return real_product(block, gram, parallel)

    monkeypatch.setattr(GramPipeline, "_run", run)
    monkeypatch.setattr(gp, "gram_product", product)
    threads(2)
    many = ClassStats(K, H.shape[1], compute_dtype="float32")
    for i in range(0, len(y), 1000):
        many.update(H[i : i + 1000], y[i : i + 1000])
        time.sleep(0.002)  # the caller's own work between updates: slowed products begin outside its updates
    for name in STATE:
        np.testing.assert_array_equal(many.raw(name), one.raw(name), err_msg=name)
    assert sorted(seq for seq, _, _ in log) == list(range(len(log))) and len(log) >= 10  # each block formed once
    assert {worker for _, worker, _ in log} == {True, False}
    assert all(n == 1 for _, _, n in log)


def test_the_blas_settings_are_the_callers_between_updates(rng, threads):
    """Between updates the BLAS is the caller's unless workers may be forming products (then one thread: a
    product begun with more would round differently); a read leaves nothing in flight and the caller's setting
    back, set back by the calling thread (a worker cannot restore what the calling thread set)."""
    K = 5
    H, y = _data(rng, K, d=48, N=12_000)
    threads(2)
    with threadpool_limits(2, user_api="blas"):
        before = _blas()
        s = ClassStats(K, 48, compute_dtype="float32")
        for i in range(0, len(y), 1000):
            s.update(H[i : i + 1000], y[i : i + 1000])
            assert _blas() == before or s._lanes[0].pipe._held is not None
        s.moments().sigma_w()
        assert _blas() == before and not s._lanes[0].pipe.busy and s._lanes[0].pipe._held is None


def test_pipeline_adds_float32_products_in_submission_order(rng):
    """The pipeline alone: blocks of 1-256 rows, products added into two targets in submission order, equal to
    the sequential sums of the same float32 products; no submission outside a session."""
    d = 32
    targets = [torch.zeros((d, d), dtype=torch.float64) for _ in range(2)]
    expected = [np.zeros((d, d)) for _ in range(2)]
    pipe = GramPipeline(workers=1, slots=4)
    buf = torch.empty((256, d), dtype=torch.float32)
    with threadpool_limits(1, user_api="blas"), pipe.session():
        for i, rows in enumerate([100, 37, 256, 1, 64] * 5):
            block = rng.normal(size=(rows, d)).astype(np.float32)
            buf[:rows] = torch.from_numpy(block)
            buf = pipe.submit(buf, rows, targets[i % 2])
            expected[i % 2] += np.matmul(block.T, block)
    pipe.drain()
    for t, e in zip(targets, expected, strict=True):
        np.testing.assert_array_equal(t.numpy(), e)
    assert not pipe.busy and pipe._buffers <= 4
    with pytest.raises(RuntimeError, match="outside a session"):
        pipe.submit(buf, 1, targets[0])
    with pytest.raises(ValueError, match="workers must be in"):
        GramPipeline(workers=0, slots=4)


def test_a_failed_product_is_raised_in_the_calling_thread(rng, threads, monkeypatch):
    def boom(*args, **kwargs):
        raise MemoryError("no memory for the product")

    monkeypatch.setattr(gp, "gram_product", boom)
    H, y = _data(rng, 5, d=16, N=9000)
    threads(2)
    s = ClassStats(5, 16, compute_dtype="float32")
    with pytest.raises(RuntimeError, match="forming a block's Gram failed, so these statistics lack") as info:
        for i in range(0, len(y), 1000):  # at the next queued block, or at the read
            s.update(H[i : i + 1000], y[i : i + 1000])
        s.raw("scatter_dev")
    assert isinstance(info.value.__cause__, MemoryError)
    for read in (lambda: s.raw("scatter_dev"), lambda: s.moments().sigma_w(), s.state_dict):
        with pytest.raises(RuntimeError, match="reset or reload them"):  # never a number without those rows
            read()
    monkeypatch.undo()
    threads(2)
    s.reset()
    for i in range(0, len(y), 1000):
        s.update(H[i : i + 1000], y[i : i + 1000])
    np.testing.assert_array_equal(s.raw("scatter_dev"), _stream(H, y, 5, 1000).raw("scatter_dev"))


def test_state_replaced_while_products_are_in_flight(rng, threads, monkeypatch):
    """``reset`` and ``load_state_dict`` with blocks still queued or being formed: the old rows never reach the
    new state, which then streams exactly as a fresh one."""
    real = GramPipeline._run

    def slow(self, job):
        time.sleep(0.01)
        real(self, job)

    monkeypatch.setattr(GramPipeline, "_run", slow)
    K = 5
    H, y = _data(rng, K, d=32, N=20_000)
    G, z = _data(rng, K, d=32, N=9000)
    fresh = _one_thread(G, z, K, 1000, threads)
    threads(2)
    s = _stream(H, y, K, 1000)
    s.reset()
    for i in range(0, len(z), 1000):
        s.update(G[i : i + 1000], z[i : i + 1000])
    t = _stream(H, y, K, 1000).load_state_dict(s.state_dict())
    for name in STATE:
        np.testing.assert_array_equal(s.raw(name), fresh.raw(name), err_msg=name)
        np.testing.assert_array_equal(t.raw(name), fresh.raw(name), err_msg=name)


def test_float64_batches_between_float32_ones(rng, threads):
    """A float64 batch (float64 passes and Gram, on two lanes) after queued float32 blocks: the queued products
    are added first, nothing races on the scatter; the float32 bound against the exact statistics."""
    K = 6
    H, y = _data(rng, K, d=40, N=12_000)
    ref = brute_stats(H.astype(np.float64), y, K)
    threads(2)
    s = ClassStats(K, 40, compute_dtype="float32")
    for i in range(0, len(y), 1500):
        rows = H[i : i + 1500]
        s.update(rows.astype(np.float64) if (i // 1500) % 3 == 2 else rows, y[i : i + 1500])
    assert np.linalg.norm(s.moments().sigma_w() - ref["sw"]) / np.linalg.norm(ref["sw"]) < 1e-6
    np.testing.assert_array_equal(s.counts, ref["counts"])


def test_gram_workers_follow_threads_track_and_width(rng, threads):
    cpu = torch.device("cpu")
    assert ClassStats(10, 512)._gram_workers(cpu, 2) == 1
    assert ClassStats(10, 512)._gram_workers(cpu, 8) == 3  # at most MAX_LANES - 1
    assert ClassStats(10, 512)._gram_workers(cpu, 1) == 0
    assert ClassStats(10, 512, track="light")._gram_workers(cpu, 4) == 0  # no Gram
    # wider, one thread forms its blocks with scipy's ssyrk: workers (numpy's product) would round differently
    assert ClassStats(10, 513)._gram_workers(cpu, 2) == 0
    H, y = _data(rng, 3, d=640, N=3000)
    threads(2)
    s = _stream(H, y, 3, 1000)
    assert len(s._lanes) == 2 and s._lanes[0].pipe is None  # the lanes, as before
    ref = brute_stats(H, y, 3)  # float32 blocks of 3,276 rows: measured 2e-6 here
    assert np.linalg.norm(s.moments().sigma_w() - ref["sw"]) / np.linalg.norm(ref["sw"]) < 1e-5


def test_an_interrupt_while_waiting_for_a_buffer_loses_nothing(rng, threads, monkeypatch):
    """Ctrl-C while the calling thread waits for a free block buffer: the queued block is the job's alone (the lane
    takes a new buffer), so the sums stay consistent -- trace(C) = sum of ||z||^2 over the same rows -- and
    streaming goes on."""
    real = GramPipeline._buffer_like
    fired = []

    def interrupted(self, block):
        if not fired:
            fired.append(1)
            raise KeyboardInterrupt
        return real(self, block)

    monkeypatch.setattr(GramPipeline, "_buffer_like", interrupted)
    K = 5
    H, y = _data(rng, K, d=48, N=30_000)
    threads(2)
    s = ClassStats(K, 48, compute_dtype="float32")
    for i in range(0, len(y), 1000):
        try:
            s.update(H[i : i + 1000], y[i : i + 1000])
        except KeyboardInterrupt:
            pass
    assert fired
    C, q = s.raw("scatter_dev"), s.raw("sq_dev")
    assert np.trace(C) == pytest.approx(q.sum(), rel=1e-6)


def test_an_interrupt_during_a_product_is_raised_and_poisons_until_reset(rng, threads, monkeypatch):
    """Ctrl-C in the calling thread while it forms a waiting block's Gram: the interrupt propagates, the job is
    finished (nothing hangs), every later read raises (its product may be missing), and ``reset`` recovers."""
    fired = []

    def product(block, gram, parallel=False, real=gp.gram_product):
        if not fired and threading.current_thread() is threading.main_thread():
            fired.append(1)
            raise KeyboardInterrupt
        return real(block, gram, parallel)

    def slow_run(self, job, real=GramPipeline._run):
        if threading.current_thread() is not threading.main_thread():
            time.sleep(0.02)  # the calling thread falls two blocks ahead and forms one itself
        real(self, job)

    monkeypatch.setattr(gp, "gram_product", product)
    monkeypatch.setattr(GramPipeline, "_run", slow_run)
    K = 5
    H, y = _data(rng, K, d=32, N=30_000)
    threads(2)
    s = ClassStats(K, 32, compute_dtype="float32")
    with pytest.raises(KeyboardInterrupt):
        for i in range(0, len(y), 1000):
            s.update(H[i : i + 1000], y[i : i + 1000])
    with pytest.raises(RuntimeError, match="reset or reload them"):
        s.raw("scatter_dev")
    with pytest.raises(RuntimeError, match="reset or reload them"):
        s.update(H[:1000], y[:1000])
    s.reset()
    for i in range(0, len(y), 1000):
        s.update(H[i : i + 1000], y[i : i + 1000])
    monkeypatch.undo()
    np.testing.assert_array_equal(s.raw("scatter_dev"), _one_thread(H, y, K, 1000, threads).raw("scatter_dev"))


def test_pickle_and_deepcopy_with_products_in_flight(rng, threads, monkeypatch):
    """A copy made while blocks are queued holds every row (the queued products are added first) and no threads;
    the copy and the original then stream the same rows to the same statistics, bit for bit."""
    import copy
    import pickle

    real = GramPipeline._run

    def slow(self, job):
        time.sleep(0.01)
        real(self, job)

    monkeypatch.setattr(GramPipeline, "_run", slow)
    K = 5
    H, y = _data(rng, K, d=32, N=20_000)
    threads(2)
    a = _stream(H[:12_000], y[:12_000], K, 1000)
    for b in (pickle.loads(pickle.dumps(a)), copy.deepcopy(a)):
        assert b._lanes[0].pipe is None
        for s in (a, b):
            for i in range(12_000, len(y), 1000):
                s.update(H[i : i + 1000], y[i : i + 1000])
        assert b._lanes[0].pipe is not None
        for name in STATE:
            np.testing.assert_array_equal(b.raw(name), a.raw(name), err_msg=name)
        a = _stream(H[:12_000], y[:12_000], K, 1000)
