"""AutoAugment's ImageNet policy [Cubuk et al. 2019] on ``uint8`` image batches, per sample, on any device.

A policy is 25 sub-policies of two operations ``(name, probability, magnitude bin)``. For each image one
sub-policy is drawn uniformly; each of its two operations is applied (in order) when a uniform draw is
``<= probability``, at the magnitude of its bin, negated with probability 1/2 for the signed operations.
:data:`IMAGENET_POLICY` and the magnitude bins (:func:`magnitude`, 10 bins) are those of the paper's
ImageNet policy as torchvision's ``AutoAugment`` lists them.

The operations (:func:`apply_op`; ``z`` the image with values 0..255, ``m`` the signed magnitude; geometric
maps are inverse maps in the pixel coordinates of :mod:`nclab.data.warp`, nearest-neighbour by default,
outside points ``fill``):

============  ======================================================================  =========================
op            definition                                                              magnitude bins (unsigned)
============  ======================================================================  =========================
ShearX        out(x, y) = z(x + m y, y)  (about the top-left corner)                  linspace(0, 0.3)
ShearY        out(x, y) = z(x, y + m x)                                               linspace(0, 0.3)
TranslateX    out(x, y) = z(x - int(m), y)                                            linspace(0, 150/331 W)
TranslateY    out(x, y) = z(x, y - int(m))                                            linspace(0, 150/331 H)
Rotate        counter-clockwise by m degrees about the centre                         linspace(0, 30)
Brightness    blend(z, 0, 1 + m)                                                      linspace(0, 0.9)
Color         blend(z, gray(z), 1 + m)                                                linspace(0, 0.9)
Contrast      blend(z, round(mean gray(z)), 1 + m)                                    linspace(0, 0.9)
Sharpness     blend(z, smooth(z), 1 + m)                                              linspace(0, 0.9)
Posterize     keep the top m bits: floor(z / 2^(8-m)) 2^(8-m)                         8 - round(bin / 2.25)
Solarize      255 - z where z >= m, else z                                            linspace(255, 0)
AutoContrast  per channel floor(z s - lo s), s = 255 / (hi - lo); hi = lo: unchanged  --
Equalize      per channel histogram equalisation (PIL's ``ImageOps.equalize``)        --
Invert        255 - z                                                                 --
============  ======================================================================  =========================

``blend(z, d, f) = floor(clamp(d + f (z - d), 0, 255))`` (PIL's ``ImageEnhance`` and torchvision's tensor path
both truncate); ``gray = (19595 R + 38470 G + 7471 B + 2^15) >> 16`` (PIL's fixed-point ``L`` conversion,
0.299 / 0.587 / 0.114 rounded; a 1-channel image is its own gray); ``smooth`` is the 3 x 3 kernel
``[[1, 1, 1], [1, 5, 1], [1, 1, 1]] / 13``, rounded, on the interior pixels only (the border keeps its values;
PIL's ``SMOOTH`` filter); ``round`` is half-up, as PIL's. Equalize: with ``hist`` the channel's 256-bin
histogram and ``step = floor((N - hist[max value]) / 255)``, each value ``v`` maps to
``floor((cumsum(hist)[v - 1] + floor(step / 2)) / step)`` (``0`` for ``v = 0``), clipped to 255; ``step = 0``
leaves the channel unchanged.

Every operation agrees bit for bit with Pillow's (``ImageOps``, ``ImageEnhance``, ``Image.transform`` /
``rotate`` with NEAREST), on which AutoAugment was defined, except where a geometric sample point lies within
1.5e-5 pixel of a pixel edge (PIL computes those coordinates in fixed point); tests/test_data_autoaugment.py
compares every operation with Pillow.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from nclab.data.rng import as_batch, generator_device, randint, uniform
from nclab.data.warp import rotation_inverse, shear_inverse, translation_inverse, warp_affine
from nclab.validation import check_choice, check_number

__all__ = ["IMAGENET_POLICY", "OPS", "SIGNED_OPS", "AutoAugment", "apply_op", "magnitude"]

#: Every operation of AutoAugment's search space, in the order of the paper's table.
OPS: tuple[str, ...] = (
    "ShearX",
    "ShearY",
    "TranslateX",
    "TranslateY",
    "Rotate",
    "Brightness",
    "Color",
    "Contrast",
    "Sharpness",
    "Posterize",
    "Solarize",
    "AutoContrast",
    "Equalize",
    "Invert",
)
#: Operations whose magnitude is negated with probability 1/2.
SIGNED_OPS: frozenset[str] = frozenset(OPS[:9])

NUM_BINS = 10

#: The 25 sub-policies of the ImageNet policy: ``((op, probability, bin), (op, probability, bin))``; ``bin``
#: is ``None`` for the operations without a magnitude.
IMAGENET_POLICY: tuple[tuple[tuple[str, float, int | None], tuple[str, float, int | None]], ...] = (
    (("Posterize", 0.4, 8), ("Rotate", 0.6, 9)),
    (("Solarize", 0.6, 5), ("AutoContrast", 0.6, None)),
    (("Equalize", 0.8, None), ("Equalize", 0.6, None)),
    (("Posterize", 0.6, 7), ("Posterize", 0.6, 6)),
    (("Equalize", 0.4, None), ("Solarize", 0.2, 4)),
    (("Equalize", 0.4, None), ("Rotate", 0.8, 8)),
    (("Solarize", 0.6, 3), ("Equalize", 0.6, None)),
    (("Posterize", 0.8, 5), ("Equalize", 1.0, None)),
    (("Rotate", 0.2, 3), ("Solarize", 0.6, 8)),
    (("Equalize", 0.6, None), ("Posterize", 0.4, 6)),
    (("Rotate", 0.8, 8), ("Color", 0.4, 0)),
    (("Rotate", 0.4, 9), ("Equalize", 0.6, None)),
    (("Equalize", 0.0, None), ("Equalize", 0.8, None)),
    (("Invert", 0.6, None), ("Equalize", 1.0, None)),
    (("Color", 0.6, 4), ("Contrast", 1.0, 8)),
    (("Rotate", 0.8, 8), ("Color", 1.0, 2)),
    (("Color", 0.8, 8), ("Solarize", 0.8, 7)),
    (("Sharpness", 0.4, 7), ("Invert", 0.6, None)),
    (("ShearX", 0.6, 5), ("Equalize", 1.0, None)),
    (("Color", 0.4, 0), ("Equalize", 0.6, None)),
    (("Equalize", 0.4, None), ("Solarize", 0.2, 4)),
    (("Solarize", 0.6, 5), ("AutoContrast", 0.6, None)),
    (("Invert", 0.6, None), ("Equalize", 1.0, None)),
    (("Color", 0.6, 4), ("Contrast", 1.0, 8)),
    (("Equalize", 0.8, None), ("Equalize", 0.6, None)),
)


def magnitude(op: str, bin: int | None, height: int, width: int) -> float:
    """The unsigned magnitude of ``op`` at ``bin`` (0..9) for an image of ``height x width`` (table above);
    ``0.0`` for the operations without one."""
    check_choice(op, OPS, name="op")
    if bin is None or op in ("AutoContrast", "Equalize", "Invert"):
        return 0.0
    if not 0 <= bin < NUM_BINS:
        raise ValueError(f"bin must lie in 0..{NUM_BINS - 1}, got {bin}")
    t = bin / (NUM_BINS - 1)
    if op == "Posterize":
        return float(8 - int(bin / ((NUM_BINS - 1) / 4) + 0.5))  # bins never fall on .5
    if op == "Solarize":
        return 255.0 * (1.0 - t)
    top = {"ShearX": 0.3, "ShearY": 0.3, "TranslateX": 150.0 / 331.0 * width, "TranslateY": 150.0 / 331.0 * height}
    return t * top.get(op, 30.0 if op == "Rotate" else 0.9)


# ------------------------------------------------------------------------------------------- the ops
def _floor_blend(z: torch.Tensor, degenerate: torch.Tensor, factor: torch.Tensor) -> torch.Tensor:
    return (degenerate + factor * (z - degenerate)).clamp_(0.0, 255.0).floor_()


def _gray(z: torch.Tensor) -> torch.Tensor:
    if z.shape[1] == 1:
        return z
    r, g, b = z[:, 0:1], z[:, 1:2], z[:, 2:3]
    # PIL's fixed-point luma (exact in float32: the sum stays below 2^24, and / 2^16 is exact)
    return torch.floor((19595.0 * r + 38470.0 * g + 7471.0 * b + 32768.0) / 65536.0)


def _sharpness_degenerate(z: torch.Tensor) -> torch.Tensor:
    _n, C, H, W = z.shape
    if H < 3 or W < 3:
        return z
    kernel = torch.ones(3, 3, dtype=z.dtype, device=z.device)
    kernel[1, 1] = 5.0
    kernel = (kernel / 13.0).expand(C, 1, 3, 3)
    inner = torch.floor(F.conv2d(z, kernel, groups=C) + 0.5)
    out = z.clone()
    out[:, :, 1:-1, 1:-1] = inner
    return out


def _equalize(z: torch.Tensor) -> torch.Tensor:
    n, C, H, W = z.shape
    v = z.to(torch.int64).view(n * C, H * W)
    hist = torch.zeros(n * C, 256, dtype=torch.int64, device=z.device)
    hist.scatter_add_(1, v, torch.ones_like(v))
    top = v.amax(dim=1, keepdim=True)
    step = (H * W - hist.gather(1, top)) // 255  # (nC, 1): all pixels but those of the largest value, / 255
    safe = step.clamp(min=1)
    lut = (torch.cumsum(hist, dim=1) + safe // 2) // safe
    lut = torch.cat([torch.zeros_like(lut[:, :1]), lut[:, :-1]], dim=1).clamp_(0, 255)  # value v reads lut[v-1]
    out = lut.gather(1, v)
    out = torch.where(step > 0, out, v)
    return out.view(n, C, H, W).to(z.dtype)


def _geometric(z: torch.Tensor, op: str, m: torch.Tensor, interpolation: str, fill: float) -> torch.Tensor:
    H, W = z.shape[-2:]
    if op == "Rotate":
        A = rotation_inverse(m, H, W)
    elif op in ("ShearX", "ShearY"):
        A = shear_inverse(m, "x" if op == "ShearX" else "y")
    else:
        A = translation_inverse(torch.trunc(m), "x" if op == "TranslateX" else "y")
    out = warp_affine(z, A, mode=interpolation, fill=fill)
    return out.round_().clamp_(0.0, 255.0)


def _apply_float(z: torch.Tensor, op: str, m: torch.Tensor, interpolation: str, fill: float) -> torch.Tensor:
    """One op on a float batch ``z (n, C, H, W)`` holding integers 0..255, magnitudes ``m (n,)`` (CPU)."""
    if op in ("ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate"):
        return _geometric(z, op, m, interpolation, fill)
    f = m.to(device=z.device, dtype=z.dtype).view(-1, 1, 1, 1)
    if op == "Brightness":
        return _floor_blend(z, torch.zeros_like(z), 1.0 + f)
    if op == "Color":
        return _floor_blend(z, _gray(z).expand_as(z), 1.0 + f)
    if op == "Contrast":
        mean = torch.floor(_gray(z).to(torch.float64).mean(dim=(1, 2, 3), keepdim=True) + 0.5).to(z.dtype)
        return _floor_blend(z, mean.expand_as(z), 1.0 + f)
    if op == "Sharpness":
        return _floor_blend(z, _sharpness_degenerate(z), 1.0 + f)
    if op == "Posterize":
        q = torch.pow(2.0, 8.0 - f)
        return torch.floor(z / q) * q
    if op == "Solarize":  # z >= t <=> z >= ceil(t) for integer z; ceil in float64 before f's float32 rounding
        t = torch.ceil(m.to(torch.float64)).to(device=z.device, dtype=z.dtype).view(-1, 1, 1, 1)
        return torch.where(z >= t, 255.0 - z, z)
    if op == "AutoContrast":
        # float64 and PIL's association (z * scale + offset): the floor of values that land on integers
        z64 = z.to(torch.float64)
        lo, hi = z64.amin(dim=(2, 3), keepdim=True), z64.amax(dim=(2, 3), keepdim=True)
        scale = torch.full_like(hi, 255.0) / (hi - lo).clamp(min=1.0)  # `255.0 / t` multiplies by 1/t: 1 ulp off
        scaled = (z64 * scale - lo * scale).clamp_(0.0, 255.0).floor_()
        return torch.where(hi > lo, scaled, z64).to(z.dtype)
    if op == "Equalize":
        return _equalize(z)
    return 255.0 - z  # Invert


def apply_op(
    x: torch.Tensor,
    op: str,
    magnitude: float | torch.Tensor = 0.0,
    *,
    interpolation: str = "nearest",
    fill: float = 0.0,
) -> torch.Tensor:
    """Apply one AutoAugment operation (table in the module docstring) to ``uint8`` images ``(B, C, H, W)`` or
    ``(C, H, W)``, with a signed ``magnitude`` (a number, or one per sample ``(B,)``); returns ``uint8``.

    Examples
    --------
    >>> import torch
    >>> z = torch.tensor([[[0, 100], [200, 255]]], dtype=torch.uint8)
    >>> apply_op(z, "Solarize", 128.0).tolist()
    [[[0, 100], [55, 0]]]
    >>> apply_op(z, "Posterize", 2.0).tolist()
    [[[0, 64], [192, 192]]]
    """
    check_choice(op, OPS, name="op")
    check_choice(interpolation, ("nearest", "bilinear"), name="interpolation")
    batch, single = as_batch(x, "apply_op")
    if batch.dtype != torch.uint8:
        raise TypeError(
            f"AutoAugment operations take uint8 images (0..255), got {batch.dtype}; apply them before ToFloat"
        )
    m = torch.as_tensor(magnitude, dtype=torch.float64).cpu().reshape(-1)
    if m.numel() == 1:
        m = m.expand(batch.shape[0])
    if m.numel() != batch.shape[0]:
        raise ValueError(f"magnitude must be a number or one per sample ({batch.shape[0]}), got {m.numel()}")
    fill = check_number(fill, name="fill")
    if not (fill.is_integer() and 0 <= fill <= 255):
        raise ValueError(f"fill={fill} is not a uint8 value (an integer in 0..255), and the images are uint8")
    out = _apply_float(batch.to(torch.float32), op, m, interpolation, fill).to(torch.uint8)
    return out[0] if single else out


class AutoAugment:
    """AutoAugment with the ImageNet policy, one sub-policy per sample. ``params``: ``(policy (B,), uniforms
    (B, 2), signs (B, 2))`` -- sub-policy index, the two draws compared with the probabilities, and the signs
    (``-1`` or ``+1``) of the signed magnitudes.

    Parameters
    ----------
    policy : "imagenet"
        The policy [Cubuk et al. 2019] searched on ImageNet (what [Xu & Liu 2023, Sec. 6.1] trains with).
    interpolation : "nearest" | "bilinear"
        Of Rotate / Shear / Translate (torchvision's default: nearest).
    fill : float
        Value of the pixels the geometric operations bring in from outside (0 = black).

    Examples
    --------
    >>> import torch
    >>> x = torch.randint(0, 256, (8, 3, 16, 16), dtype=torch.uint8)
    >>> aa = AutoAugment()
    >>> a = aa(x, torch.Generator().manual_seed(0))
    >>> bool((a == aa(x, torch.Generator().manual_seed(0))).all()), a.dtype, tuple(a.shape)
    (True, torch.uint8, (8, 3, 16, 16))
    """

    def __init__(self, policy: str = "imagenet", *, interpolation: str = "nearest", fill: float = 0.0) -> None:
        self.policy_name = check_choice(policy, ("imagenet",), name="policy")
        self.policy = IMAGENET_POLICY
        self.interpolation = check_choice(interpolation, ("nearest", "bilinear"), name="interpolation")
        self.fill = check_number(fill, name="fill")
        if not (self.fill.is_integer() and 0 <= self.fill <= 255):  # AutoAugment takes uint8 images only
            raise ValueError(f"fill must be a uint8 value (an integer in 0..255), got {fill}")

    def params(self, x: torch.Tensor, generator: torch.Generator | None) -> tuple[torch.Tensor, ...]:
        B = x.shape[0]
        policy = randint(len(self.policy), B, generator)
        uniforms = uniform(2 * B, generator).view(B, 2)
        signs = torch.randint(2, (B, 2), generator=generator, device=generator_device(generator)).cpu() * 2 - 1
        return policy, uniforms, signs

    def apply(self, x: torch.Tensor, params: tuple[torch.Tensor, ...]) -> torch.Tensor:
        if x.dtype != torch.uint8:
            raise TypeError(f"AutoAugment takes uint8 images (0..255), got {x.dtype}; apply it before ToFloat")
        policy, uniforms, signs = params
        H, W = x.shape[-2:]
        z = x.to(torch.float32)
        for slot in (0, 1):
            ops: list[Any] = [self.policy[k][slot] for k in policy.tolist()]
            active = torch.tensor(
                [u <= p for (_, p, _), u in zip(ops, uniforms[:, slot].tolist(), strict=True)], dtype=torch.bool
            )
            mags = torch.tensor([magnitude(name, b, H, W) for name, _, b in ops], dtype=torch.float64)
            signed = torch.tensor([name in SIGNED_OPS for name, _, _ in ops], dtype=torch.bool)
            mags = torch.where(signed, mags * signs[:, slot], mags)
            names = [name for name, _, _ in ops]
            for op in sorted(set(names)):  # one batched call per distinct operation of this slot
                sel = torch.tensor([n == op for n in names], dtype=torch.bool) & active
                if sel.any():
                    idx = sel.nonzero().view(-1)
                    z[idx.to(z.device)] = _apply_float(
                        z[idx.to(z.device)], op, mags[idx], self.interpolation, self.fill
                    )
        return z.to(torch.uint8)

    def __call__(self, x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        batch, single = as_batch(x, "AutoAugment")
        out = self.apply(batch, self.params(batch, generator))
        return out[0] if single else out

    def __repr__(self) -> str:
        return f"AutoAugment(policy={self.policy_name!r}, interpolation={self.interpolation!r}, fill={self.fill})"
