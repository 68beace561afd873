"""What the experiments registered elsewhere run at each scale, as :class:`~nclab.experiments.protocols.Protocol`
values (``nclab experiment list``, ``run --dry-run``).

Training experiments read their protocols off the configs they train (``fashion-mnist-cnn``, ``digits-mlp-demo``,
``vci-transfer``); solver experiments (UFM, ODE, code searches) state their sizes, read from the experiment
experiment function, which is named beside each (the experiments whose sizes sit in per-scale tables of their own
module declare their protocols there: ``central-path-flow``, ``mse-decomposition-ufm``, ``geodesic-digits``,
``gnc-tau-maxcos``).
"""

from __future__ import annotations

from typing import Any

from nclab.experiments.catalog import declare_protocols
from nclab.experiments.protocols import Protocol

__all__: list[str] = []


def _by_scale(scale: str, tiny: Any, other: Any) -> Any:
    return tiny if scale == "tiny" else other


# ---------------------------------------------------------------------------------------------------- training
@declare_protocols("fashion-mnist-cnn")
def _fashion(scale: str) -> list[Protocol]:
    from nclab.experiments.reproductions import HAN2022_LR_GRID
    from nclab.experiments.training import fashion_runs

    sweep = HAN2022_LR_GRID if scale == "paper" else ()
    return [Protocol.from_config(c, label, lr_sweep=sweep) for label, c in fashion_runs(scale, 0).items()]


@declare_protocols("digits-mlp-demo", scales=("tiny", "cpu"))
def _demo(scale: str) -> list[Protocol]:
    from nclab.experiments.training import DEMO_LOSS_OVERRIDES, demo_config
    from nclab.train.config import resolve_config

    over = ["train.epochs=4"] if scale == "tiny" else []  # the experiment's tiny run: run_demo(epochs=4)
    return [Protocol.from_config(resolve_config(demo_config(loss), over), loss) for loss in DEMO_LOSS_OVERRIDES]


@declare_protocols("vci-transfer")
def _vci(scale: str) -> list[Protocol]:
    if scale == "paper":
        from nclab.experiments.reproductions import vci_transfer_protocols

        return vci_transfer_protocols()
    from nclab.experiments.transfer import vci_transfer_study
    from nclab.transfer.study import StudySpec

    spec = StudySpec.from_dict(vci_transfer_study(scale))
    probes = {"downstream": spec.downstream, **spec.probe}
    return [
        Protocol.from_config(spec.run_config(g, v, spec.seeds[0]), f"{g.name}={v:g}", seeds=spec.seeds, probes=probes)
        for g in spec.groups
        for v in g.values
    ]


# ---------------------------------------------------------------------------------------------------- solvers
@declare_protocols("gnc-d2-codes")
def _d2(scale: str) -> list[Protocol]:
    # spherical_codes.d2_codes
    Ks = _by_scale(scale, [4, 6], [4, 6, 30])
    taus = _by_scale(scale, [1.0, 0.2, 0.02], [1.0, 0.5, 0.2, 0.1, 0.05, 0.02])
    steps = {"tiny": 300, "cpu": 800, "paper": 2000}[scale]
    return [Protocol.solver("CE-UFM (sphere) vs WD-UFM at d = 2", d=2, K=Ks, n=1, taus=taus, steps=steps, restarts=2,
                            lambda_wd=5e-3)]  # fmt: skip


@declare_protocols("gnc-assignment")
def _assignment(scale: str) -> list[Protocol]:
    # spherical_codes.assignment: an exact enumeration, the same at every scale
    return [Protocol.solver("assignments up to symmetry (enumeration)", d=2, K=[4, 6])]


@declare_protocols("ufm-figures")
def _ufm_figures(scale: str) -> list[Protocol]:
    # unconstrained.figures_001
    K, d, n = _by_scale(scale, (4, 12, 8), (4, 20, 50))
    steps, every = _by_scale(scale, (3000, 500), (100_000, 5000))
    return [Protocol.solver("GD on the UFM models of Figs. 1-4", K=K, d=d, n=n, lam=5e-3, lr=0.1, steps=steps,
                            measure_every=every)]  # fmt: skip


@declare_protocols("ufm-threshold-sweep")
def _threshold(scale: str) -> list[Protocol]:
    # unconstrained.threshold_sweep
    return [Protocol.solver("L-BFGS vs closed form across lambda", K=4, n=3, d=8, points=_by_scale(scale, 6, 25))]


@declare_protocols("ufm-init-scale")
def _init_scale(scale: str) -> list[Protocol]:
    # unconstrained.init_scale_study
    return [Protocol.solver("GD on the 3-factor UFM from five init scales", K=4, n=10, d=20, lam=0.02,
                            steps=_by_scale(scale, 3000, 40_000), init_scales=[0.01, 0.03, 0.1, 0.3, 1.0])]  # fmt: skip


@declare_protocols("ufm-thm51")
def _thm51(scale: str) -> list[Protocol]:
    # unconstrained.thm51_monte_carlo
    ns = _by_scale(scale, [100, 400, 1600], [100, 300, 1000, 3000, 10_000, 20_000])
    return [Protocol.solver("Thm 5.1 Monte Carlo (fixed noisy features)", K=4, d=20, n=ns, lam_W=0.01,
                            n_lam_H=0.02, sigma=0.3, repeats=_by_scale(scale, 3, 10))]  # fmt: skip


@declare_protocols("mufm-tradeoff")
def _mufm(scale: str) -> list[Protocol]:
    # unconstrained.mufm_tradeoff ([Wang et al. 2024, Sec. IV-B])
    K, n, d = _by_scale(scale, (3, 10, 8), (5, 100, 20))
    ratios = _by_scale(scale, [0.1, 1.0, 4.0], [0.1, 0.2, 0.4, 1.0, 2.0, 4.0])
    return [Protocol.solver("exact alternating MUFM / UFM solver", K=K, n=n, d=d, lam_W=0.005, lam_ratios=ratios)]
