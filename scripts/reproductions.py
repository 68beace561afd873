"""Regenerate docs/reproductions.md: run the experiments whose result files are missing or stale, then render.

    python scripts/reproductions.py                 # run what is stale or missing (cpu scale), rewrite the page
    python scripts/reproductions.py --render-only   # rewrite the page from the result files as they are
    python scripts/reproductions.py --only ufm-thm51 gnc-assignment   # (re)run just these, then render
    python scripts/reproductions.py --check         # exit 1 when the page or a result file is out of date

Run it from the repository root with the package importable (``PYTHONPATH=src`` in a checkout). See
:mod:`nclab.experiments.reproductions_doc` for the result-file format and the staleness rule.
"""

from __future__ import annotations

import sys

from nclab.experiments.reproductions_doc import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
