"""`convo conversations`: list a tenant's conversations, newest first, as a
table (or JSON lines with `--json`), with the HTTP listing's filters."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from hosting.settings import Settings
from store.domain.listing import ConversationPage


def _fail(message: str) -> typer.Exit:
    Console(stderr=True).print(f"[red]error:[/] {message}")
    return typer.Exit(2)


def _when(value: str | None, option: str) -> datetime | None:
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise _fail(f"{option}: not an ISO 8601 time: {value!r}") from None
    if moment.tzinfo is None:
        raise _fail(f"{option}: give a time zone, e.g. {value}Z or {value}+02:00")
    return moment


def conversations_command(
    tenant: Annotated[str, typer.Option("--tenant", "-t", help="Whose conversations.")] = (
        "default"
    ),
    metadata: Annotated[
        str | None,
        typer.Option("--metadata", "-m", help="Only those whose metadata contains this JSON."),
    ] = None,
    archived: Annotated[
        bool | None, typer.Option("--archived/--active", help="Only archived / not archived.")
    ] = None,
    created_from: Annotated[
        str | None, typer.Option(help="Created at or after (ISO 8601).")
    ] = None,
    created_to: Annotated[str | None, typer.Option(help="Created before (ISO 8601).")] = None,
    updated_from: Annotated[
        str | None, typer.Option(help="Last written at or after (ISO 8601).")
    ] = None,
    updated_to: Annotated[str | None, typer.Option(help="Last written before (ISO 8601).")] = None,
    oldest: Annotated[bool, typer.Option("--oldest", help="Oldest first.")] = False,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="At most this many.")] = 50,
    cursor: Annotated[str | None, typer.Option(help="A previous page's next cursor.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="JSON lines, one per conversation.")] = (
        False
    ),
) -> None:
    """List a tenant's conversations (deleted ones are not listed)."""
    from convo.errors import database_errors, load_settings
    from hosting.bootstrap import open_storage, repository
    from hosting.database import open_database
    from store.domain.errors import InvalidOperation

    wanted = None
    if metadata is not None:
        try:
            wanted = json.loads(metadata)
        except ValueError:
            raise _fail(f"--metadata: not JSON: {metadata!r}") from None
        if not isinstance(wanted, dict):
            raise _fail("--metadata: give a JSON object")
    times = {
        "created_from": _when(created_from, "--created-from"),
        "created_to": _when(created_to, "--created-to"),
        "updated_from": _when(updated_from, "--updated-from"),
        "updated_to": _when(updated_to, "--updated-to"),
    }

    async def listing(url: str, settings: Settings) -> ConversationPage:
        storage = await open_storage(url, settings, max_size=1)
        try:
            return await repository(storage, settings, tenant).list_conversations(
                metadata=wanted,
                archived=archived,
                order="oldest" if oldest else "newest",
                cursor=cursor,
                limit=limit,
                **times,
            )
        finally:
            await storage.close()

    with database_errors("conversations"):
        settings = load_settings()
        with open_database(settings) as database:
            try:
                page = asyncio.run(listing(database.url, settings))
            except InvalidOperation as error:
                raise _fail(str(error)) from None
    _show(page, as_json)


def _show(page: ConversationPage, as_json: bool) -> None:
    if as_json:
        for conversation in page.items:
            typer.echo(conversation.model_dump_json())
        if page.next_cursor is not None:
            Console(stderr=True).print(f"next cursor: {page.next_cursor}")
        return
    table = Table(title=f"{len(page.items)} conversation(s)")
    for column in ("id", "created", "updated", "version", "archived", "metadata"):
        table.add_column(column, overflow="fold")
    for c in page.items:
        table.add_row(
            str(c.id),
            c.started_at.isoformat(timespec="seconds"),
            "" if c.updated_at is None else c.updated_at.isoformat(timespec="seconds"),
            str(c.version),
            "yes" if c.archived else "",
            json.dumps(c.metadata, ensure_ascii=False)[:80],
        )
    console = Console()
    console.print(table)
    if page.next_cursor is not None:
        console.print(f"more: --cursor {page.next_cursor}")


def register(app: typer.Typer) -> None:
    app.command("conversations")(conversations_command)
