"""Where the database is, for commands that need one.

With `DATABASE_URL` set, that server is used as it is. Without it, the
embedded server is started (data in `<data dir>/pgdata`), a `convo`
database is created in it on first use, and the server is stopped when the
command exits.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from sqlalchemy import make_url

from store.db import create_database_if_missing
from store.settings import Settings

EMBEDDED_DATABASE = "convo"


@dataclass(frozen=True)
class Database:
    url: str  # SQLAlchemy URL (postgresql+psycopg://…)
    embedded: bool
    where: str  # for people: the server, or the embedded data directory


@contextmanager
def open_database(settings: Settings) -> Iterator[Database]:
    if settings.database_url:
        shown = make_url(settings.database_url).render_as_string(hide_password=True)
        yield Database(url=settings.database_url, embedded=False, where=shown)
        return
    from store.embedded import start_embedded

    server = start_embedded(settings.data_dir)
    try:
        create_database_if_missing(server.url, EMBEDDED_DATABASE)
        url = make_url(server.url).set(database=EMBEDDED_DATABASE)
        yield Database(
            url=url.render_as_string(hide_password=False),
            embedded=True,
            where=str(server.pgdata),
        )
    finally:
        server.stop()
