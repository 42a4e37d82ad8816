"""Commands that run against the database: migrate, serve, demo."""

from __future__ import annotations

import asyncio

import typer
from rich.console import Console

from store.settings import Settings

console = Console(stderr=True)


def _migrate(url: str, settings: Settings) -> None:
    from store import migrate
    from store.db import make_sync_engine

    engine = make_sync_engine(url, settings)
    try:
        migrate.upgrade(engine)
    finally:
        engine.dispose()


def register(app: typer.Typer) -> None:
    register_rebuild(app)

    @app.command()
    def migrate() -> None:
        """Upgrade the database schema to the latest revision (alembic)."""
        from store.runtime import open_database

        settings = Settings.from_env()
        with open_database(settings) as database:
            _migrate(database.url, settings)
            console.print(f"[green]migrated[/green] {database.where}")

    @app.command()
    def serve(
        host: str = typer.Option("127.0.0.1", help="Interface to listen on."),
        port: int = typer.Option(8000, help="Port to listen on."),
    ) -> None:
        """Run the HTTP API (migrates first; embedded PostgreSQL when no DATABASE_URL)."""
        import uvicorn

        from api.app import create_app
        from store.runtime import open_database

        settings = Settings.from_env()
        with open_database(settings) as database:
            _migrate(database.url, settings)
            console.print(f"database: {database.where}")
            uvicorn.run(create_app(settings, database_url=database.url), host=host, port=port)

    @app.command()
    def demo() -> None:
        """Run a realistic agent session end to end and print what a user sees."""
        from store.demo import run_demo
        from store.runtime import open_database

        settings = Settings.from_env()
        with open_database(settings) as database:
            _migrate(database.url, settings)
            asyncio.run(run_demo(database.url, settings, where=database.where))


def register_rebuild(app: typer.Typer) -> None:
    @app.command()
    def rebuild(
        conversation: str | None = typer.Option(
            None, "--conversation", "-c", help="Rebuild only this conversation (its id)."
        ),
    ) -> None:
        """Rebuild every projection from the event log (all conversations, or one)."""
        import uuid

        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

        from store.bootstrap import open_storage
        from store.rebuild import rebuild as rebuild_projections
        from store.runtime import open_database

        try:
            target = uuid.UUID(conversation) if conversation else None
        except ValueError:
            console.print(f"[red]not a conversation id:[/red] {conversation}")
            raise typer.Exit(2) from None
        settings = Settings.from_env()

        async def run(url: str) -> None:
            storage = await open_storage(url, settings)
            try:
                total = await storage.count_events(target)
                with Progress(
                    "[progress.description]{task.description}",
                    BarColumn(),
                    MofNCompleteColumn(),
                    TimeElapsedColumn(),
                    console=console,
                ) as bar:
                    task = bar.add_task("replaying events", total=total)
                    report = await rebuild_projections(
                        storage, target, progress=lambda n: bar.advance(task, n)
                    )
                console.print(
                    f"[green]rebuilt[/green] {report.conversations} conversation(s) "
                    f"from {report.events} events"
                )
            finally:
                await storage.close()

        with open_database(settings) as database:
            _migrate(database.url, settings)
            asyncio.run(run(database.url))
