"""The `convo` command line: one module per command group.

Each module in `COMMAND_MODULES` defines `register(app)`, which adds its
commands to the shared typer app. Commands that touch the database import
the database modules lazily, so `convo assemble` works without one.
"""

from __future__ import annotations

import importlib

import typer

COMMAND_MODULES: tuple[str, ...] = ("db", "assemble", "keys")

app = typer.Typer(
    name="convo",
    help="convo-store: an event-sourced conversation store for LLM agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

for _name in COMMAND_MODULES:
    importlib.import_module(f"store.cli.{_name}").register(app)


def main() -> None:
    app()
