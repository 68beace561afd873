"""PairedClassStats persistence (state_dict, .npz / .safetensors) and all_reduce (gloo, 2 processes)."""

import os

import numpy as np
import pytest
import torch.multiprocessing as mp

from nclab.stats import ClassStats, PairedClassStats
from tests._distributed import free_port, gloo_group

K, D = 5, 4


def _data():
    """Nearly collapsed paired features far from the origin; class 4 only in the second half, class 3 only in the
    first (so the two ranks of the all_reduce test see different classes)."""
    rng = np.random.default_rng(11)
    N = 200
    y = rng.integers(0, K - 1, N)
    y[:100][y[:100] == 4] = 0
    y[100:][y[100:] == 3] = 2
    y[150:160] = 4
    H0 = 1e5 + rng.normal(size=(K, D))[y] + 1e-3 * rng.normal(size=(N, D))
    H1 = -2e5 + 3 * rng.normal(size=(K, D))[y] + 1e-3 * rng.normal(size=(N, D))
    return H0, H1, y


def _assert_same(a: PairedClassStats, b: PairedClassStats, rtol: float = 1e-12) -> None:
    np.testing.assert_array_equal(a.counts, b.counts)
    np.testing.assert_allclose(a.cross_within(), b.cross_within(), rtol=rtol, atol=1e-18)
    assert a.coupling_cost() == pytest.approx(b.coupling_cost(), rel=rtol)
    for end in ("start", "end"):
        np.testing.assert_allclose(getattr(a, end).means, getattr(b, end).means, rtol=1e-15)
        np.testing.assert_allclose(getattr(a, end).class_ss, getattr(b, end).class_ss, rtol=rtol)


@pytest.mark.parametrize("suffix", [".npz", ".safetensors"])
def test_save_load_roundtrip_is_exact_and_updates_continue(tmp_path, suffix):
    H0, H1, y = _data()
    p = PairedClassStats.from_arrays(H0[:120], H1[:120], y[:120], K=K)
    q = PairedClassStats.load(p.save(tmp_path / f"paired{suffix}"))
    assert q.state_dict()["state"].keys() == p.state_dict()["state"].keys()
    for k, v in p.state_dict()["state"].items():
        np.testing.assert_array_equal(q.state_dict()["state"][k], v)
    # both continue identically (shifts restored, the class first seen later gets its own shift)
    p.update(H0[120:], H1[120:], y[120:])
    q.update(H0[120:], H1[120:], y[120:])
    _assert_same(p, q, rtol=0)
    _assert_same(q, PairedClassStats.from_arrays(H0, H1, y, K=K), rtol=1e-9)


def test_empty_stats_roundtrip_and_bad_files(tmp_path):
    e = PairedClassStats.load(PairedClassStats(K, D).save(tmp_path / "empty.npz"))
    assert e.N == 0 and np.all(e.cross_within() == 0)
    ClassStats(K, D).save(tmp_path / "cs.npz")
    with pytest.raises(ValueError, match="not an nclab PairedClassStats file"):
        PairedClassStats.load(tmp_path / "cs.npz")


def test_load_state_dict_validates_before_changing_anything():
    H0, H1, y = _data()
    p = PairedClassStats.from_arrays(H0, H1, y, K=K)
    before = p.cross_within().copy()
    sd = p.state_dict()
    bad = {**sd, "state": {**sd["state"], "cross": np.zeros(K + 1)}}
    with pytest.raises(ValueError, match="'cross' has shape"):
        p.load_state_dict(bad)
    with pytest.raises(ValueError, match="format_version"):
        p.load_state_dict({**sd, "format_version": 99})
    with pytest.raises(ValueError, match="state has d=4, these PairedClassStats have d=5"):
        PairedClassStats(K, D + 1).load_state_dict(sd)
    np.testing.assert_array_equal(p.cross_within(), before)


def _worker(rank, world, port, out_dir):
    with gloo_group(rank, world, port):
        H0, H1, y = _data()
        part = slice(0, 100) if rank == 0 else slice(100, None)
        p = PairedClassStats.from_arrays(H0[part], H1[part], y[part], K=K)
        p.all_reduce()
        p.save(os.path.join(out_dir, f"rank{rank}.npz"))


@pytest.mark.distributed
def test_all_reduce_equals_single_process(tmp_path):
    H0, H1, y = _data()
    assert set(np.unique(y[:100])) != set(np.unique(y[100:]))
    mp.spawn(_worker, args=(2, free_port(), str(tmp_path)), nprocs=2, join=True)
    ref = PairedClassStats.from_arrays(H0, H1, y, K=K)
    for rank in range(2):
        _assert_same(PairedClassStats.load(tmp_path / f"rank{rank}.npz"), ref, rtol=1e-9)


def test_all_reduce_without_process_group_is_a_clear_error():
    with pytest.raises(RuntimeError, match="process group"):
        PairedClassStats(K, D).all_reduce()


def test_malformed_states_and_float_labels_are_clear_errors():
    from nclab.theory.geodesic import geodesic_profile

    H0, H1, y = _data()
    sd = PairedClassStats.from_arrays(H0, H1, y, K=K).state_dict()
    with pytest.raises(ValueError, match="missing the ClassStats state of end"):
        PairedClassStats(K, D).load_state_dict({k: v for k, v in sd.items() if k != "end"})
    with pytest.raises(TypeError, match="integer dtype"):
        geodesic_profile([H0, H1], y.astype(float), K)


def test_cross_within_far_from_the_origin_with_classes_first_seen_late():
    """Features at 1e6 from the origin with unit within-class spread, classes first appearing in the second and third
    batches: the per-class shifts (taken from each class's first batch) keep the cross sums exact; sums about the
    origin would lose ~1e-16 * (1e6)^2 = 1e-4 absolute per term. Reference: per-class loops on mean-subtracted data."""
    rng = np.random.default_rng(11)
    K, d = 3, 4
    batches = [np.zeros(5, int), np.array([0, 1, 1, 0, 1, 1]), np.array([2, 1, 0, 2, 2, 1, 2])]
    centre0, centre1 = 1e6 + rng.normal(size=(K, d)), -1e6 + rng.normal(size=(K, d))
    H0s = [centre0[b] + rng.normal(size=(b.size, d)) for b in batches]
    H1s = [
        centre1[b] + 0.5 * H0 - 0.5 * centre0[b] + rng.normal(size=(b.size, d))
        for b, H0 in zip(batches, H0s, strict=True)
    ]
    p = PairedClassStats(K, d)
    for H0, H1, b in zip(H0s, H1s, batches, strict=True):
        p.update(H0, H1, b)
    y, H0, H1 = np.concatenate(batches), np.concatenate(H0s), np.concatenate(H1s)
    ref = np.array(
        [float(np.sum((H0[y == k] - H0[y == k].mean(0)) * (H1[y == k] - H1[y == k].mean(0)))) for k in range(K)]
    )
    assert np.all(ref > 1.0)  # a positive coupling of order n_k * d / 2, far above the 1e-4 roundoff
    np.testing.assert_allclose(p.cross_within(), ref, rtol=1e-9)
