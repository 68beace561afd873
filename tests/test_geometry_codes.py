"""Softmax Codes and Tammes codes (nclab.geometry.codes): best known values, closed forms, KKT certificates."""

import math

import numpy as np
import pytest

from nclab.geometry import icosahedron, one_vs_rest, optimal_features, random_oblique, retract, tangent
from nclab.geometry.codes import CERTIFIES, code_kkt, softmax_code, softmax_code_search, tammes_search

# Best known Tammes codes on S^2: the largest minimum angle (degrees) of K points [Sloane 2000] (N. J. A. Sloane with
# R. H. Hardin, W. D. Smith et al., Tables of spherical codes, packings in 3 dimensions,
# neilsloane.com/packings/dim3). Proven optimal for K <= 14 and K = 24; the others are the best known.
TAMMES_S2 = {
    4: 109.4712206,
    5: 90.0,
    6: 90.0,
    7: 77.8695421,
    8: 74.8584922,
    9: 70.5287794,
    10: 66.1468220,
    11: 63.4349488,
    12: 63.4349488,
    13: 57.1367031,
    14: 55.6705700,
    15: 53.6578501,
    16: 52.2443957,
    17: 51.0903285,
    18: 49.5566548,
    19: 47.6919141,
    20: 47.4310362,
    21: 45.6132231,
    22: 44.7401612,
    23: 43.7099642,
    24: 43.6907671,
}


def _assert_kkt(res):
    k = res.kkt
    assert k.ok and k.residual <= 1e-9
    assert np.all(k.multipliers >= 0) and k.multipliers.sum() == pytest.approx(1.0, abs=1e-12)
    assert k.active.shape == (k.multipliers.size, 2) and k.active.shape[0] >= 1


@pytest.mark.parametrize("K", sorted(TAMMES_S2))
def test_tammes_s2_reaches_the_best_known_codes_with_default_settings(K):
    res = tammes_search(3, K)
    assert res.min_angle_deg == pytest.approx(TAMMES_S2[K], abs=1e-4)
    # the objective and the angle recomputed from the code's rows by a loop over pairs (not from the result's fields)
    pairs = [(i, j) for i in range(K) for j in range(i + 1, K)]
    min_dist = min(float(np.linalg.norm(res.W[i] - res.W[j])) for i, j in pairs)
    max_cos = max(float(res.W[i] @ res.W[j]) for i, j in pairs)
    assert res.value == pytest.approx(min_dist, abs=1e-12)
    assert res.min_angle_deg == pytest.approx(math.degrees(math.acos(max_cos)), abs=1e-9)
    np.testing.assert_allclose(np.linalg.norm(res.W, axis=1), 1.0, atol=1e-14)
    assert res.rho_one_vs_rest <= res.rho_one_vs_one
    _assert_kkt(res)
    # every active pair sits at the minimum angle
    cos = np.einsum("kd,kd->k", res.W[res.kkt.active[:, 0]], res.W[res.kkt.active[:, 1]])
    np.testing.assert_allclose(cos, res.max_cos, atol=1e-9)


@pytest.mark.parametrize("K", [5, 7, 8])
def test_d2_codes_are_regular_polygons(K):
    sc = softmax_code_search(2, K, restarts=4, hops=0)
    tm = tammes_search(2, K, restarts=4, hops=0)
    assert sc.value == pytest.approx(1 - math.cos(2 * math.pi / K), abs=1e-12)
    assert tm.value == pytest.approx(2 * math.sin(math.pi / K), abs=1e-12)
    for res in (sc, tm):
        ang = np.sort(np.mod(np.arctan2(res.W[:, 1], res.W[:, 0]), 2 * np.pi))
        np.testing.assert_allclose(np.diff(np.append(ang, ang[0] + 2 * np.pi)), 2 * np.pi / K, atol=1e-9)
        assert res.rattlers.size == 0  # Thm 3.6
        _assert_kkt(res)


@pytest.mark.parametrize(("d", "K"), [(3, 4), (5, 6), (3, 3)])
def test_small_K_softmax_code_is_the_simplex_etf(d, K):
    res = softmax_code_search(d, K, restarts=4, hops=0, seed=1)
    assert res.value == pytest.approx(K / (K - 1), abs=1e-12)
    G = res.W @ res.W.T
    np.testing.assert_allclose(G[~np.eye(K, dtype=bool)], -1 / (K - 1), atol=1e-9)
    np.testing.assert_allclose(optimal_features(res.W), res.W, atol=1e-9)  # GNC3 (Thm 3.8)
    _assert_kkt(res)


@pytest.mark.parametrize(("d", "K"), [(3, 6), (4, 7), (4, 8)])
def test_cross_polytope_regime_has_margin_one(d, K):
    res = softmax_code_search(d, K, restarts=4, hops=0)
    assert res.value == pytest.approx(1.0, abs=1e-12)
    assert res.min_angle_deg == pytest.approx(90.0, abs=1e-6)
    _assert_kkt(res)


@pytest.mark.parametrize(("d", "K", "rho"), [(3, 9, 2 / 3), (4, 10, 5 / 6), (3, 12, 1 - 1 / math.sqrt(5))])
def test_softmax_code_reaches_closed_form_values_exactly(d, K, rho):
    """The previous smoothed search stopped 1e-6 to 4e-5 short of these values."""
    res = softmax_code_search(d, K)
    assert res.value == pytest.approx(rho, abs=1e-12)
    assert res.max_gap < 1e-12 and res.hardmax == pytest.approx(-res.value, abs=1e-12)
    _assert_kkt(res)


def test_softmax_code_d3_k13_beats_the_previous_search():
    """The previous tau-continuation search returned 0.44777 (0.44911 with 64 restarts); the polished code
    is 1.8% higher, a KKT point, and its minimum angle is the Tammes optimum 57.1367 deg [Musin & Tarasov 2012]."""
    res = softmax_code_search(3, 13)
    assert res.value == pytest.approx(0.457363513, abs=1e-9)
    assert res.value > 1.018 * 0.44911
    assert res.min_angle_deg == pytest.approx(TAMMES_S2[13], abs=1e-4)
    assert res.max_gap < 1e-12 and res.within_bounds is True
    _assert_kkt(res)
    # the multipliers live on the active margins: every active (k, j) is a support pair of class k's hull QP
    ovr = one_vs_rest(res.W)
    np.testing.assert_allclose(ovr.distances[res.kkt.active[:, 0]], res.value, atol=1e-9)
    assert res.certifies == CERTIFIES and "Not certified: global optimality" in res.certifies


def test_code_kkt_separates_stationary_from_arbitrary_codes():
    ico = icosahedron()
    for problem in ("tammes", "softmax"):
        assert code_kkt(ico, problem).residual < 1e-12
        cert = code_kkt(random_oblique(9, 3, 0), problem)
        assert not cert.ok and cert.residual > 0.1
    # a Tammes active set with one pair: its two gradients cannot cancel, residual = the tangent gradient norm
    cert = code_kkt(random_oblique(9, 3, 0), "tammes")
    assert cert.active.shape == (1, 2) and cert.multipliers.tolist() == [1.0]
    with pytest.raises(ValueError, match="problem"):
        code_kkt(ico, "hardmax")


def test_large_problems_skip_the_polish_and_say_so():
    """(20, 100) exceeds the polish size; the smoothed search alone beats the earlier reference value 0.696 (a weak
    optimum)."""
    res = softmax_code_search(20, 100, restarts=1)
    assert res.kkt is None and res.info["polished"] is False
    assert "Not certified: local or global optimality" in res.certifies
    assert res.value > 0.84 and res.min_angle_deg > 81.0
    # the reported margin is the code's one-vs-rest margin, recomputed from its rows by the hull QP, and the reported
    # angle the smallest pairwise angle of the rows
    assert res.value == pytest.approx(one_vs_rest(res.W).rho, abs=1e-10)
    G = res.W @ res.W.T
    assert res.min_angle_deg == pytest.approx(math.degrees(math.acos(G[~np.eye(100, dtype=bool)].max())), abs=1e-9)
    # near-ties at the optimum leave certificate gaps up to ~sqrt(eps) (2.8e-8 seen with OpenBLAS 0.3.31; see
    # dist_to_hull); the distances themselves are exact to roundoff, as the hardmax identity checks to 1e-10
    assert res.max_gap < 1e-7 and res.hardmax == pytest.approx(-res.rho_one_vs_rest, abs=1e-10)
    assert res.within_bounds is True


def test_search_is_seeded_and_validates_arguments():
    W1 = softmax_code(3, 5, seed=4, restarts=2, hops=1)
    W2 = softmax_code(3, 5, seed=4, restarts=2, hops=1)
    np.testing.assert_array_equal(W1, W2)
    np.testing.assert_allclose(np.linalg.norm(W1, axis=1), 1.0, atol=1e-15)
    with pytest.raises(ValueError, match="restarts"):
        softmax_code(3, 5, restarts=0)
    with pytest.raises(ValueError, match="hops"):
        tammes_search(3, 5, hops=-1)
    with pytest.raises(ValueError, match="K >= 2"):
        tammes_search(3, 1)


def test_oblique_tangent_and_retract_against_their_definitions():
    """tangent: row-wise (I - x x^T) g; retract: (x + t v) / ||x + t v|| row by row, a retraction (R(X, 0) = X and
    d/dt R(X, t V) at t = 0 equals V for tangent V, checked by a central difference)."""
    rng = np.random.default_rng(5)
    K, d = 4, 3
    X = random_oblique(K, d, rng)
    np.testing.assert_allclose(np.linalg.norm(X, axis=1), 1.0, rtol=1e-15)
    G = rng.normal(size=(K, d))
    T = tangent(X, G)
    for k in range(K):
        np.testing.assert_allclose(T[k], (np.eye(d) - np.outer(X[k], X[k])) @ G[k], rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(np.sum(T * X, axis=1), 0.0, atol=1e-15)  # tangent to each sphere
    np.testing.assert_allclose(tangent(X, T), T, atol=1e-15)  # a projection
    t = 0.7
    R = retract(X, T, step=t)
    for k in range(K):
        v = X[k] + t * T[k]
        np.testing.assert_allclose(R[k], v / np.sqrt(v @ v), rtol=1e-14)
    np.testing.assert_allclose(retract(X, T, step=0.0), X, rtol=1e-15)
    eps = 1e-5
    deriv = (retract(X, T, step=eps) - retract(X, T, step=-eps)) / (2 * eps)
    np.testing.assert_allclose(deriv, T, atol=1e-9)  # second-order term cancels; error O(eps^2)
    with pytest.raises(ValueError):
        retract(X, -X)  # a zero row has no direction


def test_softmax_pieces_dense_path_matches_the_generic_bilinear_pieces():
    # the dense (K, K) values and gradient of the Softmax Code pieces (what makes gnc-bounds-vs-d at K = 1000 fast)
    # against a brute-force loop and against the generic bincount path of the base class, on a batch of 2
    from nclab.geometry import codes as codes_mod

    K, d = 7, 3
    gen = np.random.default_rng(4)
    X = gen.normal(size=(2, 2 * K, d))
    P = gen.random((2, K * (K - 1)))
    pieces = codes_mod._softmax_pieces(K)
    brute = np.array([[X[b, k] @ X[b, K + k] - X[b, j] @ X[b, K + k] for k in range(K) for j in range(K) if j != k]
                      for b in range(2)])  # fmt: skip
    np.testing.assert_allclose(pieces.values(X), brute, rtol=0, atol=1e-13)
    generic = codes_mod._Pieces.grad(pieces, X, P)
    np.testing.assert_allclose(pieces.grad(X, P), generic, rtol=0, atol=1e-12)
    # and the gradient is that of sum_c P_c f_c: a central difference on one coordinate
    e = np.zeros_like(X)
    e[1, K + 2, 1] = 1e-6
    fd = (np.sum(P[1] * pieces.values(X + e)[1]) - np.sum(P[1] * pieces.values(X - e)[1])) / 2e-6
    assert pieces.grad(X, P)[1, K + 2, 1] == pytest.approx(fd, rel=1e-7)
