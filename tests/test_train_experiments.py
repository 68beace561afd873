"""Registered training experiments at tiny scale."""

import csv
from pathlib import Path

import numpy as np
import pytest

import nclab.experiments.training  # noqa: F401  (registers the experiments)
from nclab.experiments import get, run
from nclab.io import read_metrics

FMNIST = Path("/usr/share/datasets/fashion-mnist")


def test_registered():
    assert get("fashion-mnist-cnn").paper == "[Han et al. 2022]" and "tiny" in get("digits-mlp-demo").scales


@pytest.mark.skipif(not FMNIST.is_dir(), reason="Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)")
def test_fashion_mnist_cnn_tiny(tmp_path):
    summary = run("fashion-mnist-cnn", tmp_path, scale="tiny")
    assert (tmp_path / "report.html").is_file()
    for loss in ("mse", "ce"):
        rows = read_metrics(tmp_path / loss)
        assert {r.layer for r in rows} == {"output", "block1", "block2", "fc"}
        # the summary is read off metrics.csv: the zero-error epoch is the first epoch whose train error row is 0,
        # and the NC1 entries are the penultimate layer's (fc) first and last logged values
        errors = sorted((r.epoch, r.value) for r in rows if r.metric == "error" and r.split == "train")
        zero = next((e for e, v in errors if v == 0.0), None)
        assert summary[f"{loss}: zero-error epoch"] == ("not reached" if zero is None else zero)
        assert all(v > 0 for e, v in errors if zero is None or e < zero)
        nc1 = sorted((r.epoch, r.value) for r in rows if r.metric == "nc1" and r.layer == "fc" and r.split == "train")
        assert {e for e, _ in nc1} >= {0, 3}
        assert summary[f"{loss}: nc1 first measured"] == nc1[0][1]
        assert summary[f"{loss}: nc1 last"] == nc1[-1][1]
        assert summary[f"{loss}: train error last"] == errors[-1][1]
    # L_perp / L_NC1 ([Han et al. 2022, Fig. 2]) is the ratio of the trainer's own decomposition rows
    rows = read_metrics(tmp_path / "mse")
    terms = {(r.epoch, r.metric): r.value for r in rows if r.metric.startswith("mse_L") and r.split == "train"}
    epochs = sorted({e for e, _ in terms})
    assert len(epochs) >= 2
    last = epochs[-1]
    assert summary["lperp_over_lnc1_last"] == terms[last, "mse_L_perp"] / terms[last, "mse_L_NC1"]
    zero = summary["mse: zero-error epoch"]
    if zero == "not reached":
        assert summary["lperp_over_lnc1_at_zero_error"] is None
    else:
        assert summary["lperp_over_lnc1_at_zero_error"] == terms[zero, "mse_L_perp"] / terms[zero, "mse_L_NC1"]
    table = list(csv.DictReader((tmp_path / "decomposition.csv").open()))
    assert [int(r["epoch"]) for r in table] == epochs
    for r in table:  # Thms 1-2: L = L_NC1 + L_NC2/3 + L_perp, exactly, in the rows the report shows
        parts = float(r["L_NC1"]) + float(r["L_NC23"]) + float(r["L_perp"])
        assert float(r["L"]) == pytest.approx(parts, rel=1e-9)
    assert summary["nc1_last"] == {loss: summary[f"{loss}: nc1 last"] for loss in ("mse", "ce")}
    html = (tmp_path / "report.html").read_text()
    assert "Findings against the paper" in html and "L_perp / L_NC1" in html


def _claims(r0, r1, gain, nc1_mse, nc1_ce):
    return {
        "lperp_over_lnc1_at_zero_error": r0,
        "lperp_over_lnc1_last": r1,
        "test_accuracy_gain_after_zero_error": {} if gain is None else {"mse": gain},
        "nc1_decades_after_zero_error": {"mse": 0.2, "ce": 0.5},
        "nc1_last": {"mse": nc1_mse, "ce": nc1_ce},
    }


def test_findings_state_agreement_and_contradiction():
    from nclab.experiments.training import findings

    # the audit's CPU numbers (fidelity-2.md): three contradictions
    bad = [f["verdict"] for f in findings(_claims(0.81, 0.04, -0.6, 0.021, 0.015))]
    assert bad == ["contradicts at zero error; < 0.1 by the end", "contradicts", "contradicts"]
    good = [f["verdict"] for f in findings(_claims(0.05, 0.01, 1.2, 0.01, 0.02))]
    assert good == ["agrees", "agrees", "agrees"]
    missing = findings(_claims(None, 0.3, None, 0.01, 0.02))
    assert [f["verdict"] for f in missing] == ["not reached", "not reached", "agrees"]
    assert "0.81" in findings(_claims(0.81, 0.04, -0.6, 0.021, 0.015))[0]["ours"]


def test_cpu_scale_is_the_papers_recipe_but_the_mse_lr():
    from nclab.experiments.training import LR_GRID, _fashion_cfg
    from nclab.train.presets import preset_dict

    # the paper's grid, np.logspace(-4, log10(0.25), 25), with the Colab's picks on it ([Han et al. 2022] App. A.3)
    assert LR_GRID == pytest.approx(tuple(np.logspace(-4, np.log10(0.25), 25)), rel=1e-4)
    assert (LR_GRID[16], LR_GRID[20]) == pytest.approx((0.0184, 0.0679), abs=1e-4)
    for loss in ("mse", "ce"):
        cfg = _fashion_cfg("cpu", 0, loss)
        paper = preset_dict(f"han2022-{loss}")
        assert cfg.schedule.name == "multistep" and cfg.schedule.milestone_fractions == pytest.approx([1 / 3, 2 / 3])
        assert (cfg.optim.weight_decay, cfg.optim.momentum, cfg.train.batch_size) == (5e-4, 0.9, 128)
        assert cfg.loss.reduction == paper["loss"].get("reduction", cfg.loss.reduction)
        assert cfg.optim.lr == (LR_GRID[23] if loss == "mse" else paper["optim"]["lr"])
