"""``nclab experiment list`` is a listing: it reads the network costs of the registered protocols from a table
instead of building each network, and the table is exact (recomputed here); in a pipe it never folds a name."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from nclab.cli import app
from nclab.experiments import list_experiments
from nclab.experiments import protocols as P

runner = CliRunner()


def _costed() -> set[tuple]:
    """The ``model_cost`` keys the paper-scale estimates of the registered experiments ask for."""
    asked: set[tuple] = set()
    real = P.model_cost

    def spy(name, input_shape, K, options):
        asked.add((name, tuple(input_shape), K, options))
        return real(name, input_shape, K, options)

    P.model_cost = spy  # estimate() looks the function up in its module at call time
    try:
        for exp in list_experiments():
            if "paper" in exp.scales:
                P.estimate(exp.protocols("paper"))
    finally:
        P.model_cost = real
    return asked


def test_every_registered_network_cost_is_in_the_table():
    missing = sorted(_costed() - set(P.KNOWN_MODEL_COSTS))
    assert not missing, f"add to KNOWN_MODEL_COSTS (measure_model_cost gives the values): {missing}"


@pytest.mark.slow
def test_the_cost_table_is_what_a_forward_pass_measures():
    for key, value in P.KNOWN_MODEL_COSTS.items():
        assert P.measure_model_cost(*key) == value, key


def test_the_stored_listing_is_what_the_code_computes():
    """``experiment list`` reads ``listing.json`` (no torch, no config resolution): it must be what the code
    computes, on any machine ($NCLAB_DATA does not enter it)."""
    from nclab.experiments.listing import compute_listing, read_listing

    stored = read_listing()
    assert stored is not None, "no listing.json: python -m nclab.experiments.listing"
    assert stored == compute_listing(), "listing.json is out of date: python -m nclab.experiments.listing"


def test_listing_reads_no_heavy_module():
    import subprocess
    import sys

    code = (
        "import sys; from typer.testing import CliRunner; from nclab.cli import app; "
        "r = CliRunner().invoke(app, ['experiment', 'list', '-f', 'json']); assert r.exit_code == 0, r.output; "
        "print(sorted({'torch', 'nclab.train', 'nclab.data', 'nclab.metrics'} & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_narrow_listing_keeps_every_name_whole():
    res = runner.invoke(app, ["experiment", "list"], env={"COLUMNS": "80"}, terminal_width=80)
    assert res.exit_code == 0, res.output
    for exp in list_experiments():
        assert f"\n{exp.name}  " in "\n" + res.output, exp.name
