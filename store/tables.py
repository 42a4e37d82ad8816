"""Every table convo-store owns, registered on one `metadata`.

Import this (not the table modules one by one) wherever the whole schema
is needed: the alembic environment, the models-match-migrations test.
"""

from __future__ import annotations

from store import api_keys as api_key_tables  # noqa: F401
from store.projections import tables as projection_tables
from store.projections.tables import include_name
from store.schema import metadata

__all__ = ["include_name", "metadata", "projection_tables"]
