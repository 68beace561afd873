"""The data of a run as the trainer reads it: :func:`load_run_data`.

A :class:`RunData` holds the training feed (the mini-batches of each epoch, augmented and mixed as the config's
``data.augment`` says, on the training device) and each measured split (what the measurement passes and the
zero-error check read, with the test-time transform). Two kinds:

* **in memory** (``nclab.data.load``): the split's tensors are sliced in place, in the order drawn from
  ``(seed, epoch)`` -- exactly the loop of the runs before augmentation existed. With a recipe the images are
  loaded unstandardised (``normalize=False``, so crops pad with black), each mini-batch is augmented on the
  device with a generator seeded by ``(seed, epoch, batch)`` (:func:`nclab.data.rng.batch_generator`), and the
  measured splits are standardised once;
* **streamed** (``nclab.data.open_images``): a ``DataLoader`` over the image files with ``data.workers`` worker
  processes, ``pin_memory`` (CUDA only) and ``persistent_workers``. Each item is decoded and augmented in a worker
  with the generator ``(seed, epoch, index)``, so an epoch's augmentation does not depend on the number of workers;
  the sampler hands the workers ``(epoch, index)`` keys, so persistent workers see each new epoch too. The
  measured splits are read in order in batches of ``measure.batch_size`` (memory: a few batches of decoded images
  and the measurement's statistics, whatever the dataset's size).

Mixup / CutMix (``data.augment: deit``) mixes each training batch after it reaches the device, drawing from
``(seed, epoch, batch)``; the batch then carries soft targets ``(B, K)``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, Subset

from nclab.data import ArrayDataset, ImageFiles, load, normalization, open_images
from nclab.data.augment import IMAGENET_MEAN, IMAGENET_STD
from nclab.data.recipes import Recipe, make_recipe
from nclab.data.rng import batch_generator
from nclab.measure import (
    MeasurePlan,
    SplitMeasurement,
    autocast,
    is_distributed,
    iterable_batches,
    measure_batches,
    measure_split,
)
from nclab.stats import ClassStats
from nclab.train import distributed as ddp
from nclab.train.config import RunConfig

__all__ = [
    "EvalSplit",
    "RunData",
    "TrainFeed",
    "TrainingBatch",
    "eval_transform",
    "load_run_data",
    "streamed_split",
]


@dataclass(frozen=True)
class TrainingBatch:
    """One training mini-batch on the device: inputs ``x``, labels ``y (B,)`` and the loss's ``target`` (``y``
    itself, or soft targets ``(B, K)`` of a mixed batch)."""

    x: torch.Tensor
    y: torch.Tensor
    target: torch.Tensor


def _order(N: int, seed: int, epoch: int) -> torch.Tensor:
    """This process's sample order of ``epoch`` (the same draw as the runs before streamed data existed)."""
    if is_distributed():
        return ddp.train_order(N, seed, epoch)
    gen = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
    return torch.randperm(N, generator=gen)


class TrainFeed:
    """The training mini-batches of each epoch (see the module docstring); ``batch_size`` is this process's."""

    def __init__(self, recipe: Recipe, seed: int, batch_size: int, drop_last: bool, device: torch.device) -> None:
        self.recipe, self.seed, self.batch_size, self.drop_last, self.device = (
            recipe,
            seed,
            batch_size,
            drop_last,
            device,
        )

    def __len__(self) -> int:
        raise NotImplementedError

    def num_batches(self) -> int:
        """Mini-batches per epoch in this process (the same every epoch)."""
        n = len(_order(len(self), self.seed, 0)) if is_distributed() else len(self)
        return n // self.batch_size if self.drop_last else math.ceil(n / self.batch_size)

    def batches(self, epoch: int) -> Iterator[TrainingBatch]:
        raise NotImplementedError

    def _mixed(self, x: torch.Tensor, y: torch.Tensor, gen: torch.Generator) -> TrainingBatch:
        if self.recipe.mixing is None:
            return TrainingBatch(x, y, y)
        xm, soft = self.recipe.mixing(x, y, gen)
        return TrainingBatch(xm, y, soft)


class MemoryFeed(TrainFeed):
    """Slices of an in-memory split, augmented per batch on the device."""

    def __init__(self, data: ArrayDataset, recipe: Recipe, **kw: Any) -> None:
        super().__init__(recipe, **kw)
        self.data = data

    def __len__(self) -> int:
        return len(self.data)

    def batches(self, epoch: int) -> Iterator[TrainingBatch]:
        data, bs, aug = self.data, self.batch_size, self.recipe.train
        perm = _order(len(data), self.seed, epoch)
        for i in range(self.num_batches()):
            idx = perm[i * bs : (i + 1) * bs]
            xb, yb = data.x[idx].to(self.device), data.y[idx].to(self.device)
            if aug is None and self.recipe.mixing is None:
                yield TrainingBatch(xb, yb, yb)
                continue
            gen = batch_generator(self.seed, epoch, i)
            yield self._mixed(xb if aug is None else aug(xb, gen), yb, gen)


class _EpochItems(Dataset):
    """``files[index]`` with the augmentation of ``epoch``, for keys ``(epoch, index)``: a worker process holds
    its own copy of ``files`` and moves it to the key's epoch (persistent workers included)."""

    def __init__(self, files: ImageFiles) -> None:
        self.files = files

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, key: tuple[int, int]) -> tuple[torch.Tensor, int]:
        epoch, index = key
        if self.files.epoch != epoch:
            self.files.set_epoch(epoch)
        return self.files[index]


class _EpochBatches:
    """A batch sampler: the batches of ``(epoch, index)`` keys of the current :attr:`epoch` (set before each
    iteration), in the order of :func:`_order`."""

    def __init__(self, N: int, seed: int, batch_size: int, drop_last: bool) -> None:
        self.N, self.seed, self.batch_size, self.drop_last = N, seed, batch_size, drop_last
        self.epoch = 0

    def __iter__(self) -> Iterator[list[tuple[int, int]]]:
        order, bs = _order(self.N, self.seed, self.epoch).tolist(), self.batch_size
        stop = len(order) - len(order) % bs if self.drop_last else len(order)
        for s in range(0, stop, bs):
            yield [(self.epoch, i) for i in order[s : s + bs]]

    def __len__(self) -> int:
        n = len(_order(self.N, self.seed, 0)) if is_distributed() else self.N
        return n // self.batch_size if self.drop_last else math.ceil(n / self.batch_size)


def _loader(dataset: Dataset, cfg: RunConfig, device: torch.device, **kw: Any) -> DataLoader:
    d = cfg.data
    return DataLoader(
        dataset,
        num_workers=d.workers,
        pin_memory=d.pin_memory and device.type == "cuda",  # pinning needs CUDA: a no-op elsewhere
        persistent_workers=d.persistent_workers and d.workers > 0,
        **kw,
    )


class StreamFeed(TrainFeed):
    """A DataLoader over image files decoded and augmented in its workers (one loader for the run)."""

    def __init__(self, files: ImageFiles, recipe: Recipe, cfg: RunConfig, **kw: Any) -> None:
        super().__init__(recipe, **kw)
        self.files, self.cfg = files, cfg
        self.sampler = _EpochBatches(len(files), self.seed, self.batch_size, self.drop_last)
        self._loader: DataLoader | None = None

    @property
    def loader(self) -> DataLoader:
        """The run's DataLoader, made on first use (its workers start with the first epoch)."""
        if self._loader is None:
            self._loader = _loader(_EpochItems(self.files), self.cfg, self.device, batch_sampler=self.sampler)
        return self._loader

    def __len__(self) -> int:
        return len(self.files)

    def batches(self, epoch: int) -> Iterator[TrainingBatch]:
        self.sampler.epoch = epoch
        for i, (xb, yb) in enumerate(self.loader):
            xb, yb = xb.to(self.device, non_blocking=True), yb.to(self.device, non_blocking=True)
            if self.recipe.mixing is None:
                yield TrainingBatch(xb, yb, yb)
            else:
                yield self._mixed(xb, yb, batch_generator(self.seed, epoch, i))


class EvalSplit:
    """One measured split: :meth:`measure` (the passes of :mod:`nclab.measure`) and :meth:`wrong` (the
    zero-error check), each over this process's shard (:func:`nclab.train.distributed.eval_shard`)."""

    N: int
    K: int

    def shard_size(self, batch_size: int) -> int:
        part = ddp.eval_shard(self.N, batch_size)
        return len(range(self.N)[part])

    def measure(
        self, model: nn.Module, plan: MeasurePlan, reference: Mapping[str, ClassStats] | None
    ) -> SplitMeasurement:
        raise NotImplementedError

    def wrong(self, model: nn.Module, batch_size: int, dtype: torch.dtype | None) -> int:
        """Misclassified samples of this process's shard (eval mode is the caller's)."""
        raise NotImplementedError


class MemorySplit(EvalSplit):
    def __init__(self, x: torch.Tensor, data: ArrayDataset, device: torch.device) -> None:
        self.x, self.y, self.device = x, data.y, device
        self.N, self.K = len(data), data.K

    def measure(
        self, model: nn.Module, plan: MeasurePlan, reference: Mapping[str, ClassStats] | None
    ) -> SplitMeasurement:
        part = ddp.eval_shard(self.N, plan.batch_size)
        x, y = self.x[part].to(self.device), self.y[part].to(self.device)
        return measure_split(model, (x, y), plan, reference=reference)

    def wrong(self, model: nn.Module, batch_size: int, dtype: torch.dtype | None) -> int:
        part = ddp.eval_shard(self.N, batch_size)
        x, y, wrong = self.x[part], self.y[part], 0
        with autocast(model, dtype):
            for s in range(0, len(y), batch_size):
                out = model(x[s : s + batch_size].to(self.device))
                wrong += int((out.argmax(1) != y[s : s + batch_size].to(self.device)).sum())
        return wrong


class StreamSplit(EvalSplit):
    def __init__(self, files: ImageFiles, cfg: RunConfig, device: torch.device) -> None:
        self.files, self.cfg, self.device = files, cfg, device
        self.N, self.K = len(files), files.K
        self._loaders: dict[int, DataLoader] = {}  # per batch size: persistent workers stay with their loader

    def _part(self, batch_size: int) -> tuple[DataLoader, torch.Tensor]:
        part = ddp.eval_shard(self.N, batch_size)
        rows = range(self.N)[part]
        if batch_size not in self._loaders:
            self._loaders[batch_size] = _loader(
                Subset(self.files, rows), self.cfg, self.device, batch_size=batch_size, shuffle=False
            )
        return self._loaders[batch_size], torch.from_numpy(self.files.targets[part.start : part.stop])

    def measure(
        self, model: nn.Module, plan: MeasurePlan, reference: Mapping[str, ClassStats] | None
    ) -> SplitMeasurement:
        loader, y = self._part(plan.batch_size)
        return measure_batches(
            model, iterable_batches(loader, self.device), y.to(self.device), plan, reference=reference
        )

    def wrong(self, model: nn.Module, batch_size: int, dtype: torch.dtype | None) -> int:
        loader, _ = self._part(batch_size)
        wrong = 0
        with autocast(model, dtype):
            for xb, yb in loader:
                out = model(xb.to(self.device, non_blocking=True))
                wrong += int((out.argmax(1) != yb.to(self.device)).sum())
        return wrong


@dataclass
class RunData:
    """A run's data: the training :class:`TrainFeed`, the measured splits (``splits["test"]`` is ``None`` when
    the test split is not measured), the input shape, the class count and the recipe."""

    train: TrainFeed
    splits: dict[str, EvalSplit | None]
    input_shape: tuple[int, ...]
    K: int
    recipe: Recipe


def _memory(cfg: RunConfig, device: torch.device, batch_size: int) -> RunData:
    d = cfg.data
    constants = None
    if d.augment is not None and d.normalize:
        try:
            constants = normalization(d.name)
        except ValueError:  # digits: already in [0, 1], never standardised
            constants = None
    # with a recipe the pixels stay in [0, 1] until its Normalize: crops and rotations fill with black
    common = dict(root=d.root, seed=cfg.seed, pad_to=d.pad_to, normalize=d.normalize and constants is None, **d.options)
    train = load(d.name, "train", per_class=d.per_class, **common)
    test = load(d.name, "test", per_class=d.test_per_class, **common) if "test" in cfg.measure.splits else None
    if test is not None and test.K > train.K:  # a dataset that infers K per split (features)
        _refuse_unseen_classes(cfg, train, test)
    mean, std = constants if constants is not None else (None, None)
    recipe = make_recipe(
        d.augment,
        size=tuple(train.input_shape[1:]) if d.augment is not None else 1,
        mean=mean,
        std=std,
        streamed=False,
        K=train.K,
        label_smoothing=cfg.loss.label_smoothing,
    )

    def view(ds: ArrayDataset) -> torch.Tensor:
        return ds.x if recipe.eval is None else recipe.eval(ds.x)

    feed = MemoryFeed(train, recipe, seed=cfg.seed, batch_size=batch_size, drop_last=cfg.train.drop_last, device=device)
    splits: dict[str, EvalSplit | None] = {
        "train": MemorySplit(view(train), train, device),
        "test": None if test is None else MemorySplit(view(test), test, device),
    }
    return RunData(feed, splits, tuple(train.input_shape), train.K, recipe)


def _refuse_unseen_classes(cfg: RunConfig, train: ArrayDataset, test: ArrayDataset) -> None:
    """Refuse a test split with labels its train split lacks: the network has ``train.K`` outputs, so a test
    label ``>= train.K`` cannot be measured (it failed in the loss as ``IndexError: Target 3 is out of bounds``).
    A test split lacking some of the train split's classes is fine (the run's K is the train split's)."""
    d = cfg.data
    unseen = torch.unique(test.y[test.y >= train.K]).tolist()
    count = int((test.y >= train.K).sum())
    where = f" in {d.root}" if d.root is not None else ""
    raise ValueError(
        f"the test split of {d.name!r}{where} has the label(s) {unseen[:5]} ({count} sample(s)) that its train split "
        f"lacks (K={train.K} from the train split's labels): a network with {train.K} outputs cannot be measured "
        f"on them; drop those samples from the test split, or give the number of classes with data.options.K"
    )


def _stream_recipe(cfg: RunConfig, K: int) -> tuple[int, Recipe]:
    """The channel count and the recipe of a streamed dataset: ImageNet's mean and std (their channel averages
    for grey images, ``options.mode: L``) unless ``data.normalize`` is false."""
    d = cfg.data
    channels = 1 if d.options.get("mode") == "L" else 3
    mean = IMAGENET_MEAN if channels == 3 else (sum(IMAGENET_MEAN) / 3,)
    std = IMAGENET_STD if channels == 3 else (sum(IMAGENET_STD) / 3,)
    recipe = make_recipe(
        d.augment,
        size=int(d.image_size or 0),
        mean=mean if d.normalize else None,
        std=std if d.normalize else None,
        streamed=True,
        K=K,
        label_smoothing=cfg.loss.label_smoothing,
        eval_resize=d.eval_resize,
    )
    return channels, recipe


def _streamed(cfg: RunConfig, device: torch.device, batch_size: int) -> RunData:
    d = cfg.data
    options = dict(d.options)
    size = int(d.image_size or 0)
    train = open_images(d.name, d.train_split, d.root, per_class=d.per_class, seed=cfg.seed, **options)
    channels, recipe = _stream_recipe(cfg, train.K)
    feed = StreamFeed(
        train.with_transform(recipe.train),
        recipe,
        cfg,
        seed=cfg.seed,
        batch_size=batch_size,
        drop_last=cfg.train.drop_last,
        device=device,
    )
    splits: dict[str, EvalSplit | None] = {"train": StreamSplit(train.with_transform(recipe.eval), cfg, device)}
    splits["test"] = None
    if "test" in cfg.measure.splits:
        test = open_images(d.name, d.held_out_split(), d.root, per_class=d.test_per_class, seed=cfg.seed, **options)
        if test.classes != train.classes:
            raise ValueError(
                f"the {d.held_out_split()} split of {d.name!r} has other classes than its {d.train_split} split "
                f"({len(test.classes)} vs {len(train.classes)}, first {test.classes[:3]} vs {train.classes[:3]})"
            )
        splits["test"] = StreamSplit(test.with_transform(recipe.eval), cfg, device)
    return RunData(feed, splits, (channels, size, size), train.K, recipe)


def streamed_split(cfg: RunConfig, split: str, *, per_class: int | None = None) -> ImageFiles:
    """Split ``split`` of the run's streamed dataset with the run's test-time transform (what its measurements
    read; ``nclab extract`` reads the same)."""
    d = cfg.data
    files = open_images(d.name, split, d.root, per_class=per_class, seed=cfg.seed, **d.options)
    return files.with_transform(_stream_recipe(cfg, files.K)[1].eval)


def eval_transform(cfg: RunConfig, K: int) -> Any:
    """The test-time transform of the run's streamed images (resize, centre crop, standardise): what its
    measurements read, and what a transfer probe applies to another image dataset (:mod:`nclab.transfer`).

    The shorter side is resized to ``data.eval_resize`` (default per augmentation recipe), the centre
    ``image_size x image_size`` crop is taken, and the pixels, scaled to ``[0, 1]``, are standardised with ImageNet's
    mean and std (their channel averages for grey runs, ``options.mode: L``) unless ``data.normalize`` is false.

    Parameters
    ----------
    cfg : RunConfig
        A run on a streamed dataset (``cfg.data.name`` one of :data:`nclab.data.IMAGE_DATASETS`).
    K : int
        Classes of the run (the recipe's; the test-time transform does not depend on it).

    Returns
    -------
    callable
        ``transform(image)``: a decoded image ``(C, H, W)`` uint8 to ``(C, image_size, image_size)`` float32.

    See Also
    --------
    streamed_split, nclab.data.ImageFiles.with_transform

    Examples
    --------
    >>> import torch
    >>> from nclab.train.config import resolve_config
    >>> cfg = resolve_config({"data": {"name": "imagenet", "image_size": 16}})
    >>> t = eval_transform(cfg, 1000)
    >>> out = t(torch.full((3, 40, 30), 255, dtype=torch.uint8))
    >>> tuple(out.shape), out.dtype, round(float(out[0, 0, 0]), 4)  # (1 - 0.485) / 0.229
    ((3, 16, 16), torch.float32, 2.2489)
    """
    return _stream_recipe(cfg, K)[1].eval


def load_run_data(cfg: RunConfig, device: torch.device, batch_size: int) -> RunData:
    """The data of ``cfg`` (see the module docstring); ``batch_size`` is this process's share of
    ``train.batch_size``. Raises what the loaders raise (``DatasetNotFoundError``, ``CorruptDatasetError``,
    ``ValueError`` for a value only they can judge)."""
    return (_streamed if cfg.data.streamed else _memory)(cfg, device, batch_size)
