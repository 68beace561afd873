"""Class-to-code assignments up to the symmetries of the code ([Jiang et al. 2024, Sec. 4] and App. B.5).

When ``K > d + 1`` a Softmax Code is not equiangular, so which class gets which code vector matters. An
assignment is a permutation ``a`` with ``a[c] = `` the code row given to class ``c``. Two assignments are
equivalent when an isometry of the code maps one onto the other; isometries of a code that spans its space
are exactly the permutations ``g`` of its rows that preserve the Gram matrix (``G[g][:, g] = G``), which act
on assignments by ``a -> g o a``. The action is free, so there are ``K! / |Aut|`` classes: 3 for the square
(``4!/8``), 60 for the regular hexagon (``6!/12``). [Jiang et al. 2024] counts the hexagon's "15 assignments" by the
coarser invariant of which classes sit antipodal (``5 * 3 * 1`` pairings): ``up_to="antipodal"``.
"""

from __future__ import annotations

import itertools
from typing import Any, Literal

import numpy as np

from nclab.validation import check_choice, unit_rows

__all__ = ["antipodal_pairs", "code_symmetries", "enumerate_assignments"]

MAX_K = 9  # K! assignments are enumerated


def _gram(W: Any) -> np.ndarray:
    Wa = np.asarray(W, dtype=np.float64)
    if Wa.ndim != 2 or Wa.shape[0] < 2:
        raise ValueError(f"W must be a (K, d) code with K >= 2, got shape {Wa.shape}")
    return Wa @ Wa.T


def code_symmetries(W: Any, *, tol: float = 1e-8) -> np.ndarray:
    """``(|Aut|, K)``: every permutation ``g`` of the rows of ``W (K, d)`` with ``G[g][:, g] = G`` (within
    ``tol``), found by backtracking; for a code spanning ``R^d`` these are its isometries. Row 0 is the
    identity.

    Parameters
    ----------
    W : array-like of shape (K, d)
        The code, one row per class, ``K >= 2``.
    tol : float, default=1e-8
        Absolute tolerance on Gram entries.

    Returns
    -------
    ndarray of shape (n_symmetries, K)
        Row permutations preserving the Gram matrix, the identity first.

    Examples
    --------
    The square has the 8 symmetries of the dihedral group ``D_4``:

    >>> from nclab.geometry import code_symmetries, regular_polygon
    >>> S = code_symmetries(regular_polygon(4))
    >>> print(S.shape, S[0].tolist(), S[1].tolist())
    (8, 4) [0, 1, 2, 3] [0, 3, 2, 1]
    """
    G = _gram(W)
    K = G.shape[0]
    out: list[list[int]] = []

    def extend(perm: list[int], used: set[int]) -> None:
        i = len(perm)
        if i == K:
            out.append(list(perm))
            return
        for j in range(K):
            if j in used or abs(G[j, j] - G[i, i]) > tol:
                continue
            if all(abs(G[perm[a], j] - G[a, i]) <= tol for a in range(i)):
                perm.append(j)
                used.add(j)
                extend(perm, used)
                perm.pop()
                used.discard(j)

    extend([], set())
    return np.array(out, dtype=np.intp)


def antipodal_pairs(W: Any, assignment: Any, *, tol: float = 1e-8) -> list[tuple[int, int]]:
    """Pairs of classes ``(c, c')``, ``c < c'``, whose code vectors are antipodal (cosine ``-1`` within
    ``tol``) under ``assignment`` (``assignment[c]`` = code row of class ``c``).

    Parameters
    ----------
    W : array-like of shape (K, d)
        The code, one row per class.
    assignment : array-like of int, shape (K,)
        ``assignment[c]`` is the code row of class ``c``.
    tol : float, default=1e-8
        Tolerance on the cosine ``-1``.

    Returns
    -------
    list of tuple of int
        The antipodal class pairs ``(c, c')``, ``c < c'``, in lexicographic order; empty when none is (a zero row
        is antipodal to nothing).

    Examples
    --------
    >>> from nclab.geometry import antipodal_pairs, regular_polygon
    >>> W = regular_polygon(4)
    >>> antipodal_pairs(W, [0, 1, 2, 3]), antipodal_pairs(W, [0, 2, 1, 3])
    ([(0, 2), (1, 3)], [(0, 1), (2, 3)])
    """
    # a zero code row has no direction: its cosines are nan, so it is antipodal to nothing
    U = unit_rows(W, zero="nan", name="W")
    a = np.asarray(assignment)
    C = U[a] @ U[a].T
    K = len(a)
    return [(i, j) for i in range(K) for j in range(i + 1, K) if C[i, j] <= -1 + tol]


def enumerate_assignments(
    W: Any, *, up_to: Literal["symmetry", "antipodal"] = "symmetry", tol: float = 1e-8
) -> list[np.ndarray]:
    """One representative assignment per equivalence class, in lexicographic order of the canonical forms.

    ``up_to="symmetry"``: classes of ``a -> g o a`` for ``g`` in :func:`code_symmetries` (``K!/|Aut|`` of
    them: 3 for the square, 60 for the hexagon); the representative is the lexicographically smallest member.
    ``up_to="antipodal"``: assignments with the same set of antipodal class pairs (:func:`antipodal_pairs`)
    are merged (15 for the hexagon, 3 for the square). ``K <= 9``.

    Parameters
    ----------
    W : array-like of shape (K, d)
        The code, one row per class, ``2 <= K <= 9``.
    up_to : {"symmetry", "antipodal"}, default="symmetry"
        The equivalence.
    tol : float, default=1e-8
        Tolerance of the Gram and cosine comparisons.

    Returns
    -------
    list of ndarray of shape (K,)
        One representative assignment per class.

    Examples
    --------
    >>> from nclab.geometry import enumerate_assignments, regular_polygon
    >>> [a.tolist() for a in enumerate_assignments(regular_polygon(4))]
    [[0, 1, 2, 3], [0, 1, 3, 2], [0, 2, 1, 3]]
    >>> hexagon = regular_polygon(6)
    >>> len(enumerate_assignments(hexagon)), len(enumerate_assignments(hexagon, up_to="antipodal"))
    (60, 15)
    """
    G = _gram(W)
    K = G.shape[0]
    if K > MAX_K:
        raise ValueError(f"enumerating the {K}! assignments is limited to K <= {MAX_K}, got K={K}")
    check_choice(up_to, ("symmetry", "antipodal"), name="up_to")
    syms = code_symmetries(W, tol=tol)
    seen: set[tuple[int, ...]] = set()
    reps: list[np.ndarray] = []
    keys: set[Any] = set()
    for p in itertools.permutations(range(K)):
        a = np.array(p, dtype=np.intp)
        canon = min(tuple(row) for row in syms[:, a])
        if canon in seen:
            continue
        seen.add(canon)
        if up_to == "antipodal":
            key = tuple(antipodal_pairs(W, canon, tol=tol))
            if key in keys:
                continue
            keys.add(key)
        reps.append(np.array(canon, dtype=np.intp))
    return reps
