"""The one YAML reader of nclab: safe loading that refuses duplicate keys and reads only ``true`` / ``false`` as
booleans.

PyYAML's ``safe_load`` keeps the last of two equal keys in one mapping (``epochs: 2`` then ``epochs: 5`` gives 5,
silently) and reads the YAML 1.1 words ``yes``, ``no``, ``on``, ``off`` as booleans. :class:`UniqueKeyLoader`
raises :class:`DuplicateKeyError` naming the key path and both lines instead, and keeps those words as strings
(the YAML 1.2 rule), so a boolean setting written ``no`` or ``off`` is refused by the config schema with its
key path rather than read by a rule most users do not know. Every YAML file or ``--set`` value nclab reads
goes through :func:`load_yaml` / :func:`load_yaml_file`.

Aliases are bounded: PyYAML shares an aliased node, but anything that walks the document as a tree (the key
check, the config schema, a JSON dump) expands it, so nine levels of ten aliases (the "billion laughs") make
10^9 nodes out of a few hundred bytes. A document whose aliases would add more than
:data:`MAX_ALIAS_EXPANSION` nodes, or that holds an alias inside the node it refers to, is refused at once,
naming the source; anchors, aliases and ``<<:`` merge keys of ordinary size work as usual.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

__all__ = ["MAX_ALIAS_EXPANSION", "DuplicateKeyError", "UniqueKeyLoader", "load_yaml", "load_yaml_file"]

#: The most nodes the aliases of one document may add when it is expanded as a tree: ample for configs and sweep
#: files (a few hundred nodes), and a tree walk of this size takes a fraction of a second.
MAX_ALIAS_EXPANSION = 100_000


class DuplicateKeyError(ValueError):
    """A YAML mapping gives one key twice; the message names the key path, the source and both lines."""


class UniqueKeyLoader(yaml.SafeLoader):  # type: ignore[misc]  # PyYAML has no type information here
    """``yaml.SafeLoader`` that raises :class:`DuplicateKeyError` on a repeated mapping key and reads only
    ``true`` / ``false`` (any case) as booleans."""

    def construct_document(self, node: yaml.Node) -> Any:
        _check_expansion(node, self.name)  # first: the key check below walks the expanded tree
        _check_unique(node, (), self.name)
        return super().construct_document(node)


# The YAML 1.2 core-schema booleans replace the YAML 1.1 ones (yes/no/on/off/y/n) of the safe loader.
UniqueKeyLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
UniqueKeyLoader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


def _check_expansion(root: yaml.Node, source: str) -> None:
    """Refuse ``root`` when expanding its aliases adds more than :data:`MAX_ALIAS_EXPANSION` nodes, or when an
    alias sits inside the node it refers to (an infinite tree). Each shared node is sized once (memoised by
    identity), so the check is linear in the document as written, however large its expansion."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()

    def size(node: yaml.Node) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in open_nodes:
            raise ValueError(f"{source}: a YAML alias refers to a node that contains it (an infinite structure)")
        open_nodes.add(key)
        if isinstance(node, yaml.MappingNode):
            children = [child for pair in node.value for child in pair]
        else:
            children = node.value if isinstance(node, yaml.SequenceNode) else []
        total = 1 + sum(size(child) for child in children)
        open_nodes.discard(key)
        sizes[key] = total
        return total

    added = size(root) - len(sizes)  # tree nodes beyond the distinct ones: what the aliases add
    if added > MAX_ALIAS_EXPANSION:
        raise ValueError(
            f"{source}: its YAML aliases expand it by {added:,} nodes, more than the limit of "
            f"{MAX_ALIAS_EXPANSION:,} (an alias bomb?); write the repeated parts out or use fewer nested aliases"
        )


def _check_unique(node: yaml.Node, path: tuple[str, ...], source: str) -> None:
    if isinstance(node, yaml.MappingNode):
        seen: dict[Any, int] = {}
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else id(key_node)
            line = key_node.start_mark.line + 1
            if key in seen:
                where = ".".join((*path, str(key)))
                raise DuplicateKeyError(f"{source}: duplicate key {where!r} (line {seen[key]} and line {line})")
            seen[key] = line
            _check_unique(value_node, (*path, str(key)), source)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _check_unique(item, (*path, str(i)), source)


def load_yaml(text: str, *, source: str = "<yaml>") -> Any:
    """Parse one YAML document with :class:`UniqueKeyLoader`.

    Raises
    ------
    DuplicateKeyError
        A mapping repeats a key (a ``ValueError``; the message names ``source``, the key path and the lines).
    ValueError
        ``text`` is not valid YAML, or its aliases expand it by more than :data:`MAX_ALIAS_EXPANSION` nodes or
        without end (the message names ``source``).

    Examples
    --------
    >>> load_yaml("train: {epochs: 2}\\nseed: 0")
    {'train': {'epochs': 2}, 'seed': 0}
    >>> load_yaml("flag: no")  # a string, not False: only true / false are booleans
    {'flag': 'no'}
    >>> load_yaml("epochs: 2\\nepochs: 5", source="run.yaml")
    Traceback (most recent call last):
        ...
    nclab.io.yaml_io.DuplicateKeyError: run.yaml: duplicate key 'epochs' (line 1 and line 2)
    >>> load_yaml("base: &b {lr: 0.1}\\nrun: {<<: *b, momentum: 0.5}")["run"]  # anchors and merge keys work
    {'lr': 0.1, 'momentum': 0.5}
    """
    loader = UniqueKeyLoader(text)
    loader.name = source
    try:
        return loader.get_single_data()
    except DuplicateKeyError:
        raise
    except yaml.YAMLError as err:
        raise ValueError(f"{source}: not valid YAML ({err})") from None
    finally:
        loader.dispose()


def load_yaml_file(path: str | Path) -> Any:
    """:func:`load_yaml` of the file at ``path`` (errors name the file)."""
    path = Path(path)
    return load_yaml(path.read_text(), source=str(path))
