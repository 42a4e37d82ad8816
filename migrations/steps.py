"""What the revisions share: running their SQL statements in order, and
declaring their tables' columns.

A revision is history: the SQL it runs must never change once released.
So this module only runs what a revision hands it, in the order given, each
statement as its own `op.execute`, exactly as the revisions' own loops did;
and its column helpers are `sa.Column` with `nullable` said once: changing
what they emit would change every released revision that uses them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.schema import SchemaItem


def execute_all(statements: Iterable[str]) -> None:
    """Run `statements` in order."""
    for statement in statements:
        op.execute(statement)


def statement_steps(
    upgrade: Sequence[str], downgrade: Sequence[str]
) -> tuple[Callable[[], None], Callable[[], None]]:
    """A revision's `upgrade` and `downgrade` when each is a list of
    statements: `upgrade, downgrade = statement_steps(UPGRADE, DOWNGRADE)`."""

    def run_upgrade() -> None:
        execute_all(upgrade)

    def run_downgrade() -> None:
        execute_all(downgrade)

    return run_upgrade, run_downgrade


def current_schema() -> str:
    """The schema a revision runs in, quoted as an identifier: what names its
    own functions and tables in SQL that runs later under another
    search_path (an index expression, a trigger)."""
    name: str = op.get_bind().exec_driver_sql("SELECT quote_ident(current_schema())").scalar_one()
    return name


def required(name: str, type_: Any, *more: SchemaItem, **options: Any) -> sa.Column[Any]:
    """A NOT NULL column of a revision's table (as `sa.Column(..., nullable=False)`)."""
    return sa.Column(name, type_, *more, nullable=False, **options)


def optional(name: str, type_: Any, **options: Any) -> sa.Column[Any]:
    """A column of a revision's table that may be NULL (as `sa.Column(..., nullable=True)`)."""
    return sa.Column(name, type_, nullable=True, **options)


def role_partitions(roles: Iterable[str]) -> list[str]:
    """The statements that made `message_role_index` one LIST partition per
    role (revision 0002, and again when 0012 is downgraded)."""
    return [
        f"CREATE TABLE message_role_index_{role} PARTITION OF message_role_index"
        f" FOR VALUES IN ('{role}')"
        for role in roles
    ]
