"""Sphinx configuration of the nclab documentation site (``make docs``).

The build is offline: no intersphinx inventories are fetched, MathJax is served from the build folder
(``sphinx-mathjax-offline``), and the gallery runs on the embedded digits data. It documents the checked-out
tree (``src/`` goes first on ``sys.path``), not whichever nclab the environment has installed.
"""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(DOCS / "_ext"))
# the figures are drawn off-screen; one thread each for BLAS and torch keeps the build's timings honest on 2 cores
os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import nclab  # noqa: E402  (after the sys.path change above)

project = "nclab"
author = "nclab developers"
copyright = "nclab developers"
release = nclab.__version__
version = ".".join(release.split(".")[:2])

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "numpydoc",
    "myst_parser",
    "sphinx_gallery.gen_gallery",
    "sphinx_copybutton",
    "sphinx_design",
    "sphinx-mathjax-offline",
    "nclab_api",  # writes api/*.rst from each package's __all__ when the build starts
    "nclab_cli",  # the `nclab-cli-help` directive: `nclab ... --help` rendered at build time
    "nclab_citations",  # [Author YEAR] keys link to their row of references.md
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = [
    "_build",
    "_probe2",  # per-branch fragments, merged into reliability.md
    "gallery/GALLERY_HEADER.rst",
    "auto_examples/*.ipynb",
    "auto_examples/*.py",
    "auto_examples/*.zip",
    "auto_examples/*.md5",
    "auto_examples/*.codeobj.json",
]
templates_path = ["_templates"]
# every cross-reference must resolve; the references that point outside the site (numpy, torch) are written as
# literals, since there are no intersphinx inventories offline
nitpicky = False
default_role = "literal"  # `x` in a docstring means code, as in the Markdown pages

# --- autodoc / numpydoc ---------------------------------------------------------------------------
autodoc_default_options = {
    "member-order": "bysource",
    # pydantic's machinery on the config models, not part of their interface
    "exclude-members": "model_config, model_fields, model_computed_fields",
}
autodoc_typehints = "none"  # the signature shows them; numpydoc's Parameters carry the prose
autodoc_class_signature = "mixed"
add_module_names = False
toc_object_entries_show_parents = "hide"  # the page outline shows "update()", not "ClassStats.update()"
numpydoc_show_class_members = False  # autoclass :members: lists them (docs/_ext/nclab_api.py)
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False
# Most public docstrings are still prose (docs/_tools/docstring_sections.py counts them); the numpydoc section
# checks become a gate once they are converted. Rendering them already must not warn.
numpydoc_validation_checks: set[str] = set()
numpydoc_attributes_as_param_list = False

# --- Markdown (the topic pages are Markdown) --------------------------------------------------------------------
myst_enable_extensions = ["colon_fence", "deflist", "dollarmath", "amsmath", "attrs_inline", "substitution"]
myst_substitutions = {"release": release}
myst_heading_anchors = 3  # "reliability.md#run-directories" style links between the pages

# --- gallery ----------------------------------------------------------------------------------------------------
sphinx_gallery_conf = {
    "examples_dirs": "gallery",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "within_subsection_order": "nclab_gallery.order",
    "abort_on_example_error": True,  # a broken example fails the build
    "download_all_examples": False,
    "remove_config_comments": True,
    "show_memory": False,
    "image_scrapers": ("matplotlib",),
    "matplotlib_animations": False,
    "reset_modules": ("matplotlib", "seaborn"),
    "doc_module": ("nclab",),
    "reference_url": {"nclab": None},  # link the code of the examples to the API pages
    "backreferences_dir": "api/backreferences",
    "inspect_global_variables": False,
    "plot_gallery": "True",
}

# --- HTML -------------------------------------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"nclab {release}"
html_static_path = ["_static"]
html_css_files = ["nclab.css"]
html_theme_options = {
    "navbar_align": "left",
    "show_toc_level": 2,
    "navigation_with_keys": False,
    "header_links_before_dropdown": 6,
    # the gallery's pages are figures and code: the full width, no page outline (a page matched by no pattern
    # gets none; two wildcard patterns must not match one page)
    "secondary_sidebar_items": {
        "*": ["page-toc", "sourcelink"],
        "guides/*": ["page-toc", "sourcelink"],
        # an API page documents one name: no outline beside it, so that its formulas have the column's width
        "api/**": [],
        # the claims tables have five columns of text: the page takes the outline's width too
        "reproductions": [],
    },
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version"],
}
html_sidebars = {"index": [], "changelog": []}
html_show_sourcelink = True
html_copy_source = True

# numpydoc reports a docstring it cannot parse (e.g. an "Example" section) as a Python warning, which -W would not
# see: make it an error that names the docstring
warnings.filterwarnings("error", category=UserWarning, module="numpydoc")
