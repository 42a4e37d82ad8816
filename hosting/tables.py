"""Every table convo-store owns, registered on one `metadata`.

Import this (not the table modules one by one) wherever the whole schema
is needed: the alembic environment, the models-match-migrations test.
"""

from __future__ import annotations

from hosting import keys as api_key_tables  # noqa: F401
from store.postgres import tables as projection_tables
from store.postgres.schema import metadata
from store.postgres.tables import include_name

__all__ = ["include_name", "metadata", "projection_tables"]
