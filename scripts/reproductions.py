"""Regenerate docs/reproductions.md: run the experiments whose result files are missing or stale, then render.

    python scripts/reproductions.py                 # run what is stale or missing (cpu scale), rewrite the page
    python scripts/reproductions.py --render-only   # rewrite the page from the result files as they are
    python scripts/reproductions.py --only ufm-thm51 gnc-assignment   # (re)run just these, then render
    python scripts/reproductions.py --check         # exit 1 when the page or a result file is out of date

Run it from the repository root with the package importable (``PYTHONPATH=src`` in a checkout). See
``scripts/reproductions_doc.py`` (beside this file) for the result-file format and the staleness rule. Neither file is
part of the installed package: the package never runs git.
"""

from __future__ import annotations

import sys

from reproductions_doc import main  # scripts/ is sys.path[0] when this file runs

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
