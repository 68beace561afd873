"""Hull distances and margins ([Jiang et al. 2024, Sec. 2.1], Lemma C.4/C.6, Thm 3.9) against exact and independent
values."""

import math

import numpy as np
import pytest
from scipy.optimize import minimize

from nclab.geometry import (
    dist_to_hull,
    hardmax_value,
    one_vs_one,
    one_vs_rest,
    one_vs_rest_distances,
    optimal_features,
    random_oblique,
    regular_polygon,
    rho_one_vs_one,
    rho_one_vs_rest,
    simplex_etf,
    softmax_code_bounds,
)
from nclab.validation import unit_rows


def _scipy_nearest(w, A):
    """Independent reference: SLSQP on the simplex-constrained QP; (distance, nearest point)."""
    m = A.shape[0]

    def f(v):
        r = w - v @ A
        return r @ r, -2 * A @ r

    res = minimize(
        f, np.full(m, 1 / m), jac=True, method="SLSQP", bounds=[(0, 1)] * m,
        constraints=[{"type": "eq", "fun": lambda v: v.sum() - 1, "jac": lambda v: np.ones(m)}],
        options={"ftol": 1e-15, "maxiter": 1000},
    )  # fmt: skip
    return math.sqrt(max(res.fun, 0.0)), res.x @ A


def _scipy_dist(w, A):
    return _scipy_nearest(w, A)[0]


@pytest.mark.parametrize(("m", "d", "seed"), [(5, 3, 0), (12, 3, 1), (20, 6, 2), (40, 10, 3), (8, 12, 4)])
def test_dist_to_hull_matches_scipy_and_is_certified(m, d, seed):
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(m, d))
    w = 1.5 * rng.normal(size=d)
    res = dist_to_hull(w, A)
    ref_dist, ref_point = _scipy_nearest(w, A)
    assert res.distance == pytest.approx(ref_dist, abs=1e-6)
    assert -1e-12 <= res.gap < 1e-8  # >= 0 up to roundoff
    assert res.lower <= res.distance + 1e-15
    assert res.weights.min() >= 0 and res.weights.sum() == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(res.point, res.weights @ A, atol=1e-12)
    assert np.linalg.norm(res.feature) == pytest.approx(1.0)
    assert res.support.size <= d + 1  # Caratheodory
    # the certificate against the independent solver: the feature is the direction from SLSQP's nearest point
    # to w, and the weak-duality bound it gives, min_j <w - a_j, h>, is tight at that solver's distance (a bound
    # from a wrong direction or a wrong sign would fall short by O(1))
    np.testing.assert_allclose(res.feature, (w - ref_point) / np.linalg.norm(w - ref_point), atol=1e-5)
    assert res.lower == pytest.approx(ref_dist, abs=1e-6)
    assert res.lower <= ref_dist + 1e-9


def test_dist_to_hull_inside_and_single_point():
    A = np.array([[0.0, 0.0], [2.0, 0.0], [0.0, 2.0]])
    res = dist_to_hull([0.5, 0.5], A)
    assert res.distance == pytest.approx(0.0, abs=1e-12)
    single = dist_to_hull([3.0, 4.0], A[:1])
    assert single.distance == pytest.approx(5.0)
    assert single.iterations == 1  # only the pass that certifies the start point
    # nearest point on an edge: from (2, 2) to the segment (2,0)-(0,2) at (1, 1)
    res = dist_to_hull([2.0, 2.0], A)
    assert res.distance == pytest.approx(math.sqrt(2), abs=1e-14)
    np.testing.assert_allclose(res.point, [1.0, 1.0], atol=1e-14)
    # Wolfe by hand: start at the nearest vertex (2, 0) (first of the two at distance 2), x = (0, -2); pass 1 adds
    # (0, 2), whose <p_j, x> = 0 < ||x||^2 = 4, and the minor cycle moves to the affine minimiser (-1, -1); pass 2
    # finds min_j <p_j, x> = 2 = ||x||^2 and stops
    assert res.iterations == 2
    np.testing.assert_allclose(res.weights, [0.0, 0.5, 0.5], atol=1e-15)


def test_dist_to_hull_validates():
    with pytest.raises(ValueError, match="dimension"):
        dist_to_hull(np.zeros(3), np.zeros((4, 2)))
    with pytest.raises(ValueError, match="non-finite"):
        dist_to_hull(np.zeros(2), np.array([[np.nan, 0.0]]))


@pytest.mark.parametrize(("K", "d", "seed"), [(7, 3, 0), (20, 5, 1), (50, 10, 2)])
def test_one_vs_rest_on_random_codes(K, d, seed):
    W = random_oblique(K, d, seed)
    ovr = one_vs_rest(W)
    for k in (0, K // 2, K - 1):
        assert ovr.distances[k] == pytest.approx(_scipy_dist(W[k], np.delete(W, k, 0)), abs=1e-6)
    assert ovr.gaps.max() < 1e-8
    assert ovr.rho == pytest.approx(ovr.distances.min())
    assert rho_one_vs_rest(W) == pytest.approx(ovr.rho, abs=1e-14)  # the pruned scan agrees
    assert rho_one_vs_rest(W) <= rho_one_vs_one(W)
    # HardMax identity (Lemma C.4): min_H L_HardMax(W, H) = -rho, attained at H*(W)
    assert hardmax_value(W, optimal_features(W)) == pytest.approx(-ovr.rho, abs=1e-10)
    # any other unit features do no better
    H = random_oblique(K, d, seed + 100)
    assert hardmax_value(W, H) >= -ovr.rho - 1e-12


def test_rho_one_vs_rest_below_one_vs_one_many_random():
    for seed in range(10):
        W = random_oblique(12, 3, seed)
        assert rho_one_vs_rest(W) <= rho_one_vs_one(W) + 1e-15


def test_repeated_row_gives_zero_and_feature_w():
    W = random_oblique(6, 3, 0)
    W[4] = W[1]
    ovr = one_vs_rest(W)
    assert rho_one_vs_rest(W) == 0.0
    assert ovr.distances[1] == 0.0 and ovr.distances[4] == 0.0
    np.testing.assert_allclose(ovr.features[1], W[1])
    assert hardmax_value(W, ovr.features) == pytest.approx(0.0, abs=1e-15)


def test_optimal_features_equal_w_for_etf_and_polygon():
    for W in (simplex_etf(6, 5, seed=0), regular_polygon(9, 3, seed=1), simplex_etf(3, 2)):
        np.testing.assert_allclose(optimal_features(W), W, atol=1e-10)


def test_rattlers_detected():
    # a square with one vertex pushed away from its neighbours' midpoint: the opposite vertex keeps slack
    W = unit_rows(np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.3, -1.0]]), zero="raise")
    ovr = one_vs_rest(W)
    assert ovr.rattlers.size > 0
    assert np.all(ovr.distances[ovr.rattlers] > ovr.rho * (1 + 1e-4))
    assert one_vs_rest(regular_polygon(8)).rattlers.size == 0


def test_candidates_column_generation_matches_full_solve():
    W = random_oblique(300, 6, 7)
    full = one_vs_rest_distances(W, candidates=None)
    np.testing.assert_allclose(one_vs_rest_distances(W, candidates=3), full, atol=1e-12)
    assert rho_one_vs_rest(W, candidates=2) == pytest.approx(full.min(), abs=1e-12)


def test_normalize_flag_and_one_vs_one():
    W = regular_polygon(6) * np.arange(1, 7)[:, None]
    assert rho_one_vs_rest(W, normalize=True) == pytest.approx(0.5)
    ovo = one_vs_one(W)
    assert ovo.max_cos == pytest.approx(0.5) and ovo.min_angle_deg == pytest.approx(60.0)
    assert ovo.chordal == pytest.approx(math.sqrt(3.0))  # rows of norms 1 and 2 at 60 degrees: sqrt(1 + 4 - 2)


@pytest.mark.parametrize(
    ("d", "K", "lo", "up", "valid"),
    [
        (2, 4, 0.0771, 1.5708, False),
        (2, 8, 0.01928, 0.7854, True),
        (3, 7, 0.09524, 1.5119, True),
        (3, 12, 0.05556, 1.1547, True),
        (10, 100, 0.16970, 1.50488, True),
        (10, 200, 0.14548, 1.39333, True),
        (20, 100, 0.28934, 1.78124, True),
        (512, 1000, 0.48249, 1.98880, True),
        (512, 10000, 0.47816, 1.97986, True),
        (3, 1000, 0.00067, 0.12649, True),
        (2048, 1000, 0.49523, 1.99787, True),
    ],
)
def test_thm39_bounds_table(d, K, lo, up, valid):
    b = softmax_code_bounds(d, K)
    assert b.lower == pytest.approx(lo, rel=5e-4, abs=5e-6)
    assert b.upper == pytest.approx(up, rel=1e-4)
    assert b.valid is valid
    assert b.min_K == pytest.approx(math.sqrt(2 * math.pi * math.sqrt(math.e) * d))


def test_thm39_bounds_contain_closed_form_optima():
    for K in (8, 12, 100):  # d = 2: regular polygon
        b = softmax_code_bounds(2, K)
        assert b.lower <= 1 - math.cos(2 * math.pi / K) <= b.upper
    b = softmax_code_bounds(3, 12)
    assert b.lower <= 1 - 1 / math.sqrt(5) <= b.upper
    with pytest.raises(ValueError, match="d >= 2"):
        softmax_code_bounds(1, 5)


def test_large_K_pruned_path_is_exact():
    # K > 512 takes the batched-bounds path: it must agree with the per-class exact minimum
    W = random_oblique(600, 6, 11)
    assert rho_one_vs_rest(W) == pytest.approx(one_vs_rest(W).rho, abs=1e-12)
    # a code where every class is tight (no pruning possible): the regular 600-gon in R^3
    P = regular_polygon(600, 3, seed=2)
    assert rho_one_vs_rest(P) == pytest.approx(1 - math.cos(2 * math.pi / 600), rel=1e-8)


def test_simplex_projection_satisfies_its_optimality_conditions():
    """x = P(v) onto {x >= 0, sum x = 1} iff x_i = max(v_i - theta, 0) for one theta with sum x = 1 (the KKT
    conditions of min ||x - v||^2 on the simplex, which determine x uniquely)."""
    from nclab.geometry.hull import _project_simplex

    rng = np.random.default_rng(3)
    V = np.vstack([rng.normal(size=(20, 7)), 50 * rng.normal(size=(5, 7)), np.full((1, 7), 0.3), np.eye(7)[:2]])
    X = _project_simplex(V)
    assert np.all(X >= 0) and np.allclose(X.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    for v, x in zip(V, X, strict=True):
        on = x > 0
        theta = v[on] - x[on]
        assert np.ptp(theta) <= 1e-12 * max(1.0, np.abs(v).max())  # one common shift on the support
        assert np.all(v[~on] <= theta[0] + 1e-12 * max(1.0, np.abs(v).max()))  # clipped entries lie below it
    assert np.allclose(_project_simplex(np.eye(3)), np.eye(3))  # vertices are their own projections


def test_batched_bounds_sandwich_every_exact_distance():
    """The large-K path's certified bounds: lb_k <= dist_k <= ub_k for every class (dist_k by the exact solver),
    the property rho_one_vs_rest's pruning relies on."""
    from nclab.geometry.hull import _batched_bounds

    rng = np.random.default_rng(7)
    W = rng.normal(size=(70, 6))
    W /= np.linalg.norm(W, axis=1, keepdims=True)
    exact = one_vs_rest(W).distances
    rows = np.arange(70)
    D = np.einsum("kd,kd->k", W, W)[None, :] - 2.0 * W @ W.T
    D[rows, rows] = np.inf
    cand = np.argpartition(D, 19, axis=1)[:, :20]  # few candidates, so column generation has to work
    lb, ub = _batched_bounds(W, rows, cand, iters=150, rounds=3)
    slack = 1e-9
    assert np.all(lb <= exact + slack) and np.all(exact <= ub + slack)
    assert np.median(ub - lb) < 0.05  # and they are informative, not just valid
