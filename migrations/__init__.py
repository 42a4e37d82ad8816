"""Alembic migrations: one reviewed revision per schema change."""
