"""`convo verify`: check a store end to end, one line per problem
(store.postgres.verify). Exit 0 when nothing is wrong, 1 when something
is (or the database cannot be read): what a restored backup must pass
before it serves (docs/operations.md, "Backup and restore")."""

from __future__ import annotations

import asyncio

import typer
from rich.console import Console

from convo.errors import database_errors, load_settings
from hosting.settings import Settings

console = Console(stderr=True)


async def _verify(url: str, settings: Settings) -> int:
    from hosting.bootstrap import open_storage
    from store.postgres.verify import Verified, verify_store

    storage = await open_storage(url, settings, max_size=2)
    verified = Verified()
    problems = 0
    try:
        async for problem in verify_store(storage.pool, verified):
            problems += 1
            typer.echo(str(problem))
    finally:
        await storage.close()
    summary = (
        f"{verified.conversations} conversation(s), {verified.events} events,"
        f" {verified.search_probes} search probe(s): "
    )
    if problems:
        console.print(f"{summary}[red]{problems} problem(s)[/red]")
        return 1
    console.print(f"{summary}[green]OK[/green]")
    return 0


def register(app: typer.Typer) -> None:
    @app.command()
    def verify() -> None:
        """Check the store end to end: versions and seqs without gaps, views
        equal to a rebuild from the log, feed order, search indexes. One line
        per problem on stdout; exit 1 if there is any. Changes nothing."""
        from hosting.database import open_database

        with database_errors("verify"):
            settings = load_settings()
            with open_database(settings) as database:
                code = asyncio.run(_verify(database.url, settings))
        raise typer.Exit(code)
