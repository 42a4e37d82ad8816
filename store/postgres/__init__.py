"""The repository on PostgreSQL: state port, reads, and the repository."""

from store.postgres.repository import PostgresRepository

__all__ = ["PostgresRepository"]
