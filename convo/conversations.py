"""`convo conversations`: list a tenant's conversations, newest first, as a
table (or JSON lines with `--json`), with the HTTP listing's filters."""

from __future__ import annotations

import json
from collections.abc import Awaitable
from datetime import datetime
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from convo.reading import fail, iso_time, json_option, read_with, show_page
from store.domain.listing import ConversationPage

if TYPE_CHECKING:
    from store.repository import Repository


def _when(value: str | None, option: str) -> datetime | None:
    moment = iso_time(value, option)
    if moment is not None and moment.tzinfo is None:
        raise fail(f"{option}: give a time zone, e.g. {value}Z or {value}+02:00")
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
    wanted = json_option(metadata, "--metadata")
    if wanted is not None and not isinstance(wanted, dict):
        raise fail("--metadata: give a JSON object")
    times = {
        "created_from": _when(created_from, "--created-from"),
        "created_to": _when(created_to, "--created-to"),
        "updated_from": _when(updated_from, "--updated-from"),
        "updated_to": _when(updated_to, "--updated-to"),
    }

    def listing(repository: Repository) -> Awaitable[ConversationPage]:
        return repository.list_conversations(
            metadata=wanted,
            archived=archived,
            order="oldest" if oldest else "newest",
            cursor=cursor,
            limit=limit,
            **times,
        )

    _show(read_with("conversations", tenant, listing), as_json)


def _show(page: ConversationPage, as_json: bool) -> None:
    show_page(page.items, page.next_cursor, as_json, lambda: _table(page))


def _table(page: ConversationPage) -> Table:
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
    return table


def register(app: typer.Typer) -> None:
    app.command("conversations")(conversations_command)
