"""Spectra of Sigma_T / Sigma_W / Sigma_B [Xu & Liu 2023, Fig. 2] and representation-rank metrics on them.

Eigenvalues come from :func:`nclab.metrics._linalg.psd_pinv` (symmetric eigh in float64, clipped at 0);
eigenvalues ``<= rtol * lambda_max`` are treated as exact zeros everywhere here (the numerical-rank
policy of nclab), so roundoff never leaks into entropies.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from nclab.metrics._linalg import DEFAULT_RTOL, check_rtol, psd_pinv, stats_eigvals
from nclab.metrics._registry import metric
from nclab.metrics.common import StatsLike, as_moments
from nclab.stats.moments import ClassMoments, Weighting
from nclab.validation import check_choice

__all__ = ["rank_metrics", "spectrum"]

Which = Literal["total", "within", "between"]
Convention = Literal["eigenvalues", "singular_values"]


def _validate(stats: StatsLike, which: Which, center: bool) -> ClassMoments:
    stats = as_moments(stats)
    check_choice(which, Which, name="which")
    if not center and which != "total":
        raise ValueError("center=False is only defined for which='total' (raw second moment E[h h^T])")
    return stats


def _matrix(stats: StatsLike, which: Which, weighting: Weighting, center: bool) -> Any:
    """The matrix of :func:`spectrum`, on the view's backend (:meth:`ClassMoments.matrix
    <nclab.stats.ClassMoments.matrix>`)."""
    stats = _validate(stats, which, center)
    if which == "total" and not center:
        mg = stats.backend.asarray(stats.global_mean("empirical"))
        return stats.matrix("total") + mg[:, None] * mg[None, :]  # + mu_G mu_G^T, the products of np.outer
    return stats.matrix(which, weighting)


def spectrum(
    stats: StatsLike,
    which: Which = "total",
    weighting: Weighting = "balanced",
    center: bool = True,
    rtol: float = DEFAULT_RTOL,
) -> np.ndarray:
    """Eigenvalues ``(d,)``, descending, of Sigma_T (``which="total"``), Sigma_W or Sigma_B [Xu & Liu 2023, Fig. 2].

    Parameters
    ----------
    stats : ClassStats or ClassMoments, K classes, dimension d
        Statistics of the features, ``track="full"``.
    which : {"total", "within", "between"}, default "total"
        The covariance.
    weighting : {"balanced", "empirical"}, default "balanced"
        Selects Sigma_B (``which="between"`` only).
    center : bool, default True
        ``False`` (total only) gives the raw second moment ``(1/N) sum_i h_i h_i^T = Sigma_T + mu_G mu_G^T``.
    rtol : float, default 1e-12
        Eigenvalues ``<= rtol * lambda_max`` are returned as 0.

    Returns
    -------
    numpy.ndarray of float64, shape (d,)
        The eigenvalues, descending, >= 0; all 0 for the zero matrix.

    Raises
    ------
    ValueError
        ``center=False`` with ``which`` other than "total", or ``track="light"`` statistics.

    See Also
    --------
    rank_metrics

    Examples
    --------
    >>> import numpy as np
    >>> from nclab.stats import ClassStats
    >>> y = np.array([0, 0, 1, 1])
    >>> H = np.array([[1.0, 0, 0], [-1, 0, 0], [0, 1, 0], [0, -1, 0]])  # class means 0, spread on two axes
    >>> stats = ClassStats.from_arrays(H, y, K=2)
    >>> spectrum(stats), spectrum(stats, "between")
    (array([0.5, 0.5, 0. ]), array([0., 0., 0.]))
    """
    rtol = check_rtol(rtol)
    if center:
        stats = _validate(stats, which, center)
        lam: np.ndarray = np.maximum(stats_eigvals(stats, which, weighting), 0.0)
    else:
        p = psd_pinv(_matrix(stats, which, weighting, center), rank="numerical", rtol=rtol)
        lam = p.eigvals.copy()
    top = lam[0] if lam.size else 0.0
    lam[lam <= rtol * top] = 0.0  # the pinv policy's numerical zeros
    return lam


@metric("rank_metrics", "none", "RankMe [Garrido et al. 2023]; effective rank [Roy & Vetterli 2007]; stable rank")
def rank_metrics(
    stats: StatsLike,
    which: Which = "total",
    convention: Convention = "eigenvalues",
    weighting: Weighting = "balanced",
    center: bool = True,
    rtol: float = DEFAULT_RTOL,
) -> dict[str, float | int]:
    r"""Rank diagnostics of Sigma_T (default), Sigma_W or Sigma_B, eigenvalues lambda_i (:func:`spectrum`).

    .. math::

        \mathrm{effective\_rank} = \exp\Big(-\sum_i p_i \log p_i\Big), \quad p_i = \frac{s_i}{\sum_j s_j}

        \mathrm{stable\_rank} = \frac{\sum_i \lambda_i}{\lambda_{\max}}

        \mathrm{numerical\_rank} = \#\{i : \lambda_i > \mathrm{rtol}\, \lambda_{\max}\}

    where :math:`\lambda_i` are the eigenvalues of the covariance and :math:`s_i = \lambda_i`
    (``convention="eigenvalues"``) or :math:`\sqrt{\lambda_i}` (``"singular_values"``).

    Direction "none" (diagnostics).

    Parameters
    ----------
    stats : ClassStats or ClassMoments, K classes, dimension d
        Statistics of the features, ``track="full"``.
    which : {"total", "within", "between"}, default "total"
        The covariance.
    convention : {"eigenvalues", "singular_values"}, default "eigenvalues"
        The weights of the effective rank: ``"eigenvalues"``: s = lambda_i, the covariance eigenvalues (PCA
        explained-variance ratios; reptrix's ``get_rankme``). ``"singular_values"``: s = sqrt(lambda_i),
        proportional to the singular values of the (centred) N x d embedding matrix, which is RankMe's convention
        (Garrido et al. 2023; they use raw, uncentred embeddings: ``which="total", center=False`` reproduces that
        exactly, up to their 1e-7 smoothing of p, which nclab omits).
    weighting, center, rtol
        As in :func:`spectrum`.

    Returns
    -------
    dict
        * ``effective_rank`` (float) = exp(-sum_i p_i log p_i), p = s / sum(s), in [1, d].
        * ``stable_rank`` (float) = sum_i lambda_i / lambda_max = ||Z||_F^2 / ||Z||_2^2 of the embedding matrix
          Z, in [1, d]; independent of ``convention``.
        * ``numerical_rank`` (int): number of eigenvalues > ``rtol * lambda_max`` (nclab's pinv policy).

        All three are 0 for the zero matrix.

    See Also
    --------
    spectrum

    Examples
    --------
    >>> import numpy as np
    >>> from nclab.stats import ClassStats
    >>> y = np.array([0, 0, 1, 1])
    >>> H = np.array([[1.0, 0, 0], [-1, 0, 0], [0, 1, 0], [0, -1, 0]])  # class means 0, spread on two axes
    >>> stats = ClassStats.from_arrays(H, y, K=2)
    >>> rank_metrics(stats)  # two equal eigenvalues
    {'effective_rank': 2.0, 'stable_rank': 2.0, 'numerical_rank': 2}
    """
    check_choice(convention, Convention, name="convention")
    lam = spectrum(stats, which=which, weighting=weighting, center=center, rtol=rtol)
    lam = lam[lam > 0]
    if lam.size == 0:
        return {"effective_rank": 0.0, "stable_rank": 0.0, "numerical_rank": 0}
    s = np.sqrt(lam) if convention == "singular_values" else lam
    p = s / s.sum()
    entropy = float(-np.sum(p * np.log(p)))
    return {
        "effective_rank": float(np.exp(entropy)),
        "stable_rank": float(lam.sum() / lam[0]),
        "numerical_rank": int(lam.size),
    }
