"""What each registered metric measures, in one line: the collapse property it quantifies (NC1-NC4 of
[Papyan et al. 2020], PFC1-3 of [Wang et al. 2024], GNC of [Jiang et al. 2024]), its definition and the
bibliography key of that definition (docs/references.md).

:func:`describe` joins this with :data:`nclab.metrics.REGISTRY` (name, direction, source); ``nclab metrics list``
prints it and the run reports label their y axes with it.

Notation: class means mu_k, global mean mu_G, between-class covariance Sigma_B, within-class covariance
Sigma_W, M = [mu_k - mu_G] (the centred means), W (K, d) the classifier, K classes.
"""

from __future__ import annotations

from dataclasses import dataclass

from nclab.metrics._registry import REGISTRY, Direction

__all__ = ["FAMILY", "GLOSSARY", "MetricEntry", "describe", "family", "glossary_rows"]


@dataclass(frozen=True)
class MetricEntry:
    """One row of ``nclab metrics list``: a registered metric with its collapse label, definition and citation."""

    name: str
    label: str
    direction: Direction
    definition: str
    citation: str
    source: str
    family: str = ""


#: ``name -> (label, definition, citation key)``; the label is the collapse property ("" for diagnostics).
GLOSSARY: dict[str, tuple[str, str, str]] = {
    "nc1": ("NC1", "Tr(Sigma_W Sigma_B^+) / K", "[Papyan et al. 2020, Sec. 3]"),
    "fuzziness": ("NC1", "Tr(Sigma_B^+ Sigma_W) (NC1 without the 1/K)", "[Xu & Liu 2023, Sec. 3.2]"),
    "trace_ratio": ("PFC1", "Tr(Sigma_W) / Tr(Sigma_B)", "[Wang et al. 2024, Sec. 3]"),
    "pfc1": ("PFC1", "Tr(Sigma_W) / Tr(Sigma_B)", "[Wang et al. 2024, Sec. 3]"),
    "sq_dist": ("PFC1", "Tr(Sigma_W) / Tr(Sigma_B) (squared distance)", "[Hui et al. 2022]"),
    "vci": (
        "NC1",
        "1 - Tr(Sigma_T^+ Sigma_B) / rank(Sigma_B) (variability collapse index)",
        "[Xu & Liu 2023, Def. 5.3]",
    ),
    "cdnv": ("NC1", "mean_{k != l} (var_k + var_l) / (2 ||mu_k - mu_l||^2)", "[Galanti et al. 2022]"),
    "within_class_cosine": ("NC1", "mean cosine between features of one class", "[Kornblith et al. 2021]"),
    "within_class_cosine_distance": ("NC1", "1 - within-class cosine", "[Kornblith et al. 2021]"),
    "class_separation": ("NC1", "R^2 = 1 - d_within / d_total (cosine distances)", "[Kornblith et al. 2021]"),
    "within_class_split": (
        "",
        "within-class variance inside span(M) and orthogonal to it",
        "[Xu & Liu 2023, Sec. 4.1]",
    ),
    "within_class_split_in_span": ("", "within-class variance inside span(M)", "[Xu & Liu 2023, Sec. 4.1]"),
    "within_class_split_orthogonal": ("", "within-class variance orthogonal to span(M)", "[Xu & Liu 2023, Sec. 4.1]"),
    "equinorm": ("NC2", "std_k ||mu_k - mu_G|| / mean_k ||mu_k - mu_G||", "[Papyan et al. 2020, Fig. 2]"),
    "equiangularity": ("NC2", "std_{k != l} cos(mu_k, mu_l) (centred)", "[Papyan et al. 2020, Fig. 3]"),
    "max_angle": ("NC2", "mean_{k != l} |cos(mu_k, mu_l) + 1/(K-1)|", "[Papyan et al. 2020, Fig. 4]"),
    "etf_gram_error": (
        "PFC2",
        "|| M^T M / ||M^T M||_F - (I - 11^T/K) / ||I - 11^T/K||_F ||_F",
        "[Wang et al. 2024, Sec. 3]",
    ),
    "pfc2": ("PFC2", "normalised Gram of M against the simplex ETF's", "[Wang et al. 2024, Sec. 3]"),
    "orthogonal_frame_error": ("NC2", "normalised Gram of the uncentred means against I", "[Tirer & Bruna 2022]"),
    "equinorm_w": ("NC2", "std_k ||w_k|| / mean_k ||w_k||", "[Papyan et al. 2020, Fig. 2]"),
    "equiangularity_w": ("NC2", "std_{k != l} cos(w_k, w_l)", "[Papyan et al. 2020, Fig. 3]"),
    "max_angle_w": ("NC2", "mean_{k != l} |cos(w_k, w_l) + 1/(K-1)|", "[Papyan et al. 2020, Fig. 4]"),
    "self_duality": ("NC3", "|| W^T / ||W||_F - M / ||M||_F ||_F^2", "[Papyan et al. 2020, Fig. 5]"),
    "uniform_duality": ("NC3", "spread of cos(w_k, mu_k - mu_G) over classes", "[Wu & Papyan 2024]"),
    "duality_distances": ("NC3", "per-class || w_k/||w_k|| - (mu_k - mu_G)/||mu_k - mu_G|| ||", "[Wu & Papyan 2024]"),
    "classifier_accuracy_on_means": (
        "NC4",
        "fraction of classes k with argmax_j (w_j . mu_k + b_j) = k",
        "[Papyan et al. 2020, Sec. 3]",
    ),
    "ncc_mismatch": (
        "NC4",
        "fraction of samples where argmax(W h + b) differs from the nearest class mean",
        "[Papyan et al. 2020, Fig. 7]",
    ),
    "ncc_mismatch_nobias": ("NC4", "as ncc_mismatch with b = 0", "[Papyan et al. 2020, Fig. 7]"),
    "ncc_accuracy": ("PFC3", "accuracy of the nearest-class-mean classifier", "[Wang et al. 2024, Sec. 3]"),
    "pfc3": ("PFC3", "accuracy of the nearest-class-mean classifier", "[Wang et al. 2024, Sec. 3]"),
    "classifier_accuracy": ("", "accuracy of argmax(W h + b) (not a collapse metric)", "[Papyan et al. 2020]"),
    "K_present": (
        "",
        "the classes a report measured under classes='present' (those with >= min_count samples; not a metric)",
        "[Wu & Papyan 2024]",
    ),
    "present_min_count": ("", "the samples a class needed under classes='present'", "[Wu & Papyan 2024]"),
    "gnc1": (
        "GNC",
        "Tr(Sigma_W Sigma_B^+) / K of unit-normalised features, uncentred Sigma_B",
        "[Jiang et al. 2024, Sec. 3]",
    ),
    "gnc2": (
        "GNC",
        "rho_one_vs_rest of the unit classifier rows: min_k dist(w_k, conv{w_j : j != k})",
        "[Jiang et al. 2024, Sec. 3]",
    ),
    "gnc2_ratio": (
        "GNC",
        "gnc2 / rho*, rho* the margin of the best known Softmax Code for (K, d)",
        "[Jiang et al. 2024, Sec. 3]",
    ),
    "gnc3": ("GNC", "mean_k (1 - w_k . hbar_k), unit w_k, hbar_k the mean unit feature", "[Jiang et al. 2024, Sec. 3]"),
    "hyperspherical_uniformity": ("GNC", "uniformity of the unit class means on the sphere", "[Liu et al. 2023]"),
    "uniformity_log_energy": ("GNC", "log Riesz energy of the unit class means", "[Liu et al. 2023]"),
    "uniformity_log_var": ("GNC", "log variance of the pairwise kernel of the unit class means", "[Liu et al. 2023]"),
    "probe_mse_optimal": ("NC1", "optimal MSE linear-probe loss, closed form", "[Xu & Liu 2023, Thm 5.1]"),
    "probe_mse_lstsq": ("NC1", "MSE linear-probe loss by least squares", "[Xu & Liu 2023, Thm 5.1]"),
    "rank_metrics": ("", "RankMe, effective and stable rank of the features", "[Xu & Liu 2023]"),
    "effective_rank": ("", "exp(entropy of the normalised singular values)", "[Xu & Liu 2023]"),
    "stable_rank": ("", "||H||_F^2 / ||H||_2^2", "[Xu & Liu 2023]"),
    "numerical_rank": ("", "singular values above tolerance", "[Xu & Liu 2023]"),
    "ood_orthogonality": ("NC5", "mean |cos| between OOD features and the ID class means", "[Ammar et al. 2024]"),
}


#: The NC property of each progressive-collapse label: [Wang et al. 2024] define PFC1-3 as the layer-wise forms of
#: NC1 (within-class variability), NC2 (simplex ETF means) and NC4 (nearest-class-centre decisions).
FAMILY: dict[str, str] = {"PFC1": "NC1", "PFC2": "NC2", "PFC3": "NC4"}


def family(name: str) -> str:
    """The collapse family of metric ``name``: NC1-NC5 (a PFC label mapped by :data:`FAMILY`), GNC, or ``""``
    for a diagnostic or a name that is not a metric (loss, error).

    Examples
    --------
    >>> family("etf_gram_error"), family("nc1"), family("ncc_accuracy"), family("gnc1"), family("loss")
    ('NC2', 'NC1', 'NC4', 'GNC', '')
    """
    label = GLOSSARY.get(name, ("", "", ""))[0]
    return FAMILY.get(label, label)


def describe(name: str) -> MetricEntry:
    """The :class:`MetricEntry` of the registered metric ``name``.

    Raises
    ------
    KeyError
        When ``name`` is not in :data:`nclab.metrics.REGISTRY` (the message lists the known names).

    Examples
    --------
    >>> e = describe("nc1")
    >>> e.label, e.direction
    ('NC1', 'lower')
    """
    if name not in REGISTRY:
        raise KeyError(f"unknown metric {name!r}; known: {', '.join(sorted(REGISTRY))}")
    label, definition, citation = GLOSSARY.get(name, ("", "", ""))
    info = REGISTRY[name]
    return MetricEntry(name, label, info.direction, definition, citation, info.source, family(name))


def glossary_rows() -> list[MetricEntry]:
    """Every registered metric's :class:`MetricEntry`, in registry order."""
    return [describe(name) for name in REGISTRY]
