"""Image augmentation on tensors: batched, seeded, on any device (no torchvision).

Every transform is a small object called as ``t(x, generator)`` on a batch ``x (B, C, H, W)`` or on one image
``(C, H, W)``; it returns a tensor of the same kind. Random transforms draw their parameters *per sample*
(``B`` independent crops, flips, angles) from the ``torch.Generator`` passed (the global torch RNG when
``None``), on that generator's device, and then move them to ``x``'s device: the same generator state gives
the same parameters whether ``x`` lives on the CPU or on a GPU, and the pixels are then transformed where
they are. Each random transform exposes the two halves separately -- ``params(x, generator)`` draws,
``apply(x, params)`` transforms -- which is how the tests check each one against its definition.

Images are either ``uint8`` (0..255, what the decoders of :mod:`nclab.data.folders` return) or floating
(``[0, 1]`` after :class:`ToFloat`, or standardised after :class:`Normalize`). Crops and flips keep any dtype;
interpolating transforms (rotation, resizing) compute in float32 and round back to ``uint8`` when given
``uint8``; :class:`~nclab.data.autoaugment.AutoAugment` takes ``uint8`` only; :class:`RandomErasing` and
:class:`~nclab.data.mixing.MixupCutmix` take float (they run after normalisation, as in [Touvron et al. 2021]).

The recipes of the papers, as :class:`Compose` pipelines:

* CIFAR-style ([He et al. 2016]; [Xu & Liu 2023, Sec. 6.1] on CIFAR-10; [Jiang et al. 2024, App. B.3] adds a
  random rotation of +-15 degrees): :func:`cifar_train_transform` -- random crop after zero-padding 4 pixels,
  horizontal flip with probability 1/2, (rotation,) per-channel standardisation.
* ImageNet-style ([Xu & Liu 2023, Sec. 6.1]): :func:`imagenet_train_transform` -- random-resized crop to 224,
  flip, AutoAugment's ImageNet policy [Cubuk et al. 2019], standardisation with the ImageNet mean / std;
  :func:`imagenet_eval_transform` -- shorter side resized to 256, centre crop 224, standardisation. The DeiT
  recipe [Touvron et al. 2021] adds random erasing (``erasing=0.25``), mixup / CutMix
  (:class:`~nclab.data.mixing.MixupCutmix`) and stochastic depth (:func:`~nclab.data.mixing.drop_path`).

How a dataset applies a transform: the ``transform`` of :class:`~nclab.data.ArrayDataset` and of the streamed
:class:`~nclab.data.folders.ImageFiles` is called in ``__getitem__`` on the one image, with the generator
:func:`nclab.data.rng.item_generator` ``(seed, epoch, index)`` -- so an epoch's augmentation is the same
whatever the number of DataLoader workers or the order in which they run. A training loop on the GPU can
instead call a transform on a whole batch: ``x = t(x.to("cuda"), generator)``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch
import torch.nn.functional as F

from nclab.data.rng import as_batch, generator_device, item_generator, randint, uniform
from nclab.data.warp import rotation_inverse, warp_affine
from nclab.validation import check_choice, check_int, check_number

__all__ = [
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "CenterCrop",
    "Compose",
    "Normalize",
    "RandomCrop",
    "RandomErasing",
    "RandomHorizontalFlip",
    "RandomResizedCrop",
    "RandomRotation",
    "Resize",
    "ToFloat",
    "ToUint8",
    "Transform",
    "apply_transform",
    "cifar_train_transform",
    "imagenet_eval_transform",
    "imagenet_train_transform",
    "resize_image",
]

#: The per-channel mean and standard deviation of ImageNet's training images in [0, 1] (the constants every
#: ImageNet recipe standardises with).
IMAGENET_MEAN: tuple[float, float, float] = (0.485, 0.456, 0.406)
IMAGENET_STD: tuple[float, float, float] = (0.229, 0.224, 0.225)

INTERPOLATIONS = ("nearest", "bilinear", "bicubic")


@runtime_checkable
class Transform(Protocol):
    """What a dataset's ``transform`` is: ``t(x, generator) -> tensor``, ``x`` one image ``(C, H, W)`` or a
    batch ``(B, C, H, W)``."""

    def __call__(self, x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor: ...


# ------------------------------------------------------------------------------------------------ helpers
def apply_transform(transform: Any, x: torch.Tensor, seed: int, epoch: int, index: int) -> torch.Tensor:
    """``transform(x, item_generator(seed, epoch, index))``, or ``x`` when ``transform`` is ``None``."""
    if transform is None:
        return x
    return transform(x, item_generator(seed, epoch, index))


def _pair(size: int | Sequence[int], name: str) -> tuple[int, int]:
    if isinstance(size, (int, np.integer)) and not isinstance(size, bool):
        s = check_int(size, name=name, low=1)
        return s, s
    if isinstance(size, Sequence) and len(size) == 2:
        return check_int(size[0], name=name, low=1), check_int(size[1], name=name, low=1)
    raise TypeError(f"{name} must be an int or a pair (height, width), got {size!r}")


def _probability(p: Any, name: str) -> float:
    if isinstance(p, bool) or not isinstance(p, (int, float, np.floating, np.integer)):
        raise TypeError(f"{name} must be a probability (a number in [0, 1]), got {p!r}")
    if not 0.0 <= float(p) <= 1.0:
        raise ValueError(f"{name} must lie in [0, 1], got {p}")
    return float(p)


def _check_fill(fill: float, x: torch.Tensor, name: str = "fill") -> None:
    """A ``uint8`` image can hold only an integer fill in 0..255 (torch would refuse 300 with a raw overflow
    error, and truncate 0.5 to 0 silently)."""
    if x.dtype == torch.uint8 and not (float(fill).is_integer() and 0 <= fill <= 255):
        raise ValueError(f"{name}={fill} is not a uint8 value (an integer in 0..255), and the images are uint8")


def _range(value: Any, name: str, *, low: float, high: float) -> tuple[float, float]:
    try:
        a, b = (float(v) for v in value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a pair (min, max) of numbers, got {value!r}") from None
    if not (low <= a <= b <= high) or math.isnan(a) or math.isnan(b):
        raise ValueError(f"{name} must satisfy {low} <= min <= max <= {high}, got ({a}, {b})")
    return a, b


def _to_compute(x: torch.Tensor) -> torch.Tensor:
    return x if x.is_floating_point() else x.to(torch.float32)


def _like(y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``y`` (float) back in ``x``'s dtype: uint8 rounds to nearest and clamps to 0..255."""
    if x.is_floating_point():
        return y.to(x.dtype)
    return y.round().clamp_(0, 255).to(x.dtype)


def resize_image(x: torch.Tensor, size: tuple[int, int], interpolation: str = "bilinear") -> torch.Tensor:
    """Resize a batch ``(B, C, H, W)`` to ``size = (h, w)``: ``bilinear`` / ``bicubic`` with antialiasing when
    shrinking (torchvision's tensor ``resize`` with ``antialias=True``), ``nearest`` as ``nearest-exact`` (the
    input pixel containing the output pixel's centre, like PIL)."""
    if tuple(x.shape[-2:]) == tuple(size):
        return x
    y = _to_compute(x)
    if interpolation == "nearest":
        y = F.interpolate(y, size=size, mode="nearest-exact")
    else:
        y = F.interpolate(y, size=size, mode=interpolation, align_corners=False, antialias=True)
    return _like(y, x)


class _Random:
    """Base of the random transforms: ``__call__ = apply(x, params(x, generator))`` on a batch."""

    def params(self, x: torch.Tensor, generator: torch.Generator | None) -> Any:
        raise NotImplementedError

    def apply(self, x: torch.Tensor, params: Any) -> torch.Tensor:
        raise NotImplementedError

    def __call__(self, x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        batch, single = as_batch(x, type(self).__name__)
        out = self.apply(batch, self.params(batch, generator))
        return out[0] if single else out


# ---------------------------------------------------------------------------------------------- pipeline
class Compose:
    """Apply ``transforms`` in order, each with the same generator (whose state advances through them)."""

    def __init__(self, transforms: Sequence[Any]) -> None:
        for i, t in enumerate(transforms):
            if not callable(t):
                raise TypeError(f"transforms[{i}] is not callable: {t!r}")
        self.transforms = list(transforms)

    def __call__(self, x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        for t in self.transforms:
            x = t(x, generator)
        return x

    def __repr__(self) -> str:
        inner = ", ".join(repr(t) for t in self.transforms)
        return f"Compose([{inner}])"


class ToFloat:
    """``uint8`` pixels -> float32 in [0, 1] (divided by 255); floating input is taken to be in [0, 1] already
    and returned unchanged."""

    def __call__(self, x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        if x.is_floating_point():
            return x
        if x.dtype != torch.uint8:
            raise TypeError(f"ToFloat takes uint8 (0..255) or floating images, got {x.dtype}")
        return x.to(torch.float32).div_(255.0)

    def __repr__(self) -> str:
        return "ToFloat()"


class ToUint8:
    """Float pixels in [0, 1] -> ``uint8`` (``round(255 x)``, clamped to 0..255): the inverse of :class:`ToFloat`,
    exact on images that were ``bytes / 255`` (the in-memory datasets loaded with ``normalize=False``), so that
    ``uint8``-only transforms (:class:`~nclab.data.autoaugment.AutoAugment`) run on them. ``uint8`` input is
    returned unchanged.

    >>> x = torch.tensor([0, 7, 128, 255], dtype=torch.uint8)
    >>> bool((ToUint8()(ToFloat()(x)) == x).all())
    True
    """

    def __call__(self, x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        if x.dtype == torch.uint8:
            return x
        if not x.is_floating_point():
            raise TypeError(f"ToUint8 takes floating images in [0, 1] or uint8, got {x.dtype}")
        return (x * 255.0).round_().clamp_(0, 255).to(torch.uint8)

    def __repr__(self) -> str:
        return "ToUint8()"


class Normalize:
    """Per-channel standardisation ``(x - mean[c]) / std[c]`` of a floating image or batch."""

    def __init__(self, mean: Sequence[float], std: Sequence[float]) -> None:
        self.mean = tuple(check_number(m, name="mean") for m in mean)
        self.std = tuple(float(s) for s in std)
        if len(self.mean) != len(self.std) or not self.mean:
            raise ValueError(f"mean and std must have one entry per channel, got {self.mean} and {self.std}")
        if any(not (s > 0 and math.isfinite(s)) for s in self.std):
            raise ValueError(f"std must be positive and finite, got {self.std}")

    def __call__(self, x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        if not x.is_floating_point():
            raise TypeError(f"Normalize takes floating images (apply ToFloat first), got {x.dtype}")
        C = x.shape[-3]
        if C != len(self.mean):
            raise ValueError(f"Normalize has {len(self.mean)} channel(s) of mean/std, the image has {C}")
        m = torch.tensor(self.mean, dtype=x.dtype, device=x.device).view(C, 1, 1)
        s = torch.tensor(self.std, dtype=x.dtype, device=x.device).view(C, 1, 1)
        return (x - m) / s

    def __repr__(self) -> str:
        return f"Normalize(mean={self.mean}, std={self.std})"


# ------------------------------------------------------------------------------------------ geometric
class RandomCrop(_Random):
    """Zero-pad by ``padding`` pixels on every side (value ``fill``), then cut a ``size`` window at a position
    uniform over all positions, independently per sample: top ``i`` in ``0 .. H + 2p - h``, left ``j`` in
    ``0 .. W + 2p - w`` (torchvision's ``RandomCrop(size, padding)``). Every output pixel is an input pixel
    moved by at most ``p`` in each direction, or ``fill``. ``params``: int64 ``(B, 2)`` of ``(i, j)``.

    On standardised images ``fill=0`` is the channel mean, not black; to pad with black as the recipes do,
    crop before :class:`Normalize` (``load(..., normalize=False)`` and a pipeline ending in Normalize).
    """

    def __init__(self, size: int | Sequence[int], padding: int = 0, fill: float = 0.0) -> None:
        self.size = _pair(size, "size")
        self.padding = check_int(padding, name="padding", low=0)
        self.fill = check_number(fill, name="fill")

    def params(self, x: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        H, W = x.shape[-2] + 2 * self.padding, x.shape[-1] + 2 * self.padding
        h, w = self.size
        if h > H or w > W:
            raise ValueError(f"RandomCrop size {self.size} is larger than the padded image ({H}, {W})")
        B = x.shape[0]
        return torch.stack([randint(H - h + 1, B, generator), randint(W - w + 1, B, generator)], dim=1)

    def apply(self, x: torch.Tensor, params: torch.Tensor) -> torch.Tensor:
        p = self.padding
        if p:
            _check_fill(self.fill, x)
            x = F.pad(x, (p, p, p, p), value=self.fill)
        h, w = self.size
        params = params.to(x.device)
        rows = params[:, :1] + torch.arange(h, device=x.device)  # (B, h)
        cols = params[:, 1:] + torch.arange(w, device=x.device)  # (B, w)
        b = torch.arange(x.shape[0], device=x.device)[:, None, None]
        return x.permute(0, 2, 3, 1)[b, rows[:, :, None], cols[:, None, :]].permute(0, 3, 1, 2).contiguous()

    def __repr__(self) -> str:
        return f"RandomCrop(size={self.size}, padding={self.padding}, fill={self.fill})"


class RandomHorizontalFlip(_Random):
    """Mirror left-right (``x[..., ::-1]``) each sample independently with probability ``p``. ``params``: bool
    ``(B,)``, which samples flip."""

    def __init__(self, p: float = 0.5) -> None:
        self.p = _probability(p, "p")

    def params(self, x: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        return uniform(x.shape[0], generator) < self.p

    def apply(self, x: torch.Tensor, params: torch.Tensor) -> torch.Tensor:
        return torch.where(params.to(x.device)[:, None, None, None], x.flip(-1), x)

    def __repr__(self) -> str:
        return f"RandomHorizontalFlip(p={self.p})"


class RandomRotation(_Random):
    """Rotate each sample counter-clockwise about its centre by an angle uniform in ``degrees = (lo, hi)``
    (a number ``d`` means ``(-d, d)``; [Jiang et al. 2024, App. B.3] uses 15), same size, corners filled with
    ``fill``; ``interpolation`` ``"nearest"`` (torchvision's default) or ``"bilinear"``. ``params``: float64
    ``(B,)`` angles in degrees. See :func:`nclab.data.warp.rotation_inverse` for the map."""

    def __init__(self, degrees: float | Sequence[float], interpolation: str = "nearest", fill: float = 0.0) -> None:
        if isinstance(degrees, (int, float)) and not isinstance(degrees, bool):
            if degrees < 0:
                raise ValueError(f"degrees must be >= 0 when a single number, got {degrees}")
            degrees = (-float(degrees), float(degrees))
        self.degrees = _range(degrees, "degrees", low=-360.0, high=360.0)
        self.interpolation = check_choice(interpolation, ("nearest", "bilinear"), name="interpolation")
        self.fill = check_number(fill, name="fill")

    def params(self, x: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        lo, hi = self.degrees
        return lo + (hi - lo) * uniform(x.shape[0], generator)

    def apply(self, x: torch.Tensor, params: torch.Tensor) -> torch.Tensor:
        H, W = x.shape[-2:]
        _check_fill(self.fill, x)
        y = warp_affine(_to_compute(x), rotation_inverse(params, H, W), mode=self.interpolation, fill=self.fill)
        return _like(y, x)

    def __repr__(self) -> str:
        return f"RandomRotation(degrees={self.degrees}, interpolation={self.interpolation!r}, fill={self.fill})"


class RandomResizedCrop(_Random):
    """Cut a box of random area and aspect ratio and resize it to ``size`` (the Inception crop; torchvision's
    ``RandomResizedCrop``). Per sample, up to 10 tries: area fraction ``s ~ U(scale)``, log aspect ratio
    ``~ U(log ratio)``, ``w = round(sqrt(s H W r))``, ``h = round(sqrt(s H W / r))``; the first box that fits is
    placed uniformly (top ``i`` in ``0 .. H - h``, left ``j`` in ``0 .. W - w``). When none fits, the central
    box of the whole image clipped to the ratio range. ``params``: int64 ``(B, 4)`` of ``(i, j, h, w)``.

    Works on one image of any size (in a DataLoader worker, before batching) or on a batch of equal sizes.
    """

    def __init__(
        self,
        size: int | Sequence[int],
        scale: Sequence[float] = (0.08, 1.0),
        ratio: Sequence[float] = (3.0 / 4.0, 4.0 / 3.0),
        interpolation: str = "bilinear",
    ) -> None:
        self.size = _pair(size, "size")
        self.scale = _range(scale, "scale", low=0.0, high=1.0)
        if self.scale[1] <= 0:
            raise ValueError(f"scale must have a positive maximum, got {self.scale}")
        self.ratio = _range(ratio, "ratio", low=1e-6, high=1e6)
        self.interpolation = check_choice(interpolation, INTERPOLATIONS, name="interpolation")

    def _box(self, H: int, W: int, generator: torch.Generator | None) -> tuple[int, int, int, int]:
        area = H * W
        log_lo, log_hi = math.log(self.ratio[0]), math.log(self.ratio[1])
        for _ in range(10):
            u = uniform(2, generator)
            target = area * (self.scale[0] + (self.scale[1] - self.scale[0]) * float(u[0]))
            aspect = math.exp(log_lo + (log_hi - log_lo) * float(u[1]))
            w = round(math.sqrt(target * aspect))
            h = round(math.sqrt(target / aspect))
            if 0 < w <= W and 0 < h <= H:
                i = int(randint(H - h + 1, 1, generator))
                j = int(randint(W - w + 1, 1, generator))
                return i, j, h, w
        in_ratio = W / H
        if in_ratio < self.ratio[0]:
            w, h = W, round(W / self.ratio[0])
        elif in_ratio > self.ratio[1]:
            h, w = H, round(H * self.ratio[1])
        else:
            h, w = H, W
        return (H - h) // 2, (W - w) // 2, h, w

    def params(self, x: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        H, W = x.shape[-2:]
        return torch.tensor([self._box(H, W, generator) for _ in range(x.shape[0])], dtype=torch.int64).view(-1, 4)

    def apply(self, x: torch.Tensor, params: torch.Tensor) -> torch.Tensor:
        crops = [
            resize_image(x[b : b + 1, :, i : i + h, j : j + w], self.size, self.interpolation)
            for b, (i, j, h, w) in enumerate(params.tolist())
        ]
        return torch.cat(crops, dim=0)

    def __repr__(self) -> str:
        return f"RandomResizedCrop(size={self.size}, scale={self.scale}, ratio={self.ratio})"


class Resize:
    """Resize so that the shorter side is ``size`` and the aspect ratio is kept (the longer side becomes
    ``int(size * long / short)``, torchvision's rule), or to exactly ``(h, w)`` when given a pair."""

    def __init__(self, size: int | Sequence[int], interpolation: str = "bilinear") -> None:
        self.size: int | tuple[int, int] = (
            check_int(size, name="size", low=1) if isinstance(size, (int, np.integer)) else _pair(size, "size")
        )
        self.interpolation = check_choice(interpolation, INTERPOLATIONS, name="interpolation")

    def output_size(self, height: int, width: int) -> tuple[int, int]:
        if isinstance(self.size, tuple):
            return self.size
        short, long = min(height, width), max(height, width)
        other = int(self.size * long / short)
        return (self.size, other) if height <= width else (other, self.size)

    def __call__(self, x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        batch, single = as_batch(x, "Resize")
        out = resize_image(batch, self.output_size(*batch.shape[-2:]), self.interpolation)
        return out[0] if single else out

    def __repr__(self) -> str:
        return f"Resize({self.size}, interpolation={self.interpolation!r})"


class CenterCrop:
    """The central ``size`` window: top ``int(round((H - h) / 2))``, left ``int(round((W - w) / 2))``; an image
    smaller than the window is first zero-padded symmetrically (torchvision's rules)."""

    def __init__(self, size: int | Sequence[int]) -> None:
        self.size = _pair(size, "size")

    def __call__(self, x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        batch, single = as_batch(x, "CenterCrop")
        h, w = self.size
        H, W = batch.shape[-2:]
        if h > H or w > W:
            ph, pw = max(h - H, 0), max(w - W, 0)
            batch = F.pad(batch, (pw // 2, (pw + 1) // 2, ph // 2, (ph + 1) // 2))
            H, W = batch.shape[-2:]
        top, left = round((H - h) / 2.0), round((W - w) / 2.0)
        out = batch[..., top : top + h, left : left + w]
        return out[0] if single else out

    def __repr__(self) -> str:
        return f"CenterCrop({self.size})"


# -------------------------------------------------------------------------------------------- erasing
class RandomErasing(_Random):
    """Random erasing [Zhong et al. 2020] as in the DeiT recipe (timm's ``RandomErasing``, one box): with
    probability ``p`` per sample, up to 10 tries of a box of area fraction ``~ U(scale)`` and log aspect ratio
    ``~ U(log ratio)``, ``h = round(sqrt(a r))``, ``w = round(sqrt(a / r))``; the first with ``h < H`` and
    ``w < W`` is placed uniformly and overwritten with ``value``: ``"pixel"`` (an independent standard normal
    per pixel and channel -- noise on standardised images), ``"channel"`` (one normal per channel) or a number.
    Floating images only (it runs after :class:`Normalize`). ``params``: per sample ``None`` (untouched) or
    ``(i, j, h, w, fill)`` with ``fill`` broadcastable to ``(C, h, w)``.
    """

    def __init__(
        self,
        p: float = 0.25,
        scale: Sequence[float] = (0.02, 1.0 / 3.0),
        ratio: Sequence[float] = (0.3, 1.0 / 0.3),
        value: str | float = "pixel",
    ) -> None:
        self.p = _probability(p, "p")
        self.scale = _range(scale, "scale", low=0.0, high=1.0)
        self.ratio = _range(ratio, "ratio", low=1e-6, high=1e6)
        if isinstance(value, str):
            check_choice(value, ("pixel", "channel"), name="value")
        else:
            value = check_number(value, name="value")
        self.value = value

    def _fill(self, C: int, h: int, w: int, generator: torch.Generator | None) -> torch.Tensor:
        if self.value == "pixel":
            return torch.randn(C, h, w, generator=generator, device=generator_device(generator))
        if self.value == "channel":
            return torch.randn(C, 1, 1, generator=generator, device=generator_device(generator))
        return torch.full((C, 1, 1), float(self.value))

    def params(self, x: torch.Tensor, generator: torch.Generator | None) -> list[Any]:
        B, C, H, W = x.shape
        log_lo, log_hi = math.log(self.ratio[0]), math.log(self.ratio[1])
        out: list[Any] = []
        for erase in (uniform(B, generator) < self.p).tolist():
            box = None
            for _ in range(10 if erase else 0):
                u = uniform(2, generator)
                area = H * W * (self.scale[0] + (self.scale[1] - self.scale[0]) * float(u[0]))
                r = math.exp(log_lo + (log_hi - log_lo) * float(u[1]))
                h, w = round(math.sqrt(area * r)), round(math.sqrt(area / r))
                if h < H and w < W:
                    i, j = int(randint(H - h + 1, 1, generator)), int(randint(W - w + 1, 1, generator))
                    box = (i, j, h, w, self._fill(C, h, w, generator))
                    break
            out.append(box)
        return out

    def apply(self, x: torch.Tensor, params: list[Any]) -> torch.Tensor:
        if not x.is_floating_point():
            raise TypeError(f"RandomErasing takes floating (normalised) images, got {x.dtype}")
        if not any(p is not None for p in params):
            return x
        x = x.clone()
        for b, box in enumerate(params):
            if box is not None:
                i, j, h, w, fill = box
                x[b, :, i : i + h, j : j + w] = fill.to(device=x.device, dtype=x.dtype)
        return x

    def __repr__(self) -> str:
        return f"RandomErasing(p={self.p}, scale={self.scale}, ratio={self.ratio}, value={self.value!r})"


# -------------------------------------------------------------------------------------------- recipes
def cifar_train_transform(
    mean: Sequence[float],
    std: Sequence[float],
    *,
    size: int = 32,
    padding: int = 4,
    flip: float = 0.5,
    rotation: float | None = None,
) -> Compose:
    """The standard small-image training augmentation: :class:`ToFloat` (a no-op on float input),
    ``RandomCrop(size, padding)`` with black padding, ``RandomHorizontalFlip(flip)``, optionally
    ``RandomRotation(rotation)`` ([Jiang et al. 2024, App. B.3]: 15), then ``Normalize(mean, std)``. Use it with
    unstandardised images (``nclab.data.load(..., normalize=False)``; the constants:
    :func:`nclab.data.normalization`)."""
    steps: list[Any] = [ToFloat(), RandomCrop(size, padding=padding), RandomHorizontalFlip(flip)]
    if rotation is not None:
        steps.append(RandomRotation(rotation))
    steps.append(Normalize(mean, std))
    return Compose(steps)


def imagenet_train_transform(
    size: int = 224,
    *,
    scale: Sequence[float] = (0.08, 1.0),
    autoaugment: bool = True,
    erasing: float = 0.0,
    interpolation: str = "bilinear",
    mean: Sequence[float] = IMAGENET_MEAN,
    std: Sequence[float] = IMAGENET_STD,
) -> Compose:
    """The ImageNet training pipeline for one decoded ``uint8`` image of any size:
    ``RandomResizedCrop(size, scale)``, ``RandomHorizontalFlip()``, AutoAugment's ImageNet policy
    [Cubuk et al. 2019] (``autoaugment=True``, as [Xu & Liu 2023, Sec. 6.1]), :class:`ToFloat`,
    ``Normalize(mean, std)``, and ``RandomErasing(erasing)`` when ``erasing > 0`` (DeiT: 0.25, bicubic)."""
    from nclab.data.autoaugment import AutoAugment

    steps: list[Any] = [RandomResizedCrop(size, scale=scale, interpolation=interpolation), RandomHorizontalFlip()]
    if autoaugment:
        steps.append(AutoAugment("imagenet"))
    steps += [ToFloat(), Normalize(mean, std)]
    if erasing > 0:
        steps.append(RandomErasing(erasing))
    return Compose(steps)


def imagenet_eval_transform(
    size: int = 224,
    resize: int = 256,
    *,
    interpolation: str = "bilinear",
    mean: Sequence[float] = IMAGENET_MEAN,
    std: Sequence[float] = IMAGENET_STD,
) -> Compose:
    """The ImageNet test-time pipeline ([Xu & Liu 2023, Sec. 6.1], also used to measure collapse): shorter side
    resized to ``resize``, centre crop ``size``, :class:`ToFloat`, ``Normalize(mean, std)``. Deterministic."""
    return Compose([Resize(resize, interpolation), CenterCrop(size), ToFloat(), Normalize(mean, std)])
