"""`convo search`: search a tenant's messages, as `GET /messages/search`
does, shown as a table (or JSON lines with `--json`)."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from convo.reading import fail, iso_time, json_option, read_with, show_page
from store.domain.search import DEFAULT_SEARCH_LIMIT, MAX_SEARCH_LIMIT, SearchHit, SearchPage
from store.repository import Repository


def search_command(
    q: Annotated[str, typer.Argument(help="What to find (words, or characters with --substring).")],
    tenant: Annotated[str, typer.Option("--tenant", "-t", help="Whose messages.")] = "default",
    substring: Annotated[
        bool,
        typer.Option(
            "--substring", "-s", help="Match the characters anywhere: 3 or more, or CJK ones only."
        ),
    ] = False,
    role: Annotated[str | None, typer.Option(help="Only this role's messages.")] = None,
    agent: Annotated[str | None, typer.Option(help="Only this agent's messages.")] = None,
    kind: Annotated[str | None, typer.Option(help="Only this kind of message.")] = None,
    tool: Annotated[str | None, typer.Option(help="Only calls of this tool and their results.")] = (
        None
    ),
    conversation: Annotated[
        str | None, typer.Option("--conversation", "-c", help="Only this conversation.")
    ] = None,
    batch: Annotated[int | None, typer.Option(help="Only messages of this batch.")] = None,
    recorded_from: Annotated[
        str | None, typer.Option("--from", help="Recorded at or after (ISO 8601, with zone).")
    ] = None,
    recorded_to: Annotated[
        str | None, typer.Option("--to", help="Recorded before (ISO 8601, with zone).")
    ] = None,
    metadata: Annotated[
        str | None,
        typer.Option(
            "--metadata", "-m", help="Only conversations whose metadata contains this JSON."
        ),
    ] = None,
    limit: Annotated[
        int, typer.Option(min=1, max=MAX_SEARCH_LIMIT, help="At most this many hits.")
    ] = DEFAULT_SEARCH_LIMIT,
    cursor: Annotated[str | None, typer.Option(help="A previous page's next cursor.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="JSON lines, one per hit.")] = False,
) -> None:
    """Search a tenant's messages, newest first (docs/search.md)."""
    from store.domain.errors import InvalidOperation
    from store.domain.search import search_query

    fields: dict[str, Any] = {
        "q": q,
        "mode": "substring" if substring else "text",
        "role": role,
        "agent_id": agent,
        "kind": kind,
        "tool_name": tool,
        "conversation_id": conversation,
        "batch": batch,
        "recorded_from": iso_time(recorded_from, "--from"),
        "recorded_to": iso_time(recorded_to, "--to"),
        "metadata": json_option(metadata, "--metadata"),
        "limit": limit,
        "cursor": cursor,
    }
    try:
        query = search_query(**fields)
    except InvalidOperation as error:
        raise fail(str(error)) from None

    async def search(store: Repository) -> SearchPage:
        if conversation is not None:
            # A conversation that is not there is an error, not zero hits.
            await store.get_conversation(conversation)
        return await store.search_messages(query)

    _show(read_with("search", tenant, search), as_json)


def _snippet(hit: SearchHit) -> Text:
    text = Text(hit.snippet.replace("\n", " "))
    for start, end in hit.highlights:
        text.stylize("bold yellow", start, end)
    return text


def _show(page: SearchPage, as_json: bool) -> None:
    show_page(page.hits, page.next_cursor, as_json, lambda: _table(page))


def _table(page: SearchPage) -> Table:
    table = Table(title=f"{len(page.hits)} hit(s), newest first")
    for column in ("conversation", "seq", "role", "agent", "batch", "recorded", "snippet"):
        table.add_column(column, overflow="fold")
    for hit in page.hits:
        table.add_row(
            hit.conversation_id,
            str(hit.seq),
            hit.role + (" (edited)" if hit.edited else ""),
            hit.agent_id,
            str(hit.batch),
            hit.recorded_at.isoformat(timespec="seconds"),
            _snippet(hit),
        )
    return table


search_index = typer.Typer(
    name="search-index",
    help="The indexes that make search fast (and appends slower): docs/search.md.",
    no_args_is_help=True,
)

Which = Annotated[
    str, typer.Argument(help="text (words, mode=text) or substring (mode=substring).")
]


def _index_command(action: str, kinds: tuple[str, ...]) -> None:
    import psycopg

    from convo.errors import database_errors, load_settings
    from hosting.database import open_database
    from hosting.settings import libpq_url
    from store.domain.errors import InvalidOperation
    from store.postgres import search_indexes

    chosen: list[search_indexes.SearchIndexKind] = []
    for kind in kinds:
        if kind == "text":
            chosen.append("text")
        elif kind == "substring":
            chosen.append("substring")
        else:
            raise fail(f"no search index {kind!r}: text or substring")
    change = {
        "enable": search_indexes.enable,
        "disable": search_indexes.disable,
        "status": search_indexes.status,
    }[action]
    with database_errors(f"search-index {action}"):
        settings = load_settings()
        with (
            open_database(settings) as database,
            psycopg.connect(libpq_url(database.url), autocommit=True) as conn,
        ):
            try:
                now = [change(conn, kind) for kind in chosen]
            except InvalidOperation as error:
                raise fail(str(error)) from None
    console = Console()
    for index in now:
        if index.present and index.valid:
            state = f"[green]built[/], {index.size_bytes / 1e6:.1f} MB"
        elif index.present:
            state = "[yellow]invalid[/] (a build did not finish): enable it again"
        else:
            state = f"not built: mode={index.kind} reads the searched conversations' events"
        console.print(f"{index.kind} index ({index.name}): {state}")


@search_index.command("status")
def index_status() -> None:
    """Which search indexes are built, and their sizes."""
    _index_command("status", ("text", "substring"))


@search_index.command("enable")
def index_enable(which: Which) -> None:
    """Build a search index (CONCURRENTLY: the store keeps running)."""
    _index_command("enable", (which,))


@search_index.command("disable")
def index_disable(which: Which) -> None:
    """Drop a search index (appends get cheaper, that search slower)."""
    _index_command("disable", (which,))


def register(app: typer.Typer) -> None:
    app.command("search")(search_command)
    app.add_typer(search_index)
