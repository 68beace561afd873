"""The ``nclab`` command, the application layer above the library (library packages never import it).

One module per command group, each a Typer app or command function: :mod:`~nclab.cli.measure`,
:mod:`~nclab.cli.extract`, :mod:`~nclab.cli.train` (``train``, ``report``, ``demo``), :mod:`~nclab.cli.ufm`,
:mod:`~nclab.cli.codes`, :mod:`~nclab.cli.theory`, :mod:`~nclab.cli.sweep`, :mod:`~nclab.cli.compare`,
:mod:`~nclab.cli.metrics`, :mod:`~nclab.cli.transfer` (``probe``, ``transfer run``), :mod:`~nclab.cli.experiment`,
:mod:`~nclab.cli.verify`;
:mod:`nclab.cli.common` holds the consoles, the app settings and the error exit they share (``--debug`` shows
tracebacks). :data:`app` assembles them (console script ``nclab``, ``python -m nclab``).
"""

from __future__ import annotations

from typing import Annotated

import typer

from nclab import __version__
from nclab.cli import codes, compare, experiment, extract, measure, metrics, sweep, theory, train, transfer, ufm, verify
from nclab.cli.common import flag, make_app, set_debug

__all__ = ["app", "main"]

app = make_app("nclab", "Measure, simulate and predict neural collapse.")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"nclab {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    debug: Annotated[bool, flag("--debug", help="print the traceback of an error")] = False,
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="print the version and exit", metavar=""),
    ] = False,
) -> None:
    """Measure, simulate and predict neural collapse."""
    set_debug(debug)


app.command("measure")(measure.measure_command)
app.command("extract")(extract.extract_command)
app.command("demo")(train.demo_command)
app.command("train")(train.train_command)
app.command("report")(train.report_command)
app.command("probe")(transfer.probe_command)
app.command("sweep")(sweep.sweep_command)
app.command("compare")(compare.compare_command)
app.command("verify")(verify.verify_command)
app.add_typer(ufm.app, name="ufm", help="Unconstrained-features models: solvers against closed forms.")
app.add_typer(codes.app, name="codes", help="Softmax Codes, Tammes codes and their bounds (K > d).")
app.add_typer(theory.app, name="theory", help="MSE central path and the geodesic model of collapse.")
app.add_typer(metrics.app, name="metrics", help="The registered collapse metrics: label, direction, definition.")
app.add_typer(transfer.app, name="transfer", help="Transfer studies: which collapse metric predicts transfer?")
app.add_typer(experiment.app, name="experiment", help="Registered reproductions of the papers' experiments.")


def main() -> None:
    """Run the ``nclab`` command on ``sys.argv``.

    The console script ``nclab`` and ``python -m nclab`` call it. It exits the process: status 0 on success, 2
    for a user error (one ``error:`` paragraph on standard error, no traceback unless ``--debug``).

    See Also
    --------
    app : the Typer application it runs, for tests (``typer.testing.CliRunner().invoke(app, [...])``).

    Examples
    --------
    >>> import sys
    >>> from unittest import mock
    >>> with mock.patch.object(sys, "argv", ["nclab", "--version"]):
    ...     try:
    ...         main()
    ...     except SystemExit as stop:
    ...         status = stop.code  # doctest: +ELLIPSIS
    nclab ...
    >>> status
    0
    """
    app()
