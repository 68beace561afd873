"""What every ``nclab`` command group shares: how apps are built, the two consoles, and the error exit.

Output streams: a command's result (a table, or JSON / CSV with ``-f``) goes to stdout; progress, notes and
errors go to stderr, so ``nclab ... -f json > out.json`` captures only the result. Neither console wraps a line
mid-word (paths stay whole for copy-paste).

One vocabulary in every command: ``-K/--num-classes``, ``-n/--per-class``, ``-d/--dim`` (the letters K, n, d of
docs/conventions.md as short flags and in the help, words as long flags), ``-o/--out`` on every
command that writes files (:func:`out_option`; the defaults lie under ``runs/``), ``-f/--format table|json|csv``
on every command that prints a result (:class:`OutputFormat`, written by :func:`emit`), ``--lam KEY=VALUE``
(:func:`parse_key_values`); flags are declared with :func:`flag`, so the help shows no ``<bool>`` placeholder.
Warnings and remarks are ``note: ...`` lines on stderr (:func:`note`, :func:`warnings_as_notes`), and a message
names command-line flags, not the library's keyword arguments (:func:`cli_message`).

The command modules import nothing heavy at module level (numpy, torch, matplotlib are imported inside the
commands), so ``nclab --version`` and ``nclab -h`` load Typer and Rich only.

User errors (a bad config, missing data, an unknown layer, impossible sizes: the :data:`USER_ERRORS` raised
inside :func:`user_errors`) end the command with one ``error: ...`` paragraph on stderr and exit code 2; the
traceback is printed only with ``nclab --debug``.
"""

from __future__ import annotations

import inspect
import json
import math
import re
import traceback
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from enum import StrEnum
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

__all__ = [
    "CLI_FLAGS",
    "USER_ERRORS",
    "OutputFormat",
    "cli_message",
    "console",
    "dim_option",
    "emit",
    "emit_records",
    "err_console",
    "fail",
    "first_sentence",
    "flag",
    "format_option",
    "make_app",
    "note",
    "num_classes_option",
    "out_option",
    "parse_key_values",
    "parse_lams",
    "per_class_option",
    "reflow",
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


def _type_label(label: str | None) -> str | None:
    """Typer's type label of a list parameter (``<list[Path]>``) as its element's (``<path>``)."""
    match = re.fullmatch(r"<list\[(.+)\]>", label or "")
    return f"<{match.group(1).lower()}>" if match else label


def reflow(text: str) -> str:
    r"""``text`` (a docstring) with each paragraph on one line: Typer keeps a docstring's line breaks, which
    leave orphan words once the terminal re-wraps the lines.

    Examples
    --------
    >>> reflow("Train a network\n    past zero error.\n\n    More.")
    'Train a network past zero error.\n\nMore.'
    """
    return "\n\n".join(" ".join(p.split()) for p in inspect.cleandoc(text).split("\n\n"))


def first_sentence(text: str) -> str:
    r"""The first sentence of ``text``'s first paragraph: a command's line in its group's list.

    Examples
    --------
    >>> first_sentence("Run one experiment (tables, figures). Progress goes to stderr.\n\nMore.")
    'Run one experiment (tables, figures).'
    """
    head = reflow(text).split("\n\n")[0]
    return re.split(r"(?<=[.!?])\s+(?=[A-Z`])", head, maxsplit=1)[0]


class _Argument(TyperArgument):
    """A positional argument shown as ``NAME`` (``[NAME]`` when optional, ``NAME...`` when repeated) in the usage
    line, with its element type (``<path>``, not ``<list[Path]>``)."""

    def display_type_rich(self, ctx: Any) -> str | None:
        return _type_label(super().display_type_rich(ctx))

    def get_usage_pieces(self, ctx: Any) -> list[str]:
        return [f"{self.metavar}" if self.required else f"[{self.metavar}]"]


class _Option(TyperOption):
    """An option shown with its element type (a repeatable option's ``<str>``, not ``<list[str]>``)."""

    def display_type_rich(self, ctx: Any) -> str | None:
        return _type_label(super().display_type_rich(ctx))


class _Command(TyperCommand):
    """Every nclab command: help paragraphs reflowed, a one-sentence line in its group's list, arguments named in
    capitals, element types instead of Python types, and ``-h`` shown as a plain flag."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.help:
            self.help = reflow(self.help)
            self.short_help = self.short_help or first_sentence(self.help)
        for param in self.params:
            # Typer builds its own parameter objects; the subclasses change how they are shown, nothing else
            if type(param) is TyperArgument:
                param.__class__ = _Argument
                if param.metavar is None:
                    param.metavar = param.name.upper() + ("..." if param.nargs != 1 else "")
            elif type(param) is TyperOption:
                param.__class__ = _Option

    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)
        if option is not None:
            option.metavar = ""  # Typer prints <bool> beside an option without a metavar
        return option


class _Group(TyperGroup):
    """A command group whose ``-h/--help`` option shows as a plain flag (Typer prints ``<bool>`` beside an option
    without a metavar)."""

    # typer vendors its own click: its classes are annotated as Any rather than importing a private module
    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)
        if option is not None:
            option.metavar = ""
        return option


class _App(typer.Typer):
    """A Typer app whose commands are :class:`_Command` s."""

    def command(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("cls", _Command)
        return super().command(*args, **kwargs)


def make_app(name: str, help: str) -> typer.Typer:
    """A Typer app with nclab's settings (help on no arguments and on ``-h``, no completion, no locals in
    tracebacks, help options shown as plain flags, commands shown as :class:`_Command` shows them)."""
    return _App(
        name=name,
        help=help,
        cls=_Group,
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_show_locals=False,
        context_settings={"help_option_names": ["-h", "--help"]},
    )


#: The library's keyword arguments that a message may name, and the command-line flag of each: a message the
#: CLI prints names the flag (``pass resume=True (--resume)`` reads ``pass --resume``).
CLI_FLAGS = {"resume": "--resume", "overwrite": "--overwrite", "retry_failed": "--retry-failed"}
_KEYWORD = re.compile(r"\b(" + "|".join(CLI_FLAGS) + r")=True(?: \((--[a-z-]+)\))?")
#: The library's ``conventions={'key': 'value'}`` (a metric convention), said as the measure command's flag.
_CONVENTION = re.compile(r"conventions=\{'(\w+)': '(\w+)'\}")


def cli_message(text: str) -> str:
    """``text`` with the library's ``keyword=True`` spellings of :data:`CLI_FLAGS` replaced by their flags.

    Examples
    --------
    >>> cli_message("pass resume=True (--resume) to continue it, overwrite=True, or choose another folder")
    'pass --resume to continue it, --overwrite, or choose another folder'
    >>> cli_message("pass conventions={'weighting': 'empirical'} for sample weighting")
    'pass -c weighting=empirical (nclab measure) for sample weighting'
    """
    text = _CONVENTION.sub(lambda m: f"-c {m.group(1)}={m.group(2)} (nclab measure)", text)
    return _KEYWORD.sub(lambda m: CLI_FLAGS[m.group(1)], text)


def _message(err: BaseException | str) -> str:
    if isinstance(err, KeyError) and err.args:  # str(KeyError) wraps the message in quotes
        return cli_message(str(err.args[0]))
    return cli_message(str(err))


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
                    note(text)


def note(text: str) -> None:
    """Print ``note: text`` on stderr: every command's warnings and remarks look the same."""
    err_console.print(f"[yellow]note:[/yellow] {escape(cli_message(text))}", soft_wrap=True, highlight=False)


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


def out_option(help: str) -> Any:
    """``-o/--out``: where a command writes its files (every command that writes any takes it)."""
    return typer.Option("--out", "-o", help=help)


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
            from nclab.validation import did_you_mean

            hint = did_you_mean(key, known)
            raise typer.BadParameter(f"unknown key {key!r}{hint}; known: {', '.join(known)}", param_hint=option)
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
    """A table cell: 4 significant figures, a NaN as ``undefined`` (a value these data do not define); ``None``
    (no value) as ``none``: commands pass words for what is missing (``not reached``)."""
    if isinstance(v, float):
        if math.isnan(v):
            return "undefined"
        if math.isinf(v):
            return str(v)
        return str(int(v)) if v.is_integer() and abs(v) < 1e9 else f"{v:.4g}"
    return "none" if v is None else str(v)


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
    """Write a command's result on stdout: ``rows`` as a table (:func:`_cell`: 4 significant figures, a NaN as
    ``undefined``; ``footnotes`` under it), as CSV (full precision; the columns are every key in order of first
    appearance), or as JSON (``data`` when given, else the list of rows; nan and inf as strings)."""
    from nclab.io.tables import column_names, csv_text

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
        table.add_row(*(escape(_cell(row.get(k))) for k in keys))
    # the table's width with every cell wrapped at its spaces (measured unbounded: rich clamps to the console)
    if console.measure(table, options=console.options.update_width(10**6)).minimum > console.width:
        _records(rows, keys, title)  # even wrapped at spaces it would clip words: one block per row instead
    else:
        console.print(table)
    for text in footnotes:
        console.print(text, markup=False, highlight=False)


def emit_records(rows: Sequence[Mapping[str, Any]], title: str = "") -> None:
    """``rows`` as blocks of ``key: value`` lines (for long texts, which a boxed table would wrap into rows of
    half-empty cells)."""
    from nclab.io.tables import column_names

    _records(rows, column_names(rows), title)


def _records(rows: Sequence[Mapping[str, Any]], keys: Sequence[str], title: str) -> None:
    """``rows`` as blocks of ``key: value`` lines, each headed by its first value."""
    lines = [title] if title else []
    for row in rows:
        first, *rest = keys
        lines += [f"{first}: {_cell(row.get(first))}", *(f"  {k}: {_cell(row.get(k))}" for k in rest)]
    console.print("\n".join(lines), markup=False, highlight=False)
