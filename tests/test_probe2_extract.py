"""Rows of the second reliability probe on ``nclab extract`` / ``extract_features`` and the feature files that
``nclab measure`` reads (reviews/reliability-probe-2.md, rows 68-85): an extraction commits all-or-nothing, and a
file that disagrees with its header or its manifest is refused naming it.

Failures a user cannot cause on purpose are reached without root: ``kill -9`` and a file-size limit
(``RLIMIT_FSIZE``, the ``EFBIG`` a full disk's ``ENOSPC`` is handled with) and an address-space limit
(``RLIMIT_AS``) in a subprocess; an ``ENOSPC`` injected into the row writer.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn
from typer.testing import CliRunner

import nclab
from nclab.cli import app
from nclab.data import load

runner = CliRunner()
#: Subprocesses run the nclab that this test imported (PYTHONPATH may be relative to another folder), on one thread
#: and one malloc arena (each thread's arena reserves 64 MB of address space: the RLIMIT_AS test needs it steady).
ENV = {
    **os.environ,
    "PYTHONPATH": str(Path(nclab.__file__).resolve().parents[1]),
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "MALLOC_ARENA_MAX": "1",
}


def _digits_net(inputs: int = 64) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Flatten(), nn.Linear(inputs, 16), nn.ReLU(), nn.Linear(16, 10))


def _saved_net(tmp_path: Path, inputs: int = 64) -> Path:
    path = tmp_path / f"net{inputs}.pt"
    torch.save(_digits_net(inputs), path)
    return path


def _digests(folder: Path) -> dict[str, str]:
    """Every entry of ``folder`` (hidden ones too) with the SHA-256 of its bytes."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir" for p in folder.iterdir()}


def _run(code: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args], cwd=cwd, env=ENV, capture_output=True, text=True
    )


def _measure(*args: str) -> tuple[int, str, dict | None]:
    res = runner.invoke(app, ["measure", *map(str, args), "-f", "json"])
    return res.exit_code, res.output, (json.loads(res.stdout) if res.exit_code == 0 else None)


def _one_error_paragraph(res) -> str:
    """The ``error:`` paragraph of a failed command, checked to be the only one and free of a traceback."""
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output and res.output.count("error:") == 1, res.output
    return res.output.split("error:", 1)[1]


# ----------------------------------------------------------------------------------------- row 68
def test_p2_row_068_model_and_dataset_of_different_input_size(tmp_path):
    from nclab.train import resolve_config, train

    cfg = {
        "data": {"name": "digits", "per_class": 5, "test_per_class": 2},
        "model": {"name": "mlp", "options": {"widths": [12]}},
        "train": {"epochs": 1, "batch_size": 50, "threads": 1},
        "measure": {"epochs": [1], "splits": ["train"]},
        "report": False,
    }
    run = train(resolve_config(cfg), tmp_path / "run", progress=False)
    res = runner.invoke(app, ["extract", str(run.out), "gaussian", "-n", "3", "-o", str(tmp_path / "g")])
    msg = _one_error_paragraph(res)
    # both input shapes named: the run's digits (1, 8, 8) and gaussian's (32,)
    assert "trained on digits (inputs of shape (1, 8, 8) and 10 classes)" in msg, msg
    assert "gaussian has inputs of shape (32,)" in msg and "[12, 64]" in msg and "[12, 32]" in msg, msg
    assert not (tmp_path / "g").exists() or not any((tmp_path / "g").iterdir())

    # a saved module of another input size: refused before any file is written, naming the dataset's shape
    res = runner.invoke(app, ["extract", str(_saved_net(tmp_path, 784)), "digits", "-o", str(tmp_path / "m")])
    msg = _one_error_paragraph(res)
    assert "cannot take digits inputs of shape (1, 8, 8)" in msg and "1x64 and 784x16" in msg, msg


# ----------------------------------------------------------------------------------------- row 69
def test_p2_row_069_second_extraction_into_one_folder(tmp_path):
    net, ex = _saved_net(tmp_path), tmp_path / "ex11"
    first = ["extract", str(net), "digits", "-l", "1", "--split", "train", "-n", "4", "-o", str(ex)]
    assert runner.invoke(app, first).exit_code == 0
    before = _digests(ex)
    second = ["extract", str(net), "digits", "-l", "2", "--split", "test", "-n", "4", "-o", str(ex)]
    msg = _one_error_paragraph(runner.invoke(app, second))
    assert "already holds an extraction (layers 1, 40 samples" in msg and "--overwrite" in msg, msg
    assert _digests(ex) == before  # refused before anything was written

    # --overwrite replaces the extraction as a whole: no layer file of the first stays beside the new labels
    res = runner.invoke(app, [*second, "--overwrite"])
    assert res.exit_code == 0, res.output
    assert sorted(_digests(ex)) == ["2.npy", "W.npy", "b.npy", "labels.npy", "manifest.json"]
    np.testing.assert_array_equal(np.load(ex / "labels.npy"), load("digits", "test", per_class=4).y)

    # a folder an older nclab left mixed (a stray layer file beside a manifest that does not list it) is refused
    np.save(ex / "1.npy", np.zeros((40, 16), np.float32))
    code, out, _ = _measure(ex / "1.npy", ex / "labels.npy")
    assert code == 2 and "1.npy is not part of the extraction that labels.npy belong to" in out, out
    code, _, report = _measure(ex / "2.npy", ex / "labels.npy")
    assert code == 0 and report["nc1"] > 0


# ----------------------------------------------------------------------------------------- row 70
_KILLED = """
import os, signal, torch
from torch import nn
from nclab import extract_features
torch.manual_seed(0)
net = nn.Sequential(nn.Linear(4, 64), nn.ReLU(), nn.Linear(64, 3))
x, y = torch.randn(3000, 4), torch.arange(3000) % 3
def data():
    for i in range(0, 3000, 100):
        if i == 2000:
            os.kill(os.getpid(), signal.SIGKILL)  # kill -9 mid-extract: no exception handler runs
        yield x[i : i + 100], y[i : i + 100]
extract_features(net, data(), layers=["0", "penultimate"], out="fmk", K=3)
"""


def test_p2_row_070_kill_9_mid_extract_leftovers_cleaned_by_the_next_run(tmp_path):
    proc = _run(_KILLED, cwd=tmp_path)
    assert proc.returncode == -9, proc.stderr
    fmk = tmp_path / "fmk"
    left = [p.name for p in fmk.iterdir()]
    assert not any(n.endswith((".npy", ".json")) for n in left), left  # nothing at a final name
    partial = [f for f in fmk.rglob("*") if f.is_file() and f.name != "run.lock"]
    assert partial, left  # the killed run's partial files are on disk, hidden
    size = sum(f.stat().st_size for f in partial)

    res = runner.invoke(app, ["extract", str(_saved_net(tmp_path)), "digits", "-n", "3", "-o", str(fmk)])
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in fmk.iterdir()) == ["W.npy", "b.npy", "labels.npy", "manifest.json", "penultimate.npy"]
    assert "note:" in res.output and "left in" in res.output and "by a writer that did not finish" in res.output
    assert f"removed the {size / 2**20:.1f} MB" in res.output and "taking over" in res.output  # the dead owner's lock
    assert size > 2000 * 64 * 4  # rows were streamed to disk batch by batch, not collected in memory first


# ----------------------------------------------------------------------------------------- row 71
_FILE_SIZE_LIMIT = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # write() then fails with EFBIG, as it fails with ENOSPC on a full disk
limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
from nclab.cli import app
app(sys.argv[2:], prog_name="nclab")
"""


def test_p2_row_071_disk_full_during_extract_keeps_the_complete_extraction(tmp_path):
    net, w = _saved_net(tmp_path), tmp_path / "w"
    args = ["extract", str(net), "digits", "-l", "1", "-l", "2", "-o", str(w)]
    assert runner.invoke(app, [*args, "-n", "5"]).exit_code == 0
    before = _digests(w)
    assert np.load(w / "1.npy").shape == (50, 16)

    # the probe's second run (-n 100 does not fit under 20 kB per file): refused, nothing written
    small = _run(_FILE_SIZE_LIMIT, "20000", *args, "-n", "100", cwd=tmp_path)
    assert small.returncode == 2 and "Traceback" not in small.stderr, small.stderr
    assert _digests(w) == before

    # with --overwrite it runs out of room part-way: one error paragraph, the earlier extraction byte-identical
    full = _run(_FILE_SIZE_LIMIT, "20000", *args, "-n", "100", "--overwrite", cwd=tmp_path)
    assert full.returncode == 2 and "Traceback" not in full.stderr, full.stderr
    assert "ran out of room (File too large)" in full.stderr and "nothing was committed" in full.stderr
    assert _digests(w) == before  # no truncated layer file, no leftover staging folder
    code, _, report = _measure(w / "1.npy", w / "labels.npy")
    assert code == 0 and report["nc1"] > 0


def test_p2_row_071_injected_enospc_through_the_api(tmp_path, monkeypatch):
    from nclab.io.npy_stream import NpyAppender

    net, (x, y) = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)), (torch.randn(90, 4), torch.arange(90) % 3)
    nclab.extract_features(net, [(x[i : i + 30], y[i : i + 30]) for i in (0, 30, 60)], out=tmp_path, K=3)
    before = _digests(tmp_path)
    append, calls = NpyAppender.append, []

    def append_until_full(self, batch):
        calls.append(1)
        if len(calls) == 4:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self.path))
        append(self, batch)

    monkeypatch.setattr(NpyAppender, "append", append_until_full)
    big = [(torch.randn(30, 4), torch.arange(30) % 3)] * 5
    with pytest.raises(OSError, match=r"ran out of room \(No space left on device") as err:
        nclab.extract_features(net, big, out=tmp_path, K=3, overwrite=True)
    assert err.value.errno == errno.ENOSPC and "holds what it held before" in str(err.value)
    assert _digests(tmp_path) == before


# ----------------------------------------------------------------------------------------- row 72
def test_p2_row_072_loader_raising_over_an_earlier_extraction(tmp_path):
    net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    x, y = torch.randn(90, 4), torch.arange(90) % 3
    nclab.extract_features(net, [(x[i : i + 30], y[i : i + 30]) for i in (0, 30, 60)], out=tmp_path, K=3)
    before = _digests(tmp_path)

    def bad():
        yield x[:30], y[:30]
        raise RuntimeError("loader died")

    # the probe's call: refused before the first batch (an earlier extraction is there)
    with pytest.raises(FileExistsError, match="already holds an extraction"):
        nclab.extract_features(net, bad(), out=tmp_path, K=3)
    assert _digests(tmp_path) == before
    # with overwrite=True the loader's own error comes through, and the earlier extraction is untouched
    with pytest.raises(RuntimeError, match="loader died"):
        nclab.extract_features(net, bad(), out=tmp_path, K=3, overwrite=True)
    assert _digests(tmp_path) == before
    assert np.load(tmp_path / "labels.npy").shape == (90,) and np.load(tmp_path / "penultimate.npy").shape == (90, 8)


def test_a_failed_first_extraction_leaves_no_folder_behind(tmp_path):
    """The fresh-clone re-run of rows 71/72: a failed extraction into folders that did not exist removed its files
    but left the (empty) folders it had created, while saying the output "holds what it held before"."""
    net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))

    def bad():
        yield torch.randn(30, 4), torch.arange(30) % 3
        raise RuntimeError("loader died")

    (tmp_path / "keep").mkdir()
    (tmp_path / "keep" / "note.txt").write_text("mine")
    for out in (tmp_path / "new" / "deeper" / "w", tmp_path / "keep" / "w"):
        with pytest.raises(RuntimeError, match="loader died"):
            nclab.extract_features(net, bad(), out=out, K=3)
    assert not (tmp_path / "new").exists()  # every folder the call created is gone
    assert sorted(p.name for p in (tmp_path / "keep").iterdir()) == ["note.txt"]  # a folder that existed stays


# ----------------------------------------------------------------------------------------- rows 73-85
def _features(tmp_path: Path) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    y = np.arange(60) % 3
    H = rng.normal(size=(60, 5)) + 3.0 * np.eye(3, 5)[y]
    np.save(tmp_path / "H.npy", H)
    np.save(tmp_path / "y.npy", y)
    return H, y


def test_p2_row_073_truncated_safetensors(tmp_path):
    from safetensors.numpy import save_file

    H, y = _features(tmp_path)
    save_file({"H": H.astype(np.float32), "y": y}, str(tmp_path / "f.safetensors"))
    raw = (tmp_path / "f.safetensors").read_bytes()
    (tmp_path / "f_trunc.safetensors").write_bytes(raw[:-100])
    f = tmp_path / "f_trunc.safetensors"
    res = runner.invoke(app, ["measure", f"{f}:H", f"{f}:y"])
    msg = _one_error_paragraph(res)
    header = len(raw) - 60 * 5 * 4 - 60 * 8
    assert (
        f"{f}: truncated: the {header}-byte header describes 2 tensors = 1680 bytes of data, the file holds only 1580"
        in msg
    )


def test_p2_row_077_bfloat16_safetensors_read_by_upcasting(tmp_path):
    from safetensors.torch import save_file

    H, y = _features(tmp_path)
    h16 = torch.tensor(H, dtype=torch.float32).bfloat16()
    save_file({"H": h16, "y": torch.tensor(y)}, str(tmp_path / "bf.safetensors"))
    np.save(tmp_path / "H32.npy", h16.float().numpy())  # bfloat16 -> float32 is exact
    f = tmp_path / "bf.safetensors"
    code, out, from_bf16 = _measure(f"{f}:H", f"{f}:y")
    assert code == 0, out
    assert from_bf16 == _measure(tmp_path / "H32.npy", tmp_path / "y.npy")[2]


def test_p2_row_081_malicious_pickle_in_a_pt_refused_in_one_paragraph(tmp_path):
    marker = tmp_path / "PWNED"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    _features(tmp_path)
    torch.save({"H": Evil()}, tmp_path / "evil.pt")
    res = runner.invoke(app, ["measure", f"{tmp_path / 'evil.pt'}:H", str(tmp_path / "y.npy")])
    msg = _one_error_paragraph(res)
    assert "evil.pt holds Python objects other than tensors (it refers to posix.system), so it was not loaded" in msg
    assert "\n\n" not in msg.strip() and not marker.exists()


def test_p2_row_082_bytes_after_the_npy_data_refused(tmp_path):
    _features(tmp_path)
    with open(tmp_path / "H.npy", "ab") as fh:
        fh.write(b"\0" * 24)
    res = runner.invoke(app, ["measure", str(tmp_path / "H.npy"), str(tmp_path / "y.npy")])
    msg = _one_error_paragraph(res)
    assert f"{tmp_path / 'H.npy'}: 24 bytes after the array's data" in msg
    assert "(60, 5) float64 = 2400 bytes of data, the file holds 2424 (2552 bytes in all)" in msg, msg


def test_p2_row_083_big_endian_npy_read_with_the_same_numbers(tmp_path):
    H, y = _features(tmp_path)
    np.save(tmp_path / "Hbe.npy", H.astype(">f8"))
    np.save(tmp_path / "ybe.npy", y.astype(">i8"))
    native = _measure(tmp_path / "H.npy", tmp_path / "y.npy")[2]
    code, out, swapped = _measure(tmp_path / "Hbe.npy", tmp_path / "ybe.npy")
    assert code == 0, out
    assert swapped == native  # bit-identical: the bytes are swapped to the same float64 values


_ADDRESS_LIMIT = """
import contextlib, io, resource, sys
import numpy as np
from nclab.cli import app
# one measurement of a small file first: every module the command imports (nclab imports lazily) and the BLAS
# pools' buffers are then in place, so the limit below is the headroom of the measurement itself
np.save("warm.npy", np.random.default_rng(0).normal(size=(64, 8))); np.save("warmy.npy", np.arange(64) % 4)
with contextlib.redirect_stdout(io.StringIO()):
    app(["measure", "warm.npy", "warmy.npy", "-f", "json"], prog_name="nclab", standalone_mode=False)
size = [int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith("VmSize")][0]
limit = size + int(sys.argv[1]) * 2**20
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
app(sys.argv[2:], prog_name="nclab")
"""


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the address-space size from Linux's /proc")
def test_p2_row_085_memmap_larger_than_the_address_space_is_streamed(tmp_path):
    headroom_mb, N, d = 96, 600_000, 64  # a 154 MB file under 96 MB of address space left
    rng = np.random.default_rng(3)
    np.save(tmp_path / "y.npy", np.arange(N) % 4)
    header = np.lib.format.header_data_from_array_1_0(np.zeros((1, d), np.float32)) | {"shape": (N, d)}
    with open(tmp_path / "big.npy", "wb") as fh:  # sparse: only the first and last 1000 rows are on disk
        np.lib.format.write_array_header_1_0(fh, header)
        offset = fh.tell()
        fh.write(rng.normal(size=(1000, d)).astype(np.float32).tobytes())
        fh.seek(offset + (N - 1000) * d * 4)
        fh.write(rng.normal(size=(1000, d)).astype(np.float32).tobytes())
    args = ["measure", "big.npy", "y.npy", "-f", "json"]
    limited = _run(_ADDRESS_LIMIT, str(headroom_mb), *args, cwd=tmp_path)
    assert limited.returncode == 0, limited.stderr
    unlimited = _run("import sys\nfrom nclab.cli import app\napp(sys.argv[1:], prog_name='nclab')", *args, cwd=tmp_path)
    assert unlimited.returncode == 0, unlimited.stderr
    report = json.loads(limited.stdout)
    assert report == json.loads(unlimited.stdout) and np.isfinite(report["nc1"])  # row chunks: the same numbers
