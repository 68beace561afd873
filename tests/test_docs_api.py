"""The documentation's generated parts (docs/_ext): every public name gets an API page, re-exports point to the
definition, summaries keep their literals whole, and the command-line page lists every command."""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path

import pytest

pytest.importorskip("sphinx")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "docs" / "_ext"))

import nclab_api
import nclab_cli

import nclab


def _public_modules_with_all() -> dict[str, list[str]]:
    """Every importable nclab module whose dotted path has no private part and that defines ``__all__``, found
    independently of the generator (which stops at packages and their direct modules)."""
    found = {"nclab": list(nclab.__all__)}
    for info in pkgutil.walk_packages(nclab.__path__, "nclab."):
        if any(part.startswith("_") for part in info.name.split(".")):
            continue
        module = importlib.import_module(info.name)
        if hasattr(module, "__all__"):
            found[info.name] = list(module.__all__)
    return found


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("api")
    nclab_api.write_api(out)
    return out


def test_every_public_name_has_a_page(api: Path) -> None:
    namespaces = {ns.name: ns for ns in nclab_api.public_namespaces()}
    pages = {p.stem for p in (api / "generated").glob("*.rst")}
    missing = []
    for ns in namespaces.values():
        assert (api / f"{ns.name}.rst").is_file()
        for entry in ns.entries:
            if entry.home_fullname not in pages:
                missing.append(entry.fullname)
    assert missing == []
    # the namespaces are every package's, and every public module with __all__ directly under nclab or under a
    # package without __all__ (nclab.integrations.hf); deeper modules are re-exported by their package
    direct = {
        name
        for name, _ in _public_modules_with_all().items()
        if name.count(".") <= 1 or not hasattr(importlib.import_module(name.rsplit(".", 1)[0]), "__all__")
    }
    assert direct <= set(namespaces)
    assert {"nclab", "nclab.metrics", "nclab.stats", "nclab.integrations.hf"} <= set(namespaces)


def test_every_name_of_a_library_module_is_documented(api: Path) -> None:
    """A name public in a module (its ``__all__``) but not in its package's has a page too: the module's
    (``nclab.io.sinks.make_sink``). The application layer's modules are its implementation and are left out."""
    namespaces = nclab_api.public_namespaces()
    on_pages = {id(e.obj) for ns in namespaces for e in ns.entries}
    module_pages = {page.name: set(page.names) for page in nclab_api.module_pages(namespaces)}
    undocumented = []
    for module, names in _public_modules_with_all().items():
        if module.startswith(nclab_api.APPLICATION):
            continue
        for name in names:
            obj = getattr(importlib.import_module(module), name)
            if id(obj) in on_pages or name in module_pages.get(module, ()):
                continue
            if id(importlib.import_module(module)) in on_pages:  # a module in an __all__: its page has its members
                continue
            if nclab_api._is_value(obj) and name in getattr(
                importlib.import_module(module.rsplit(".", 1)[0]), "__all__", ()
            ):
                continue
            undocumented.append(f"{module}.{name}")
    assert undocumented == []
    for name in module_pages:
        text = (api / f"{name}.rst").read_text(encoding="utf-8")
        assert f".. automodule:: {name}" in text and ":members: " in text
    assert {"make_sink", "MetricSink", "RunTableSink"} <= module_pages["nclab.io.sinks"]
    # a module path of a name documented at package level resolves there
    assert nclab_api.ALIASES["nclab.io.run_table.read_metrics"] == "nclab.io.read_metrics"


def test_reexports_point_to_the_definition(api: Path) -> None:
    assert nclab_api.ALIASES["nclab.CollapseMonitor"] == "nclab.monitor.CollapseMonitor"
    assert nclab_api.ALIASES["nclab.ClassStats"] == "nclab.stats.ClassStats"
    for target in nclab_api.ALIASES.values():
        assert (api / "generated" / f"{target}.rst").is_file(), target
    # an alias inside one namespace keeps its own page, marked as such
    text = (api / "generated" / "nclab.metrics.pfc2.rst").read_text(encoding="utf-8")
    assert "another name for" in text and "etf_gram_error" in text


def test_summary_line_keeps_literals_and_citations_whole() -> None:
    def f() -> None:
        """Labels ``y`` in ``0 .. K-1`` [Jiang et al. 2024]. Second sentence."""

    assert nclab_api.summary_line(f) == "Labels ``y`` in ``0 .. K-1`` [Jiang et al. 2024]."
    assert nclab_api.summary_line(3) == "``3``"


def test_cli_page_lists_every_command() -> None:
    import typer

    from nclab.cli import app

    group = typer.main.get_command(app)
    paths = nclab_cli.command_paths(group)
    top = {p[0] for p in paths}
    assert {"measure", "train", "demo", "ufm", "codes", "theory", "experiment"} <= top
    assert ("ufm", "solve") in paths and ("experiment", "run") in paths
    text = nclab_cli.help_text(app, ("ufm", "solve"))
    assert text.lstrip().startswith("Usage: nclab ufm solve") and max(map(len, text.splitlines())) <= nclab_cli.WIDTH


def test_every_public_docstring_has_its_numpydoc_sections() -> None:
    """The reference reads like scikit-learn's. Every public function and class (the API reference's
    names) has Parameters (when it takes any), Returns or Yields (unless it returns None) and Examples, read with
    numpydoc's own parser by the counter the docs ship (docs/_tools/docstring_sections.py)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "docs" / "_tools"))
    import docstring_sections

    lacking = {}
    for ns in nclab_api.public_namespaces():
        for entry in ns.entries:
            if entry.home != ns.name or entry.alias_of:
                continue
            if nclab_api.section_of(entry.obj) not in ("Functions", "Classes"):
                continue
            missing = docstring_sections.missing_sections(entry.obj)
            if missing:
                lacking[entry.fullname] = missing
    assert not lacking, f"{len(lacking)} public names lack numpydoc sections: {lacking}"


def test_the_section_counter_flags_what_is_missing() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "docs" / "_tools"))
    import docstring_sections

    def bare(x: int) -> int:
        """Twice x."""
        return 2 * x

    def gen(x: int):
        """Count.

        Parameters
        ----------
        x : int
            Up to.

        Yields
        ------
        int
            The next.

        Examples
        --------
        >>> list(gen(2))
        [0, 1]
        """
        yield from range(x)

    assert docstring_sections.missing_sections(bare) == ["Parameters", "Returns", "Examples"]
    assert docstring_sections.missing_sections(gen) == []
