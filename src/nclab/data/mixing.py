"""Batch-level regularisers of the DeiT recipe [Touvron et al. 2021]: mixup [Zhang et al. 2018] / CutMix
[Yun et al. 2019] with label smoothing, and stochastic depth [Huang et al. 2016] (:func:`drop_path`).

**How a loss consumes the mixed targets.** :class:`MixupCutmix` returns the mixed images and *soft targets*
``T (B, K)``, rows summing to 1: ``T_b = lam_b s(y_b) + (1 - lam_b) s(y_{B-1-b})`` where ``s`` is the
label-smoothed one-hot vector (``1 - eps + eps/K`` on the label, ``eps/K`` elsewhere) and ``B-1-b`` the
partner of sample ``b`` (the batch reversed, as timm). Cross-entropy with soft targets is
``-(T * log_softmax(logits)).sum(1).mean()``, which is exactly what ``torch.nn.functional.cross_entropy(logits,
T)`` computes when ``T`` is a float tensor of class probabilities; equivalently
``lam CE(logits, y) + (1 - lam) CE(logits, y.flip(0))`` in batch mode without smoothing. Collapse is measured
on the un-mixed data with the hard labels (mixing is a training-only transform).

**Stochastic depth** is a network option, not a data transform. :func:`drop_path` and :class:`DropPath` live
here because the data layer is the lowest package holding nclab's random per-sample operators (``nclab.nets``
may import them; nothing in ``nclab.data`` imports ``nclab.nets``).
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from nclab.data.rng import randint, uniform
from nclab.validation import check_choice, check_int, check_labels

__all__ = ["DropPath", "MixupCutmix", "drop_path", "smooth_one_hot"]


def smooth_one_hot(y: torch.Tensor, K: int, smoothing: float = 0.0) -> torch.Tensor:
    """Label-smoothed one-hot rows ``(B, K)`` float32: ``1 - smoothing + smoothing / K`` at ``y``,
    ``smoothing / K`` elsewhere (timm's ``mixup_target`` convention). ``y`` must hold integer labels in
    ``[0, K)`` (else ``ValueError: labels: label 5 is out of range [0, 3)``; float labels: ``TypeError``).

    Examples
    --------
    >>> import torch
    >>> (10 * smooth_one_hot(torch.tensor([2, 0]), 4, 0.4)).round().tolist()
    [[1.0, 1.0, 7.0, 1.0], [7.0, 1.0, 1.0, 1.0]]
    """
    check_labels(y, K=K, name="labels")
    off = smoothing / K
    out = torch.full((y.shape[0], K), off, dtype=torch.float32, device=y.device)
    return out.scatter_(1, y.long().view(-1, 1), 1.0 - smoothing + off)


def _beta(alpha: float, size: int, generator: torch.Generator | None) -> np.ndarray:
    # torch has no seeded Beta sampler: seed numpy's from the torch generator, so the draws follow its state
    seed = int(randint(2**62, 1, generator))
    return np.random.default_rng(seed).beta(alpha, alpha, size=size)


class MixupCutmix:
    """Mixup or CutMix on a float batch with soft targets (timm's ``Mixup``; DeiT's defaults).

    With probability ``prob`` (per batch, or per sample with ``mode="elem"``) the batch is mixed: CutMix with
    probability ``switch_prob`` when both are enabled, else mixup; ``lam ~ Beta(alpha, alpha)``.

    * mixup: ``x_b <- lam x_b + (1 - lam) x_{B-1-b}``.
    * CutMix: a box of side ``(int(H sqrt(1 - lam)), int(W sqrt(1 - lam)))`` centred at a uniform pixel
      ``(cy, cx)``, clipped to the image (corners ``cy -+ h // 2``, ``cx -+ w // 2``), is pasted from
      ``x_{B-1-b}``; ``lam`` is then corrected to the fraction of pixels kept, ``1 - box area / (H W)``.

    Returns ``(x_mixed, targets)``, ``targets`` float32 ``(B, K)`` as in the module docstring; ``x`` itself is
    not modified. ``params`` gives, per sample, ``(lam, box)`` with ``box = (y0, y1, x0, x1)`` for CutMix and
    ``None`` for mixup.

    Parameters
    ----------
    K : int
    mixup_alpha, cutmix_alpha : float
        ``0`` disables that method (DeiT: 0.8 and 1.0).
    prob : float
        Probability of mixing at all.
    switch_prob : float
        Probability of CutMix rather than mixup when both are enabled (DeiT: 0.5).
    label_smoothing : float
        ``eps`` of the smoothed one-hot targets (DeiT: 0.1).
    mode : "batch" | "elem"
        One ``lam`` (and one box) for the whole batch (timm's and DeiT's default), or one per sample.

    Examples
    --------
    >>> import torch
    >>> mix = MixupCutmix(3, cutmix_alpha=0.0, label_smoothing=0.0)
    >>> x, y = torch.rand(4, 1, 2, 2), torch.tensor([0, 1, 2, 0])
    >>> xm, t = mix(x, y, torch.Generator().manual_seed(0))
    >>> torch.allclose(t.sum(1), torch.ones(4)), tuple(t.shape)
    (True, (4, 3))
    """

    def __init__(
        self,
        K: int,
        *,
        mixup_alpha: float = 0.8,
        cutmix_alpha: float = 1.0,
        prob: float = 1.0,
        switch_prob: float = 0.5,
        label_smoothing: float = 0.1,
        mode: str = "batch",
    ) -> None:
        self.K = check_int(K, name="K", low=2)
        self.mixup_alpha, self.cutmix_alpha = float(mixup_alpha), float(cutmix_alpha)
        if self.mixup_alpha < 0 or self.cutmix_alpha < 0 or not (self.mixup_alpha > 0 or self.cutmix_alpha > 0):
            raise ValueError(
                f"mixup_alpha and cutmix_alpha must be >= 0 and one of them > 0, got {mixup_alpha}, {cutmix_alpha}"
            )
        for value, name in ((prob, "prob"), (switch_prob, "switch_prob"), (label_smoothing, "label_smoothing")):
            if not 0.0 <= float(value) <= 1.0:
                raise ValueError(f"{name} must lie in [0, 1], got {value}")
        self.prob, self.switch_prob, self.label_smoothing = float(prob), float(switch_prob), float(label_smoothing)
        self.mode = check_choice(mode, ("batch", "elem"), name="mode")

    def _draw(self, n: int, generator: torch.Generator | None) -> tuple[np.ndarray, np.ndarray]:
        """``n`` pairs ``(lam, use_cutmix)``; ``lam = 1`` where no mixing happens."""
        mix = uniform(n, generator).numpy() < self.prob
        if self.mixup_alpha > 0 and self.cutmix_alpha > 0:
            cut = uniform(n, generator).numpy() < self.switch_prob
        else:
            cut = np.full(n, self.cutmix_alpha > 0)
        lam_cut = _beta(self.cutmix_alpha, n, generator) if self.cutmix_alpha > 0 else np.ones(n)
        lam_mix = _beta(self.mixup_alpha, n, generator) if self.mixup_alpha > 0 else np.ones(n)
        lam = np.where(mix, np.where(cut, lam_cut, lam_mix), 1.0)
        return lam, cut & mix

    def _box(self, H: int, W: int, lam: float, generator: torch.Generator | None) -> tuple[int, int, int, int]:
        r = math.sqrt(1.0 - lam)
        h, w = int(H * r), int(W * r)
        cy, cx = int(randint(H, 1, generator)), int(randint(W, 1, generator))
        return (
            min(max(cy - h // 2, 0), H),
            min(max(cy + h // 2, 0), H),
            min(max(cx - w // 2, 0), W),
            min(max(cx + w // 2, 0), W),
        )

    def params(self, x: torch.Tensor, generator: torch.Generator | None) -> list[tuple[float, tuple | None]]:
        B, H, W = x.shape[0], x.shape[-2], x.shape[-1]
        lam, cut = self._draw(1 if self.mode == "batch" else B, generator)
        out = []
        for lam_b, cut_b in zip(lam.tolist(), cut.tolist(), strict=True):
            box = self._box(H, W, lam_b, generator) if cut_b else None
            if box is not None:  # the fraction actually kept after clipping
                lam_b = 1.0 - (box[1] - box[0]) * (box[3] - box[2]) / float(H * W)
            out.append((lam_b, box))
        return out * B if self.mode == "batch" else out

    def apply(
        self, x: torch.Tensor, y: torch.Tensor, params: list[tuple[float, tuple | None]]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if not x.is_floating_point():
            raise TypeError(f"MixupCutmix mixes floating images (after ToFloat / Normalize), got {x.dtype}")
        if x.ndim != 4 or y.ndim != 1 or y.shape[0] != x.shape[0]:
            raise ValueError(f"MixupCutmix takes x (B, C, H, W) and y (B,), got {tuple(x.shape)} and {tuple(y.shape)}")
        partner = x.flip(0)
        lam = torch.tensor([p[0] for p in params], dtype=x.dtype, device=x.device)
        out = torch.where(
            torch.tensor([p[1] is None for p in params], device=x.device)[:, None, None, None],
            lam.view(-1, 1, 1, 1) * x + (1.0 - lam.view(-1, 1, 1, 1)) * partner,
            x,
        )
        for b, (_, box) in enumerate(params):
            if box is not None:
                y0, y1, x0, x1 = box
                out[b, :, y0:y1, x0:x1] = partner[b, :, y0:y1, x0:x1]
        s = smooth_one_hot(y.to(x.device), self.K, self.label_smoothing)
        lam32 = lam.to(torch.float32).view(-1, 1)
        return out, lam32 * s + (1.0 - lam32) * s.flip(0)

    def __call__(
        self, x: torch.Tensor, y: torch.Tensor, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return self.apply(x, y, self.params(x, generator))

    def __repr__(self) -> str:
        return (
            f"MixupCutmix(K={self.K}, mixup_alpha={self.mixup_alpha}, "
            f"cutmix_alpha={self.cutmix_alpha}, prob={self.prob}, switch_prob={self.switch_prob}, "
            f"label_smoothing={self.label_smoothing}, mode={self.mode!r})"
        )


def drop_path(
    x: torch.Tensor,
    p: float,
    *,
    training: bool = True,
    generator: torch.Generator | None = None,
    scale_by_keep: bool = True,
) -> torch.Tensor:
    """Stochastic depth [Huang et al. 2016] on a residual branch's output ``x (B, ...)``: each sample's branch
    is zeroed with probability ``p`` and (``scale_by_keep``) the kept ones are divided by ``1 - p``, so the
    expectation is unchanged; the identity when ``p = 0`` or not ``training`` (timm's ``drop_path``). Use as
    ``out = shortcut + drop_path(branch(x), p, training=self.training)``.

    Examples
    --------
    >>> import torch
    >>> x = torch.ones(6, 2)
    >>> y = drop_path(x, 0.5, generator=torch.Generator().manual_seed(0))
    >>> sorted(set(y[:, 0].tolist())) in ([0.0, 2.0], [0.0], [2.0])
    True
    """
    if not 0.0 <= p < 1.0:
        raise ValueError(f"drop_path probability p must lie in [0, 1), got {p}")
    if p == 0.0 or not training:
        return x
    keep = (uniform(x.shape[0], generator) >= p).to(device=x.device, dtype=x.dtype)
    if scale_by_keep:
        keep = keep / (1.0 - p)
    return x * keep.view(-1, *([1] * (x.ndim - 1)))


class DropPath(nn.Module):
    """:func:`drop_path` as a module: active in ``train()`` mode, the identity in ``eval()``."""

    def __init__(self, p: float = 0.0) -> None:
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise ValueError(f"DropPath probability p must lie in [0, 1), got {p}")
        self.p = float(p)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return drop_path(x, self.p, training=self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"
