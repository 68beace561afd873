"""Pages generated from the code at build time, so that they cannot drift from it.

* ``.. nclab-cli-help::`` -- the help of ``nclab`` and of every command and sub-command (hidden ones left out):
  what ``nclab ... --help`` prints on this build's tree, at a fixed width, one section each.
* ``.. nclab-metrics-table::`` -- the registered metrics as ``nclab metrics list`` prints them: name (linked to
  its API page when it has one), collapse property, direction, definition, citation.
"""

from __future__ import annotations

from typing import Any

import typer
from docutils import nodes
from docutils.statemachine import StringList
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import nested_parse_with_titles
from typer.testing import CliRunner

WIDTH = 80
UNDERLINES = "-~^"


def command_paths(group: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every visible command below ``group``, depth first in the group's own order (as ``--help`` lists them).

    Duck-typed: Typer builds its commands on its own copy of click, so they are not ``click.Group`` instances."""
    ctx = group.context_class(group, info_name="nclab")
    paths: list[tuple[str, ...]] = []
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if command is None or command.hidden:
            continue
        paths.append((*prefix, name))
        if hasattr(command, "list_commands"):
            paths += command_paths(command, (*prefix, name))
    return paths


def help_text(app: typer.Typer, path: tuple[str, ...]) -> str:
    result = CliRunner().invoke(
        app, [*path, "--help"], prog_name="nclab", env={"COLUMNS": str(WIDTH), "NO_COLOR": "1", "TERM": "dumb"}
    )
    if result.exit_code != 0:
        raise RuntimeError(f"`nclab {' '.join(path)} --help` exited {result.exit_code}: {result.output}")
    lines = [line.rstrip() for line in result.output.splitlines()]
    while lines and not lines[0]:
        lines.pop(0)
    return "\n".join(lines).rstrip()


class CliHelp(SphinxDirective):
    """``.. nclab-cli-help::``: a section per command with its help as a literal block."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        from nclab.cli import app  # the checked-out tree: conf.py put src/ first on sys.path

        rst: list[str] = []
        for path in [(), *command_paths(typer.main.get_command(app))]:
            title = " ".join(("nclab", *path))
            rst += [
                f"``{title}``",
                UNDERLINES[min(max(len(path) - 1, 0), 2)] * (len(title) + 4),
                "",
                ".. code-block:: text",
                "   :class: cli-help",
                "",
            ]
            rst += [f"   {line}" if line else "" for line in help_text(app, path).splitlines()] + [""]
        node = nodes.section()
        node.document = self.state.document
        nested_parse_with_titles(self.state, StringList(rst, source="nclab --help"), node)
        return node.children


def _plain(text: str) -> str:
    """``text`` as literal reST inline text (the definitions hold ``*``, ``|`` and ``_``)."""
    for char in "\\*|_`":
        text = text.replace(char, "\\" + char)
    return text


class MetricsTable(SphinxDirective):
    """``.. nclab-metrics-table::``: one row per registered metric."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        import nclab.metrics
        from nclab.metrics.glossary import glossary_rows

        rst = [".. list-table::", "   :header-rows: 1", "   :widths: 30 10 13 47", "   :class: nclab-metrics", ""]
        rst += ["   * - metric", "     - NC", "     - collapsed", "     - definition [source]"]
        arrows = {"lower": "lower", "higher": "higher", "none": "(diagnostic)"}
        for entry in glossary_rows():
            public = entry.name in getattr(nclab.metrics, "__all__", ())
            name = f":obj:`~nclab.metrics.{entry.name}`" if public else f"``{entry.name}``"
            rst += [
                f"   * - {name}",
                f"     - {entry.label or ' '}",
                f"     - {arrows.get(entry.direction, entry.direction)}",
                f"     - {_plain(entry.definition)} {entry.citation}".rstrip(),
            ]
        node = nodes.container()
        self.state.nested_parse(StringList(rst, source="nclab metrics list"), self.content_offset, node)
        return node.children


def setup(app: Sphinx) -> dict[str, object]:
    app.add_directive("nclab-cli-help", CliHelp)
    app.add_directive("nclab-metrics-table", MetricsTable)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
