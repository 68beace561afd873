"""``nclab compare``: many runs (run and sweep directories) overlaid in one HTML report with a tidy table of the runs
(run id + the config keys that differ) beside it; ``metrics.csv`` carries a ``run_id`` column so tables stack."""

import csv

import pytest
import yaml
from typer.testing import CliRunner

from nclab.cli import app
from nclab.io import MetricRow, read_metrics, read_run_id, write_metrics
from nclab.report.compare import differing_keys, find_runs, load_run, runs_table
from nclab.train.sweep import run_sweep

runner = CliRunner()

TINY = {
    "name": "tiny",
    "data": {"name": "digits", "per_class": 12, "test_per_class": 4},
    "model": {"name": "mlp", "options": {"widths": [16, 16]}},
    "train": {"epochs": 2, "batch_size": 32, "threads": 1},
    "measure": {"num_log": 1, "splits": ["train"]},
    "report": False,
}


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cmp")
    (tmp / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    (tmp / "s.yaml").write_text(yaml.safe_dump({"base": "tiny.yaml", "grid": {"optim.lr": [0.01, 0.05]}, "seeds": [1]}))
    run_sweep(tmp / "s.yaml", tmp / "sweep", local=True)
    return tmp / "sweep"


def test_differing_keys_of_nested_configs():
    a = {"optim": {"lr": 0.1, "momentum": 0.9}, "model": {"options": {"widths": [8]}}, "seed": 0}
    b = {"optim": {"lr": 0.1, "momentum": 0.9}, "model": {"options": {"widths": [8, 8]}}, "seed": 0}
    c = {"optim": {"lr": 0.2, "momentum": 0.9}, "model": {"options": {"widths": [8]}}}
    assert differing_keys([a, b]) == ["model.options.widths"]
    assert differing_keys([a, b, c]) == ["optim.lr", "model.options.widths", "seed"]  # c lacks seed
    assert differing_keys([a, a]) == []


def test_run_id_column_lets_tables_stack(sweep_dir):
    pd = pytest.importorskip("pandas")
    runs = find_runs([sweep_dir])
    frames = [pd.read_csv(d / "metrics.csv") for d in runs]
    both = pd.concat(frames)
    assert list(both.columns) == ["run_id", "epoch", "split", "layer", "metric", "value"]
    assert sorted(both["run_id"].unique()) == sorted(d.name for d in runs)  # the trial ids are the run ids
    assert len(both) == sum(len(read_metrics(d)) for d in runs)
    # the old layout (no run_id column) still reads; a table of a run reads the same rows with and without it
    rows = read_metrics(runs[0])
    write_metrics(rows, sweep_dir.parent / "plain")
    assert read_metrics(sweep_dir.parent / "plain") == rows and read_run_id(sweep_dir.parent / "plain") is None
    with pytest.raises(ValueError, match="run_id must be"):
        write_metrics([MetricRow(0, "train", "fc", "nc1", 1.0)], sweep_dir.parent / "bad", run_id="a,b")


def test_compare_command_writes_html_and_tidy_csv(sweep_dir, tmp_path):
    # a third run outside the sweep, with another width: a run directory and a sweep directory together
    extra = tmp_path / "wide"
    (tmp_path / "wide.yaml").write_text(yaml.safe_dump(TINY))
    sets = ["model.options.widths=[24, 24]", "seed=1", "optim.lr=0.05"]
    args = ["train", str(tmp_path / "wide.yaml"), *(a for s in sets for a in ("--set", s)), "--out", str(extra)]
    res = runner.invoke(app, [*args, "--no-progress"])
    assert res.exit_code == 0, res.output
    out = tmp_path / "cmp" / "compare.html"
    res = runner.invoke(app, ["compare", str(sweep_dir), str(extra), "--metric", "nc1", "--out", str(out)])
    assert res.exit_code == 0, res.output
    with open(out.with_suffix(".csv"), newline="") as fh:
        table = list(csv.DictReader(fh))
    assert list(table[0]) == [
        "run_id",
        "run_dir",
        "model.options.widths",
        "optim.lr",
        "zero_error_epoch",
        "last_epoch",
        "nc1_last",
    ]
    assert [r["optim.lr"] for r in table] == ["0.01", "0.05", "0.05"]
    assert [r["model.options.widths"] for r in table] == ["[16, 16]", "[16, 16]", "[24, 24]"]
    for r in table:
        run = load_run(r["run_dir"])
        assert r["run_id"] == run.run_id == read_run_id(r["run_dir"])
        nc1 = {row.epoch: row.value for row in run.rows if row.metric == "nc1" and row.layer == run.penultimate}
        assert float(r["nc1_last"]) == nc1[max(nc1)] and int(r["last_epoch"]) == 2
    page = out.read_text()
    assert (
        page.count("<tr>") == 4 and "config keys that differ between them: <code>model.options.widths, optim.lr" in page
    )
    assert "data:image/png;base64," in page


def test_compare_errors(sweep_dir, tmp_path):
    res = runner.invoke(app, ["compare", str(tmp_path / "nothing"), "--out", str(tmp_path / "c.html")])
    assert res.exit_code == 2 and "no such run or sweep directory" in res.stderr
    (tmp_path / "empty").mkdir()
    res = runner.invoke(app, ["compare", str(tmp_path / "empty"), "--out", str(tmp_path / "c.html")])
    assert res.exit_code == 2 and "holds no run" in res.stderr
    res = runner.invoke(app, ["compare", str(sweep_dir), "--metric", "nc9", "--out", str(tmp_path / "c.html")])
    assert res.exit_code == 2 and "no run measured 'nc9' at layer 'penultimate'" in res.stderr and "nc1" in res.stderr
    assert not (tmp_path / "c.html").exists()
    table = runs_table([load_run(d) for d in find_runs([sweep_dir])])
    assert [list(r)[:3] for r in table] == [["run_id", "run_dir", "optim.lr"]] * 2
