"""No placeholder text in any report or summary (reviews/ux-2.md: words, never None or {}).

The small runs of the test suite -- a training run, a CollapseMonitor's run, a sweep, a comparison, the demo and a
tiny experiment -- are made through the command line; then every ``report.html`` and every table the commands
print is scanned for text that stands for a missing value: ``?``, ``None``, ``nan``, an empty table cell, an
empty field (``Measured epochs: .``), a lone ``-``. What is legitimately missing reads as a word: ``not reached``
(an epoch), ``undefined`` (a metric these data do not define), ``not measured``, ``absent`` (a config key).
Tables are printed 400 columns wide, so that each row is one line and each cell can be checked.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
import yaml
from typer.testing import CliRunner

from nclab import CollapseMonitor
from nclab.cli import app

runner = CliRunner()
FASHION = Path("/usr/share/datasets/fashion-mnist")
TINY = {
    "name": "tiny",
    "data": {"name": "digits", "per_class": 12, "test_per_class": 4},
    "model": {"name": "mlp", "options": {"widths": [16, 16]}},
    "train": {"epochs": 2, "batch_size": 32, "threads": 1},
    "measure": {"num_log": 1},
}

#: Text that stands for a missing value, in HTML (images and styles removed) and in printed tables.
HTML_PLACEHOLDERS = {
    "None": r"\bNone\b",
    "nan": r"\b(nan|NaN)\b",
    "?": r"(^|[\s>(:,])\?([\s<,.)]|$)",
    "empty cell": r"<td[^>]*>\s*</td>",
    "empty code": r"<code>\s*</code>|<b>\s*</b>",
    "empty field": r":\s*\.(\s|<)",
    "dash cell": r"<td[^>]*>\s*[-–—]\s*</td>",
}
TABLE_PLACEHOLDERS = {
    "None": r"\bNone\b",
    "nan": r"\b(nan|NaN)\b",
    "?": r"(^|\s)\?(\s|$)",
    # a cell that is only "none" or a raw mapping (the newcomer re-trial found both in experiment summaries)
    "none cell": r"│\s*none\s*│",
    "raw mapping": r"│\s*\{[^│]*\}?\s*│",
}


def _invoke(*args: str) -> str:
    import nclab.cli.common as common

    # the consoles fix their width when nclab.cli.common is first imported, which under pytest-xdist may be
    # another test's import without COLUMNS: set it on them too, so that every table is one line per row
    widths = common.console.width, common.err_console.width
    common.console.width = common.err_console.width = 400
    try:
        res = runner.invoke(app, list(args), env={"COLUMNS": "400"})
    finally:
        common.console.width, common.err_console.width = widths
    assert res.exit_code == 0, (args, res.output)
    return res.stdout


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    """``{name: (kind, text)}``: every report.html (kind "html") and every printed table (kind "table")."""
    tmp = tmp_path_factory.mktemp("placeholders")
    (tmp / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    found: dict[str, tuple[str, str]] = {}
    found["train table"] = ("table", _invoke("train", str(tmp / "tiny.yaml"), "-o", str(tmp / "run"), "--no-progress"))

    torch.manual_seed(0)  # a CollapseMonitor's run: no config, no summary
    net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    x, y = torch.randn(60, 4), torch.arange(60) % 3
    with CollapseMonitor(net, 3, layers=["0", "penultimate"], out=tmp / "monitor") as monitor:
        for epoch in range(3):
            monitor.measure((x, y), split="train", epoch=epoch)
            monitor.measure((x, y), split="test", epoch=epoch)
    _invoke("report", str(tmp / "monitor"))

    sweep = {"base": "tiny.yaml", "grid": {"optim.lr": [0.01, 0.05], "loss.name": ["mse", "ce"]}}
    (tmp / "s.yaml").write_text(yaml.safe_dump(sweep))
    found["sweep table"] = ("table", _invoke("sweep", str(tmp / "s.yaml"), "--local", "-o", str(tmp / "sweep")))
    found["compare table"] = (
        "table",
        _invoke("compare", str(tmp / "sweep"), str(tmp / "monitor"), "-m", "nc1", "-m", "cdnv", "-o",
                str(tmp / "compare.html")),
    )  # fmt: skip
    found["extract table"] = ("table", _invoke("extract", str(tmp / "run"), "-o", str(tmp / "feats")))
    found["demo table"] = ("table", _invoke("demo", "-o", str(tmp / "demo"), "--epochs", "3", "--no-progress"))
    name = "fashion-mnist-cnn" if FASHION.is_dir() else "digits-mlp-demo"
    found["experiment table"] = ("table", _invoke("experiment", "run", name, "--scale", "tiny", "-o", str(tmp / "exp")))
    for page in sorted(tmp.rglob("*.html")):
        found[str(page.relative_to(tmp))] = ("html", page.read_text(encoding="utf-8"))
    return found


def _html_text(page: str) -> str:
    page = re.sub(r'src="data:image/png;base64,[^"]*"', 'src=""', page)
    return re.sub(r"<style>.*?</style>", "", page, flags=re.S)


def test_the_runs_wrote_every_kind_of_report(outputs):
    pages = [k for k, (kind, _) in outputs.items() if kind == "html"]
    for expected in ("run/report.html", "monitor/report.html", "compare.html", "demo/report.html",
                     "demo/mse/report.html", "exp/report.html"):  # fmt: skip
        assert expected in pages, pages
    assert len([p for p in pages if p.startswith("sweep/")]) == 4  # every trial's own report


def test_no_placeholder_in_any_report(outputs):
    for name, (kind, text) in outputs.items():
        if kind != "html":
            continue
        body = _html_text(text)
        for what, pattern in HTML_PLACEHOLDERS.items():
            match = re.search(pattern, body, flags=re.M)
            assert match is None, (name, what, body[max(0, match.start() - 150) : match.end() + 80])


def test_no_placeholder_or_empty_cell_in_any_printed_table(outputs):
    for name, (kind, text) in outputs.items():
        if kind != "table":
            continue
        assert text.strip(), name
        for what, pattern in TABLE_PLACEHOLDERS.items():
            match = re.search(pattern, text, flags=re.M)
            assert match is None, (name, what, text[max(0, match.start() - 150) : match.end() + 80])
        for line in text.splitlines():
            if line.startswith("│"):  # a row of a boxed table, one line at 400 columns: every cell holds a value
                cells = line.strip("│").split("│")
                assert all(c.strip() for c in cells), (name, line)


def test_missing_values_read_as_words(outputs):
    """The words that replace the placeholders are there: the monitor's report names its model and its measured
    epochs, the 2-epoch runs reach no zero error, and in the comparison the monitor run (no config) has its
    config keys ``absent``."""
    monitor = _html_text(outputs["monitor/report.html"][1])
    assert "nclab run monitor: Sequential measured by a CollapseMonitor, K = 3" in monitor
    assert "Measured epochs: 3 (0, 1, 2)." in monitor and "zero training error (eval mode): <b>not reached" in monitor
    assert "not reached" in outputs["train table"][1] and "not reached" in outputs["sweep table"][1]
    rows = [ln for ln in outputs["compare table"][1].splitlines() if ln.startswith("│")]
    assert len(rows) == 5 and all("not reached" in ln for ln in rows)
    assert [ln.count("absent") for ln in rows] == [0, 0, 0, 0, 2]  # loss.name, optim.lr
