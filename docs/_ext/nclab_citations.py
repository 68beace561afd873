"""Citation keys as links: every ``[Author YEAR]`` key of ``docs/references.md`` that a page (a guide, an API page
rendered from a docstring) cites becomes a link to its row there, and each row gets the anchor it links to.

The keys are the bold ``**[Key]**`` entries of references.md. In text, a key is linked where it opens a bracket
(``[Xu & Liu 2023, Def. 5.3]``) or follows a semicolon inside one (``[Tirer & Bruna 2022; Han et al. 2022]``);
code, literal blocks, existing links and titles are left alone.
"""

from __future__ import annotations

import re
from pathlib import Path

from docutils import nodes
from sphinx.application import Sphinx

_SKIP = (nodes.literal, nodes.literal_block, nodes.reference, nodes.title, nodes.raw, nodes.math, nodes.math_block)


def slug(key: str) -> str:
    """The anchor of a key's row: ``Xu & Liu 2023`` -> ``cite-xu-liu-2023``."""
    return "cite-" + re.sub(r"[^a-z0-9]+", "-", key.lower()).strip("-")


def reference_keys(text: str) -> list[str]:
    """The keys of references.md: its bold ``**[Key]**`` entries."""
    return re.findall(r"\*\*\[([^\]]+)\]\*\*", text)


def _anchor_rows(app: Sphinx, docname: str, source: list[str]) -> None:
    if docname != "references":
        return
    source[0] = re.sub(
        r"\*\*\[([^\]]+)\]\*\*", lambda m: f'<span id="{slug(m.group(1))}"></span>**[{m.group(1)}]**', source[0]
    )


def _pattern(keys: list[str]) -> re.Pattern[str]:
    alternatives = "|".join(re.escape(k) for k in sorted(keys, key=len, reverse=True))
    return re.compile(rf"(?<=\[)({alternatives})(?=[\],;])|(?<=; )({alternatives})(?=[\],;])")


def _link_keys(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    pattern = app.env.nclab_citation_pattern  # type: ignore[attr-defined]
    if pattern is None or docname == "references":
        return
    uri = app.builder.get_relative_uri(docname, "references")
    for text in list(doctree.findall(nodes.Text)):
        parent = text.parent
        if parent is None or any(isinstance(a, _SKIP) for a in _ancestors(text)):
            continue
        value = str(text)
        pieces: list[nodes.Node] = []
        last = 0
        for m in pattern.finditer(value):
            key = m.group(1) or m.group(2)
            pieces += [nodes.Text(value[last : m.start()]), nodes.reference(key, key, refuri=f"{uri}#{slug(key)}")]
            last = m.end()
        if pieces:
            pieces.append(nodes.Text(value[last:]))
            parent.replace(text, pieces)


def _ancestors(node: nodes.Node) -> list[nodes.Node]:
    out = []
    while node.parent is not None:
        node = node.parent
        out.append(node)
    return out


def _on_builder_inited(app: Sphinx) -> None:
    references = Path(app.srcdir) / "references.md"
    keys = reference_keys(references.read_text(encoding="utf-8")) if references.is_file() else []
    app.env.nclab_citation_pattern = _pattern(keys) if keys else None  # type: ignore[attr-defined]


def setup(app: Sphinx) -> dict[str, object]:
    app.connect("builder-inited", _on_builder_inited)
    app.connect("source-read", _anchor_rows)
    app.connect("doctree-resolved", _link_keys)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
