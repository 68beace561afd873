"""The run-facing command line and its outputs: ``nclab metrics list``, progress lines when piped, user errors
(exit code 2, one paragraph, no half-made run folder), the demo's summary and overwrite guard."""

import csv
import io
import json
import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from nclab.cli import app
from nclab.io import read_metrics
from nclab.metrics import REGISTRY
from nclab.metrics.glossary import GLOSSARY, describe

runner = CliRunner()
REFERENCES = (Path(__file__).resolve().parents[1] / "docs" / "references.md").read_text()


def test_glossary_covers_the_registry_and_cites_the_bibliography():
    assert set(GLOSSARY) == set(REGISTRY)
    keys = set(re.findall(r"^\| \*\*\[([^]]+)\]\*\*", REFERENCES, flags=re.M))
    for name, (label, definition, citation) in GLOSSARY.items():
        assert definition, name
        assert re.fullmatch(r"\[([^],]+)(, [^]]+)?\]", citation) and citation[1:].split(",")[0].rstrip("]") in keys
        assert label in {"", "NC1", "NC2", "NC3", "NC4", "NC5", "PFC1", "PFC2", "PFC3", "GNC"}
    assert describe("trace_ratio").label == "PFC1" and describe("ncc_accuracy").direction == "higher"
    with pytest.raises(KeyError, match="unknown metric 'nc9'"):
        describe("nc9")


def test_metrics_list_formats():
    res = runner.invoke(app, ["metrics", "list", "-f", "json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert [r["name"] for r in rows] == list(REGISTRY)
    nc1 = next(r for r in rows if r["name"] == "nc1")
    assert nc1["label"] == "NC1" and nc1["direction"] == "lower" and "Sigma_W" in nc1["definition"]
    res = runner.invoke(app, ["metrics", "list", "--format", "csv"])
    got = list(csv.DictReader(io.StringIO(res.stdout)))
    assert len(got) == len(REGISTRY) and got[0].keys() >= {"name", "label", "direction", "definition", "citation"}
    res = runner.invoke(app, ["metrics", "list"])
    assert res.exit_code == 0 and "PFC3" in res.stdout


TINY = {
    "name": "tiny",
    "data": {"name": "digits", "per_class": 12, "test_per_class": 4},
    "model": {"name": "mlp", "options": {"widths": [16, 16]}},
    "train": {"epochs": 2, "batch_size": 32, "threads": 1},
    "measure": {"num_log": 1},
    "report": False,
}


@pytest.fixture
def tiny_config(tmp_path):
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(TINY))
    return path


@pytest.mark.parametrize(
    ("override", "needle"),
    [
        ("data.per_class=100000", "per_class=100000"),  # impossible sizes
        ("measure.layers=[nosuchlayer]", "nosuchlayer"),  # unknown layer
        ("optim.momentum=2", "optim.momentum"),  # bad config
    ],
)
def test_user_errors_exit_2_with_one_paragraph_and_leave_no_folder(tiny_config, tmp_path, override, needle):
    out = tmp_path / "run"
    res = runner.invoke(app, ["train", str(tiny_config), "--set", override, "--out", str(out), "--no-progress"])
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output and res.output.count("\n") <= 6
    assert "error:" in res.stderr and needle in res.stderr
    assert not out.exists()  # nothing was trained: no half-made run folder
    debug = runner.invoke(app, ["--debug", "train", str(tiny_config), "--set", override, "--out", str(out)])
    assert debug.exit_code == 2 and "Traceback" in debug.stderr


def test_missing_dataset_in_experiment_run_is_a_user_error(tmp_path, monkeypatch):
    monkeypatch.setenv("NCLAB_DATA", str(tmp_path / "empty"))
    from nclab.data import DatasetNotFoundError

    def missing(*args, **kwargs):
        raise DatasetNotFoundError("fashion-mnist", [str(tmp_path / "empty")], "IDX files", "apt-get install x")

    monkeypatch.setattr("nclab.train.feeds.load", missing)  # the run data loader of the trainer
    out = tmp_path / "exp"
    res = runner.invoke(app, ["experiment", "run", "fashion-mnist-cnn", "--scale", "tiny", "--out", str(out)])
    assert res.exit_code == 2 and "Traceback" not in res.output and "fashion-mnist" in res.stderr
    assert not (out / "mse").exists()


def test_plain_progress_when_piped_and_run_directory_first(tiny_config, tmp_path):
    out = tmp_path / "some-rather-long-folder-name-that-would-wrap-at-eighty-columns" / "run"
    res = runner.invoke(app, ["train", str(tiny_config), "--out", str(out)])  # CliRunner's streams are no TTY
    assert res.exit_code == 0, res.output
    lines = res.stderr.splitlines()
    assert lines[0] == f"nclab train tiny: run directory {out}"  # printed at the start, whole, on one line
    epoch_lines = [ln for ln in lines if ln.startswith("epoch ")]
    # the first and last epochs always get a line (the throttle keeps batch logs short in between)
    assert epoch_lines[0].startswith("epoch 1/2 loss ") and epoch_lines[-1].startswith("epoch 2/2 loss ")
    assert all(ln.endswith(f"run {out}") and " error " in ln for ln in epoch_lines)
    assert f"run directory: {out} " in res.stderr


def test_demo_summary_and_overwrite_guard(tmp_path):
    res = runner.invoke(app, ["demo", "--out", str(tmp_path), "--epochs", "3", "--no-progress"])
    assert res.exit_code == 0, res.output
    assert "zero-error epoch" in res.stdout and "NC1 drop" in res.stdout and "MSE" in res.stdout
    summary = json.loads((tmp_path / "mse" / "summary.json").read_text())
    assert summary["run_id"].startswith("demo-mse-")
    before = (tmp_path / "ce" / "metrics.csv").read_bytes()
    res = runner.invoke(app, ["demo", "--out", str(tmp_path), "--epochs", "4", "--no-progress"])
    assert res.exit_code == 2 and "holds a different run" in res.stderr and "--overwrite" in res.stderr
    assert (tmp_path / "ce" / "metrics.csv").read_bytes() == before  # untouched
    res = runner.invoke(app, ["demo", "--out", str(tmp_path), "--epochs", "4", "--no-progress", "--overwrite"])
    assert res.exit_code == 0 and max(r.epoch for r in read_metrics(tmp_path / "ce")) == 4


def test_version_and_short_help():
    from nclab import __version__

    res = runner.invoke(app, ["--version"])
    assert res.exit_code == 0 and res.stdout.strip() == f"nclab {__version__}"
    res = runner.invoke(app, ["train", "-h"])
    assert res.exit_code == 0 and "Usage" in res.stdout


def _help(*args: str) -> str:
    res = runner.invoke(app, [*args, "-h"], env={"COLUMNS": "200"}, terminal_width=200)
    assert res.exit_code == 0, res.output
    return res.output


def test_one_cli_vocabulary():
    """-K/--num-classes, -n/--per-class, -d/--dim and -f/--format table|json|csv wherever a command takes them;
    no older spelling left; flags without a <bool> placeholder."""
    for cmd, names in (
        (("ufm", "solve"), ("--num-classes", "--per-class", "--dim", "--format", "--lam", "--lam-convention")),
        (("theory", "simulate"), ("--num-classes", "--per-class", "--dim", "--format")),
        (("theory", "decompose"), ("--num-classes", "--format", "--lam", "--objective")),
        (("codes", "softmax"), ("--num-classes", "--dim", "--format")),
        (("codes", "bounds"), ("--num-classes", "--dim", "--format")),
        (("measure",), ("--num-classes", "--format", "--convention")),
        (("metrics", "list"), ("--format",)),
        (("experiment", "run"), ("--format",)),
    ):
        text = _help(*cmd)
        for name in names:
            assert name in text, (cmd, name)
        for old in ("--K ", "--d ", "--n ", "--json", "--classes", "-C ", "-P "):
            assert old not in text, (cmd, old)
        if "--format" in names:
            assert "csv" in text, cmd
    for cmd in (("train",), ("demo",), (), ("ufm",), ("ufm", "solve"), ("measure",), ("experiment", "run")):
        text = _help(*cmd)
        assert "--help" in text and "<bool>" not in text, cmd


def test_experiment_list_shows_expected_durations():
    from nclab.experiments import list_experiments

    res = runner.invoke(app, ["experiment", "list"], terminal_width=200)
    assert res.exit_code == 0
    for exp in list_experiments():
        assert exp.durations.get("tiny"), exp.name  # every experiment's tiny scale has been timed
        assert set(exp.durations) <= set(exp.scales)
    # the tiny scale is labelled as what it is
    assert "tiny (smoke test): ~5 s" in res.output and "not timed" in res.output
    res = runner.invoke(app, ["experiment", "list", "-f", "json"])
    rows = {r["name"]: r for r in json.loads(res.stdout)}
    assert rows["ufm-figures"]["tiny time"] == "~5 s" and rows["ufm-figures"]["paper time"] == "not timed"
