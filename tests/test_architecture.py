"""Import contract of nclab: library below, applications above, no cycles.

Every module under ``src/nclab`` is parsed with :mod:`ast` (nothing is imported), and every import statement in
it is collected: module level and inside functions, ``import x`` and ``from x import y``, relative imports
resolved against the importing module's package. ``from pkg import name`` counts as an import of the submodule
``pkg.name`` when that file exists, else of ``pkg`` itself. Importing ``a.b.c`` is not counted as importing ``a``
and ``a.b`` too: Python runs those ``__init__`` files first, but counting them would make every import inside a
package a cycle with the package's own ``__init__``.

Nodes of the package graph are the first-level names under ``nclab`` (``nclab.metrics``, ``nclab._threads``,
and ``nclab`` for its own ``__init__``); nodes of the file graph are modules.
"""

from __future__ import annotations

import ast
import functools
from collections import defaultdict
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
ROOT = "nclab"

#: The application layer: command-line code, experiment definitions and the ``python -m nclab`` entry point.
#: Nothing else may import them.
APPLICATION = ("nclab.cli", "nclab.experiments", "nclab.__main__")

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


def _imports(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The nclab modules that ``module`` (the file ``path``) imports, anywhere in its body."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            # ``from pkg import sub`` imports the submodule when there is one
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        else:
            continue
        for name in names:
            target = _resolve(name, modules)
            if target is not None and target != module:
                found.add(target)
    return found


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
        if not module.startswith(APPLICATION)
        for target in sorted(targets)
        if target.startswith(APPLICATION)
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
