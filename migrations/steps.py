"""What the revisions share: running their SQL statements in order.

A revision is history: the SQL it runs must never change once released.
So this module only runs what a revision hands it, in the order given, each
statement as its own `op.execute`, exactly as the revisions' own loops did.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from alembic import op


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
