"""What the commands that read a tenant's data share (`convo conversations`,
`convo search`): how a bad option is refused, how an option's time and
JSON are read, and one call on the tenant's repository over the configured
database."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

import typer
from pydantic import BaseModel
from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from store.repository import Repository

T = TypeVar("T")


def fail(message: str) -> typer.Exit:
    """A refused option or operation: said on stderr, exit code 2."""
    Console(stderr=True).print(f"[red]error:[/] {message}")
    return typer.Exit(2)


def _parsed(value: str | None, option: str, parse: Callable[[str], T], what: str) -> T | None:
    if value is None:
        return None
    try:
        return parse(value)
    except ValueError:
        raise fail(f"{option}: not {what}: {value!r}") from None


def iso_time(value: str | None, option: str) -> datetime | None:
    """`option`'s ISO 8601 time (None when not given)."""
    return _parsed(value, option, datetime.fromisoformat, "an ISO 8601 time")


def json_option(value: str | None, option: str) -> Any:
    """`option`'s JSON (None when not given)."""
    return _parsed(value, option, json.loads, "JSON")


def show_page(
    items: Sequence[BaseModel], next_cursor: str | None, as_json: bool, table: Callable[[], Table]
) -> None:
    """A page of results: JSON lines (the next cursor on stderr), or the
    table `table` makes, then how to read on."""
    if as_json:
        for item in items:
            typer.echo(item.model_dump_json())
        if next_cursor is not None:
            Console(stderr=True).print(f"next cursor: {next_cursor}")
        return
    console = Console()
    console.print(table())
    if next_cursor is not None:
        console.print(f"more: --cursor {next_cursor}")


def read_with(command: str, tenant: str, read: Callable[[Repository], Awaitable[T]]) -> T:
    """`read(repository)` for `tenant`, over one connection to the configured
    database, closed after. Database problems end the command as every
    database command's do (`convo.errors.database_errors`); an operation
    the store refuses is refused as a bad option is."""
    from convo.errors import database_errors, load_settings
    from hosting.bootstrap import open_storage, repository
    from hosting.database import open_database
    from hosting.settings import Settings
    from store.domain.errors import InvalidOperation

    async def reading(url: str, settings: Settings) -> T:
        storage = await open_storage(url, settings, max_size=1)
        try:
            return await read(repository(storage, settings, tenant))
        finally:
            await storage.close()

    with database_errors(command):
        settings = load_settings()
        with open_database(settings) as database:
            try:
                return asyncio.run(reading(database.url, settings))
            except InvalidOperation as error:
                raise fail(str(error)) from None
