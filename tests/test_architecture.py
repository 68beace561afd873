"""Import contract of nclab: library below, applications above, no cycles.

Every module under ``src/nclab`` is parsed with :mod:`ast` (nothing is imported), and every import statement in
it is collected: module level and inside functions, ``import x`` and ``from x import y``, relative imports
resolved against the importing module's package. ``from pkg import name`` counts as an import of the submodule
``pkg.name`` when that file exists, else of ``pkg`` itself. Importing ``a.b.c`` is not counted as importing ``a``
and ``a.b`` too: Python runs those ``__init__`` files first, but counting them would make every import inside a
package a cycle with the package's own ``__init__``. Imports by name are edges too: ``importlib.import_module``
with a constant string, and, in a module that calls it with a computed name, every constant list, tuple, set or
dict value of module-name strings (a plugin list such as ``experiments/registry.py``'s ``EXPERIMENT_MODULES``).

Besides the graph: no ``from x import _name`` of a private name from another module, and the README's list of
layers (section "Layout") is ``LAYERS`` itself.

Nodes of the package graph are the first-level names under ``nclab`` (``nclab.metrics``, ``nclab._threads``,
and ``nclab`` for its own ``__init__``); nodes of the file graph are modules.
"""

from __future__ import annotations

import ast
import functools
import json
import os
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
ROOT = "nclab"

#: The application layer: command-line code, experiment definitions and the ``python -m nclab`` entry point.
#: Nothing else may import them.
APPLICATION = ("nclab.cli", "nclab.experiments", "nclab.__main__")

README = SRC.parent / "README.md"

#: Layers, lowest first: a package imports only packages of lower layers. A new package must be placed here.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("nclab._threads", "nclab.io", "nclab.memory", "nclab.validation"),
    ("nclab.stats", "nclab.geometry", "nclab.data"),
    ("nclab.metrics", "nclab.nets"),
    ("nclab.report", "nclab.theory", "nclab.ufm"),
    ("nclab.measure",),  # the measurement engine: hooks, passes, classifier, schedule (any model, any loop)
    ("nclab.train",),
    ("nclab.monitor",),
    ("nclab.transfer",),  # probes and the transfer study: train runs, stream their features (monitor), probe them
    ("nclab.integrations",),
    ("nclab",),  # the top-level package's re-exports
    ("nclab.experiments",),
    ("nclab.cli",),
    ("nclab.__main__",),
)


def _module_name(path: Path, src: Path = SRC) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@functools.cache
def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted((SRC / ROOT).rglob("*.py"))}


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The longest prefix of ``name`` that is an nclab module (``None`` outside nclab)."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


def _from_base(node: ast.ImportFrom, package: str) -> str:
    """The module ``from BASE import ...`` names, relative imports resolved against ``package``."""
    if not node.level:
        return node.module or ""
    base_parts = package.split(".")[: len(package.split(".")) - node.level + 1]
    return ".".join(base_parts + ([node.module] if node.module else []))


def _callee(func: ast.expr) -> str:
    return func.attr if isinstance(func, ast.Attribute) else (func.id if isinstance(func, ast.Name) else "")


def _imports_by_name(tree: ast.AST) -> set[str]:
    """Module names imported as strings: the constant argument of ``import_module("...")``; when some call
    computes the name instead, every string of the module's constant lists, tuples, sets and dict values (the
    plugin lists such a call loops over). Only names of existing modules become edges."""
    names: set[str] = set()
    computed = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _callee(node.func) == "import_module" and node.args:
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                names.add(arg.value)
            else:
                computed = True
    if computed:
        for node in ast.walk(tree):
            values = node.values if isinstance(node, ast.Dict) else getattr(node, "elts", None)
            if isinstance(node, ast.List | ast.Tuple | ast.Set | ast.Dict) and values:
                names.update(v.value for v in values if isinstance(v, ast.Constant) and isinstance(v.value, str))
    return names


def _imports(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The nclab modules that ``module`` (the file ``path``) imports, anywhere in its body, by statement or by
    name (:func:`_imports_by_name`)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    tree = ast.parse(path.read_text(), filename=str(path))
    found = {name for name in _imports_by_name(tree) if name in modules and name != module}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _from_base(node, package)
            # ``from pkg import sub`` imports the submodule when there is one
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        else:
            continue
        for name in names:
            target = _resolve(name, modules)
            if target is not None and target != module:
                found.add(target)
    return found


def _private_imports(module: str, path: Path, modules: dict[str, Path]) -> list[str]:
    """``from x import _name`` statements in ``module`` that take a private name (not a dunder, not a module:
    ``from nclab import _threads`` imports a module) from another nclab module."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    bad = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if not isinstance(node, ast.ImportFrom):
            continue
        base = _from_base(node, package)
        if _resolve(base, modules) in (None, module):
            continue
        for alias in node.names:
            name = alias.name
            private = name.startswith("_") and not (name.startswith("__") and name.endswith("__"))
            if private and f"{base}.{name}" not in modules:
                bad.append(f"{module}: from {base} import {name}")
    return bad


def _in(module: str, packages: tuple[str, ...]) -> bool:
    """Whether ``module`` is one of ``packages`` or inside one (names matched whole: ``nclab.cli_utils`` is not
    inside ``nclab.cli``)."""
    return any(module == p or module.startswith(p + ".") for p in packages)


def _readme_layers(text: str) -> list[set[str]]:
    """The layers the README lists: the numbered items of its section "Layout", each as the set of modules
    named in backticks before the item's first colon (``nclab`` is the top-level package, other names are
    under it)."""
    section = text.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    layers = []
    for line in section.splitlines():
        item = re.match(r"\d+\. (.*)", line)
        if item:
            names = re.findall(r"`([\w.]+)`", item.group(1).split(":", 1)[0])
            layers.append({ROOT if n == ROOT else f"{ROOT}.{n}" for n in names})
    return layers


def _package(module: str) -> str:
    return ".".join(module.split(".")[:2])


@functools.cache
def _graphs() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(file graph, package graph) of every import under src/nclab."""
    modules = _modules()
    files: dict[str, set[str]] = {m: set() for m in modules}
    packages: dict[str, set[str]] = defaultdict(set)
    for module, path in modules.items():
        for target in _imports(module, path, modules):
            files[module].add(target)
            if _package(module) != _package(target):
                packages[_package(module)].add(_package(target))
    return files, dict(packages)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0

    def visit(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def _shortest_cycle(graph: dict[str, set[str]], start: str, members: set[str]) -> list[str]:
    """A shortest path ``start -> ... -> start`` inside ``members`` (breadth first)."""
    parent: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph.get(v, ())):
                if w not in members or w in parent:
                    continue
                parent[w] = v
                if w == start:
                    path = [start]
                    while path[-1] != start or len(path) == 1:
                        path.append(parent[path[-1]])
                    return path[::-1]
                nxt.append(w)
        frontier = nxt
    return [start]


def _describe(graph: dict[str, set[str]], cycles: list[list[str]]) -> str:
    lines = []
    for component in cycles:
        members = set(component)
        example = " -> ".join(_shortest_cycle(graph, component[0], members))
        edges = [f"    {a} -> {b}" for a in component for b in sorted(graph.get(a, ())) if b in members]
        lines.append(f"  cycle {example}; every edge among {', '.join(component)}:\n" + "\n".join(edges))
    return "\n".join(lines)


def test_every_module_is_seen():
    modules = _modules()
    assert "nclab" in modules
    assert "nclab.stats.class_stats" in modules
    files, _ = _graphs()
    # a known edge: ClassStats is re-exported by the top-level package
    assert "nclab.stats" in files["nclab"]


def test_resolution_of_relative_and_function_level_imports(tmp_path):
    pkg = tmp_path / "nclab"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "other.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from . import leaf\n")
    (pkg / "sub" / "leaf.py").write_text("def f():\n    from ..other import x\n    import nclab.sub\n")
    modules = {_module_name(p, tmp_path): p for p in pkg.rglob("*.py")}
    assert _imports("nclab.sub", pkg / "sub" / "__init__.py", modules) == {"nclab.sub.leaf"}
    assert _imports("nclab.sub.leaf", pkg / "sub" / "leaf.py", modules) == {"nclab.other", "nclab.sub"}


def test_cycle_finder_on_a_known_graph():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": {"e"}, "e": {"d"}, "f": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"], ["d", "e"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []
    assert _shortest_cycle(graph, "a", {"a", "b", "c"}) == ["a", "b", "c", "a"]
    assert _shortest_cycle(graph, "d", {"d", "e"}) == ["d", "e", "d"]


def test_library_never_imports_the_application_layer():
    files, _ = _graphs()
    bad = [
        f"  {module} -> {target}"
        for module, targets in sorted(files.items())
        if not _in(module, APPLICATION)
        for target in sorted(targets)
        if _in(target, APPLICATION)
    ]
    assert not bad, "library modules import the application layer (nclab.cli, nclab.experiments):\n" + "\n".join(bad)


def test_no_cycles_between_packages():
    _, packages = _graphs()
    cycles = _cycles(packages)
    assert not cycles, "import cycles between nclab packages:\n" + _describe(packages, cycles)


def test_no_cycles_between_files():
    files, _ = _graphs()
    cycles = _cycles(files)
    assert not cycles, "import cycles between nclab modules:\n" + _describe(files, cycles)


def test_packages_import_only_lower_layers():
    _, packages = _graphs()
    layer = {name: i for i, names in enumerate(LAYERS) for name in names}
    unplaced = sorted({_package(m) for m in _modules()} - set(layer))
    assert not unplaced, f"packages missing from LAYERS in tests/test_architecture.py: {', '.join(unplaced)}"
    bad = [
        f"  {importer} (layer {layer[importer]}) -> {imported} (layer {layer[imported]})"
        for importer, targets in sorted(packages.items())
        for imported in sorted(targets)
        if layer[imported] >= layer[importer]
    ]
    assert not bad, "imports of a package in the same or a higher layer:\n" + "\n".join(bad)


def test_imports_by_name_are_edges(tmp_path):
    """``import_module`` with a constant name is an edge; with a computed name, the module-name strings of the
    module's constant collections are (a plugin list); strings that name no module are not."""
    pkg = tmp_path / "nclab"
    pkg.mkdir()
    for name in ("__init__", "a", "b", "c", "d"):
        (pkg / f"{name}.py").write_text("")
    (pkg / "loader.py").write_text(
        "import importlib\n"
        "PLUGINS = ['nclab.a', 'nclab.b', 'not.a.module']\n"
        "def load():\n"
        "    importlib.import_module('nclab.c')\n"
        "    for m in PLUGINS:\n"
        "        importlib.import_module(m)\n"
    )
    (pkg / "fixed.py").write_text(
        "from importlib import import_module\nNAMES = ('nclab.d',)\nimport_module('nclab.a')\n"
    )
    modules = {_module_name(p, tmp_path): p for p in pkg.rglob("*.py")}
    assert _imports("nclab.loader", pkg / "loader.py", modules) == {"nclab.a", "nclab.b", "nclab.c"}
    # every name constant: the tuple is not read (nothing loops over it)
    assert _imports("nclab.fixed", pkg / "fixed.py", modules) == {"nclab.a"}
    # the real plugin list: the registry's edges to every experiment module
    files, _ = _graphs()
    assert "nclab.experiments.han2022.experiments" in files["nclab.experiments.registry"]


def test_private_names_are_not_imported_across_modules(tmp_path):
    pkg = tmp_path / "nclab"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "_priv.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from ._inner import _helper\n")
    (pkg / "sub" / "_inner.py").write_text("_helper = 1\n")
    (pkg / "user.py").write_text(
        "from nclab.sub import public, _hidden\nfrom nclab import _priv, __version__\nfrom os import _exit\n"
    )
    modules = {_module_name(p, tmp_path): p for p in pkg.rglob("*.py")}
    # a private module and a dunder are fine; a private name of another nclab module is not; os is not nclab
    assert _private_imports("nclab.user", pkg / "user.py", modules) == ["nclab.user: from nclab.sub import _hidden"]
    assert _private_imports("nclab.sub", pkg / "sub" / "__init__.py", modules) == [
        "nclab.sub: from nclab.sub._inner import _helper"
    ]
    bad = [b for module, path in _modules().items() for b in _private_imports(module, path, _modules())]
    assert not bad, "private names imported from other modules:\n  " + "\n  ".join(bad)


def test_application_packages_are_matched_by_whole_names():
    assert _in("nclab.cli", APPLICATION) and _in("nclab.cli.train", APPLICATION)
    assert _in("nclab.__main__", APPLICATION)
    assert not _in("nclab.cli_utils", APPLICATION) and not _in("nclab.experimental", APPLICATION)


def test_readme_lists_the_layers_of_the_test():
    sample = "intro\n## Layout\n\nText `x`.\n\n1. `io`, `stats`: files and `ClassStats`\n2. `nclab`\n## Next\n3. `no`\n"
    assert _readme_layers(sample) == [{"nclab.io", "nclab.stats"}, {"nclab"}]
    assert _readme_layers(README.read_text()) == [set(layer) for layer in LAYERS], (
        "README.md's 'Layout' list differs from LAYERS in tests/test_architecture.py"
    )


@pytest.mark.parametrize("package", ["nclab.stats", "nclab.measure"])
def test_importing_a_package_loads_no_higher_layer(package):
    """Runtime layering: importing a package (which runs ``nclab/__init__`` first) loads nclab modules of its
    own and lower layers only, and neither pydantic nor rich (the trainer's configuration and progress bars)."""
    code = f"import json, sys, {package}; print(json.dumps(sorted(sys.modules)))"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    loaded = json.loads(out.stdout)
    layer = {name: i for i, names in enumerate(LAYERS) for name in names}
    above = sorted(m for m in loaded if m.startswith(ROOT + ".") and layer.get(_package(m), 0) > layer[package])
    assert not above, f"import {package} loads higher layers: {above}"
    assert not {"pydantic", "rich"} & set(loaded)


def test_the_io_package_loads_only_what_is_used():
    """``nclab.io`` imports its modules on first use: the statistics need the atomic writes and checksums, not the
    run directory, its lock and its tables; every public name still resolves, from its one home."""
    code = (
        "import json, sys, nclab.stats; print(json.dumps(sorted(m for m in sys.modules if m.startswith('nclab.io'))))"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert json.loads(out.stdout) == ["nclab.io", "nclab.io.atomic", "nclab.io.integrity"]
    import nclab.io

    for name in nclab.io.__all__:
        value = getattr(nclab.io, name)
        if isinstance(value, type) or callable(value):
            assert value.__module__ == f"nclab.io.{nclab.io._MODULE_OF[name]}", name
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = nclab.io.nope


#: Calls that start another program: a module making one of these may not name git.
_PROCESS_MODULES = {"subprocess", "pty"}
_OS_PROCESS_CALLS = re.compile(r"system|popen|exec\w*|spawn\w*|posix_spawn\w*")
#: Python libraries that drive git.
_GIT_LIBRARIES = {"git", "pygit2", "dulwich"}


def _runs_git(path: Path) -> list[str]:
    """Why the module at ``path`` may run git: it can start a process (``subprocess``, ``pty``, ``os.system`` and
    kin) and holds a string that is the git command (``"git"``, ``"git diff ..."``), or it imports a git library."""
    tree = ast.parse(path.read_text(), filename=str(path))
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            imported.add(node.module.split(".")[0])
    os_calls = any(
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "os"
        and _OS_PROCESS_CALLS.fullmatch(node.attr)
        for node in ast.walk(tree)
    )
    git_words = sorted(
        {
            node.value
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and re.fullmatch(r"git(\s.*)?", node.value)
        }
    )
    why = [f"imports {name}" for name in sorted(imported & _GIT_LIBRARIES)]
    if (imported & _PROCESS_MODULES or os_calls) and git_words:
        why.append(f"starts processes and names {git_words}")
    return why


def test_the_wheel_holds_no_code_that_runs_git():
    """The installed package never runs git (the reproductions page's generator, which does, lives in scripts/):
    the wheel is src/nclab (pyproject's wheel target), and no module of it starts git or imports a git library."""
    import tomllib

    config = tomllib.loads((SRC.parent / "pyproject.toml").read_text())
    assert config["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"] == ["src/nclab"]
    bad = [f"{path.relative_to(SRC)}: {why}" for path in sorted((SRC / ROOT).rglob("*.py")) for why in _runs_git(path)]
    assert not bad, "modules of the wheel that run git:\n  " + "\n  ".join(bad)
    # the check sees the generator (it runs git) and code that runs git otherwise; not a plain subprocess call
    assert _runs_git(SRC.parent / "scripts" / "reproductions_doc.py")


@pytest.mark.parametrize(
    ("source", "flagged"),
    [
        ('import subprocess\nsubprocess.run(["git", "status"])\n', True),
        ('import os\nos.system("git rev-parse HEAD")\n', True),
        ("from subprocess import run\nGIT = 'git'\n", True),
        ("import pygit2\n", True),
        ('import subprocess, sys\nsubprocess.call([sys.executable, "-m", "nclab"])\n', False),
        ('"""Results record the git commit."""\nx = "github"\n', False),
    ],
)
def test_the_git_detector(tmp_path, source, flagged):
    path = tmp_path / "m.py"
    path.write_text(source)
    assert bool(_runs_git(path)) == flagged
