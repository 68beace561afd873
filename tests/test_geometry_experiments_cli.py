"""[Jiang et al. 2024] geometry experiments (tiny scale) and the ``nclab codes`` sub-app."""

import csv
import json
import math

import numpy as np
import pytest
from typer.testing import CliRunner

import nclab.experiments.jiang2024.experiments  # noqa: F401 - registers the experiments
from nclab.cli.codes import app
from nclab.experiments import run

runner = CliRunner()


def test_assignment_experiment(tmp_path):
    s = run("gnc-assignment", tmp_path, scale="tiny")
    assert s["square_assignments"] == 3 and s["square_symmetries"] == 8
    assert s["hexagon_assignments"] == 60 and s["hexagon_antipodal_pairings"] == 15
    assert (tmp_path / "report.html").stat().st_size > 1000
    assert len((tmp_path / "hexagon_assignments.csv").read_text().splitlines()) == 61


def test_bounds_vs_d_experiment(tmp_path):
    s = run("gnc-bounds-vs-d", tmp_path, scale="tiny")
    assert s["bounds_hold"] is True and s["checked"] >= 3
    assert s["rho_d2"] == pytest.approx(1 - math.cos(2 * math.pi / 30))
    # d = 3 and 4 searched at K = 30; each margin's place between the Thm 3.9 bounds, recomputed here
    from nclab.geometry.bounds import softmax_code_bounds

    assert s["checked_numerical"] == 2
    for d in (3, 4):
        b = softmax_code_bounds(d, 30)
        assert s[f"position_d{d}"] == pytest.approx((s[f"rho_d{d}"] - b.lower) / (b.upper - b.lower), rel=1e-12)
        assert 0 < s[f"position_d{d}"] < 1
    assert (tmp_path / "bounds_vs_d.png").exists() and (tmp_path / "report.html").exists()


def test_tau_maxcos_experiment(tmp_path):
    s = run("gnc-tau-maxcos", tmp_path, scale="tiny")
    assert s["hardmax_max_cos"] == pytest.approx(s["tammes_known_max_cos"], abs=5e-3)
    with open(tmp_path / "maxcos_vs_tau.csv") as fh:
        rows = list(csv.DictReader(fh))
    taus = np.array([float(r["tau"]) for r in rows])
    cos = np.array([float(r["max_cos"]) for r in rows])
    assert s["final_tau"] == taus[-1] == 0.002 and s["final_ce_max_cos"] == cos[-1]
    # the CE optimum keeps approaching HardMax at a tau where the usual float64 CE is exactly 0 (tau <= 0.02):
    # the gap is proportional to tau, and the line through the small-tau points meets HardMax at tau = 0
    assert s["final_rel_gap_to_hardmax"] == pytest.approx(s["final_gap_to_hardmax"] / s["hardmax_max_cos"])
    assert 0 < s["final_gap_to_hardmax"] < 0.5 * s["max_cos_slope_in_tau"] * 0.01  # below its value at tau = 0.01
    b, a = np.polyfit(taus[taus <= 0.01], cos[taus <= 0.01], 1)
    assert (s["extrapolated_max_cos_tau0"], s["max_cos_slope_in_tau"]) == pytest.approx((a, b), rel=1e-12)
    assert abs(s["extrapolated_gap_to_hardmax"]) < 1e-4
    assert np.isfinite([float(r["log_ce"]) for r in rows]).all() and s["final_log_mean_ce"] < -300


def test_d2_codes_experiment(tmp_path):
    s = run("gnc-d2-codes", tmp_path, scale="tiny")
    for K in (4, 6):
        assert s[f"K{K}_SC_rho"] == pytest.approx(s[f"K{K}_SC_optimum"], abs=1e-3)
        assert s[f"K{K}_SC_ratio_cv"] < 1e-2  # unit rows and collapsed unit features: ratio 1
    assert (tmp_path / "codes.png").exists() and (tmp_path / "report.html").exists()


def test_cli_bounds_json():
    res = runner.invoke(app, ["bounds", "-d", "10", "-K", "100", "--format", "json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.output)
    assert rows[0]["lower"] == pytest.approx(0.16970, abs=1e-5) and rows[0]["valid"] is True


def test_cli_softmax_and_tammes(tmp_path):
    out = tmp_path / "code.npy"
    res = runner.invoke(app, ["softmax", "-d", "3", "-K", "4", "--restarts", "1", "--steps", "300",
                              "--out", str(out), "--format", "json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    info = json.loads(res.output)
    assert info["rho_one_vs_rest"] == pytest.approx(4 / 3, abs=1e-4)
    assert np.load(out).shape == (4, 3)
    res = runner.invoke(app, ["tammes", "--dim", "3", "--num-classes", "6", "--restarts", "1", "--steps", "300"])
    assert res.exit_code == 0, res.output
    assert "min_angle_deg" in res.output
    # the optimal 6-point code on S^2 is the octahedron (+-e_i): minimum angle 90 deg, max cosine 0, pairwise
    # distance sqrt(2), one-vs-rest margin 1 (the distance from e_1 to the hull of the other five is 1)
    res = runner.invoke(app, ["tammes", "-d", "3", "-K", "6", "--restarts", "1", "--steps", "300", "-f", "json"])
    info = json.loads(res.output)
    assert info["min_angle_deg"] == pytest.approx(90.0, abs=1e-9)
    assert info["max_cos"] == pytest.approx(0.0, abs=1e-12)
    assert info["rho_one_vs_one"] == pytest.approx(math.sqrt(2), abs=1e-12)
    assert info["rho_one_vs_rest"] == pytest.approx(1.0, abs=1e-12)
    assert info["kkt_ok"] is True


def test_cli_rejects_bad_input():
    res = runner.invoke(app, ["bounds", "-d", "1", "-K", "10"])
    assert res.exit_code != 0
    assert "d >= 2" in res.output
