"""ClassStats: exactness against a two-pass reference, stability, merge, persistence, validation."""

from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from nclab.stats import ClassMoments, ClassStats, EmptyClassError, MomentKey, PairedClassStats
from tests.conftest import brute_stats


def _rel(a, b):
    return np.abs(a - b).max() / max(np.abs(b).max(), 1e-300)


def _data(rng, N=300, K=4, d=6, scale=1.0, spread=1.0, imbalanced=False):
    mu = rng.normal(size=(K, d)) * scale
    if imbalanced:
        p = np.arange(1, K + 1) / np.arange(1, K + 1).sum()
        y = rng.choice(K, size=N, p=p)
    else:
        y = np.arange(N) % K
    rng.shuffle(y)
    H = mu[y] + spread * rng.normal(size=(N, d))
    return H, y


def test_matches_two_pass_reference_in_batches(rng):
    H, y = _data(rng, imbalanced=True)
    K = 4
    ref = brute_stats(H, y, K)
    s = ClassStats(K, H.shape[1])
    for i in range(0, len(y), 41):
        s.update(H[i : i + 41], y[i : i + 41])
    np.testing.assert_array_equal(s.counts, ref["counts"])
    np.testing.assert_allclose(s.means, ref["means"], rtol=1e-12)
    np.testing.assert_allclose(s.sigma_w(), ref["sw"], rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(s.sigma_b("balanced"), ref["sb_bal"], rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(s.sigma_b("empirical"), ref["sb_emp"], rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(s.sigma_t(), ref["st"], rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(s.class_ss, ref["ss"], rtol=1e-10)
    assert s.trace_w() == pytest.approx(np.trace(ref["sw"]), rel=1e-12)
    assert s.trace_b("empirical") == pytest.approx(np.trace(ref["sb_emp"]), rel=1e-12)
    assert s.trace_b() == pytest.approx(np.trace(ref["sb_bal"]), rel=1e-12)
    M = ref["means"] - ref["means"].mean(0)
    np.testing.assert_allclose(s.mean_gram(), M @ M.T, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(s.mean_gram(center=False), ref["means"] @ ref["means"].T, rtol=1e-12)
    U = np.stack([(H[y == k] / np.linalg.norm(H[y == k], axis=1, keepdims=True)).sum(0) for k in range(K)])
    np.testing.assert_allclose(s.unit_sums, U, rtol=1e-12)


def test_total_decomposition_exact_on_imbalanced_data(rng):
    H, y = _data(rng, N=500, imbalanced=True)
    s = ClassStats.from_arrays(H, y)
    ref = brute_stats(H, y, 4)
    # Sigma_T = Sigma_W + Sigma_B holds exactly with empirical weighting, and not with balanced weighting
    np.testing.assert_allclose(s.sigma_w() + s.sigma_b("empirical"), ref["st"], rtol=1e-11, atol=1e-14)
    assert _rel(s.sigma_w() + s.sigma_b("balanced"), ref["st"]) > 1e-3


def test_stable_for_nearly_collapsed_features(rng):
    # features = 1e6 * mu_k + 1e-3 * noise: sigma_w within 1e-6 relative of exact two-pass float64
    K, d, N = 10, 16, 2000
    mu = rng.normal(size=(K, d))
    y = rng.integers(0, K, N)
    H = 1e6 * mu[y] + 1e-3 * rng.normal(size=(N, d))
    ref = brute_stats(H, y, K)
    s = ClassStats(K, d)
    for i in range(0, N, 128):
        s.update(H[i : i + 128], y[i : i + 128])
    assert _rel(s.sigma_w(), ref["sw"]) < 1e-6
    assert _rel(s.class_ss, ref["ss"]) < 1e-6
    # the naive raw-moment computation fails this badly: the test is not vacuous
    raw = H.T @ H - sum(ref["counts"][k] * np.outer(ref["means"][k], ref["means"][k]) for k in range(K))
    assert _rel(raw / N, ref["sw"]) > 1.0
    # merged halves and light mode keep the same accuracy
    a = ClassStats.from_arrays(H[:700], y[:700], K).merge(ClassStats.from_arrays(H[700:], y[700:], K))
    assert _rel(a.sigma_w(), ref["sw"]) < 1e-6
    light = ClassStats.from_arrays(H, y, K, track="light")
    assert _rel(light.class_ss, ref["ss"]) < 1e-6


@settings(max_examples=30, deadline=None)
@given(cut=st.integers(0, 60), seed=st.integers(0, 2**16), K=st.integers(2, 5))
def test_merge_is_exact_for_any_split(cut, seed, K):
    r = np.random.default_rng(seed)
    H, y = _data(r, N=60, K=K, d=3, scale=50.0)
    full = ClassStats.from_arrays(H, y, K)
    a = ClassStats.from_arrays(H[:cut], y[:cut], K)
    b = ClassStats.from_arrays(H[cut:], y[cut:], K)
    merged = a + b
    np.testing.assert_array_equal(merged.counts, full.counts)
    np.testing.assert_allclose(merged.means, full.means, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(merged.sigma_w(), full.sigma_w(), rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(merged.class_ss, full.class_ss, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(merged.unit_sums, full.unit_sums, rtol=1e-12, atol=1e-12)
    # a + b leaves a untouched
    np.testing.assert_array_equal(a.counts, np.bincount(y[:cut], minlength=K))


@pytest.mark.parametrize("track", ["full", "light"])
def test_classes_first_seen_in_later_batches_match_two_pass_reference(rng, track):
    """Batch 1 holds class 0 only, batch 2 adds classes 1 and 2, batch 3 adds class 3 (and repeats the others), far
    from the origin: every class's shift is fixed by its first batch, and a later first appearance must not re-shift
    the classes already seen. Imbalanced counts, so both Sigma_B weightings are exercised."""
    K, d = 4, 5
    mu = 50.0 + 3.0 * rng.normal(size=(K, d))
    batches = [np.zeros(7, int), np.array([0, 1, 2, 1, 2, 2, 1, 0, 2]), np.array([3, 0, 3, 1, 2, 2, 2, 0, 1, 3, 2])]
    Hs = [mu[b] + rng.normal(size=(b.size, d)) for b in batches]
    H, y = np.concatenate(Hs), np.concatenate(batches)
    ref = brute_stats(H, y, K)
    s = ClassStats(K, d, track=track)
    for Hb, yb in zip(Hs, batches, strict=True):
        s.update(Hb, yb)
    np.testing.assert_array_equal(s.counts, ref["counts"])
    np.testing.assert_allclose(s.means, ref["means"], rtol=1e-13)
    np.testing.assert_allclose(s.class_ss, ref["ss"], rtol=1e-10)
    if track == "full":
        np.testing.assert_allclose(s.sigma_w(), ref["sw"], rtol=1e-10, atol=1e-13)
        np.testing.assert_allclose(s.sigma_b("balanced"), ref["sb_bal"], rtol=1e-10, atol=1e-13)
        np.testing.assert_allclose(s.sigma_b("empirical"), ref["sb_emp"], rtol=1e-10, atol=1e-13)


def test_merge_then_update_keeps_exactness(rng):
    H, y = _data(rng, N=400)
    a = ClassStats.from_arrays(H[:100], y[:100], 4)
    a.merge(ClassStats.from_arrays(H[100:250], y[100:250], 4))
    a.update(H[250:], y[250:])
    ref = brute_stats(H, y, 4)
    np.testing.assert_allclose(a.sigma_w(), ref["sw"], rtol=1e-10, atol=1e-14)


def test_any_float_dtype_and_torch_inputs(rng):
    H, y = _data(rng, N=200)
    H32 = H.astype(np.float32)
    ref = ClassStats.from_arrays(H32.astype(np.float64), y)
    bf = torch.from_numpy(H32).to(torch.bfloat16).float()
    ref_bf = brute_stats(bf.double().numpy(), y, 4)  # the bf16-rounded values, accumulated in float64
    for feats, want in ((H32, brute_stats(H32.astype(np.float64), y, 4)), (torch.from_numpy(H32), None), (bf, ref_bf)):
        s = ClassStats.from_arrays(feats, torch.from_numpy(y))
        assert s.N == 200
        np.testing.assert_array_equal(s.counts, np.bincount(y, minlength=4))
        if want is None:  # a float32 tensor holds the same numbers as the float32 array
            np.testing.assert_allclose(s.sigma_w(), ref.sigma_w(), rtol=1e-12)
            np.testing.assert_allclose(s.means, ref.means, rtol=1e-12)
        else:
            np.testing.assert_allclose(s.means, want["means"], rtol=1e-12)
            np.testing.assert_allclose(s.sigma_w(), want["sw"], rtol=1e-10, atol=1e-14)
            np.testing.assert_allclose(s.sigma_b("empirical"), want["sb_emp"], rtol=1e-10, atol=1e-14)
    s16 = ClassStats.from_arrays(torch.from_numpy(H32).half(), y)
    ref16 = ClassStats.from_arrays(torch.from_numpy(H32).half().double().numpy(), y)
    np.testing.assert_allclose(s16.sigma_w(), ref16.sigma_w(), rtol=1e-12)


def test_light_mode_refuses_dxd_and_keeps_traces(rng):
    H, y = _data(rng)
    full = ClassStats.from_arrays(H, y)
    light = ClassStats.from_arrays(H, y, track="light")
    assert light.trace_w() == pytest.approx(full.trace_w(), rel=1e-12)
    assert light.trace_b() == pytest.approx(full.trace_b(), rel=1e-12)
    np.testing.assert_allclose(light.means, full.means, rtol=1e-13)
    for call in (light.sigma_w, light.sigma_t, light.within_scatter):
        with pytest.raises(ValueError, match="track='light'"):
            call()


def test_empty_classes_reported_and_named(rng):
    H, y = _data(rng, N=90, K=3)
    s = ClassStats.from_arrays(H, y, K=5)
    np.testing.assert_array_equal(s.empty_classes, [3, 4])
    assert s.counts[3] == 0
    with pytest.raises(EmptyClassError, match=r"classes 3, 4"):
        _ = s.means
    sub = s.drop_empty()
    assert sub.K == 3
    np.testing.assert_allclose(sub.means, ClassStats.from_arrays(H, y, 3).means)
    np.testing.assert_allclose(sub.sigma_w(), ClassStats.from_arrays(H, y, 3).sigma_w())
    s.trace_w()  # needs no mean of an empty class


@pytest.mark.parametrize("suffix", [".npz", ".safetensors"])
def test_save_load_roundtrip(rng, tmp_path, suffix):
    H, y = _data(rng)
    for track in ("full", "light"):
        s = ClassStats.from_arrays(H, y, track=track)
        path = s.save(tmp_path / f"stats_{track}{suffix}")
        t = ClassStats.load(path)
        assert (t.K, t.d, t.track) == (4, 6, track)
        np.testing.assert_array_equal(t.counts, s.counts)
        np.testing.assert_array_equal(t.means, s.means)
        np.testing.assert_array_equal(t.class_ss, s.class_ss)
        if track == "full":
            np.testing.assert_array_equal(t.sigma_w(), s.sigma_w())
        # loaded stats keep accumulating exactly
        t.update(H[:10], y[:10])
        s.update(H[:10], y[:10])
        np.testing.assert_allclose(t.means, s.means, rtol=1e-14)


def test_state_dict_rejects_other_versions_and_shapes(rng):
    H, y = _data(rng)
    sd = ClassStats.from_arrays(H, y).state_dict()
    with pytest.raises(ValueError, match="format_version"):
        ClassStats(4, 6).load_state_dict({**sd, "format_version": 99})
    with pytest.raises(ValueError, match="state has d=6"):
        ClassStats(4, 7).load_state_dict(sd)
    with pytest.raises(ValueError, match="track"):
        ClassStats(4, 6, track="light").load_state_dict(sd)


@pytest.mark.parametrize(
    ("feats", "labels", "exc", "msg"),
    [
        (np.zeros((5, 6)), np.zeros(4, dtype=int), ValueError, "one entry per feature row"),
        (np.zeros((5, 7)), np.zeros(5, dtype=int), ValueError, "7 columns, but these statistics were built for d = 6"),
        (np.zeros(6), np.zeros(1, dtype=int), ValueError, "2-D"),
        (np.zeros((5, 6), dtype=np.int64), np.zeros(5, dtype=int), TypeError, "floating dtype"),
        (np.zeros((5, 6)), np.zeros(5), TypeError, "integer dtype"),
        (np.zeros((5, 6)), np.array([0, 1, 2, 3, 4]), ValueError, "label 4 is out of range"),
        (np.zeros((5, 6)), np.array([0, -1, 2, 3, 0]), ValueError, "label -1 is out of range"),
        (np.full((5, 6), np.nan), np.zeros(5, dtype=int), ValueError, "NaN or inf"),
        (np.array([[np.inf] * 6] * 2), np.zeros(2, dtype=int), ValueError, "NaN or inf"),
    ],
)
def test_bad_input_is_named(feats, labels, exc, msg):
    s = ClassStats(4, 6)
    with pytest.raises(exc, match=msg):
        s.update(feats, labels)
    assert s.N == 0  # a rejected batch leaves no trace


def test_bad_construction_and_incompatible_merge():
    with pytest.raises(ValueError, match="at least two classes"):
        ClassStats(1, 3)
    with pytest.raises(ValueError, match="d must be a positive int"):
        ClassStats(3, 0)
    with pytest.raises(ValueError, match="incompatible"):
        ClassStats(3, 4).merge(ClassStats(3, 5))
    with pytest.raises(ValueError, match="incompatible"):
        ClassStats(3, 4).merge(ClassStats(4, 4))
    with pytest.raises(ValueError, match="track"):
        ClassStats(3, 4).merge(ClassStats(3, 4, track="light"))


def test_degenerate_zero_spread_and_identical_features():
    # zero within-class spread: Sigma_W is exactly 0 (documented), not a tiny negative
    H = np.repeat(np.eye(3) * 5.0, 4, axis=0)
    y = np.repeat(np.arange(3), 4)
    s = ClassStats.from_arrays(H, y)
    assert np.all(s.sigma_w() == 0.0)
    assert np.all(s.class_ss == 0.0)
    # all-identical features: every covariance is exactly 0
    s2 = ClassStats.from_arrays(np.ones((6, 2)), np.arange(6) % 2)
    assert np.all(s2.sigma_t() == 0.0) and s2.trace_b() == 0.0


def test_empty_batch_is_noop_and_zero_feature_has_no_direction():
    s = ClassStats(2, 3)
    s.update(np.zeros((0, 3)), np.zeros(0, dtype=int))
    assert s.N == 0
    s.update(np.array([[0.0, 0, 0], [3.0, 4, 0]]), np.array([0, 0]))
    np.testing.assert_allclose(s.unit_sums[0], [0.6, 0.8, 0.0])


def test_chunked_from_arrays_on_memmap(tmp_path, rng):
    H, y = _data(rng, N=250)
    np.save(tmp_path / "h.npy", H.astype(np.float32))
    mm = np.load(tmp_path / "h.npy", mmap_mode="r")
    s = ClassStats.from_arrays(mm, y, batch_size=64)
    ref = ClassStats.from_arrays(H.astype(np.float32), y)
    np.testing.assert_allclose(s.sigma_w(), ref.sigma_w(), rtol=1e-12)


def test_moments_cache_follows_every_change_and_is_read_only(rng):
    """Both kinds of view (the ClassStats' own, and one built with ClassMoments) compute a value once per state,
    hand out read-only cached arrays, accept only MomentKey names, and forget their values whenever the statistics
    change: a view held across an update, merge or load recomputes from the new state."""
    H, y = _data(rng, N=120)
    s = ClassStats.from_arrays(H[:60], y[:60])
    held = ClassMoments(s)
    for view in (s.moments(), held):
        calls = []
        first = view.memo(MomentKey.EIG, "within", None, compute=lambda c=calls: c.append(1) or np.arange(3.0))
        again = view.memo(MomentKey.EIG, "within", None, compute=lambda c=calls: c.append(1) or np.arange(3.0))
        assert again is first and len(calls) == 1
        with pytest.raises(ValueError, match="read-only"):
            first[0] = 5.0
        with pytest.raises(ValueError, match="not a MomentKey name"):
            view.memo("k", compute=lambda: 0)
    assert s.moments().peek(MomentKey.EIG, "within", None) is not None  # one cache behind every stats.moments()
    w1 = s.within_scatter()
    w1[0, 0] = 1e9  # callers get copies: the cache is untouched
    assert s.within_scatter()[0, 0] != 1e9
    first_state = held.sigma_w()
    for change in (
        lambda: s.update(H[60:80], y[60:80]),
        lambda: s.merge(ClassStats.from_arrays(H[80:], y[80:])),
        lambda: s.load_state_dict(s.state_dict()),
    ):
        held.sigma_w(copy=False)
        version = s.state_version
        change()
        assert s.state_version != version
        assert held.peek(MomentKey.SIGMA_W) is None and s.moments().peek(MomentKey.SIGMA_W) is None
        assert held.peek(MomentKey.EIG, "within", None) is None
    np.testing.assert_allclose(held.within_scatter(), ClassStats.from_arrays(H, y).within_scatter(), rtol=1e-12)
    assert not np.allclose(first_state, held.sigma_w())


def test_moments_match_the_raw_moments_and_the_accessors(rng):
    """The view's statistics from the raw moments about the shifts: means = shift + sum_dev / n, Sigma_W against
    a direct two-pass computation; ClassStats' accessors return the same values; raw views are read-only."""
    H, y = _data(rng, N=90)
    s = ClassStats.from_arrays(H, y)
    view = ClassMoments(s)
    n = s.raw("counts")
    np.testing.assert_array_equal(view.means, s.raw("shift") + s.raw("sum_dev") / n[:, None])
    mu = np.stack([H[y == k].mean(axis=0) for k in range(s.K)])
    Z = H - mu[y]
    np.testing.assert_allclose(view.sigma_w(), Z.T @ Z / len(y), rtol=1e-12)
    for name in ("means", "class_ss"):
        np.testing.assert_array_equal(getattr(view, name), getattr(s, name))
    np.testing.assert_array_equal(view.sigma_t(), s.sigma_t())
    np.testing.assert_array_equal(view.sigma_b("empirical"), s.sigma_b("empirical"))
    assert view.trace_b("empirical") == s.trace_b("empirical")
    with pytest.raises(ValueError, match="read-only"):
        s.raw("sum_dev")[0, 0] = 1.0
    with pytest.raises(ValueError, match="unknown raw moment 'scatter'"):
        s.raw("scatter")
    with pytest.raises(TypeError, match="ClassMoments reads ClassStats"):
        ClassMoments(H)


def test_a_dropped_view_frees_its_matrices_and_stats_hold_no_cycle(rng):
    """No reference cycle between a ClassStats and its cache: dropping either frees the cached d x d matrices at
    once (reference counting; a cycle would keep them until a garbage collection)."""
    import gc
    import weakref

    H, y = _data(rng, N=60)
    gc.disable()
    try:
        s = ClassStats.from_arrays(H, y)
        view = ClassMoments(s)
        cached = weakref.ref(view.sigma_w(copy=False))
        del view
        assert cached() is None
        own = weakref.ref(s.sigma_w(copy=False))
        alive = weakref.ref(s)
        del s
        assert alive() is None and own() is None
    finally:
        gc.enable()


def test_load_state_dict_checks_shapes_and_dtypes(rng):
    H, y = _data(rng)
    sd = ClassStats.from_arrays(H, y).state_dict()
    bad_shape = {**sd, "state": {**sd["state"], "sum_dev": sd["state"]["sum_dev"][:, :3]}}
    with pytest.raises(ValueError, match=r"'sum_dev' has shape \(4, 3\), expected \(4, 6\)"):
        ClassStats(4, 6).load_state_dict(bad_shape)
    bad_dtype = {**sd, "state": {**sd["state"], "scatter_dev": sd["state"]["scatter_dev"].astype(np.float32)}}
    with pytest.raises(ValueError, match="'scatter_dev' has dtype float32"):
        ClassStats(4, 6).load_state_dict(bad_dtype)
    with pytest.raises(ValueError, match="batch_size"):
        ClassStats.from_arrays(H, y, batch_size=0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_torch_inputs_of_every_float_dtype_accumulate_in_float64(rng, dtype):
    H, y = _data(rng, N=120)
    x = torch.from_numpy(H).to(dtype)
    s = ClassStats.from_arrays(x, torch.from_numpy(y))
    assert all(v.dtype in (torch.float64, torch.int64) for v in s._state.values())
    # the values are those of the (rounded) input, accumulated exactly in float64
    ref = brute_stats(x.to(torch.float64).numpy(), y, 4)
    np.testing.assert_allclose(s.sigma_w(), ref["sw"], rtol=1e-11, atol=1e-13)
    np.testing.assert_allclose(s.means, ref["means"], rtol=1e-12, atol=1e-13)


def test_load_state_then_new_class_gets_its_shift(rng):
    """A ClassStats whose classes all had shifts, reloaded with a state where class 2 is empty, must fix class 2's
    shift at its first sample again (the skip of the first-sight step is reset by load_state_dict)."""
    K, d = 3, 4
    H = rng.normal(size=(60, d)) + 1e6  # a zero shift would cost ~12 digits of the within-class scatter
    y = np.arange(60) % K
    full = ClassStats.from_arrays(H, y, K)  # every class shifted
    part = ClassStats.from_arrays(H[y < 2], y[y < 2], K)  # class 2 empty
    full.load_state_dict(part.state_dict())
    full.update(H[y == 2], y[y == 2])
    np.testing.assert_array_equal(full.state_dict()["state"]["shift"][2], H[y == 2][0])
    ref = ClassStats.from_arrays(np.concatenate([H[y < 2], H[y == 2]]), np.concatenate([y[y < 2], y[y == 2]]), K)
    np.testing.assert_allclose(full.means, ref.means, rtol=1e-13)
    np.testing.assert_allclose(full.sigma_w(), ref.sigma_w(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(full.class_ss, ref.class_ss, rtol=1e-10)


def test_full_track_chunks_large_batches_exactly(rng):
    """A full-track batch above 2M entries is accumulated in row chunks (bounded work memory); the result equals
    the same data fed in small batches."""
    from nclab.stats._lanes import CPU_CHUNK

    K, d, B = 4, 300, 8000  # 2.4M entries: chunks of 6990 rows
    assert B * d > CPU_CHUNK
    H = rng.normal(size=(B, d)) + 3.0
    y = rng.integers(0, K, B)
    one = ClassStats(K, d).update(H, y)
    ref = ClassStats.from_arrays(H, y, K, batch_size=1000)
    np.testing.assert_allclose(one.sigma_w(), ref.sigma_w(), rtol=1e-11, atol=1e-13)
    np.testing.assert_allclose(one.means, ref.means, rtol=1e-13)


def test_report_keeps_or_drops_its_caches(rng):
    """A report on a ClassStats computes in a view of its own and keeps nothing; on a ClassMoments view it leaves
    its values in the view (the caller's to keep or drop); the accessors of a ClassStats fill its own cache until
    clear_memo()."""
    from nclab.metrics import collapse_report

    H = rng.normal(size=(60, 5))
    y = np.arange(60) % 3
    s = ClassStats.from_arrays(H, y)
    ref = collapse_report(s)
    assert s.moments().peek(MomentKey.SIGMA_W) is None
    view = ClassMoments(s)
    assert collapse_report(view) == ref
    assert view.peek(MomentKey.SIGMA_W) is not None and not view.peek(MomentKey.SIGMA_W).flags.writeable
    assert view.peek(MomentKey.EIGVALS, "total") is not None
    assert s.moments().peek(MomentKey.SIGMA_W) is None
    s.sigma_w()
    assert s.moments().peek(MomentKey.SIGMA_W) is not None
    s.clear_memo()
    assert s.moments().peek(MomentKey.SIGMA_W) is None


def test_states_saved_before_the_K_d_names_still_load():
    """Files written by nclab before the sizes were renamed (metadata ``num_classes`` / ``dim``, generated with
    that code and kept in tests/data) load as ``K`` / ``d``, with the statistics they held."""
    data = Path(__file__).parent / "data"
    H = np.array([[1.0, 0.0], [3.0, 0.0], [0.0, 2.0], [0.0, 4.0], [1.0, 1.0], [3.0, 3.0]])
    s = ClassStats.load(data / "classstats_before_K_d.npz")
    assert (s.K, s.d, s.N) == (3, 2, 6) and "num_classes" not in s.state_dict()
    np.testing.assert_allclose(s.means, [[2.0, 0.0], [0.0, 3.0], [2.0, 2.0]])
    p = PairedClassStats.load(data / "pairedstats_before_K_d.npz")
    assert (p.K, p.d, p.N) == (3, 2, 6)
    np.testing.assert_allclose(p.end.means, 2 * H.reshape(3, 2, 2).mean(axis=1))
    # a state dict of the old form loads the same way
    assert ClassStats(3, 2).load_state_dict({**_old_names(s.state_dict())}).N == 6


def _old_names(sd):
    return {{"K": "num_classes", "d": "dim"}.get(k, k): v for k, v in sd.items()}


def test_forwarding_accessors_are_deprecated_and_the_library_uses_none():
    """``ClassStats`` keeps one derived accessor (``means``); the others forward to ``moments()`` with an
    ``AccessorDeprecationWarning`` for one release. The library reads ``moments()`` itself: a full report, the
    theory views and a monitor measurement raise no such warning."""
    import warnings

    import torch
    from torch import nn

    from nclab import CollapseMonitor
    from nclab.metrics import collapse_report
    from nclab.stats.class_stats import AccessorDeprecationWarning
    from nclab.theory import snr_matrix

    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(4), 30)
    H = 3 * rng.normal(size=(4, 6))[y] + rng.normal(size=(120, 6))
    stats = ClassStats.from_arrays(H, y, K=4)
    for name, args in [("sigma_w", ()), ("sigma_b", ("balanced",)), ("trace_w", ()), ("global_mean", ("empirical",))]:
        with pytest.warns(AccessorDeprecationWarning, match=f"stats.moments\\(\\).{name}"):
            old = getattr(stats, name)(*args)
        np.testing.assert_array_equal(old, getattr(stats.moments(), name)(*args))
    with pytest.warns(AccessorDeprecationWarning, match="class_ss"):
        np.testing.assert_array_equal(stats.class_ss, stats.moments().class_ss)
    with warnings.catch_warnings():
        warnings.simplefilter("error", AccessorDeprecationWarning)
        assert stats.means.shape == (4, 6)
        W = rng.normal(size=(4, 6))
        collapse_report(stats, W=W, b=np.zeros(4))
        snr_matrix(stats)
        net = nn.Sequential(nn.Linear(6, 5), nn.Tanh(), nn.Linear(5, 4))
        CollapseMonitor(net, K=4).measure([(torch.as_tensor(H, dtype=torch.float32), torch.as_tensor(y))])
