"""`convo export`: conversations as JSON Lines (store.repository.export), to stdout or a file.

    convo export --conversation ID [--events] [--output FILE]
    convo export --since 2026-11-01T00:00:00Z [--tenant T] [--output FILE]
    convo export --since 24h

One conversation, or every conversation of the tenant changed since a
time (an ISO 8601 time, UTC if it names no zone, or an age: `90m`, `24h`,
`7d`), read a page at a time, with a progress bar on stderr. Bad input (an
unknown conversation, a time that is not one) exits 2 with one line; a
database problem exits 1.
"""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Annotated

import typer

from hosting.settings import Settings
from store.domain.errors import ConvoStoreError, StorageFailure

EXIT_BAD_INPUT = 2
PAGE_OF_CONVERSATIONS = 100
_AGE = re.compile(r"(\d+)\s*([smhd])")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def _fail(problem: str, code: int = EXIT_BAD_INPUT) -> typer.Exit:
    typer.echo(f"convo export: {' '.join(problem.split())}", err=True)
    return typer.Exit(code=code)


def parse_age(text: str) -> timedelta | None:
    """An age such as `90m`, `24h`, `7d` (or `30s`); None if `text` is not one."""
    age = _AGE.fullmatch(text.strip())
    if age is None or len(age[1]) > 5:  # 99999d (273 years) before now is still a date
        return None
    return timedelta(**{_UNITS[age[2]]: int(age[1])})


def parse_since(text: str, now: datetime | None = None) -> datetime:
    """An ISO 8601 time (UTC unless it says otherwise) or an age before now."""
    delta = parse_age(text)
    if delta is not None:
        return (now or datetime.now(UTC)) - delta
    try:
        found = datetime.fromisoformat(text.strip())
    except ValueError:
        raise _fail(
            f"--since {text!r} is neither an ISO 8601 time nor an age like 90m, 24h or 7d"
        ) from None
    return found if found.tzinfo is not None else found.replace(tzinfo=UTC)


@contextmanager
def _output(path: Path | None) -> Iterator[IO[bytes]]:
    if path is None:
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
        return
    with path.open("wb") as file:
        yield file


def export_command(
    conversation: Annotated[
        str | None,
        typer.Option("--conversation", "-c", help="Export this conversation (its id)."),
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(
            help="Export every conversation of the tenant changed since then:"
            " an ISO 8601 time or an age (90m, 24h, 7d)."
        ),
    ] = None,
    tenant: Annotated[str, typer.Option(help="Whose conversations.")] = "default",
    events: Annotated[
        bool, typer.Option("--events", help="The raw event log instead of typed messages.")
    ] = False,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write here instead of stdout.")
    ] = None,
) -> None:
    """Export conversations as JSON Lines: one typed message (user, assistant,
    tool, system, reminder, summary) or, with --events, one event per line."""
    if (conversation is None) == (since is None):
        raise _fail("give exactly one of --conversation ID or --since TIME")
    changed_since = parse_since(since) if since is not None else None

    from convo.errors import database_errors, load_settings
    from hosting.database import open_database

    with database_errors("export"):
        settings = load_settings()
        with open_database(settings) as database, _output(output) as sink:
            try:
                written = asyncio.run(
                    _export(
                        database.url, settings, tenant, conversation, changed_since, events, sink
                    )
                )
            except StorageFailure:
                raise  # a database problem: database_errors says it, exit 1
            except ConvoStoreError as error:
                raise _fail(str(error)) from None
    where = f" to {output}" if output is not None else ""
    typer.echo(f"exported {written} {'events' if events else 'messages'}{where}", err=True)


async def _export(
    url: str,
    settings: Settings,
    tenant: str,
    conversation: str | None,
    since: datetime | None,
    events: bool,
    sink: IO[bytes],
) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from hosting.bootstrap import open_storage, repository
    from store.repository.export import export_pages

    storage = await open_storage(url, settings, max_size=1)
    try:
        store = repository(storage, settings, tenant)
        progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            console=Console(stderr=True),
            transient=False,
        )
        unit = "events" if events else "messages"
        with progress:
            if conversation is not None:
                found = await store.get_conversation(conversation)
                total = found.version if events else found.next_seq - 1
                task = progress.add_task(f"{conversation}: {unit}", total=total)
                return await _write(
                    export_pages(store, conversation, events=events, name=conversation),
                    sink,
                    lambda n: progress.advance(task, n),
                )
            assert since is not None
            listed = progress.add_task("conversations", total=None)
            lines = progress.add_task(unit, total=None)
            written = 0
            after = None
            while page := await store.changed_conversations(
                since, after=after, limit=PAGE_OF_CONVERSATIONS
            ):
                for changed in page:
                    written += await _write(
                        export_pages(store, changed.key, events=events, name=changed.key),
                        sink,
                        lambda n: progress.advance(lines, n),
                    )
                    progress.advance(listed, 1)
                after = page[-1].id
            return written
    finally:
        await storage.close()


async def _write(
    pages: AsyncIterator[bytes], sink: IO[bytes], advance: Callable[[int], object]
) -> int:
    written = 0
    async for chunk in pages:
        sink.write(chunk)
        lines = chunk.count(b"\n")
        written += lines
        advance(lines)
    return written


def register(app: typer.Typer) -> None:
    app.command("export")(export_command)
