"""What every ``nclab`` command group shares: how apps are built, the two consoles, and the error exit.

Output streams: a command's result (a table, or JSON / CSV with ``-f``) goes to stdout; progress, notes and
errors go to stderr, so ``nclab ... -f json > out.json`` captures only the result. Neither console wraps a line
mid-word (paths stay whole for copy-paste).

One vocabulary in every command: ``-K/--num-classes``, ``-n/--per-class``, ``-d/--dim``, ``-f/--format
table|json|csv`` (:class:`OutputFormat`, written by :func:`emit`), ``--lam KEY=VALUE`` (:func:`parse_key_values`);
flags are declared with :func:`flag`, so the help shows no ``<bool>`` placeholder.

User errors (a bad config, missing data, an unknown layer, impossible sizes: the :data:`USER_ERRORS` raised
inside :func:`user_errors`) end the command with one ``error: ...`` paragraph on stderr and exit code 2; the
traceback is printed only with ``nclab --debug``.
"""

from __future__ import annotations

import json
import math
import traceback
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from enum import StrEnum
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperGroup

from nclab.io.tables import column_names, csv_text

__all__ = [
    "USER_ERRORS",
    "OutputFormat",
    "console",
    "dim_option",
    "emit",
    "err_console",
    "fail",
    "flag",
    "format_option",
    "make_app",
    "num_classes_option",
    "parse_key_values",
    "parse_lams",
    "per_class_option",
    "set_debug",
    "user_errors",
    "warnings_as_notes",
]

console = Console(soft_wrap=True)
err_console = Console(stderr=True, soft_wrap=True)

#: Exceptions that mean "the input is wrong", not "nclab is broken": their message is the whole report.
#: ``TypeError`` is the wrong kind of value (float labels, a string where a number is needed: ``nclab.validation``).
#: ``DatasetNotFoundError`` is a ``FileNotFoundError``, ``ConfigError`` and ``CorruptDatasetError`` are
#: ``ValueError``s; an unknown layer or metric name is a ``KeyError``; a diverged run a ``FloatingPointError``;
#: an output path that cannot be written a ``NotADirectoryError`` / ``IsADirectoryError`` / ``PermissionError``.
USER_ERRORS: tuple[type[BaseException], ...] = (
    FileNotFoundError,
    FileExistsError,
    NotADirectoryError,
    IsADirectoryError,
    PermissionError,
    ValueError,
    TypeError,
    KeyError,
    FloatingPointError,
)

_debug = {"on": False}


def set_debug(on: bool) -> None:
    """Show tracebacks under :func:`fail` (``nclab --debug``)."""
    _debug["on"] = bool(on)


class _Group(TyperGroup):
    """A command group whose ``-h/--help`` option, and its commands', shows as a plain flag (Typer prints
    ``<bool>`` beside an option without a metavar)."""

    # typer vendors its own click: its classes are annotated as Any rather than importing a private module
    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)
        if option is not None:
            option.metavar = ""
        return option

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        if command is not None and not isinstance(command, TyperGroup):
            option = command.get_help_option(ctx)  # cached by the command: the metavar set here is the one shown
            if option is not None:
                option.metavar = ""
        return command


def make_app(name: str, help: str) -> typer.Typer:
    """A Typer app with nclab's settings (help on no arguments and on ``-h``, no completion, no locals in
    tracebacks, help options shown as plain flags)."""
    return typer.Typer(
        name=name,
        help=help,
        cls=_Group,
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_show_locals=False,
        context_settings={"help_option_names": ["-h", "--help"]},
    )


def _message(err: BaseException | str) -> str:
    if isinstance(err, KeyError) and err.args:  # str(KeyError) wraps the message in quotes
        return str(err.args[0])
    return str(err)


def fail(err: BaseException | str, hint: str = "", code: int = 2) -> NoReturn:
    """Print ``error: ...`` (markup-escaped, never wrapped mid-path) on stderr and exit with ``code``; with
    ``--debug`` the traceback of ``err`` comes first."""
    if _debug["on"] and isinstance(err, BaseException):
        err_console.print("".join(traceback.format_exception(err)), markup=False, highlight=False)
    err_console.print(f"[red]error:[/red] {escape(_message(err))}{hint}", soft_wrap=True, highlight=False)
    if not _debug["on"] and isinstance(err, BaseException):
        err_console.print("(run with nclab --debug for the traceback)", style="dim", highlight=False)
    raise typer.Exit(code) from (err if isinstance(err, BaseException) else None)


@contextmanager
def user_errors(*extra: type[BaseException]) -> Iterator[None]:
    """Turn a :data:`USER_ERRORS` exception (or one of the ``extra`` types a command also reports as the user's:
    a simulation that stops at its step bound is a ``RuntimeError``) raised inside the block into :func:`fail`
    (exit code 2). Every command wraps its work in this block."""
    try:
        yield
    except (*USER_ERRORS, *extra) as err:
        fail(err)


@contextmanager
def warnings_as_notes() -> Iterator[None]:
    """Show the library's warnings raised inside the block (leftovers cleaned up, imbalance, degenerate metrics)
    as one-line ``note:`` messages on stderr, each once, when the block ends (also when it fails)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield
        finally:
            seen = set()
            for w in caught:
                text = f"{w.category.__name__}: {w.message}"
                if text not in seen:
                    seen.add(text)
                    err_console.print(f"[yellow]note:[/yellow] {escape(text)}", soft_wrap=True, highlight=False)


class OutputFormat(StrEnum):
    """``-f/--format``: a table for reading, or JSON / CSV for programs (all on stdout)."""

    table = "table"
    json = "json"
    csv = "csv"


def flag(*names: str, help: str) -> Any:
    """A boolean ``typer.Option`` shown as a plain flag (an empty metavar: Typer prints ``<bool>`` otherwise)."""
    return typer.Option(*names, help=help, metavar="")


def format_option(help: str = "table (for reading), json or csv (for programs); on stdout") -> Any:
    """``-f/--format table|json|csv``."""
    return typer.Option("--format", "-f", help=help)


def num_classes_option(help: str = "number of classes K", **kwargs: Any) -> Any:
    """``-K/--num-classes`` (``kwargs``: more ``typer.Option`` settings, e.g. ``min=2``)."""
    return typer.Option("--num-classes", "-K", help=help, **kwargs)


def per_class_option(help: str = "samples per class n", **kwargs: Any) -> Any:
    """``-n/--per-class`` (``kwargs``: more ``typer.Option`` settings, e.g. ``min=1``)."""
    return typer.Option("--per-class", "-n", help=help, **kwargs)


def dim_option(help: str = "feature dimension d", **kwargs: Any) -> Any:
    """``-d/--dim`` (``kwargs``: more ``typer.Option`` settings, e.g. ``min=1``)."""
    return typer.Option("--dim", "-d", help=help, **kwargs)


def parse_key_values(items: Sequence[str] | None, option: str, known: Sequence[str] | None = None) -> dict[str, str]:
    """``KEY=VALUE`` items of a repeatable option as a dict of strings; a malformed item or (when ``known`` is
    given) an unknown key raises ``typer.BadParameter`` naming it, the option and the known keys (exit 2)."""
    out: dict[str, str] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise typer.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint=option)
        if known is not None and key not in known:
            raise typer.BadParameter(f"unknown key {key!r}; known: {', '.join(known)}", param_hint=option)
        out[key] = value.strip()
    return out


def parse_lams(
    items: Sequence[str] | None, known: Sequence[str], defaults: Mapping[str, float] | None = None
) -> dict[str, float]:
    """``--lam KEY=VALUE`` items merged over ``defaults``: a partial ``--lam`` keeps the documented default of every
    key it does not name. An unknown key, a malformed item or a value that is not a number raises
    ``typer.BadParameter`` naming it (exit 2)."""
    out = dict(defaults or {})
    for key, value in parse_key_values(items, "--lam", known).items():
        try:
            out[key] = float(value)
        except ValueError:
            raise typer.BadParameter(f"{key}={value!r}: {value!r} is not a number", param_hint="--lam") from None
    return out


def _cell(v: Any) -> str:
    if isinstance(v, float):
        if not math.isfinite(v):
            return str(v)
        return str(int(v)) if v.is_integer() and abs(v) < 1e9 else f"{v:.4g}"
    return "" if v is None else str(v)


def _plain(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)  # JSON has no nan / inf
    if isinstance(v, Mapping):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if hasattr(v, "item"):  # numpy scalars
        return _plain(v.item())
    return v


def emit(
    rows: Sequence[Mapping[str, Any]],
    fmt: OutputFormat,
    title: str = "",
    *,
    data: Any = None,
    footnotes: Sequence[str] = (),
) -> None:
    """Write a command's result on stdout: ``rows`` as a table (4 significant figures, ``footnotes`` under it),
    as CSV (full precision; the columns are every key in order of first appearance), or as JSON (``data`` when
    given, else the list of rows; nan and inf as strings)."""
    fmt = OutputFormat(fmt)
    if fmt is OutputFormat.json:
        typer.echo(json.dumps(_plain(list(rows) if data is None else data), indent=2, allow_nan=False))
        return
    if fmt is OutputFormat.csv:
        typer.echo(csv_text(rows, exact_floats=True).rstrip("\n"))
        return
    keys = column_names(rows)
    from rich.table import Table

    table = Table(title=title or None)
    for k in keys:
        numeric = all(isinstance(row.get(k), (int, float)) or row.get(k) is None for row in rows)
        table.add_column(k, justify="right" if numeric else "left")
    for row in rows:
        table.add_row(*(_cell(row.get(k)) for k in keys))
    console.print(table)
    for note in footnotes:
        console.print(note, markup=False, highlight=False)
