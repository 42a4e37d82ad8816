"""The storage port on PostgreSQL (psycopg 3): statements, feed, driver errors."""

from store.postgres.schema_revision import SCHEMA_REVISION, SchemaNotMigrated
from store.postgres.storage import DEFAULT_OPTIONS, PostgresStorage

__all__ = ["DEFAULT_OPTIONS", "SCHEMA_REVISION", "PostgresStorage", "SchemaNotMigrated"]
