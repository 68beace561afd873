"""NC5 of Ammar et al. (NECO, 2024): in-distribution class means become orthogonal to the out-of-distribution mean.

The in-distribution (ID) class means come from the ClassStats of the training (or an ID) split; the
out-of-distribution (OOD) global mean from a second ClassStats fed with OOD features (under any labels: only
its sample mean is used), or given directly as a ``(d,)`` vector.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nclab.metrics._registry import metric
from nclab.metrics.common import StatsLike, as_moments, is_stats, row_norms, unit_directions
from nclab.stats.moments import Weighting, check_weighting

__all__ = ["ood_orthogonality"]


def _ood_mean(ood: StatsLike | Any, d: int) -> np.ndarray:
    if is_stats(ood):
        if ood.N == 0:
            raise ValueError("ood: these ClassStats have seen no sample")
        if ood.d != d:
            raise ValueError(f"ood has d = {ood.d}, but the in-distribution stats have d = {d}")
        # the sample mean of every OOD feature, whatever labels they were given (classes may be empty)
        present = int(np.count_nonzero(ood.counts))
        if present < 2:
            raise ValueError(
                "ood: only one class of these ClassStats has samples, so its statistics cannot give the OOD mean; "
                "label the OOD features with the classifier's predictions, or pass their mean as a (d,) vector"
            )
        return as_moments(ood if present == ood.K else ood.drop_empty()).global_mean("empirical")
    v = np.array(ood.detach().cpu() if hasattr(ood, "detach") else ood, dtype=np.float64)
    if v.shape != (d,):
        raise ValueError(f"ood must be a ClassStats or a (d,) = ({d},) vector, got shape {v.shape}")
    if not np.all(np.isfinite(v)):
        raise ValueError("ood contains NaN or inf (non-finite values)")
    return v


@metric(
    "ood_orthogonality",
    "lower",
    "[Ammar et al. 2024] (NECO, NC5); [neural-collapse (rhubarbwu)] orthogonality_deviation",
)
def ood_orthogonality(
    stats: StatsLike,
    ood: StatsLike | Any,
    *,
    center: bool = False,
    weighting: Weighting = "balanced",
) -> float:
    """NC5 = ``mean_k |cos(mu_k, mu_G^OOD)|``: how far the ID class means are from orthogonal to the OOD mean.

    .. math::

        \\mathrm{NC5} = \\frac{1}{K} \\sum_{k=1}^{K}
        \\frac{\\lvert \\langle \\mu_k - c, \\mu_G^{OOD} - c \\rangle \\rvert}
        {\\lVert \\mu_k - c \\rVert \\, \\lVert \\mu_G^{OOD} - c \\rVert}

    where ``mu_k`` (d,) are the ID class means of ``stats``, ``mu_G^OOD`` (d,) the sample mean of the OOD
    features, and ``c`` the centring: ``c = 0`` by default (``center=False``: raw means, as NC5 of [Ammar et al. 2024]
    and
    ``orthogonality_deviation`` of [neural-collapse (rhubarbwu)] are used), ``c = stats.global_mean(weighting)`` with
    ``center=True`` (both sides relative to the ID global mean, the frame in which NC2 is stated).

    Parameters
    ----------
    stats : ClassStats
        ID statistics (every class non-empty).
    ood : ClassStats or array_like (d,)
        OOD statistics (labels are irrelevant: predicted labels or all zeros both work) or the OOD mean itself.
    center : bool
        Subtract the ID global mean from both sides first (default False).
    weighting : {"balanced", "empirical"}
        The ID global mean for ``center=True``: mean of class means or sample mean.

    Returns
    -------
    float
        In [0, 1]; lower = more collapsed (NC5 predicts orthogonality, 0). ``nan`` with a
        :class:`~nclab.metrics.DegenerateMetricWarning` when the (centred) OOD mean or a (centred) class mean is
        zero (no direction).

    See Also
    --------
    self_duality : the NC3 alignment of classifier rows and class means.

    References
    ----------
    Ben Ammar, Belkhir, Popescu, Manzanera, Franchi (2024), "NECO: NEural Collapse based Out-of-distribution
    detection", ICLR 2024, arXiv:2310.06823.

    Examples
    --------
    >>> import numpy as np
    >>> from nclab.stats import ClassStats
    >>> H = np.array([[1.0, 0, 0], [0, 1.0, 0]])
    >>> ood_orthogonality(ClassStats.from_arrays(H, np.array([0, 1])), np.array([1.0, 1.0, 0.0]))  # cos 1/sqrt 2
    0.7071067811865475
    """
    stats = as_moments(stats)
    check_weighting(weighting)
    mu = stats.means
    g = _ood_mean(ood, stats.d)
    scale = float(max(row_norms(mu).max(), np.linalg.norm(g)))
    if center:
        c = stats.global_mean(weighting)
        mu, g = mu - c, g - c
    u = unit_directions(g[None, :], scale, "ood_orthogonality (the OOD mean, row 0)")
    U = unit_directions(mu, scale, "ood_orthogonality (class means)") if u is not None else None
    if u is None or U is None:
        return float("nan")
    return float(np.mean(np.abs(U @ u[0])))
