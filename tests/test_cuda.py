"""Accelerator paths: ClassStats / NCC on CUDA, low-precision models, TF32, training with train.device: cuda.

Every test compares the CUDA result with a CPU float64 computation of the same numbers; each skips, with its
reason, where torch has no CUDA device.
"""

import threading

import numpy as np
import pytest
import torch

from nclab.io.run_table import OUTPUT_LAYER
from nclab.stats import ClassStats, NCCAccumulator
from tests.conftest import brute_stats

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (torch.cuda)")

CUDA = torch.device("cuda")


def _fro_rel(a, b):
    return np.linalg.norm(a - b) / np.linalg.norm(b)


def _data(rng, N=6000, K=9, d=40, scale=1.0, noise=1.0):
    y = rng.integers(0, K, N)
    H = scale * rng.normal(size=(K, d))[y] + noise * rng.normal(size=(N, d))
    return H, y, K


def _stream(H, y, K, batch=500, **kwargs):
    s = ClassStats(K, H.shape[1], **kwargs)
    for i in range(0, len(y), batch):
        s.update(H[i : i + batch], y[i : i + batch])
    return s


@pytest.mark.parametrize(("compute_dtype", "tol"), [("float64", 1e-11), ("float32", 1e-6)])
def test_class_stats_on_cuda_match_cpu_float64(rng, compute_dtype, tol):
    H, y, K = _data(rng)
    ref = brute_stats(H, y, K)
    s = _stream(torch.from_numpy(H).to(CUDA), torch.from_numpy(y).to(CUDA), K, compute_dtype=compute_dtype)
    assert s.device.type == "cuda" and s._state["scatter_dev"].device.type == "cuda"
    assert _fro_rel(s.sigma_w(), ref["sw"]) < tol
    assert _fro_rel(s.sigma_b("empirical"), ref["sb_emp"]) < 1e-11
    np.testing.assert_allclose(s.means, ref["means"], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(s.class_ss, ref["ss"], rtol=1e-10)


def test_float32_compute_on_cuda_near_collapse(rng):
    H, y, K = _data(rng, N=20_000, K=10, d=64, scale=1e6, noise=1e-3)
    ref = brute_stats(H, y, K)
    s = _stream(torch.from_numpy(H).to(CUDA), torch.from_numpy(y).to(CUDA), K, batch=1000, compute_dtype="float32")
    assert _fro_rel(s.sigma_w(), ref["sw"]) < 1e-6


@pytest.mark.parametrize("tf32", [True, False])
def test_tf32_setting_does_not_change_float32_compute(rng, tf32):
    """TF32 (u = 2^-11) would void the float32-compute bound: the Gram runs in full float32 whatever the user
    set, and the user's setting is restored afterwards."""
    H, y, K = _data(rng, N=8000, d=96, scale=30.0)
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    try:
        s = _stream(torch.from_numpy(H).float().to(CUDA), torch.from_numpy(y).to(CUDA), K, compute_dtype="float32")
        sw = s.sigma_w()
        assert torch.backends.cuda.matmul.allow_tf32 is tf32
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev
    ref32 = brute_stats(H.astype(np.float32), y, K)  # the float32-rounded features the GPU saw
    assert _fro_rel(sw, ref32["sw"]) < 1e-6


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_model_features_on_cuda(rng, dtype):
    """Features of a bfloat16 / float16 model: statistics of exactly those (rounded) values, in float64."""
    K, d = 6, 32
    model = torch.nn.Sequential(torch.nn.Linear(20, d), torch.nn.ReLU()).to(CUDA, dtype)
    x = torch.from_numpy(rng.normal(size=(3000, 20))).to(CUDA, dtype)
    y = torch.from_numpy(rng.integers(0, K, 3000)).to(CUDA)
    with torch.no_grad():
        feats = model(x)
    assert feats.dtype == dtype
    ref = brute_stats(feats.double().cpu().numpy(), y.cpu().numpy(), K)
    # float32 compute sums the shifted float32 values in float32: means within a few u of the spread
    for cd, tol, mean_tol in (("float64", 1e-11, 1e-12), ("float32", 1e-6, 1e-6)):
        s = _stream(feats, y, K, compute_dtype=cd)
        assert _fro_rel(s.sigma_w(), ref["sw"]) < tol
        np.testing.assert_allclose(s.means, ref["means"], rtol=mean_tol, atol=mean_tol)


def test_float32_features_on_cuda_one_sync_per_update(rng):
    """float32 features, float32 compute on CUDA: the float32 passes of the CPU (Sigma_W within 5e-6 of the exact
    statistics near collapse, as on the CPU), and, once every class has its shift, one host sync per update (the
    screen's; the code before the float32 lane work synced four times: two label reads, the norm check, bincount)."""
    import warnings

    K, d, N, B = 10, 64, 20_000, 2000
    mu = rng.normal(size=(K, d))
    y = rng.integers(0, K, N)
    H = (1e3 * mu[y] + 1e-2 * rng.normal(size=(N, d))).astype(np.float32)
    ref = brute_stats(H, y, K)
    Ht, yt = torch.from_numpy(H).to(CUDA), torch.from_numpy(y).to(CUDA)
    s = ClassStats(K, d, compute_dtype="float32").update(Ht[:B], yt[:B])  # every class gets its shift
    torch.cuda.synchronize()
    updates = 0
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for i in range(B, N, B):
                s.update(Ht[i : i + B], yt[i : i + B])
                updates += 1
    finally:
        torch.cuda.set_sync_debug_mode(0)
    syncs = [w for w in caught if "synchroniz" in str(w.message).lower()]
    assert len(syncs) <= updates, [str(w.message) for w in syncs[:3]]
    assert _fro_rel(s.sigma_w(), ref["sw"]) < 5e-6
    np.testing.assert_allclose(s.means, ref["means"], rtol=1e-6)
    cpu = _stream(H, y, K, batch=B, compute_dtype="float32")
    assert _fro_rel(s.sigma_w(), cpu.sigma_w()) < 5e-6
    np.testing.assert_allclose(s.class_ss, cpu.class_ss, rtol=1e-5)


def test_ncc_on_cuda_matches_cpu(rng):
    H, y, K = _data(rng, N=4000, d=24, scale=2.0)
    W, b = rng.normal(size=(K, 24)), rng.normal(size=K)
    cpu_stats = ClassStats.from_arrays(H, y, K)
    cpu = NCCAccumulator(cpu_stats, W, b).update(H, y).compute()
    Ht, yt = torch.from_numpy(H).to(CUDA), torch.from_numpy(y).to(CUDA)
    gpu_stats = ClassStats.from_arrays(Ht, yt, K)
    acc = NCCAccumulator(gpu_stats, W, b, device=CUDA)
    for i in range(0, len(y), 700):
        acc.update(Ht[i : i + 700], yt[i : i + 700])
    gpu = acc.compute()
    # counts of discrete decisions: identical unless a sample is within rounding of a tie (none at this spread)
    assert gpu.keys() == cpu.keys()
    for key in cpu:
        if isinstance(cpu[key], str):
            assert gpu[key] == cpu[key]
        else:
            np.testing.assert_allclose(gpu[key], cpu[key], rtol=0, atol=1e-12, err_msg=key)


def test_class_moments_of_cuda_statistics_match_cpu(rng):
    """A ClassMoments view of CUDA statistics reads the state through one cached host copy per state: its Sigma_W,
    Sigma_T, means and the whole report equal those of the same data on the CPU (float64, up to summation order)."""
    from nclab.metrics import collapse_report
    from nclab.stats import ClassMoments

    H, y, K = _data(rng, N=5000, K=30, d=24, scale=3.0)
    W, b = rng.normal(size=(K, 24)), rng.normal(size=K)
    gpu = ClassMoments(_stream(torch.from_numpy(H).to(CUDA), torch.from_numpy(y).to(CUDA), K))
    cpu = ClassStats.from_arrays(H, y, K)
    for name in ("sigma_w", "sigma_t"):
        assert _fro_rel(getattr(gpu, name)(), getattr(cpu, name)()) < 1e-11, name
    np.testing.assert_allclose(gpu.means, cpu.means, rtol=1e-12)
    want = collapse_report(cpu, W=W, b=b)
    got = collapse_report(gpu, W=W, b=b)
    assert got.keys() == want.keys()
    for key in want:
        assert got[key] == pytest.approx(want[key], rel=1e-8, abs=1e-12), key


def test_ncc_score_blocks_on_cuda_give_the_cpu_counts(rng, monkeypatch):
    """The NCC pass on CUDA in blocks of 1, 13 and all rows (patched budgets): the counts of the CPU pass."""
    import nclab.memory

    H, y, K = _data(rng, N=3000, K=200, d=24, scale=2.0)
    W, b = rng.normal(size=(K, 24)), rng.normal(size=K)
    stats = ClassStats.from_arrays(H, y, K)
    ref = NCCAccumulator(stats, W, b).update(H, y)
    Ht, yt = torch.from_numpy(H).to(CUDA), torch.from_numpy(y).to(CUDA)
    for rows in (1, 13, None):
        if rows is not None:
            monkeypatch.setattr(nclab.memory, "WORK_BLOCK_BYTES", rows * ref._row_bytes)
        acc = NCCAccumulator(stats, W, b, device=CUDA).update(Ht, yt)
        for key, counts in ref.per_class().items():
            np.testing.assert_array_equal(acc.per_class()[key], counts, err_msg=f"{rows} {key}")
        monkeypatch.undo()


def test_ncc_on_cuda_at_twenty_thousand_classes_stays_within_its_estimate():
    """K = 20,000, d = 256, a batch of 16,384 rows: unbounded, the scores alone would take 4.9 GiB of GPU memory;
    the update's peak stays within the accumulator's estimate (its O(K d) arrays plus one block of rows)."""
    K, d, B = 20000, 256, 16384
    gen = torch.Generator(device=CUDA).manual_seed(0)
    means = torch.randn(K, d, dtype=torch.float64, device=CUDA, generator=gen)
    W = torch.randn(K, d, device=CUDA, generator=gen)
    acc = NCCAccumulator.from_means(means, W=W, b=torch.zeros(K, device=CUDA), device=CUDA)
    x = torch.randn(B, d, device=CUDA, generator=gen)
    y = torch.randint(0, K, (B,), device=CUDA, generator=gen)
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()  # the arrays built so far, the inputs included
    torch.cuda.reset_peak_memory_stats()
    acc.update(x, y)
    torch.cuda.synchronize()
    grew = torch.cuda.max_memory_allocated() - base
    assert grew < acc.memory_bytes(B), (grew, acc.memory_bytes(B))
    assert acc.N == B


def test_all_reduce_guard_with_nccl():
    """A one-GPU NCCL group: the agreement record (a uint8 all_gather of CUDA tensors) passes, a second reduction is
    refused, and reset() makes the accumulator reducible again."""
    import tempfile

    import torch.distributed as dist

    rng = np.random.default_rng(1)
    H, y, K = _data(rng, N=600, K=5, d=8)
    Ht, yt = torch.from_numpy(H).to(CUDA), torch.from_numpy(y).to(CUDA)
    with tempfile.TemporaryDirectory() as tmp:
        dist.init_process_group("nccl", init_method=f"file://{tmp}/store", rank=0, world_size=1)
        try:
            s = ClassStats.from_arrays(Ht, yt, K).all_reduce()
            with pytest.raises(RuntimeError, match="already the sum over the ranks"):
                s.all_reduce()
            acc = NCCAccumulator(s, device=CUDA).update(Ht, yt).all_reduce()
            s.reset().update(Ht, yt)
            s.all_reduce()
        finally:
            dist.destroy_process_group()
    assert s.N == acc.N == len(y)
    np.testing.assert_allclose(s.means, ClassStats.from_arrays(H, y, K).means, rtol=1e-12)


def test_training_on_cuda_measures_like_the_cpu(tmp_path):
    """train.device: cuda runs end to end; before the first step (same seeded weights) its measurements equal
    the CPU run's to float32 forward-pass rounding (1e-4 relative)."""
    from nclab.train import resolve_config, train

    base = {
        "name": "cuda",
        "data": {"name": "digits", "per_class": 40, "test_per_class": 10},
        "model": {"name": "mlp", "options": {"widths": [32, 32]}},
        "loss": {"name": "ce"},
        "optim": {"lr": 0.05, "weight_decay": 5e-3},
        "schedule": {"name": "constant"},
        "train": {"epochs": 3, "batch_size": 64, "threads": 1},
        "measure": {"num_log": 2},
        "report": False,
    }
    runs = {}
    for device in ("cpu", "cuda"):
        cfg = resolve_config({**base, "train": {**base["train"], "device": device}})
        runs[device] = train(cfg, tmp_path / device, progress=False)
    cpu, gpu = runs["cpu"], runs["cuda"]
    assert gpu.measured_epochs == cpu.measured_epochs
    for metric, layer in (("nc1", None), ("error", OUTPUT_LAYER)):  # error is a network row, not a layer's
        a, b = cpu.series(metric, layer), gpu.series(metric, layer)
        assert 0 in b and 0 in a, (metric, sorted(a), sorted(b), (tmp_path / "cuda" / "log.txt").read_text())
        assert np.isfinite(list(b.values())).all()
        np.testing.assert_allclose(b[0], a[0], rtol=1e-4, atol=1e-6, err_msg=metric)


# ---------------------------------------------------------------------------------------------- paper-scale training
_IMAGES = {
    "name": "cuda-amp",
    "data": {"name": "fashion-mnist", "per_class": 50, "test_per_class": 10, "pad_to": 32, "augment": "cifar"},
    "model": {"name": "resnet18", "options": {"width": 16}},
    "optim": {"lr": 0.05},
    "schedule": {"name": "constant"},
    "train": {"epochs": 2, "batch_size": 50, "device": "cuda"},
    "measure": {"epochs": [0, 1, 2]},
    "report": False,
}


def _with(raw, **train):
    return {**raw, "train": {**raw["train"], **train}}


def test_fp16_training_uses_a_grad_scaler_and_resumes_with_its_scale(tmp_path):
    """fp16: float16 autocast, the loss scaled by a GradScaler whose state goes with the checkpoint."""
    from nclab.train import Trainer, resolve_config, train
    from nclab.train.checkpoint import load_checkpoint

    cfg = resolve_config(_with(_IMAGES, precision="fp16", channels_last=True, grad_accum=2))
    seen = set()
    with Trainer(cfg, tmp_path / "probe") as t:
        assert isinstance(t.scaler, torch.amp.GradScaler) and t.scaler.is_enabled()
        t.model.measured_layers()["layer1.0"].register_forward_hook(lambda m, i, o: seen.add(o.dtype))
        t.epoch()
        assert seen == {torch.float16} and t.scaler.get_scale() > 0
    full = train(cfg, tmp_path / "full", progress=False)
    assert all(np.isfinite(v) for v in full.series("nc1").values())
    saved = load_checkpoint(tmp_path / "full" / "checkpoints" / "last.pt")
    assert saved["grad_scaler"]["scale"] > 0

    def kill_at_1(epoch):
        if epoch == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train(cfg, tmp_path / "cut", progress=False, on_epoch_end=kill_at_1)
    again = train(cfg, tmp_path / "cut", progress=False, resume=True)
    assert again.measured_epochs == full.measured_epochs and np.isfinite(again.series("nc1")[2])


def test_bf16_measurement_on_cuda_matches_fp32_to_bfloat16_rounding(tmp_path):
    """The measurement passes run under the run's autocast; NC1 of the initial network moves by bfloat16
    rounding only (statistics in float64 either way)."""
    from nclab.train import train

    a = train(_with(_IMAGES, epochs=1), tmp_path / "fp32", progress=False)
    b = train(_with(_IMAGES, epochs=1, precision="bf16"), tmp_path / "bf16", progress=False)
    np.testing.assert_allclose(b.series("nc1")[0], a.series("nc1")[0], rtol=2e-2)
    assert b.series("nc1")[0] != a.series("nc1")[0]


def test_streamed_training_with_pinned_memory_and_workers_on_cuda(tmp_path):
    """A streamed image folder through DataLoader workers into page-locked batches copied asynchronously."""
    from PIL import Image

    from nclab.train import Trainer, resolve_config, train

    rng = np.random.default_rng(0)
    for split, n in (("train", 40), ("val", 8)):
        for k in range(4):
            folder = tmp_path / "imagenet" / split / f"n0000000{k}"
            folder.mkdir(parents=True)
            for i in range(n):
                img = np.clip(np.array([60 * k, 255 - 60 * k, 100]) + rng.integers(-30, 31, (24, 24, 3)), 0, 255)
                Image.fromarray(img.astype(np.uint8)).save(folder / f"{i}.JPEG")
    raw = {
        **_IMAGES,
        "data": {"name": "imagenet", "root": str(tmp_path / "imagenet"), "image_size": 16, "augment": "imagenet",
                 "workers": 2, "pin_memory": True, "persistent_workers": True},
        "train": {**_IMAGES["train"], "batch_size": 32, "precision": "bf16"},
    }  # fmt: skip
    cfg = resolve_config(raw)
    with Trainer(cfg, tmp_path / "probe") as t:
        assert t.data.train.loader.pin_memory
        x, _ = next(iter(t.data.train.loader))
        assert x.is_pinned()
    res = train(cfg, tmp_path / "run", progress=False)
    assert res.measured_epochs == [0, 1, 2] and np.isfinite(res.series("nc1")[2])


def test_extraction_on_cuda_resumes_byte_identically(tmp_path):
    import nclab.monitor.resume
    from nclab.data import load
    from nclab.monitor import extract_features
    from nclab.nets import build_model

    torch.manual_seed(0)
    net = build_model("mlp", (1, 8, 8), 10, widths=[32, 32]).to(CUDA).eval()
    ds = load("digits", "train")
    extract_features(net, ds, out=tmp_path / "whole", K=10, batch_size=100, device="cuda")

    calls = []
    real = type(ds).__getitem__

    def dying(self, i):
        calls.append(i)
        if len(calls) == 450:
            raise RuntimeError("stop")
        return real(self, i)

    nclab.monitor.resume.RESUME_EVERY_S, every = 0.0, nclab.monitor.resume.RESUME_EVERY_S
    try:
        type(ds).__getitem__ = dying
        with pytest.raises(RuntimeError, match="stop"):
            extract_features(net, ds, out=tmp_path / "cut", K=10, batch_size=100, device="cuda")
        type(ds).__getitem__ = real
        extract_features(net, ds, out=tmp_path / "cut", K=10, batch_size=100, device="cuda", resume=True)
    finally:
        type(ds).__getitem__ = real
        nclab.monitor.resume.RESUME_EVERY_S = every
    for name in ("layer2.npy", "labels.npy", "W.npy", "b.npy"):
        assert (tmp_path / "cut" / name).read_bytes() == (tmp_path / "whole" / name).read_bytes(), name


def test_background_checkpoint_on_cuda_is_byte_identical_to_the_synchronous_one(tmp_path):
    """The state copied for the background writer stays on the GPU (clones): the file is the synchronous write's,
    byte for byte (storages tagged cuda), although training changes the model while the copy is written."""
    import nclab.train.trainer as trainer_mod
    from nclab.train import Trainer, resolve_config

    raw = {
        "data": {"name": "digits", "per_class": 20, "test_per_class": 5},
        "model": {"name": "mlp", "options": {"widths": [32], "batchnorm": True}},
        "optim": {"lr": 0.05, "momentum": 0.9},
        "train": {"epochs": 3, "batch_size": 50, "device": "cuda"},
        "measure": {"epochs": [0, 3]},
        "report": False,
    }
    trainer = Trainer(resolve_config(raw), tmp_path / "run")
    trainer.epoch()
    fixed = {"train_s": 1.5, "measure_s": 0.25, "checkpoint_s": 0.125}
    trainer.state.timings = dict(fixed)
    trainer.checkpoint()
    synchronous = trainer.run_dir.checkpoint.read_bytes()
    gate, real = threading.Event(), trainer_mod.atomic_write_bytes
    trainer_mod.atomic_write_bytes = lambda path, data: (gate.wait(30), real(path, data))[1]
    try:
        trainer.state.timings = dict(fixed)
        with trainer:
            trainer.checkpoint()
            with torch.no_grad():
                for p in trainer.model.parameters():
                    p.add_(1.0)
            gate.set()
            trainer.wait_for_writes()
    finally:
        trainer_mod.atomic_write_bytes = real
    assert trainer.run_dir.checkpoint.read_bytes() == synchronous
