"""NCC metrics: PFC3 / NCC accuracy ([Wang et al. 2024; Jiang et al. 2024]) and NC4 mismatch [Han et al. 2022] in one
call.

The streaming second pass is :class:`nclab.stats.NCCAccumulator`; :func:`ncc_metrics` runs it over arrays in
memory, and this module registers the metric names it reports.
"""

from __future__ import annotations

from typing import Any

from nclab.metrics._registry import REGISTRY, MetricInfo
from nclab.stats import ClassStats, NCCAccumulator
from nclab.stats.ncc import NCCIndex

__all__ = ["ncc_metrics"]


def _register(info: MetricInfo) -> None:
    if info.name in REGISTRY:
        raise ValueError(f"metric {info.name!r} registered twice")
    REGISTRY[info.name] = info


_NEEDS = ("stats", "features", "labels")
_register(
    MetricInfo(
        "ncc_accuracy", "higher", "002 PFC3 eq. (9) / [Jiang et al. 2024] App. B.4 (NCC accuracy vs labels)", _NEEDS
    )
)
_register(
    MetricInfo("pfc3", "higher", "002 PFC3 eq. (9) / [Jiang et al. 2024] App. B.4 (NCC accuracy vs labels)", _NEEDS)
)
_register(
    MetricInfo(
        "ncc_mismatch",
        "lower",
        "[Han et al. 2022, Fig. 8] (NC4: argmax(Wh + b) != NCC, bias included)",
        (*_NEEDS, "W", "b"),
    )
)
_register(
    MetricInfo(
        "ncc_mismatch_nobias", "lower", "[neural-collapse (rhubarbwu)] (NC4 with the bias ignored)", (*_NEEDS, "W")
    )
)
_register(MetricInfo("classifier_accuracy", "none", "argmax(Wh + b) vs labels (not a collapse metric)", (*_NEEDS, "W")))


def ncc_metrics(
    stats: ClassStats,
    features: Any,
    labels: Any,
    W: Any = None,
    b: Any = None,
    *,
    batch_size: int = 8192,
    index: NCCIndex = "exact",
) -> dict[str, Any]:
    r"""One-shot :class:`~nclab.stats.NCCAccumulator` over features held in memory.

    .. math::

        \mathrm{ncc\_accuracy} = \frac{1}{N} \#\Big\{i : \arg\min_k \lVert h_i - \mu_k \rVert = y_i\Big\}

        \mathrm{ncc\_mismatch} = \frac{1}{N} \#\Big\{i : \arg\max_k \left(w_k^\top h_i + b_k\right)
        \neq \arg\min_k \lVert h_i - \mu_k \rVert\Big\}

    where :math:`\mu_k` are the class means of ``stats`` (the first pass), :math:`w_k` the rows of ``W`` and
    :math:`b_k` its bias (``ncc_mismatch_nobias``: :math:`b = 0`; ``classifier_accuracy``: the classifier's
    decisions against the labels).

    Parameters
    ----------
    stats : ClassStats, K classes, dimension d
        The class means of the first pass (the centres).
    features : array_like or torch.Tensor, shape (N, d)
        The features to classify, fed in ``batch_size`` chunks.
    labels : array_like or torch.Tensor of int, shape (N,)
        Their labels in [0, K).
    W : array_like, shape (K, d), optional
        Classifier rows: adds ``ncc_mismatch`` (NC4) and ``classifier_accuracy``.
    b : array_like, shape (K,), optional
        Classifier bias: adds ``ncc_mismatch_nobias``.
    batch_size : int, default 8192
        Rows per chunk.
    index : {"exact", "hnsw"}, default "exact"
        ``"hnsw"`` for the approximate nearest-centre search (extra ``nclab[ann]``).

    Returns
    -------
    dict
        As :meth:`NCCAccumulator.compute <nclab.stats.NCCAccumulator.compute>`: ``ncc_accuracy`` (= PFC3),
        ``ncc_error``, with ``W`` ``ncc_mismatch`` and ``classifier_accuracy``, with ``b``
        ``ncc_mismatch_nobias`` (floats in [0, 1]); ``num_samples``, ``class_counts`` (K,) and ``ncc_index`` (the
        search used).

    Raises
    ------
    ValueError
        No features.

    Examples
    --------
    >>> import numpy as np
    >>> from nclab.geometry import simplex_etf
    >>> y = np.repeat(np.arange(3), 2)
    >>> H = simplex_etf(3, 2)[y]  # collapsed features
    >>> out = ncc_metrics(ClassStats.from_arrays(H, y, K=3), H, y, W=simplex_etf(3, 2))
    >>> out["ncc_accuracy"], out["ncc_mismatch"], out["num_samples"]
    (1.0, 0.0, 6)
    """
    acc = NCCAccumulator(stats, W=W, b=b, index=index)
    n = len(features)
    if n == 0:
        raise ValueError("ncc_metrics: no features given")
    for start in range(0, n, batch_size):
        acc.update(features[start : start + batch_size], labels[start : start + batch_size])
    return acc.compute()
