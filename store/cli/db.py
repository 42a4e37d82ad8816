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
            uvicorn.run(create_app(database.url, settings), host=host, port=port)

    @app.command()
    def demo() -> None:
        """Run a realistic agent session end to end and print what a user sees."""
        from store.demo import run_demo
        from store.runtime import open_database

        settings = Settings.from_env()
        with open_database(settings) as database:
            _migrate(database.url, settings)
            asyncio.run(run_demo(database.url, settings, where=database.where))
