"""nclab.transfer: the L-BFGS probe against scikit-learn and closed forms, MLO / MLOG against the tables of
[Xu & Liu 2023], and the study runner at tiny scale."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nclab._threads import torch_threads
from nclab.transfer import (
    fit_logistic,
    linear_probe,
    log_odds,
    logistic_path,
    mean_log_odds,
    mean_per_class_accuracy,
    mlog,
    sklearn_c,
    top1_accuracy,
)


@pytest.fixture(autouse=True)
def _one_thread():
    # tiny problems: a second intra-op thread only adds wake-up stalls on a loaded machine
    with torch_threads(1):
        yield


def _blobs(K=5, d=8, N=300, sep=1.5, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, K, N)
    return rng.normal(size=(N, d)) + sep * rng.normal(size=(K, d))[y], y


def _objective_grad(p, X, y, lam):
    x = torch.as_tensor(X, dtype=torch.float64)
    W = p.coef.clone().requires_grad_(True)
    b = p.intercept.clone().requires_grad_(True)
    loss = torch.nn.functional.cross_entropy(x @ W.T + b, torch.as_tensor(y)) + 0.5 * lam * (W * W).sum()
    loss.backward()
    return W.grad, b.grad


@pytest.mark.parametrize("lam", [1e-3, 1e-1])
def test_probe_agrees_with_sklearn(lam):
    sk_lm = pytest.importorskip("sklearn.linear_model", reason="scikit-learn is missing (pip install --group dev)")
    X, y = _blobs()
    p = fit_logistic(X, y, lam, tol=1e-10)
    sk = sk_lm.LogisticRegression(C=sklearn_c(lam, X.shape[0]), solver="lbfgs", tol=1e-12, max_iter=10_000)
    sk.fit(X, y)
    coef = p.coef.numpy()
    assert np.abs(coef - sk.coef_).max() / np.abs(sk.coef_).max() < 1e-5
    # the multinomial intercept is defined up to a common shift: compare centred
    bi, si = p.intercept.numpy(), sk.intercept_
    assert np.abs((bi - bi.mean()) - (si - si.mean())).max() / np.abs(si - si.mean()).max() < 1e-5
    np.testing.assert_array_equal(p.predict(X), sk.predict(X))
    Xt, yt = _blobs(seed=1)
    assert top1_accuracy(yt, p.predict(Xt)) == sk.score(Xt, yt)


def test_probe_stationarity_and_penalised_rows_sum_to_zero():
    X, y = _blobs(K=4, d=6, N=200)
    p = fit_logistic(X, y, 0.05, tol=1e-11)
    gW, gb = _objective_grad(p, X, y, 0.05)
    # float64 line searches stall once a step changes J by less than its rounding, at |g| ~ sqrt(eps J lam)
    # (~2e-9 here): 1e-7 is that floor with margin, and bounds the coefficient error by |g| / lam = 2e-6
    assert float(gW.abs().max()) < 1e-7 and float(gb.abs().max()) < 1e-7
    assert p.grad_norm == pytest.approx(max(float(gW.abs().max()), float(gb.abs().max())), rel=1e-6)
    # the softmax gradient rows sum to zero, so sum_k dJ/dW_k = lam sum_k W_k: at the optimum sum_k W_k = 0
    assert np.abs(p.coef.numpy().sum(axis=0)).max() < 1e-7 / 0.05


def test_binary_one_feature_closed_form():
    # two symmetric points per class and a huge penalty: W -> 0, b -> the log class ratio
    X = np.array([[-1.0], [1.0], [-1.0], [1.0], [-1.0], [1.0]])
    y = np.array([0, 0, 1, 1, 1, 1])
    p = fit_logistic(X, y, 1e6, tol=1e-12)
    b = p.intercept.numpy()
    assert abs((b[1] - b[0]) - np.log(2.0)) < 1e-6
    assert np.abs(p.coef.numpy()).max() < 1e-6


def test_path_warm_start_matches_cold_fits_and_keeps_order():
    X, y = _blobs(seed=3)
    lams = [1e-2, 1.0, 1e-3]
    path = logistic_path(X, y, lams, tol=1e-10)
    assert [q.lam for q in path] == lams
    for q, lam in zip(path, lams, strict=True):
        cold = fit_logistic(X, y, lam, tol=1e-10)
        assert np.abs(q.coef.numpy() - cold.coef.numpy()).max() / np.abs(cold.coef.numpy()).max() < 1e-6


def test_accuracies():
    t = np.array([0, 0, 0, 1, 2, 2])
    p = np.array([0, 1, 1, 1, 2, 0])
    assert top1_accuracy(t, p) == pytest.approx(3 / 6)
    assert mean_per_class_accuracy(t, p) == pytest.approx((1 / 3 + 1 + 1 / 2) / 3)


def test_linear_probe_protocol():
    X, y = _blobs(K=3, d=5, N=240, sep=2.0, seed=4)
    Xt, yt = _blobs(K=3, d=5, N=240, sep=2.0, seed=5)
    res = linear_probe((X, y), (Xt, yt), lams=np.logspace(-4, 2, 7), score="mean_per_class", keep_probe=True)
    assert res.lam in set(np.logspace(-4, 2, 7))
    assert res.val_scores.shape == (7,)
    # the refit on train + validation (here all of X) at the chosen strength is the plain fit on X
    ref = fit_logistic(X, y, res.lam, tol=1e-9)
    assert np.abs(res.probe.coef.numpy() - ref.coef.numpy()).max() / np.abs(ref.coef.numpy()).max() < 1e-5
    assert res.top1 == top1_accuracy(yt, ref.predict(Xt))
    assert res.accuracy == res.mean_per_class


def test_probe_validation_names_argument():
    X, y = _blobs()
    with pytest.raises(ValueError, match="lams"):
        logistic_path(X, y, [0.0])
    with pytest.raises(ValueError, match="X must be a 2-D"):
        fit_logistic(X[:, 0], y, 1.0)
    with pytest.raises(ValueError, match="y must hold integer"):
        fit_logistic(X, y.astype(float), 1.0)
    with pytest.raises(ValueError, match="score"):
        linear_probe((X, y), (X, y), score="top5")


# [Xu & Liu 2023] Table 1 (downstream accuracies %, MLO) and Table 2 (pretraining accuracy %, MLOG), verbatim
TABLE1 = {
    "tau=0.1": ([90.8, 95.03, 58.85, 64.73, 74.47, 93.1, 75.45, 77.14, 84.9, 62.44], 1.445),
    "tau=0.2": ([91.52, 95.25, 57.5, 64.1, 74.41, 92.89, 75.41, 77.65, 85.58, 63.28], 1.459),
    "tau=0.4": ([91.64, 94.66, 57.67, 64.42, 74.63, 92.58, 74.97, 77.1, 85.59, 63.3], 1.441),
    "tau=0.6": ([91.74, 94.14, 57.54, 61.56, 76.22, 92.42, 74.86, 76.6, 85.2, 63.51], 1.421),
    "tau=0.8": ([92.35, 93.52, 55.64, 61.6, 75.37, 92.37, 74.2, 76.07, 84.49, 62.74], 1.39),
    "tau=1.0": ([91.7, 93.68, 55.37, 60.14, 73.99, 91.9, 74.42, 75.96, 85.82, 62.98], 1.375),
    "lambda=2.5": ([90.86, 92.01, 51.07, 55.14, 74.36, 91.79, 72.9, 75.44, 85.19, 62.01], 1.282),
    "lambda=3.75": ([90.87, 90.79, 47.81, 50.44, 76.01, 91.89, 72.19, 75.31, 82.97, 60.98], 1.22),
    "lambda=5": ([90.51, 90.03, 45.12, 50.52, 74.41, 91.63, 71.84, 74.64, 82.63, 60.38], 1.174),
    "lambda=7.5": ([89.33, 86.54, 44.52, 46.87, 73.14, 91.64, 71.19, 74.13, 81.23, 58.55], 1.08),
    "lambda=10": ([89.92, 83.6, 43.39, 43.55, 72.5, 91.43, 70.29, 73.76, 78.25, 56.9], 1.008),
}
TABLE2 = {  # accuracy %, MLOG
    "tau=0.1": (75.4, 0.3250),
    "tau=0.2": (76.64, 0.2704),
    "tau=0.4": (77.53, 0.2029),
    "tau=0.6": (77.72, 0.1711),
    "tau=0.8": (77.83, 0.1343),
    "tau=1.0": (77.88, 0.1161),
    "lambda=2.5": (77.52, 0.0440),
    "lambda=3.75": (77.31, -0.0063),
    "lambda=5": (77.29, -0.0507),
    "lambda=7.5": (77.46, -0.1539),
    "lambda=10": (77.65, -0.2375),
}


@pytest.mark.parametrize("run", list(TABLE1))
def test_mlo_mlog_recompute_tables(run):
    accs, mlo = TABLE1[run]
    acc0, mlog_table = TABLE2[run]
    # the tables round to 3-4 digits: 5e-4 is the rounding of the printed values
    assert mean_log_odds(accs, percent=True) == pytest.approx(mlo, abs=5e-4)
    assert mlog(accs, acc0, percent=True) == pytest.approx(mlog_table, abs=5e-4)
    assert mlog(np.array(accs) / 100, acc0 / 100) == pytest.approx(mlog(accs, acc0, percent=True), abs=1e-14)


def test_mlog_spec_examples_and_units():
    assert mean_log_odds(TABLE1["tau=0.1"][0], percent=True) == pytest.approx(1.4452, abs=5e-5)
    assert mlog(TABLE1["lambda=10"][0], 77.65, percent=True) == pytest.approx(-0.2373, abs=5e-5)
    assert log_odds(0.5) == 0.0
    assert log_odds([0.75]) == pytest.approx([np.log(3.0)])
    with pytest.raises(ValueError, match="percent=True"):
        mean_log_odds([90.8, 95.0])
    with pytest.raises(ValueError, match="percentages"):
        mlog([100.5], 50.0, percent=True)
    assert mlog([100.0], 50.0, percent=True) == np.inf  # a perfect probe is a result (probe-2 row 123)


# ----------------------------------------------------------------------------------------------- the study
def test_correlation_table_seed_means_and_spread():
    from nclab.transfer.study import correlation_table

    rows = []
    for g, sign in (("a", 1.0), ("b", -1.0)):
        for v in (1, 2, 3, 4):
            for s in (0, 1):
                noise = 0.1 if s == 0 else -0.1  # seeds disagree symmetrically: the seed means are exact
                rows.append(
                    {
                        "group": g,
                        "value": v,
                        "seed": s,
                        "m": float(v),
                        "pretrain_accuracy": 0.5,
                        "mlog": sign * v**2 + noise,
                    }
                )
    table = {(c["group"], c["metric"]): c for c in correlation_table(rows, ["m"])}
    x, y = np.array([1.0, 2, 3, 4]), np.array([1.0, 4, 9, 16])
    assert table["a", "m"]["pearson_r"] == pytest.approx(np.corrcoef(x, y)[0, 1], abs=1e-12)
    assert table["b", "m"]["pearson_r"] == pytest.approx(-np.corrcoef(x, y)[0, 1], abs=1e-12)
    assert table["a", "m"]["spearman_rho"] == pytest.approx(1.0) and table["b", "m"]["spearman_rho"] == pytest.approx(
        -1.0
    )
    assert table["a", "m"]["settings"] == 4 and table["pooled", "m"]["settings"] == 8
    r0, r1 = np.corrcoef(x, y + 0.1)[0, 1], np.corrcoef(x, y - 0.1)[0, 1]
    assert table["a", "m"]["r_seed_mean"] == pytest.approx((r0 + r1) / 2, abs=1e-12)
    assert table["a", "m"]["r_seed_sd"] == pytest.approx(np.std([r0, r1], ddof=1), abs=1e-12)
    assert np.isnan(table["a", "pretrain_accuracy"]["pearson_r"])  # constant: undefined, not 0


def test_study_spec_validation_names_key():
    from nclab.transfer.study import StudySpec

    good = {
        "name": "s",
        "groups": [{"name": "tau", "axis": "loss.tau", "values": [0.5]}],
        "downstream": [{"name": "t", "dataset": "digits"}],
    }
    spec = StudySpec.from_dict(good)
    cfg = spec.run_config(spec.groups[0], 0.5, 3)
    assert cfg.loss.tau == 0.5 and cfg.seed == 3
    with pytest.raises(ValueError, match="unknown key"):
        StudySpec.from_dict({**good, "group": []})
    with pytest.raises(ValueError, match=r"groups\[0\] needs"):
        StudySpec.from_dict({**good, "groups": [{"name": "tau"}]})
    with pytest.raises(ValueError, match=r"downstream\[0\]: unknown"):
        StudySpec.from_dict({**good, "downstream": [{"name": "t", "dataset": "digits", "clases": [1]}]})
    with pytest.raises(ValueError, match="pooled"):
        StudySpec.from_dict({**good, "groups": [{"name": "pooled", "axis": "loss.tau", "values": [1]}]})


def test_streamed_only_keys_are_refused_on_in_memory_data():
    """A task's split keys and the ``stream`` section are read by the streamed path only: on in-memory data a
    ``val_split: val`` would silently become the probe's stratified 20 %, so the study refuses it by name."""
    from nclab.transfer.study import StudySpec, make_task

    good = {
        "name": "s",
        "base": {"data": {"name": "digits"}},
        "groups": [{"name": "tau", "axis": "loss.tau", "values": [0.5, 1.0]}],
        "downstream": [{"name": "t", "dataset": "digits"}],
    }
    assert StudySpec.from_dict(good).downstream == [{"name": "t", "dataset": "digits"}]
    for key, value in (("val_split", "val"), ("train_split", "trainval"), ("test_split", "test")):
        task = {"name": "t", "dataset": "digits", key: value}
        with pytest.raises(ValueError, match=rf"study\.downstream\[0\]\.{key}: '{value}' applies to streamed .*"
                           r"'tau=0\.5-s0' pretrains on 'digits' in memory"):  # fmt: skip
            StudySpec.from_dict({**good, "downstream": [task]})
        with pytest.raises(ValueError, match=rf"downstream 't': {key} applies to streamed"):
            make_task(task, (1, 8, 8))
    with pytest.raises(ValueError, match=r"study\.stream: .* applies to streamed pretraining data only"):
        StudySpec.from_dict({**good, "stream": {"per_class": 5}})
    # streamed base data: the same keys are read
    streamed = {**good, "base": {"data": {"name": "imagenet", "image_size": 16}}, "stream": {"per_class": 5}}
    spec = StudySpec.from_dict({**streamed, "downstream": [{"name": "t", "dataset": "dtd", "val_split": "val"}]})
    assert spec.downstream[0]["val_split"] == "val" and spec.stream.per_class == 5


def test_make_task_resizes_rotates_and_standardises():
    from nclab.transfer.study import make_task

    task = make_task({"name": "d", "dataset": "digits", "transform": "rot90", "per_class": 10}, (1, 16, 16))
    x = task.train[0]
    assert tuple(x.shape) == (100, 1, 16, 16) and task.K == 10
    assert float(x.mean()) == pytest.approx(0.0, abs=1e-5) and float(x.std()) == pytest.approx(1.0, abs=1e-4)
    plain = make_task({"name": "d", "dataset": "digits", "per_class": 10}, (1, 16, 16))
    # the same images: rotating then standardising = standardising then rotating (statistics are rotation-invariant)
    torch.testing.assert_close(x, torch.rot90(plain.train[0], 1, dims=(2, 3)))
    with pytest.raises(ValueError, match="transform"):
        make_task({"name": "d", "dataset": "digits", "transform": "flip"}, (1, 8, 8))


def test_vci_transfer_tiny(tmp_path):
    import csv

    from nclab.experiments.registry import run
    from nclab.experiments.xu_liu2023.experiments import vci_transfer_study
    from nclab.train.sweep import read_sweep_table
    from nclab.transfer.study import PAPER_METRICS, StudySpec, evaluate_run

    summary = run("vci-transfer", tmp_path, scale="tiny")
    assert summary["runs"] == 6
    assert summary["seeds"] == [0]
    rows = list(csv.DictReader((tmp_path / "table.csv").open()))
    assert [r["run"] for r in rows] == [f"tau={t}-s0" for t in (0.2, 0.5, 1.0)] + [
        f"lambda={w}-s0" for w in (2.5, 5.0, 10.0)
    ]
    for r in rows:
        accs = [float(r["acc_heldout"]), float(r["acc_rot90"])]
        assert float(r["mlo"]) == pytest.approx(mean_log_odds(accs), abs=1e-12)
        assert float(r["mlog"]) == pytest.approx(mlog(accs, float(r["pretrain_accuracy"])), abs=1e-12)
        assert 0 < float(r["vci"]) <= 1
    corr = list(csv.DictReader((tmp_path / "correlations.csv").open()))
    assert {c["group"] for c in corr} == {"tau", "lambda", "pooled"}
    pooled_vci = next(c for c in corr if c["group"] == "pooled" and c["metric"] == "vci")
    x = np.array([float(r["vci"]) for r in rows])
    y = np.array([float(r["mlog"]) for r in rows])
    assert float(pooled_vci["pearson_r"]) == pytest.approx(np.corrcoef(x, y)[0, 1], abs=1e-9)
    # beside MLOG: r against MLO, and the partial r given logit(p_0), on the same points (one per setting)
    mlo = np.array([float(r["mlo"]) for r in rows])
    logit_p0 = np.array([np.log(p / (1 - p)) for p in (float(r["pretrain_accuracy"]) for r in rows)])
    assert summary["pearson_r_mlo"]["pooled/vci"] == pytest.approx(np.corrcoef(x, mlo)[0, 1], abs=1e-3)
    rxy, rxz, ryz = np.corrcoef(x, y)[0, 1], np.corrcoef(x, logit_p0)[0, 1], np.corrcoef(y, logit_p0)[0, 1]
    textbook = (rxy - rxz * ryz) / np.sqrt((1 - rxz**2) * (1 - ryz**2))
    assert summary["partial_r_p0"]["pooled/vci"] == pytest.approx(textbook, abs=1e-3)
    # 3 settings per group: a partial r of 3 points is +-1 whatever the data, so it is nan; one seed: no spread
    assert np.isnan(summary["partial_r_p0"]["tau/vci"]) and np.isnan(summary["pearson_r_sd"]["tau/vci"])
    assert set(summary["pearson_r_mlo"]) == set(summary["pearson_r"]) == set(summary["partial_r_p0"])
    assert "partial r vs MLOG given logit(p_0)" in (tmp_path / "report.html").read_text()
    assert (tmp_path / "fig7.png").read_bytes()[:4] == b"\x89PNG"
    assert "Fig. 7" in (tmp_path / "report.html").read_text()
    # the pretraining runs are the trials of a sweep: one run directory per trial id, indexed in sweep.csv
    sweep = {t: r["status"] for t, r in read_sweep_table(tmp_path / "runs").items()}
    assert sweep == {r["trial_id"]: "completed" for r in rows}
    assert all((tmp_path / "runs" / r["trial_id"] / "summary.json").is_file() for r in rows)
    # the streamed features (the default) give what the in-memory path gives, and leave no files behind
    spec = StudySpec.from_dict(vci_transfer_study("tiny"))
    group = spec.groups[1]
    cfg = spec.run_config(group, group.values[0], spec.seeds[0])
    in_memory = evaluate_run(tmp_path / "runs" / rows[3]["trial_id"], cfg, spec.downstream, spec.probe, stream=False)
    for key in ("acc_heldout", "acc_rot90", "pretrain_accuracy", "mlog"):
        assert float(rows[3][key]) == pytest.approx(in_memory[key], abs=1e-12)
    for key in PAPER_METRICS:  # accumulated over row chunks of the file vs in one update
        assert float(rows[3][key]) == pytest.approx(in_memory[key], rel=1e-10)
    assert not list((tmp_path / "runs").glob("*/features-*"))
    # finished runs are reused: a second run retrains nothing and reproduces the table
    mtimes = {p: p.stat().st_mtime_ns for p in (tmp_path / "runs").glob("*/checkpoints/last.pt")}
    run("vci-transfer", tmp_path, scale="tiny")
    assert {p: p.stat().st_mtime_ns for p in mtimes} == mtimes
    assert list(csv.DictReader((tmp_path / "table.csv").open())) == rows


# ------------------------------------------------------------------------------------------------- the CLI
def test_cli_probe_matches_library(tmp_path):
    import json

    from typer.testing import CliRunner

    from nclab.cli import app
    from nclab.metrics import collapse_report
    from nclab.stats import ClassStats

    rng = np.random.default_rng(7)
    y = np.repeat(np.arange(4), 50)  # balanced: the default weighting's metrics without an imbalance warning
    H = rng.normal(size=(200, 6)) + 2 * rng.normal(size=(4, 6))[y]
    np.save(tmp_path / "H.npy", H)
    np.save(tmp_path / "y.npy", y)
    task = tmp_path / "task"
    task.mkdir()
    Xtr, ytr = _blobs(K=3, d=6, N=150, sep=1.0, seed=8)
    Xte, yte = _blobs(K=3, d=6, N=90, sep=1.0, seed=9)
    for split, (X, lab) in {"train": (Xtr, ytr), "test": (Xte, yte)}.items():
        np.save(task / f"{split}_features.npy", X.astype(np.float32))
        np.save(task / f"{split}_labels.npy", lab)
    res = CliRunner().invoke(
        app,
        [
            "probe",
            str(tmp_path / "H.npy"),
            str(tmp_path / "y.npy"),
            "-t",
            f"t={task}",
            "-p",
            "0.8",
            "--lams",
            "1e-3:1:4",
            "-f",
            "json",
        ],
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    ref = linear_probe((Xtr.astype(np.float32), ytr), (Xte.astype(np.float32), yte), lams=np.logspace(-3, 0, 4))
    assert out["tasks"]["t"]["accuracy"] == ref.accuracy and out["tasks"]["t"]["lam"] == ref.lam
    assert out["mlog"] == pytest.approx(mlog([ref.accuracy], 0.8), abs=1e-12)
    assert out["metrics"]["vci"] == pytest.approx(collapse_report(ClassStats.from_arrays(H, y))["vci"], rel=1e-9)
    bad = CliRunner().invoke(app, ["probe", str(tmp_path / "H.npy"), str(tmp_path / "y.npy"), "-t", "nofolder"])
    assert bad.exit_code != 0 and "NAME=FOLDER" in bad.output


def test_partial_pearson_is_the_textbook_partial_correlation():
    from nclab.experiments.correlation import partial_pearson

    rng = np.random.default_rng(0)
    z = rng.normal(size=12)
    x, y = z + rng.normal(size=12), -2 * z + rng.normal(size=12)
    r = np.corrcoef([x, y, z])
    textbook = (r[0, 1] - r[0, 2] * r[1, 2]) / np.sqrt((1 - r[0, 2] ** 2) * (1 - r[1, 2] ** 2))
    assert partial_pearson(x, y, z) == pytest.approx(textbook, abs=1e-12)
    # MLOG = MLO - logit(p_0): controlling for logit(p_0), MLOG and MLO give the same partial r
    assert partial_pearson(x, y - z, z) == pytest.approx(partial_pearson(x, y, z), abs=1e-12)
    assert np.isnan(partial_pearson(x[:3], y[:3], z[:3]))  # residuals of 3 points on a line: +-1, no evidence
    assert np.isnan(partial_pearson(2 * z + 1, y, z))  # x is a function of z: nothing left to correlate


def test_vci_transfer_cpu_design():
    from nclab.experiments.xu_liu2023.experiments import vci_transfer_study

    spec = vci_transfer_study("cpu")
    assert len(spec["seeds"]) >= 3
    classes = spec["base"]["data"]["options"]["classes"]
    d = spec["base"]["model"]["options"]["hidden"]
    assert (len(classes) - 1) / d == pytest.approx(999 / 2048, abs=0.02)  # the paper's (K - 1) / d
    lam = next(g for g in spec["groups"] if g["name"] == "lambda")
    assert lam["set"]["loss.cosreg_variant"] == "pairs_over_n"


def test_make_task_refuses_an_unknown_score() -> None:
    from nclab.transfer.study import make_task

    # the task's score is the probe's Literal: a misspelt one is named when the task is built, not at the probe
    with pytest.raises(ValueError, match="downstream 'd': score must be one of 'top1', 'mean_per_class', got 'top5'"):
        make_task({"name": "d", "dataset": "digits", "per_class": 10, "score": "top5"}, (1, 8, 8))


def test_converged_settings_leave_out_a_setting_that_missed_its_target():
    """The summariser on hand-made rows: tau = 0.1 did not converge (2 of 3 seeds), so it is recorded with its
    means and left out of r and of the spread over seeds; the claims recompute r from the recorded means."""
    from nclab.experiments import claims as pc
    from nclab.experiments.xu_liu2023.experiments import converged_settings

    rng = np.random.default_rng(0)
    rows = []
    for t, base in ((0.1, 0.9), (0.25, 0.3), (0.5, 0.5), (1.0, 0.7)):
        for seed in range(3):
            vci = base + 0.01 * seed
            rows.append({
                "run": f"tau={t}-s{seed}", "group": "tau", "value": t, "seed": seed, "vci": vci, "nc1": vci,
                "trace_ratio": rng.random(), "within_class_cosine": rng.random(),
                "mlog": (-1.0 if t == 0.1 else vci) + 0.05 * rng.standard_normal(),
                "mlo": vci + 1.0 + 0.05 * rng.standard_normal(),
                "pretrain_accuracy": 0.76 if t == 0.1 else 0.85,
            })  # fmt: skip
    converged = {r["run"]: not (r["value"] == 0.1 and r["seed"] > 0) for r in rows}
    out = converged_settings(rows, converged)
    tau = out["setting_means"]["tau"]
    assert [(m["value"], m["runs"], m["converged"]) for m in tau] == [
        (0.1, 3, 1),
        (0.25, 3, 3),
        (0.5, 3, 3),
        (1.0, 3, 3),
    ]
    assert tau[0]["p0"] == 0.76 and tau[0]["vci"] == pytest.approx(0.91, abs=1e-6)
    assert tau[1]["mlog"] == pytest.approx(np.mean([r["mlog"] for r in rows if r["value"] == 0.25]), abs=1e-6)
    assert out["dropped_settings"]["tau"] == ["tau = 0.1: 1 of 3 runs reached their target"]
    kept = [m for m in tau if m["value"] != 0.1]
    r = np.corrcoef([m["vci"] for m in kept], [m["mlog"] for m in kept])[0, 1]
    assert out["pearson_r_converged"]["tau/vci"] == pytest.approx(r, abs=2e-3) and r > 0.9
    per_seed = [
        np.corrcoef(*np.array([(q["vci"], q["mlog"]) for q in rows if q["seed"] == s and q["value"] != 0.1]).T)[0, 1]
        for s in range(3)
    ]
    assert out["pearson_r_sd_converged"]["tau/vci"] == pytest.approx(np.std(per_seed, ddof=1), abs=2e-3)
    # every run is recorded, so the spread can be recomputed from the summary alone, and MLO gets its own spread
    assert len(out["per_run"]) == len(rows) and sum(not q["converged"] for q in out["per_run"]) == 2
    kept_runs = [q for q in out["per_run"] if q["value"] != 0.1]
    per_seed_file = [
        np.corrcoef(*np.array([(q["vci"], q["mlog"]) for q in kept_runs if q["seed"] == s]).T)[0, 1] for s in range(3)
    ]
    assert out["pearson_r_sd_converged"]["tau/vci"] == pytest.approx(np.std(per_seed_file, ddof=1), abs=1e-3)
    per_seed_mlo = [
        np.corrcoef(*np.array([(q["vci"], q["mlo"]) for q in kept_runs if q["seed"] == s]).T)[0, 1] for s in range(3)
    ]
    assert out["pearson_r_sd_converged"]["tau/vci/mlo"] == pytest.approx(np.std(per_seed_mlo, ddof=1), abs=1e-3)
    # over every setting the sign is the other one: the unconverged setting decided it
    every = np.corrcoef([m["vci"] for m in tau], [m["mlog"] for m in tau])[0, 1]
    assert every < 0
    # the claim reads the recorded means and names the dropped setting
    v, _, note = pc.SettingR("tau", "vci").read(out)
    assert v == pytest.approx(r, abs=1e-4) and "tau = 0.1: 1 of 3 runs reached their target, p0 0.76" in note
