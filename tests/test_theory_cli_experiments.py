"""`nclab theory` sub-app and the registered theory experiments (tiny scale)."""

import csv
import itertools
import json

import numpy as np
import pytest
from typer.testing import CliRunner

import nclab.experiments.han2022.experiments
import nclab.experiments.wang2024.experiments  # noqa: F401
from nclab.cli.theory import app
from nclab.experiments import run
from nclab.theory import ls_classifier, mse_decomposition

runner = CliRunner()


def test_cli_decompose_matches_library(tmp_path, rng):
    C, P, n = 3, 5, 60
    y = np.arange(n) % C
    H = rng.normal(size=(C, P))[y] + rng.normal(size=(n, P))
    W, b = ls_classifier(H, y, 0.01)
    W = W + 0.05 * rng.normal(size=W.shape)
    for name, arr in (("h", H), ("y", y), ("w", W), ("b", b)):
        np.save(tmp_path / f"{name}.npy", arr)
    args = [str(tmp_path / "h.npy"), str(tmp_path / "y.npy"), "-w", str(tmp_path / "w.npy")]
    res = runner.invoke(
        app, ["decompose", *args, "-b", str(tmp_path / "b.npy"), "--weight-decay", "0.02", "-f", "json"]
    )
    assert res.exit_code == 0, res.output
    got = json.loads(res.output)
    ref = mse_decomposition(H, y, W, b, weight_decay=0.02, convention="mse_mean")
    for key in ("L", "L_LS", "L_NC1", "L_NC23", "L_perp"):
        assert got[key] == pytest.approx(ref[key], rel=1e-12)
    assert got["lambda"] == pytest.approx(C * 0.02 / 2)
    table = runner.invoke(app, ["decompose", *args, "--lam", "W=0.1"])
    assert table.exit_code == 0 and "L_perp" in table.output
    as_json = json.loads(runner.invoke(app, ["decompose", *args, "--lam", "W=0.1", "-f", "json"]).output)
    assert as_json["lambda"] == 0.1
    ref = mse_decomposition(H, y, W, None, 0.1)  # no -b given: the bias-free classifier
    for key in ("L", "L_LS", "L_NC1", "L_NC23", "L_perp"):
        assert as_json[key] == pytest.approx(ref[key], rel=1e-12)
    unknown = runner.invoke(app, ["decompose", *args, "--lam", "Q=1"])
    assert unknown.exit_code == 2 and "'Q'" in unknown.output and "known: W" in unknown.output
    bad = runner.invoke(
        app, ["decompose", str(tmp_path / "h.npy"), str(tmp_path / "y.npy"), "-w", str(tmp_path / "b.npy")]
    )
    assert bad.exit_code == 2 and "W must have shape" in bad.output


def test_cli_simulate(tmp_path):
    res = runner.invoke(
        app, ["simulate", "-K", "3", "-n", "4", "-d", "3", "--t-end", "100", "--checkpoints", "3", "-f", "json"]
    )
    assert res.exit_code == 0, res.output
    rows = json.loads(res.output)
    last = rows[-1]
    assert last["omega_1"] == pytest.approx(last["omega_1_oblique"], rel=1e-6)
    bad = runner.invoke(app, ["simulate", "--num-classes", "4", "--per-class", "2", "--dim", "6"])
    assert bad.exit_code == 2 and "K n - K >= d" in bad.output


def test_experiment_central_path_flow_tiny(tmp_path):
    s = run("central-path-flow", tmp_path, scale="tiny")
    for proj in ("oblique", "orthogonal"):
        assert s[f"{proj}_max_rel_error_vs_own_closed_form"] <= 1e-6
        assert s[f"{proj}_max_rel_error_vs_other_closed_form"] > 0.1
    assert (tmp_path / "report.html").stat().st_size > 10_000
    assert (tmp_path / "omega.png").exists() and (tmp_path / "flow_oblique.csv").exists()


def test_experiment_mse_decomposition_ufm_tiny(tmp_path):
    s = run("mse-decomposition-ufm", tmp_path, scale="tiny")
    assert s["max_identity_residual"] <= 1e-10
    # independent reference: the same full-batch GD (tiny scale: K=4, n=10, d=8, 300 steps, lr 0.05, lambda 1e-3,
    # seed 0) with torch autograd gradients of J(W, b, H) = ||H W^T + b - Y||^2 / (2N) + lam (||W||^2 + ||b||^2) / 2
    # + lam_H ||H||^2 / (2N), features stepped by lr N grad_H (per-sample steps); every recorded row's J and train
    # error, and the zero-error step = the first recorded step whose error is 0
    import torch

    K, n, d, lr, lam, N = 4, 10, 8, 0.05, 1e-3, 40
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(K), n)
    H = torch.tensor(rng.normal(size=(N, d)), requires_grad=True)
    W = torch.tensor(rng.normal(size=(K, d)) / np.sqrt(d), requires_grad=True)
    b = torch.zeros(K, dtype=torch.float64, requires_grad=True)
    Y = torch.eye(K, dtype=torch.float64)[y]
    ref = {}
    for step in range(301):
        R = H @ W.T + b - Y
        J = (R**2).sum() / (2 * N) + lam * ((W**2).sum() + (b**2).sum()) / 2 + lam * (H**2).sum() / (2 * N)
        if step % 10 == 0:
            ref[float(step)] = (
                float(J.detach()),
                float(np.mean(np.argmax((H @ W.T + b).detach().numpy(), axis=1) != y)),
            )
        gH, gW, gb = torch.autograd.grad(J, (H, W, b))
        with torch.no_grad():
            H -= lr * N * gH
            W -= lr * gW
            b -= lr * gb
    with open(tmp_path / "decomposition.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert [float(r["step"]) for r in rows] == list(ref)
    for r in rows:
        assert float(r["J"]) == pytest.approx(ref[float(r["step"])][0], rel=1e-9), r["step"]
        assert float(r["train_error"]) == ref[float(r["step"])][1], r["step"]
    first_zero = next(step for step, (_, err) in ref.items() if err == 0)
    assert s["zero_error_step"] == first_zero and first_zero > 0
    assert s["final_L_NC23"] < s["final_L_NC1"]  # Fig. 2: L_NC2/3 falls fastest, L_NC1 dominates
    assert s["final_proximity_ratio"] < 0.5
    assert (tmp_path / "fig2.png").exists() and (tmp_path / "report.html").exists()


def test_experiment_geodesic_digits_tiny(tmp_path):
    s = run("geodesic-digits", tmp_path, scale="tiny")
    assert s["pfc1_last"] < s["pfc1_first"]
    # independent reference: the same tiny training (4 blocks, 60 steps, seed 0) gives the layers, and
    # straightness = sum_i ||h^L_i - h^0_i||^2 / (L sum_i sum_l ||h^{l+1}_i - h^l_i||^2) and PFC1 = Tr S_W / Tr S_B
    # are recomputed from them in plain numpy
    from nclab.data import load_digits
    from nclab.experiments.wang2024.experiments import train_fc_resnet
    from tests.conftest import brute_stats

    X, y = load_digits()
    fit = {}
    layers = train_fc_resnet(X, y, blocks=4, steps=60, seed=0, fit=fit)
    # the run records whether it reached its target (zero training error) and its final loss
    assert s["train_error"] == fit["train_error"] and s["fc-resnet: final loss"] == fit["final_loss"] > 0
    assert s["fc-resnet: converged"] is (fit["train_error"] == 0)
    L = len(layers) - 1
    steps = sum(np.sum((layers[i + 1] - layers[i]) ** 2) for i in range(L))
    straight = np.sum((layers[-1] - layers[0]) ** 2) / (L * steps)
    assert s["straightness_index"] == pytest.approx(straight, rel=1e-9)
    pfc1_ref = []
    for h in layers:
        ref = brute_stats(h, y, 10)
        pfc1_ref.append(np.trace(ref["sw"]) / np.trace(ref["sb_bal"]))
    # the summary is the per-layer table it was written from

    with open(tmp_path / "layers.csv") as fh:
        table = list(csv.DictReader(fh))
    pfc1 = [float(r["pfc1"]) for r in table]
    assert (s["pfc1_first"], s["pfc1_last"]) == (pfc1[0], pfc1[-1])
    np.testing.assert_allclose(pfc1, pfc1_ref, rtol=1e-9)
    assert s["pfc1_depth_violations"] == sum(b > a for a, b in itertools.pairwise(pfc1))
    # all three PFC orders are counted (PFC2 must not rise with depth, PFC3 must not fall) with the last-layer level
    pfc2, pfc3 = ([float(r[k]) for r in table] for k in ("pfc2", "pfc3"))
    assert s["pfc2_depth_violations"] == sum(b > a for a, b in itertools.pairwise(pfc2))
    assert s["pfc3_depth_violations"] == sum(b < a for a, b in itertools.pairwise(pfc3))
    assert (s["pfc2_last"], s["pfc3_last"], s["pfc3_first"]) == (pfc2[-1], pfc3[-1], pfc3[0])
    rows = (tmp_path / "layers.csv").read_text().splitlines()
    assert len(rows) == 1 + 5  # header + layers 0..4
    # the Fig. 3 curves ride in the summary: measured per layer at its relative depth (layers.csv) and predicted on
    # the straight line (geodesic.csv), with the predicted curves' breaks of the same order counted
    assert s["measured"] == {"pfc1": pfc1, "pfc2": pfc2, "pfc3": pfc3}
    assert s["relative_depth"] == [float(r["relative_depth"]) for r in table]
    assert s["relative_depth"][0] == 0.0 and s["relative_depth"][-1] == pytest.approx(1.0, abs=1e-15)
    with open(tmp_path / "geodesic.csv") as fh:
        line = list(csv.DictReader(fh))
    assert s["predicted_t"] == [float(r["t"]) for r in line] and len(line) == 21
    for key, sign in (("pfc1", 1), ("pfc2", 1), ("pfc3", -1)):
        pred = [float(r[key]) for r in line]
        assert s["predicted"][key] == pred
        assert s["predicted_monotone_violations"][key] == sum(sign * (b - a) > 0 for a, b in itertools.pairwise(pred))
    # both ends of the prediction are the measured ends (the line runs from layer 0 to the last layer)
    assert s["predicted"]["pfc1"][0] == pytest.approx(pfc1[0], rel=1e-9)
    assert s["predicted"]["pfc1"][-1] == pytest.approx(pfc1[-1], rel=1e-9)
    assert (tmp_path / "fig3.png").exists() and (tmp_path / "report.html").exists()


def test_pfc_depth_summary_counts_each_order_on_a_synthetic_profile():
    from nclab.experiments.wang2024.experiments import pfc_depth_summary

    # PFC1 rises once (0.3 -> 0.35), PFC2 rises four times (the start of the review's geodesic-digits profile),
    # PFC3 falls once (0.97 -> 0.96); ties are not violations
    measured = {
        "pfc1": [0.53, 0.43, 0.30, 0.35, 0.25, 0.25],
        "pfc2": [0.796, 0.839, 0.877, 0.904, 0.906, 0.894],
        "pfc3": [0.94, 0.95, 0.97, 0.96, 0.98, 0.98],
    }
    s = pfc_depth_summary(measured)
    assert (s["pfc1_depth_violations"], s["pfc2_depth_violations"], s["pfc3_depth_violations"]) == (1, 4, 1)
    assert (s["pfc1_first"], s["pfc1_last"], s["pfc2_last"], s["pfc3_last"]) == (0.53, 0.25, 0.894, 0.98)
    # the conjecture's order itself has no violation; its reverse violates every step
    ordered = {"pfc1": [3.0, 2.0, 1.0], "pfc2": [0.9, 0.5, 0.1], "pfc3": [0.5, 0.9, 1.0]}
    assert [pfc_depth_summary(ordered)[f"pfc{j}_depth_violations"] for j in (1, 2, 3)] == [0, 0, 0]
    reverse = {k: v[::-1] for k, v in ordered.items()}
    assert [pfc_depth_summary(reverse)[f"pfc{j}_depth_violations"] for j in (1, 2, 3)] == [2, 2, 2]
    with pytest.raises(ValueError, match="pfc2"):
        pfc_depth_summary({**ordered, "pfc2": []})
