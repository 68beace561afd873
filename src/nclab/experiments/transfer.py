"""Which collapse metric predicts transfer? The study of [Xu & Liu 2023, Sec. 6.3, Tables 1-2, Fig. 7] offline.

Pretraining runs vary the CE temperature tau (6 values) and the weight lambda of the within-class cosine
regulariser (5 values, at tau = 1); each run's collapse metrics on its training split are correlated with MLOG
over linear probes of downstream tasks built from the data on the machine (``docs/transfer.md``):

* ``heldout``: the Fashion-MNIST classes not pretrained on (5 sandal, 6 shirt, 7 sneaker, 8 bag, 9 ankle boot);
* ``digits``: the embedded 8x8 digits (10 classes) resized to the pretraining input size;
* ``rot90``: all ten Fashion-MNIST classes rotated by 90 degrees.

The ``tiny`` scale (the test suite's) pretrains on digits 0-4 and probes digits 5-9 and rotated digits.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nclab.experiments.catalog import register
from nclab.experiments.common import check_scale, html_table
from nclab.io.rundir import RunDir

__all__ = ["TRANSFER_SCALES", "vci_transfer_study"]

_TAUS = [0.1, 0.2, 0.4, 0.6, 0.8, 1.0]
_LAMBDAS = [2.5, 3.75, 5.0, 7.5, 10.0]
_PRETRAIN = [0, 1, 2, 3, 4]  # T-shirt/top, trouser, pullover, dress, coat
_HELDOUT = [5, 6, 7, 8, 9]

#: Per scale: pretraining data and model, epochs, seeds, probe grid, downstream sizes.
TRANSFER_SCALES: dict[str, dict[str, Any]] = {
    "tiny": {"epochs": 4, "seeds": [0], "taus": [0.2, 0.5, 1.0], "lambdas": [2.5, 5.0, 10.0], "lams": [1e-4, 1e0, 5]},
    "cpu": {"epochs": 8, "seeds": [0, 1], "per_class": 300, "probe_per_class": 200, "lams": [1e-6, 1e2, 17]},
    "paper": {"epochs": 30, "seeds": [0, 1, 2], "per_class": None, "probe_per_class": None, "lams": [1e-6, 1e6, 97]},
}


def _groups(taus: list[float], lambdas: list[float]) -> list[dict[str, Any]]:
    return [
        {"name": "tau", "axis": "loss.tau", "values": taus},
        {"name": "lambda", "axis": "loss.cosreg_weight", "values": lambdas, "set": {"loss.name": "ce_cosreg"}},
    ]


def vci_transfer_study(scale: str) -> dict[str, Any]:
    """The study mapping (:class:`nclab.transfer.study.StudySpec`) of experiment ``vci-transfer`` at ``scale``."""
    check_scale(scale, tuple(TRANSFER_SCALES))
    s = TRANSFER_SCALES[scale]
    lams = None if s["lams"] is None else {"start": s["lams"][0], "stop": s["lams"][1], "num": s["lams"][2]}
    if scale == "tiny":
        return {
            "name": "vci-transfer-tiny",
            "base": {
                "data": {"name": "digits", "per_class": 60, "test_per_class": 30, "options": {"classes": _PRETRAIN}},
                "model": {"name": "mlp", "options": {"widths": [32, 32], "batchnorm": True}},
                "optim": {"lr": 0.05, "weight_decay": 5e-4},
                "schedule": {"name": "cosine"},
                "train": {"epochs": s["epochs"], "batch_size": 64, "threads": 1},
                "measure": {"epochs": [s["epochs"]], "splits": ["train"], "layers": "penultimate"},
                "report": False,
            },
            "groups": _groups(s["taus"], s["lambdas"]),
            "seeds": s["seeds"],
            "downstream": [
                {"name": "heldout", "dataset": "digits", "classes": _HELDOUT, "per_class": 40, "test_per_class": 20},
                {"name": "rot90", "dataset": "digits", "transform": "rot90", "per_class": 20, "test_per_class": 10},
            ],
            "probe": {"lams": lams, "max_iter": 200},
            "threads": 1,
        }
    ppc = s["probe_per_class"]
    return {
        "name": f"vci-transfer-{scale}",
        "base": {
            "data": {
                "name": "fashion-mnist",
                "per_class": s["per_class"],
                "test_per_class": 200 if scale == "cpu" else None,
                "options": {"classes": _PRETRAIN},
            },
            "model": {"name": "cnn", "options": {"channels": [16, 32], "hidden": 128}},
            "loss": {"name": "ce", "reduction": "mean"},
            "optim": {"lr": 0.05, "weight_decay": 5e-4},
            "schedule": {"name": "cosine"},
            "train": {"epochs": s["epochs"], "batch_size": 128, "threads": 1 if scale == "cpu" else None},
            "measure": {"epochs": [s["epochs"]], "splits": ["train"], "layers": "penultimate"},
            "report": False,
        },
        "groups": _groups(_TAUS, _LAMBDAS),
        "seeds": s["seeds"],
        "downstream": [
            {
                "name": "heldout",
                "dataset": "fashion-mnist",
                "classes": _HELDOUT,
                "per_class": ppc,
                "test_per_class": ppc,
            },
            {"name": "digits", "dataset": "digits"},
            {
                "name": "rot90",
                "dataset": "fashion-mnist",
                "transform": "rot90",
                "per_class": None if ppc is None else ppc // 2,
                "test_per_class": None if ppc is None else ppc // 2,
            },
        ],
        "probe": {"lams": lams, "tol": 1e-6, "max_iter": 300},
        "threads": 1 if scale == "cpu" else None,
    }


@register(
    "vci-transfer",
    summary="Transfer study: tau and cosine-regulariser groups, collapse metrics vs MLOG of linear probes "
    "(Fig. 7 / Tables 1-2 at CPU scale)",
    paper="[Xu & Liu 2023]",
)
def run_vci_transfer(out: Path, scale: str, seed: int) -> dict[str, Any]:
    """Run the study (``seed`` shifts the seeds), write ``report.html`` with the Fig. 7 analogue and tables."""
    if scale == "paper":  # its protocol (nclab.experiments.reproductions) pretrains on streamed ImageNet
        from nclab.experiments.reproductions import VCI_PAPER_RUN

        raise ValueError(VCI_PAPER_RUN)
    from nclab.report.html import write_report
    from nclab.transfer.study import PAPER_METRICS, run_study

    raw = vci_transfer_study(scale)
    raw["seeds"] = [seed + s for s in raw["seeds"]]
    # in this process at tiny and cpu scale: Ray's start-up and per-trial worker cost outweigh two cores
    # (benchmarks/RESULTS.md, Sweeps); the paper scale's long trials go to Ray when it is installed
    res = run_study(raw, out, local=True if scale in ("tiny", "cpu") else None)
    keys = ["run", *PAPER_METRICS, "pretrain_accuracy"]
    keys += [k for k in res.rows[0] if k.startswith("acc_")] + ["mlo", "mlog"]
    table = [{k: r[k] for k in keys} for r in res.rows]
    corr = [c for c in res.correlations if c["metric"] in (*PAPER_METRICS, "pretrain_accuracy")]
    fig = res.files["figure"].read_bytes()
    write_report(
        out / RunDir.REPORT,
        f"vci-transfer ({scale}): which collapse metric predicts transfer?",
        [
            (
                "Correlation with MLOG (per group and pooled; one point per setting = mean over seeds)",
                html_table(corr),
            ),
            ("Runs", html_table(table)),
        ],
        [("Metric vs MLOG per group, Pearson r and Spearman rho (the analogue of Fig. 7)", fig)],
    )
    signs = {(c["group"], c["metric"]): c["pearson_r"] for c in res.correlations if c["metric"] in PAPER_METRICS}
    return {
        "runs": len(res.rows),
        "seconds": round(res.seconds, 1),
        "pearson_r": {f"{g}/{m}": round(v, 3) for (g, m), v in signs.items()},
    }
