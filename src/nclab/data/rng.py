"""Random draws of the augmentations: per item, per batch, on the generator's device.

Every random transform of :mod:`nclab.data.augment`, :mod:`nclab.data.autoaugment` and :mod:`nclab.data.mixing`
draws its parameters here, from the ``torch.Generator`` it is given (the global torch RNG for ``None``), on that
generator's device, and returns them on the CPU: the parameters depend on the generator's state only, not on
where the images are. Datasets seed one generator per item with :func:`item_generator`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

__all__ = ["as_batch", "batch_generator", "generator_device", "item_generator", "randint", "uniform"]


def item_generator(seed: int, epoch: int, index: int) -> torch.Generator:
    """A CPU generator seeded by ``(seed, epoch, index)`` through :class:`numpy.random.SeedSequence` (so that
    neighbouring indices or epochs get unrelated streams). Datasets draw each item's augmentation from it, so
    an epoch's augmentation does not depend on the number of DataLoader workers or their order.

    Examples
    --------
    >>> a = torch.rand(3, generator=item_generator(0, 1, 7))
    >>> bool((a == torch.rand(3, generator=item_generator(0, 1, 7))).all())
    True
    """
    for v, name in ((seed, "seed"), (epoch, "epoch"), (index, "index")):
        if int(v) < 0:
            raise ValueError(f"{name} must be >= 0 to seed an item's generator, got {v}")
    state = np.random.SeedSequence([int(seed), int(epoch), int(index)]).generate_state(2, np.uint32)
    return torch.Generator().manual_seed((int(state[0]) << 31) ^ int(state[1]))


def batch_generator(seed: int, epoch: int, batch: int) -> torch.Generator:
    """A CPU generator seeded by ``(seed, epoch, batch)`` for the draws of one whole mini-batch (a batch-level
    transform of an in-memory split, mixup / CutMix), a stream apart from every :func:`item_generator`
    (``SeedSequence([seed, epoch, batch, 1])``): a training loop that augments batch ``b`` of epoch ``e`` draws the
    same parameters whenever it runs, so a resumed run repeats them.

    Examples
    --------
    >>> a = torch.rand(3, generator=batch_generator(0, 1, 7))
    >>> bool((a == torch.rand(3, generator=batch_generator(0, 1, 7))).all())
    True
    >>> bool((a == torch.rand(3, generator=item_generator(0, 1, 7))).any())
    False
    """
    for v, name in ((seed, "seed"), (epoch, "epoch"), (batch, "batch")):
        if int(v) < 0:
            raise ValueError(f"{name} must be >= 0 to seed a batch's generator, got {v}")
    state = np.random.SeedSequence([int(seed), int(epoch), int(batch), 1]).generate_state(2, np.uint32)
    return torch.Generator().manual_seed((int(state[0]) << 31) ^ int(state[1]))


def generator_device(generator: torch.Generator | None) -> torch.device:
    """Where ``generator`` draws (the CPU for the global RNG)."""
    return generator.device if generator is not None else torch.device("cpu")


def uniform(n: int, generator: torch.Generator | None) -> torch.Tensor:
    """``n`` uniforms in [0, 1), float64, on the CPU (drawn on the generator's device)."""
    return torch.rand(n, generator=generator, dtype=torch.float64, device=generator_device(generator)).cpu()


def randint(high: int, n: int, generator: torch.Generator | None) -> torch.Tensor:
    """``n`` integers uniform in ``0 .. high - 1`` (int64, on the CPU)."""
    return torch.randint(int(high), (n,), generator=generator, device=generator_device(generator)).cpu()


def as_batch(x: Any, who: str) -> tuple[torch.Tensor, bool]:
    """``(batch, single)``: an image ``(C, H, W)`` as a batch of one (``single=True``), a batch as is."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{who} takes a torch.Tensor image (C, H, W) or batch (B, C, H, W), got {type(x).__name__}")
    if x.ndim == 3:
        return x.unsqueeze(0), True
    if x.ndim != 4:
        raise ValueError(f"{who} takes an image (C, H, W) or a batch (B, C, H, W), got shape {tuple(x.shape)}")
    return x, False
