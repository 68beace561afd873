"""Reference configurations [Jiang et al. 2024, Thm. 3.3]: Gram matrices and exact one-vs-rest margins."""

import math

import numpy as np
import pytest

from nclab.geometry import (
    cross_polytope_subset,
    icosahedron,
    octahedron,
    one_vs_one,
    orthogonal_frame,
    random_orthogonal,
    regular_polygon,
    rho_one_vs_rest,
    simplex_etf,
)


@pytest.mark.parametrize(("K", "d"), [(2, 1), (3, 2), (4, 3), (5, 4), (11, 10), (4, 7), (6, 6)])
def test_simplex_etf_gram_and_margin_including_K_eq_d_plus_1(K, d):
    W = simplex_etf(K, d, seed=3)
    assert W.shape == (K, d)
    np.testing.assert_allclose(W @ W.T, K / (K - 1) * (np.eye(K) - 1.0 / K), atol=1e-12)
    np.testing.assert_allclose(W.sum(axis=0), 0.0, atol=1e-12)
    assert rho_one_vs_rest(W) == pytest.approx(K / (K - 1), abs=1e-12)


def test_simplex_etf_canonical_position_is_a_closed_form():
    """Without a rotation the frame is the Helmert contrasts scaled to unit rows: the same numbers on every
    platform (an SVD basis of the (K-1)-fold singular value would depend on the LAPACK build)."""
    s3 = math.sqrt(3.0) / 2
    np.testing.assert_allclose(simplex_etf(3), [[s3, 0.5], [-s3, 0.5], [0.0, -1.0]], rtol=0, atol=1e-15)
    np.testing.assert_array_equal(simplex_etf(2, 3), [[1.0, 0.0, 0.0], [-1.0, 0.0, 0.0]])
    W = simplex_etf(6)
    assert np.all(np.tril(W, -2) == 0) and np.all(np.diagonal(W, -1) < 0)  # row i > 0 starts at coordinate i - 1
    np.testing.assert_allclose(W @ W.T, 6 / 5 * (np.eye(6) - 1.0 / 6), atol=1e-15)


def test_simplex_etf_rejects_too_small_d():
    with pytest.raises(ValueError, match="d >= 4"):
        simplex_etf(5, 3)


def test_existing_seed_behaviour_kept_and_rng_equivalent():
    # seed= rotates by the Haar matrix of default_rng(seed); rng= with the same generator state gives the same
    np.testing.assert_allclose(simplex_etf(4, 5, seed=7), simplex_etf(4, 5, rng=np.random.default_rng(7)))
    np.testing.assert_allclose(orthogonal_frame(3, 5, seed=1), orthogonal_frame(3, 5, rng=np.random.default_rng(1)))
    with pytest.raises(ValueError, match="either seed= or rng="):
        simplex_etf(4, 5, seed=1, rng=np.random.default_rng(1))


def test_random_orthogonal_is_orthogonal():
    Q = random_orthogonal(6, 0)
    np.testing.assert_allclose(Q @ Q.T, np.eye(6), atol=1e-12)


def test_orthogonal_frame_margin():
    K = 5
    W = orthogonal_frame(K, 8, rng=np.random.default_rng(0))
    np.testing.assert_allclose(W @ W.T, np.eye(K), atol=1e-12)
    assert rho_one_vs_rest(W) == pytest.approx(math.sqrt(K / (K - 1)), abs=1e-12)


@pytest.mark.parametrize("K", [2, 3, 4, 5, 7, 8, 30, 100])
def test_regular_polygon_gram_and_margin(K):
    W = regular_polygon(K, 4, seed=K)
    idx = np.arange(K)
    np.testing.assert_allclose(W @ W.T, np.cos(2 * np.pi * (idx[:, None] - idx[None, :]) / K), atol=1e-12)
    assert rho_one_vs_rest(W) == pytest.approx(1 - math.cos(2 * math.pi / K), rel=1e-9, abs=1e-13)
    assert one_vs_one(W).min_angle_deg == pytest.approx(360 / K, abs=1e-6)


@pytest.mark.parametrize(("K", "d"), [(3, 2), (4, 2), (5, 3), (6, 3), (7, 4), (8, 4), (9, 6)])
def test_cross_polytope_subset_margin_is_one(K, d):
    W = cross_polytope_subset(K, d, seed=0)
    G = W @ W.T
    assert set(np.round(G, 12).ravel()) <= {-1.0, 0.0, 1.0}
    assert rho_one_vs_rest(W) == pytest.approx(1.0, abs=1e-12)
    assert one_vs_one(W).min_angle_deg == pytest.approx(90.0 if K > 2 else 180.0)


def test_cross_polytope_needs_half_dimension():
    assert rho_one_vs_rest(cross_polytope_subset(2)) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="ceil"):
        cross_polytope_subset(7, 3)


def test_octahedron_and_icosahedron():
    assert rho_one_vs_rest(octahedron(seed=2)) == pytest.approx(1.0, abs=1e-12)
    W = icosahedron(rng=np.random.default_rng(5))
    G = W @ W.T
    off = np.sort(np.abs(G[~np.eye(12, dtype=bool)]))
    np.testing.assert_allclose(off[:-12], 1 / math.sqrt(5), atol=1e-12)  # +-1/sqrt5, and 12 antipodes at -1
    np.testing.assert_allclose(off[-12:], 1.0, atol=1e-12)
    assert rho_one_vs_rest(W) == pytest.approx(1 - 1 / math.sqrt(5), abs=1e-12)
    assert one_vs_one(W).min_angle_deg == pytest.approx(math.degrees(math.acos(1 / math.sqrt(5))), abs=1e-9)
