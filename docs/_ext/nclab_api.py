"""The API reference, generated from each public namespace's ``__all__`` at the start of every build.

Nothing is listed by hand, so a package or a name that moves (a new ``nclab.measure``, a class re-exported from
another layer) appears on the next build. The namespaces are ``nclab`` itself, every public subpackage or module of
``nclab`` that defines ``__all__``, and, for a package without one (``nclab.integrations``), each of its public
submodules that defines one.

Each public name gets one page, in the namespace where it is defined (the longest namespace that prefixes the
object's ``__module__``); the other namespaces that re-export it list it with a link to that page. Two names for one
object in the same namespace (``pfc2`` and ``etf_gram_error``) each get a page, the alias saying so.

Written under ``docs/api/`` (ignored by git): ``index.rst``, one ``<namespace>.rst`` each, ``generated/<name>.rst``.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import shutil
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path

from docutils.nodes import Element
from sphinx.addnodes import pending_xref
from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment
from sphinx.errors import PycodeError
from sphinx.pycode import ModuleAnalyzer
from sphinx.util import logging

ROOT_PACKAGE = "nclab"
SECTIONS = ("Classes", "Exceptions and warnings", "Functions", "Modules", "Constants and objects")
MAX_VALUE_REPR = 300


@dataclass
class Entry:
    namespace: str
    name: str
    obj: object
    home: str = ""  # the namespace whose page documents it
    alias_of: str | None = None  # the name it has in its defining namespace, when that differs

    @property
    def fullname(self) -> str:
        return f"{self.namespace}.{self.name}"

    @property
    def home_fullname(self) -> str:
        return f"{self.home}.{self.alias_of or self.name}" if self.home != self.namespace else self.fullname


@dataclass
class Namespace:
    name: str
    module: types.ModuleType
    entries: list[Entry] = field(default_factory=list)


@dataclass
class ModulePage:
    """A public module (no ``_`` in its path) under a documented package, for the names of its ``__all__`` that no
    namespace documents (``nclab.io.sinks.make_sink``, imported from the module by those who use it)."""

    name: str
    module: types.ModuleType
    package: str
    names: list[str]


#: The application layer: its packages' ``__all__`` is their interface; their modules' names are implementation.
APPLICATION = ("nclab.cli", "nclab.experiments")


def module_pages(namespaces: list[Namespace]) -> list[ModulePage]:
    """Every public module of the library whose ``__all__`` holds names that no namespace documents, under the
    deepest documented package that contains it (modules listed in an ``__all__`` have their own page already)."""
    documented = {ns.name for ns in namespaces}
    entries = [e for ns in namespaces for e in ns.entries]
    objects = {id(e.obj) for e in entries if not _is_value(e.obj)}
    pages = []
    for ns in namespaces[1:]:
        if ns.name.startswith(APPLICATION) or not hasattr(ns.module, "__path__"):
            continue
        package_names = set(getattr(ns.module, "__all__", ()))
        for info in sorted(pkgutil.walk_packages(ns.module.__path__, ns.name + "."), key=_key):
            if info.name in documented or any(part.startswith("_") for part in info.name.split(".")):
                continue
            module = importlib.import_module(info.name)
            if id(module) in objects:
                continue
            names = [
                n
                for n in getattr(module, "__all__", ())
                if _undocumented(getattr(module, n), n, objects, package_names)
            ]
            if names:
                pages.append(ModulePage(info.name, module, ns.name, names))
    return pages


def _undocumented(obj: object, name: str, objects: set[int], package_names: set[str]) -> bool:
    return name not in package_names if _is_value(obj) else id(obj) not in objects


def _key(info: pkgutil.ModuleInfo) -> str:
    return info.name


def module_page(page: ModulePage) -> str:
    members = ", ".join(page.names)
    return "\n".join(
        [_title(page.name), f".. automodule:: {page.name}", f"   :members: {members}", "   :show-inheritance:", ""]
    )


def public_namespaces(root: str = ROOT_PACKAGE) -> list[Namespace]:
    """The namespaces to document, ``root`` first, then its public children in alphabetical order."""
    top = importlib.import_module(root)
    found = [Namespace(root, top)]
    for info in sorted(pkgutil.iter_modules(top.__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        name = f"{root}.{info.name}"
        module = importlib.import_module(name)
        if hasattr(module, "__all__"):
            found.append(Namespace(name, module))
        elif info.ispkg:
            found.append(Namespace(name, module))  # its docstring; the names live in the submodules
            for sub in sorted(pkgutil.iter_modules(module.__path__), key=lambda i: i.name):
                if not sub.name.startswith("_"):
                    child = importlib.import_module(f"{name}.{sub.name}")
                    if hasattr(child, "__all__"):
                        found.append(Namespace(child.__name__, child))
    for ns in found:
        ns.entries = [Entry(ns.name, n, getattr(ns.module, n)) for n in getattr(ns.module, "__all__", [])]
    _assign_homes(found)
    return found


def _defined_in(obj: object) -> str | None:
    if isinstance(obj, types.ModuleType):
        return obj.__name__
    module = getattr(obj, "__module__", None)
    return module if isinstance(module, str) and (inspect.isclass(obj) or inspect.isroutine(obj)) else None


def _assign_homes(namespaces: list[Namespace]) -> None:
    by_object: dict[int, list[Entry]] = {}
    for ns in namespaces:
        for entry in ns.entries:
            if not _is_value(entry.obj):
                by_object.setdefault(id(entry.obj), []).append(entry)
    for ns in namespaces:
        for entry in ns.entries:
            entry.home = entry.namespace
            holders = by_object.get(id(entry.obj), [entry])
            where = _defined_in(entry.obj) or ""
            inside = [e for e in holders if where == e.namespace or where.startswith(e.namespace + ".")]
            if not inside:
                continue
            deepest = max(len(e.namespace) for e in inside)
            candidates = [e for e in inside if len(e.namespace) == deepest]
            own = getattr(entry.obj, "__name__", None)
            home = next((e for e in candidates if e.name == own), candidates[0])
            if home.namespace != entry.namespace:
                entry.home, entry.alias_of = home.namespace, (home.name if home.name != entry.name else None)
            elif home.name != entry.name:
                entry.alias_of = home.name  # same namespace, second name: its own page, marked as an alias


def _is_type_alias(obj: object) -> bool:
    """``Row = tuple[str, str, float]``: ``inspect.isclass`` says True for such aliases, but they are values
    (autoclass fails on them)."""
    return isinstance(obj, types.GenericAlias) or type(obj).__module__ == "typing"


def _is_value(obj: object) -> bool:
    """Plain values (ints, strings, tuples) may be equal objects by chance; they are never deduplicated."""
    if _is_type_alias(obj):
        return True
    return not (inspect.isclass(obj) or inspect.isroutine(obj) or isinstance(obj, types.ModuleType))


def section_of(obj: object) -> str:
    if _is_type_alias(obj):
        return "Constants and objects"
    if inspect.isclass(obj):
        return "Exceptions and warnings" if issubclass(obj, BaseException) else "Classes"
    if inspect.isroutine(obj):
        return "Functions"
    if isinstance(obj, types.ModuleType):
        return "Modules"
    return "Constants and objects"


def summary_line(obj: object, attr_doc: list[str] | None = None) -> str:
    """The first sentence of ``obj``'s docstring, cut outside literals, roles and brackets (autosummary's
    heuristic cuts ``0 .. K-1`` and ``[Jiang et al. 2024]`` in the middle). A constant: the first sentence of its
    doc comment, else its value when short."""
    if _is_value(obj):
        if not attr_doc:
            text = repr(obj)
            return f"``{text}``" if len(text) <= 60 and "`" not in text and " at 0x" not in text else ""
        doc = "\n".join(attr_doc)
    else:
        doc = inspect.getdoc(obj)
    first = " ".join((doc or "").strip().split("\n\n")[0].split())
    depth, literal, role, i = 0, False, False, 0
    while i < len(first):
        if first.startswith("``", i):
            literal, i = not literal, i + 2
            continue
        ch = first[i]
        if not literal:
            if ch == "`":
                role = not role
            elif ch in "([{":
                depth += 1
            elif ch in ")]}":
                depth = max(depth - 1, 0)
            elif ch == "." and not role and depth == 0 and (i + 1 == len(first) or first[i + 1] == " "):
                return first[: i + 1]
        i += 1
    return first


def attribute_doc(namespace: str, name: str, obj: object) -> list[str]:
    """The ``#:`` comment (or string after the assignment) of a constant, searched in the namespace's modules."""
    for module_name in sorted(m for m in sys.modules if m == namespace or m.startswith(namespace + ".")):
        module = sys.modules[module_name]
        if vars(module).get(name) is not obj:
            continue
        try:
            docs = ModuleAnalyzer.for_module(module_name).find_attr_docs()
        except PycodeError:
            continue
        if ("", name) in docs:
            return [line for line in docs[("", name)] if line is not None]
    return []


# --- writing -------------------------------------------------------------------------------------------------------


def _title(text: str, char: str = "=") -> str:
    return f"{text}\n{char * len(text)}\n"


def entry_page(entry: Entry) -> str:
    """The reST of one name's page."""
    obj, full = entry.obj, entry.fullname
    lines = [_title(full), f".. currentmodule:: {entry.namespace}", ""]
    if entry.alias_of:
        target = f"{entry.namespace}.{entry.alias_of}"
        lines += [f".. note:: ``{entry.name}`` is another name for :obj:`~{target}`, the same object.", ""]
    section = section_of(obj)
    if section == "Classes":
        lines += [f".. autoclass:: {entry.name}", "   :members:", "   :show-inheritance:", ""]
    elif section == "Exceptions and warnings":
        lines += [f".. autoexception:: {entry.name}", "   :show-inheritance:", ""]
    elif section == "Functions":
        lines += [f".. autofunction:: {entry.name}", ""]
    elif section == "Modules":
        lines = [_title(full), f".. automodule:: {obj.__name__}", "   :members:", ""]  # type: ignore[attr-defined]
    else:
        # not autodata: for an instance without a doc comment it shows the docstring of its type (ndarray's)
        lines += [f".. py:data:: {entry.name}", ""]
        lines += [f"   {line}" if line else "" for line in attribute_doc(entry.namespace, entry.name, obj)]
        lines += ["", f"   Type: ``{type(obj).__module__}.{type(obj).__qualname__}``.", ""]
        text = repr(obj)
        if " at 0x" in text:  # the default repr of an object: an address, different at every build
            pass
        elif len(text) <= MAX_VALUE_REPR:
            lines += ["   Value:", "", "   .. code-block:: python", "", f"      {text}", ""]
        elif isinstance(obj, dict):
            lines += ["   Keys: " + ", ".join(f"``{k}``" for k in obj) + ".", ""]
    return "\n".join(lines)


def _attr_doc(entry: Entry) -> list[str] | None:
    return attribute_doc(entry.namespace, entry.name, entry.obj) if _is_value(entry.obj) else None


def _table(rows: list[tuple[str, str]]) -> list[str]:
    lines = [".. list-table::", "   :class: nclab-api-table", "   :widths: 30 70", ""]
    for ref, summary in rows:
        lines += [f"   * - {ref}", f"     - {summary or ' '}"]
    return [*lines, ""]


def _ref(fullname: str, display: str) -> str:
    return f":obj:`{display} <{fullname}>`"


def namespace_page(ns: Namespace, namespaces: list[Namespace], modules: list[ModulePage] = ()) -> str:  # type: ignore[assignment]
    lines = [_title(ns.name), f".. automodule:: {ns.name}", "   :no-members:", "", f".. currentmodule:: {ns.name}", ""]
    depth = ns.name.count(".") + 1
    children = [
        (n.name, n.module) for n in namespaces if n.name.startswith(ns.name + ".") and n.name.count(".") == depth
    ]
    children += [(m.name, m.module) for m in modules if m.package == ns.name]
    if ns.name != ROOT_PACKAGE and children:
        lines += [_title("Modules", "-")]
        lines += _table([(f":mod:`{name}`", summary_line(module)) for name, module in children])
        lines += [".. toctree::", "   :hidden:", ""]
        lines += [f"   {name.rsplit('.', 1)[1]} <{name}>" for name, _ in children] + [""]
    for section in SECTIONS:
        own = [e for e in ns.entries if e.home == ns.name and section_of(e.obj) == section]
        if own:
            lines += [_title(section, "-")]
            rows = [(_ref(e.fullname, e.name), summary_line(e.obj, _attr_doc(e))) for e in own]
            lines += _table(rows)
    elsewhere = [e for e in ns.entries if e.home != ns.name]
    if elsewhere:
        lines += [_title("Re-exported here, documented where defined", "-")]
        lines += _table([(_ref(e.home_fullname, e.home_fullname), summary_line(e.obj)) for e in elsewhere])
    pages = [e for e in ns.entries if e.home == ns.name]
    if pages:
        lines += [".. toctree::", "   :hidden:", ""] + [f"   {e.name} <generated/{e.fullname}>" for e in pages] + [""]
    return "\n".join(lines)


def index_page(namespaces: list[Namespace]) -> str:
    lines = [
        _title("API reference"),
        "Every public name of nclab, one page each, under the namespace that defines it: the public names of a",
        "package are its ``__all__``. This reference is generated from the code at each build. The packages are",
        "layered, lowest first: ``nclab.io``; ``stats``, ``geometry``, ``data``; ``metrics``, ``nets``;",
        "``report``, ``theory``, ``ufm``; ``train``; ``monitor``; ``transfer``; ``integrations``; then the",
        "application layer, ``experiments`` and ``cli`` (the :doc:`../guides/cli`). A package imports only lower",
        "layers.",
        "",
    ]
    top = [n for n in namespaces if n.name.count(".") <= 1]
    lines += _table([(f":mod:`{ns.name}`", summary_line(ns.module)) for ns in top])
    lines += [".. toctree::", "   :hidden:", "   :maxdepth: 1", ""] + [f"   {ns.name}" for ns in top] + [""]
    return "\n".join(lines)


#: ``re-exported full name -> documented full name`` (``nclab.CollapseMonitor`` -> ``nclab.monitor.CollapseMonitor``),
#: so that a reference to the name a user imports resolves to the page of the object.
ALIASES: dict[str, str] = {}


def write_api(outdir: Path) -> int:
    """Write the reference under ``outdir`` from scratch; returns the number of names documented."""
    namespaces = public_namespaces()
    modules = module_pages(namespaces)
    ALIASES.clear()
    ALIASES.update({e.fullname: e.home_fullname for ns in namespaces for e in ns.entries if e.home != ns.name})
    # the module path of a name its package documents (nclab.io.run_table.read_metrics -> nclab.io.read_metrics)
    home = {id(e.obj): e.home_fullname for ns in namespaces for e in ns.entries if not _is_value(e.obj)}
    for module_name, module in sorted(sys.modules.items()):
        if module_name.startswith(ROOT_PACKAGE + ".") and module is not None:
            for name in getattr(module, "__all__", ()):
                target = home.get(id(getattr(module, name, None)))
                if target is not None and target != f"{module_name}.{name}":
                    ALIASES.setdefault(f"{module_name}.{name}", target)
    if outdir.exists():
        shutil.rmtree(outdir)
    (outdir / "generated").mkdir(parents=True)
    (outdir / "index.rst").write_text(index_page(namespaces), encoding="utf-8")
    for page in modules:
        (outdir / f"{page.name}.rst").write_text(module_page(page), encoding="utf-8")
    count = sum(len(page.names) for page in modules)
    for ns in namespaces:
        (outdir / f"{ns.name}.rst").write_text(namespace_page(ns, namespaces, modules), encoding="utf-8")
        for entry in ns.entries:
            if entry.home == ns.name:
                (outdir / "generated" / f"{entry.fullname}.rst").write_text(entry_page(entry), encoding="utf-8")
                count += 1
    return count


def _on_builder_inited(app: Sphinx) -> None:
    count = write_api(Path(app.srcdir) / "api")
    logging.getLogger(__name__).info(f"nclab_api: {count} API pages")


def _resolve_alias(app: Sphinx, env: BuildEnvironment, node: pending_xref, contnode: Element) -> Element | None:
    """A Python reference to a re-exported name (``nclab.CollapseMonitor``) links to the documented object."""
    if node.get("refdomain") != "py":
        return None
    target = node.get("reftarget", "")
    canonical = ALIASES.get(target) or ALIASES.get(f"{node.get('py:module')}.{target}")
    if canonical is None:
        return None
    domain = env.get_domain("py")
    return domain.resolve_xref(env, node["refdoc"], app.builder, node["reftype"], canonical, node, contnode)


def setup(app: Sphinx) -> dict[str, object]:
    # the pages must exist before the builder lists the source files
    app.connect("builder-inited", _on_builder_inited, priority=400)
    app.connect("missing-reference", _resolve_alias)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
