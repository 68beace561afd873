"""The accumulator protocol, checked on every accumulator of nclab.stats with one small factory each: merge of two
halves == one pass, all_reduce over 2 gloo processes == one pass, save/load round trips, corrupt files rejected
with the file and the problem named, reset back to the empty state."""

from __future__ import annotations

import io
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch.multiprocessing as mp

from nclab.stats import (
    Accumulator,
    ClassStats,
    GeodesicNCC,
    NCCAccumulator,
    PairedClassStats,
    PathStats,
    agree_on_shifts,
)
from tests._distributed import free_port, gloo_group

K, D, N = 4, 5, 120
HALF = N // 2
T_GRID = np.linspace(0.0, 1.0, 5)


def _data() -> dict[str, np.ndarray]:
    """Three layers of the same samples far from the origin; class 3 appears only in the second half (so the
    merge adopts its shift from the other side, and in all_reduce rank 1 alone has it)."""
    rng = np.random.default_rng(5)
    y = np.concatenate([rng.integers(0, K - 1, HALF), rng.integers(0, K, HALF)])
    y[HALF:][:3] = K - 1
    centres = rng.normal(size=(3, K, D))
    layers = [1e3 * (i + 1) + (3.0 - i) * centres[i][y] + rng.normal(size=(N, D)) for i in range(3)]
    return {"y": y, "h0": layers[0], "h1": layers[1], "h2": layers[2]}


try:  # the approximate NCC index is an optional extra (nclab[ann])
    import faiss  # noqa: F401

    HAVE_FAISS = True
except ImportError:
    HAVE_FAISS = False

DATA = _data()
assert K - 1 not in DATA["y"][:HALF] and K - 1 in DATA["y"][HALF:]


@dataclass(frozen=True)
class Factory:
    """How to build an empty accumulator, feed it the rows ``idx`` of DATA, and read what it measured."""

    name: str
    make: Callable[[], Accumulator]
    feed: Callable[[Any, Any], None]
    observe: Callable[[Any], dict[str, Any]]


def _class_stats_obs(s: ClassStats) -> dict[str, Any]:
    # means of the classes present (the first half lacks class K-1)
    out = {"counts": s.counts, "means": s.drop_empty().means, "class_ss": s.class_ss, "unit_sums": s.unit_sums}
    if s.track == "full":
        out["within_scatter"] = s.within_scatter()
    return out


def _paired_obs(p: PairedClassStats) -> dict[str, Any]:
    out = {"cross": p.cross_within(), "coupling": p.coupling_cost()}
    out.update({f"start_{k}": v for k, v in _class_stats_obs(p.start).items()})
    out.update({f"end_{k}": v for k, v in _class_stats_obs(p.end).items()})
    return out


def _pass1() -> ClassStats:
    return ClassStats.from_arrays(DATA["h1"], DATA["y"], K)


_W = np.random.default_rng(9).normal(size=(K, D))
_B = np.random.default_rng(10).normal(size=K)

FACTORIES = [
    Factory(
        "ClassStats",
        lambda: ClassStats(K, D),
        lambda a, i: a.update(DATA["h1"][i], DATA["y"][i]),
        _class_stats_obs,
    ),
    Factory(
        "ClassStats-light",
        lambda: ClassStats(K, D, track="light"),
        lambda a, i: a.update(DATA["h1"][i], DATA["y"][i]),
        _class_stats_obs,
    ),
    Factory(
        "NCCAccumulator",
        lambda: NCCAccumulator(_pass1(), W=_W, b=_B),
        lambda a, i: a.update(DATA["h1"][i], DATA["y"][i]),
        lambda a: a.per_class(),
    ),
    *(
        [
            Factory(
                "NCCAccumulator-hnsw",
                lambda: NCCAccumulator(_pass1(), W=_W, b=_B, index="hnsw"),
                lambda a, i: a.update(DATA["h1"][i], DATA["y"][i]),
                lambda a: a.per_class(),
            )
        ]
        if HAVE_FAISS
        else []
    ),
    Factory(
        "PairedClassStats",
        lambda: PairedClassStats(K, D),
        lambda a, i: a.update(DATA["h0"][i], DATA["h2"][i], DATA["y"][i]),
        _paired_obs,
    ),
    Factory(
        "PathStats",
        lambda: PathStats(3),
        lambda a, i: a.update([DATA["h0"][i], DATA["h1"][i], DATA["h2"][i]]),
        lambda a: {
            "norms": a.step_norm_sums,
            "sq": a.step_sq_sums,
            "end": a.end_sq_sum,
            "n": np.int64(a.N),
        },
    ),
    Factory(
        "GeodesicNCC",
        lambda: GeodesicNCC(
            ClassStats.from_arrays(DATA["h0"], DATA["y"], K).means,
            ClassStats.from_arrays(DATA["h2"], DATA["y"], K).means,
            T_GRID,
        ),
        lambda a, i: a.update(DATA["h0"][i], DATA["h2"][i], DATA["y"][i]),
        lambda a: {"correct": np.rint(a.accuracy() * a.N).astype(np.int64), "n": np.int64(a.N)},
    ),
]
BY_NAME = {f.name: f for f in FACTORIES}
IDS = [f.name for f in FACTORIES]
FIRST, SECOND, ALL = slice(0, HALF), slice(HALF, N), slice(0, N)


def _one_pass(f: Factory) -> Accumulator:
    a = f.make()
    f.feed(a, ALL)
    return a


def _assert_observed_equal(got: dict[str, Any], want: dict[str, Any], rtol: float) -> None:
    assert got.keys() == want.keys()
    for key, w in want.items():
        g, w = np.asarray(got[key]), np.asarray(w)
        if np.issubdtype(w.dtype, np.integer):
            np.testing.assert_array_equal(g, w, err_msg=key)  # counts: exactly
        else:
            scale = float(np.max(np.abs(w))) if w.size else 0.0
            np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol * scale, err_msg=key)


def _assert_state_dicts_equal(a: Any, b: Any) -> None:
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys()
        for k in a:
            _assert_state_dicts_equal(a[k], b[k])
    elif isinstance(a, np.ndarray):
        np.testing.assert_array_equal(a, b)
        assert a.dtype == b.dtype
    else:
        assert a == b


# ---------------------------------------------------------------------- merge
@pytest.mark.parametrize("f", FACTORIES, ids=IDS)
def test_merge_of_two_halves_equals_one_pass(f):
    a, b = f.make(), f.make()
    f.feed(a, FIRST)
    f.feed(b, SECOND)  # class K-1 first appears here: its shift is adopted from b
    ref = f.observe(_one_pass(f))
    _assert_observed_equal(f.observe(a.merge(b)), ref, rtol=1e-12)
    # merging into an empty accumulator, and merging an empty one in, are exact copies
    whole = _one_pass(f)
    _assert_observed_equal(f.observe(f.make().merge(whole)), ref, rtol=0)
    _assert_observed_equal(f.observe(whole.merge(f.make())), ref, rtol=0)
    with pytest.raises(TypeError, match="can only merge"):
        a.merge(object())


# ---------------------------------------------------------------------- streaming
@pytest.mark.parametrize("f", FACTORIES, ids=IDS)
def test_streaming_in_batches_with_a_class_first_seen_late_equals_one_pass(f):
    """One accumulator fed five batches in order (class K-1 first appears in the fourth, after its peers' shifts are
    fixed) measures what one batch of everything measures: the shift of a late class must not disturb the others."""
    a = f.make()
    rows = np.arange(N)
    for chunk in (*np.array_split(rows[FIRST], 3), *np.array_split(rows[SECOND], 2)):
        f.feed(a, chunk)
    _assert_observed_equal(f.observe(a), f.observe(_one_pass(f)), rtol=1e-12)


# ---------------------------------------------------------------------- all_reduce
def _worker(rank: int, world: int, port: int, out_dir: str) -> None:
    with gloo_group(rank, world, port):
        for f in FACTORIES:
            a = f.make()
            f.feed(a, FIRST if rank == 0 else SECOND)
            a.all_reduce()
            a.save(os.path.join(out_dir, f"{f.name}_rank{rank}.npz"))


@pytest.fixture(scope="module")
def reduced_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("all_reduce")
    mp.spawn(_worker, args=(2, free_port(), str(out)), nprocs=2, join=True)
    return out


@pytest.mark.distributed
@pytest.mark.parametrize("f", FACTORIES, ids=IDS)
def test_all_reduce_over_two_processes_equals_one_pass(f, reduced_dir):
    ref = f.observe(_one_pass(f))
    cls = type(f.make())
    for rank in range(2):
        _assert_observed_equal(f.observe(cls.load(reduced_dir / f"{f.name}_rank{rank}.npz")), ref, rtol=1e-12)


def test_agree_on_shifts_reports_unseen_classes_as_unseen_with_zero_shift(tmp_path):
    """In a group of one (in-process gloo, so the check runs with the fast tests) every seen class is owned by this
    rank: its shifts come back unchanged, and a class nobody saw comes back unseen with shift 0."""
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        seen = torch.tensor([True, False, True, False])
        shifts = (torch.arange(8, dtype=torch.float64).reshape(4, 2) + 10, torch.full((4, 3), 7.0))
        got_seen, common = agree_on_shifts(seen, tuple(s.clone() for s in shifts))
    finally:
        dist.destroy_process_group()
    assert got_seen.tolist() == [True, False, True, False]
    np.testing.assert_array_equal(common[0].numpy(), [[10, 11], [0, 0], [14, 15], [0, 0]])
    np.testing.assert_array_equal(common[1].numpy(), [[7, 7, 7], [0, 0, 0], [7, 7, 7], [0, 0, 0]])


# ---------------------------------------------------------------------- all_reduce: the guard and the agreement
def _same_state(a: Any, b: Any) -> bool:
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same_state(a[k], b[k]) for k in a)
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
    return a == b


def _refusal(call: Callable[[], Any], kind: type[Exception]) -> str:
    try:
        call()
    except kind as err:
        return str(err)
    return "no error"


def _guard_worker(rank: int, world: int, port: int, out_dir: str) -> None:
    """Per accumulator: reduce once; a second all_reduce is refused on every rank and changes nothing; update after
    the reduction adds to the reduced state on this rank and a reduction is still refused; a merged-in reduced
    state marks the target reduced; reset() makes a fresh pass that reduces again."""
    out: dict[str, dict[str, Any]] = {}
    with gloo_group(rank, world, port):
        for f in FACTORIES:
            a = f.make()
            f.feed(a, FIRST if rank == 0 else SECOND)
            a.all_reduce()
            before = a.state_dict()
            second = _refusal(a.all_reduce, RuntimeError)
            unchanged = _same_state(before, a.state_dict())
            f.feed(a, FIRST)  # data only this rank sees, after the reduction
            a.save(os.path.join(out_dir, f"{f.name}_updated_rank{rank}.npz"))
            after_update = _refusal(a.all_reduce, RuntimeError)
            merged = f.make().merge(a)
            after_merge = _refusal(merged.all_reduce, RuntimeError)
            a.reset()
            f.feed(a, FIRST if rank == 0 else SECOND)
            a.all_reduce()
            a.save(os.path.join(out_dir, f"{f.name}_fresh_rank{rank}.npz"))
            out[f.name] = {"second": second, "unchanged": unchanged, "after_update": after_update}
            out[f.name]["after_merge"] = after_merge
    with open(os.path.join(out_dir, f"guard_rank{rank}.json"), "w") as fh:
        json.dump(out, fh)


def _mismatch_worker(rank: int, world: int, port: int, out_dir: str) -> None:
    """Ranks built with different configurations: every rank raises before anything is combined."""
    y = DATA["y"][FIRST]
    scenarios: dict[str, Callable[[], Accumulator]] = {
        "d": lambda: ClassStats(K, D if rank == 0 else D + 1),
        "K": lambda: ClassStats(K if rank == 0 else K + 1, D),
        "track": lambda: ClassStats(K, D, track="full" if rank == 0 else "light"),
        "kind": lambda: ClassStats(K, D) if rank == 0 else PathStats(3),
        "classifier": lambda: NCCAccumulator(_pass1(), W=_W if rank == 0 else 2 * _W, b=_B),
        "child": lambda: PairedClassStats(K, D, track="light" if rank == 0 else "full"),
    }
    out: dict[str, Any] = {}
    with gloo_group(rank, world, port):
        for name, make in scenarios.items():
            a = make()
            if isinstance(a, ClassStats):
                a.update(DATA["h1"][FIRST][:, : a.d] if a.d <= D else np.ones((HALF, a.d)), y)
            before = a.state_dict()
            out[name] = {"msg": _refusal(a.all_reduce, ValueError), "unchanged": _same_state(before, a.state_dict())}
    with open(os.path.join(out_dir, f"mismatch_rank{rank}.json"), "w") as fh:
        json.dump(out, fh)


@pytest.fixture(scope="module")
def guard_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("guard")
    mp.spawn(_guard_worker, args=(2, free_port(), str(out)), nprocs=2, join=True)
    mp.spawn(_mismatch_worker, args=(2, free_port(), str(out)), nprocs=2, join=True)
    return out


@pytest.mark.distributed
@pytest.mark.parametrize("f", FACTORIES, ids=IDS)
def test_a_second_all_reduce_is_refused_on_every_rank(f, guard_dir):
    """The double reduction the probe saw multiply the counts by the world size is refused by every rank (none
    waits in a collective), leaves the state as it was, and stays refused after an update or a merge."""
    ref = f.observe(_one_pass(f))
    extra = f.make()
    f.feed(extra, ALL)
    f.feed(extra, FIRST)  # the reduced statistics plus this rank's update
    cls = type(f.make())
    for rank in range(2):
        got = json.loads((guard_dir / f"guard_rank{rank}.json").read_text())[f.name]
        assert got["second"] == (
            f"{f.make().kind}.all_reduce: the statistics on ranks 0, 1 are already the sum over the ranks "
            "(all_reduce was called before); a second reduction would count the other ranks' samples again. "
            "Reduce once per pass; reset() before accumulating a new pass"
        )
        assert got["unchanged"] is True
        assert "already the sum over the ranks" in got["after_update"]
        assert "already the sum over the ranks" in got["after_merge"]
        updated = cls.load(guard_dir / f"{f.name}_updated_rank{rank}.npz")
        _assert_observed_equal(f.observe(updated), f.observe(extra), rtol=1e-12)
        _assert_observed_equal(f.observe(cls.load(guard_dir / f"{f.name}_fresh_rank{rank}.npz")), ref, rtol=1e-12)


@pytest.mark.distributed
@pytest.mark.parametrize(
    ("scenario", "expected"),
    [
        ("d", f"ClassStats.all_reduce: the ranks disagree on d (d={D} on rank 0; d={D + 1} on rank 1)"),
        (
            "K",
            f"the ranks disagree on K (K={K} on rank 0; K={K + 1} on rank 1)",
        ),
        ("track", "the ranks disagree on track (track='full' on rank 0; track='light' on rank 1)"),
        ("kind", "the ranks disagree on kind (kind='ClassStats' on rank 0; kind='PathStats' on rank 1)"),
        ("classifier", "NCCAccumulator.all_reduce: the ranks disagree on classifier W (classifier W='sha256:"),
        ("child", "PairedClassStats.all_reduce: the ranks disagree on end.track (end.track='light' on rank 0; "),
    ],
)
def test_all_reduce_refuses_ranks_with_different_configurations(scenario, expected, guard_dir):
    """Different K, d, track, kind, buffers or child configuration across ranks: every rank raises the same
    ValueError naming the field, its values and the ranks, and no state changes."""
    msgs = []
    for rank in range(2):
        got = json.loads((guard_dir / f"mismatch_rank{rank}.json").read_text())[scenario]
        assert expected in got["msg"]
        assert got["msg"].endswith(
            "every rank must build its accumulator with the same configuration before the statistics can be summed"
        )
        assert got["unchanged"] is True
        msgs.append(got["msg"].partition(".all_reduce: ")[2])  # after the rank's own class name
    assert msgs[0] == msgs[1]


def test_subclasses_cannot_bypass_the_guard():
    with pytest.raises(TypeError, match="overrides all_reduce; put its preparation into _before_reduce"):

        class Sneaky(PathStats):
            def all_reduce(self, group=None):
                return self


@pytest.mark.parametrize("f", FACTORIES, ids=IDS)
def test_all_reduce_without_process_group_is_a_clear_error(f):
    with pytest.raises(RuntimeError, match="process group"):
        f.make().all_reduce()


# ---------------------------------------------------------------------- persistence
@pytest.mark.parametrize("suffix", [".npz", ".safetensors"])
@pytest.mark.parametrize("f", FACTORIES, ids=IDS)
def test_save_load_round_trip_is_exact_and_updates_continue(f, suffix, tmp_path):
    a = f.make()
    f.feed(a, FIRST)
    path = a.save(tmp_path / f"acc{suffix}")
    b = type(a).load(path)
    _assert_state_dicts_equal(b.state_dict(), a.state_dict())
    _assert_observed_equal(f.observe(b), f.observe(a), rtol=0)
    f.feed(a, SECOND)
    f.feed(b, SECOND)  # the class first seen now gets the same shift in both
    _assert_observed_equal(f.observe(b), f.observe(a), rtol=0)
    # an empty accumulator round-trips as empty
    e = type(a).load(f.make().save(tmp_path / f"empty{suffix}"))
    _assert_state_dicts_equal(e.state_dict(), f.make().state_dict())


def _rewrite_npz(path: Path, edit: Callable[[dict[str, np.ndarray]], None]) -> None:
    with np.load(path) as fh:
        arrays = {k: fh[k] for k in fh.files}
    edit(arrays)
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    path.write_bytes(buf.getvalue())


def _first_state_key(arrays: dict[str, np.ndarray]) -> str:
    return next(k for k in arrays if k.startswith("state__"))


def _corrupt_shape(arrays: dict[str, np.ndarray]) -> None:
    k = _first_state_key(arrays)
    arrays[k] = np.concatenate([arrays[k].ravel(), arrays[k].ravel()[:1]])


def _corrupt_dtype(arrays: dict[str, np.ndarray]) -> None:
    k = _first_state_key(arrays)
    arrays[k] = arrays[k].astype(np.float32 if arrays[k].dtype == np.int64 else np.int64)


def _drop_key(arrays: dict[str, np.ndarray]) -> None:
    del arrays[_first_state_key(arrays)]


def _bump_version(arrays: dict[str, np.ndarray]) -> None:
    arrays["meta__format_version"] = np.array("99")


CORRUPTIONS = {
    "version": (_bump_version, "format_version 99"),
    "shape": (_corrupt_shape, "has shape"),
    "dtype": (_corrupt_dtype, "has dtype"),
    "missing": (_drop_key, "missing"),
}


@pytest.mark.parametrize("problem", list(CORRUPTIONS))
@pytest.mark.parametrize("f", FACTORIES, ids=IDS)
def test_corrupt_files_are_rejected_naming_file_and_problem(f, problem, tmp_path):
    a = f.make()
    f.feed(a, ALL)
    path = a.save(tmp_path / "acc.npz")
    edit, message = CORRUPTIONS[problem]
    _rewrite_npz(path, edit)
    with pytest.raises(ValueError, match=re.escape(str(path)) + ".*" + message):
        type(a).load(path)


@pytest.mark.parametrize("suffix", [".npz", ".safetensors"])
@pytest.mark.parametrize("f", FACTORIES, ids=IDS)
def test_truncated_and_foreign_files_are_rejected(f, suffix, tmp_path):
    a = f.make()
    f.feed(a, ALL)
    path = a.save(tmp_path / f"acc{suffix}")
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(ValueError, match=re.escape(str(path)) + ".*truncated"):
        type(a).load(path)
    other = next(g for g in FACTORIES if type(g.make()) is not type(a))
    foreign = other.make()
    other.feed(foreign, ALL)
    wrong = foreign.save(tmp_path / f"other{suffix}")
    with pytest.raises(ValueError, match=re.escape(str(wrong)) + f".*not an nclab {type(a).__name__} file"):
        type(a).load(wrong)


def test_load_state_dict_validates_everything_before_changing_anything():
    p = PairedClassStats(K, D)
    p.update(DATA["h0"], DATA["h2"], DATA["y"])
    before = p.state_dict()
    bad = p.state_dict()
    bad["end"]["state"]["sum_dev"] = bad["end"]["state"]["sum_dev"][:, :2]  # only a child is wrong
    with pytest.raises(ValueError, match="'sum_dev' has shape"):
        p.load_state_dict(bad)
    _assert_state_dicts_equal(p.state_dict(), before)


# ---------------------------------------------------------------------- reset
@pytest.mark.parametrize("f", FACTORIES, ids=IDS)
def test_reset_returns_to_the_empty_state(f):
    a = f.make()
    f.feed(a, FIRST)
    assert a.reset() is a
    _assert_state_dicts_equal(a.state_dict(), f.make().state_dict())
    f.feed(a, ALL)  # and accumulates afresh, exactly as a new accumulator would
    _assert_observed_equal(f.observe(a), f.observe(_one_pass(f)), rtol=0)


# ---------------------------------------------------------------------- threads
@pytest.mark.parametrize("f", FACTORIES, ids=IDS)
def test_update_waits_for_the_lock_held_by_another_thread(f):
    """Every accumulator serialises ``update`` on one object: a thread's update cannot start while another holds
    the object's lock (the base class wraps each subclass' update)."""
    import threading

    a = f.make()
    done = threading.Event()

    def work():
        f.feed(a, FIRST)
        done.set()

    with a._lock:
        t = threading.Thread(target=work)
        t.start()
        assert not done.wait(0.3)  # blocked on the lock, state untouched
    t.join(30)
    assert done.is_set()
    ref = f.make()
    f.feed(ref, FIRST)
    _assert_observed_equal(f.observe(a), f.observe(ref), rtol=0)


def test_concurrent_class_stats_updates_lose_nothing():
    """Four threads stream disjoint quarters of the rows into one ClassStats: counts exact, sums equal to one
    serial pass up to the order of the additions (unlocked, updates were lost: N = 199,893 of 200,000)."""
    import threading

    rng = np.random.default_rng(0)
    k, d, n, batch = 10, 16, 40_000, 50
    y = rng.integers(0, k, n)
    h = 3 * rng.normal(size=(k, d))[y] + rng.normal(size=(n, d))
    serial = ClassStats(k, d)
    for i in range(0, n, batch):
        serial.update(h[i : i + batch], y[i : i + batch])
    for _ in range(3):
        shared = ClassStats(k, d)

        def work(lo: int, hi: int, s: ClassStats = shared) -> None:
            for i in range(lo, hi, batch):
                s.update(h[i : i + batch], y[i : i + batch])

        quarter = n // 4
        threads = [threading.Thread(target=work, args=(j * quarter, (j + 1) * quarter)) for j in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert shared.N == n
        np.testing.assert_array_equal(shared.counts, serial.counts)
        np.testing.assert_allclose(shared.means, serial.means, rtol=1e-12, atol=1e-12)
        want = serial.within_scatter()
        np.testing.assert_allclose(shared.within_scatter(), want, rtol=1e-10, atol=1e-12 * np.abs(want).max())


@pytest.mark.parametrize("f", FACTORIES, ids=IDS)
def test_pickle_and_deepcopy_give_a_working_accumulator_with_its_own_lock(f):
    import copy
    import pickle

    a = f.make()
    f.feed(a, FIRST)
    for b in (pickle.loads(pickle.dumps(a)), copy.deepcopy(a)):
        assert b._lock is not a._lock
        assert b._lock.acquire(blocking=False)  # a fresh lock, not held
        b._lock.release()
        _assert_state_dicts_equal(b.state_dict(), a.state_dict())
        f.feed(b, SECOND)
    f.feed(a, SECOND)
    _assert_observed_equal(f.observe(b), f.observe(a), rtol=0)
