"""A transfer study's evaluation of one pretraining run on streamed data [Xu & Liu 2023, Sec. 6.3].

:func:`nclab.transfer.study.evaluate_run` holds a pretraining split and each downstream task in memory as
tensors; this module's :func:`evaluate_streamed_run` takes its place for a run on a streamed dataset
(ImageNet, ``nclab.data.open_images``), where nothing is held whole:

1. **collapse metrics**: one forward pass over ``per_class`` images per class of the pretraining training split
   (the paper's "50k ImageNet train subset": 50 x 1000), read in batches of ``batch_size`` by a ``DataLoader``
   with the run's test-time transform (:func:`nclab.train.feeds.eval_transform`); the penultimate features of
   each batch are folded into a :class:`~nclab.stats.ClassStats` (float64) and dropped
   (:class:`~nclab.measure.StatsPass` without a feature cache), so memory is one batch plus O(K d + d^2)
   whatever the split's size;
2. **p_0**: the same kind of pass over the held-out split counts the errors of the network's own head;
3. **probes**: each downstream split passes through the network in batches; its penultimate features ``(N, d)``
   float32 go into a :class:`~nclab.measure.FeatureCache` on the CPU whose budget for all splits of one task is
   ``cache_mb`` -- the L-BFGS probe needs the whole design matrix -- and a task that does not fit is refused
   with the size it needs. Downstream image datasets (:data:`nclab.data.IMAGE_DATASETS`) are streamed from their
   files with the run's test-time transform; the in-memory ones (``cifar10``, ``cifar100``, ``digits``, ...) are
   read unstandardised, and each batch is brought to the pretraining input's channel count (a grey image repeated
   over the channels, a colour image averaged over them), resized to its side with
   :func:`nclab.data.augment.resize_image` (antialiased bilinear) and standardised with the same constants as
   the run's images (docs/conventions.md, "Transfer probes").

What the probe costs at the paper's size: the cache holds ``N x d x 4`` bytes per split (CIFAR-10's 50,000 x 2048
training features: 391 MiB; Food-101's 75,750: 592 MiB) and the probe float64 copies of a task's splits (twice
that) while it runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader

from nclab.data import IMAGE_DATASETS, load, open_images
from nclab.data.augment import IMAGENET_MEAN, IMAGENET_STD, Normalize, resize_image
from nclab.data.catalog import IMAGE_SPLITS
from nclab.io.rundir import RunDir
from nclab.measure import Batch, FeatureCache, MeasurePlan, PassSink, StatsPass, forward_pass
from nclab.metrics import collapse_report
from nclab.nets import build_model
from nclab.train.checkpoint import load_checkpoint
from nclab.train.config import RunConfig
from nclab.train.feeds import eval_transform, streamed_split
from nclab.transfer.probe import Score, linear_probe, probe_options, task_data_options
from nclab.transfer.scores import log_odds_note, mean_log_odds, mlog
from nclab.validation import check_choice, check_int

__all__ = ["StreamOptions", "TaskSplit", "evaluate_streamed_run", "stream_features", "task_splits"]

_STREAM_KEYS = {"per_class", "batch_size", "workers", "cache_mb"}


@dataclass(frozen=True)
class StreamOptions:
    """How a streamed run is evaluated (the study's ``stream`` mapping).

    Parameters
    ----------
    per_class : int or None, default=None
        Images per class of the pretraining training split whose features give the collapse metrics (a balanced
        subset drawn with the run's seed; ``None``: the whole split). [Xu & Liu 2023, Sec. 6.3]: 50.
    batch_size : int, default=256
        Images per forward pass (memory grows with it, not with the dataset).
    workers : int, default=0
        ``DataLoader`` worker processes decoding the images.
    cache_mb : float, default=4096
        MiB of CPU memory for the float32 penultimate features of one downstream task's splits.

    Examples
    --------
    >>> StreamOptions.from_dict({"per_class": 50, "batch_size": 128}).cache_mb
    4096.0
    >>> StreamOptions.from_dict({"batch": 8})
    Traceback (most recent call last):
        ...
    ValueError: study.stream: unknown key(s) ['batch']; known: ['batch_size', 'cache_mb', 'per_class', 'workers']
    """

    per_class: int | None = None
    batch_size: int = 256
    workers: int = 0
    cache_mb: float = 4096.0

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any] | None) -> StreamOptions:
        """Validate ``raw`` (every key optional); errors name the key."""
        raw = dict(raw or {})
        extra = sorted(set(raw) - _STREAM_KEYS)
        if extra:
            raise ValueError(f"study.stream: unknown key(s) {extra}; known: {sorted(_STREAM_KEYS)}")
        per_class = raw.get("per_class")
        cache_mb = float(raw.get("cache_mb", 4096.0))
        if not (math.isfinite(cache_mb) and cache_mb > 0):
            raise ValueError(f"study.stream.cache_mb must be a positive number of MiB, got {raw['cache_mb']!r}")
        return cls(
            per_class=None if per_class is None else check_int(per_class, name="study.stream.per_class", low=1),
            batch_size=check_int(raw.get("batch_size", 256), name="study.stream.batch_size", low=1),
            workers=check_int(raw.get("workers", 0), name="study.stream.workers", low=0),
            cache_mb=cache_mb,
        )


#: A re-iterable pass: each call yields ``(inputs, labels)`` batches on the device.
Batches = Callable[[], Iterable[tuple[torch.Tensor, torch.Tensor]]]


@dataclass(frozen=True)
class TaskSplit:
    """One split of a downstream task as the network reads it (what :func:`task_splits` returns).

    Parameters
    ----------
    name : str
        The dataset's name of the split (``train``, ``val``, ``test``, ``trainval``, ...).
    batches : callable
        Re-iterable pass: each call yields ``(inputs, labels)`` batches on the device, inputs ``(B, C, H, W)`` as
        the network takes them, labels ``(B,)`` in ``0 .. K-1``.
    N : int
        Images in the split.
    K : int
        Classes of the task (not of the pretraining data).

    See Also
    --------
    task_splits, stream_features

    Examples
    --------
    >>> import torch
    >>> x, y = torch.zeros(5, 1, 4, 4), torch.tensor([0, 1, 0, 1, 1])
    >>> split = TaskSplit("train", lambda: [(x[:3], y[:3]), (x[3:], y[3:])], N=5, K=2)
    >>> [len(labels) for _, labels in split.batches()], split.N
    ([3, 2], 5)
    """

    name: str
    batches: Batches
    N: int
    K: int


def _loader(dataset: Any, opts: StreamOptions, device: torch.device) -> Batches:
    loader = DataLoader(
        dataset,
        batch_size=opts.batch_size,
        shuffle=False,
        num_workers=opts.workers,
        pin_memory=device.type == "cuda",
    )

    def batches() -> Iterable[tuple[torch.Tensor, torch.Tensor]]:
        for x, y in loader:
            yield x.to(device, non_blocking=True), y.to(device)

    return batches


def _constants(cfg: RunConfig) -> Normalize | None:
    # the run's own standardisation (nclab.train.feeds): ImageNet's, channel-averaged for grey images
    if not cfg.data.normalize:
        return None
    if cfg.data.options.get("mode") == "L":
        return Normalize((sum(IMAGENET_MEAN) / 3,), (sum(IMAGENET_STD) / 3,))
    return Normalize(IMAGENET_MEAN, IMAGENET_STD)


def _memory_batches(x: torch.Tensor, y: torch.Tensor, shape: Sequence[int], norm: Normalize | None,
                    opts: StreamOptions, device: torch.device) -> Batches:  # fmt: skip
    C, H, W = shape

    def batches() -> Iterable[tuple[torch.Tensor, torch.Tensor]]:
        for i in range(0, x.shape[0], opts.batch_size):
            xb = x[i : i + opts.batch_size].to(device)
            if xb.shape[1] != C:  # grey <-> colour: the channel mean, repeated
                xb = xb.mean(dim=1, keepdim=True).expand(-1, C, -1, -1)
            xb = resize_image(xb, (H, W))  # the library's resize: antialiased bilinear (docs/conventions.md)
            yield (xb if norm is None else norm(xb)), y[i : i + opts.batch_size].to(device)

    return batches


def task_splits(spec: Mapping[str, Any], cfg: RunConfig, K: int, opts: StreamOptions,
                device: torch.device) -> dict[str, TaskSplit]:  # fmt: skip
    """The ``train``, ``test`` (and, with ``val_split``, ``val``) splits of the downstream task ``spec`` as the
    network of ``cfg`` reads them.

    An image dataset (:data:`nclab.data.IMAGE_DATASETS`) is streamed from its files with the run's test-time
    transform (:func:`nclab.train.feeds.eval_transform`); an in-memory one is read unstandardised and each batch is
    brought to the run's channel count (channel mean), resized with :func:`nclab.data.augment.resize_image` and
    standardised with the run's constants (docs/conventions.md, "Transfer probes"). Nothing is read until a
    split's ``batches`` is iterated.

    Parameters
    ----------
    spec : mapping
        The task: keys of :func:`nclab.transfer.study.make_task` (``name``, ``dataset``, ``classes``,
        ``per_class``, ``test_per_class``, ``score``, ``root``, ``options``; ``transform`` must be ``none``),
        plus ``train_split`` / ``val_split`` / ``test_split``: the dataset's split names (default: its first
        split, no validation split, ``test``).
    cfg : RunConfig
        The pretraining run (a streamed dataset: ``cfg.data.image_size`` and ``options.mode`` give the input).
    K : int
        Classes of the pretraining run (its transform's; the task's own ``K`` is on each split).
    opts : StreamOptions
        ``batch_size`` and ``workers`` of the passes.
    device : torch.device
        Where the batches go.

    Returns
    -------
    dict of str to TaskSplit
        ``train``, ``test`` and, with ``val_split``, ``val``.

    Raises
    ------
    ValueError
        A task with a ``transform`` (those apply to in-memory pretraining only).

    See Also
    --------
    stream_features, evaluate_streamed_run, nclab.transfer.study.make_task

    Examples
    --------
    >>> import torch
    >>> from nclab.train.config import resolve_config
    >>> cfg = resolve_config({"data": {"name": "imagenet", "image_size": 16}})
    >>> task = {"name": "d", "dataset": "digits", "per_class": 2, "test_per_class": 1}
    >>> splits = task_splits(task, cfg, 1000, StreamOptions(batch_size=8), torch.device("cpu"))
    >>> {role: (s.name, s.N, s.K) for role, s in splits.items()}
    {'train': ('train', 20, 10), 'test': ('test', 10, 10)}
    >>> x, y = next(iter(splits["train"].batches()))
    >>> tuple(x.shape), tuple(y.shape)
    ((8, 3, 16, 16), (8,))
    """
    name = str(spec["dataset"])
    if spec.get("transform", "none") != "none":  # a transformed task is built in memory (study.make_task) only
        raise ValueError(
            f"downstream {spec.get('name')!r}: transform {spec['transform']!r} applies to in-memory pretraining "
            "data; a streamed study probes the datasets as they are"
        )
    opts_ = task_data_options(spec)
    size = int(cfg.data.image_size or 0)
    mode = str(cfg.data.options.get("mode", "RGB"))
    splits = {"train": spec.get("train_split"), "val": spec.get("val_split"), "test": spec.get("test_split")}
    first = IMAGE_SPLITS[name][0] if name in IMAGE_DATASETS else "train"
    splits = {"train": splits["train"] or first, "val": splits["val"], "test": splits["test"] or "test"}
    out = {}
    for role, split in splits.items():
        if split is None:
            continue
        per_class = spec.get("per_class") if role != "test" else spec.get("test_per_class")
        if name in IMAGE_DATASETS:
            files = open_images(name, split, spec.get("root"), per_class=per_class, seed=0, mode=mode, **opts_)
            files = files.with_transform(eval_transform(cfg, K))
            out[role] = TaskSplit(split, _loader(files, opts, device), len(files), files.K)
        else:
            ds = load(name, split, spec.get("root"), per_class=per_class, seed=0, normalize=False, **opts_)
            shape = (1 if mode == "L" else 3, size, size)
            batches = _memory_batches(ds.x, ds.y, shape, _constants(cfg), opts, device)
            out[role] = TaskSplit(split, batches, len(ds), ds.K)
    return out


class _CacheSink(PassSink):
    """Writes the penultimate features of each batch into a CPU :class:`FeatureCache`; refuses when full."""

    def __init__(self, what: str, N: int, budget_mb: float) -> None:
        self.what, self.budget_mb = what, budget_mb
        self.cache = FeatureCache(N, budget_mb)
        self.labels: list[torch.Tensor] = []
        self.batches = 0

    def __call__(self, name: str, f: torch.Tensor, batch: Batch) -> None:
        if not self.cache.store(name, f.detach().float().cpu(), batch.start):
            need = self.cache.N * f.shape[1] * 4 / 2**20
            raise ValueError(
                f"{self.what}: its features ({self.cache.N} images x {f.shape[1]} float32 = {need:.0f} MiB) exceed "
                f"what is left of study.stream.cache_mb ({self.budget_mb:.0f} MiB for the task's splits): raise "
                "stream.cache_mb or probe fewer images (the task's per_class)"
            )

    def after_batch(self, out: Any, batch: Batch) -> None:
        self.labels.append(batch.labels.cpu())
        self.batches += 1


def stream_features(model: nn.Module, split: TaskSplit, K: int, budget_mb: float,
                    what: str) -> tuple[torch.Tensor, torch.Tensor, int]:  # fmt: skip
    """The penultimate features of ``split``, read batch by batch into a CPU cache of at most ``budget_mb`` MiB.

    The cache holds ``N x d`` float32 values, ``4 N d / 2^20`` MiB; the linear probe needs the whole design matrix,
    so a split that needs more than ``budget_mb`` is refused before the rest of it is read.

    Parameters
    ----------
    model : CollapseNet
        The network (``model.penultimate_name``), in eval mode, on the device of the split's batches.
    split : TaskSplit
        The batches to read (:func:`task_splits`).
    K : int
        Classes of the split (the measurement plan's).
    budget_mb : float
        MiB of CPU memory left for the features.
    what : str
        How an error names the split (e.g. ``"downstream 'dtd' (val split)"``).

    Returns
    -------
    H : torch.Tensor
        ``(N, d)`` float32 on the CPU, rows in the split's order.
    y : torch.Tensor
        ``(N,)`` labels.
    batches : int
        Batches read.

    Raises
    ------
    ValueError
        The features exceed ``budget_mb``; the message names ``what``, the size they need and
        ``study.stream.cache_mb``.

    See Also
    --------
    task_splits, nclab.measure.FeatureCache

    Examples
    --------
    >>> import torch
    >>> from nclab.nets import build_model
    >>> x, y = torch.randn(5, 1, 8, 8), torch.tensor([0, 1, 0, 1, 1])
    >>> split = TaskSplit("train", lambda: [(x[:3], y[:3]), (x[3:], y[3:])], N=5, K=2)
    >>> model = build_model("cnn", (1, 8, 8), 2, channels=[4], hidden=6).eval()
    >>> H, labels, n = stream_features(model, split, 2, 1.0, "example")
    >>> tuple(H.shape), H.dtype, labels.tolist(), n
    ((5, 6), torch.float32, [0, 1, 0, 1, 1], 2)
    """
    name = str(model.penultimate_name)
    plan = MeasurePlan.of(model, max(K, 2), layers=[name], penultimate=name, full_layers=[name])
    sink = _CacheSink(what, split.N, budget_mb)
    forward_pass(model, split.batches, plan, sink)
    H = sink.cache.complete()[name]
    return H, torch.cat(sink.labels), sink.batches


def _split_pass(model: nn.Module, batches: Batches, K: int) -> StatsPass:
    # y=None: no feature cache; each batch's features are folded into float64 statistics and dropped
    name = str(model.penultimate_name)
    plan = MeasurePlan.of(model, K, layers=[name], penultimate=name)
    p1 = StatsPass(plan, None, None)
    forward_pass(model, batches, plan, p1)
    p1.finish()
    return p1


def evaluate_streamed_run(
    run_dir: str | Path,
    cfg: RunConfig,
    tasks_spec: Sequence[Mapping[str, Any]],
    probe: Mapping[str, Any],
    opts: StreamOptions,
) -> dict[str, Any]:
    """:func:`nclab.transfer.study.evaluate_run` for a run on a streamed dataset (see the module docstring).

    Parameters
    ----------
    run_dir : a finished run directory of ``cfg`` (``checkpoints/last.pt``)
    cfg : the run's config (``cfg.data.streamed``)
    tasks_spec : downstream tasks (:func:`task_splits`)
    probe : keyword arguments of :func:`nclab.transfer.linear_probe` (:func:`nclab.transfer.probe_options`)
    opts : the pass's sizes

    Returns
    -------
    dict: the collapse metrics of the measured training subset, ``measured_images``, ``pretrain_accuracy``,
    ``acc_<task>`` / ``lam_<task>`` / ``batches_<task>`` per task, ``mlo``, ``mlog`` and ``notes``, as
    :func:`~nclab.transfer.study.evaluate_run`'s.
    """
    device = torch.device(cfg.train.device)
    train = streamed_split(cfg, cfg.data.train_split, per_class=opts.per_class)
    test = streamed_split(cfg, cfg.data.held_out_split())
    K, size = train.K, int(cfg.data.image_size or 0)
    shape = (1 if cfg.data.options.get("mode") == "L" else 3, size, size)
    model = build_model(cfg.model.name, shape, K, head=cfg.model.head.build_kwargs(), **cfg.model.options)
    model.load_state_dict(load_checkpoint(RunDir(run_dir).checkpoint)["model"])
    model.to(device).eval()
    p1 = _split_pass(model, _loader(train, opts, device), K)
    row: dict[str, Any] = dict(collapse_report(p1.stats[str(model.penultimate_name)]))
    row["measured_images"] = p1.counts.seen
    row["pretrain_accuracy"] = 1.0 - _split_pass(model, _loader(test, opts, device), K).counts.error
    accs, notes, kw = [], [], probe_options(probe)
    kw.setdefault("device", device)  # the L-BFGS path on the GPU: 97 strengths of (75k x 2048) float64 problems
    for spec in tasks_spec:
        task = str(spec["name"])
        splits = task_splits(spec, cfg, K, opts, device)
        feats, left, batches, K_task = {}, opts.cache_mb, 0, splits["train"].K
        for role, split in splits.items():
            H, y, n = stream_features(model, split, K_task, left, f"downstream {task!r} ({split.name} split)")
            left -= H.numel() * H.element_size() / 2**20
            feats[role], batches = (H, y), batches + n
        score = check_choice(spec.get("score", "top1"), Score, name=f"downstream {task!r}: score")
        # the probe solves in float64: its copies of the splits live only while it runs
        design = {role: (H.to(torch.float64).numpy(), y.numpy()) for role, (H, y) in feats.items()}
        del feats
        res = linear_probe(design["train"], design["test"], design.get("val"), score=score, K=K_task, **kw)
        del design
        row.update({f"acc_{task}": res.accuracy, f"lam_{task}": res.lam, f"batches_{task}": batches})
        accs.append(res.accuracy)
        notes += [f"{task}: {note}" for note in res.notes]
    row["mlo"] = mean_log_odds(accs)
    row["mlog"] = mlog(accs, row["pretrain_accuracy"])
    infinite = log_odds_note(dict(zip([t["name"] for t in tasks_spec], accs, strict=True)), row["pretrain_accuracy"])
    row["notes"] = [*notes, *([infinite] if infinite is not None else [])]
    return row
