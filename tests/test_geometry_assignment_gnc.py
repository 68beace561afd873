"""Assignment enumeration ([Jiang et al. 2024, Sec. 4] / App. B.5) and GNC metrics on collapsed spherical data."""

import math

import numpy as np
import pytest

from nclab.geometry import icosahedron, regular_polygon, rho_one_vs_rest, simplex_etf
from nclab.geometry.assignment import antipodal_pairs, code_symmetries, enumerate_assignments
from nclab.metrics import gnc1, gnc3, normalize_features
from nclab.stats import ClassStats, NCCAccumulator


def test_square_has_three_assignments_fixed_by_the_antipode_of_class_0():
    W = regular_polygon(4, seed=3)
    assert len(code_symmetries(W)) == 8
    reps = enumerate_assignments(W)
    assert len(reps) == 3 == math.factorial(4) // 8
    partners = sorted(next(j for i, j in antipodal_pairs(W, a) if i == 0) for a in reps)
    assert partners == [1, 2, 3]  # one class per choice of cat's antipode


def test_hexagon_sixty_up_to_symmetry_fifteen_antipodal_pairings():
    W = regular_polygon(6)
    assert len(code_symmetries(W)) == 12
    reps = enumerate_assignments(W)
    assert len(reps) == 60
    pairings = {tuple(antipodal_pairs(W, a)) for a in reps}
    assert len(pairings) == 15 == 5 * 3 * 1
    assert len(enumerate_assignments(W, up_to="antipodal")) == 15
    # every representative is a permutation and no two are related by a symmetry
    syms = code_symmetries(W)
    canon = {min(tuple(r) for r in syms[:, a]) for a in reps}
    assert len(canon) == 60 and all(sorted(a) == list(range(6)) for a in reps)


def test_symmetry_groups_of_reference_codes():
    assert len(code_symmetries(icosahedron(seed=0))) == 120
    assert len(code_symmetries(simplex_etf(4, 3, seed=1))) == 24  # the full symmetric group
    assert len(enumerate_assignments(simplex_etf(5, 4))) == 1
    with pytest.raises(ValueError, match="K <= 9"):
        enumerate_assignments(regular_polygon(10))


@pytest.mark.parametrize("W", [regular_polygon(7, seed=0), icosahedron(seed=1)], ids=["heptagon", "icosa"])
def test_gnc_metrics_on_collapsed_spherical_data(W):
    K = W.shape[0]
    n = 5
    y = np.repeat(np.arange(K), n)
    H = W[y]  # h_ki = w_k: GNC1 and GNC3 collapse, NCC exact
    stats = ClassStats.from_arrays(normalize_features(H), y)
    assert gnc1(stats) == pytest.approx(0.0, abs=1e-20)
    assert gnc3(stats, W=W) == pytest.approx(0.0, abs=1e-12)
    ncc = NCCAccumulator(stats, W).update(H, y).compute()
    assert ncc["ncc_accuracy"] == 1.0 and ncc["classifier_accuracy"] == 1.0
    assert rho_one_vs_rest(W) > 0  # GNC2 of the classifier: its margin
    # noise of size sigma raises GNC1 roughly as sigma^2 ([Jiang et al. 2024], item 8); the means span R^d here,
    # otherwise the pseudo-inverse of Sigma_B inverts noise-level directions and GNC1 is O(1) for any sigma
    rng = np.random.default_rng(0)
    vals = []
    for sigma in (0.01, 0.02):
        Hs = normalize_features(H + sigma * rng.normal(size=H.shape))
        vals.append(gnc1(ClassStats.from_arrays(Hs, y)))
    assert 2.5 < vals[1] / vals[0] < 6.0
