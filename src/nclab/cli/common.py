"""What every ``nclab`` command group shares: how apps are built, the two consoles, and the error exit.

Output streams: a command's result (a table, or JSON / CSV with ``-f``) goes to stdout; progress, notes and
errors go to stderr, so ``nclab ... -f json > out.json`` captures only the result. Neither console wraps a line
mid-word (paths stay whole for copy-paste).

User errors (a bad config, missing data, an unknown layer, impossible sizes: the :data:`USER_ERRORS` raised
inside :func:`user_errors`) end the command with one ``error: ...`` paragraph on stderr and exit code 2; the
traceback is printed only with ``nclab --debug``.
"""

from __future__ import annotations

import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NoReturn

import typer
from rich.console import Console
from rich.markup import escape

__all__ = ["USER_ERRORS", "console", "err_console", "fail", "make_app", "set_debug", "user_errors"]

console = Console(soft_wrap=True)
err_console = Console(stderr=True, soft_wrap=True)

#: Exceptions that mean "the input is wrong", not "nclab is broken": their message is the whole report.
#: ``DatasetNotFoundError`` is a ``FileNotFoundError``, ``ConfigError`` and ``CorruptDatasetError`` are
#: ``ValueError``s; an unknown layer or metric name is a ``KeyError``; a diverged run a ``FloatingPointError``.
USER_ERRORS: tuple[type[BaseException], ...] = (
    FileNotFoundError,
    FileExistsError,
    NotADirectoryError,
    ValueError,
    KeyError,
    FloatingPointError,
)

_debug = {"on": False}


def set_debug(on: bool) -> None:
    """Show tracebacks under :func:`fail` (``nclab --debug``)."""
    _debug["on"] = bool(on)


def make_app(name: str, help: str) -> typer.Typer:
    """A Typer app with nclab's settings (help on no arguments and on ``-h``, no completion, no locals in
    tracebacks)."""
    return typer.Typer(
        name=name,
        help=help,
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
def user_errors() -> Iterator[None]:
    """Turn a :data:`USER_ERRORS` exception raised inside the block into :func:`fail` (exit code 2)."""
    try:
        yield
    except USER_ERRORS as err:
        fail(err)
