"""One owner per experiment: each experiment's facts live in its paper's package, declared beside its function.

An experiment is registered in its paper package's ``experiments`` module with its durations, protocols per scale,
builders and code (attributes of its record), its paper's claims are written in the package's ``paper`` module,
and no other module of the package names it: adding an experiment touches those two files only. The ``paper``
modules import no ``experiments`` module, so the protocol test compares two independent texts.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from nclab.experiments import get, list_experiments
from nclab.experiments import registry as reg
from nclab.experiments.claims import Claim

SRC = Path(__file__).resolve().parents[1] / "src"
EXPERIMENTS_DIR = SRC / "nclab" / "experiments"
#: Each paper package's citation key (the demo, outside them, trains with [Han et al. 2022]'s MSE).
PACKAGE_PAPERS = {
    "han2022": "[Han et al. 2022]",
    "tirer_bruna2022": "[Tirer & Bruna 2022]",
    "wang2024": "[Wang et al. 2024]",
    "jiang2024": "[Jiang et al. 2024]",
    "xu_liu2023": "[Xu & Liu 2023]",
}


def _strings(source: str) -> set[str]:
    """Every string constant of ``source`` but docstrings (a doctest may name any experiment)."""
    tree = ast.parse(source)
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docstrings.add(id(body[0].value))
    return {
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings
    }


def test_string_scan_sees_code_and_skips_docstrings():
    source = '"""Module: "a-name"."""\n\ndef f():\n    """b-name"""\n    return {"c-name": 1}, f"d-{1}"\n'
    assert _strings(source) >= {"c-name"} and not {"a-name", "b-name", 'Module: "a-name".'} & _strings(source)


def _owner(module: str) -> Path:
    """The folder of a paper package, or the file of a generic module (the demo), that owns an experiment."""
    package, _, _ = module.rpartition(".")
    if package == "nclab.experiments":
        return EXPERIMENTS_DIR / f"{module.rpartition('.')[2]}.py"
    return EXPERIMENTS_DIR / package.rpartition(".")[2]


def test_every_experiment_declares_its_facts_on_its_record():
    for exp in list_experiments():
        assert exp.module.endswith(".experiments") or exp.module == "nclab.experiments.demo", exp.name
        # its package is the paper it reproduces
        package = exp.module.split(".")[2]
        assert exp.paper == PACKAGE_PAPERS.get(package, "[Han et al. 2022]"), (exp.name, package)
        # durations, protocols and builders are attributes of the record, for declared scales only
        assert set(exp.durations) <= set(exp.scales) and exp.durations, exp.name
        assert set(exp.scale_protocols) <= set(exp.scales) and exp.scale_protocols, exp.name
        assert set(exp.configs) <= set(exp.scales), exp.name
        for scale in exp.configs:  # a builder's runs are its protocols' runs
            assert sorted(exp.configs[scale]()) == sorted({p.label for p in exp.protocols(scale)}), (exp.name, scale)
        assert exp.code and all(importlib.util.find_spec(d) is not None for d in exp.code), exp.name
        # its claims are the papers' claims that name it, attached by the registry
        assert exp.claims == tuple(c for c in reg.all_claims() if c.experiment == exp.name)
        assert all(isinstance(c, Claim) for c in exp.claims)
    assert sum(len(e.claims) for e in list_experiments()) == sum(c.experiment is not None for c in reg.all_claims())


def test_no_module_outside_its_package_names_an_experiment():
    """An experiment's name appears (as code, not documentation) only in its owner: its paper package or the demo
    module; the other papers' ``paper`` modules may name it as the measurement of a claim of theirs."""
    names = {e.name: _owner(e.module) for e in list_experiments()}
    found: dict[str, list[str]] = {}
    for path in sorted((SRC / "nclab").rglob("*.py")):
        strings = _strings(path.read_text(encoding="utf-8"))
        for name, owner in names.items():
            if name not in strings or path == owner or owner in path.parents:
                continue
            if path.name == "paper.py" and path.parent.parent == EXPERIMENTS_DIR:
                continue
            found.setdefault(name, []).append(str(path.relative_to(SRC)))
    assert not found, f"experiment names outside their package: {found}"


def test_paper_modules_import_no_experiments_module():
    code = (
        "import importlib, sys\n"
        f"for m in {reg.PAPER_MODULES!r}:\n"
        "    importlib.import_module(m)\n"
        "print(sorted(m for m in sys.modules if m.startswith('nclab.experiments.') and "
        "(m.endswith('.experiments') or m in ('nclab.experiments.runs', 'nclab.experiments.demo'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=None)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_every_paper_package_has_its_two_modules_and_is_listed():
    packages = sorted(p.name for p in EXPERIMENTS_DIR.iterdir() if (p / "__init__.py").is_file())
    assert packages == ["han2022", "jiang2024", "tirer_bruna2022", "wang2024", "xu_liu2023"]
    for name in packages:
        assert f"nclab.experiments.{name}.experiments" in reg.EXPERIMENT_MODULES
        assert f"nclab.experiments.{name}.paper" in reg.PAPER_MODULES
        paper = importlib.import_module(f"nclab.experiments.{name}.paper")
        assert paper.CLAIMS and {c.paper for c in paper.CLAIMS} == {PACKAGE_PAPERS[name]}, name


def test_a_claim_naming_an_unknown_experiment_stops_the_registry(monkeypatch):
    paper = importlib.import_module("nclab.experiments.wang2024.paper")
    stray = Claim("wang2024-stray", "[Wang et al. 2024]", "Fig. 0", "q", "v", (), "no-such-experiment")
    monkeypatch.setattr(paper, "CLAIMS", (*paper.CLAIMS, stray))
    monkeypatch.setattr(reg, "_loaded", False)
    with pytest.raises(ValueError, match="not registered: no-such-experiment"):
        reg.all_claims()
    monkeypatch.setattr(paper, "CLAIMS", (*paper.CLAIMS[:-1], paper.CLAIMS[0]))  # a repeated id
    with pytest.raises(ValueError, match="claim ids must be unique"):
        reg.all_claims()
    monkeypatch.undo()
    reg._loaded = False
    assert get("pfc-table1").claims  # the registry assembles again from the packages as they are
