"""`convo retention`: archived conversations out to cold storage, and back.

    convo retention archive --older-than 30d --to DIR [--tenant T] [--dry-run]
    convo retention restore FILE [FILE...]

`archive` moves each of the tenant's archived conversations last written
more than the age ago (archiving is a write: the age counts from it, or
from a later one) to DIR: its events as JSON Lines and a manifest, verified
by reading them back, and only then deletes it (store.repository.cold_storage).
`--dry-run` lists what would move and moves nothing. `restore` puts a
conversation back from its copy (the `.jsonl` or its `.manifest.json`), with
the same ids, versions and payloads, as the tenant the manifest names;
a conversation of that id that is live is refused.

One line per conversation on stdout; the count on stderr. Bad input (an
age that is not one, a file that is not a cold copy, a live conversation
of a restored id) exits 2; a copy that does not read back, or a database
problem, exits 1. A failure stops the run; what moved before it stays moved.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from hosting.settings import Settings
from store.domain.errors import ConvoStoreError, StorageFailure

EXIT_BAD_INPUT = 2
EXIT_NOT_VERIFIED = 1

app = typer.Typer(
    name="retention",
    help="Move archived conversations to cold storage, and restore them.",
    no_args_is_help=True,
)


def _fail(problem: str, code: int = EXIT_BAD_INPUT) -> typer.Exit:
    typer.echo(f"convo retention: {' '.join(problem.split())}", err=True)
    return typer.Exit(code=code)


def _run_with_database(
    work: str, run: Callable[[str, Settings], Coroutine[Any, Any, None]]
) -> None:
    """Run `run(url, settings)` on the database; the store's errors as one line."""
    from convo.errors import database_errors, load_settings
    from hosting.database import open_database
    from store.repository.cold_storage import ColdCopyMismatch

    with database_errors(f"retention {work}"):
        settings = load_settings()
        with open_database(settings) as database:
            try:
                asyncio.run(run(database.url, settings))
            except ColdCopyMismatch as error:
                raise _fail(str(error), EXIT_NOT_VERIFIED) from None
            except StorageFailure:
                raise  # a database problem: database_errors says it, exit 1
            except ConvoStoreError as error:
                raise _fail(str(error)) from None


@app.command("archive")
def archive_command(
    older_than: Annotated[
        str,
        typer.Option(help="Move those last written longer ago than this: 30d, 12h, 90m."),
    ],
    to: Annotated[
        Path,
        typer.Option(help="The cold storage directory (created if missing)."),
    ],
    tenant: Annotated[str, typer.Option(help="Whose conversations.")] = "default",
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="List what would move; move nothing.")
    ] = False,
) -> None:
    """Move archived conversations older than an age to cold storage."""
    from convo.export import parse_age

    age = parse_age(older_than)
    if age is None:
        raise _fail(f"--older-than {older_than!r} is not an age like 30d, 12h or 90m")
    before = datetime.now(UTC) - age
    if not dry_run:
        try:
            to.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise _fail(f"cannot use {to} as the cold storage directory: {error}") from None
    moved: list[int] = []

    async def run(url: str, settings: Settings) -> None:
        from hosting.bootstrap import open_storage, repository
        from store.repository.cold_storage import archive_conversation, retention_candidates

        storage = await open_storage(url, settings, max_size=1)
        try:
            store = repository(storage, settings, tenant)
            async for conversation in retention_candidates(store, before):
                last = conversation.updated_at or conversation.started_at
                written = last.isoformat(timespec="seconds")
                if dry_run:
                    typer.echo(
                        f"would move {conversation.id}: {conversation.version} events,"
                        f" last written {written}"
                    )
                else:
                    manifest = await archive_conversation(store, conversation, to)
                    typer.echo(
                        f"moved {conversation.id}: {manifest.events} events,"
                        f" last written {written} → {to / manifest.file}"
                    )
                moved.append(conversation.version)
        finally:
            await storage.close()

    _run_with_database("archive", run)
    verb = "would move" if dry_run else "moved"
    typer.echo(f"{verb} {len(moved)} conversations ({sum(moved)} events)", err=True)


@app.command("restore")
def restore_command(
    files: Annotated[
        list[Path],
        typer.Argument(help="Cold copies: each a .jsonl file or its .manifest.json."),
    ],
) -> None:
    """Put conversations back from their cold copies, as they were."""
    from store.repository.cold_storage import read_manifest

    try:
        tenants = [read_manifest(path)[0].tenant for path in files]
    except ConvoStoreError as error:
        raise _fail(str(error)) from None

    async def run(url: str, settings: Settings) -> None:
        from hosting.bootstrap import open_storage, repository
        from store.repository.cold_storage import restore_cold_copy

        storage = await open_storage(url, settings, max_size=1)
        try:
            for path, tenant in zip(files, tenants, strict=True):
                restored = await restore_cold_copy(repository(storage, settings, tenant), path)
                typer.echo(f"restored {restored.id} (tenant {tenant}): {restored.version} events")
        finally:
            await storage.close()

    _run_with_database("restore", run)
    typer.echo(f"restored {len(files)} conversations", err=True)


def register(main: typer.Typer) -> None:
    main.add_typer(app)
