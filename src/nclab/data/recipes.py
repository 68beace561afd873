"""The papers' augmentation recipes by name, for a run config's ``data.augment``: :func:`make_recipe`.

A :class:`Recipe` holds the training transform, the transform collapse is measured with (the test-time one), and
the batch-level mixing (mixup / CutMix, DeiT only). The same name gives the same augmentation on both kinds of
data; what differs is where the pixels come from:

* **streamed** images (:class:`~nclab.data.folders.ImageFiles`) are decoded ``uint8`` images of any size; the
  transforms run per item (in the DataLoader's workers) and end at ``size x size``;
* **in-memory** images (:class:`~nclab.data.ArrayDataset` loaded with ``normalize=False``) are float ``[0, 1]``
  batches of one size; the training transform runs on each mini-batch, on the training device.

=========================  =====================================================================================
name                       training transform (then ``ToFloat``, ``Normalize(mean, std)``)
=========================  =====================================================================================
``cifar``                  ``RandomCrop(size, padding=4)``, ``RandomHorizontalFlip()`` [He et al. 2016]
``cifar_rot15``            ``cifar`` + ``RandomRotation(15)`` [Jiang et al. 2024, App. B.3]
``imagenet``               ``RandomResizedCrop(size)``, ``RandomHorizontalFlip()`` (torchvision's ResNet recipe)
``imagenet_autoaugment``   ``imagenet`` + AutoAugment's ImageNet policy [Cubuk et al. 2019] ([Xu & Liu 2023,
                           Sec. 6.1])
``deit``                   ``RandomResizedCrop(size, bicubic)``, flip, AutoAugment, then ``RandomErasing(0.25)``
                           after ``Normalize``, and mixup 0.8 / CutMix 1.0 (switch 0.5) with the run's label
                           smoothing on each batch [Touvron et al. 2021]
=========================  =====================================================================================

Test-time (measurement) transform: streamed images are resized (shorter side to ``eval_resize``: ``size x 8 / 7``
rounded, i.e. 256 for 224, for the ImageNet recipes; ``size`` for the CIFAR ones and for no recipe), centre-cropped
to ``size`` and standardised; in-memory images are only standardised. DeiT's RandAugment (m9) is not implemented:
``deit`` uses AutoAugment's policy in its place, and no repeated augmentation.

Examples
--------
>>> r = make_recipe("cifar", size=32, mean=(0.5,), std=(0.25,), streamed=False, K=10)
>>> [type(t).__name__ for t in r.train.transforms]
['RandomCrop', 'RandomHorizontalFlip', 'Normalize']
>>> r.eval, r.mixing
(Normalize(mean=(0.5,), std=(0.25,)), None)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from nclab.data.augment import (
    CenterCrop,
    Compose,
    Normalize,
    RandomCrop,
    RandomErasing,
    RandomHorizontalFlip,
    RandomResizedCrop,
    RandomRotation,
    Resize,
    ToFloat,
    ToUint8,
)
from nclab.data.mixing import MixupCutmix
from nclab.validation import check_choice, check_int

__all__ = ["AUGMENT_RECIPES", "MIXING_RECIPES", "Recipe", "default_eval_resize", "make_recipe"]

#: Names of :func:`make_recipe` (a run config's ``data.augment``).
AUGMENT_RECIPES: tuple[str, ...] = ("cifar", "cifar_rot15", "imagenet", "imagenet_autoaugment", "deit")

#: The recipes that mix each batch (their losses take soft targets ``(B, K)``).
MIXING_RECIPES: frozenset[str] = frozenset({"deit"})

_IMAGENET_STYLE = frozenset({"imagenet", "imagenet_autoaugment", "deit"})


@dataclass(frozen=True)
class Recipe:
    """A named augmentation: ``train`` (``t(x, generator)``), ``eval`` (deterministic, or ``None`` for the
    identity) and ``mixing`` (a :class:`~nclab.data.mixing.MixupCutmix`, or ``None``)."""

    name: str | None
    train: Any
    eval: Any
    mixing: MixupCutmix | None = None


def default_eval_resize(name: str | None, size: int) -> int:
    """The shorter side streamed images are resized to before the centre crop ``size`` at test time:
    ``round(size * 8 / 7)`` for the ImageNet recipes (256 for 224, the standard ratio), ``size`` otherwise.

    >>> default_eval_resize("imagenet", 224), default_eval_resize("cifar", 32), default_eval_resize(None, 16)
    (256, 32, 16)
    """
    return round(size * 8 / 7) if name in _IMAGENET_STYLE else size


def make_recipe(
    name: str | None,
    *,
    size: int | Sequence[int],
    mean: Sequence[float] | None,
    std: Sequence[float] | None,
    streamed: bool,
    K: int,
    label_smoothing: float = 0.0,
    eval_resize: int | None = None,
) -> Recipe:
    """The recipe ``name`` (one of :data:`AUGMENT_RECIPES`, or ``None`` for no augmentation) for images of side
    ``size`` (the crop for streamed images; the images' own ``(H, W)`` in memory), standardised with ``mean`` /
    ``std`` (``None``: not standardised). ``label_smoothing``: the smoothing of the mixed targets (``deit``).
    ``eval_resize``: see :func:`default_eval_resize` (streamed only)."""
    if name is not None:
        check_choice(name, AUGMENT_RECIPES, name="augment")
    side = size if isinstance(size, int) else min(size)
    norm = [] if mean is None else [Normalize(mean, std if std is not None else [1.0] * len(mean))]
    steps: list[Any]
    if name in ("cifar", "cifar_rot15"):
        steps = [RandomCrop(size, padding=4), RandomHorizontalFlip()]
        if name == "cifar_rot15":
            steps.append(RandomRotation(15))
    elif name in _IMAGENET_STYLE:
        steps = [RandomResizedCrop(size, interpolation="bicubic" if name == "deit" else "bilinear")]
        steps.append(RandomHorizontalFlip())
        if name != "imagenet":
            from nclab.data.autoaugment import AutoAugment

            # AutoAugment works on uint8 pixels: in-memory [0, 1] images (bytes / 255) convert exactly
            steps += ([] if streamed else [ToUint8()]) + [AutoAugment("imagenet")]
    else:
        steps = []
    tail: list[Any] = [ToFloat(), *norm] if streamed or name in ("imagenet_autoaugment", "deit") else list(norm)
    if name == "deit":
        tail.append(RandomErasing(0.25))
    if streamed:
        resize = check_int(
            eval_resize if eval_resize is not None else default_eval_resize(name, side), name="eval_resize", low=1
        )
        fit = [Resize(resize), CenterCrop(size)]
        evaluation: Any = Compose([*fit, ToFloat(), *norm])
        train: Compose | None
        # the CIFAR recipes crop around an image of the final size: bring any decoded size there first
        train = Compose([*(fit if name in ("cifar", "cifar_rot15") or name is None else []), *steps, *tail])
    else:
        evaluation = norm[0] if norm else None
        train = Compose(steps + tail) if steps or tail else None
    mixing = None
    if name in MIXING_RECIPES:
        mixing = MixupCutmix(K, mixup_alpha=0.8, cutmix_alpha=1.0, switch_prob=0.5, label_smoothing=label_smoothing)
    return Recipe(name, train, evaluation, mixing)
