"""The torch.distributed plumbing of a DDP training run, in one place.

A run launched by ``torchrun --nproc_per_node=N -m nclab train CONFIG.yaml`` (or ``nclab train --nproc N``)
finds ``RANK`` / ``WORLD_SIZE`` in its environment; :func:`session` then joins the process group (gloo on the
CPU, NCCL on CUDA, with a timeout so that a lost rank ends the run instead of hanging it) and leaves it at the
end. Everything else here is a no-op in a single process, so the trainer calls it unconditionally:

- :func:`world_size`, :func:`is_main`: who this process is (rank 0 alone writes the run directory, the
  checkpoints and the report; :func:`nclab.measure.rank` and :func:`nclab.measure.is_distributed` are the
  measurement engine's, read here too);
- :func:`per_rank_batch`: the config's batch size is the *global* one, split evenly over the ranks;
- :func:`train_order`: this rank's part of an epoch (``DistributedSampler`` seeded with the run's seed and
  ``set_epoch``; it pads with repeated samples so every rank takes the same number of steps);
- :func:`eval_shard`: this rank's part of a split for a measurement, *without* padding (a duplicated sample
  would enter the sums twice): contiguous, cut at the measurement's batch boundaries so every sample is computed
  in the same batch as in a single process (the rows then agree with one process to rounding);
- :func:`sum_all`: plain sums (losses, error counts, sample counts) over the ranks; the statistics themselves
  reduce with their accumulators' exact ``all_reduce`` (:mod:`nclab.stats`);
- :func:`training_module`: the network as one ``forward(x) -> (logits, h)`` module, wrapped in
  ``DistributedDataParallel`` when distributed (gradients averaged over the ranks: every loss here is a batch
  mean and every rank's batch has the same size, so the average is the global batch's gradient);
- :func:`broadcast`, :func:`barrier`;
- DDP's notice that a gradient's layout differs from its bucket's is shown by rank 0 alone, and not at all when
  the layouts differ only in size-1 dimensions (:func:`harmless_layout_notice`).
"""

from __future__ import annotations

import datetime
import math
import os
import re
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DistributedSampler

from nclab.measure.distributed import is_distributed, rank

if TYPE_CHECKING:
    from nclab.nets.base import CollapseNet

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "LAYOUT_NOTICE",
    "TIMEOUT_ENV",
    "barrier",
    "broadcast",
    "device_for",
    "eval_shard",
    "harmless_layout_notice",
    "is_main",
    "launched",
    "per_rank_batch",
    "session",
    "sum_all",
    "train_order",
    "training_module",
    "world_size",
]

#: Seconds a collective waits for the other ranks before the run fails (a rank killed mid-run, a hung node).
#: Long enough for rank 0 to write a checkpoint or a report while the others wait at the next collective.
DEFAULT_TIMEOUT_S = 600.0
#: Environment variable overriding :data:`DEFAULT_TIMEOUT_S`.
TIMEOUT_ENV = "NCLAB_DDP_TIMEOUT_S"


def launched() -> bool:
    """Whether this process was started by ``torchrun`` (or another launcher setting ``RANK`` and
    ``WORLD_SIZE``) with more than one rank."""
    return "RANK" in os.environ and int(os.environ.get("WORLD_SIZE", "1")) > 1


def _rank() -> int:
    """The rank in the process group (0 without one): what the shards are cut by."""
    return dist.get_rank() if is_distributed() else 0


def world_size() -> int:
    """The number of ranks (1 in a single process)."""
    return dist.get_world_size() if is_distributed() else 1


def is_main() -> bool:
    """Whether this process is rank 0, the one that writes."""
    return rank() == 0


def device_for(device: str) -> torch.device:
    """The device of this rank: ``cuda`` becomes ``cuda:LOCAL_RANK`` under a launcher, anything else is kept."""
    dev = torch.device(device)
    if dev.type == "cuda" and dev.index is None and "LOCAL_RANK" in os.environ:
        return torch.device("cuda", int(os.environ["LOCAL_RANK"]))
    return dev


@contextmanager
def session(device: str, timeout_s: float | None = None) -> Iterator[None]:
    """Join the process group for the block when launched by ``torchrun`` and not already in one (left at the
    end); otherwise do nothing. Backend: NCCL for a CUDA ``device``, gloo otherwise. ``timeout_s`` (default:
    ``$NCLAB_DDP_TIMEOUT_S`` or :data:`DEFAULT_TIMEOUT_S`) bounds every collective."""
    if not launched() or dist.is_initialized():
        yield
        return
    dev = device_for(device)
    timeout = float(timeout_s if timeout_s is not None else os.environ.get(TIMEOUT_ENV, DEFAULT_TIMEOUT_S))
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    backend = "nccl" if dev.type == "cuda" else "gloo"
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout))
    try:
        yield
    finally:
        dist.destroy_process_group()


def per_rank_batch(global_batch: int) -> int:
    """This rank's batch size: ``global_batch / world_size()``; ``ValueError`` when it does not divide."""
    world = world_size()
    if global_batch % world:
        raise ValueError(
            f"train.batch_size={global_batch} is the global batch and must divide evenly over the {world} ranks "
            f"(e.g. {max(world, global_batch // world * world)})"
        )
    return global_batch // world


def train_order(N: int, seed: int, epoch: int) -> torch.Tensor:
    """This rank's sample indices for ``epoch``: ``DistributedSampler(shuffle=True, seed=seed)`` after
    ``set_epoch(epoch)`` (the same permutation on every rank, each taking every ``world``-th index; padded with
    repeats to an equal share per rank)."""
    # the sampler reads only len() of its dataset, so a range stands for it (torch annotates it as a Dataset)
    sampler: DistributedSampler[int] = DistributedSampler(
        range(N),  # type: ignore[arg-type]
        num_replicas=world_size(),
        rank=_rank(),
        shuffle=True,
        seed=seed,
    )
    sampler.set_epoch(epoch)
    return torch.tensor(list(sampler), dtype=torch.long)


def eval_shard(N: int, batch_size: int) -> slice:
    """This rank's contiguous part of a split of ``N`` for a measurement in batches of ``batch_size``:
    whole batches ``[r nb / W, (r + 1) nb / W)`` of the ``nb`` a single process would use, so each sample meets
    the same batch-mates (bit-identical features); when there are fewer batches than ranks, an even cut of the
    samples instead. No padding: each sample is in exactly one shard."""
    world, r = world_size(), _rank()
    nb = math.ceil(N / batch_size)
    if nb >= world:
        lo, hi = r * nb // world * batch_size, (r + 1) * nb // world * batch_size
        return slice(min(lo, N), min(hi, N))
    return slice(r * N // world, (r + 1) * N // world)


def sum_all(*values: float) -> tuple[float, ...]:
    """The sums of ``values`` over the ranks (float64; integers come back as ``int``, exact below 2**53); the
    values themselves in a single process."""
    if not is_distributed():
        return values
    dev = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")
    t = torch.tensor([float(v) for v in values], dtype=torch.float64, device=dev)
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return tuple(int(s) if isinstance(v, int) else float(s) for v, s in zip(values, t.tolist(), strict=True))


def broadcast(obj: Any) -> Any:
    """Rank 0's ``obj`` on every rank (picklable objects; ``obj`` itself in a single process)."""
    if not is_distributed():
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def barrier() -> None:
    """Wait for every rank (nothing in a single process)."""
    if is_distributed():
        dist.barrier()


class _LogitsAndFeatures(nn.Module):
    """``x -> (head(features(x)), features(x))``: the loss needs both, and DDP only synchronises gradients of
    what goes through its own ``forward``."""

    def __init__(self, net: CollapseNet) -> None:
        super().__init__()
        self.net = net

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.net.features(x)
        return self.net.head(h), h


def training_module(net: CollapseNet, device: torch.device) -> nn.Module:
    """``net`` (a :class:`~nclab.nets.CollapseNet`) as ``forward(x) -> (logits, h)``, in
    ``DistributedDataParallel`` when distributed (its parameters are broadcast from rank 0 here; buffers, e.g.
    batch-norm running statistics, from rank 0 at every forward)."""
    module = _LogitsAndFeatures(net)
    if not is_distributed():
        return module
    from torch.nn.parallel import DistributedDataParallel

    _quiet_layout_notice()
    return DistributedDataParallel(module, device_ids=[device] if device.type == "cuda" else None)


#: The start of DDP's notice that a gradient's strides differ from its bucket's (a performance hint).
LAYOUT_NOTICE = "Grad strides do not match bucket view strides"
_STRIDES = re.compile(
    r"grad\.sizes\(\) = \[([^]]*)\], strides\(\) = \[([^]]*)\]\s*"
    r"bucket_view\.sizes\(\) = \[([^]]*)\], strides\(\) = \[([^]]*)\]"
)


def harmless_layout_notice(text: str) -> bool:
    """Whether DDP's :data:`LAYOUT_NOTICE` ``text`` names strides that differ only in dimensions of size 1.

    Why it is harmless then: a weight with a size-1 dimension (a convolution over 1-channel inputs,
    ``(16, 1, 3, 3)``) is contiguous and channels-last at once; the CPU convolution backward returns its gradient
    with channels-last strides, which autograd accepts (its layout contract ignores size-1 dimensions) but DDP's
    reducer compares exactly, so every rank prints a 4-line notice about a layout that is the same in memory.

    Examples
    --------
    >>> notice = LAYOUT_NOTICE + ". grad.sizes() = [16, 1, 3, 3], strides() = [9, 1, 3, 1] "
    >>> harmless_layout_notice(notice + "bucket_view.sizes() = [16, 1, 3, 3], strides() = [9, 9, 3, 1]")
    True
    >>> harmless_layout_notice(notice.replace("16, 1,", "16, 2,") + "bucket_view.sizes() = [16, 2, 3, 3], "
    ...                        "strides() = [18, 9, 3, 1]")
    False
    """
    match = _STRIDES.search(text)
    if match is None:
        return False
    sizes, grad, _, bucket = ([int(v) for v in g.split(",") if v.strip()] for g in match.groups())
    if not len(sizes) == len(grad) == len(bucket):
        return False
    return all(n == 1 or a == b for n, a, b in zip(sizes, grad, bucket, strict=True))


def _quiet_layout_notice() -> None:
    """Show DDP's :data:`LAYOUT_NOTICE` once per run, not once per rank: ranks > 0 drop it, and rank 0 drops it
    when :func:`harmless_layout_notice` (a real layout mismatch, a performance hint, is shown by rank 0)."""
    shown = warnings.showwarning

    def show(message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None) -> None:
        text = str(message)
        if LAYOUT_NOTICE in text and (not is_main() or harmless_layout_notice(text)):
            return
        shown(message, category, filename, lineno, file, line)

    if getattr(shown, "__name__", "") != "show":  # once per process
        warnings.showwarning = show
