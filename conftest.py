"""Doctest collection of ``src/nclab``: the framework integrations import their framework at import time (and
raise ``ImportError`` naming the extra), so without the extra installed their modules are not collected."""

from importlib.util import find_spec

collect_ignore = [
    f"src/nclab/integrations/{module}.py"
    for module, package in (("lightning", "lightning"), ("hf", "transformers"))
    if find_spec(package) is None
]
