"""What every ``nclab`` command group shares: how apps are built, the two consoles, and the error exit."""

from __future__ import annotations

from typing import NoReturn

import typer
from rich.console import Console
from rich.markup import escape

console = Console()
err_console = Console(stderr=True)


def make_app(name: str, help: str) -> typer.Typer:
    """A Typer app with nclab's settings (help on no arguments, no completion, no locals in tracebacks)."""
    return typer.Typer(
        name=name, help=help, no_args_is_help=True, add_completion=False, pretty_exceptions_show_locals=False
    )


def fail(err: BaseException | str, hint: str = "", code: int = 2) -> NoReturn:
    """Print ``error: ...`` (markup-escaped, never wrapped mid-path) on stderr and exit with ``code``."""
    err_console.print(f"[red]error:[/red] {escape(str(err))}{hint}", soft_wrap=True, highlight=False)
    raise typer.Exit(code) from (err if isinstance(err, BaseException) else None)
