"""Vision Transformers with a class token: DeiT-Ti and DeiT-S [Touvron et al. 2021] as timm builds them
([pytorch-image-models (huggingface)] ``timm/models/vision_transformer.py``, ``deit_tiny_patch16_224`` /
``deit_small_patch16_224``: patch 16, depth 12, MLP ratio 4, qkv bias, LayerNorm eps 1e-6, exact GELU, no
distillation token) [Dosovitskiy et al. 2021], with timm's module and state-dict key names (``cls_token``,
``pos_embed``, ``patch_embed.proj``, ``blocks.i.{norm1, attn.qkv, attn.proj, norm2, mlp.fc1, mlp.fc2}``,
``norm``, ``head``), so a timm state dict loads as it is.

The forward pass is timm's: patch embedding (a ``patch x patch`` stride-``patch`` convolution), class token
prepended, position embedding added (one entry per patch and one for the class token, so the image size is fixed
by ``input_shape``), pre-norm blocks ``x + attn(norm1(x))``, ``x + mlp(norm2(x))`` with stochastic depth, the final
``norm``, then the class token is the classifier input. Initialisation as timm's default (``weight_init=''``):
``pos_embed ~ trunc_normal(std=0.02)``, ``cls_token ~ N(0, 1e-6^2)``, every linear layer (the head included)
``trunc_normal(std=0.02)`` with zero bias, LayerNorms weight 1 and bias 0, the patch convolution PyTorch's default.

Measured layers: ``stem`` (the patch embedding's ``(B, N, D)`` tokens), every block ``blocks.i`` (all ``1 + N``
tokens, flattened, as the conv nets' flattened maps) and ``pre_logits`` (the normalised class token, the
classifier input, d = D), then ``bottleneck`` when ``d`` is set. A block's class token alone is not a
module output; hook ``blocks.i`` with ``flatten=False`` and take ``[:, 0]`` for it.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from nclab.nets.base import CollapseNet, FeatureLayer, check_feature_bottleneck

__all__ = ["DeiTSmall", "DeiTTiny", "VisionTransformer"]

_LN_EPS = 1e-6  # timm's LayerNorm default


class _PatchEmbed(nn.Module):
    def __init__(self, c_in: int, dim: int, patch: int) -> None:
        super().__init__()
        self.proj = nn.Conv2d(c_in, dim, patch, stride=patch)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x).flatten(2).transpose(1, 2)  # (B, N, D), patches in row-major order


class _Attention(nn.Module):
    """timm's ``Attention``: ``softmax(q k^T / sqrt(D / heads)) v`` per head, then ``proj``."""

    def __init__(self, dim: int, heads: int, qkv_bias: bool, attn_drop: float, proj_drop: float) -> None:
        super().__init__()
        if dim % heads:
            raise ValueError(f"embed_dim {dim} is not divisible by num_heads {heads}")
        self.heads, self.attn_drop = heads, float(attn_drop)
        self.qkv = nn.Linear(dim, 3 * dim, bias=qkv_bias)
        self.proj = nn.Linear(dim, dim)
        self.proj_drop = nn.Dropout(proj_drop)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, N, C = x.shape
        q, k, v = self.qkv(x).reshape(B, N, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
        out = F.scaled_dot_product_attention(q, k, v, dropout_p=self.attn_drop if self.training else 0.0)
        return self.proj_drop(self.proj(out.transpose(1, 2).reshape(B, N, C)))


class _Mlp(nn.Module):
    def __init__(self, dim: int, hidden: int, drop: float) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.drop1 = nn.Dropout(drop)
        self.fc2 = nn.Linear(hidden, dim)
        self.drop2 = nn.Dropout(drop)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop2(self.fc2(self.drop1(self.act(self.fc1(x)))))


class _DropPath(nn.Module):
    """Stochastic depth: in training, drop the residual branch of a whole sample with probability ``p`` and scale
    the kept ones by ``1 / (1 - p)`` (timm's ``drop_path``, ``scale_by_keep=True``)."""

    def __init__(self, p: float) -> None:
        super().__init__()
        self.p = float(p)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.p == 0.0 or not self.training:
            return x
        keep = x.new_empty((x.shape[0],) + (1,) * (x.ndim - 1)).bernoulli_(1.0 - self.p)
        return x * keep / (1.0 - self.p)


class _Block(nn.Module):
    def __init__(self, dim: int, heads: int, mlp_ratio: float, qkv_bias: bool, drops: tuple[float, float, float]):
        super().__init__()
        attn_drop, proj_drop, drop_path = drops
        self.norm1 = nn.LayerNorm(dim, eps=_LN_EPS)
        self.attn = _Attention(dim, heads, qkv_bias, attn_drop, proj_drop)
        self.drop_path1 = _DropPath(drop_path)
        self.norm2 = nn.LayerNorm(dim, eps=_LN_EPS)
        self.mlp = _Mlp(dim, int(dim * mlp_ratio), proj_drop)
        self.drop_path2 = _DropPath(drop_path)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.drop_path1(self.attn(self.norm1(x)))
        return x + self.drop_path2(self.mlp(self.norm2(x)))


class VisionTransformer(CollapseNet):
    """timm's ``VisionTransformer`` with a class token (see the module docstring) on ``input_shape = (C, H, W)``;
    ``H`` and ``W`` must be multiples of ``patch_size``. The defaults are ViT-B/16 (timm's defaults).

    Parameters
    ----------
    input_shape : sequence of int
        Image shape ``(C, H, W)``.
    K : int
        Number of classes.
    head : nn.Module, optional
        Classifier on the ``(B, d)`` features (default: a linear layer ``d -> K``).
    patch_size, embed_dim, depth, num_heads : int
        Patch side, token width ``D``, number of blocks and attention heads.
    mlp_ratio : float
        The MLP's hidden width is ``int(D * mlp_ratio)``.
    qkv_bias : bool
        Bias of the query/key/value projection (timm's default, DeiT's).
    drop_rate, pos_drop_rate, attn_drop_rate, proj_drop_rate : float
        Dropout before the head, after the position embedding, on the attention weights, after each projection
        (all 0 in DeiT).
    drop_path_rate : float
        Stochastic depth, rising linearly from 0 (first block) to this value (last block), as timm; DeiT trains
        with 0.1 [Touvron et al. 2021] (timm's default is 0).
    d, feature_layer
        An inserted linear layer of width ``d`` between the class token and the head (``"linear"``).

    Examples
    --------
    >>> import torch
    >>> from nclab.nets import VisionTransformer
    >>> net = VisionTransformer((3, 32, 32), 10, patch_size=8, embed_dim=16, depth=2, num_heads=2)
    >>> list(net.measured_layers()), tuple(net(torch.zeros(2, 3, 32, 32)).shape)
    (['stem', 'blocks.0', 'blocks.1', 'pre_logits'], (2, 10))
    """

    def __init__(
        self,
        input_shape: Sequence[int],
        K: int,
        *,
        patch_size: int = 16,
        embed_dim: int = 768,
        depth: int = 12,
        num_heads: int = 12,
        mlp_ratio: float = 4.0,
        qkv_bias: bool = True,
        drop_rate: float = 0.0,
        pos_drop_rate: float = 0.0,
        attn_drop_rate: float = 0.0,
        proj_drop_rate: float = 0.0,
        drop_path_rate: float = 0.0,
        d: int | None = None,
        feature_layer: FeatureLayer = "linear",
        head: nn.Module | None = None,
    ) -> None:
        super().__init__()
        if len(input_shape) != 3:
            raise ValueError(f"input_shape must be (C, H, W) for a vision transformer, got {tuple(input_shape)}")
        c, h, w = (int(s) for s in input_shape)
        if h % patch_size or w % patch_size:
            raise ValueError(f"the image side {h}x{w} is not a multiple of patch_size {patch_size}")
        for name, p in (("drop_rate", drop_rate), ("pos_drop_rate", pos_drop_rate), ("attn_drop_rate", attn_drop_rate),
                        ("proj_drop_rate", proj_drop_rate), ("drop_path_rate", drop_path_rate)):  # fmt: skip
            if not 0.0 <= p < 1.0:
                raise ValueError(f"{name} must be in [0, 1), got {p}")
        d = check_feature_bottleneck(d, feature_layer, ("linear",), model="VisionTransformer")
        num_patches = (h // patch_size) * (w // patch_size)
        # parameters of the module itself first, as timm's state dict lists them
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, num_patches + 1, embed_dim))
        self.patch_embed = _PatchEmbed(c, embed_dim, patch_size)
        self.pos_drop = nn.Dropout(pos_drop_rate)
        rates = torch.linspace(0, drop_path_rate, depth, device="cpu").tolist()  # as timm (and on any default device)
        self.blocks = nn.Sequential(
            *(_Block(embed_dim, num_heads, mlp_ratio, qkv_bias, (attn_drop_rate, proj_drop_rate, r)) for r in rates)
        )
        self.norm = nn.LayerNorm(embed_dim, eps=_LN_EPS)
        self.head_drop = nn.Dropout(drop_rate)
        self.pre_logits = nn.Identity()  # the measured penultimate layer: the class token, as the head reads it
        self.bottleneck = nn.Linear(embed_dim, d) if d is not None else None
        self.K, self.d = int(K), (embed_dim if d is None else int(d))
        self.head = nn.Linear(self.d, K)
        self._init_weights()
        if head is not None:
            self.head = head

    def _init_weights(self) -> None:
        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        nn.init.normal_(self.cls_token, std=1e-6)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                self.init_linear(m)

    def init_linear(self, module: nn.Linear) -> None:
        """timm's ``init_weights_vit_timm``: ``trunc_normal(std=0.02)`` weight (cut at +-2), zero bias."""
        nn.init.trunc_normal_(module.weight, std=0.02)
        if module.bias is not None:
            nn.init.zeros_(module.bias)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch_embed(x)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
        x = self.norm(self.blocks(self.pos_drop(x)))
        x = self.pre_logits(self.head_drop(x[:, 0]))
        return x if self.bottleneck is None else self.bottleneck(x)

    def _layers(self) -> list[tuple[str, nn.Module]]:
        out: list[tuple[str, nn.Module]] = [("stem", self.patch_embed)]
        out += [(f"blocks.{i}", b) for i, b in enumerate(self.blocks)]
        out.append(("pre_logits", self.pre_logits))
        if self.bottleneck is not None:
            out.append(("bottleneck", self.bottleneck))
        return out


class DeiTTiny(VisionTransformer):
    """timm's ``deit_tiny_patch16_224`` (DeiT-Ti): D = 192, 12 blocks, 3 heads; 5,717,416 parameters at 1,000
    classes on ``(3, 224, 224)``. See :class:`VisionTransformer` for the options.

    Parameters
    ----------
    input_shape : sequence of int
        Image shape ``(C, H, W)``.
    K : int
        Number of classes.
    patch_size, drop_rate, attn_drop_rate, drop_path_rate, d, feature_layer
        As in :class:`VisionTransformer`.
    head : nn.Module, optional
        Classifier on the ``(B, d)`` features (default: a linear layer ``d -> K``).

    Examples
    --------
    >>> from nclab.nets import DeiTTiny
    >>> net = DeiTTiny((3, 224, 224), 1000)
    >>> sum(p.numel() for p in net.parameters()), net.d
    (5717416, 192)
    """

    reference = "timm deit_tiny_patch16_224"

    def __init__(
        self,
        input_shape: Sequence[int],
        K: int,
        *,
        patch_size: int = 16,
        drop_rate: float = 0.0,
        attn_drop_rate: float = 0.0,
        drop_path_rate: float = 0.0,
        d: int | None = None,
        feature_layer: FeatureLayer = "linear",
        head: nn.Module | None = None,
    ) -> None:
        super().__init__(
            input_shape, K, patch_size=patch_size, embed_dim=192, depth=12, num_heads=3,
            drop_rate=drop_rate, attn_drop_rate=attn_drop_rate, drop_path_rate=drop_path_rate,
            d=d, feature_layer=feature_layer, head=head,
        )  # fmt: skip


class DeiTSmall(VisionTransformer):
    """timm's ``deit_small_patch16_224`` (DeiT-S): D = 384, 12 blocks, 6 heads; 22,050,664 parameters at 1,000
    classes on ``(3, 224, 224)``. See :class:`VisionTransformer` for the options.

    Parameters
    ----------
    input_shape : sequence of int
        Image shape ``(C, H, W)``.
    K : int
        Number of classes.
    patch_size, drop_rate, attn_drop_rate, drop_path_rate, d, feature_layer
        As in :class:`VisionTransformer`.
    head : nn.Module, optional
        Classifier on the ``(B, d)`` features (default: a linear layer ``d -> K``).

    Examples
    --------
    >>> from nclab.nets import DeiTSmall
    >>> net = DeiTSmall((3, 224, 224), 1000)
    >>> sum(p.numel() for p in net.parameters()), net.d
    (22050664, 384)
    """

    reference = "timm deit_small_patch16_224"

    def __init__(
        self,
        input_shape: Sequence[int],
        K: int,
        *,
        patch_size: int = 16,
        drop_rate: float = 0.0,
        attn_drop_rate: float = 0.0,
        drop_path_rate: float = 0.0,
        d: int | None = None,
        feature_layer: FeatureLayer = "linear",
        head: nn.Module | None = None,
    ) -> None:
        super().__init__(
            input_shape, K, patch_size=patch_size, embed_dim=384, depth=12, num_heads=6,
            drop_rate=drop_rate, attn_drop_rate=attn_drop_rate, drop_path_rate=drop_path_rate,
            d=d, feature_layer=feature_layer, head=head,
        )  # fmt: skip
