"""Classifier heads. Every head holds its classifier as ``weight`` ``(K, d)`` (the ``nn.Linear`` layout, one
row per class) and ``bias`` ``(K,)`` or ``None``, which is what the collapse metrics read.

* :class:`LinearHead` -- ``W h + b`` (bias optional).
* :class:`CosineHead` -- ``cos(w_k, h) / tau`` with learned ``W`` ([Jiang et al. 2024, eq. (1)]; ``tau`` divides the
  logits, ``logit_scale = 1 / tau`` is accepted instead, docs/conventions.md).
* :class:`FixedHead` -- a given code ``(K, d)`` with a class assignment (a permutation), not trained
  [Jiang et al. 2024, Sec. 4]; linear or cosine logits.
* :class:`CMFHead` -- the class-mean-feature classifier of [Jiang et al. 2024, Sec. 5]:
  ``W <- beta W + (1 - beta) Hbar``
  with ``Hbar`` the class means of the current mini-batch's (L2-normalised, detached) features; classes absent
  from the batch keep their row; rows re-normalised to the sphere after each update (``renormalize``).
  The trainer calls :meth:`CMFHead.observe` after each training forward pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["CMFHead", "CosineHead", "FixedHead", "LinearHead", "make_head", "resolve_tau"]


def resolve_tau(tau: float | None, logit_scale: float | None, default: float = 1.0) -> float:
    """``tau`` divides the logits; ``logit_scale`` (= 1 / tau, the GNC public code's "temperature") is
    accepted instead. Giving both is an error (they could silently disagree).

    Parameters
    ----------
    tau : float or None
        Temperature dividing the logits, ``> 0``.
    logit_scale : float or None
        ``1 / tau``, ``> 0``; give at most one of the two.
    default : float, default=1.0
        The temperature when neither is given.

    Returns
    -------
    float
        The temperature.

    Raises
    ------
    ValueError
        If both are given, or the one given is not positive.

    Examples
    --------
    >>> from nclab.nets import resolve_tau
    >>> resolve_tau(None, 10.0), resolve_tau(0.5, None), resolve_tau(None, None)
    (0.1, 0.5, 1.0)
    """
    if tau is not None and logit_scale is not None:
        raise ValueError(f"give tau or logit_scale (= 1/tau), not both (got tau={tau}, logit_scale={logit_scale})")
    if logit_scale is not None:
        if logit_scale <= 0:
            raise ValueError(f"logit_scale must be > 0, got {logit_scale}")
        return 1.0 / float(logit_scale)
    tau = default if tau is None else float(tau)
    if tau <= 0:
        raise ValueError(f"tau must be > 0, got {tau}")
    return tau


class LinearHead(nn.Linear):
    """``logits = h W^T + b``: ``nn.Linear(d, K, bias)``.

    Parameters
    ----------
    in_features : int
        Feature dimension ``d``.
    out_features : int
        Number of classes ``K``.
    bias : bool, default=True
        Learn a bias ``b (K,)``.
    device, dtype : optional
        As :class:`torch.nn.Linear`.

    Examples
    --------
    >>> from nclab.nets import LinearHead
    >>> head = LinearHead(4, 3)
    >>> tuple(head.weight.shape), sum(p.numel() for p in head.parameters())  # W (K, d), b (K,)
    ((3, 4), 15)
    """

    cosine = False


class CosineHead(nn.Module):
    """``logits_k = <w_k / ||w_k||, h / ||h||> / tau`` [Jiang et al. 2024], learned ``weight (K, d)``, no bias.

    Parameters
    ----------
    d : int
        Feature dimension.
    K : int
        Number of classes.
    tau : float, default=0.1
        Temperature dividing the cosines.

    Examples
    --------
    With ETF rows and ``h = w_0`` the cosines are ``1, -1/2, -1/2``:

    >>> import torch
    >>> from nclab.geometry import simplex_etf
    >>> from nclab.nets import CosineHead
    >>> head = CosineHead(2, 3, tau=0.1)
    >>> with torch.no_grad():
    ...     _ = head.weight.copy_(torch.tensor(simplex_etf(3, 2)))
    >>> print(head(head.weight[:1]).detach().round(decimals=4))
    tensor([[10., -5., -5.]])
    """

    cosine = True

    def __init__(self, d: int, K: int, tau: float = 0.1) -> None:
        super().__init__()
        self.tau = float(tau)
        self.weight = nn.Parameter(torch.empty(K, d))
        nn.init.kaiming_uniform_(self.weight, a=5**0.5)  # nn.Linear's default, so runs compare
        self.bias = None

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return F.normalize(h, dim=1) @ F.normalize(self.weight, dim=1).T / self.tau

    def extra_repr(self) -> str:
        return f"d={self.weight.shape[1]}, K={self.weight.shape[0]}, tau={self.tau}"


class FixedHead(nn.Module):
    """A fixed classifier: row ``k`` is ``code[assignment[k]]`` ([Jiang et al. 2024, Sec. 4]: which code vector each
    class
    gets matters). ``cosine=True`` gives cosine logits ``/ tau``; otherwise ``W h`` (no bias).

    Parameters
    ----------
    code : array-like of shape (K, d)
        The code vectors.
    assignment : sequence of int, optional
        A permutation of ``0..K-1``: class ``k`` gets ``code[assignment[k]]`` (default: the identity).
    cosine : bool, default=True
        Cosine logits divided by ``tau``; else ``W h``.
    tau : float, default=0.1
        Temperature of the cosine logits.

    Raises
    ------
    ValueError
        If ``code`` is not 2-d or ``assignment`` is not a permutation.

    Examples
    --------
    >>> import torch
    >>> from nclab.nets import FixedHead
    >>> head = FixedHead(torch.eye(3), assignment=[2, 0, 1], cosine=False)
    >>> head.weight.tolist(), sum(p.numel() for p in head.parameters())
    ([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]], 0)
    """

    weight: torch.Tensor  # a buffer

    def __init__(
        self, code: Any, assignment: Sequence[int] | None = None, *, cosine: bool = True, tau: float = 0.1
    ) -> None:
        super().__init__()
        W = torch.as_tensor(code, dtype=torch.float32)
        if W.ndim != 2:
            raise ValueError(f"code must be (K, d), got shape {tuple(W.shape)}")
        K = W.shape[0]
        perm = list(range(K)) if assignment is None else [int(a) for a in assignment]
        if sorted(perm) != list(range(K)):
            raise ValueError(f"assignment must be a permutation of 0..{K - 1}, got {perm}")
        self.register_buffer("weight", W[perm].clone())
        self.assignment = perm
        self.cosine = bool(cosine)
        self.tau = float(tau)
        self.bias = None

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        if self.cosine:
            return F.normalize(h, dim=1) @ F.normalize(self.weight, dim=1).T / self.tau
        return h @ self.weight.T


class CMFHead(nn.Module):
    """Class-mean-feature classifier ([Jiang et al. 2024, Sec. 5] / App. B.1), cosine logits ``/ tau``.

    ``weight (K, d)`` is a buffer (not trained by gradient), initialised to random unit rows (from the global
    torch RNG, so seeded with the model). :meth:`observe` applies ``w_k <- beta w_k + (1 - beta) hbar_k`` for
    each class present in the batch, ``hbar_k`` = mean of its L2-normalised detached features; then rows are
    put back on the sphere when ``renormalize`` ([Jiang et al. 2024, Sec. 5] leaves these choices open).

    Parameters
    ----------
    d : int
        Feature dimension.
    K : int
        Number of classes.
    tau : float, default=0.1
        Temperature dividing the cosines.
    beta : float, default=0.9
        Momentum of the class-mean update, in ``[0, 1)``.
    renormalize : bool, default=True
        Put the rows back on the sphere after each update.

    Raises
    ------
    ValueError
        If ``beta`` is outside ``[0, 1)``.

    Examples
    --------
    With ``beta = 0`` one update sets each row to its class's mean normalised feature:

    >>> import torch
    >>> from nclab.nets import CMFHead
    >>> head = CMFHead(2, 2, beta=0.0)
    >>> head.observe(torch.tensor([[3.0, 0.0], [0.0, 2.0]]), torch.tensor([0, 1]))
    >>> head.weight.tolist()
    [[1.0, 0.0], [0.0, 1.0]]
    """

    cosine = True
    weight: torch.Tensor  # a buffer

    def __init__(self, d: int, K: int, tau: float = 0.1, beta: float = 0.9, renormalize: bool = True):
        super().__init__()
        if not 0.0 <= beta < 1.0:
            raise ValueError(f"beta must be in [0, 1), got {beta}")
        self.tau, self.beta, self.renormalize = float(tau), float(beta), bool(renormalize)
        self.register_buffer("weight", F.normalize(torch.randn(K, d), dim=1))
        self.bias = None

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return F.normalize(h, dim=1) @ F.normalize(self.weight, dim=1).T / self.tau

    @torch.no_grad()
    def observe(self, h: torch.Tensor, y: torch.Tensor) -> None:
        K = self.weight.shape[0]
        u = F.normalize(h.detach().to(self.weight.dtype), dim=1)
        sums = torch.zeros_like(self.weight).index_add_(0, y, u)
        counts = torch.bincount(y, minlength=K)
        present = counts > 0
        means = sums[present] / counts[present, None].to(sums.dtype)
        new = self.beta * self.weight[present] + (1.0 - self.beta) * means
        self.weight[present] = F.normalize(new, dim=1) if self.renormalize else new


def make_head(
    kind: str,
    d: int,
    K: int,
    *,
    bias: bool = True,
    tau: float | None = None,
    logit_scale: float | None = None,
    beta: float = 0.9,
    renormalize: bool = True,
    code: Any = None,
    assignment: Sequence[int] | None = None,
    cosine: bool = True,
) -> nn.Module:
    """Build a head by kind: ``linear`` | ``cosine`` | ``fixed`` | ``cmf``. ``code`` for ``fixed``: a ``(K, d)``
    array, or ``"etf"`` / ``"orthogonal"`` / ``"polygon"`` for :func:`nclab.geometry.simplex_etf` /
    ``orthogonal_frame`` / ``regular_polygon`` (``d = 2`` only: the Softmax Code of [Jiang et al. 2024, Thm 3.3]
    there, e.g. the square of its Fig. 4).

    Parameters
    ----------
    kind : {"linear", "cosine", "fixed", "cmf"}
        The head.
    d : int
        Feature dimension.
    K : int
        Number of classes.
    bias : bool, default=True
        Bias of a linear head.
    tau, logit_scale : float, optional
        Temperature or its inverse (:func:`resolve_tau`); default 0.1 for cosine logits, 1 for a linear fixed head.
    beta, renormalize
        Of :class:`CMFHead`.
    code : array-like of shape (K, d) or {"etf", "orthogonal", "polygon"}, optional
        The code of a fixed head (required for ``"fixed"``).
    assignment : sequence of int, optional
        Of :class:`FixedHead`.
    cosine : bool, default=True
        Cosine logits for a fixed head.

    Returns
    -------
    nn.Module
        The head, mapping ``(B, d)`` features to ``(B, K)`` logits.

    Raises
    ------
    ValueError
        If ``kind`` or ``code`` is unknown, a fixed head has no code, or the code is not ``(K, d)``.

    Examples
    --------
    >>> import numpy as np
    >>> from nclab.nets import make_head
    >>> head = make_head("fixed", 2, 3, code="etf")
    >>> W = head.weight.double().numpy()
    >>> print(np.round(W @ W.T, 4))
    [[ 1.  -0.5 -0.5]
     [-0.5  1.  -0.5]
     [-0.5 -0.5  1. ]]
    """
    if kind == "linear":
        return LinearHead(d, K, bias=bias)
    if kind == "cosine":
        return CosineHead(d, K, tau=resolve_tau(tau, logit_scale, 0.1))
    if kind == "cmf":
        return CMFHead(d, K, tau=resolve_tau(tau, logit_scale, 0.1), beta=beta, renormalize=renormalize)
    if kind == "fixed":
        if isinstance(code, str):
            from nclab.geometry import orthogonal_frame, regular_polygon, simplex_etf

            if code == "etf":
                code = simplex_etf(K, d, seed=0)
            elif code == "orthogonal":
                code = orthogonal_frame(K, d, seed=0)
            elif code == "polygon":
                if d != 2:
                    raise ValueError(f"fixed head code 'polygon' needs d = 2 features, got d = {d}")
                code = regular_polygon(K)
            else:
                raise ValueError(
                    f"fixed head code must be 'etf', 'orthogonal', 'polygon' or a (K, d) array, got {code!r}"
                )
        if code is None:
            raise ValueError("a fixed head needs code=(K, d) array, 'etf', 'orthogonal' or 'polygon'")
        head = FixedHead(code, assignment, cosine=cosine, tau=resolve_tau(tau, logit_scale, 0.1 if cosine else 1.0))
        if tuple(head.weight.shape) != (K, d):
            raise ValueError(f"fixed code has shape {tuple(head.weight.shape)}, expected (K, d) = ({K}, {d})")
        return head
    raise ValueError(f"unknown head kind {kind!r}; known: linear, cosine, fixed, cmf")
