"""
The central path of the MSE loss
================================

[Han et al. 2022] follow the features of a network trained with the MSE loss along the *central path*: the
classifier is the least-squares one for the current features, and the features are renormalised so that their
within-class covariance is the identity. On that path the whole state is summarised by the ``K - 1`` nonzero
singular values ``omega`` of the signal-to-noise matrix ``SNR = Mbar Sigma_W^(-1/2)``, and NC1 is
``sum 1 / omega^2`` (on renormalised features, :func:`nclab.metrics.nc1` with its default ``/K``).

:func:`nclab.theory.simulate` integrates the renormalised gradient flow of unconstrained features and returns
``omega`` at log-spaced times next to two closed forms: the *oblique* one (the paper's Prop. 4 algorithm,
``omega`` grows like ``sqrt(2t / (K n))``) and the *orthogonal* one (the flow of its Prop. 2, ``(4t / n)^(1/4)``).
Which one the simulation follows depends on the projection onto the manifold (``projection=``); see
:doc:`/theory` for the derivation and the erratum.
"""

# %%
import matplotlib.pyplot as plt
import numpy as np

from nclab.theory import FlowOptions, simulate

K, n, d = 4, 5, 6
flow = FlowOptions(num_checkpoints=25)
runs = {p: simulate(K, n, d, t_end=1e4, projection=p, options=flow, seed=0) for p in ("oblique", "orthogonal")}

fig, axes = plt.subplots(1, 3, figsize=(13, 4), layout="constrained")
for ax, (projection, run) in zip(axes[:2], runs.items(), strict=True):
    t = run.t[1:]
    for i in range(K - 1):
        ax.plot(t, run.omega[1:, i], "o", ms=3, color=f"C{i}", label="simulated ω" if i == 0 else None)
        ax.plot(t, run.omega_oblique[1:, i], "-", lw=1, color=f"C{i}", label="oblique closed form" if i == 0 else None)
        ax.plot(
            t,
            run.omega_orthogonal[1:, i],
            ":",
            lw=1.5,
            color=f"C{i}",
            label="orthogonal closed form" if i == 0 else None,
        )
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="time t",
        ylabel="singular values ω of the SNR matrix",
        title=f"projection = {projection!r}",
    )
    ax.legend(fontsize=8)
for projection, run in runs.items():
    axes[2].plot(run.t[1:], run.metrics["nc1"][1:], "o-", ms=3, label=projection)
axes[2].set(xscale="log", yscale="log", xlabel="time t", ylabel="NC1", title="NC1 = Σ 1/ω² along the path")
axes[2].legend()
plt.show()

# %%
# Each simulation follows its own closed form, and NC1 decays like a power of ``t``: the features collapse.
for projection, run in runs.items():
    own = run.omega_oblique if projection == "oblique" else run.omega_orthogonal
    rel = np.max(np.abs(run.omega - own) / own)
    print(
        f"{projection:>10}: largest relative gap to its closed form {rel:.1e}; "
        f"NC1 {run.metrics['nc1'][0]:.3g} -> {run.metrics['nc1'][-1]:.3g}; "
        f"sum 1/omega^2 at the end {np.sum(1 / run.omega[-1] ** 2):.3g}"
    )
