"""Affine warps of image batches, the one sampler behind rotation, shear and translation.

A warp is given by its *inverse* map in pixel coordinates: the output pixel whose centre lies at ``(x, y)``
takes the input value at ``A @ (x, y, 1)``, where ``A`` is ``(2, 3)``. Coordinates are continuous with the
origin at the top-left *corner* of the image, ``x`` to the right and ``y`` down, so pixel ``(row i, col j)`` has
its centre at ``(j + 0.5, i + 0.5)`` and the image centre is ``(W / 2, H / 2)`` -- the convention of PIL's
``Image.transform`` and of torchvision's tensor ``affine`` (``center=[0, 0]`` there is this corner).

``mode="nearest"`` reads the pixel the point falls in, ``(floor(y), floor(x))``, as PIL's nearest filter -- a
point on the edge between two pixels belongs to the right / lower one (``grid_sample``'s nearest would round
such ties to even, and AutoAugment's shear magnitudes do hit them; PIL computes the points in 16.16 fixed point,
so for points within 1.5e-5 pixel of an edge it may pick the other side). ``mode="bilinear"`` is
:func:`torch.nn.functional.grid_sample` with ``align_corners=False`` on the map converted to its normalised
coordinates (``u = 2 x / W - 1``). Points outside the image read ``fill``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

__all__ = ["rotation_inverse", "shear_inverse", "translation_inverse", "warp_affine"]


def _identity(n: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    return torch.eye(2, 3, dtype=dtype).repeat(n, 1, 1)


def rotation_inverse(degrees: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """Inverse maps ``(n, 2, 3)`` of a counter-clockwise rotation by ``degrees (n,)`` about the image centre.

    With ``y`` pointing down, turning the picture counter-clockwise by ``t`` sends the offset ``(dx, dy)`` from
    the centre to ``(dx cos t + dy sin t, -dx sin t + dy cos t)``; the inverse reads the input at
    ``(dx cos t - dy sin t, dx sin t + dy cos t)``. ``degrees = 90`` on a square image is ``torch.rot90(x, 1,
    (-2, -1))``.
    """
    t = degrees.to(torch.float64) * (math.pi / 180.0)
    c, s = torch.cos(t), torch.sin(t)
    cx, cy = width / 2.0, height / 2.0
    A = _identity(len(t))
    A[:, 0, 0], A[:, 0, 1], A[:, 1, 0], A[:, 1, 1] = c, -s, s, c
    # in = c0 + R (out - c0)  =>  translation c0 - R c0
    A[:, 0, 2] = cx - (c * cx - s * cy)
    A[:, 1, 2] = cy - (s * cx + c * cy)
    return A


def shear_inverse(m: torch.Tensor, axis: str) -> torch.Tensor:
    """Inverse maps of a shear about the top-left corner: ``axis="x"`` reads ``(x + m y, y)``, ``"y"`` reads
    ``(x, y + m x)`` (PIL's ``(1, m, 0, 0, 1, 0)`` and its transpose, the AutoAugment ShearX / ShearY)."""
    A = _identity(len(m))
    if axis == "x":
        A[:, 0, 1] = m.to(torch.float64)
    else:
        A[:, 1, 0] = m.to(torch.float64)
    return A


def translation_inverse(t: torch.Tensor, axis: str) -> torch.Tensor:
    """Inverse maps of a translation that moves the picture by ``t`` pixels to the right (``axis="x"``) or down
    (``"y"``): the output at ``x`` reads the input at ``x - t``."""
    A = _identity(len(t))
    A[:, 0 if axis == "x" else 1, 2] = -t.to(torch.float64)
    return A


def warp_affine(x: torch.Tensor, inverse: torch.Tensor, *, mode: str = "nearest", fill: float = 0.0) -> torch.Tensor:
    """Warp a float batch ``x (n, C, H, W)`` by the inverse maps ``inverse (n, 2, 3)`` (pixel coordinates, see
    the module docstring); ``mode`` ``"nearest"`` or ``"bilinear"``; outside points read ``fill``."""
    if mode == "nearest":
        return _warp_nearest(x, inverse, fill)
    n, _, H, W = x.shape
    A = inverse.to(torch.float64).cpu()
    # theta = D^-1 [A_lin | A_lin c + a - c] D with D = diag(W/2, H/2), c = (W/2, H/2): pixel -> normalised
    D = torch.tensor([W / 2.0, H / 2.0], dtype=torch.float64)
    lin = A[:, :, :2] * D[None, None, :] / D[None, :, None]
    shift = (A[:, :, :2] @ D + A[:, :, 2] - D) / D
    theta = torch.cat([lin, shift[:, :, None]], dim=2).to(device=x.device, dtype=x.dtype)
    grid = F.affine_grid(theta, [n, 1, H, W], align_corners=False)
    out = F.grid_sample(x, grid, mode=mode, padding_mode="zeros", align_corners=False)
    if fill != 0.0:
        inside = F.grid_sample(torch.ones_like(x[:, :1]), grid, mode=mode, padding_mode="zeros", align_corners=False)
        out = out * inside + fill * (1.0 - inside)
    return out


def _warp_nearest(x: torch.Tensor, inverse: torch.Tensor, fill: float) -> torch.Tensor:
    n, C, H, W = x.shape
    A = inverse.to(device=x.device, dtype=torch.float64)
    cx = torch.arange(W, device=x.device, dtype=torch.float64) + 0.5  # pixel centres
    cy = torch.arange(H, device=x.device, dtype=torch.float64) + 0.5
    px = (
        A[:, 0, 0, None, None] * cx[None, None, :] + A[:, 0, 1, None, None] * cy[None, :, None] + A[:, 0, 2, None, None]
    )
    py = (
        A[:, 1, 0, None, None] * cx[None, None, :] + A[:, 1, 1, None, None] * cy[None, :, None] + A[:, 1, 2, None, None]
    )
    ix, iy = torch.floor(px).long(), torch.floor(py).long()  # (n, H, W): the pixel each point falls in
    inside = (ix >= 0) & (ix < W) & (iy >= 0) & (iy < H)
    flat = (iy.clamp(0, H - 1) * W + ix.clamp(0, W - 1)).view(n, 1, H * W).expand(n, C, H * W)
    out = torch.gather(x.reshape(n, C, H * W), 2, flat).view(n, C, H, W)
    return torch.where(inside[:, None], out, torch.full_like(out, fill))
