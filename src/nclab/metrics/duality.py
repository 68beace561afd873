"""Per-class duality between classifier rows and centred class means: uniform duality (UNC3 of Wu & Papyan) and
the per-class distances of the normalised pairs.

Self-duality (NC3, :func:`nclab.metrics.self_duality`) asks ``w_k ∝ mu_k - mu_G`` with one common scale. With
many classes (language models, [Wu & Papyan 2024]) the weaker *uniform* duality is what is observed: the
per-class similarity of ``w_k`` and ``mu_k - mu_G`` is the same for every class, whatever it is.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from nclab.metrics._registry import metric
from nclab.metrics.common import StatsLike, as_moments, check_stats, direction_norms, row_norms, unit_directions
from nclab.stats.moments import Weighting
from nclab.validation import as_rows, check_bool

__all__ = ["duality_distances", "uniform_duality"]

Similarity = Literal["cosine", "dot"]


def _pairs(W: Any, stats: StatsLike, center_means: bool, weighting: Weighting) -> tuple[np.ndarray, np.ndarray]:
    check_stats(stats)
    view = as_moments(stats)
    center = check_bool(center_means, name="center_means")
    M = view.centered_means(weighting, copy=False) if center else view.class_means(copy=False)  # read-only
    Wr = as_rows(W, name="W")
    if Wr.shape != M.shape:
        raise ValueError(f"W must be (K, d) = {M.shape}, got {Wr.shape}")
    return Wr, M


@metric(
    "uniform_duality",
    "lower",
    "[Wu & Papyan 2024] (UNC3, uniform duality); [neural-collapse (rhubarbwu)] similarities",
    needs=("stats", "W"),
)
def uniform_duality(
    stats: StatsLike,
    similarity: Similarity = "cosine",
    *,
    W: Any,
    ddof: int = 1,
    center_means: bool = True,
    weighting: Weighting = "balanced",
) -> float:
    """UNC3: the variance over classes of the per-class similarity of ``w_k`` and ``mu_k - mu_G``.

    .. math::

        \\mathrm{UNC3} = \\frac{1}{K - \\mathrm{ddof}} \\sum_{k=1}^{K} (s_k - \\bar s)^2

        s_k = \\cos(w_k, \\mu_k - \\mu_G) \\ (\\texttt{"cosine"}) \\quad\\text{or}\\quad
        s_k = w_k^\\top (\\mu_k - \\mu_G) \\ (\\texttt{"dot"})

    with ``W (K, d)`` the classifier rows (bias unused) and ``mu_k (d,)`` the class means of ``stats``.

    Parameters
    ----------
    W : array_like (K, d)
        Classifier rows (``nn.Linear.weight`` layout), numpy or torch.
    stats : ClassStats
    similarity : {"cosine", "dot"}
        ``"cosine"`` (default): scale free, ``s_k`` in [-1, 1] and UNC3 in [0, 1] (ddof 0) or [0, K/(K-1)]
        (ddof 1). ``"dot"``: the raw inner product (units of ``||W|| ||M||``; not scale invariant).
    ddof : int
        1 (default, ``torch.var``'s and the project's ``ddof`` convention) or 0 (population variance).
    center_means : bool
        ``mu_k - mu_G`` (default) or the raw means (bias-free heads).
    weighting : {"balanced", "empirical"}
        The global mean ``mu_G``: mean of class means or sample mean.

    Returns
    -------
    float
        Lower = more collapsed (0 when every class has the same similarity, e.g. under NC3, where all cosines
        are 1). ``nan`` with a :class:`~nclab.metrics.DegenerateMetricWarning` for ``"cosine"`` when a row of
        ``W`` or a centred mean is zero (no direction). ``ValueError`` if ``ddof >= K``.

    See Also
    --------
    self_duality : NC3 (a common scale; the ``"cosine"`` variant is the mean of ``1 - s_k``).
    duality_distances : the per-class distances ``||w_k/||w_k|| - m_k/||m_k||||``.

    References
    ----------
    Wu, Papyan (2024), "Linguistic collapse: neural collapse in (large) language models", NeurIPS 2024,
    arXiv:2405.17767.

    Examples
    --------
    >>> import numpy as np
    >>> from nclab.geometry import simplex_etf
    >>> from nclab.stats import ClassStats
    >>> M = simplex_etf(3, 2)
    >>> stats = ClassStats.from_arrays(M, np.arange(3))
    >>> round(uniform_duality(stats, W=np.diag([1.0, 2.0, 3.0]) @ M), 12)  # every w_k ∝ mu_k: cosines 1 to rounding
    0.0
    """
    if similarity not in ("cosine", "dot"):
        raise ValueError(f"similarity must be 'cosine' or 'dot', got {similarity!r}")
    if isinstance(ddof, bool) or not isinstance(ddof, int | np.integer) or ddof < 0:
        raise ValueError(f"ddof must be a non-negative int, got {ddof!r}")
    Wr, M = _pairs(W, stats, center_means, weighting)
    K = Wr.shape[0]
    if ddof >= K:
        raise ValueError(f"ddof={ddof} needs more than {ddof} classes, got K={K}")
    if similarity == "dot":
        sims = np.einsum("kd,kd->k", Wr, M)
    else:
        # cos(w_k, m_k) from the row norms: no K x d unit rows
        nw = direction_norms(Wr, None, "uniform_duality (rows of W)")
        scale = float(row_norms(as_moments(stats).class_means(copy=False)).max())
        nm = direction_norms(M, scale, "uniform_duality (class means)")
        if nw is None or nm is None:
            return float("nan")
        sims = np.einsum("kd,kd->k", Wr, M) / (nw * nm)
    return float(np.sum((sims - sims.mean()) ** 2) / (K - ddof))


@metric(
    "duality_distances",
    "lower",
    "[neural-collapse (rhubarbwu)] distance_norms (per-class NC3 distances)",
    needs=("stats", "W"),
)
def duality_distances(
    stats: StatsLike,
    *,
    W: Any,
    center_means: bool = True,
    weighting: Weighting = "balanced",
) -> np.ndarray:
    """Per-class distances ``||w_k / ||w_k|| - m_k / ||m_k|| ||`` of the normalised classifier rows and centred means.

    .. math::

        \\delta_k = \\left\\lVert \\frac{w_k}{\\lVert w_k \\rVert} - \\frac{m_k}{\\lVert m_k \\rVert} \\right\\rVert
        = \\sqrt{2 - 2 \\cos(w_k, m_k)}, \\qquad m_k = \\mu_k - \\mu_G

    Parameters
    ----------
    W : array_like (K, d)
        Classifier rows.
    stats : ClassStats
    center_means : bool
        ``m_k = mu_k - mu_G`` (default) or the raw means.
    weighting : {"balanced", "empirical"}
        The global mean ``mu_G``.

    Returns
    -------
    numpy.ndarray (K,)
        Each in [0, 2]; lower = more collapsed (0 for ``w_k ∝ m_k`` with a positive factor). A per-class
        diagonal of NC3: ``mean(delta**2) / 2`` is ``self_duality(stats, W=W, variant="cosine")``. All ``nan``
        with a :class:`~nclab.metrics.DegenerateMetricWarning` when a row of ``W`` or a centred mean is zero.

    See Also
    --------
    self_duality : NC3 with one common scale (Frobenius-normalised matrices).
    uniform_duality : the spread over classes of the per-class cosines.

    Examples
    --------
    >>> import numpy as np
    >>> from nclab.geometry import simplex_etf
    >>> from nclab.stats import ClassStats
    >>> M = simplex_etf(3, 2)
    >>> duality_distances(ClassStats.from_arrays(M, np.arange(3)), W=-M)  # opposite directions: 2 each
    array([2., 2., 2.])
    """
    Wr, M = _pairs(W, stats, center_means, weighting)
    Uw = unit_directions(Wr, float(row_norms(Wr).max()), "duality_distances (rows of W)")
    Um = unit_directions(M, float(row_norms(stats.means).max()), "duality_distances (class means)")
    if Uw is None or Um is None:
        return np.full(Wr.shape[0], np.nan)
    return row_norms(Uw - Um)
