"""`convo keys`: create, list and revoke the HTTP API's keys.

Each command migrates first (like `convo serve`), so keys can be made for a
database that has never been served. A new key is printed once, on stdout
(so it can be piped), with a warning on stderr that it is not shown again.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer
from rich.console import Console
from rich.table import Table

from convo.errors import database_errors, fail, load_settings
from hosting.settings import Settings

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

    from hosting.keys import ApiKey

T = TypeVar("T")

console = Console(stderr=True)
keys_app = typer.Typer(
    name="keys", help="Manage API keys (one tenant per key).", no_args_is_help=True
)


def _run(command: str, action: Callable[[AsyncEngine], Awaitable[T]]) -> T:
    """Open the database (embedded when no DATABASE_URL), migrate, run
    `action(engine)`; a database problem is one line and exit code 1."""
    from hosting.database import open_database
    from hosting.engines import make_async_engine
    from hosting.migrate import upgrade_database

    async def run(url: str, settings: Settings) -> T:
        engine = make_async_engine(url, settings, pool_size=1, max_overflow=0)
        try:
            return await action(engine)
        finally:
            await engine.dispose()

    with database_errors(f"keys {command}"):
        settings = load_settings()
        with open_database(settings) as database:
            upgrade_database(database.url, settings)
            return asyncio.run(run(database.url, settings))


@keys_app.command("create")
def create(
    tenant: Annotated[str, typer.Option("--tenant", "-t", help="The tenant the key acts for.")],
    name: Annotated[str, typer.Option("--name", "-n", help="What the key is for (a label).")],
    expires_in: Annotated[
        str | None,
        typer.Option(
            "--expires-in",
            help="Refuse the key after this long: a number and a unit, s, m, h or d"
            " (e.g. 90m, 12h, 30d). Never, by default.",
        ),
    ] = None,
    read_only: Annotated[
        bool,
        typer.Option(
            "--read-only",
            help="A key that reads and never writes: every route that changes the store"
            " answers 403 (for analysts and the console at /ui).",
        ),
    ] = False,
) -> None:
    """Create a key for a tenant and print it (once: only its hash is stored)."""
    from hosting.keys import READ_ONLY, READ_WRITE, create_key, expiry_after

    scope = READ_ONLY if read_only else READ_WRITE
    try:
        expires_at = expiry_after(expires_in) if expires_in is not None else None
        key_id, plaintext = _run(
            "create",
            lambda engine: create_key(engine, tenant, name, expires_at=expires_at, scope=scope),
        )
    except ValueError as error:
        raise fail("keys create", str(error), 2) from None
    until = f", expires {expires_at:%Y-%m-%d %H:%M:%S %Z}" if expires_at else ""
    what = "read-only key" if read_only else "key"
    console.print(
        f"[green]created[/green] {what} {key_id} for tenant {tenant!r} ({name}{until})",
        highlight=False,
    )
    console.print("[yellow]store it now: this key is not shown again[/yellow]")
    typer.echo(plaintext)


@keys_app.command("list")
def list_(
    tenant: Annotated[
        str | None, typer.Option("--tenant", "-t", help="Only this tenant's keys.")
    ] = None,
) -> None:
    """List keys (never the keys themselves: their first characters)."""
    from hosting.keys import list_keys

    keys = _run("list", lambda engine: list_keys(engine, tenant))
    table = Table(title="API keys")
    for column in ("id", "tenant", "name", "key", "scope", "created", "expires", "status"):
        table.add_column(column, overflow="fold")
    for key in keys:
        table.add_row(
            str(key.id),
            key.tenant,
            key.name,
            f"{key.key_start}…",
            key.scope.replace("_", "-"),
            key.created_at.strftime("%Y-%m-%d %H:%M:%S"),
            key.expires_at.strftime("%Y-%m-%d %H:%M:%S") if key.expires_at else "never",
            _status(key),
        )
    Console(width=200).print(table)
    if not keys:
        console.print("no keys" + (f" for tenant {tenant!r}" if tenant else ""))


def _status(key: ApiKey) -> str:
    if key.revoked_at is not None:
        return f"revoked {key.revoked_at:%Y-%m-%d %H:%M:%S}"
    return "expired" if key.expired else "active"


@keys_app.command("revoke")
def revoke(
    key: Annotated[
        str,
        typer.Argument(
            help="The key's id, the start of it (4+ characters), or the key's first"
            " characters as `convo keys list` shows them (cs_…)."
        ),
    ],
) -> None:
    """Revoke a key: requests with it are refused (401) from now on."""
    from hosting.keys import AmbiguousKey, KeyNotFound, find_key, key_filter, revoke_key

    try:
        key_filter(key)
    except ValueError as error:
        raise fail("keys revoke", str(error), 2) from None

    async def revoke_it(engine: AsyncEngine) -> tuple[uuid.UUID, bool]:
        found = await find_key(engine, key)
        return found.id, await revoke_key(engine, found.id)

    try:
        key_id, revoked = _run("revoke", revoke_it)
    except (KeyNotFound, AmbiguousKey) as error:
        raise fail("keys revoke", str(error), 1) from None
    if not revoked:
        raise fail("keys revoke", f"no active key with id {key_id}: it was revoked before", 1)
    console.print(f"[green]revoked[/green] key {key_id}", highlight=False)


def register(app: typer.Typer) -> None:
    app.add_typer(keys_app)
