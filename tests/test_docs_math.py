"""Every metric's docstring states its definition as mathematics (``.. math::``, rendered on its API page by
MathJax), not only as ASCII."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import nclab.metrics as metrics_pkg
from nclab.metrics.ncc import ncc_metrics


def _metric_functions() -> dict[str, object]:
    found: dict[str, object] = {}
    for info in pkgutil.iter_modules(metrics_pkg.__path__):
        module = importlib.import_module(f"nclab.metrics.{info.name}")
        for obj in vars(module).values():
            if callable(obj) and hasattr(obj, "info") and getattr(obj, "__module__", "") == module.__name__:
                found[obj.info.name] = obj
    return found


def test_every_metric_function_has_its_formula_as_math():
    functions = _metric_functions()
    assert len(functions) >= 25
    plain = sorted(name for name, fn in functions.items() if ".. math::" not in (inspect.getdoc(fn) or ""))
    assert not plain, f"metric docstrings without a .. math:: definition: {plain}"
    assert ".. math::" in (inspect.getdoc(ncc_metrics) or "")  # ncc_accuracy, ncc_mismatch, classifier_accuracy
