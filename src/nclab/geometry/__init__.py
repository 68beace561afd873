"""Reference geometries and the margins of [Jiang et al. 2024]: frames, hull distances, Thm 3.9 bounds, Softmax and
Tammes codes (search, exact polish, KKT certificate), the best known Softmax Code margins, assignments.

Rows are classes: a code or classifier is ``(K, d)``.
"""

from nclab.geometry.assignment import antipodal_pairs, code_symmetries, enumerate_assignments
from nclab.geometry.best_known import BestKnownMargin, best_known_margin
from nclab.geometry.bounds import CodeBounds, softmax_code_bounds
from nclab.geometry.codes import (
    CodeSearch,
    KKTCertificate,
    softmax_code,
    softmax_code_search,
    tammes,
    tammes_search,
)
from nclab.geometry.frames import (
    cross_polytope_subset,
    icosahedron,
    octahedron,
    orthogonal_frame,
    random_orthogonal,
    regular_polygon,
    simplex_etf,
)
from nclab.geometry.hull import (
    HullDistance,
    OneVsOne,
    OneVsRest,
    dist_to_hull,
    hardmax_value,
    one_vs_one,
    one_vs_rest,
    one_vs_rest_distances,
    optimal_features,
    rho_one_vs_one,
    rho_one_vs_rest,
)
from nclab.geometry.oblique import random_oblique, retract, tangent

__all__ = [
    "BestKnownMargin",
    "CodeBounds",
    "CodeSearch",
    "HullDistance",
    "KKTCertificate",
    "OneVsOne",
    "OneVsRest",
    "antipodal_pairs",
    "best_known_margin",
    "code_symmetries",
    "cross_polytope_subset",
    "dist_to_hull",
    "enumerate_assignments",
    "hardmax_value",
    "icosahedron",
    "octahedron",
    "one_vs_one",
    "one_vs_rest",
    "one_vs_rest_distances",
    "optimal_features",
    "orthogonal_frame",
    "random_oblique",
    "random_orthogonal",
    "regular_polygon",
    "retract",
    "rho_one_vs_one",
    "rho_one_vs_rest",
    "simplex_etf",
    "softmax_code",
    "softmax_code_bounds",
    "softmax_code_search",
    "tammes",
    "tammes_search",
    "tangent",
]
