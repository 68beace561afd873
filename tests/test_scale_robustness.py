"""Metrics are scale-robust: features multiplied by any factor in 1e-150 ... 1e150 give the unscaled value to
1e-10 relative (scale-invariant metrics) or the unscaled value times the right power of the factor (raw variances,
spectra, the quartic CDNV); and "Sigma_B = 0" is decided against the scale of the features, not of the means."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from nclab.metrics import (
    cdnv,
    class_separation,
    classifier_accuracy_on_means,
    collapse_report,
    duality_distances,
    equiangularity,
    equinorm,
    etf_gram_error,
    etf_gram_error_spectral,
    fuzziness,
    gnc3,
    hyperspherical_uniformity,
    max_angle,
    nc1,
    ncc_metrics,
    ood_orthogonality,
    orthogonal_frame_error,
    probe_mse_lstsq,
    probe_mse_optimal,
    rank_metrics,
    self_duality,
    spectrum,
    trace_ratio,
    uniform_duality,
    vci,
    within_class_cosine,
    within_class_cosine_distance,
    within_class_split,
)
from nclab.stats import ClassStats

# probe rows 25-27: cdnv was inf from ~5e14 (row 25: 1e15 here), etf_gram_error / trace_ratio / nc1 / vci wrong
# at 1e78 ... 1e153 and at 1e-100 ... 1e-155 (vci = inf, outside [0, 1])
SCALES = [1e-150, 1e-100, 1e-50, 1.0, 1e15, 1e50, 1e100, 1e150]
RTOL = 1e-10

K, N_PER, D = 5, 12, 7
_rng = np.random.default_rng(12)
Y = np.repeat(np.arange(K), N_PER)
H = 3.0 * _rng.normal(size=(K, D))[Y] + _rng.normal(size=(K * N_PER, D)) + 0.5
W = _rng.normal(size=(K, D))
B = _rng.normal(size=K)
OOD = _rng.normal(size=(20, D)) + 0.5


def _stats(s: float, track: str = "full") -> ClassStats:
    return ClassStats.from_arrays(s * H, Y, K, track=track)


# name -> (function of (stats, scale), power p: the value scales as scale**p)
METRICS: dict[str, tuple[Callable[[ClassStats, float], Any], int]] = {
    "nc1": (lambda st, s: nc1(st), 0),
    "nc1_empirical_numerical": (lambda st, s: nc1(st, weighting="empirical", rank="numerical"), 0),
    "fuzziness": (lambda st, s: fuzziness(st), 0),
    "trace_ratio": (lambda st, s: trace_ratio(st), 0),
    "trace_ratio_light": (lambda st, s: trace_ratio(_stats(s, "light")), 0),
    "vci": (lambda st, s: vci(st), 0),
    "vci_balanced": (lambda st, s: vci(st, weighting="balanced", rank="numerical"), 0),
    "cdnv": (lambda st, s: cdnv(st), 0),
    "cdnv_tiled": (lambda st, s: cdnv(st, tile=2), 0),
    "cdnv_quartic": (lambda st, s: cdnv(st, exponent=2), -2),
    "within_class_split_raw": (
        lambda st, s: {k: v for k, v in within_class_split(st).items() if k != "rank"},  # variances: scale**2
        2,
    ),
    "within_class_split_normalized": (lambda st, s: within_class_split(st, normalize=True), 0),
    "within_class_cosine": (lambda st, s: within_class_cosine(st), 0),
    "within_class_cosine_distance": (lambda st, s: within_class_cosine_distance(st), 0),
    "class_separation": (lambda st, s: class_separation(st), 0),
    "equinorm": (lambda st, s: equinorm(st), 0),
    "equiangularity": (lambda st, s: equiangularity(st), 0),
    "max_angle": (lambda st, s: max_angle(st), 0),
    "etf_gram_error": (lambda st, s: etf_gram_error(st), 0),
    "etf_gram_error_uncentred": (lambda st, s: etf_gram_error(st, center=False), 0),
    "etf_gram_error_array": (lambda st, s: etf_gram_error(st.means), 0),
    "etf_gram_error_spectral": (lambda st, s: etf_gram_error_spectral(st), 0),
    "orthogonal_frame_error": (lambda st, s: orthogonal_frame_error(st), 0),
    "self_duality_frobenius": (lambda st, s: self_duality(st, W=W), 0),
    "self_duality_gram": (lambda st, s: self_duality(st, "gram", W=W), 0),
    "self_duality_cosine": (lambda st, s: self_duality(st, "cosine", W=W), 0),
    "self_duality_scaled_w": (lambda st, s: self_duality(st, W=s * W), 0),
    # logits W mu + b scale with the features only when the bias does too
    "classifier_accuracy_on_means": (lambda st, s: classifier_accuracy_on_means(st, W=W, b=s * B), 0),
    "uniform_duality": (lambda st, s: uniform_duality(st, W=W), 0),
    "duality_distances": (lambda st, s: duality_distances(st, W=W), 0),
    "gnc3": (lambda st, s: gnc3(st, W=W), 0),
    "hyperspherical_uniformity": (lambda st, s: hyperspherical_uniformity(st), 0),
    "ood_orthogonality": (lambda st, s: ood_orthogonality(st, s * OOD.mean(axis=0)), 0),
    "probe_mse_optimal": (lambda st, s: probe_mse_optimal(st), 0),
    "probe_mse_lstsq": (lambda st, s: probe_mse_lstsq(s * H, Y, K), 0),
    "rank_metrics": (lambda st, s: rank_metrics(st), 0),
    "rank_metrics_within": (lambda st, s: rank_metrics(st, which="within"), 0),
    "spectrum_total": (lambda st, s: spectrum(st), 2),
    "spectrum_between": (lambda st, s: spectrum(st, which="between"), 2),
    "ncc_metrics": (
        lambda st, s: {k: v for k, v in ncc_metrics(st, s * H, Y, W=W, b=s * B).items() if k != "ncc_index"},
        0,
    ),
}


def _flat(value: Any) -> dict[str, float]:
    if isinstance(value, dict):
        return {f"{k}[{i}]": v for k, item in value.items() for i, v in _flat(item).items()}
    arr = np.atleast_1d(np.asarray(value, dtype=np.float64)).ravel()
    return {str(i): float(v) for i, v in enumerate(arr)}


def _assert_scaled(got: Any, ref: Any, factor: float) -> None:
    g, r = _flat(got), _flat(ref)
    assert g.keys() == r.keys()
    for key in r:
        expected = r[key] * factor
        assert np.isfinite(g[key]), (key, g[key])
        assert g[key] == pytest.approx(expected, rel=RTOL, abs=1e-14 * abs(factor) if r[key] == 0 else 0), key


@pytest.mark.parametrize("scale", SCALES)
@pytest.mark.parametrize("name", sorted(METRICS))
def test_metric_is_scale_robust(name: str, scale: float) -> None:
    fn, power = METRICS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow / underflow warning from numpy either
        ref = fn(_stats(1.0), 1.0)
        got = fn(_stats(scale), scale)
    _assert_scaled(got, ref, scale**power)


@pytest.mark.parametrize("scale", SCALES)
def test_collapse_report_is_scale_robust(scale: float) -> None:
    """Every entry of the report: scale-free except the raw within-class variance split (scale**2)."""
    raw = {"within_class_split_in_span", "within_class_split_orthogonal"}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ref = collapse_report(_stats(1.0), W=W, b=B)
        got = collapse_report(_stats(scale), W=W, b=scale * B)
    assert got.keys() == ref.keys()
    for key, value in ref.items():
        factor = scale**2 if key in raw else 1.0
        assert got[key] == pytest.approx(value * factor, rel=RTOL), key
    assert 0.0 <= got["vci"] <= 1.0


@pytest.mark.parametrize("scale", SCALES)
def test_near_collapse_scale_robust(scale: float) -> None:
    """Tiny within-class spread (1e-6 of the separation), where the pseudo-inverses are ill-conditioned."""
    rng = np.random.default_rng(3)
    mu = 4.0 * rng.normal(size=(K, D))
    H0 = mu[Y] + 1e-6 * rng.normal(size=(K * N_PER, D))
    ref = ClassStats.from_arrays(H0, Y, K)
    got = ClassStats.from_arrays(scale * H0, Y, K)
    for fn in (nc1, trace_ratio, cdnv, vci, etf_gram_error, probe_mse_optimal):
        assert fn(got) == pytest.approx(fn(ref), rel=RTOL), fn.__name__


# ------------------------------------------------------------------------------------------- Sigma_B = 0
def _means_at_origin(scale: float, coincide: str) -> ClassStats:
    """Noise with each class's sample mean subtracted: class means ~1e-16 of the spread, at the origin."""
    rng = np.random.default_rng(29)
    H0 = rng.normal(size=(K * N_PER, D))
    for k in range(K):
        H0[Y == k] -= H0[Y == k].mean(axis=0)
    if coincide == "two":  # classes 0 and 1 at the origin, the others well separated
        H0[Y >= 2] += 5.0 * rng.normal(size=(K, D))[Y[Y >= 2]]
    return ClassStats.from_arrays(scale * H0, Y, K)


# probe row 29: nc1 / trace_ratio / cdnv ~1e32 instead of +inf, within_class_split(normalize=True) 1.5e32
@pytest.mark.parametrize("scale", [1e-150, 1.0, 1e150])
def test_between_zero_at_origin_gives_documented_values(scale: float) -> None:
    st = _means_at_origin(scale, "all")
    assert np.max(np.abs(st.means)) < 1e-14 * scale  # genuinely at the origin, not exactly zero
    assert nc1(st) == np.inf
    assert fuzziness(st) == np.inf
    assert trace_ratio(st) == np.inf
    assert cdnv(st) == np.inf
    assert vci(st) == 1.0
    split = within_class_split(st)
    assert split["rank"] == 0 and split["in_span"] == 0.0
    assert split["orthogonal"] == pytest.approx(st.trace_w(), rel=1e-12)
    with pytest.raises(ValueError, match="Tr Sigma_B = 0"):
        within_class_split(st, normalize=True)


# probe row 30: cdnv 9.7e31 instead of +inf
@pytest.mark.parametrize("scale", [1e-150, 1.0, 1e150])
def test_two_means_coincide_at_origin_cdnv_inf(scale: float) -> None:
    st = _means_at_origin(scale, "two")
    assert cdnv(st) == np.inf
    assert np.isfinite(nc1(st))  # Sigma_B != 0: the other classes are separated


def test_tiny_but_real_separation_is_not_zero() -> None:
    """Means separated by 1e-10 of the spread are resolved (far above the roundoff of a mean): finite values."""
    rng = np.random.default_rng(30)
    H0 = rng.normal(size=(K * N_PER, D))
    for k in range(K):
        H0[Y == k] -= H0[Y == k].mean(axis=0)
    offsets = 1e-10 * rng.normal(size=(K, D))
    st = ClassStats.from_arrays(H0 + offsets[Y], Y, K)
    M = st.means
    expected_tr = st.trace_w() / st.trace_b()
    assert trace_ratio(st) == pytest.approx(expected_tr, rel=1e-12)
    assert 1e18 < trace_ratio(st) < 1e22
    assert np.isfinite(cdnv(st)) and np.isfinite(nc1(st))
    assert np.allclose(M, offsets, rtol=1e-4, atol=1e-15)


# ------------------------------------------------------------------------------------------- rtol
# probe row 34: rtol=2.0 dropped every eigenvalue (nc1 inf, vci 1.0) without complaint
@pytest.mark.parametrize("rtol", [1.0, 2.0, -0.1, float("nan")])
@pytest.mark.parametrize(
    "fn", [nc1, fuzziness, vci, within_class_split, probe_mse_optimal, spectrum, rank_metrics], ids=lambda f: f.__name__
)
def test_rtol_outside_unit_interval_rejected(fn: Callable[..., Any], rtol: float) -> None:
    with pytest.raises(ValueError, match=r"rtol must be in \[0, 1\)"):
        fn(_stats(1.0), rtol=rtol)


# ------------------------------------------------------------------------------------------- beyond the range
@pytest.mark.parametrize("scale", [1e-300, 1e-250, 1e-170, 1e200, 1e300])
@pytest.mark.parametrize(
    "fn",
    [etf_gram_error, etf_gram_error_spectral, orthogonal_frame_error, equinorm, equiangularity, max_angle],
    ids=lambda f: f.__name__,
)
def test_array_metrics_at_any_float64_scale(fn: Callable[..., float], scale: float) -> None:
    """Metrics of (K, d) arrays (class means, classifier rows) need no second moments: any representable scale."""
    M = _stats(1.0).means
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert fn(scale * M) == pytest.approx(fn(M), rel=RTOL)


# probe row 27: at <= 1e-155 every metric read "no separation" for well-separated data
@pytest.mark.parametrize("scale", [1e-152, 1e-170, 1e-250])
def test_features_whose_squares_underflow_are_refused(scale: float) -> None:
    with pytest.raises(ValueError, match=r"too small for float64 accumulation \(squared norms underflow"):
        ClassStats.from_arrays(scale * H, Y, K)
    s = ClassStats(K, D)
    s.update(np.zeros((3, D)), np.array([0, 1, 2]))  # exact zero rows (dead ReLU features) are fine
    assert s.N == 3


# probe row 26: at 1e153 the squares (~1e307) were accepted, and the class sums of squares lost every digit to
# overflow partway (trace_ratio 0.703, true 2.066); rows whose squares come within 2^20 of the float64 maximum
# are refused; sums of many accepted rows that still overflow are refused when read, never returned as numbers.
@pytest.mark.parametrize("scale", [1e153, 1e154, 1e200])
def test_features_whose_squares_overflow_are_refused(scale: float) -> None:
    s = ClassStats(K, D)
    msg = r"too large for float64 accumulation \(squared norms overflow above 8\.4e\+152"
    with pytest.raises(ValueError, match=msg):
        s.update(scale * H, Y)
    assert s.N == 0 and s.device is None


def test_largest_accepted_rows() -> None:
    y = np.repeat(np.arange(3), 64)
    rng = np.random.default_rng(3)
    X = 5.0 * rng.normal(size=(3, 4))[y] + rng.normal(size=(3 * 64, 4))
    X /= np.linalg.norm(X, axis=1).max()  # largest row norm exactly 1
    ref = ClassStats.from_arrays(X, y, 3)
    big = ClassStats.from_arrays(8e152 * X, y, 3)  # 64 rows a class: squares (<= max / 2^8) sum to a finite value
    for fn in (trace_ratio, nc1, vci, cdnv, etf_gram_error):
        assert fn(big) == pytest.approx(fn(ref), rel=RTOL)
    # 2^12 rows a class at that norm: the shifted sums of squares overflow; read, they are refused, not inf / nan
    y = np.repeat(np.arange(3), 4096)
    X = rng.normal(size=(3 * 4096, 4))
    over = ClassStats.from_arrays(8e152 * X / np.linalg.norm(X, axis=1).max(), y, 3, track="light")
    with pytest.raises(ValueError, match=r"the accumulated sq_dev overflowed float64 \(12288 samples"):
        trace_ratio(over)


@pytest.mark.parametrize("scale", [1e-150, 1.0, 1e150])
def test_gnc1_of_normalized_features_scale_free(scale: float) -> None:
    from nclab.metrics import gnc1, normalize_features

    def value(s: float) -> float:
        return gnc1(ClassStats.from_arrays(normalize_features(s * H), Y, K))

    assert value(scale) == pytest.approx(value(1.0), rel=RTOL)
