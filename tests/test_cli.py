"""The nclab command: measure on every file format, conventions, errors, the demo."""

import json

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from nclab.cli import app
from nclab.io import read_metrics
from nclab.metrics import collapse_report, nc1
from nclab.stats import ClassStats, NCCAccumulator

runner = CliRunner()


@pytest.fixture
def data(rng):
    K, d, N = 4, 6, 200
    y = np.arange(N) % K
    H = (3 * rng.normal(size=(K, d))[y] + rng.normal(size=(N, d))).astype(np.float32)
    W = rng.normal(size=(K, d))
    b = rng.normal(size=K)
    return H, y, W, b


def _expected(H, y, W=None, b=None, conventions=None):
    stats = ClassStats.from_arrays(H, y)
    ncc = NCCAccumulator(stats, W=W, b=b).update(H, y)
    return collapse_report(stats, W=W, b=b, ncc=ncc, conventions=conventions)


def test_measure_json_matches_library(tmp_path, data):
    H, y, W, b = data
    np.save(tmp_path / "h.npy", H)
    np.save(tmp_path / "y.npy", y)
    np.save(tmp_path / "w.npy", W)
    np.save(tmp_path / "b.npy", b)
    args = ["measure", str(tmp_path / "h.npy"), str(tmp_path / "y.npy"), "--format", "json", "--batch-size", "37"]
    res = runner.invoke(app, [*args, "--classifier", str(tmp_path / "w.npy"), "--bias", str(tmp_path / "b.npy")])
    assert res.exit_code == 0, res.output
    got = json.loads(res.stdout)
    want = _expected(H, y, W, b)
    assert set(got) == set(want)
    for k in want:
        assert got[k] == pytest.approx(want[k], rel=1e-9, abs=1e-12), k
    assert "self_duality" in got and "ncc_mismatch" in got


@pytest.mark.parametrize("fmt", ["npz", "pt", "safetensors"])
def test_measure_reads_every_format(tmp_path, data, fmt):
    H, y, _, _ = data
    if fmt == "npz":
        np.savez(tmp_path / "d.npz", feats=H, labels=y)
        f, lab = f"{tmp_path}/d.npz:feats", f"{tmp_path}/d.npz:labels"
    elif fmt == "pt":
        torch.save({"feats": torch.from_numpy(H), "labels": torch.from_numpy(y)}, tmp_path / "d.pt")
        f, lab = f"{tmp_path}/d.pt:feats", f"{tmp_path}/d.pt:labels"
    else:
        from safetensors.numpy import save_file

        save_file({"feats": H, "labels": y}, str(tmp_path / "d.safetensors"))
        f, lab = f"{tmp_path}/d.safetensors:feats", f"{tmp_path}/d.safetensors:labels"
    res = runner.invoke(app, ["measure", f, lab, "--format", "csv"])
    assert res.exit_code == 0, res.output
    rows = dict(line.split(",") for line in res.stdout.strip().splitlines()[1:])
    assert float(rows["nc1"]) == pytest.approx(nc1(ClassStats.from_arrays(H, y)), rel=1e-12)


def test_convention_switches(tmp_path, data):
    H, y, _, _ = data
    np.save(tmp_path / "h.npy", H)
    np.save(tmp_path / "y.npy", y)
    base = ["measure", str(tmp_path / "h.npy"), str(tmp_path / "y.npy"), "-f", "json"]
    d1 = json.loads(runner.invoke(app, base).stdout)
    d2 = json.loads(runner.invoke(app, [*base, "-c", "nc1_normalize=false", "-c", "cdnv_exponent=2"]).stdout)
    assert d2["nc1"] == pytest.approx(4 * d1["nc1"], rel=1e-12)  # no 1/K
    want = _expected(H, y, conventions={"cdnv_exponent": 2})["cdnv"]
    assert d2["cdnv"] == pytest.approx(want, rel=1e-12)
    bad = runner.invoke(app, [*base, "-c", "nc1_scale=2"])
    assert bad.exit_code == 2 and "unknown key 'nc1_scale'" in bad.output and "nc1_normalize" in bad.output
    for item, allowed in (
        ("nc1_normalize=foo", "true or false"),
        ("weighting=uniform", "balanced or empirical"),
        ("cdnv_exponent=3", "1 or 2"),
        ("pinv_rank=0", "an int >= 1"),
    ):
        bad = runner.invoke(app, [*base, "-c", item])
        key, value = item.split("=")
        assert bad.exit_code == 2 and f"{key}='{value}' is not accepted" in bad.output and allowed in bad.output
    ok = runner.invoke(app, [*base, "-c", "pinv_rank=numerical", "-c", "self_duality_variant=gram"])
    assert ok.exit_code == 0, ok.output


def test_measure_errors_are_clear(tmp_path, data):
    H, y, _, _ = data
    np.save(tmp_path / "h.npy", H)
    np.save(tmp_path / "y.npy", y[:-1])
    res = runner.invoke(app, ["measure", str(tmp_path / "h.npy"), str(tmp_path / "y.npy")])
    assert res.exit_code == 2 and "rows" in res.output
    res = runner.invoke(app, ["measure", str(tmp_path / "missing.npy"), str(tmp_path / "y.npy")])
    assert res.exit_code == 2 and "no such file" in res.output
    np.save(tmp_path / "y.npy", y)
    res = runner.invoke(app, ["measure", str(tmp_path / "h.npy"), str(tmp_path / "y.npy"), "-K", "6"])
    assert res.exit_code == 2 and "classes 4, 5" in res.output


def test_demo_trains_and_writes_reports(tmp_path):
    res = runner.invoke(app, ["demo", "--out", str(tmp_path), "--epochs", "12"])
    assert res.exit_code == 0, res.output
    for run in ("mse", "ce"):
        assert "<img" in (tmp_path / run / "report.html").read_text()
        # the zero-error epoch in summary.json is the first epoch whose exact (eval-mode) train error row is 0, and
        # every error row logged before it is positive
        zero = json.loads((tmp_path / run / "summary.json").read_text())["zero_error_epoch"]
        errors = sorted((r.epoch, r.value) for r in read_metrics(tmp_path / run) if r.metric == "error"
                        and r.split == "train")  # fmt: skip
        assert errors, run
        first_zero = next((e for e, v in errors if v == 0.0), None)
        assert zero == first_zero, (run, errors)
        assert all(v > 0 for e, v in errors if zero is None or e < zero)
    html = (tmp_path / "report.html").read_text()
    assert "data:image/png;base64" in html and "http://" not in html and "https://" not in html  # self-contained


def test_collapse_report_warns_on_imbalance_and_empirical_is_silent(rng):
    import warnings

    from nclab.metrics import ImbalanceWarning

    y = np.r_[np.zeros(30, int), np.ones(10, int), np.full(20, 2)]
    H = rng.normal(size=(3, 5))[y] * 4 + rng.normal(size=(60, 5))
    stats = ClassStats.from_arrays(H, y)
    with pytest.warns(ImbalanceWarning, match="class counts differ"):
        collapse_report(stats)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ImbalanceWarning)
        rep = collapse_report(stats, conventions={"weighting": "empirical"})
    # empirical weighting: the trace ratio is Tr Sigma_W / Tr Sigma_B(empirical)
    assert rep["trace_ratio"] == pytest.approx(stats.trace_w() / stats.trace_b("empirical"), rel=1e-12)
    with pytest.raises(ValueError, match="unknown convention"):
        collapse_report(stats, conventions={"nc1_scale": 1})


def test_json_output_is_strict_on_degenerate_data(tmp_path):
    # all class means equal: nc1 = inf, centred cosines undefined (nan) -> strict JSON strings, and a note
    H = np.tile(np.eye(3), (4, 1))
    y = np.repeat(np.arange(2), 6)
    np.save(tmp_path / "h.npy", H)
    np.save(tmp_path / "y.npy", y)
    res = runner.invoke(app, ["measure", str(tmp_path / "h.npy"), str(tmp_path / "y.npy"), "-f", "json"])
    assert res.exit_code == 0, res.output
    got = json.loads(res.stdout, parse_constant=lambda tok: pytest.fail(f"non-strict JSON token {tok}"))
    assert got["nc1"] == "inf" and got["vci"] == 1.0 and got["equiangularity"] == "nan"
    assert float(got["trace_ratio"]) == float("inf")


def test_collapse_report_takes_torch_classifier_and_checks_shapes(data):
    H, y, W, b = data
    stats = ClassStats.from_arrays(H, y)
    fc = torch.nn.Linear(6, 4).double()
    with torch.no_grad():
        fc.weight.copy_(torch.from_numpy(W))
        fc.bias.copy_(torch.from_numpy(b))
    assert collapse_report(stats, W=fc.weight, b=fc.bias) == collapse_report(stats, W=W, b=b)
    with pytest.raises(ValueError, match=r"W must be \(K, d\)"):
        collapse_report(stats, W=W[:, :5])
    with pytest.raises(ValueError, match=r"b must be \(K,\)"):
        collapse_report(stats, W=W, b=b[:3])
    # the pinv convention reaches the V_B split too
    rep = collapse_report(stats, conventions={"pinv_rank": 1})
    from nclab.metrics import within_class_split

    assert rep["within_class_split_in_span"] == pytest.approx(within_class_split(stats, rank=1)["in_span"])
