"""Training losses. Each is ``loss(logits (B, K), y, features (B, d)) -> scalar``, ``y`` the labels ``(B,)`` or
soft targets ``(B, K)`` (rows of class probabilities: a mixup / CutMix batch, :mod:`nclab.data.mixing`).

Soft targets ``T``: ``ce`` is ``-(T * log_softmax(logits / tau)).sum(1).mean()`` (``F.cross_entropy`` with
probabilities), with no further label smoothing (the mixed targets carry the run's smoothing already); ``mse``
regresses ``target_scale x T``; ``ce_cosreg`` refuses them (its regulariser needs one class per sample).

MSE scale convention ([Han et al. 2022], [Han et al. 2022]). [Han et al. 2022] writes the loss as
``L = (1/2) Ave_i ||W h_i + b - y_i||^2 + (lambda/2)(||W||^2 + ||b||^2)`` (eq. (2)) but trains with
``nn.MSELoss()`` = ``(1/(B K)) sum_{i,k} (f_k(x_i) - y_ik)^2`` = ``(2/K) x`` the data term of L, plus SGD's
coupled weight decay ``wd`` (the gradient of ``(wd/2)||theta||^2``). Dividing that objective by ``2/K``
gives eq. (2) with ``lambda = K wd / 2`` -- :func:`lambda_from_weight_decay`. ``reduction="sum_half"`` trains on the
eq. (2) data term itself, for which ``lambda = wd``. (The reference Colab's decomposition uses
``lambda = wd / 2``, consistent with a loss *summed* over outputs without the 1/2.) Targets are
``target_scale x`` one-hot (1 in [Han et al. 2022]: "vanilla" MSE).

Within-class cosine regulariser ([Xu & Liu 2023, Sec. 6.3], [Xu & Liu 2023]). The paper's "average within-class
cosine similarity divided by the number of data points of each class in the batch" is ambiguous; with
``u_i = h_i / ||h_i||`` and ``S_c = sum_{i in c} u_i`` over the batch (so ``||S_c||^2`` is the sum of the
cosines of all ordered pairs of class ``c``, ``n_c`` self-pairs included):

* ``"pairs"`` (default): ``R = mean_c (||S_c||^2 - n_c) / (n_c (n_c - 1))``, the mean cosine of distinct
  within-class pairs, averaged over the classes with ``n_c >= 2`` in the batch (the batch estimate of
  ``nclab.metrics.within_class_cosine``);
* ``"pairs_over_n"``: the literal reading, the same per-class average further divided by ``n_c``;
* ``"with_self"``: ``mean_c ||S_c||^2 / n_c^2`` (self-pairs included, Kornblith's form).

It is **added** (``loss = CE + cosreg_weight x R``): Cos Sim in [Xu & Liu 2023, Table 2] falls as the weight grows, so
the term penalises within-class similarity.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import torch
import torch.nn.functional as F

from nclab.train.config import LossConfig

__all__ = ["LossFn", "lambda_from_weight_decay", "make_loss", "within_class_cosine_penalty"]

LossFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def lambda_from_weight_decay(weight_decay: float, K: int, reduction: str = "mean") -> float:
    """The lambda of [Han et al. 2022, eq. (2)] equivalent to training ``MSE(reduction) + (wd/2)||theta||^2``:
    ``K wd / 2`` for ``nn.MSELoss()`` (``"mean"``), ``wd`` for ``"sum_half"``.

    Parameters
    ----------
    weight_decay : float
        SGD's coupled weight decay ``wd``.
    K : int
        ``K``, the number of classes (outputs of the MSE).
    reduction : {"mean", "sum_half"}, default="mean"
        The MSE's reduction (``loss.reduction`` of the config).

    Returns
    -------
    float
        The ``lambda`` of eq. (2).

    Raises
    ------
    ValueError
        If ``reduction`` is another value.

    See Also
    --------
    nclab.theory.mse.paper_lambda : the one definition of the mapping.

    Examples
    --------
    >>> lambda_from_weight_decay(5e-4, 10), lambda_from_weight_decay(5e-4, 10, "sum_half")
    (0.0025, 0.0005)
    """
    from nclab.theory.mse import paper_lambda  # the one definition of the mapping

    conventions: dict[str, Literal["mse_mean", "paper"]] = {"mean": "mse_mean", "sum_half": "paper"}
    if reduction not in conventions:
        raise ValueError(f"reduction must be 'mean' or 'sum_half', got {reduction!r}")
    return paper_lambda(weight_decay, K, conventions[reduction])


def within_class_cosine_penalty(h: torch.Tensor, y: torch.Tensor, K: int, variant: str = "pairs"):
    """The batch regulariser ``R`` of the module docstring (differentiable; 0 if no class has a pair).

    Parameters
    ----------
    h : torch.Tensor, shape (B, d)
        The batch's penultimate features.
    y : torch.Tensor, shape (B,)
        Class indices in ``0 .. K - 1``.
    K : int
        ``K``, the number of classes.
    variant : {"pairs", "pairs_over_n", "with_self"}, default="pairs"
        The reading of [Xu & Liu 2023, Sec. 6.3] (``loss.cosreg_variant``; docs/conventions.md).

    Returns
    -------
    torch.Tensor
        0-d, differentiable in ``h``. ``0`` when no class of the batch has two samples (``"pairs"``,
        ``"pairs_over_n"``).

    Raises
    ------
    ValueError
        If ``variant`` is unknown.

    Examples
    --------
    >>> h = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 1.0], [0.0, 2.0]])  # class 0 orthogonal, class 1 parallel
    >>> y = torch.tensor([0, 0, 1, 1])
    >>> [within_class_cosine_penalty(h, y, 2, v).item() for v in ("pairs", "pairs_over_n", "with_self")]
    [0.5, 0.25, 0.75]
    >>> within_class_cosine_penalty(h[:2], torch.tensor([0, 1]), 2).item()  # no pair
    0.0
    """
    u = F.normalize(h, dim=1)
    S = torch.zeros(K, u.shape[1], dtype=u.dtype, device=u.device).index_add(0, y, u)
    n = torch.bincount(y, minlength=K).to(u.dtype)
    sq = (S * S).sum(dim=1)
    if variant == "with_self":
        keep = n > 0
        return (sq[keep] / n[keep] ** 2).mean()
    keep = n >= 2
    if not bool(keep.any()):
        return h.sum() * 0.0
    per = (sq[keep] - n[keep]) / (n[keep] * (n[keep] - 1))
    if variant == "pairs":
        return per.mean()
    if variant == "pairs_over_n":
        return (per / n[keep]).mean()
    raise ValueError(f"unknown cosine-regulariser variant {variant!r}")


def make_loss(cfg: LossConfig, K: int) -> LossFn:
    """The loss of ``cfg`` (see the module docstring for the conventions).

    Parameters
    ----------
    cfg : LossConfig
        The ``loss`` section of a :class:`~nclab.train.RunConfig`.
    K : int
        ``K``, the number of classes (one-hot targets of ``mse``).

    Returns
    -------
    LossFn
        ``loss(logits (B, K), y, h (B, d)) -> 0-d tensor``, ``y`` class indices ``(B,)`` or soft targets
        ``(B, K)``; a batch mean.

    Examples
    --------
    >>> from nclab.train.config import LossConfig
    >>> logits, y, h = torch.zeros(2, 3), torch.tensor([0, 2]), torch.zeros(2, 4)
    >>> round(make_loss(LossConfig(name="ce"), 3)(logits, y, h).item(), 6)  # log 3
    1.098612
    >>> make_loss(LossConfig(name="mse"), 3)(logits, y, h).item()  # 2 ones among 6 entries
    0.3333333432674408
    >>> make_loss(LossConfig(name="mse", reduction="sum_half"), 3)(logits, y, h).item()  # (1/2) ||0 - e_y||^2
    0.5
    """
    if cfg.name == "mse":
        scale, half = cfg.target_scale, cfg.reduction == "sum_half"

        def mse(logits: torch.Tensor, y: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
            target = (y.to(logits.dtype) if y.ndim == 2 else F.one_hot(y, K).to(logits.dtype)) * scale
            if half:
                return 0.5 * (logits - target).pow(2).sum(dim=1).mean()
            return F.mse_loss(logits, target)

        return mse

    tau, ls = cfg.tau, cfg.label_smoothing
    weight, variant = cfg.cosreg_weight, cfg.cosreg_variant
    with_reg = cfg.name == "ce_cosreg" and weight > 0

    def ce(logits: torch.Tensor, y: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        soft = y.ndim == 2
        loss = F.cross_entropy(logits / tau if tau != 1.0 else logits, y, label_smoothing=0.0 if soft else ls)
        if with_reg:
            if soft:
                raise ValueError(
                    "ce_cosreg needs class labels (B,), not soft targets (B, K): its regulariser is per class"
                )
            loss = loss + weight * within_class_cosine_penalty(h, y, K, variant)
        return loss

    return ce
