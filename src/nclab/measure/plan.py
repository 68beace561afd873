"""What one measurement does, as a value: :class:`MeasurePlan`."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from nclab.measure.batches import call_model
from nclab.measure.classifier import find_classifier
from nclab.measure.hooks import LayerSpec, SelectSpec, resolve_layers
from nclab.metrics.classes import ClassesRule, check_classes
from nclab.stats.class_stats import ComputeDtype, Track
from nclab.validation import check_choice, check_int

__all__ = ["FULL_TRACK_MAX_DIM", "LossFn", "MeasurePlan", "TargetsFn"]

#: The widest layer a :class:`~nclab.CollapseMonitor` measures in full (d x d statistics: NC1, VCI, ranks) unless
#: told otherwise (``track=``); wider layers are measured light (O(K d)), with a warning naming the layer. At
#: d = 1,024 the d x d scatter is 8 MiB of float64 and its update costs about ``B d^2`` multiply-adds per batch
#: of ``B`` samples: one d x d linear layer's forward pass, a fraction of a network's whose layers are that wide.
FULL_TRACK_MAX_DIM = 1024

#: ``loss_fn(outputs, labels, penultimate_features) -> scalar``: the network's loss of one batch (a batch mean).
LossFn = Callable[[Any, torch.Tensor, torch.Tensor], torch.Tensor]
#: ``targets_fn(features, batch) -> (features (M, d), labels (M,))``: one layer's raw output of one batch to the
#: samples it holds (e.g. a language model's hidden states at position t labelled by token t + 1); ``batch`` is
#: the ``(inputs, labels)`` pair.
TargetsFn = Callable[[torch.Tensor, Any], tuple[torch.Tensor, torch.Tensor]]


@dataclass(frozen=True)
class MeasurePlan:
    """What the passes of one measurement share.

    A frozen value; :meth:`of` builds one from a model. Each parameter is also an attribute of the same name.

    Parameters
    ----------
    layers : dict[str, nn.Module]
        ``{name: module}`` in order (:func:`~nclab.measure.resolve_layers`).
    penultimate : str
        The layer the classifier reads (NC3 / NC4 there only).
    K : int
        ``K >= 2``.
    W, b : ndarray or None
        The classifier ``W (K, d)``, ``b (K,)``, float64 (:func:`~nclab.measure.find_classifier`).
    cosine : bool
        The classifier scores by cosine: ``gnc1`` of the unit-normalised penultimate features is reported too.
    full_layers : str or collection of str
        ``"penultimate"`` (full statistics there, light elsewhere), ``"all"``, or the layer names.
    light_layers : frozenset of str
        Layers measured light whatever ``full_layers`` and ``full_max_d`` say (a caller's explicit choice).
    full_max_d : int or None
        Also full: every other layer whose width ``d`` is at most this (:data:`FULL_TRACK_MAX_DIM` for a
        :class:`~nclab.CollapseMonitor`); ``None``: only ``full_layers``.
    batch_size : int
        Rows per forward pass of :func:`~nclab.measure.tensor_batches` (:func:`~nclab.measure.measure_split`).
    cache_mb : float
        Memory (MiB) for pass 1's features: when they fit, pass 2 reads them instead of running the model again.
    loss_fn : LossFn or None
        Adds the network's ``loss`` row.
    conventions : mapping or None
        Overrides of :data:`nclab.metrics.DEFAULT_CONVENTIONS`.
    threads : int or None
        numpy/scipy BLAS threads while measuring (``None``: unchanged).
    geodesic : bool
        Also the [Wang et al. 2024] geodesic rows (:func:`~nclab.measure.measure_split`).
    distributed : bool
        Every rank measures its shard; statistics and counts are all-reduced over the default process group.
    advance : callable or None
        ``advance(n)`` after each batch of each pass (progress bars).
    inputs : frozenset of str
        Layers measured at their module's input (the classifier's input: the penultimate feature of a model
        with no module producing it).
    select : SelectSpec
        Which tensor of a tuple-returning layer (:mod:`nclab.measure.hooks`).
    call : callable
        ``call(model, x)`` runs a batch and returns the logits ``(n, K)`` (or anything else: then no error is
        counted); :func:`~nclab.measure.call_model` by default.
    targets_fn : TargetsFn or None
        Turns a layer's raw output and the batch into ``(features, labels)`` (token-level collapse).
    classes : {"all", "present"}
        The classes each report measures (:func:`nclab.metrics.select_classes`): every class, or those with at
        least ``min_count`` samples (the classifier's rows and the NCC pass subset with them).
    min_count : int or None
        The samples a class needs under ``classes="present"`` (None: 1).
    compute_dtype : {"float64", "float32"}
        The statistics' ``compute_dtype`` (:class:`~nclab.stats.ClassStats`): ``"float32"`` does the per-batch
        work of wide layers in float32 GEMMs, with float64 accumulation across blocks (docs/stats.md).
    autocast_dtype : torch.dtype or None
        Run the forward passes under ``torch.autocast`` to this dtype (``torch.bfloat16``, ``torch.float16``) on
        the model's device: the precision policy a mixed-precision run trains with. The features then arrive in
        that dtype and the statistics still accumulate in float64. ``None``: the model's own dtype.

    Raises
    ------
    KeyError
        If ``penultimate`` is not among ``layers``.
    ValueError
        If ``K < 2`` or ``batch_size < 1``, ``geodesic`` with ``distributed``, or another ``autocast_dtype``.

    Examples
    --------
    >>> plan = MeasurePlan({"pool": nn.Identity()}, "pool", 10, batch_size=128)
    >>> plan.K, plan.batch_size, plan.track("pool", 512), plan.classifier_at("pool")
    (10, 128, 'full', (None, None))
    >>> MeasurePlan({"pool": nn.Identity()}, "fc", 10)
    Traceback (most recent call last):
        ...
    KeyError: "penultimate layer 'fc' is not among the measured layers ['pool']"
    """

    layers: Mapping[str, nn.Module]
    penultimate: str
    K: int
    W: np.ndarray | None = None
    b: np.ndarray | None = None
    cosine: bool = False
    full_layers: str | Collection[str] = "penultimate"
    light_layers: frozenset[str] = frozenset()
    full_max_d: int | None = None
    batch_size: int = 256
    cache_mb: float = 256.0
    loss_fn: LossFn | None = None
    conventions: Mapping[str, Any] | None = None
    threads: int | None = 1
    geodesic: bool = False
    distributed: bool = False
    advance: Callable[[int], None] | None = None
    inputs: frozenset[str] = frozenset()
    select: SelectSpec = None
    call: Callable[[nn.Module, Any], Any] = call_model
    targets_fn: TargetsFn | None = None
    autocast_dtype: torch.dtype | None = None
    classes: ClassesRule = "all"
    min_count: int | None = None
    compute_dtype: ComputeDtype = "float64"

    def __post_init__(self) -> None:
        check_int(self.K, name="K", low=2)
        check_classes(self.classes, self.min_count)
        check_int(self.batch_size, name="batch_size", low=1)
        check_choice(self.compute_dtype, ("float64", "float32"), name="compute_dtype")
        if self.penultimate not in self.layers:
            raise KeyError(
                f"penultimate layer {self.penultimate!r} is not among the measured layers {list(self.layers)}"
            )
        if self.distributed and self.geodesic:
            raise ValueError("geodesic needs the whole split's features in one process: not with distributed")
        if self.autocast_dtype not in (None, torch.bfloat16, torch.float16):
            raise ValueError(
                f"autocast_dtype must be torch.bfloat16, torch.float16 or None, got {self.autocast_dtype!r}"
            )

    @classmethod
    def of(
        cls,
        model: nn.Module,
        K: int,
        *,
        layers: LayerSpec = None,
        penultimate: str | None = None,
        **options: Any,
    ) -> MeasurePlan:
        """The plan for ``model``: ``layers`` resolved (default: the model's ``measured_layers()``),
        ``penultimate`` (default: the model's ``penultimate_name``, else the last layer), the classifier found
        by :func:`~nclab.measure.find_classifier` (``model.head``, its current weights); ``options`` set the other
        fields.

        Examples
        --------
        >>> from nclab.nets import build_model
        >>> plan = MeasurePlan.of(build_model("mlp", (4,), 3, widths=[8, 6]), 3, batch_size=64)
        >>> list(plan.layers), plan.penultimate, plan.W.shape, plan.batch_size
        (['layer1', 'layer2'], 'layer2', (3, 6), 64)
        """
        layer_map = resolve_layers(model, layers)
        if penultimate is None:
            penultimate = getattr(model, "penultimate_name", None) or next(reversed(layer_map))
        clf = find_classifier(model)
        if clf is not None:
            options = {"W": clf.W, "b": clf.b, "cosine": clf.cosine, **options}
        return cls(layer_map, penultimate, K, **options)

    def track(self, name: str, d: int | None = None) -> Track:
        """``"full"`` or ``"light"`` statistics at layer ``name`` of width ``d`` (its features' columns).

        Examples
        --------
        >>> plan = MeasurePlan({"a": nn.Identity(), "b": nn.Identity()}, "b", 3, full_max_d=64)
        >>> plan.track("b", 4096), plan.track("a", 64), plan.track("a", 65)
        ('full', 'full', 'light')
        """
        if name in self.light_layers:
            return "light"
        if isinstance(self.full_layers, str):
            if name == self.penultimate or self.full_layers == "all":
                return "full"
        elif name in self.full_layers:
            return "full"
        wide = self.full_max_d is None or d is None or d > self.full_max_d
        return "light" if wide else "full"

    def classifier_at(self, name: str) -> tuple[np.ndarray | None, np.ndarray | None]:
        """``(W, b)`` at the penultimate layer (NC3, NC4 there), ``(None, None)`` elsewhere."""
        return (self.W, self.b) if name == self.penultimate else (None, None)
