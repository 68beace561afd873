"""What a package index and a citation manager read: the metadata has no placeholder and no development tool, the
long description has no link that only works in the repository, and CITATION.cff is valid Citation File Format."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest
import yaml

import nclab

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
DEV_TOOLS = ("pytest", "hypothesis", "ruff", "mypy", "build", "sphinx", "scikit-learn", "jsonschema")


def test_the_published_extras_hold_no_development_tool():
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert "dev" not in extras and "docs" not in extras
    for name, requirements in extras.items():
        for requirement in requirements:
            package = re.split(r"[<>=\[ ;]", requirement, maxsplit=1)[0].lower()
            assert package not in DEV_TOOLS, f"extra {name!r} publishes the development tool {requirement!r}"
    # the tools live in PEP 735 dependency groups, which are not metadata
    dev = [r for r in PYPROJECT["dependency-groups"]["dev"] if isinstance(r, str)]
    assert {re.split(r"[<>=\[ ;]", r, maxsplit=1)[0] for r in dev} >= {"pytest", "ruff", "mypy", "build"}


def test_the_metadata_has_no_placeholder_address():
    urls = PYPROJECT["project"].get("urls", {})
    # no public home is registered yet: any address here would be a placeholder that does not resolve
    assert urls == {}, f"project.urls lists addresses that do not resolve: {urls}"


def _long_description() -> str:
    """README.md as the package index shows it: the substitutions of [tool.hatch.metadata.hooks.fancy-pypi-readme]
    applied in order (the hook applies them with re.sub)."""
    hook = PYPROJECT["tool"]["hatch"]["metadata"]["hooks"]["fancy-pypi-readme"]
    text = (ROOT / "README.md").read_text()
    for sub in hook["substitutions"]:
        text = re.sub(sub["pattern"], sub["replacement"], text)
    return text


def test_the_long_description_has_no_repository_relative_link():
    text = _long_description()
    assert not re.search(r'src="(?!https?://)', text), "a relative image in the long description"
    assert not re.search(r"\]\((?!https?://|#)", text), "a relative link in the long description"
    # the text of each link survives, with the file it named
    assert "docs/install.md" in text and "benchmarks/RESULTS.md" in text


def test_readme_install_line_names_the_wheel_of_this_version():
    readme = (ROOT / "README.md").read_text()
    assert f"dist/nclab-{nclab.__version__}-py3-none-any.whl" in readme


def test_citation_file_is_valid_citation_file_format():
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is in the dev group (pip install --group dev)")
    schema = json.loads((ROOT / "tests/data/citation-file-format-1.2.0.schema.json").read_text())
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    # the schema declares string dates; YAML reads unquoted ones as dates
    jsonschema.validate(json.loads(json.dumps(cff, default=str)), schema)
    assert cff["version"] == nclab.__version__
    assert cff["license"] == PYPROJECT["project"]["license"]


def test_citation_file_check_catches_an_invalid_file():
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is in the dev group (pip install --group dev)")
    schema = json.loads((ROOT / "tests/data/citation-file-format-1.2.0.schema.json").read_text())
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    del cff["authors"]
    with pytest.raises(jsonschema.ValidationError, match="authors"):
        jsonschema.validate(json.loads(json.dumps(cff, default=str)), schema)


def test_the_docs_bibtex_matches_the_version():
    text = (ROOT / "docs/citing.md").read_text()
    assert f"version = {{{nclab.__version__}}}" in text
    for key in (
        "xu2023quantifying",
        "tirer2022extended",
        "wang2024progressive",
        "jiang2024generalized",
        "han2022neural",
    ):
        assert f"{{{key}," in text


def test_no_ticket_numbers_in_code_docs_or_tests():
    """Code, tests, benchmarks and docs say what a thing is or why, never which ticket of our tracker asked for it
    (the word and a number): the tracker is not part of the project. External projects' issues keep their "#"."""
    pattern = re.compile(r"\bissues? \d+|\bissue-\d+|--issue\d", re.IGNORECASE)
    roots = ["src", "tests", "benchmarks", "docs", "examples", "scripts", ".ci"]
    files = [p for r in roots for p in (ROOT / r).rglob("*") if p.suffix in {".py", ".md", ".rst", ".sh", ".yaml"}]
    files += [ROOT / "README.md", ROOT / "Makefile"]
    skip = {"changelog.md", "_build", "auto_examples", "api"}
    found = [
        f"{p.relative_to(ROOT)}:{i}: {line.strip()[:80]}"
        for p in files
        if p.is_file() and not skip & set(p.relative_to(ROOT).parts) | ({p.name} & skip)
        for i, line in enumerate(p.read_text(errors="replace").splitlines(), 1)
        if pattern.search(line) and "test_no_ticket_numbers" not in line
    ]
    assert not found, "ticket numbers:\n" + "\n".join(found)
