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
    retention,
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
    retention,
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


# Command groups whose subcommand is part of the command's name in a message.
_GROUPS = frozenset({"keys", "search-index"})


def _command_name(argv: list[str]) -> str:
    words = [word for word in argv if not word.startswith("-")]
    return " ".join(["convo", *words[: 2 if words[:1] and words[0] in _GROUPS else 1]])


def _one_line(error: Exception, args: list[str]) -> int | None:
    """Say what went wrong in one line on stderr; the exit code, or None for
    an error that is not the command line's or the store's (a bug).

    The command line's errors are typer's (its bundled click's, which it
    does not export: told apart by the base it does export and by name)."""
    from store.domain.errors import ConvoStoreError

    ctx = getattr(error, "ctx", None)
    kind = type(error).__name__
    if kind == "NoArgsIsHelpError" and ctx is not None:
        typer.echo(ctx.get_help())
        return 2
    if kind == "Abort":
        typer.echo(f"{_command_name(args)}: interrupted", err=True)
        return 130
    if isinstance(error, typer.exceptions.TyperException):
        name = ctx.command_path if ctx is not None else _command_name(args)
        message = error.format_message() if hasattr(error, "format_message") else str(error)
        hint = f" (see {name} --help)" if ctx is not None else ""
        typer.echo(f"{name}: {' '.join(message.split())}{hint}", err=True)
        code: int = getattr(error, "exit_code", 1)
        return code
    if isinstance(error, ConvoStoreError):
        typer.echo(f"{_command_name(args)}: {' '.join(str(error).split())}", err=True)
        return 1
    return None


def main(argv: list[str] | None = None) -> None:
    """The `convo` command: every error is one line on stderr naming the
    problem, and a non-zero exit (2 for a bad command line, 1 otherwise).

    Typer's own handling would print a usage error as a framed block and an
    unexpected exception as a traceback; running it in click's
    non-standalone mode hands both to us. CONVO_TRACEBACK=1 shows the
    traceback of an unexpected error (a bug: please report it)."""
    import os
    import sys

    args = sys.argv[1:] if argv is None else argv
    try:
        code = app(args=args, prog_name="convo", standalone_mode=False)
    except Exception as error:
        code = _one_line(error, args)
        if code is None:
            if os.environ.get("CONVO_TRACEBACK"):
                raise
            problem = " ".join(str(error).split()) or "(no message)"
            typer.echo(
                f"{_command_name(args)}: unexpected error, a bug: {type(error).__name__}:"
                f" {problem} (CONVO_TRACEBACK=1 shows where)",
                err=True,
            )
            code = 1
    except KeyboardInterrupt:
        typer.echo(f"{_command_name(args)}: interrupted", err=True)
        code = 130
    sys.exit(code if isinstance(code, int) else 0)
