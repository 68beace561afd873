"""Models a user saved with ``torch.save``: a whole module, or a state dict, of a class that lives in their code.

``torch.save(model, path)`` pickles the module by reference to its class (``mypkg.models.Net``, or ``__main__.Net``
for a class defined in the script that saved it), so loading it needs that class importable under the same name.
``torch.save(model.state_dict(), path)`` keeps only the tensors, so loading needs the class and its constructor
arguments. :func:`load_saved_model` does both from a class named as ``"package.module:Name"`` or
``"path/to/file.py:Name"`` (:func:`import_class`), and says which class is missing when it is not given.
"""

from __future__ import annotations

import importlib
import importlib.util
import pickle
import re
import sys
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn

__all__ = ["import_class", "load_saved_model"]

#: Keys under which training scripts commonly nest a state dict (``{"model": sd, "optimizer": ...}``).
STATE_DICT_KEYS = ("state_dict", "model_state_dict", "model")


def import_class(spec: str) -> type[nn.Module]:
    """The ``nn.Module`` subclass named by ``spec``: ``"package.module:Name"`` (importable from the current folder
    or ``sys.path``) or ``"path/to/file.py:Name"`` (the file is executed as a module named after it).

    Parameters
    ----------
    spec : str
        ``MODULE:NAME`` or ``FILE.py:NAME``; ``NAME`` may be dotted (a nested class).

    Returns
    -------
    type
        The class.

    Raises
    ------
    ValueError
        ``spec`` is not of that form, its module or file cannot be imported, it has no such name, or the name is
        not an ``nn.Module`` subclass (each message names ``spec`` and what was wrong).

    Examples
    --------
    >>> import_class("torch.nn:Linear")
    <class 'torch.nn.modules.linear.Linear'>
    """
    where, sep, name = spec.rpartition(":")
    if not sep or not where or not name:
        raise ValueError(f"--model-class {spec!r}: expected MODULE:CLASS or FILE.py:CLASS (e.g. mypkg.models:Net)")
    try:
        module = _module_of(where)
    except (ImportError, OSError, SyntaxError) as err:
        raise ValueError(f"--model-class {spec!r}: cannot import {where!r} ({type(err).__name__}: {err})") from None
    obj: Any = module
    for part in name.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"--model-class {spec!r}: {where!r} has no attribute {part!r}")
        obj = getattr(obj, part)
    if not (isinstance(obj, type) and issubclass(obj, nn.Module)):
        raise ValueError(f"--model-class {spec!r}: {name} is not an nn.Module subclass")
    return obj


def _module_of(where: str) -> Any:
    """The module ``where`` names: a ``.py`` file (run under the file's stem), or a dotted module name looked up
    from the current folder first (as ``python -m`` would)."""
    if where.endswith(".py"):
        path = Path(where).resolve()
        if not path.is_file():
            raise OSError(f"no such file: {where}")
        spec = importlib.util.spec_from_file_location(path.stem, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"{where} is not a loadable Python file")
        module = importlib.util.module_from_spec(spec)
        sys.modules.setdefault(path.stem, module)
        spec.loader.exec_module(module)
        return module
    cwd = str(Path.cwd())
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    return importlib.import_module(where)


def _missing_class(err: Exception) -> tuple[str, str] | None:
    """``(module, class)`` of the class an unpickling error says it could not find, else ``None``."""
    text = str(err)
    found = re.search(r"Can't get attribute '([^']+)' on <module '([^']+)'", text)
    if found:
        return found.group(2), found.group(1)
    found = re.search(r"No module named '([^']+)'", text)
    return (found.group(1), "?") if found else None


def load_saved_model(
    path: str | Path, model_class: str | type[nn.Module] | None = None, model_kwargs: Mapping[str, Any] | None = None
) -> nn.Module:
    """The module saved at ``path`` by ``torch.save``: a whole module (unpickled: only files you trust), or a state
    dict (bare, or under ``"state_dict"`` / ``"model_state_dict"`` / ``"model"``) loaded into
    ``model_class(**model_kwargs)``.

    A whole module whose class was defined in the script that saved it (pickled as ``__main__.Name``) or in a module
    not importable here loads when ``model_class`` names that class: the class the pickle cannot find is resolved
    to it by name. A ``"FILE.py:CLASS"`` runs the file on import: keep its training under
    ``if __name__ == "__main__":``.

    Parameters
    ----------
    path : str or Path
        The file ``torch.save`` wrote.
    model_class : str, type or None, default None
        The model's class, or ``"MODULE:CLASS"`` / ``"FILE.py:CLASS"`` (:func:`import_class`). Needed for a state
        dict, and for a whole module whose class is not importable under its pickled name.
    model_kwargs : mapping or None, default None
        Keyword arguments of ``model_class`` when a state dict is loaded into a new instance.

    Returns
    -------
    nn.Module
        The model, on the CPU.

    Raises
    ------
    ValueError
        The file holds neither a module nor a state dict; a state dict without ``model_class``; a module whose
        class cannot be found (the message names the class and the ``--model-class`` option); a state dict that
        does not fit ``model_class`` (torch's first mismatch).

    Examples
    --------
    >>> import tempfile, torch
    >>> from torch import nn
    >>> net = nn.Linear(3, 2)
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     torch.save(net.state_dict(), f"{tmp}/w.pt")
    ...     back = load_saved_model(f"{tmp}/w.pt", "torch.nn:Linear", {"in_features": 3, "out_features": 2})
    >>> torch.equal(back.weight, net.weight)
    True
    """
    path = Path(path)
    cls = import_class(model_class) if isinstance(model_class, str) else model_class
    try:
        obj = torch.load(path, map_location="cpu", weights_only=False)
    except (AttributeError, ModuleNotFoundError, pickle.UnpicklingError) as err:
        missing = _missing_class(err)
        if missing is None:
            raise
        if cls is None:
            module, name = missing
            where = "the script that saved it" if module == "__main__" else f"the module {module!r}"
            raise ValueError(
                f"{path} holds a pickled model of class {name!r} from {where}, which is not importable here: pass "
                f"--model-class FILE.py:{name} (or MODULE:{name}) naming that class, or save model.state_dict() "
                "and pass --model-class"
            ) from None
        obj = _load_with_class(path, cls)
    if isinstance(obj, nn.Module):
        return obj
    state = _state_dict_of(obj)
    if state is None:
        raise ValueError(f"{path}: expected a saved nn.Module or a state dict, found {type(obj).__name__}")
    if cls is None:
        raise ValueError(
            f"{path} holds a state dict (the weights only): pass --model-class MODULE:CLASS (or FILE.py:CLASS) "
            "naming the model's class, and --model-kwargs for its constructor arguments"
        )
    model = cls(**dict(model_kwargs or {}))
    try:
        model.load_state_dict(state)
    except RuntimeError as err:
        lines = [line.strip() for line in str(err).splitlines() if line.strip()]
        first = next((x for x in lines if "size mismatch" in x or "Missing key" in x), lines[-1] if lines else "")
        raise ValueError(f"the state dict in {path} does not fit {cls.__name__}: {first}") from None
    return model


def _load_with_class(path: Path, cls: type[nn.Module]) -> Any:
    """Read ``path`` again, resolving a class the pickle cannot find by its name to ``cls`` (the user's class,
    pickled as ``__main__.Name`` or under a module not importable here)."""

    class _Unpickler(pickle.Unpickler):
        def find_class(self, module: str, name: str) -> Any:
            try:
                return super().find_class(module, name)
            except (AttributeError, ModuleNotFoundError):
                if name.rsplit(".", 1)[-1] == cls.__name__:
                    return cls
                raise

    finder = types.ModuleType("nclab_pickle")
    finder.Unpickler = _Unpickler  # type: ignore[attr-defined]
    finder.load = pickle.load  # type: ignore[attr-defined]
    try:
        return torch.load(path, map_location="cpu", weights_only=False, pickle_module=finder)
    except (AttributeError, ModuleNotFoundError, pickle.UnpicklingError) as err:
        raise ValueError(f"{path}: cannot load the pickled model with --model-class {cls.__name__}: {err}") from None


def _state_dict_of(obj: Any) -> Mapping[str, torch.Tensor] | None:
    """``obj`` as a state dict (tensors by parameter name), looking one level into common wrappers; else None."""
    if isinstance(obj, Mapping) and obj and all(isinstance(v, torch.Tensor) for v in obj.values()):
        return obj
    if isinstance(obj, Mapping):
        for key in STATE_DICT_KEYS:
            inner = obj.get(key)
            if isinstance(inner, Mapping) and inner and all(isinstance(v, torch.Tensor) for v in inner.values()):
                return inner
    return None
