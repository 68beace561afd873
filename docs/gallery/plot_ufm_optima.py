r"""
UFM optima: numerical minimum against the closed form
=====================================================

The unconstrained-features model (UFM) treats the last-layer features ``H (K n, d)`` as free variables next to the
classifier ``W (K, d)`` and bias ``b``, and minimises the regularised MSE ([Tirer & Bruna 2022, eq. (14)], free
bias)

.. math::

   \frac{1}{2Kn} \lVert H W^\top + \mathbf{1} b^\top - Y \rVert_F^2
   + \frac{\lambda_W}{2} \lVert W \rVert_F^2 + \frac{\lambda_H}{2} \lVert H \rVert_F^2 .

Its global minimisers are known in closed form: below the threshold :math:`c = K \sqrt{n \lambda_H \lambda_W} < 1`
the class means and the classifier rows form a simplex equiangular tight frame (collapse); above it the minimiser is
zero. :func:`nclab.ufm.solve` finds the minimum numerically, and
``res.theory`` carries the closed form of :func:`nclab.ufm.closed_forms.optimum` for comparison.
"""

# %%
# Sweep the regularisation across the threshold
# ----------------------------------------------
import matplotlib.pyplot as plt
import numpy as np

from nclab.ufm import collapse_reports, solve

K, n, d = 4, 5, 8
lam_W = 5e-3
lams_H = np.geomspace(1e-3, 10, 21)
results = [solve("mse-bias", K=K, n=n, d=d, lams={"W": lam_W, "H": lam_H}, seed=0) for lam_H in lams_H]
c = K * np.sqrt(n * lams_H * lam_W)

fig, axes = plt.subplots(1, 2, figsize=(10, 4), layout="constrained")
axes[0].plot(c, [r.theory.loss for r in results], "-", color="0.6", lw=3, label="closed form L*")
axes[0].plot(c, [r.loss for r in results], "o", ms=4, label="numerical (L-BFGS)")
axes[0].set(xscale="log", xlabel="c = K sqrt(n λ_H λ_W)", ylabel="objective at the minimum")
axes[0].axvline(1, color="0.5", ls=":", lw=1)
axes[0].legend()
axes[1].plot(c, [np.linalg.norm(r.params["W"]) for r in results], "o-", ms=4, label="‖W‖_F")
axes[1].plot(c, [np.linalg.norm(r.params["H"]) / np.sqrt(n) for r in results], "s-", ms=4, label="‖H‖_F / √n")
axes[1].set(xscale="log", xlabel="c = K sqrt(n λ_H λ_W)", title="the minimiser vanishes at c = 1")
axes[1].axvline(1, color="0.5", ls=":", lw=1)
axes[1].legend()
plt.show()

gaps = [r.gap for r in results]
print(f"largest gap between the numerical and the closed-form minimum: {max(abs(g) for g in gaps):.2e}")

# %%
# The geometry of a collapsed minimiser
# -------------------------------------
# Below the threshold the Gram matrix of the classifier rows (and of the centred class means) is that of a simplex
# ETF: equal norms, and cosine ``-1/(K-1)`` between every pair. The collapse metrics of the solution confirm it.
below = int(np.searchsorted(c, 0.5))  # a point below the threshold
res = results[below]
W = res.params["W"]
H = res.params["H"]
means = H.reshape(K, n, d).mean(axis=1)
centred = means - means.mean(axis=0)


def cosines(X: np.ndarray) -> np.ndarray:
    U = X / np.linalg.norm(X, axis=1, keepdims=True)
    return U @ U.T


fig, axes = plt.subplots(1, 2, figsize=(8, 3.6), layout="constrained")
for ax, X, title in ((axes[0], W, "classifier rows W"), (axes[1], centred, "centred class means")):
    im = ax.imshow(cosines(X), vmin=-1, vmax=1, cmap="RdBu_r")
    ax.set(title=f"cosines of the {title}", xticks=range(K), yticks=range(K))
    for i in range(K):
        for j in range(K):
            ax.text(j, i, f"{cosines(X)[i, j]:.2f}", ha="center", va="center", color="w" if i == j else "k")
fig.colorbar(im, ax=axes, shrink=0.8)
plt.show()

report = collapse_reports(res.spec, res.params)["H"]
print(
    f"c = {c[below]:.3f}: NC1 {report['nc1']:.2e}, NC2 etf_gram_error {report['etf_gram_error']:.2e}, "
    f"NC3 self_duality {report['self_duality']:.2e}"
)
