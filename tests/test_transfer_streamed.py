"""vci-transfer's paper-scale code path on streamed data (nclab.transfer.streamed), run end to end on a tiny
ImageNet-layout folder: the paper's protocol (:data:`VCI_PAPER`) with its sizes shrunk through the same
:func:`vci_paper_study` seam, against features computed directly, the probe refit on them, and numpy's r."""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np
import pytest
import torch
from PIL import Image

from nclab._threads import torch_threads
from nclab.experiments.xu_liu2023.experiments import (
    VCI_PAPER,
    TransferProtocol,
    run_transfer_study,
    vci_paper_study,
    vci_pretrain_base,
    vci_transfer_configs,
)
from nclab.measure import collect_features
from nclab.metrics import collapse_report
from nclab.nets import build_model
from nclab.stats import ClassStats
from nclab.train.checkpoint import load_checkpoint
from nclab.train.config import deep_merge
from nclab.train.feeds import streamed_split
from nclab.transfer import linear_probe, probe_options
from nclab.transfer import streamed as streamed_mod
from nclab.transfer.study import StudySpec

WNIDS = ["n01440764", "n01443537", "n01484850"]  # three ImageNet classes
N_TRAIN, N_VAL, PER_CLASS, BATCH = 8, 3, 5, 4  # per class; the measured subset; rows per forward pass


@pytest.fixture(autouse=True)
def _one_thread():
    with torch_threads(1):
        yield


def _image(rng: np.random.Generator, k: int, size: int = 20, noise: float = 40.0) -> Image.Image:
    # class k: a colour of its own plus noise, so that the features separate the classes, not perfectly
    base = np.array([[150, 100, 100], [100, 150, 100], [100, 100, 150]][k % 3], dtype=np.float64)
    arr = np.clip(base + rng.normal(0, noise, size=(size, size, 3)), 0, 255).astype(np.uint8)
    return Image.fromarray(arr)


@pytest.fixture
def data_root(tmp_path, monkeypatch):
    """$NCLAB_DATA with ``imagenet/{train,val}/<wnid>/*.JPEG`` and a two-class ``caltech101`` probe set."""
    rng = np.random.default_rng(0)
    root = tmp_path / "data"
    for split, n in (("train", N_TRAIN), ("val", N_VAL)):
        for k, wnid in enumerate(WNIDS):
            (root / "imagenet" / split / wnid).mkdir(parents=True)
            for i in range(n):
                _image(rng, k, noise=60.0).save(root / "imagenet" / split / wnid / f"{wnid}_{i}.JPEG", quality=95)
    for k, name in enumerate(["ant", "bee"]):
        folder = root / "caltech101" / "101_ObjectCategories" / name
        folder.mkdir(parents=True)
        for i in range(12):
            _image(rng, k + 1, noise=150.0).save(folder / f"image_{i + 1:04d}.jpg", quality=95)
    monkeypatch.setenv("NCLAB_DATA", str(root))
    return root


def _tiny_protocol(device: str = "cpu", **stream) -> TransferProtocol:
    """VCI_PAPER with the sizes of a unit test: a small CNN on 16 x 16 crops, one epoch on ``device``."""
    tiny = {
        "data": {"image_size": 16, "workers": 0, "pin_memory": False},
        "model": {"name": "cnn", "options": {"channels": [4, 8], "hidden": 6}},
        "optim": {"lr": 0.05},
        "schedule": {"warmup_epochs": 0},
        "train": {"epochs": 1, "batch_size": 6, "device": device, "threads": 1},
        "measure": {"epochs": [1], "splits": ["train"]},
        "checkpoint": {"every": 1},
        "report": False,
    }
    tasks = (
        {"name": "caltech", "dataset": "caltech101", "options": {"train_per_class": 4}, "score": "mean_per_class"},
        {"name": "digits", "dataset": "digits", "per_class": 8, "test_per_class": 4},  # in memory: resized
    )
    return TransferProtocol(
        base=deep_merge(vci_pretrain_base(), tiny),
        taus=(0.5, 1.0, 2.0),
        lambdas=(0.5, 1.0, 2.0),
        downstream=tasks,
        lams=(1e-3, 1e1, 5),
        stream={"per_class": PER_CLASS, "batch_size": BATCH, "workers": 0, "cache_mb": 64, **stream},
        probe={"max_iter": 100},
    )


class _SpyStatsPass(streamed_mod.StatsPass):
    """Records whether each statistics pass keeps a feature cache (it must not: it streams)."""

    caches: ClassVar[list[bool]] = []

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        _SpyStatsPass.caches.append(self.cache is not None)


class _CountingLoader(torch.utils.data.DataLoader):
    """A DataLoader that records the size of every batch it yields, across all instances."""

    sizes: ClassVar[list[int]] = []

    def __iter__(self):
        for x, y in super().__iter__():
            _CountingLoader.sizes.append(int(x.shape[0]))
            yield x, y


def _vci_numpy(H: np.ndarray, y: np.ndarray, K: int) -> float:
    """VCI = 1 - Tr(Sigma_T^+ Sigma_B) / min(d, K - 1) [Xu & Liu 2023, Def. 5.3], empirical class weights."""
    H = H.astype(np.float64)
    mu = H.mean(0)
    Sigma_T = (H - mu).T @ (H - mu) / len(H)
    M = np.stack([H[y == k].mean(0) - mu for k in range(K)])
    Sigma_B = (M.T * np.bincount(y, minlength=K) / len(H)) @ M
    return float(1 - np.trace(np.linalg.pinv(Sigma_T, rcond=1e-12, hermitian=True) @ Sigma_B) / min(H.shape[1], K - 1))


def _direct(model, x, y, K):
    H = collect_features(model, x, layers=[model.penultimate_name], batch_size=len(x))[model.penultimate_name]
    return H, collapse_report(ClassStats.from_arrays(H, y, K))


def test_paper_study_is_the_paper_runs():
    """The paper scale's study resolves to exactly the runs the protocol test checks (names aside)."""
    spec = StudySpec.from_dict(vci_paper_study(VCI_PAPER))
    configs = vci_transfer_configs()
    assert len(spec.trials()) == len(configs) == 11
    for group, value, seed in spec.trials():
        ours = spec.run_config(group, value, seed).model_dump()
        theirs = configs[f"{group.name}={value:g}"].model_dump()
        ours.pop("name"), theirs.pop("name")
        assert ours == theirs
    assert [t["dataset"] for t in spec.downstream] == [t["name"] for t in spec.downstream]
    assert len(spec.downstream) == 10
    assert spec.stream.per_class == 50 and spec.stream.cache_mb == 8192  # 50 x 1000 = the paper's 50k subset
    assert spec.probe["lams"] == {"start": 1e-6, "stop": 1e6, "num": 97}


CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=CUDA)])
def test_paper_code_path_end_to_end_on_a_tiny_imagenet(data_root, tmp_path, monkeypatch, device):
    """On the CPU the direct recomputation matches to float32 rounding; on CUDA (cuDNN, TF32 convolutions, batch
    sizes that differ between the two computations) to 1e-3 of the metrics, and the probe to one test image."""
    tol = {"rel": 1e-5, "abs": 1e-9} if device == "cpu" else {"rel": 1e-3, "abs": 1e-6}
    monkeypatch.setattr(streamed_mod, "DataLoader", _CountingLoader)
    monkeypatch.setattr(streamed_mod, "StatsPass", _SpyStatsPass)
    _CountingLoader.sizes, _SpyStatsPass.caches = [], []
    raw = vci_paper_study(_tiny_protocol(device))
    summary = run_transfer_study(tmp_path / "study", raw, "paper", local=True)
    spec = StudySpec.from_dict(raw)
    import csv

    rows = list(csv.DictReader((tmp_path / "study" / "table.csv").open()))
    assert len(rows) == 6 and summary["runs"] == 6

    # every pass read batches of at most BATCH rows: per run, the measured subset (15 images: 4 batches), the val
    # split (9: 3) and caltech's train / test splits (8 and 16 images: 2 + 4); digits is in memory (no loader)
    K = len(WNIDS)
    assert max(_CountingLoader.sizes) == BATCH
    assert sum(_CountingLoader.sizes) == 6 * (PER_CLASS * K + N_VAL * K + 8 + 16)
    assert len(_CountingLoader.sizes) == 6 * (4 + 3 + 2 + 4)
    assert _SpyStatsPass.caches == [False] * 12  # the train subset and the val pass of each run: no feature kept

    # one run recomputed directly: its features in one forward pass, the metric, the probe
    group, value, seed = spec.trials()[0]
    cfg = spec.run_config(group, value, seed)
    from nclab.train.trainer import run_id

    row = next(r for r in rows if r["trial_id"] == run_id(cfg))
    model = build_model(cfg.model.name, (3, 16, 16), K, head=cfg.model.head.build_kwargs(), **cfg.model.options)
    run_dir = tmp_path / "study" / "runs" / run_id(cfg)
    model.load_state_dict(load_checkpoint(run_dir / "checkpoints" / "last.pt")["model"])
    model.to(device).eval()
    train = streamed_split(cfg, "train", per_class=PER_CLASS)
    x = torch.stack([train[i][0] for i in range(len(train))]).to(device)
    y = torch.as_tensor(train.targets).to(device)
    H, report = _direct(model, x, y, K)
    assert float(row["vci"]) == pytest.approx(_vci_numpy(H.cpu().numpy(), y.cpu().numpy(), K), **tol)
    assert int(row["measured_images"]) == PER_CLASS * K
    for metric in ("vci", "nc1", "trace_ratio", "within_class_cosine"):
        assert float(row[metric]) == pytest.approx(report[metric], **tol)
    val = streamed_split(cfg, "val")
    xv = torch.stack([val[i][0] for i in range(len(val))]).to(device)
    with torch.no_grad():
        p0 = float((model(xv).argmax(1).cpu().numpy() == val.targets).mean())
    assert float(row["pretrain_accuracy"]) == pytest.approx(p0, abs=1e-12)

    # the caltech probe refit on the directly computed features gives the same accuracy and strength
    splits = streamed_mod.task_splits(spec.downstream[0], cfg, K, spec.stream, torch.device(device))
    feats = {}
    for role, split in splits.items():
        xb, yb = zip(*split.batches(), strict=True)
        H, _ = _direct(model, torch.cat(xb), torch.cat(yb), split.K)
        feats[role] = (H.to(torch.float64).cpu().numpy(), torch.cat(yb).cpu().numpy())
    res = linear_probe(feats["train"], feats["test"], score="mean_per_class", K=2, **probe_options(spec.probe))
    if device == "cpu":
        assert float(row["acc_caltech"]) == pytest.approx(res.accuracy, abs=1e-12)
        assert float(row["lam_caltech"]) == pytest.approx(res.lam, rel=1e-12)
    else:  # 16 test images, 8 per class: one image moves the mean per-class accuracy by 1/16
        assert abs(float(row["acc_caltech"]) - res.accuracy) <= 1 / 16 + 1e-12
    assert int(row["batches_caltech"]) == 6  # 8 train + 16 test images in batches of 4
    assert int(row["batches_digits"]) == math.ceil(8 * 10 / BATCH) + math.ceil(4 * 10 / BATCH)

    # MLOG and the summary's r are numpy's over the table
    logit = [math.log(a / (1 - a)) for a in (float(row["acc_caltech"]), float(row["acc_digits"]))]
    p = float(row["pretrain_accuracy"])
    assert float(row["mlog"]) == pytest.approx(np.mean(logit) - math.log(p / (1 - p)), rel=1e-9)
    for g in ("tau", "lambda"):
        sel = [r for r in rows if r["group"] == g]
        v, m = np.array([float(r["vci"]) for r in sel]), np.array([float(r["mlog"]) for r in sel])
        assert summary["pearson_r"][f"{g}/vci"] == round(float(np.corrcoef(v, m)[0, 1]), 3)
    assert (tmp_path / "study" / "report.html").is_file()


def test_a_task_larger_than_the_cache_is_refused_with_its_size(data_root, tmp_path):
    raw = vci_paper_study(_tiny_protocol(cache_mb=1e-5))
    with pytest.raises(ValueError, match=r"downstream 'caltech' \(train split\).*float32.*stream.cache_mb"):
        run_transfer_study(tmp_path / "study", raw, "paper", local=True)


def test_paper_scale_without_imagenet_names_the_folder_and_layout(tmp_path, monkeypatch):
    from nclab.data import loaders
    from nclab.experiments import run

    monkeypatch.setenv("NCLAB_DATA", str(tmp_path / "data"))
    monkeypatch.setattr(loaders, "SYSTEM_DATA", tmp_path / "none")
    with pytest.raises(FileNotFoundError, match=r"imagenet: expected layout train/<wnid>/\*\.JPEG") as err:
        run("vci-transfer", tmp_path / "out", scale="paper")
    assert str(tmp_path / "data" / "imagenet") in str(err.value)
    assert "caltech101" in str(err.value) and "never downloads" in str(err.value)
    assert not (tmp_path / "out").exists()


def test_a_transformed_task_is_refused_on_streamed_data():
    spec = StudySpec.from_dict(vci_paper_study(_tiny_protocol()))
    task = {"name": "rot", "dataset": "digits", "transform": "rot90"}
    with pytest.raises(ValueError, match="downstream 'rot': transform 'rot90' applies to in-memory"):
        streamed_mod.task_splits(task, spec.run_config(*spec.trials()[0]), 3, spec.stream, torch.device("cpu"))


def test_an_in_memory_task_is_resized_antialiased_and_standardised_like_the_run():
    """An in-memory downstream dataset on a streamed run: grey Fashion-MNIST (28 x 28) becomes three equal
    channels, is shrunk to the run's 16 x 16 by the library's resize (antialiased bilinear, docs/conventions.md)
    and standardised with ImageNet's constants, as the run's own images."""
    from nclab.data import load
    from nclab.data.augment import IMAGENET_MEAN, IMAGENET_STD, resize_image

    spec = StudySpec.from_dict(vci_paper_study(_tiny_protocol()))
    cfg = spec.run_config(*spec.trials()[0])
    task = {"name": "fm", "dataset": "fashion-mnist", "per_class": 2, "test_per_class": 1}
    try:
        ds = load("fashion-mnist", "train", per_class=2, seed=0, normalize=False)
    except FileNotFoundError:
        pytest.skip("Fashion-MNIST is not installed")
    splits = streamed_mod.task_splits(task, cfg, 3, spec.stream, torch.device("cpu"))
    assert set(splits) == {"train", "test"} and splits["train"].N == 20 and splits["test"].N == 10
    x, y = (torch.cat(t) for t in zip(*splits["train"].batches(), strict=True))
    mean, std = (torch.tensor(c).view(1, 3, 1, 1) for c in (IMAGENET_MEAN, IMAGENET_STD))
    ref = (resize_image(ds.x.expand(-1, 3, -1, -1), (16, 16)) - mean) / std
    assert tuple(x.shape) == (20, 3, 16, 16) and torch.equal(y, ds.y)
    torch.testing.assert_close(x, ref, rtol=0, atol=1e-6)
    # the antialiased shrink is not the plain bilinear one: the difference is in the images, not in roundoff
    plain = torch.nn.functional.interpolate(ds.x.expand(-1, 3, -1, -1), size=(16, 16), mode="bilinear")
    assert float(((plain - mean) / std - x).abs().max()) > 0.05
