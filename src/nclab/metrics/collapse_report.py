"""``collapse_report``: every applicable metric of a ClassStats (and classifier, and NCC pass) in one dict.

Only calls the metric functions (one definition each); it decides which apply and passes the conventions. The
metrics of one report read one :class:`~nclab.stats.ClassMoments` view, so that they share Sigma_W, Sigma_T and
their eigendecompositions; the report's own view is dropped when it returns (pass a view to keep its values).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from nclab.memory import check_allocation
from nclab.metrics import pair_sweeps
from nclab.metrics._registry import REGISTRY, MetricInfo
from nclab.metrics.cdnv import cdnv
from nclab.metrics.classes import ClassesRule, check_classes, select_classes
from nclab.metrics.common import StatsLike, check_stats
from nclab.metrics.cosine import class_separation, within_class_cosine
from nclab.metrics.duality import uniform_duality
from nclab.metrics.gnc import gnc2_entries, gnc3
from nclab.metrics.means_geometry import (
    angle_statistics,
    classifier_accuracy_on_means,
    equiangularity,
    equinorm,
    etf_gram_error,
    max_angle,
    orthogonal_frame_error,
    self_duality,
)
from nclab.metrics.probe import probe_mse_optimal
from nclab.metrics.spectra import rank_metrics
from nclab.metrics.uniformity import hyperspherical_uniformity
from nclab.metrics.variability import nc1, trace_ratio, vci, within_class_split
from nclab.stats.class_stats import ClassStats
from nclab.stats.moments import ClassMoments, Weighting
from nclab.stats.ncc import NCCAccumulator
from nclab.validation import as_rows, check_bool, check_finite

__all__ = ["DEFAULT_CONVENTIONS", "ImbalanceWarning", "check_convention", "check_conventions", "collapse_report"]


class ImbalanceWarning(UserWarning):
    """Balanced weighting was used on data whose class counts differ."""


#: Convention keywords of :func:`collapse_report` (and ``nclab measure --convention key=value``), with defaults.
#: ``docs/conventions.md`` explains each row.
DEFAULT_CONVENTIONS: dict[str, Any] = {
    "weighting": "balanced",  # global mean and Sigma_B: mean of class means, /K  ("empirical": n_k/N)
    "nc1_normalize": True,  # NC1 = Tr(Sigma_W Sigma_B^+)/K  (False: no 1/K, [Xu & Liu 2023] / reference notebook)
    "pinv_rank": None,  # Sigma_B^+ truncated at min(d, K-1)  ("numerical" or an int)
    "vci_rank": "min",  # rank(Sigma_B) := min(d, K-1) in VCI [Xu & Liu 2023, eq. (9)]
    "cdnv_exponent": 1,  # ||mu_i - mu_j||^2 in the CDNV denominator  (2: the quartic variant)
    "ddof": 1,  # std of norms / cosines in equinorm, equiangularity (reference Colab of [Han et al. 2022])
    "self_duality_variant": "frobenius",  # NC3 form: "frobenius" ([Han et al. 2022]) | "gram" | "cosine"
    "center_w": False,  # subtract the mean classifier row before NC3
    "center_means": True,  # NC3 against centred class means (False: The [Tirer & Bruna 2022] uncentred form)
}

# Report keys that are parts of a registered metric: classifier-side NC2 statistics are the same functions
# applied to the rows of W; the split and rank entries are fields of one metric's result.
_DERIVED = {
    "equinorm_w": ("equinorm", ("W",)),
    "equiangularity_w": ("equiangularity", ("W",)),
    "max_angle_w": ("max_angle", ("W",)),
    "within_class_split_in_span": ("within_class_split", ("stats",)),
    "within_class_split_orthogonal": ("within_class_split", ("stats",)),
    "effective_rank": ("rank_metrics", ("stats",)),
    "stable_rank": ("rank_metrics", ("stats",)),
    "numerical_rank": ("rank_metrics", ("stats",)),
}
for _key, (_base, _needs) in _DERIVED.items():
    REGISTRY.setdefault(_key, replace(REGISTRY[_base], name=_key, needs=_needs))
# the two fields of the log-kernel uniformity: lower energy = more uniform spread, lower spread = equal spacing
for _key in ("uniformity_log_energy", "uniformity_log_var"):
    REGISTRY.setdefault(_key, replace(REGISTRY["hyperspherical_uniformity"], name=_key, direction="lower"))
# what a report over classes="present" measured: how many classes it kept, and the samples each needed
REGISTRY.setdefault(
    "K_present",
    MetricInfo("K_present", "none", "classes kept by classes='present' (docs/conventions.md)", ("stats",)),
)
REGISTRY.setdefault(
    "present_min_count",
    MetricInfo("present_min_count", "none", "min_count of classes='present' (docs/conventions.md)", ("stats",)),
)


def _positive_int(v: Any) -> bool:
    return isinstance(v, int | np.integer) and not isinstance(v, bool) and bool(v >= 1)


def _one_of(v: Any, *allowed: Any) -> bool:
    for a in allowed:
        if a is None or isinstance(a, str):
            if v is a or (isinstance(v, str) and v == a):
                return True
        # numbers match numbers only: True is not the choice 1, nor "1"
        elif isinstance(v, int | float | np.number) and not isinstance(v, bool | np.bool_) and v == a:
            return True
    return False


#: What each convention accepts (docs/conventions.md): a check and its description for the error message.
#: Booleans are checked by :func:`nclab.validation.check_bool` (never by truthiness).
_CONVENTION_VALUES: dict[str, tuple[Any, str]] = {
    "weighting": (lambda v: _one_of(v, "balanced", "empirical"), "balanced or empirical"),
    "nc1_normalize": (None, "true or false"),
    "pinv_rank": (lambda v: _one_of(v, None, "numerical") or _positive_int(v), "null, numerical or an int >= 1"),
    "vci_rank": (lambda v: _one_of(v, "min", "numerical") or _positive_int(v), "min, numerical or an int >= 1"),
    "cdnv_exponent": (lambda v: _one_of(v, 1, 2), "1 or 2"),
    "ddof": (lambda v: _one_of(v, 0, 1), "0 or 1"),
    "self_duality_variant": (lambda v: _one_of(v, "frobenius", "gram", "cosine"), "frobenius, gram or cosine"),
    "center_w": (None, "true or false"),
    "center_means": (None, "true or false"),
}


def check_convention(key: str, value: Any, *, name: str | None = None) -> Any:
    """``value`` checked as the value of convention ``key`` of :data:`DEFAULT_CONVENTIONS` (and converted:
    numpy bools and ints to Python ones).

    Allowed values: ``weighting`` "balanced" | "empirical"; ``nc1_normalize``, ``center_w``, ``center_means``
    true | false (a ``bool``: the strings "no" / "false" are refused, never read by truthiness);
    ``pinv_rank`` None | "numerical" | an int >= 1; ``vci_rank`` "min" | "numerical" | an int >= 1;
    ``cdnv_exponent`` 1 | 2; ``ddof`` 0 | 1; ``self_duality_variant`` "frobenius" | "gram" | "cosine".

    Parameters
    ----------
    key : str
        The convention, a key of :data:`DEFAULT_CONVENTIONS`.
    value : object
        Its value.
    name : str, optional
        The name in error messages; default ``key``.

    Returns
    -------
    object
        ``value``, numpy scalars converted to Python ones.

    Raises
    ------
    TypeError, ValueError
        The value is of the wrong kind / not an allowed value, the message naming ``name`` (default ``key``);
        ``ValueError`` also for a ``key`` that is not a convention (the message lists them).

    Examples
    --------
    >>> check_convention("ddof", np.int64(0))
    0
    >>> check_convention("cdnv_exponent", 3)
    Traceback (most recent call last):
        ...
    ValueError: cdnv_exponent must be 1 or 2, got 3
    """
    if key not in _CONVENTION_VALUES:
        raise ValueError(f"unknown convention {key!r}; known: {', '.join(sorted(DEFAULT_CONVENTIONS))}")
    name = key if name is None else name
    check, allowed = _CONVENTION_VALUES[key]
    if check is None:
        return check_bool(value, name=name)
    if not check(value):
        raise ValueError(f"{name} must be {allowed}, got {value!r}")
    return value.item() if isinstance(value, np.generic) else value


def check_conventions(conventions: Mapping[str, Any] | None, *, name: str = "conventions") -> dict[str, Any]:
    """:data:`DEFAULT_CONVENTIONS` with ``conventions`` merged in, each value checked by
    :func:`check_convention`.

    Parameters
    ----------
    conventions : mapping of str to object, or None
        The conventions to change; None keeps the defaults.
    name : str, default "conventions"
        The name in error messages, which name ``name[KEY]``.

    Returns
    -------
    dict of str to object
        Every convention, the given ones checked and converted.

    Raises
    ------
    TypeError, ValueError
        A bad value, or a key that is not a convention.

    Examples
    --------
    >>> check_conventions({"weighting": "empirical"})["weighting"]
    'empirical'
    >>> check_conventions({"center_w": "no"})
    Traceback (most recent call last):
        ...
    TypeError: conventions['center_w'] must be true or false (a bool), got 'no' (str)
    """
    conv = dict(DEFAULT_CONVENTIONS)
    for key, value in (conventions or {}).items():
        if key not in DEFAULT_CONVENTIONS:
            raise ValueError(f"{name}: unknown convention {key!r}; known: {', '.join(sorted(DEFAULT_CONVENTIONS))}")
        conv[key] = check_convention(key, value, name=f"{name}[{key!r}]")
    return conv


def collapse_report(
    stats: StatsLike,
    W: Any = None,
    b: Any = None,
    ncc: NCCAccumulator | Mapping[str, Any] | None = None,
    *,
    conventions: Mapping[str, Any] | None = None,
    classes: ClassesRule = "all",
    min_count: int | None = None,
    progress: bool | Callable[[float, float], None] | None = None,
) -> dict[str, float]:
    """Every metric that applies to ``stats`` (+ classifier ``W: (K, d)``, ``b: (K,)``, + an NCC pass).

    Parameters
    ----------
    stats : ClassStats or ClassMoments
        ``track="full"`` enables the d x d metrics (nc1, vci, within-class split, probe loss, ranks);
        ``track="light"`` reports the O(K d) ones (trace ratio, CDNV, cosine, NC2 statistics); statistics built
        with ``unit_sums=False`` leave out the metrics of the unit sums (``within_class_cosine``,
        ``class_separation``, ``gnc3``). A
        :class:`~nclab.stats.ClassMoments` view keeps what the metrics computed (Sigma_W, Sigma_T, their
        eigendecompositions) for the caller's later reads, as long as the caller holds it; for a ClassStats
        the report computes in a view of its own, freed when it returns. The d x d linear algebra runs where
        the view says (``ClassMoments(stats, linalg=...)``; by default with torch on the statistics' device when
        that is a GPU, with numpy on the CPU): docs/stats.md, "Where the report's linear algebra runs".
    W, b : array_like, optional
        Classifier rows ``(K, d)`` and bias ``(K,)`` (torch tensors accepted). ``W`` adds the classifier NC2
        statistics (``*_w``, rows as given), NC3 (``self_duality``), GNC3 and, when ``K > d``, GNC2 (``gnc2``
        and ``gnc2_ratio``, :func:`~nclab.metrics.gnc2_entries`: the ratio only where the best known Softmax
        Code margin is known without a search beyond ``K d = 40``, neither beyond GNC2_REPORT_MAX_K = 1,000 classes; a
        :class:`~nclab.metrics.MetricOmittedWarning` says what is left out), none of which involves ``b``;
        and ``classifier_accuracy_on_means``, NC4 at the class means: the fraction of classes ``k`` with
        ``argmax(W mu_k + b) = k``, the decision rule of the head with its bias (omit ``b`` only for a
        bias-free head: then ``argmax(W mu_k)``). ``b`` without ``W`` raises ``ValueError``.
    ncc : NCCAccumulator or its ``compute()`` dict, optional
        Adds ``ncc_accuracy`` (PFC3), and with a classifier ``ncc_mismatch`` (NC4), ``classifier_accuracy``.
    conventions : mapping, optional
        Overrides of :data:`DEFAULT_CONVENTIONS`, checked by :func:`check_conventions` before any metric runs: an
        unknown key or a bad value (``"no"`` for a bool) raises ``ValueError`` / ``TypeError`` naming it.
    classes : {"all", "present"}, default "all"
        ``"all"`` measures every one of the K classes: an empty class raises
        :class:`~nclab.stats.EmptyClassError` (naming this option). ``"present"`` measures the classes with at
        least ``min_count`` samples (:func:`~nclab.metrics.select_classes`): the statistics, ``W``'s rows and
        ``b`` are subset together, so NC3 and NC4 are those of the kept classes, and the report adds
        ``K_present`` (the classes kept) and ``present_min_count`` (the rule). An ``ncc`` pass must then have
        been made against the kept classes. docs/conventions.md, "classes".
    min_count : int, optional
        The samples a class needs under ``classes="present"`` (default 1); refused with ``"all"``.
    progress : bool or callable, optional
        At ``K >= 2,048`` the pairwise metrics sweep the K x K pairs in tiles (memory O(tile^2), never K x K;
        float32 GEMMs once ``K^2 d > 2^33``, sums in float64, NC4 decisions exact). ``None`` (default) shows a
        progress bar with the estimated time on stderr when the estimate exceeds 5 s and stderr is a terminal;
        ``True`` always, ``False`` never; a callable receives ``(done, total)`` (units of multiply-adds) after each
        tile.

    Returns
    -------
    dict[str, float]
        Metric name -> value, in a stable order. Each name is in ``nclab.metrics.REGISTRY`` with its
        direction ("lower" / "higher" is more collapsed) and source.

    Examples
    --------
    >>> import numpy as np
    >>> from nclab.geometry import simplex_etf
    >>> from nclab.stats import ClassStats
    >>> K, n, d = 3, 20, 4
    >>> y = np.repeat(np.arange(K), n)
    >>> H = 4 * simplex_etf(K, d)[y] + 0.5 * np.random.default_rng(0).standard_normal((K * n, d))
    >>> stats = ClassStats.from_arrays(H, y, K=K)

    >>> from nclab.metrics import collapse_report
    >>> report = collapse_report(stats, W=simplex_etf(K, d), b=np.zeros(K))
    >>> for key in ("nc1", "vci", "etf_gram_error", "self_duality", "classifier_accuracy_on_means"):
    ...     print(f"{key} {report[key]:.4f}")
    nc1 0.0172
    vci 0.0238
    etf_gram_error 0.0215
    self_duality 0.0023
    classifier_accuracy_on_means 1.0000
    """
    rule, m = check_classes(classes, min_count)
    if rule == "present":
        if b is not None and W is None:
            raise ValueError("a bias b needs its classifier W")
        check_stats_seen(stats)
        stats, W, b, keep = select_classes(stats, W, b, classes=rule, min_count=m)
    check_stats(stats)
    if stats.track == "full":
        # Sigma_W, Sigma_T and their eigendecompositions: about 3.2 d x d float64 arrays at the peak (measured)
        d = stats.d
        check_allocation(
            4.0 * 8 * d * d,
            what=f"collapse_report of track='full' ClassStats with d={d} (d x d matrices and eigendecompositions)",
            alternative="report the O(K d) metrics from track='light' statistics, or reduce d",
        )
    b_arr = None
    if b is not None:
        if W is None:
            raise ValueError("a bias b needs its classifier W")
        b_arr = check_finite(b, name="b")
        if b_arr.shape != (stats.K,):
            raise ValueError(f"b must be (K,) = ({stats.K},), got {b_arr.shape}")
    c = check_conventions(conventions)
    wt = c["weighting"]
    counts = stats.counts
    if wt == "balanced" and counts.min() != counts.max():
        warnings.warn(
            f"class counts differ ({counts.min()}..{counts.max()}): weighting='balanced' takes the mean of class "
            "means and Sigma_B / K, so Sigma_T != Sigma_W + Sigma_B; pass conventions={'weighting': 'empirical'} "
            "for sample weighting (docs/conventions.md)",
            ImbalanceWarning,
            stacklevel=2,
        )
    if isinstance(stats, ClassMoments):
        view = stats
    else:
        # a view of the report's own: the d x d matrices and eigendecompositions its metrics share (4 d x d
        # float64 arrays) go when it returns; a caller that reads more of them passes a view and keeps it
        view = ClassMoments(stats)
    K, d = view.K, view.d
    sweeps = 0.0
    if K >= pair_sweeps.ENGINE_MIN_K:  # half-Gram sweeps: the class means (one for all), W's rows; NC4 is a full Gram
        sweeps = 1.0 + (3.0 if W is not None else 0.0)
    work = sweeps * K * K * d / 2
    with pair_sweeps.progress_scope(work, pair_sweeps.estimate_seconds(K, d, sweeps), progress):
        out = _report(view, W, b_arr, ncc, c, wt)
    if rule == "present":
        out["K_present"] = float(keep.size)
        out["present_min_count"] = float(m)
    return out


def check_stats_seen(stats: StatsLike) -> None:
    """``stats`` is a ClassStats (or its view) that has seen samples (empty classes allowed)."""
    if not isinstance(stats, ClassStats | ClassMoments):
        raise TypeError(f"stats must be a ClassStats, got {type(stats).__name__}")
    if stats.N == 0:
        raise ValueError("stats: these ClassStats have seen no sample")


def _report(
    stats: ClassMoments,
    W: Any,
    b: np.ndarray | None,
    ncc: NCCAccumulator | Mapping[str, Any] | None,
    c: dict[str, Any],
    wt: Weighting,
) -> dict[str, float]:
    out: dict[str, float] = {}
    full = stats.track == "full"

    if full:
        out["nc1"] = nc1(stats, normalize=c["nc1_normalize"], weighting=wt, rank=c["pinv_rank"])
    out["trace_ratio"] = trace_ratio(stats, weighting=wt)
    if full:
        out["vci"] = vci(stats, rank=c["vci_rank"])
        split = within_class_split(stats, weighting=wt, rank=c["pinv_rank"])
        out["within_class_split_in_span"] = float(split["in_span"])
        out["within_class_split_orthogonal"] = float(split["orthogonal"])
    out["cdnv"] = cdnv(stats, exponent=c["cdnv_exponent"])
    units = stats.unit_sums_kept  # ClassStats(unit_sums=False) skip the cosine metrics and GNC3
    if units:
        out["within_class_cosine"] = within_class_cosine(stats)
        out["class_separation"] = class_separation(stats)

    out["equinorm"] = equinorm(stats, ddof=c["ddof"], weighting=wt)
    out["equiangularity"] = equiangularity(stats, ddof=c["ddof"], weighting=wt)
    out["max_angle"] = max_angle(stats, weighting=wt)
    out["etf_gram_error"] = etf_gram_error(stats, weighting=wt)
    if stats.d >= stats.K:  # an orthogonal frame of K vectors needs d >= K
        out["orthogonal_frame_error"] = orthogonal_frame_error(stats)
    # GNC2: the NC2 target when K > d + 1 (no simplex ETF fits); O(K^2 d) like the equiangularity above
    uniformity = hyperspherical_uniformity(stats, "log", weighting=wt)
    out["uniformity_log_energy"] = uniformity["mean"]
    out["uniformity_log_var"] = uniformity["var"]

    if W is not None:
        Wa = as_rows(W, name="W")
        Wa.setflags(write=False)  # one checked copy: the metrics below pass it on without copying it again
        if Wa.shape != (stats.K, stats.d):
            raise ValueError(f"W must be (K, d) = ({stats.K}, {stats.d}), got {Wa.shape}")
        out["equinorm_w"] = equinorm(Wa, ddof=c["ddof"])
        angles = angle_statistics(Wa, ddof=c["ddof"])  # one pass over the pairs of W's rows for both
        out["equiangularity_w"] = angles["equiangularity"]
        out["max_angle_w"] = angles["max_angle"]
        out["self_duality"] = self_duality(
            stats,
            W=Wa,
            variant=c["self_duality_variant"],
            center_w=c["center_w"],
            center_means=c["center_means"],
            weighting=wt,
        )
        if units:
            out["gnc3"] = gnc3(stats, W=Wa)
        if stats.K > stats.d:  # no orthogonal frame fits: the classifier's target is a Softmax Code
            out.update(gnc2_entries(Wa, stacklevel=4))
        out["uniform_duality"] = uniform_duality(stats, W=Wa, ddof=c["ddof"], weighting=wt)
        out["classifier_accuracy_on_means"] = classifier_accuracy_on_means(stats, W=Wa, b=b)

    if full:
        out["probe_mse_optimal"] = probe_mse_optimal(stats)
        ranks = rank_metrics(stats)
        for key in ("effective_rank", "stable_rank", "numerical_rank"):
            if key in ranks:
                out[key] = float(ranks[key])

    if ncc is not None:
        res = ncc.compute() if isinstance(ncc, NCCAccumulator) else ncc
        for key in ("ncc_accuracy", "ncc_mismatch", "ncc_mismatch_nobias", "classifier_accuracy"):
            if key in res:
                out[key] = float(res[key])
    return out
