"""ClassStats.all_reduce over torch.distributed (gloo, 2 processes on localhost)."""

import os

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from nclab.stats import ClassStats
from tests._distributed import free_port, gloo_group

pytestmark = pytest.mark.distributed

K, D = 5, 4


def _data():
    rng = np.random.default_rng(7)
    N = 240
    y = rng.integers(0, K - 1, N)  # classes 0..3 everywhere
    H = 1e4 * rng.normal(size=(K, D))[y] + rng.normal(size=(N, D))
    # class 4 lives on rank 1 only; class 3 appears on rank 0 only
    y[:120][y[:120] == 4] = 0
    y[120:][y[120:] == 3] = 2
    y[200:210] = 4
    H[200:210] = 1e4 + rng.normal(size=(10, D))
    return H, y


def _worker(rank, world, port, out_dir, track, compute_dtype):
    with gloo_group(rank, world, port):
        H, y = _data()
        part = slice(0, 120) if rank == 0 else slice(120, None)
        # float32 compute: the 120 rows are still pending in the Gram block buffer when all_reduce is called
        s = ClassStats.from_arrays(H[part], y[part], K=K, track=track, compute_dtype=compute_dtype)
        s.all_reduce()
        s.save(os.path.join(out_dir, f"rank{rank}.npz"))


@pytest.mark.parametrize(("track", "compute_dtype"), [("full", "float64"), ("light", "float64"), ("full", "float32")])
def test_all_reduce_equals_single_process(tmp_path, track, compute_dtype):
    H, y = _data()
    assert set(np.unique(y[:120])) != set(np.unique(y[120:]))  # class mix differs between ranks
    mp.spawn(_worker, args=(2, free_port(), str(tmp_path), track, compute_dtype), nprocs=2, join=True)
    ref = ClassStats.from_arrays(H, y, K=K, track=track)
    for rank in range(2):
        s = ClassStats.load(tmp_path / f"rank{rank}.npz")
        assert s.compute_dtype == compute_dtype
        if compute_dtype == "float32":  # float32 Gram: the documented ~sqrt(b) u bound, not float64 exactness
            np.testing.assert_allclose(s.means, ref.means, rtol=1e-12)
            sw = ref.sigma_w()
            assert np.linalg.norm(s.sigma_w() - sw) <= 1e-6 * np.linalg.norm(sw)
            continue
        np.testing.assert_array_equal(s.counts, ref.counts)
        np.testing.assert_allclose(s.means, ref.means, rtol=1e-12)
        np.testing.assert_allclose(s.class_ss, ref.class_ss, rtol=1e-10)
        np.testing.assert_allclose(s.unit_sums, ref.unit_sums, rtol=1e-12)
        if track == "full":
            np.testing.assert_allclose(s.sigma_w(), ref.sigma_w(), rtol=1e-10, atol=1e-12)
            np.testing.assert_allclose(s.sigma_t(), ref.sigma_t(), rtol=1e-10, atol=1e-12)


def test_all_reduce_without_process_group_is_a_clear_error():
    assert not dist.is_initialized()
    with pytest.raises(RuntimeError, match="process group"):
        ClassStats(2, 2).all_reduce()


def test_torch_state_stays_float64():
    s = ClassStats.from_arrays(torch.randn(10, 3, dtype=torch.float16).float(), torch.arange(10) % 2)
    assert s._state["sum_dev"].dtype == torch.float64
