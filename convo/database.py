"""Commands that run against the database: migrate, serve, demo, rebuild.

Each waits for the database (`CONVO_DB_WAIT_S`) and migrates first; a
database problem ends it with one line on stderr and exit code 1
(`convo.errors`). Without DATABASE_URL they start the embedded
PostgreSQL and stop it when they end, also on SIGTERM or SIGHUP.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import typer
from rich.console import Console

from convo.errors import database_errors, fail, load_settings
from hosting.settings import Settings

if TYPE_CHECKING:
    from hosting.database import Database
from store.domain.conversation_keys import key_problem, stream_id
from store.repository import DEFAULT_TENANT

console = Console(stderr=True)

# The key `convo serve` prints on the embedded server: each start replaces it.
DEVELOPMENT_KEY_NAME = "development (convo serve)"


def _check_schema(url: str, settings: Settings) -> None:
    """SchemaNotMigrated unless the database is migrated (one query)."""
    from hosting.bootstrap import open_storage

    async def check() -> None:
        async with await open_storage(url, settings, max_size=1):
            pass

    asyncio.run(check())


def _say_if_created(database: Database) -> None:
    if database.created:
        console.print(f"[green]created the database[/green] {database.where}")


def register(app: typer.Typer) -> None:
    register_rebuild(app)

    @app.command()
    def migrate() -> None:
        """Upgrade the database schema to the latest revision (alembic)."""
        from hosting.database import open_database
        from hosting.migrate import upgrade_database

        with database_errors("migrate"):
            settings = load_settings()
            with open_database(settings, create=True) as database:
                _say_if_created(database)
                upgrade_database(database.url, settings)
        console.print(f"[green]migrated[/green] {database.where}")

    @app.command()
    def serve(
        host: str = typer.Option("127.0.0.1", help="Interface to listen on."),
        port: int = typer.Option(8000, help="Port to listen on."),
        workers: int = typer.Option(
            1, min=1, max=64, help="Worker processes (each its own event loop and pool)."
        ),
        migrate: bool = typer.Option(
            True,
            "--migrate/--no-migrate",
            help="Migrate the schema first (--no-migrate: deployments that migrate apart).",
        ),
    ) -> None:
        """Run the HTTP API (migrates first; embedded PostgreSQL when no DATABASE_URL).

        SIGTERM, SIGINT or SIGHUP stop it gracefully: requests in flight get
        CONVO_SHUTDOWN_TIMEOUT_S seconds to finish, then the embedded
        PostgreSQL (if any) is stopped. Logs are JSON lines on stderr
        (CONVO_LOG_FORMAT=text for plain lines)."""
        import logging.config

        try:
            from api.app import create_app
            from api.logging import logging_config
            from api.server import serve as run_server
            from api.server import serve_workers
        except ImportError as error:
            typer.echo(
                f"convo serve: the HTTP server is an extra ({error.name} is missing):"
                " pip install 'convo-store[server]'",
                err=True,
            )
            raise typer.Exit(1) from None
        from hosting.database import open_database
        from hosting.migrate import upgrade_database

        with database_errors("serve"):
            settings = load_settings()
            with open_database(settings, create=True) as database:
                _say_if_created(database)
                # Once the database answers: a start-up failure stays one line.
                logging.config.dictConfig(logging_config(settings))
                log = logging.getLogger("convo.server")
                if migrate:
                    upgrade_database(database.url, settings)
                else:
                    # Refused here in one line, not by the app's start-up.
                    _check_schema(database.url, settings)
                if database.embedded:
                    _development_banner(database.url, settings, host, port)
                log.info(
                    "serving on http://%s:%s, database %s",
                    host,
                    port,
                    database.where,
                    extra={"host": host, "port": port, "database": database.where},
                )
                if workers > 1:
                    supervisor = serve_workers(
                        settings, database_url=database.url, host=host, port=port, workers=workers
                    )
                    stopped_by = supervisor.stopped_by
                else:
                    app = create_app(settings, database_url=database.url)
                    stopped_by = run_server(app, settings, host=host, port=port).stopped_by
            log.info("stopped by %s", stopped_by or "the server")

    @app.command()
    def demo() -> None:
        """Run a realistic agent session end to end and print what a user sees."""
        try:
            from convo.demo import run_demo
        except ImportError as error:
            # The demo drives the HTTP app in-process: the server extra.
            raise fail(
                "demo",
                f"the demo runs the HTTP API, an extra ({error.name} is missing):"
                " pip install 'convo-store[server]'",
            ) from None
        from hosting.database import open_database
        from hosting.migrate import upgrade_database

        with database_errors("demo"):
            settings = load_settings()
            with open_database(settings, create=True) as database:
                _say_if_created(database)
                upgrade_database(database.url, settings)
                asyncio.run(run_demo(database.url, settings, where=database.where))


def _development_banner(url: str, settings: Settings, host: str, port: int) -> None:
    """On the embedded server (a development database): where to point a
    browser and a client, and a fresh key of the default tenant to do it with
    (the one an earlier start printed is revoked: one live development key).
    Never on a server of one's own, whose keys are made with `convo keys`."""
    from hosting.engines import make_async_engine
    from hosting.keys import replace_key
    from store.repository import DEFAULT_TENANT

    async def development_key() -> str:
        engine = make_async_engine(url, settings, pool_size=1, max_overflow=0)
        try:
            _, plaintext = await replace_key(engine, DEFAULT_TENANT, DEVELOPMENT_KEY_NAME)
            return plaintext
        finally:
            await engine.dispose()

    key = asyncio.run(development_key())
    base = f"http://{host}:{port}"
    lines = [
        "[bold]convo-store[/bold] on the embedded PostgreSQL (development)",
        f"  API       {base}",
        f"  docs      {base}/docs   (OpenAPI: {base}/openapi.json)",
        f"  dev key   {key}   (tenant {DEFAULT_TENANT!r}; the next start replaces it)",
        f"  try       curl -H 'Authorization: Bearer {key}' -X POST {base}/conversations"
        " -H 'Content-Type: application/json' -d '{\"id\": \"user-123\"}'",
    ]
    # On stdout: stderr carries the server's log lines (JSON by default).
    out = Console()
    for line in lines:
        out.print(line, soft_wrap=True, highlight=False)


def register_rebuild(app: typer.Typer) -> None:
    @app.command()
    def rebuild(
        conversation: str | None = typer.Option(
            None, "--conversation", "-c", help="Rebuild only this conversation (its id)."
        ),
        tenant: str = typer.Option(
            DEFAULT_TENANT, "--tenant", "-t", help="With --conversation: whose conversation."
        ),
    ) -> None:
        """Rebuild every projection from the event log (all conversations, or one)."""
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

        from hosting.bootstrap import open_storage
        from hosting.database import open_database
        from hosting.migrate import upgrade_database
        from store.repository.rebuild import rebuild as rebuild_projections

        problem = None if conversation is None else key_problem(conversation)
        if problem is not None:
            raise fail("rebuild", f"not a conversation id: {problem}", 2)
        target = None if conversation is None else stream_id(tenant, conversation)

        async def run(url: str, settings: Settings) -> None:
            storage = await open_storage(url, settings)
            try:
                total = await storage.count_events(target)
                if target is not None and total == 0:
                    # Said here, by the id given: the store would name its
                    # internal stream id.
                    raise fail(
                        "rebuild",
                        f"conversation {conversation!r} of tenant {tenant!r} does not exist",
                        2,
                    )
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

        with database_errors("rebuild"):
            settings = load_settings()
            with open_database(settings) as database:
                upgrade_database(database.url, settings)
                asyncio.run(run(database.url, settings))
