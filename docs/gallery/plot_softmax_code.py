"""
Softmax Codes: more classes than dimensions
===========================================

When the number of classes ``K`` exceeds the feature dimension plus one, no simplex ETF exists, and neural collapse
becomes *generalized* collapse [Jiang et al. 2024]: the classifier rows tend to a Softmax Code, the unit vectors
that maximise the smallest distance from each row to the convex hull of the others (``rho_one_vs_rest``). A
Tammes code instead maximises the smallest distance between two rows. For ``K = 12`` points on the sphere
``S^2`` both are the icosahedron.

:func:`nclab.geometry.softmax_code_search` finds the code and certifies it with the KKT conditions of the max-min
problem; :func:`nclab.geometry.softmax_code_bounds` gives the bounds of [Jiang et al. 2024, Thm. 3.9].
"""

# %%
import matplotlib.pyplot as plt
import numpy as np

from nclab.geometry import (
    icosahedron,
    rho_one_vs_rest,
    simplex_etf,
    softmax_code_bounds,
    softmax_code_search,
    tammes_search,
)

d, K = 3, 12
code = softmax_code_search(d, K, restarts=8, hops=2, seed=0)
W = code.W
print(f"rho_one_vs_rest of the code found: {code.value:.6f} (KKT certificate ok: {code.kkt.ok})")
print(f"rho_one_vs_rest of the icosahedron: {rho_one_vs_rest(icosahedron()):.6f}")
bounds = softmax_code_bounds(d, K)
print(f"bounds of Thm. 3.9: [{bounds.lower:.4f}, {bounds.upper:.4f}]")

# %%
# The code on the sphere
# ----------------------
# Each row of ``W`` is a class; the edges join rows at the smallest angle (the code's contact graph). Every row
# has five nearest neighbours at the same angle: the icosahedron.
cos = W @ W.T
np.fill_diagonal(cos, -1)
closest = cos.max()
fig = plt.figure(figsize=(5, 5), layout="constrained")
ax = fig.add_subplot(projection="3d")
u, v = np.mgrid[0 : 2 * np.pi : 40j, 0 : np.pi : 20j]
ax.plot_wireframe(np.cos(u) * np.sin(v), np.sin(u) * np.sin(v), np.cos(v), color="0.85", lw=0.5)
for i in range(K):
    for j in range(i + 1, K):
        if cos[i, j] > closest - 1e-6:
            ax.plot(*np.stack([W[i], W[j]]).T, color="C0", lw=1)
ax.scatter(*W.T, color="C3", s=40, depthshade=False)
ax.set_box_aspect((1, 1, 1))
ax.set_axis_off()
ax.set_title(f"Softmax Code, K = {K}, d = {d}")
plt.show()

# %%
# How the best margin falls with K
# --------------------------------
# For ``K <= d + 1`` the simplex ETF is optimal; past it the Softmax Code's ``rho`` and the Tammes code's
# smallest angle decrease with every added class, between the theorem's bounds where they are stated
# (``K >= sqrt(2 pi sqrt(e) d)``).
ks = np.arange(3, 15)
rho = [
    rho_one_vs_rest(simplex_etf(k, d) if k <= d + 1 else softmax_code_search(d, k, restarts=4, hops=1).W) for k in ks
]
angle = [tammes_search(d, k, restarts=4, hops=1).min_angle_deg for k in ks]
fig, ax2 = plt.subplots(figsize=(6.5, 4), layout="constrained")
ax2.plot(ks, rho, "o-", label="Softmax Code: ρ one-vs-rest")
all_bounds = [softmax_code_bounds(d, k) for k in ks]
valid = [b.valid for b in all_bounds]
ax2.fill_between(
    ks[valid],
    [b.lower for b, ok in zip(all_bounds, valid, strict=True) if ok],
    [b.upper for b, ok in zip(all_bounds, valid, strict=True) if ok],
    color="C0",
    alpha=0.15,
    label="Thm. 3.9 bounds",
)
ax2.set(xlabel="K (classes) on S², d = 3", ylabel="ρ")
twin = ax2.twinx()
twin.plot(ks, angle, "s--", color="C1", label="Tammes: smallest angle (deg)")
twin.set_ylabel("degrees")
ax2.legend(loc="upper right", fontsize=8)
twin.legend(loc="center right", fontsize=8)
plt.show()
