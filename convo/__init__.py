"""The `convo` command line: one module per command group.

Each module in `COMMAND_MODULES` defines `register(app)`, which adds its
commands to the shared typer app. Commands that touch the database import
the database modules lazily, so `convo assemble` works without one.
"""

from __future__ import annotations

import typer

from convo import (
    assemble,
    compact,
    conversations,
    database,
    export,
    keys,
    search,
    tail,
    verify,
    xml_tools,
)

# In the order `convo --help` lists them.
COMMAND_MODULES = (
    database,
    assemble,
    xml_tools,
    keys,
    compact,
    export,
    tail,
    conversations,
    search,
    verify,
)

app = typer.Typer(
    name="convo",
    help="convo-store: an event-sourced conversation store for LLM agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

for _module in COMMAND_MODULES:
    _module.register(app)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        typer.echo(f"convo-store {version('convo-store')}")
        raise typer.Exit()


@app.callback()
def _options(
    show_version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """convo-store: an event-sourced conversation store for LLM agents."""


@app.command("config")
def config() -> None:
    """Every setting (DATABASE_URL and each CONVO_* variable): its effective value
    now, secrets masked, and what it sets."""
    from rich.console import Console
    from rich.table import Table

    from convo.errors import load_settings
    from hosting.database import StartupError

    try:
        settings = load_settings()
    except StartupError as error:
        typer.echo(f"convo config: {error}", err=True)
        raise typer.Exit(1) from None
    table = Table(title="settings (from the environment)")
    for column in ("variable", "value", "sets"):
        table.add_column(column)
    for variable, shown, meaning in settings.effective():
        table.add_row(variable, shown, meaning)
    Console().print(table)


def main() -> None:
    app()
