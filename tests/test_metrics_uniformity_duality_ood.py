"""GNC2 hyperspherical uniformity, uniform duality / per-class distances (UNC3), NC5: brute force over pairs and
classes, closed forms on exact frames, tiling and memory, degenerate inputs."""

import itertools
import math
import tracemalloc

import numpy as np
import pytest

from nclab.geometry import simplex_etf
from nclab.metrics import (
    REGISTRY,
    DegenerateMetricWarning,
    duality_distances,
    hyperspherical_uniformity,
    ood_orthogonality,
    self_duality,
    uniform_duality,
)
from nclab.stats import ClassStats


def sample_stats(rng, K=7, d=5, n=20, sep=3.0, counts=None):
    counts = np.full(K, n) if counts is None else np.asarray(counts)
    y = np.repeat(np.arange(K), counts)
    H = sep * rng.normal(size=(K, d))[y] + rng.normal(size=(y.size, d))
    return ClassStats.from_arrays(H, y), H, y


def brute_kernel_pairs(V, kernel, s):
    U = [[x / math.sqrt(sum(x * x for x in v)) for x in v] for v in V.tolist()]
    values = []
    for i, j in itertools.combinations(range(len(U)), 2):
        r = math.sqrt(sum((a - b) ** 2 for a, b in zip(U[i], U[j], strict=True)))
        if kernel == "distance":
            values.append(r)
        elif kernel == "log" or s == 0:
            values.append(math.log(1 / r))
        else:
            values.append(math.copysign(1.0, s) * r ** (-s))
    mean = sum(values) / len(values)
    return mean, sum((v - mean) ** 2 for v in values) / len(values)


# ---------------------------------------------------------------- hyperspherical uniformity (GNC2)
@pytest.mark.parametrize("kernel", ["log", "riesz", "distance"])
@pytest.mark.parametrize("weighting", ["balanced", "empirical"])
def test_uniformity_matches_pair_loops(rng, kernel, weighting):
    stats, _, _ = sample_stats(rng, counts=[5, 9, 20, 31, 7, 12, 40])
    V = stats.means - stats.global_mean(weighting)
    mean, var = brute_kernel_pairs(V, kernel, s=3)  # d - 2
    out = hyperspherical_uniformity(stats, kernel, weighting=weighting)
    assert out["mean"] == pytest.approx(mean, rel=1e-12)
    assert out["var"] == pytest.approx(var, rel=1e-10)


def test_uniformity_of_arrays_uncentred_and_explicit_s(rng):
    X = rng.normal(size=(9, 4)) + 2.0
    mean, var = brute_kernel_pairs(X, "riesz", s=1.5)
    out = hyperspherical_uniformity(X, "riesz", s=1.5, center=False)
    assert (out["mean"], out["var"]) == pytest.approx((mean, var), rel=1e-12)
    mean, var = brute_kernel_pairs(X - X.mean(0), "riesz", s=-1.0)  # s < 0: -r^{|s|}
    assert hyperspherical_uniformity(X, "riesz", s=-1.0)["mean"] == pytest.approx(mean, rel=1e-12)
    assert hyperspherical_uniformity(X, "riesz", s=0.0) == hyperspherical_uniformity(X, "log")


@pytest.mark.parametrize("tile", [1, 2, 5, 100])
def test_uniformity_does_not_depend_on_the_tile(rng, tile):
    X = rng.normal(size=(23, 6))
    ref = hyperspherical_uniformity(X)
    out = hyperspherical_uniformity(X, tile=tile)
    assert out["mean"] == pytest.approx(ref["mean"], rel=1e-13)
    assert out["var"] == pytest.approx(ref["var"], rel=1e-12)


@pytest.mark.parametrize("K, d", [(4, 3), (10, 9), (10, 20)])
def test_uniformity_of_a_simplex_etf_closed_form(K, d):
    # every pair at cosine -1/(K-1): r^2 = 2K/(K-1), no spread for any kernel
    r = math.sqrt(2 * K / (K - 1))
    X = simplex_etf(K, d)
    out = hyperspherical_uniformity(X)
    assert out["mean"] == pytest.approx(-math.log(r), rel=1e-13)
    assert out["var"] == pytest.approx(0.0, abs=1e-26)
    assert hyperspherical_uniformity(X, "riesz")["mean"] == pytest.approx(r ** (-(d - 2)), rel=1e-12)
    assert hyperspherical_uniformity(X, "distance")["mean"] == pytest.approx(r, rel=1e-14)


def test_uniformity_keeps_the_digits_of_nearby_directions():
    # two directions 1e-9 apart (and a third far away): r = 2 sin(theta / 2), not sqrt(2 - 2 cos) ~ 0 or 1.5e-8
    theta = 1e-9
    X = np.array([[1.0, 0.0], [math.cos(theta), math.sin(theta)], [-1.0, 0.0]])
    out = hyperspherical_uniformity(X, "distance", center=False)
    r01 = 2 * math.sin(theta / 2)
    r12 = 2 * math.cos(theta / 2)
    assert out["mean"] == pytest.approx((r01 + 2.0 + r12) / 3, rel=1e-15)
    log_mean = hyperspherical_uniformity(X, "log", center=False)["mean"]
    assert log_mean == pytest.approx(-(math.log(r01) + math.log(2.0) + math.log(r12)) / 3, rel=1e-12)


def test_uniformity_memory_is_bounded_by_the_tile(rng):
    K, d = 3000, 4
    X = rng.normal(size=(K, d))
    tracemalloc.start()
    hyperspherical_uniformity(X, tile=32)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 0.05 * K * K * 8  # the K x K grid would be 72 MB; one block is 32 x K


def test_uniformity_degenerate_inputs():
    X = np.array([[1.0, 0.0], [2.0, 0.0], [0.0, 1.0]])  # rows 0 and 1 share a direction (uncentred)
    assert hyperspherical_uniformity(X, center=False) == {"mean": math.inf, "var": math.inf}
    assert math.isfinite(hyperspherical_uniformity(X, "distance", center=False)["mean"])
    with pytest.warns(DegenerateMetricWarning, match="rows 1"):
        out = hyperspherical_uniformity(np.array([[1.0, 0.0], [0.0, 0.0], [-1.0, 0.0]]))  # centred row 1 is 0
    assert math.isnan(out["mean"]) and math.isnan(out["var"])
    with pytest.raises(ValueError, match="kernel"):
        hyperspherical_uniformity(X, "gauss")
    with pytest.raises(ValueError, match="tile"):
        hyperspherical_uniformity(X, tile=0)


# ---------------------------------------------------------------- uniform duality and per-class distances
@pytest.mark.parametrize("ddof", [0, 1])
@pytest.mark.parametrize("weighting", ["balanced", "empirical"])
def test_uniform_duality_matches_per_class_loops(rng, ddof, weighting):
    stats, _, _ = sample_stats(rng, counts=[5, 9, 20, 31, 7, 12, 40])
    W = rng.normal(size=(7, 5))
    M = stats.means - stats.global_mean(weighting)
    dots = [float(w @ m) for w, m in zip(W, M, strict=True)]
    coss = [float(w @ m) / (np.linalg.norm(w) * np.linalg.norm(m)) for w, m in zip(W, M, strict=True)]
    got_dot = uniform_duality(stats, "dot", W=W, ddof=ddof, weighting=weighting)
    got_cos = uniform_duality(stats, W=W, ddof=ddof, weighting=weighting)
    assert got_dot == pytest.approx(np.var(dots, ddof=ddof), rel=1e-12)
    assert got_cos == pytest.approx(np.var(coss, ddof=ddof), rel=1e-12)
    raw = stats.means
    coss_raw = [float(w @ m) / (np.linalg.norm(w) * np.linalg.norm(m)) for w, m in zip(W, raw, strict=True)]
    assert uniform_duality(stats, W=W, ddof=ddof, center_means=False) == pytest.approx(np.var(coss_raw, ddof=ddof))


def test_uniform_duality_is_zero_for_per_class_scales_and_equal_angles(rng):
    stats, _, _ = sample_stats(rng)
    M = stats.centered_means()
    assert uniform_duality(stats, W=np.diag(rng.uniform(0.5, 3, 7)) @ M) == pytest.approx(0.0, abs=1e-30)
    # d = 2: a rotation by 60 degrees puts every w_k at cosine 1/2 to m_k, no spread; the dot form sees the norms
    stats, _, _ = sample_stats(rng, d=2)
    M = stats.centered_means()
    W = M @ np.array([[0.5, -math.sqrt(3) / 2], [math.sqrt(3) / 2, 0.5]]).T
    assert uniform_duality(stats, W=W) == pytest.approx(0.0, abs=1e-28)
    norms2 = np.einsum("kd,kd->k", M, M)
    assert uniform_duality(stats, "dot", W=W) == pytest.approx(np.var(0.5 * norms2, ddof=1), rel=1e-12)


def test_duality_distances_match_loops_and_the_cosine_self_duality(rng):
    stats, _, _ = sample_stats(rng)
    W = rng.normal(size=(7, 5))
    M = stats.centered_means()
    ref = [np.linalg.norm(w / np.linalg.norm(w) - m / np.linalg.norm(m)) for w, m in zip(W, M, strict=True)]
    got = duality_distances(stats, W=W)
    np.testing.assert_allclose(got, ref, rtol=1e-13)
    assert np.mean(got**2) / 2 == pytest.approx(self_duality(stats, W=W, variant="cosine"), rel=1e-12)
    np.testing.assert_allclose(duality_distances(stats, W=2.5 * M), 0.0, atol=1e-15)


def test_duality_degenerate_and_bad_inputs(rng):
    stats, _, _ = sample_stats(rng)
    W = rng.normal(size=(7, 5))
    W[3] = 0.0
    with pytest.warns(DegenerateMetricWarning, match="rows 3"):
        assert math.isnan(uniform_duality(stats, W=W))
    with pytest.warns(DegenerateMetricWarning, match="rows 3"):
        assert np.all(np.isnan(duality_distances(stats, W=W)))
    assert math.isfinite(uniform_duality(stats, "dot", W=W))  # the dot form needs no direction
    with pytest.raises(ValueError, match=r"W must be \(K, d\)"):
        uniform_duality(stats, W=W[:, :4])
    with pytest.raises(ValueError, match="ddof=7"):
        uniform_duality(stats, W=W, ddof=7)
    with pytest.raises(ValueError, match="similarity"):
        uniform_duality(stats, "angle", W=W)
    with pytest.raises(TypeError, match="stats must be a ClassStats"):
        duality_distances(W, W=W)


# ---------------------------------------------------------------- NC5 (NECO)
def test_nc5_matches_class_loops_raw_and_centred(rng):
    stats, _, _ = sample_stats(rng, counts=[5, 9, 20, 31, 7, 12, 40])
    H_ood = rng.normal(size=(300, 5)) + 0.7
    g = H_ood.mean(0)
    for center, weighting in [(False, "balanced"), (True, "balanced"), (True, "empirical")]:
        c = stats.global_mean(weighting) if center else np.zeros(5)
        ref = np.mean([abs((m - c) @ (g - c)) / (np.linalg.norm(m - c) * np.linalg.norm(g - c)) for m in stats.means])
        assert ood_orthogonality(stats, g, center=center, weighting=weighting) == pytest.approx(ref, rel=1e-13)
    # OOD statistics under any labels, empty classes included, give the same sample mean
    y_ood = rng.choice([1, 4, 6], size=300)
    ood = ClassStats.from_arrays(H_ood, y_ood, K=7)
    assert ood_orthogonality(stats, ood) == pytest.approx(ood_orthogonality(stats, g), rel=1e-13)


def test_nc5_is_zero_when_the_ood_mean_is_orthogonal():
    # class means in the first 3 coordinates, OOD features with mean along the 4th
    K, d = 4, 5
    y = np.arange(K)
    H = np.zeros((K, d))
    H[:, :3] = simplex_etf(K, 3) + 1.0
    stats = ClassStats.from_arrays(H, y)
    g = np.array([0.0, 0.0, 0.0, 2.0, 0.0])
    assert ood_orthogonality(stats, g) == 0.0
    assert ood_orthogonality(stats, H[0]) == pytest.approx(
        np.mean([abs(m @ H[0]) / (np.linalg.norm(m) * np.linalg.norm(H[0])) for m in H]), rel=1e-14
    )


def test_nc5_ood_mean_at_roundoff_scale_of_the_class_means_is_a_zero_direction():
    # the zero test is relative to the largest norm of the input (ZERO_RTOL = 1e-12 times the class mean of norm
    # 1e6 here): an OOD mean of norm 1e-7 is roundoff at that scale, its direction undefined (nan), though it is
    # neither exactly 0 nor small next to the other class means (norm 1)
    H = np.diag([1e6, 1.0, 1.0, 1.0, 0.0])[:4]
    stats = ClassStats.from_arrays(H, np.arange(4))
    g = np.array([0.0, 0.0, 0.0, 0.0, 1e-7])
    with pytest.warns(DegenerateMetricWarning, match="the OOD mean"):
        assert np.isnan(ood_orthogonality(stats, g, center=False))
    # at norm 1 it is a direction, orthogonal to every class mean
    assert ood_orthogonality(stats, 1e7 * g, center=False) == 0.0


def test_nc5_degenerate_and_bad_inputs(rng):
    stats, _, _ = sample_stats(rng)
    with pytest.warns(DegenerateMetricWarning, match="OOD mean"):
        assert math.isnan(ood_orthogonality(stats, np.zeros(5)))
    one_class = ClassStats.from_arrays(rng.normal(size=(10, 5)), np.zeros(10, dtype=int), K=3)
    with pytest.raises(ValueError, match="only one class"):
        ood_orthogonality(stats, one_class)
    with pytest.raises(ValueError, match="ood has d = 4, but the in-distribution stats have d = 5"):
        ood_orthogonality(stats, ClassStats.from_arrays(rng.normal(size=(10, 4)), np.arange(10) % 2))
    with pytest.raises(ValueError, match=r"\(d,\) = \(5,\)"):
        ood_orthogonality(stats, np.ones(4))


def test_new_metrics_are_registered():
    expected = {
        "hyperspherical_uniformity": ("none", ("stats",)),
        "uniform_duality": ("lower", ("stats", "W")),
        "duality_distances": ("lower", ("stats", "W")),
        "ood_orthogonality": ("lower", ("stats",)),
    }
    for name, (direction, needs) in expected.items():
        assert (REGISTRY[name].direction, REGISTRY[name].needs) == (direction, needs)


@pytest.mark.filterwarnings("ignore::nclab.metrics.TargetUnattainableWarning")  # K = 7 > d + 1: expected
def test_collapse_report_carries_the_log_uniformity_and_uniform_duality(rng):
    from nclab.metrics import collapse_report

    stats, _, _ = sample_stats(rng)
    W = rng.normal(size=(7, 5))
    rep = collapse_report(stats, W=W)
    uni = hyperspherical_uniformity(stats)
    assert (rep["uniformity_log_energy"], rep["uniformity_log_var"]) == (uni["mean"], uni["var"])
    assert rep["uniform_duality"] == uniform_duality(stats, W=W)
    assert {REGISTRY[k].direction for k in ("uniformity_log_energy", "uniformity_log_var", "uniform_duality")} == {
        "lower"
    }
    assert "uniform_duality" not in collapse_report(stats)
