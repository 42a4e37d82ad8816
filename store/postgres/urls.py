"""A database URL's two normal forms: SQLAlchemy's (driver named) and libpq's.

`DATABASE_URL` may be a plain libpq URL (`postgresql://user@host:5432/db`,
also `postgres://`) or already name the driver (`postgresql+psycopg://`).
"""

from __future__ import annotations

DRIVER_SCHEME = "postgresql+psycopg"


def sqlalchemy_url(url: str) -> str:
    """Name the psycopg 3 driver in `url`, whatever libpq spelling it came in."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise ValueError(f"DATABASE_URL is not a URL: {url!r}")
    if scheme in ("postgresql", "postgres", "postgresql+psycopg", "postgresql+psycopg3"):
        return f"{DRIVER_SCHEME}://{rest}"
    raise ValueError(
        f"DATABASE_URL must be a PostgreSQL URL (postgresql:// or postgresql+psycopg://), "
        f"got scheme {scheme!r}"
    )


def libpq_url(url: str) -> str:
    """The same URL as plain libpq understands it (for psql, pg_dump, raw psycopg)."""
    _, _, rest = sqlalchemy_url(url).partition("://")
    return f"postgresql://{rest}"
