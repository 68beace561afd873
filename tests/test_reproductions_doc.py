"""docs/reproductions.md and the paper claims: the page equals what its result files render, no result file is
stale, the staleness check fires when an experiment's code changes, every result file is sealed and valid (and a
bad one is refused in one line), and the criteria give the verdicts they say. The generator is
scripts/reproductions_doc.py, outside the installed package.
"""

from __future__ import annotations

import importlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nclab.experiments import claims as pc
from nclab.experiments.han2022 import paper as han_paper
from nclab.experiments.registry import all_claims
from nclab.experiments.xu_liu2023 import paper as xu_paper

ROOT = Path(__file__).resolve().parents[1]
# the generator lives beside its command in scripts/, outside the installed package (it runs git)
sys.path.insert(0, str(ROOT / "scripts"))
rp = importlib.import_module("reproductions_doc")


def _git_ok(root: Path) -> bool:
    if shutil.which("git") is None or not (root / ".git").exists():
        return False
    shallow = subprocess.run(["git", "-C", str(root), "rev-parse", "--is-shallow-repository"], capture_output=True)
    return shallow.returncode == 0 and shallow.stdout.strip() == b"false"


needs_git = pytest.mark.skipif(not _git_ok(ROOT), reason="needs a full git checkout (a commit lookup per result file)")


# ------------------------------------------------------------------------------------------------ the page
def test_doc_table_is_what_the_result_files_render():
    assert rp.generated_part(ROOT) == rp.render(ROOT), (
        "run: PYTHONPATH=src python scripts/reproductions.py --render-only"
    )


@needs_git
def test_no_result_file_is_stale():
    """A result file computed before its experiment's code last changed must be re-run (see the message)."""
    old = rp.stale(ROOT)
    assert not old, "stale rows (re-run: python scripts/reproductions.py --only NAME): " + "; ".join(
        f"{name}: {', '.join(files)}" for name, files in old.items()
    )


def test_every_result_file_is_well_formed_and_every_claim_experiment_has_dependencies():
    results = rp.read_results(ROOT)
    deps = rp.code_dependencies()
    for name, res in results.items():
        assert (
            res.scale == "cpu" and len(res.commit) == 40 and res.command.startswith("python scripts/reproductions.py")
        )
        assert name in deps
    for claim in all_claims():
        if claim.experiment is not None:
            assert claim.experiment in deps, claim.id
            for dep in deps[claim.experiment]:
                # every listed dependency exists (a typo would make the staleness check blind), except the module
                # of an experiment another branch adds
                assert (ROOT / dep).exists() or claim.experiment == "resnet-depth", dep


def test_missing_result_file_renders_not_yet_computed(tmp_path):
    (tmp_path / "docs").mkdir()
    text = rp.render(tmp_path)
    rows = [r for r in rp.claim_rows({}) if r["experiment"] == "vci-transfer"]
    assert rows and all(r["ours"] == rp.NOT_YET and r["verdict"] == "not measured" for r in rows)
    cpu = {c.experiment for c in all_claims() if c.experiment is not None} - {"mse-nc-benchmarks", "pfc-table1"}
    assert text.count(rp.NOT_YET) == sum(c.experiment in cpu for c in all_claims()) + len(cpu) + 1
    # every cpu-measured claim's row, every such experiment's line in the result-file table, the 000 correlations
    gpu = next(r for r in rp.claim_rows({}) if r["claim"] == "han2022-table1-paper-protocol")
    assert gpu["ours"].startswith("no cpu scale: a paper-scale (GPU) experiment")


def test_rendered_verdict_reads_the_result_file(tmp_path):
    """A result file's summary decides the row: a fake summary with VCI's sign right in one group only is not
    reproduced (the paper's claim holds in both groups: a conjunction)."""

    def settings(vci, mlog, converged=(3, 3, 3)):
        return [
            {"value": v, "runs": 3, "converged": c, "vci": x, "mlog": y, "mlo": y, "p0": 0.85}
            for v, x, y, c in zip((0.25, 0.5, 1.0), vci, mlog, converged, strict=True)
        ]

    res = rp.ResultFile(
        "vci-transfer", "cpu", 0, "0" * 40, "python scripts/reproductions.py --only vci-transfer", "d", 1.0,
        {"setting_means": {"tau": settings((0.3, 0.2, 0.1), (0.1, 0.2, 0.3)),
                           "lambda": settings((0.1, 0.2, 0.3), (0.1, 0.2, 0.35))},
         "pearson_r_sd_converged": {"tau/vci": 0.1, "lambda/vci": 0.1}},
    )  # fmt: skip
    res.write(tmp_path)
    assert rp.read_results(tmp_path)["vci-transfer"] == res
    row = next(r for r in rp.claim_rows(rp.read_results(tmp_path)) if r["claim"] == "xu2023-fig7-vci")
    assert row["verdict"] == "not reproduced"
    assert row["ours"].startswith("r(vci, MLOG), tau = -1.000 over 3 settings, sd over seeds 0.1; r(vci, MLOG), ")
    # a setting whose runs missed their target is left out and named: two settings decide nothing
    res.summary["setting_means"]["tau"][0]["converged"] = 2
    res.write(tmp_path)
    row = next(r for r in rp.claim_rows(rp.read_results(tmp_path)) if r["claim"] == "xu2023-fig7-vci")
    assert row["verdict"] == "inconclusive"
    assert "dropped 1 of 3 settings (tau = 0.25: 2 of 3 runs reached their target, p0 0.85)" in row["ours"]
    # a result file of before the per-setting values reads not measured, and says why
    res = rp.ResultFile("vci-transfer", "cpu", 0, "0" * 40, "c", "d", 1.0, {"pearson_r": {"tau/vci": -0.978}})
    res.write(tmp_path)
    row = next(r for r in rp.claim_rows(rp.read_results(tmp_path)) if r["claim"] == "xu2023-fig7-vci")
    assert row["verdict"] == "not measured" and "summary lacks per-setting values" in row["ours"]


def test_transfer_table_puts_ours_beside_the_papers_correlations():
    res = rp.ResultFile(
        "vci-transfer", "cpu", 0, "0" * 40, "c", "d", 1.0,
        {"seeds": 3, "pearson_r": {"lambda/vci": 0.907}, "pearson_r_sd": {"lambda/vci": 0.05},
         "pearson_r_mlo": {"lambda/vci": -0.99}, "partial_r_p0": {"lambda/vci": 0.1}},
    )  # fmt: skip
    lines = rp.transfer_table(res)
    ours = next(line for line in lines if line.startswith("| lambda | ours"))
    paper = next(line for line in lines if line.startswith("| lambda | paper"))
    assert ours.endswith("| +0.907 (0.050) / -0.990 / +0.100 |") and ours.count("- (-) / - / -") == 3
    # the paper's VCI cell: r with MLOG, with MLO, partial given logit p_0, from Tables 1-2
    assert paper.endswith("| +0.975 / +0.961 / +0.983 |")
    assert rp.NOT_YET in " ".join(rp.transfer_table(None))
    # the converged settings' r beside it, and the settings left out, when the result file has them
    res.summary.update(
        pearson_r_converged={"lambda/vci": 0.5}, pearson_r_sd_converged={"lambda/vci": 0.2},
        dropped_settings={"tau": ["tau = 0.1: 0 of 3 runs reached their target"], "lambda": []},
    )  # fmt: skip
    lines = rp.transfer_table(res)
    kept = next(line for line in lines if line.startswith("| lambda | ours, converged"))
    assert kept.endswith("| +0.500 (0.200) |")
    assert "Settings left out of the converged rows (and of the claims): tau = 0.1: 0 of 3 runs reached" in "".join(
        lines
    )


# ------------------------------------------------------------------------------------------------ staleness
def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_stale_fires_when_an_experiments_code_changes_after_its_commit(tmp_path):
    repo = tmp_path
    _git(repo, "init", "-q")
    module = repo / "src/nclab/experiments/tirer_bruna2022/experiments.py"
    ufm = repo / "src/nclab/ufm/closed_forms.py"
    other = repo / "src/nclab/report/html.py"
    for f in (module, ufm, other):
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text("x = 1\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "code")
    computed_at = _git(repo, "rev-parse", "HEAD")
    rp.ResultFile("ufm-thm51", "cpu", 0, computed_at, "c", "d", 1.0, {"slope": -0.5}).write(repo)
    assert rp.stale(repo) == {}
    other.write_text("x = 2\n")  # report code is not a dependency: still current
    _git(repo, "commit", "-qam", "report")
    assert rp.stale(repo) == {}
    ufm.write_text('"""The closed forms, documented."""\n\nx = 1  # a comment\n')  # no code changed: current
    _git(repo, "commit", "-qam", "docs")
    assert rp.stale(repo) == {}
    ufm.write_text("x = 3\n")  # an uncommitted edit already makes the row stale: the code on disk is not its code
    assert rp.stale(repo) == {"ufm-thm51": ["src/nclab/ufm/closed_forms.py"]}
    assert rp.uncommitted(repo, rp.code_dependencies()["ufm-thm51"]) == ["src/nclab/ufm/closed_forms.py"]
    _git(repo, "commit", "-qam", "ufm")
    assert rp.stale(repo) == {"ufm-thm51": ["src/nclab/ufm/closed_forms.py"]}
    module.write_text("x = 4\n")
    _git(repo, "commit", "-qam", "module")
    assert rp.stale(repo) == {
        "ufm-thm51": ["src/nclab/experiments/tirer_bruna2022/experiments.py", "src/nclab/ufm/closed_forms.py"]
    }
    # reverting the content makes it current again: the check compares content, not commit counts
    module.write_text("x = 1\n")
    ufm.write_text("x = 1\n")
    _git(repo, "commit", "-qam", "revert")
    assert rp.stale(repo) == {}
    rp.ResultFile("ufm-thm51", "cpu", 0, "f" * 40, "c", "d", 1.0, {}).write(repo)
    with pytest.raises(ValueError, match="not in the repository"):
        rp.stale(repo)


def test_stale_fires_through_the_commit_lookup(monkeypatch):
    """The real repository's check, with git's answer replaced: a changed dependency marks exactly that row."""
    results = {
        "ufm-thm51": rp.ResultFile("ufm-thm51", "cpu", 0, "a" * 40, "c", "d", 1.0, {}),
        "gnc-assignment": rp.ResultFile("gnc-assignment", "cpu", 0, "b" * 40, "c", "d", 1.0, {}),
    }

    def fake_changed(root, commit, paths):
        return ["src/nclab/ufm/solvers.py"] if "src/nclab/ufm/" in paths else []

    monkeypatch.setattr(rp, "changed_since", fake_changed)
    assert rp.stale(ROOT, results) == {"ufm-thm51": ["src/nclab/ufm/solvers.py"]}


def test_record_refuses_uncommitted_code(monkeypatch, tmp_path):
    monkeypatch.setattr(rp, "uncommitted", lambda root, paths: ["src/nclab/ufm/solvers.py"])
    with pytest.raises(RuntimeError, match="uncommitted changes"):
        rp.record(tmp_path, "ufm-thm51", command="c")
    assert not (tmp_path / rp.RESULTS_DIR).exists()


# ------------------------------------------------------------------------------------------------ the criteria
def test_paper_correlations_recomputed_from_table_2():
    """The Pearson r of [Xu & Liu 2023, Table 2], as fidelity-2.md recomputed them independently."""
    expected = {
        ("tau", "nc1"): 0.986, ("lambda", "nc1"): -0.415, ("tau", "trace_ratio"): 1.000,
        ("lambda", "trace_ratio"): -0.996, ("tau", "within_class_cosine"): -0.989,
        ("lambda", "within_class_cosine"): 0.978, ("tau", "vci"): 0.995, ("lambda", "vci"): 0.975,
    }  # fmt: skip
    for (group, metric), r in expected.items():
        assert xu_paper.xu2023_paper_r(group, metric) == pytest.approx(r, abs=5e-4), (group, metric)
    # p_0 against MLOG (the review's -0.951 / -0.564) through the same helper on the accuracy column
    assert xu_paper.xu2023_paper_r("tau", "accuracy") == pytest.approx(-0.951, abs=5e-4)
    assert xu_paper.xu2023_paper_r("lambda", "accuracy") == pytest.approx(-0.564, abs=5e-4)


def test_partial_correlation_removes_the_control():
    from nclab.experiments.correlation import partial_pearson, pearson

    # y = 2 x + z exactly: controlling for z leaves r(x, y) = 1 although z scrambles the raw correlation
    x = [0.0, 1.0, 2.0, 3.0, 4.0]
    z = [5.0, -3.0, 4.0, -6.0, 1.0]
    y = [2 * a + b for a, b in zip(x, z, strict=True)]
    assert partial_pearson(x, y, z) == pytest.approx(1.0, abs=1e-12)
    assert abs(pearson(x, y)) < 0.5


@pytest.mark.parametrize(
    ("criterion", "summary", "outcome"),
    [
        (pc.Sign("r", +1), {"r": 0.1}, "pass"),
        (pc.Sign("r", +1), {"r": -0.1}, "fail"),
        (pc.Sign("r", -1), {"r": 0.0}, "fail"),
        (pc.Bound("v", 0.1), {"v": 0.1}, "pass"),
        (pc.Bound("v", 0.1, partly=0.5), {"v": 0.3}, "partial"),
        (pc.Bound("v", 0.1, partly=0.5), {"v": 0.6}, "fail"),
        (pc.Bound("v", 1.0, below=False, partly=0.0), {"v": 0.67}, "partial"),
        (pc.Bound("v", 1.0, below=False), {"v": 1.5}, "pass"),
        (pc.Order("a", "b"), {"a": 1.0, "b": 2.0}, "pass"),
        (pc.Order("a", "b"), {"a": 2.0, "b": 2.0}, "fail"),
        (pc.Close("s", -0.5, atol=0.05), {"s": -0.508}, "pass"),
        (pc.Close("s", -0.5, atol=0.05, partly_rtol=0.5), {"s": -0.7}, "partial"),
        (pc.Close("L", target_key="L*", rtol=1e-8, partly_rtol=0.05), {"L": 0.110045, "L*": 0.107736}, "partial"),
        (pc.Close("n", 15), {"n": 15}, "pass"),
        (pc.Close("n", 15), {"n": 60}, "fail"),
        (pc.Close("ok", True), {"ok": False}, "fail"),
        (pc.Monotone(("s", "*", "p"), +1), {"s": [{"p": 1.0}, {"p": 1.0}, {"p": 2.0}]}, "pass"),
        (pc.Monotone("p", -1), {"p": [0.796, 0.839, 0.8]}, "fail"),
    ],
)
def test_criteria(criterion, summary, outcome):
    assert criterion.check(summary)[0] == outcome


def test_median_gain_reads_the_paper_protocol_runs():
    """004 Table 1 at paper scale: the claim's keys are mse-nc-benchmarks' run labels, and the paper's own table
    passes its criterion (its caption: median +0.962, mean +1.833 points; from the rounded cells 0.96 and 1.833)."""
    from nclab.experiments.han2022.experiments import han2022_configs

    assert set(han_paper._HAN2022_MSE_RUNS) == {k for k in han2022_configs() if k.endswith("/mse")}
    claim = next(c for c in all_claims() if c.id == "han2022-table1-paper-protocol")
    table = [(99.23, 99.59), (99.16, 99.70), (99.62, 99.70), (92.76, 92.95), (93.55, 93.76), (90.56, 92.95),
             (89.35, 93.91), (85.18, 92.65), (95.61, 95.23), (83.13, 84.54), (75.43, 76.39), (91.77, 91.78),
             (60.43, 67.24), (59.35, 60.56), (58.74, 60.41)]  # fmt: skip
    assert float(np.mean([f - z for z, f in table])) == pytest.approx(1.833, abs=5e-4)
    summary = {}
    for run, (zero, final) in zip(han_paper._HAN2022_MSE_RUNS, table, strict=True):
        summary[f"{run} seed0: test error at zero-error epoch"] = (100 - zero) / 100
        summary[f"{run} seed0: test error last"] = (100 - final) / 100
    found = pc.verdict(claim, summary)
    assert found.status == "reproduced" and found.ours == "median 0.0096, 14 of 15 improve"
    worse = {k: (v + 0.05 if k.endswith("last") else v) for k, v in summary.items()}
    assert pc.verdict(claim, worse).status == "not reproduced"
    del summary["svhn/densenet/mse seed0: test error at zero-error epoch"]  # a run that never reached zero error
    assert pc.verdict(claim, summary).ours.startswith("svhn/densenet/mse seed0: test error at zero-error epoch absent")


def test_verdict_aggregation_and_missing_keys():
    claim = pc.Claim("t", "[Wang et al. 2024]", "Fig. 3", "q", "v", (pc.Bound("a", 0), pc.Bound("b", 0)), "x")
    assert pc.verdict(claim, {"a": 0, "b": 0}).status == "reproduced"
    assert pc.verdict(claim, {"a": 0, "b": 5}).status == "partly"
    assert pc.verdict(claim, {"a": 2, "b": 5}).status == "not reproduced"
    missing = pc.verdict(claim, {"a": 0})
    assert missing.status == "not measured" and missing.ours.startswith("b absent (a result file older")
    assert pc.verdict(claim, None).status == "not measured"
    undefined = pc.verdict(claim, {"a": 0, "b": float("nan")})  # a nan decides nothing, and reads as a word
    assert (undefined.status, undefined.ours) == ("not measured", "b undefined")
    unreached = pc.verdict(claim, {"a": 0, "b": None})  # e.g. a ratio at a zero-error epoch never reached
    assert (unreached.status, unreached.ours) == ("not measured", "b not reached")


def test_the_claims_cover_every_paper_and_name_registered_experiments():
    from nclab.experiments.registry import list_experiments

    registered = {e.name for e in list_experiments()} | {"resnet-depth"}  # resnet-depth: the studies branch
    keys = {key for _, key, _ in rp.PAPERS}
    assert {c.paper for c in all_claims()} == keys
    assert len({c.id for c in all_claims()}) == len(all_claims())
    for c in all_claims():
        assert c.experiment is None or c.experiment in registered, c.id
        assert c.id.startswith(pc.ID_PREFIX[c.paper] + "-"), c.id
        assert c.checks or c.compute is None, c.id


# ------------------------------------------------------------------------------------------------ the run
def test_experiment_run_adds_the_verdicts_to_summary_and_report(tmp_path):
    from nclab.experiments import run

    summary = run("gnc-assignment", tmp_path, scale="tiny")
    claims = summary["paper_claims"]
    assert [c["claim"] for c in claims] == ["jiang2024-fig4-assignment-counts", "jiang2024-hexagon-distance-structures"]
    assert claims[0]["verdict"] == "reproduced" and "fifteen distinct class assignments" in claims[0]["paper_value"]
    assert claims[1]["kind"] == "check" and claims[1]["verdict"] == "holds"
    assert json.loads((tmp_path / "summary.json").read_text())["paper_claims"] == claims
    report = (tmp_path / "report.html").read_text()
    assert report.count('<h2 id="paper-vs-ours">') == 1 and "fifteen distinct class assignments" in report
    run("gnc-assignment", tmp_path, scale="tiny")  # a re-run into the same folder: one section, not two
    assert (tmp_path / "report.html").read_text().count('<h2 id="paper-vs-ours">') == 1


# ------------------------------------------------------------------------------------------------ the seal
@needs_git
def test_every_result_file_is_sealed_valid_and_present():
    """The page's evidence: every result file parses, matches its checksum, is a cpu-scale run of the experiment it
    is named after at a commit of this repository, holds numbers where the claims read numbers; none is missing."""
    invalid, missing = rp.problems(ROOT, staleness=False)
    assert not invalid, "\n".join(invalid.values())
    assert not missing, "\n".join(missing.values())


def test_written_result_file_carries_the_checksum_of_its_content(tmp_path):
    res = rp.ResultFile("ufm-thm51", "cpu", 0, "a" * 40, "c", "d", 1.5, {"slope": np.float64(-0.5), "n": np.int64(3)})
    path = res.write(tmp_path)
    raw = json.loads(path.read_text())
    assert raw.pop("sha256") == rp.checksum(raw) and raw["summary"] == {"slope": -0.5, "n": 3}
    assert rp.ResultFile.read(path).summary == {"slope": -0.5, "n": 3}
    # the checksum covers every field: any change of a value, or of its type, changes it
    assert rp.checksum({**raw, "seed": 1}) != rp.checksum(raw)
    assert rp.checksum({**raw, "summary": {"slope": "-0.5", "n": 3}}) != rp.checksum(raw)


def _git_repo(root: Path) -> str:
    _git(root, "init", "-q")
    (root / "README").write_text("x\n")
    _git(root, "add", ".")
    _git(root, "commit", "-q", "-m", "code")
    return _git(root, "rev-parse", "HEAD")


GOOD_SUMMARY = {"slope": -0.5075, "factor": 0.66, "errors": [0.16, 0.09]}


@pytest.fixture
def page(tmp_path, monkeypatch):
    """A repository whose page needs one result file, ufm-thm51's, sealed and current; the page rendered from it."""
    if shutil.which("git") is None:
        pytest.skip("needs git")
    commit = _git_repo(tmp_path)
    monkeypatch.setattr(rp, "expected", lambda root: ["ufm-thm51"])
    rp.ResultFile("ufm-thm51", "cpu", 0, commit, "c", "d", 1.0, GOOD_SUMMARY).write(tmp_path)
    (tmp_path / rp.DOC).write_text(f"# Reproductions\n\n{rp.BEGIN}\n{rp.END}\n\nafter\n")
    rp.write_doc(tmp_path)
    return tmp_path


def _edit(path: Path, change, *, reseal: bool) -> None:
    """Apply ``change`` to the result file's JSON; ``reseal``: as the generator would write it (a new checksum)."""
    data = json.loads(path.read_text())
    seal = data.pop("sha256")
    change(data)
    data["sha256"] = rp.checksum(data) if reseal else seal
    path.write_text(json.dumps(data, indent=2))


def _set(*keys_value):
    *keys, value = keys_value

    def change(d):
        for k in keys[:-1]:
            d = d[k]
        d[keys[-1]] = value

    return change


def _cli(root: Path, capsys, *args: str) -> tuple[int, str, str]:
    rc = rp.main([*args, "--root", str(root)])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_a_good_result_file_passes(page, capsys):
    assert _cli(page, capsys, "--check") == (0, "", "")
    before = (page / rp.DOC).read_text()
    rc, _, err = _cli(page, capsys, "--render-only")
    assert (rc, err) == (0, "") and (page / rp.DOC).read_text() == before
    assert "| **reproduced** |" in before  # ufm-thm51's slope -0.5075 against the theorem's -1/2


# each of the third reliability probe's reproductions-generator rows, on a copy: the refusal (one line, exit 2,
# nothing written) and the words that name the problem
F = "docs/reproductions/ufm-thm51.json"
REFUSALS = {
    "edited value (RP1, RP2)": (_set("summary", "slope", -0.9), False, "does not match its checksum"),
    "edited scale (RP3)": (_set("scale", "tiny"), False, "does not match its checksum"),
    "wrong scale, sealed (RP3)": (_set("scale", "tiny"), True, "a 'tiny'-scale run, but the page shows 'cpu' scale"),
    "commit not in the repository (RP4)": (_set("commit", "0" * 40), True, "is not in the repository"),
    "wrong experiment (RP6)": (_set("experiment", "ufm-figures"), True, "records experiment 'ufm-figures'"),
    "string value (RP8)": (_set("summary", "slope", "-0.5"), True, "summary value slope is a string ('-0.5')"),
    "boolean for a number": (_set("summary", "slope", True), True, "summary value slope is a boolean"),
    "string in a field": (_set("seed", "0"), True, "'seed' is '0' (str), not an integer"),
    "no checksum": (lambda d: None, None, "carries no checksum"),
}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_a_bad_result_file_is_refused_naming_it(page, capsys, case):
    change, reseal, words = REFUSALS[case]
    path = page / F
    if reseal is None:
        data = json.loads(path.read_text())
        del data["sha256"]
        path.write_text(json.dumps(data))
    else:
        _edit(path, change, reseal=reseal)
    before = (page / rp.DOC).read_text()
    for mode in ("--check", "--render-only"):
        rc, out, err = _cli(page, capsys, mode)
        lines = err.splitlines()
        assert rc == 2, (mode, out, err)
        assert lines[0].startswith(f"error: {page / F}: ") and words in lines[0], lines[0]
        assert "Traceback" not in err and out == ""
        assert (page / rp.DOC).read_text() == before  # never a page resting on a bad file
    with pytest.raises(rp.ResultFileError, match=r"ufm-thm51\.json"):
        invalid, _ = rp.problems(page)
        raise rp.ResultFileError(invalid["ufm-thm51"])


def test_a_cut_short_result_file_is_named(page, capsys):
    """RP5: a result file cut at 200 bytes: not a JSONDecodeError traceback but the file, line and column."""
    path = page / F
    path.write_bytes(path.read_bytes()[:200])
    rc, _, err = _cli(page, capsys, "--check")
    assert rc == 2 and f"{path}: not valid JSON (" in err and "line " in err and "Traceback" not in err
    rc, _, err = _cli(page, capsys, "--render-only")
    assert rc == 2 and "not written" in err


def test_a_deleted_result_file_is_reported_not_rendered(page, capsys):
    """RP7: a deleted result file: --check exits 1 naming it (out of date: run it), --render-only refuses; the
    claims do not silently become "not measured"."""
    (page / F).unlink()
    before = (page / rp.DOC).read_text()
    rc, out, err = _cli(page, capsys, "--check")
    assert rc == 1 and f"{page / F}: missing" in out and "--only ufm-thm51" in out
    rc, out, err = _cli(page, capsys, "--render-only")
    assert rc == 2 and f"error: {page / F}: missing" in err and (page / rp.DOC).read_text() == before


def test_a_typed_value_never_becomes_a_verdict():
    """The criteria read the summary strictly: a string never passes for a number, nor a boolean for one, while a
    boolean stays a boolean where the claim asks for one (gnc-bounds-vs-d's bounds_hold == true)."""
    res = rp.ResultFile("ufm-thm51", "cpu", 0, "a" * 40, "c", "d", 1.0, {**GOOD_SUMMARY, "slope": "-0.5"})
    with pytest.raises(rp.ResultFileError, match=r"ufm-thm51.json: summary value slope is a string"):
        rp.check_summary_types(res)
    with pytest.raises(rp.ResultFileError, match="summary value slope is a string"):
        rp.claim_rows({"ufm-thm51": res})
    good = {"bounds_hold": True, "checked_numerical": 7}
    bounds = rp.ResultFile("gnc-bounds-vs-d", "cpu", 0, "a" * 40, "c", "d", 1.0, good)
    rp.check_summary_types(bounds)
    row = next(r for r in rp.claim_rows({"gnc-bounds-vs-d": bounds}) if r["experiment"] == "gnc-bounds-vs-d")
    assert row["verdict"] == "reproduced" and row["ours"] == "bounds_hold = true; checked_numerical = 7"
    for bad in ({**good, "bounds_hold": "true"}, {**good, "checked_numerical": True}):
        with pytest.raises(rp.ResultFileError, match=r"gnc-bounds-vs-d\.json: summary value"):
            rp.check_summary_types(rp.ResultFile("gnc-bounds-vs-d", "cpu", 0, "a" * 40, "c", "d", 1.0, bad))
    nested = rp.ResultFile("vci-transfer", "cpu", 0, "a" * 40, "c", "d", 1.0, {"pearson_r": {"tau/vci": "-0.9"}})
    with pytest.raises(rp.ResultFileError, match=r"summary value pearson_r\['tau/vci'\] is a string"):
        rp.check_summary_types(nested)


def test_seal_writes_the_checksum_into_old_files_only_when_all_pass(page, capsys):
    path = page / F
    data = json.loads(path.read_text())
    del data["sha256"]
    path.write_text(json.dumps(data, indent=1) + "\n")
    rc, out, err = _cli(page, capsys, "--seal")
    assert rc == 0 and str(path) in out
    assert _cli(page, capsys, "--check") == (0, "", "")
    # an edited sealed file is not resealed; nor is an unsealed one with a wrong scale; nothing is written
    _edit(path, _set("summary", "slope", -0.9), reseal=False)
    text = path.read_text()
    rc, out, err = _cli(page, capsys, "--seal")
    assert rc == 2 and "does not match its checksum" in err and path.read_text() == text
    data["scale"] = "tiny"
    path.write_text(json.dumps(data))
    rc, out, err = _cli(page, capsys, "--seal")
    assert rc == 2 and "'tiny'-scale run" in err and "sha256" not in path.read_text()


def test_a_full_run_redoes_invalid_and_missing_files_only(page, monkeypatch, capsys):
    monkeypatch.setattr(rp, "expected", lambda root: ["ufm-thm51", "gnc-assignment", "ufm-figures"])
    commit = _git(page, "rev-parse", "HEAD")
    rp.ResultFile("ufm-figures", "cpu", 0, commit, "c", "d", 1.0, {}).write(page)
    _edit(page / "docs/reproductions/ufm-figures.json", _set("seconds", 2.0), reseal=False)
    assert rp._targets(page, [], []) == ["gnc-assignment", "ufm-figures"]  # RUN_ORDER: the short one first
    assert "ufm-figures.json: its content does not match" in capsys.readouterr().out
    assert rp._targets(page, [], ["ufm-figures"]) == ["gnc-assignment"]
    assert rp.main(["--only", "no-such-experiment", "--root", str(page)]) == 2
    assert "not registered experiments: no-such-experiment" in capsys.readouterr().err


def test_the_generators_doctests():
    """scripts/ is outside pytest's doctest paths: the generator's examples (code_of, checksum) run here."""
    import doctest

    for module in (rp, importlib.import_module("reproductions_seal")):
        found = doctest.testmod(module)
        assert found.attempted > 0 and found.failed == 0, module.__name__


def test_the_command_outside_a_checkout_is_one_line(tmp_path, capsys):
    assert rp.main(["--check", "--root", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err == f"error: {tmp_path / rp.DOC} not found: run from the repository root, or pass --root\n"
