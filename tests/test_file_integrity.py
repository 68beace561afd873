"""Verified files: statistics files and checkpoints carry a SHA-256 checked on load, statistics are checked for
their invariants, a cut metrics.csv is refused, concurrent save + load never tears, ``nclab verify``.

Reliability probe rows 38, 40, 41, 42, 43, 87, 88, 89, 96."""

from __future__ import annotations

import io
import json
import math
import multiprocessing as mp
import re
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from nclab import ClassStats
from nclab.cli import app
from nclab.io import CorruptFileError, arrays_sha256, read_metrics
from nclab.io.integrity import object_sha256
from nclab.io.run_table import COLUMNS
from nclab.stats import Accumulator, GeodesicNCC, NCCAccumulator, PathStats
from nclab.train import resolve_config, train
from nclab.train.checkpoint import CHECKPOINT_FORMAT, CHECKPOINT_KEYS, checkpoint_bytes, load_checkpoint
from nclab.train.verify import verify

safetensors = pytest.importorskip("safetensors")
from safetensors.numpy import load_file, save_file  # noqa: E402

RNG = np.random.default_rng(7)
K, D, N_PER = 3, 5, 8
H = RNG.normal(size=(K * N_PER, D)) + 4.0
Y = np.repeat(np.arange(K), N_PER)
SUFFIXES = [".npz", ".safetensors"]


def _stats() -> ClassStats:
    return ClassStats.from_arrays(H, Y, K)


# ---------------------------------------------------------------------- raw access to the two containers
def _read_raw(path: Path) -> tuple[dict[str, str], dict[str, np.ndarray]]:
    if path.suffix == ".safetensors":
        from safetensors import safe_open

        with safe_open(str(path), framework="numpy") as fh:
            return dict(fh.metadata()), dict(load_file(str(path)))
    with np.load(path) as fh:
        meta = {k[len("meta__") :]: str(fh[k]) for k in fh.files if k.startswith("meta__")}
        return meta, {k: fh[k] for k in fh.files if not k.startswith("meta__")}


def _write_raw(path: Path, meta: dict[str, str], arrays: dict[str, np.ndarray], *, reseal: bool) -> None:
    """Rewrite a statistics file; ``reseal`` recomputes the checksum (a semantically invalid but intact file)."""
    meta = dict(meta)
    if reseal:
        meta["sha256"] = json.dumps(arrays_sha256(meta, arrays))
    if path.suffix == ".safetensors":
        save_file({k: np.ascontiguousarray(v) for k, v in arrays.items()}, str(path), metadata=meta)
    else:
        buf = io.BytesIO()
        np.savez(buf, **{"meta__" + k: np.array(v) for k, v in meta.items()}, **arrays)
        path.write_bytes(buf.getvalue())


def _truncate(frac: float) -> Callable[[Path], None]:
    def cut(path: Path) -> None:
        data = path.read_bytes()
        path.write_bytes(data[: int(len(data) * frac)])

    return cut


def _flip_payload(path: Path) -> None:
    """XOR 8 bytes inside the stored ``sum_dev`` array (a bit flip the container format itself may not see)."""
    data = bytearray(path.read_bytes())
    _, arrays = _read_raw(path)
    needle = np.ascontiguousarray(arrays["state__sum_dev"], dtype="<f8").tobytes()[:16]
    at = bytes(data).find(needle)
    assert at >= 0
    for i in range(at + 4, at + 12):
        data[i] ^= 0x5A
    path.write_bytes(bytes(data))


def _edit(change: Callable[[dict[str, str], dict[str, np.ndarray]], None], reseal: bool) -> Callable[[Path], None]:
    def apply(path: Path) -> None:
        meta, arrays = _read_raw(path)
        change(meta, arrays)
        _write_raw(path, meta, arrays, reseal=reseal)

    return apply


def _nan_payload(meta: dict[str, str], arrays: dict[str, np.ndarray]) -> None:
    arrays["state__unit_sums"] = arrays["state__unit_sums"].copy()
    arrays["state__unit_sums"][1, 2] = np.nan


def _negative_count(meta: dict[str, str], arrays: dict[str, np.ndarray]) -> None:
    arrays["state__counts"] = np.array([N_PER, -5, N_PER], dtype=np.int64)


def _negative_sq(meta: dict[str, str], arrays: dict[str, np.ndarray]) -> None:
    arrays["state__sq_dev"] = -np.abs(arrays["state__sq_dev"])


def _version_string(meta: dict[str, str], arrays: dict[str, np.ndarray]) -> None:
    meta["format_version"] = "1.0"


def _missing_key(meta: dict[str, str], arrays: dict[str, np.ndarray]) -> None:
    del arrays["state__sq_dev"]


def _no_checksum(meta: dict[str, str], arrays: dict[str, np.ndarray]) -> None:
    del meta["sha256"]


def _sum_without_samples(meta: dict[str, str], arrays: dict[str, np.ndarray]) -> None:
    counts = arrays["state__counts"].copy()
    counts[0] = 0
    arrays["state__counts"] = counts


#: damage -> (what is done to the file, what the message must say)
DAMAGE: dict[str, tuple[Callable[[Path], None], str]] = {
    "empty": (_truncate(0.0), "cannot read an accumulator file"),
    "cut-50%": (_truncate(0.5), "cannot read an accumulator file"),
    "cut-99%": (_truncate(0.99), "cannot read an accumulator file"),
    "bit-flip": (_flip_payload, "(checksum mismatch|cannot read)"),
    "edited-no-reseal": (_edit(_negative_count, reseal=False), "checksum mismatch"),
    "nan-payload": (_edit(_nan_payload, reseal=True), "'unit_sums' has 1 non-finite entry"),
    "negative-count": (_edit(_negative_count, reseal=True), "'counts' has a negative entry"),
    "negative-sq-dev": (_edit(_negative_sq, reseal=True), "'sq_dev' has a negative entry"),
    "empty-class-with-sums": (_edit(_sum_without_samples, reseal=True), "class 0 has no samples but nonzero sums"),
    "format-1.0": (_edit(_version_string, reseal=True), "format_version 1.0"),
    "missing-key": (_edit(_missing_key, reseal=True), "missing 'sq_dev'"),
    "no-checksum": (_edit(_no_checksum, reseal=False), "no checksum"),
}


@pytest.mark.parametrize("suffix", SUFFIXES)
@pytest.mark.parametrize("damage", list(DAMAGE))
def test_damaged_statistics_file_gives_one_error_naming_file_and_problem(damage, suffix, tmp_path):
    path = _stats().save(tmp_path / f"stats{suffix}")
    harm, message = DAMAGE[damage]
    harm(path)
    with pytest.raises(CorruptFileError, match=re.escape(str(path)) + ": .*" + message) as info:
        ClassStats.load(path)
    assert info.value.path == path
    # the same check through the base class and through `verify`
    with pytest.raises(CorruptFileError):
        Accumulator.load(path)
    (finding,) = verify(path)
    assert not finding.ok and re.search(message, finding.problem)


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_intact_statistics_file_round_trips_through_the_base_class(suffix, tmp_path):
    a = _stats()
    b = Accumulator.load(a.save(tmp_path / f"s{suffix}"))
    assert type(b) is ClassStats
    np.testing.assert_array_equal(b.state_dict()["state"]["scatter_dev"], a.state_dict()["state"]["scatter_dev"])
    assert b.N == K * N_PER


def test_checksum_covers_metadata_and_every_array(tmp_path):
    path = _stats().save(tmp_path / "s.npz")
    meta, arrays = _read_raw(path)
    assert json.loads(meta["sha256"]) == arrays_sha256(meta, arrays)
    meta2 = {**meta, "track": '"light"'}
    assert arrays_sha256(meta2, arrays) != arrays_sha256(meta, arrays)
    arrays2 = {**arrays, "state__counts": arrays["state__counts"] + np.array([1, 0, 0])}
    assert arrays_sha256(meta, arrays2) != arrays_sha256(meta, arrays)


def test_invariants_of_other_accumulators_are_declared_and_checked():
    stats = ClassStats.from_arrays(np.eye(3, 4), [0, 1, 2])
    ncc = NCCAccumulator(stats)
    ncc.update(np.eye(3, 4) + 0.01, [0, 1, 2])
    sd = ncc.state_dict()
    sd["state"]["ncc_correct"] = sd["state"]["class_counts"] + 1  # more correct than samples
    with pytest.raises(ValueError, match="ncc_correct 2 > class_counts 1"):
        NCCAccumulator(stats).load_state_dict(sd)
    g = GeodesicNCC(np.eye(3, 4), np.eye(3, 4) * 2, [0.0, 1.0])
    g.update(np.eye(3, 4), np.eye(3, 4) * 2, [0, 1, 2])
    sd = g.state_dict()
    sd["state"]["correct"] = np.array([4, 0])  # 3 samples
    with pytest.raises(ValueError, match="correct 4 > count 3"):
        GeodesicNCC(np.eye(3, 4), np.eye(3, 4) * 2, [0.0, 1.0]).load_state_dict(sd)
    p = PathStats(3)
    p.update([np.zeros((2, 2)), np.ones((2, 2)), np.ones((2, 2)) * 3])
    sd = p.state_dict()
    sd["state"]["step_sq_sums"] = -sd["state"]["step_sq_sums"]
    with pytest.raises(ValueError, match="'step_sq_sums' has a negative entry"):
        PathStats(3).load_state_dict(sd)
    specs = {n: s.nonnegative for n, s in ClassStats(2, 2)._specs.items()}
    assert specs == {
        "counts": True,
        "shift": False,
        "sum_dev": False,
        "sq_dev": True,
        "unit_sums": False,
        "scatter_dev": False,
    }


# ---------------------------------------------------------------------- concurrency (probe row 43)
SECONDS = 3.0


def _writer(path: str, seed: int, start: mp.Barrier) -> None:
    rng = np.random.default_rng(seed)
    start.wait()  # spawning and importing take seconds: the 3 s count from when all three are ready
    stop_at = time.monotonic() + SECONDS
    while time.monotonic() < stop_at:
        ClassStats.from_arrays(rng.normal(size=(40, 16)), np.arange(40) % 4, 4).save(path)


def _reader(path: str, start: mp.Barrier, out: mp.Queue) -> None:
    reads, errors = 0, []
    start.wait()
    stop_at = time.monotonic() + SECONDS
    while time.monotonic() < stop_at:
        try:
            s = ClassStats.load(path)
            assert s.N == 40
            reads += 1
        except Exception as err:  # every failure is reported to the test, none may occur
            errors.append(f"{type(err).__name__}: {err}")
    out.put((reads, errors))


def test_two_writers_and_a_reader_of_one_statistics_file_never_tear(tmp_path):
    path = tmp_path / "shared.npz"
    ClassStats.from_arrays(np.ones((40, 16)), np.arange(40) % 4, 4).save(path)
    ctx = mp.get_context("spawn")
    start = ctx.Barrier(3)
    results: mp.Queue = ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(str(path), s, start)) for s in (1, 2)]
    procs.append(ctx.Process(target=_reader, args=(str(path), start, results)))
    for p in procs:
        p.start()
    reads, errors = results.get(timeout=180)
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert errors == []
    assert reads > 10
    assert sorted(f.name for f in tmp_path.iterdir()) == ["shared.npz"]  # no temporary file left behind
    ClassStats.load(path)


# ---------------------------------------------------------------------- checkpoints (probe rows 87, 88, 89)
def _payload() -> dict:
    model = torch.nn.Linear(4, 3)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.ones(2, 4)).sum().backward()
    opt.step()
    return {
        "epoch": 3,
        "model": model.state_dict(),
        "optimizer": opt.state_dict(),
        "torch_rng": torch.get_rng_state(),
        "rows": [(3, "train", "fc", "nc1", 0.25)],
        "zero_error_epoch": None,
        "measured": [0, 3],
        "timings": {"train_s": 1.5},
    }


def _resave(change: Callable[[dict], None]) -> Callable[[Path], None]:
    def apply(path: Path) -> None:
        state = torch.load(path, weights_only=True)
        change(state)
        torch.save(state, path)

    return apply


def _flip_weight(path: Path) -> None:
    data = bytearray(path.read_bytes())
    weight = torch.load(path, weights_only=True)["model"]["weight"]
    at = bytes(data).find(weight.numpy().tobytes()[:8])
    assert at >= 0
    for i in range(at, at + 8):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))


CHECKPOINT_DAMAGE: dict[str, tuple[Callable[[Path], None], str]] = {
    "empty": (_truncate(0.0), "empty"),
    "cut-50%": (_truncate(0.5), "cannot read the checkpoint"),
    "cut-99%": (_truncate(0.99), "cannot read the checkpoint"),
    "bit-flip": (_flip_weight, "checksum mismatch"),
    "format-2.0": (_resave(lambda s: s.update(format="2.0")), "unsupported checkpoint format '2.0'"),
    "format-old": (_resave(lambda s: s.update(format=1)), "unsupported checkpoint format 1"),
    "missing-key": (_resave(lambda s: s.pop("optimizer")), "missing 'optimizer'"),
    "edited": (_resave(lambda s: s.update(epoch=7)), "checksum mismatch"),
    "not-a-dict": (lambda p: torch.save([1, 2], p), "not an nclab checkpoint"),
}


@pytest.mark.parametrize("damage", list(CHECKPOINT_DAMAGE))
def test_damaged_checkpoint_gives_one_error_naming_file_and_problem(damage, tmp_path):
    path = tmp_path / "last.pt"
    path.write_bytes(checkpoint_bytes(_payload()))
    assert load_checkpoint(path)["epoch"] == 3
    harm, message = CHECKPOINT_DAMAGE[damage]
    harm(path)
    with pytest.raises(CorruptFileError, match=re.escape(str(path)) + ": .*" + message):
        load_checkpoint(path)


def test_checkpoint_round_trip_is_exact(tmp_path):
    payload = _payload()
    path = tmp_path / "c.pt"
    path.write_bytes(checkpoint_bytes(payload))
    back = load_checkpoint(path)
    assert set(back) == {*CHECKPOINT_KEYS, "format", "sha256"}
    for k, v in payload["model"].items():
        assert torch.equal(back["model"][k], v)
    assert back["rows"] == payload["rows"] and back["timings"] == payload["timings"]


def test_checkpoint_rows_are_stored_by_column_and_come_back_bit_for_bit(tmp_path):
    rows = [(e, "train" if e % 2 else "test", f"layer{e % 3}", "nc1", e / 7) for e in range(300)]
    rows += [(300, "train", "output", "loss", float("nan")), (300, "train", "output", "gap", -float("inf"))]
    rows += [(301, "train", "output", "count", 5), (302, "test", "fc", "nc1", np.float32(0.1))]
    path = tmp_path / "c.pt"
    path.write_bytes(checkpoint_bytes(_payload() | {"rows": rows}))
    raw = torch.load(path, weights_only=True)
    assert raw["format"] == CHECKPOINT_FORMAT == 3 and set(raw["rows"]) == {*COLUMNS, "names"}
    assert raw["rows"]["names"][:4] == ["test", "train", "layer0", "layer1"] and raw["rows"]["value"].shape == (304,)
    back = load_checkpoint(path)["rows"]
    assert back[:-2] == [*rows[:-4], (300, "train", "output", "loss", back[300][4]), *rows[-3:-2]]
    assert math.isnan(back[300][4]) and back[301][4] == -math.inf
    assert back[-2] == (301, "train", "output", "count", 5.0) and back[-1][4] == float(np.float32(0.1))
    assert all(type(r[0]) is int and type(r[4]) is float for r in back)
    # rows that are not metric rows are kept as the list they are
    odd = [(1, "train"), [2, "x", "y", "z", True]]
    path.write_bytes(checkpoint_bytes(_payload() | {"rows": odd}))
    assert load_checkpoint(path)["rows"] == odd


def test_format_2_checkpoints_still_load(tmp_path):
    """Format 2 (rows as a list of tuples, sealed the same way) is what nclab wrote before the columns."""
    sealed = {"format": 2, **_payload()}
    sealed["sha256"] = object_sha256(sealed)
    path = tmp_path / "old.pt"
    torch.save(sealed, path)
    back = load_checkpoint(path)
    assert back["format"] == 2 and back["rows"] == [(3, "train", "fc", "nc1", 0.25)]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda c: c.update(layer=c["layer"] + 5), "a name code lies outside the 3 names"),
        (lambda c: c.update(value=c["value"][:0]), "columns of different lengths"),
        (lambda c: c.update(epoch=c["epoch"].double()), "a column is not a 1-D tensor of its dtype"),
        (lambda c: c.pop("names"), "expected the columns"),
    ],
)
def test_inconsistent_row_columns_are_refused_even_when_resealed(tmp_path, change, message):
    path = tmp_path / "c.pt"
    path.write_bytes(checkpoint_bytes(_payload()))
    state = torch.load(path, weights_only=True)
    change(state["rows"])
    state["sha256"] = object_sha256({k: v for k, v in state.items() if k != "sha256"})
    torch.save(state, path)
    with pytest.raises(
        CorruptFileError, match=re.escape(str(path)) + ": the checkpoint's metric rows are inconsistent: " + message
    ):
        load_checkpoint(path)


# ---------------------------------------------------------------------- metrics.csv (probe row 96)
def test_cut_metrics_table_is_refused(tmp_path):
    good = "epoch,split,layer,metric,value\n0,train,fc,nc1,0.0807735458472109\n"
    path = tmp_path / "metrics.csv"
    path.write_text(good)
    assert read_metrics(path)[0].value == 0.0807735458472109
    cases = {
        good[: good.index("0.080") + 5]: "truncated: the last line '0,train,fc,nc1,0.080' has no final newline",
        good + "1,train,fc\n": "line 3 has 3 fields, expected 5",
        good + "1,train,fc,nc1,0.0.1\n": "line 3: value '0.0.1' is not a number",
        good + "x,train,fc,nc1,1\n": "line 3: epoch 'x' is not an integer",
        "": "the metrics table is empty (0 bytes)",
    }
    for text, message in cases.items():
        path.write_text(text)
        with pytest.raises(CorruptFileError, match=re.escape(f"{path}: {message}")):
            read_metrics(path)


# ---------------------------------------------------------------------- a run: resume refuses, verify
TINY = {
    "name": "tiny",
    "data": {"name": "digits", "per_class": 10, "test_per_class": 4},
    "model": {"name": "mlp", "options": {"widths": [8]}},
    "loss": {"name": "ce"},
    "train": {"epochs": 2, "batch_size": 32, "threads": 1},
    "measure": {"num_log": 1},
    "report": False,
}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("integrity") / "run"
    train(resolve_config(TINY), out, progress=False)
    return out


def _copy(src: Path, dst: Path) -> Path:
    import shutil

    shutil.copytree(src, dst)
    return dst


def test_verify_passes_a_good_run_and_names_each_damaged_file(run_dir, tmp_path):
    runner = CliRunner()
    good = runner.invoke(app, ["verify", str(run_dir)])
    assert good.exit_code == 0, good.output
    assert good.output.startswith("OK: 4 files verified")
    stats = _stats().save(run_dir.parent / "stats.safetensors")  # a single file, too
    assert runner.invoke(app, ["verify", str(stats)]).exit_code == 0
    bad = _copy(run_dir, tmp_path / "bad")
    _flip_weight_of_run(bad / "checkpoints" / "last.pt")
    text = (bad / "metrics.csv").read_text()
    (bad / "metrics.csv").write_text(text[:-5])
    _stats().save(bad / "extra.npz")
    _truncate(0.5)(bad / "extra.npz")
    res = runner.invoke(app, ["verify", str(bad)])
    assert res.exit_code == 2
    lines = res.stdout.strip().splitlines()
    assert len(lines) == 3
    assert f"{bad / 'metrics.csv'}: truncated" in lines[0]
    assert f"{bad / 'checkpoints' / 'last.pt'}: checksum mismatch" in lines[1]
    assert f"{bad / 'extra.npz'}: cannot read an accumulator file" in lines[2]
    js = runner.invoke(app, ["verify", str(bad), "-f", "json"])
    assert js.exit_code == 2
    rows = json.loads(js.stdout)
    assert [r["ok"] for r in rows] == [True, False, True, False, False]


def _flip_weight_of_run(path: Path) -> None:
    data = bytearray(path.read_bytes())
    state = torch.load(path, weights_only=True)
    weight = next(v for k, v in state["model"].items() if k.endswith("weight") and v.numel() >= 4)
    at = bytes(data).find(weight.numpy().tobytes()[:16])
    assert at >= 0
    for i in range(at, at + 16):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))


def test_resume_from_a_bit_flipped_checkpoint_refuses_with_exit_2(run_dir, tmp_path):
    bad = _copy(run_dir, tmp_path / "flipped")
    _flip_weight_of_run(bad / "checkpoints" / "last.pt")
    before = (bad / "metrics.csv").read_bytes()
    config = tmp_path / "tiny.json"  # YAML is a superset of JSON
    config.write_text(json.dumps(TINY))
    res = CliRunner().invoke(app, ["train", str(config), "--out", str(bad), "--resume", "--no-progress"])
    assert res.exit_code == 2
    assert f"{bad / 'checkpoints' / 'last.pt'}: checksum mismatch" in res.stderr
    assert "Traceback" not in res.output
    assert (bad / "metrics.csv").read_bytes() == before  # nothing was overwritten


def test_object_checksum_fast_row_path_matches_general_encoding():
    """Rows of plain scalars take a one-call fast path; numpy scalars take the general one: same bytes, same sum,
    while bools stay distinct from ints and every field still matters."""
    from nclab.io.integrity import object_sha256

    rows = [(e, "train", f"layer{e % 3}", "nc1", e / 7) for e in range(50)] + [(1, True, None, "x"), [2, False]]
    general = [(np.int64(e), "train", f"layer{e % 3}", "nc1", np.float64(e / 7)) for e in range(50)]
    general += [(np.int64(1), True, None, "x"), [np.int64(2), False]]
    assert object_sha256({"rows": rows}) == object_sha256({"rows": general})
    assert object_sha256([(True,)]) != object_sha256([(1,)])
    changed = [*rows[:-3], (49, "train", "layer1", "nc1", 49 / 7 + 2**-40), *rows[-2:]]
    assert object_sha256({"rows": rows}) != object_sha256({"rows": changed})
