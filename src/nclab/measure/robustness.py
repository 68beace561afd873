"""Adversarial robustness of a classifier: DeepFool's minimal perturbations and their mean relative size.

[Papyan et al. 2020, Fig. 8] and [Han et al. 2022, Figs. 9, 11] measure the robustness of a network by
DeepFool [Moosavi-Dezfooli et al. 2016]: for each test input the smallest perturbation, found by repeatedly
linearising the network and stepping to the nearest linearised decision boundary, that changes the network's
prediction; and as one number the mean of its norm relative to the input's norm,

.. math::

    \\hat\\rho_{\\mathrm{adv}}(f) = \\frac{1}{N} \\sum_{i=1}^{N} \\frac{\\lVert \\hat r(x_i) \\rVert_2}
    {\\lVert x_i \\rVert_2},

the [Moosavi-Dezfooli et al. 2016, Sec. 4] measure (larger = more robust). The algorithm (multi-class DeepFool,
[Moosavi-Dezfooli et al. 2016, Alg. 2]) from an input :math:`x_0` predicted :math:`\\hat k = \\arg\\max_k f_k(x_0)`,
iterate :math:`x_i = x_0 + (1 + \\eta) \\sum_{j<i} r_j` until :math:`\\arg\\max_k f_k(x_i) \\ne \\hat k`:

.. math::

    f'_k = f_k(x_i) - f_{\\hat k}(x_i), \\quad w'_k = \\nabla f_k(x_i) - \\nabla f_{\\hat k}(x_i), \\quad
    l = \\arg\\min_{k \\ne \\hat k} \\frac{|f'_k|}{\\lVert w'_k \\rVert_2}, \\quad
    r_i = \\frac{|f'_l|}{\\lVert w'_l \\rVert_2^2} \\, w'_l,

with the overshoot :math:`\\eta` (0.02 in [Moosavi-Dezfooli et al. 2016, Sec. 2]) that pushes the last step over
the boundary. :math:`\\hat r(x_0) = (1 + \\eta) \\sum_i r_i` is the perturbation that changes the prediction (the
reference implementation's returned ``r_tot``); its norm is what this module reports. For an affine classifier
``f(x) = W x + b`` one step is exact: :math:`\\lVert \\hat r \\rVert = (1 + \\eta) \\min_{k \\ne \\hat k}
|f_k - f_{\\hat k}| / \\lVert w_k - w_{\\hat k} \\rVert`, the distance to the nearest decision boundary times
:math:`1 + \\eta`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from nclab.measure.batches import call_model
from nclab.measure.hooks import eval_mode
from nclab.validation import check_int, check_positive

__all__ = ["DEEPFOOL_MAX_ITER", "DEEPFOOL_OVERSHOOT", "DeepFoolResult", "deepfool"]

#: DeepFool's overshoot :math:`\eta`: the final perturbation is multiplied by :math:`1 + \eta` to cross the boundary,
#: with :math:`\eta = 0.02` in [Moosavi-Dezfooli et al. 2016, Sec. 2] and its experiments.
DEEPFOOL_OVERSHOOT = 0.02
#: The reference implementation's iteration cap (``max_iter=50``).
DEEPFOOL_MAX_ITER = 50


@dataclass(frozen=True)
class DeepFoolResult:
    """The DeepFool perturbations of ``N`` inputs (:func:`deepfool`); every per-sample array has shape ``(N,)``.

    Parameters
    ----------
    norms : numpy.ndarray of float64, shape (N,)
        :math:`\\lVert \\hat r(x_i) \\rVert_2`, the norm of the perturbation applied, overshoot included.
        For an input that did not flip (``flipped`` false) it is the perturbation reached when DeepFool stopped:
        a lower bound on the distance to a label change, not the distance.
    input_norms : numpy.ndarray of float64, shape (N,)
        :math:`\\lVert x_i \\rVert_2` (every input flattened).
    flipped : numpy.ndarray of bool, shape (N,)
        Whether ``x_i + r(x_i)`` is predicted another class than ``x_i``.
    iterations : numpy.ndarray of int64, shape (N,)
        DeepFool steps taken (0 for none: a stalled input whose gradients give no direction).
    labels : numpy.ndarray of int64, shape (N,)
        The model's prediction at ``x_i`` (not the true label: DeepFool moves the prediction).
    adversarial_labels : numpy.ndarray of int64, shape (N,)
        The prediction at ``x_i + r(x_i)`` (``labels`` where not flipped).
    overshoot : float
        The overshoot :math:`\\eta` used.
    max_iter : int
        The iteration cap used.
    perturbations : numpy.ndarray of float64, shape (N, ...) or None
        The perturbations themselves, shaped as the inputs (``keep_perturbations=True``), else ``None``.

    Examples
    --------
    Three inputs, two flipped (relative sizes 0.25 and 0.1), one not (its 0.2 a lower bound, left out of the mean):

    >>> res = DeepFoolResult(norms=np.array([0.5, 0.2, 0.3]), input_norms=np.array([2.0, 1.0, 3.0]),
    ...                      flipped=np.array([True, False, True]), iterations=np.array([2, 50, 3]),
    ...                      labels=np.array([0, 1, 2]), adversarial_labels=np.array([3, 1, 0]), overshoot=0.02,
    ...                      max_iter=50)
    >>> res.relative.round(6).tolist(), round(res.robustness, 6), res.unflipped
    ([0.25, 0.2, 0.1], 0.175, 1)
    """

    norms: np.ndarray
    input_norms: np.ndarray
    flipped: np.ndarray
    iterations: np.ndarray
    labels: np.ndarray
    adversarial_labels: np.ndarray
    overshoot: float
    max_iter: int
    perturbations: np.ndarray | None = None

    @property
    def relative(self) -> np.ndarray:
        """:math:`\\lVert \\hat r(x_i) \\rVert_2 / \\lVert x_i \\rVert_2` per input, float64 ``(N,)``."""
        return self.norms / self.input_norms

    @property
    def robustness(self) -> float:
        """The mean relative perturbation :math:`\\hat\\rho_{\\mathrm{adv}}` over the inputs DeepFool flipped
        (float64); ``nan`` when it flipped none.

        An input not flipped has no perturbation to count: one stalled where the network is locally constant
        (every gradient difference 0, e.g. all ReLUs of a layer off) would enter as 0, one cut at ``max_iter`` as
        a lower bound; both are left out and counted in :attr:`unflipped`, which a caller reports beside it."""
        rel = self.relative[self.flipped]
        return float(np.mean(rel, dtype=np.float64)) if rel.size else float("nan")

    @property
    def unflipped(self) -> int:
        """How many inputs DeepFool did not flip (``max_iter`` reached, or no gradient direction)."""
        return int(np.count_nonzero(~self.flipped))


def _inputs(x: Any) -> torch.Tensor:
    if isinstance(x, np.ndarray):
        x = torch.from_numpy(x)
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch tensor or numpy array of inputs (N, ...), got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"x must hold floating-point inputs (as the model takes them), got dtype {x.dtype}")
    if x.ndim < 2 or x.shape[0] == 0:
        raise ValueError(f"x must have shape (N, ...) with N >= 1 inputs and one axis or more per input, got "
                         f"{tuple(x.shape)}")  # fmt: skip
    x = x.detach()
    if not bool(torch.isfinite(x).all()):
        raise ValueError("x holds NaN or inf; DeepFool needs finite inputs")
    zero = torch.nonzero(x.flatten(1).abs().amax(1) == 0).flatten().tolist()
    if zero:
        raise ValueError(
            f"x has {len(zero)} all-zero input(s) (rows {zero[:5]}{' ...' if len(zero) > 5 else ''}): the relative "
            "perturbation ||r|| / ||x|| is undefined there; drop them"
        )
    return x


def _logits(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    out = call_model(model, x)
    if not isinstance(out, torch.Tensor) or out.ndim != 2 or out.shape[0] != x.shape[0] or out.shape[1] < 2:
        shape = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise ValueError(f"model must return logits (n, K) with K >= 2 classes for inputs (n, ...), got {shape}")
    if not bool(torch.isfinite(out).all()):
        raise ValueError("model returned NaN or inf logits; DeepFool needs finite outputs")
    return out


def _batch(model: nn.Module, x0: torch.Tensor, overshoot: float, max_iter: int) -> tuple[torch.Tensor, ...]:
    """DeepFool on one batch: ``(r_tot (B, D) float64 without the overshoot factor, flipped, iterations, labels,
    adversarial labels)``."""
    B, dev = x0.shape[0], x0.device
    flat0 = x0.flatten(1).to(torch.float64)
    r_tot = torch.zeros_like(flat0)
    flipped = torch.zeros(B, dtype=torch.bool, device=dev)
    iterations = torch.zeros(B, dtype=torch.int64, device=dev)
    with torch.no_grad():
        labels = _logits(model, x0).argmax(1)
    adversarial = labels.clone()
    active = torch.arange(B, device=dev)
    for it in range(max_iter + 1):
        if active.numel() == 0:
            break
        xi = (flat0[active] + (1 + overshoot) * r_tot[active]).to(x0.dtype).view(-1, *x0.shape[1:])
        xi.requires_grad_(True)
        logits = _logits(model, xi)
        pred, k0 = logits.argmax(1), labels[active]
        moved = pred != k0
        flipped[active[moved]], adversarial[active[moved]] = True, pred[moved]
        if it == max_iter:
            break
        f0 = logits.gather(1, k0[:, None]).squeeze(1)
        best = torch.full((active.numel(),), torch.inf, dtype=torch.float64, device=dev)
        step = torch.zeros(active.numel(), flat0.shape[1], dtype=torch.float64, device=dev)
        for k in range(logits.shape[1]):  # one backward pass per class: memory O(B D), never (B, K, D)
            diff = logits[:, k] - f0
            (grad,) = torch.autograd.grad(diff.sum(), xi, retain_graph=k < logits.shape[1] - 1)
            w = grad.flatten(1).to(torch.float64)
            wn = w.norm(dim=1)
            f = diff.detach().to(torch.float64).abs()
            dist = torch.where((wn > 0) & (k0 != k), f / wn, torch.inf)
            better = dist < best
            best = torch.where(better, dist, best)
            step[better] = (f[better] / wn[better] ** 2)[:, None] * w[better]
        go = ~moved & torch.isfinite(best)  # not yet flipped, and a direction exists (else: stalled, unflipped)
        r_tot[active[go]] += step[go]
        iterations[active[go]] += 1
        active = active[go]
    return r_tot, flipped, iterations, labels, adversarial


def deepfool(
    model: nn.Module,
    x: Any,
    *,
    overshoot: float = DEEPFOOL_OVERSHOOT,
    max_iter: int = DEEPFOOL_MAX_ITER,
    batch_size: int = 128,
    keep_perturbations: bool = False,
) -> DeepFoolResult:
    """DeepFool's minimal perturbation of each input and their mean relative size: the robustness measure of
    [Moosavi-Dezfooli et al. 2016] that [Papyan et al. 2020, Fig. 8] and [Han et al. 2022, Fig. 9] use.

    For each input :math:`x`, multi-class DeepFool (module docstring) linearises all ``K`` logits at the current
    iterate, steps to the nearest linearised decision boundary, and repeats until the prediction changes, with the
    overshoot :math:`\\eta` applied to the accumulated perturbation. The measure is

    .. math::

        \\hat\\rho_{\\mathrm{adv}} = \\frac{1}{N} \\sum_{i=1}^{N}
        \\frac{\\lVert \\hat r(x_i) \\rVert_2}{\\lVert x_i \\rVert_2}, \\qquad
        \\hat r(x) = (1 + \\eta) \\sum_i r_i,

    where:

    - the sum runs over the :math:`N` inputs DeepFool flipped (``unflipped`` counts the others),
    - :math:`x_i` is input ``i`` as the model takes it (flattened for the norms: after the data's own
      standardisation, if any),
    - :math:`r_i` are the DeepFool steps and :math:`\\hat r(x)` the perturbation that changes the prediction,
    - :math:`\\eta` is ``overshoot``.

    Deterministic (no randomness: seeds play no part); the model runs in eval mode (restored after) and its
    parameters' gradients are not touched. Steps and norms are float64 whatever the model's dtype; the iterate
    fed to the model is cast back to the inputs' dtype. Each input's gradients are read off a batch, so the model
    must treat the samples of a batch independently in eval mode (true of nclab networks: batch norm uses its
    running statistics). Memory: one ``(batch_size, D)`` float64 gradient at a time, ``D`` the input size.

    Parameters
    ----------
    model : torch.nn.Module
        A classifier returning logits ``(n, K)``, ``K >= 2`` (or an output with a ``logits`` attribute).
    x : torch.Tensor or numpy.ndarray, shape (N, ...)
        Floating-point inputs, one per row, moved to the model's device batch by batch. No input may be all zero
        (its relative perturbation is undefined).
    overshoot : float, default=0.02
        :math:`\\eta \\ge 0`. At 0 the last step lands on the linearised boundary, where roundoff decides.
    max_iter : int, default=50
        Steps per input at most (the reference implementation's cap).
    batch_size : int, default=128
        Inputs per forward / backward pass.
    keep_perturbations : bool, default=False
        Also return the perturbations, shaped as ``x`` (``N`` times the input size in float64 memory).

    Returns
    -------
    DeepFoolResult
        Per input: ``norms`` :math:`\\lVert \\hat r \\rVert_2`, ``input_norms``, ``relative``, ``flipped``,
        ``iterations``, the original and the adversarial predictions; ``robustness`` (the mean relative
        perturbation over the flipped inputs, in :math:`[0, \\infty)`, larger = more robust; ``nan`` when none
        flipped) and ``unflipped``: inputs not flipped within ``max_iter``, or stalled at a point with no gradient
        direction, keep the perturbation they reached in ``norms`` (a lower bound) and are left out of the mean.

    Raises
    ------
    TypeError
        ``model`` is not a module; ``x`` is not a float tensor or array; an option has the wrong type.
    ValueError
        ``x`` is not ``(N, ...)`` with ``N >= 1``, holds NaN / inf or an all-zero input; the model's output is not
        logits ``(n, K)`` with ``K >= 2``, or not finite; an option is out of range.

    See Also
    --------
    DeepFoolResult : the fields.
    nclab.measure.eval_mode : the mode the model runs in.

    Notes
    -----
    Conventions (docs/conventions.md, "Robustness"): the L2 norm; the perturbation's norm includes the overshoot
    factor :math:`1 + \\eta` (the reference implementation's returned perturbation, the one that changes the
    label); relative to :math:`\\lVert x \\rVert_2` of the model's input; the prediction, not the true label, is
    the class moved away from.

    Examples
    --------
    An affine classifier is fooled in one exact step: input (2, 1), classes scored ``x_1`` and ``x_2``; the
    boundary ``x_1 = x_2`` is at distance 1/sqrt(2) and the perturbation is 1.02 times that.

    >>> model = nn.Linear(2, 2, bias=False).double()
    >>> with torch.no_grad():
    ...     _ = model.weight.copy_(torch.eye(2, dtype=torch.float64))
    >>> res = deepfool(model, torch.tensor([[2.0, 1.0]], dtype=torch.float64))
    >>> bool(res.flipped[0]), int(res.iterations[0]), int(res.adversarial_labels[0])
    (True, 1, 1)
    >>> round(float(res.norms[0]), 6), round(1.02 / 2**0.5, 6)
    (0.721249, 0.721249)
    >>> round(res.robustness, 6) == round(1.02 / 2**0.5 / 5**0.5, 6), res.unflipped
    (True, 0)
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    overshoot = check_positive(overshoot, name="overshoot", strict=False)
    max_iter = check_int(max_iter, name="max_iter", low=1)
    batch_size = check_int(batch_size, name="batch_size", low=1)
    if not isinstance(keep_perturbations, bool):
        raise TypeError(f"keep_perturbations must be True or False, got {keep_perturbations!r}")
    x = _inputs(x)
    param = next(iter(model.parameters()), None)
    device = param.device if param is not None else x.device
    parts: list[tuple[torch.Tensor, ...]] = []
    with eval_mode(model), torch.enable_grad():
        for s in range(0, x.shape[0], batch_size):
            xb = x[s : s + batch_size].to(device)
            parts.append(tuple(t.cpu() for t in _batch(model, xb, overshoot, max_iter)))
    r_tot, flipped, iterations, labels, adversarial = (torch.cat(p) for p in zip(*parts, strict=True))
    r = (1 + overshoot) * r_tot  # float64: the perturbation applied
    return DeepFoolResult(
        norms=r.norm(dim=1).numpy(),
        input_norms=x.flatten(1).to(torch.float64).norm(dim=1).cpu().numpy(),
        flipped=flipped.numpy(),
        iterations=iterations.numpy(),
        labels=labels.numpy(),
        adversarial_labels=adversarial.numpy(),
        overshoot=overshoot,
        max_iter=max_iter,
        perturbations=r.view(x.shape).numpy() if keep_perturbations else None,
    )
