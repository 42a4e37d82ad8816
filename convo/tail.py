"""`convo tail`: print a tenant's events as they commit, one JSON line each.

    convo tail [--tenant T] [--after CHECKPOINT] [--count N]

Without `--after` it starts from now; `--after 0-0` replays the whole feed
first. `--after` takes an event's `checkpoint` (a token holding a position
per partition of the feed) or a checkpoint of before partitions. Each line
is a `store.domain.feed.FeedEvent`, whose `checkpoint` resumes right after
it. Interrupted (Ctrl-C), it says on stderr where to resume. An event that
commits late is never skipped (store.domain.feed).
"""

from __future__ import annotations

import asyncio
import sys
from typing import Annotated

import typer

from hosting.settings import Settings
from store.domain.errors import ConvoStoreError, StorageFailure
from store.domain.feed_vector import FeedVector

EXIT_BAD_INPUT = 2


def _fail(problem: str) -> typer.Exit:
    typer.echo(f"convo tail: {' '.join(problem.split())}", err=True)
    return typer.Exit(code=EXIT_BAD_INPUT)


def tail_command(
    tenant: Annotated[str, typer.Option(help="Whose events.")] = "default",
    after: Annotated[
        str | None,
        typer.Option(help="Start after this checkpoint ('0-0': the beginning); default: now."),
    ] = None,
    count: Annotated[int | None, typer.Option(min=1, help="Stop after this many events.")] = None,
) -> None:
    """Print the tenant's events as they arrive, one JSON line each."""
    from store.domain.feed_vector import parse_position

    try:
        start = parse_position(after) if after is not None else None
    except ConvoStoreError as error:
        raise _fail(str(error)) from None

    from convo.errors import database_errors, load_settings
    from hosting.database import open_database

    reached: list[str] = []
    with database_errors("tail"):
        settings = load_settings()
        with open_database(settings) as database:
            try:
                asyncio.run(_tail(database.url, settings, tenant, start, count, reached))
            except KeyboardInterrupt:
                if reached:
                    typer.echo(f"convo tail: resume with --after {reached[-1]}", err=True)
            except StorageFailure:
                raise
            except ConvoStoreError as error:
                raise _fail(str(error)) from None


async def _tail(
    url: str,
    settings: Settings,
    tenant: str,
    start: FeedVector | None,
    count: int | None,
    reached: list[str],
) -> None:
    from hosting.bootstrap import open_storage, repository

    storage = await open_storage(url, settings, max_size=1)
    try:
        printed = 0
        async for page in repository(storage, settings, tenant).tail(start):
            for event in page.events:
                sys.stdout.write(event.model_dump_json() + "\n")
                reached.append(event.checkpoint)
                printed += 1
                if count is not None and printed >= count:
                    sys.stdout.flush()
                    return
            reached.append(page.next)
            sys.stdout.flush()
    finally:
        await storage.close()


def register(app: typer.Typer) -> None:
    app.command("tail")(tail_command)
