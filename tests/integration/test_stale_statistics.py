"""A batch operation reads its conversation by key, whatever the planner
believes (docs/operations.md, "Statistics").

A conversation the table statistics do not know yet is estimated at a row or
two; a join planned for that reads the conversation once per message, and a
20,000-message `start_batch` ran past the statement timeout. Here the
statistics are made stale on purpose (autovacuum off for the test's tables,
ANALYZE while only a small conversation exists, then a big one appended),
and the plans of what a batch operation reads and copies, and of the reads
of a compacted window, are checked: every scan of `events` or `messages`
run more than once is an index look-up by the row's key, never a scan of
the conversation."""

from __future__ import annotations

import json
from typing import Any

import psycopg

from store.domain.conversation_keys import stream_id
from store.domain.messages import Message
from store.postgres import sql
from store.postgres.urls import libpq_url
from store.repository import Repository
from tests.integration.plans import plan_nodes

TABLES = ("events", "messages", "batch_carried", "tool_calls")
# Per table, a column that only a look-up by key (not a conversation-wide
# scan) has in its index condition.
KEYS = {"events": ("version",), "messages": ("seq", "batch")}


def _plan(conn: psycopg.Connection[Any], statement: str, params: dict[str, Any]) -> dict[str, Any]:
    """What `statement` ran (EXPLAIN ANALYZE, rolled back)."""
    with conn.transaction(force_rollback=True):
        row = conn.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {statement}", params).fetchone()
    assert row is not None
    plan = row[0] if isinstance(row[0], list) else json.loads(row[0])
    top: dict[str, Any] = plan[0]["Plan"]
    return top


def _scans_by_key(conn: psycopg.Connection[Any], statement: str, params: dict[str, Any]) -> None:
    """Run `statement` (rolled back) and check that every scan of `events`
    or `messages` it ran more than once was a look-up by the row's key, not
    a scan of the conversation."""
    for node in plan_nodes(_plan(conn, statement, params)):
        keys = KEYS.get(node.get("Relation Name", ""))
        if keys is None or node.get("Actual Loops", 0) <= 1:
            continue
        condition = node.get("Index Cond", "")
        assert any(k in condition for k in keys), (
            f"{node['Node Type']} on {node['Relation Name']} by {condition or 'nothing'},"
            f" {node['Actual Loops']} times"
        )


def _user(text: str) -> Message:
    return Message(role="user", content=text)


async def test_a_batch_operation_reads_a_conversation_unknown_to_the_statistics_by_key(
    repository: Repository, database_url: str
) -> None:
    with psycopg.connect(libpq_url(database_url), autocommit=True) as conn:
        for table in TABLES:
            conn.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")
        small = (await repository.create_conversation()).id
        await repository.append_messages(small, [_user(f"s{i}") for i in range(50)])
        conn.execute("ANALYZE")
        big = (await repository.create_conversation()).id
        for chunk in range(12):
            await repository.append_messages(big, [_user(f"b{chunk}-{i}") for i in range(100)])

        cid = stream_id(repository.tenant, big)
        _scans_by_key(conn, sql.WINDOW_ENTRIES, {"cid": cid, "batch": 1, "agent": "main"})
        copy = {
            "cid": cid,
            "batch": 2,
            "source": 1,
            "boundary": 1100,
            "retained": [1, 2],
            "agent": "main",
        }
        _scans_by_key(conn, sql.COPY_MEMBERS, copy)
        # A role's messages in the history: through the role's own index.
        role = {"cid": cid, "tenant": repository.tenant, "agent": None, "n": 3}
        for statement in (sql.recent_in_history("user"), sql.role_range("user")):
            plan = _plan(conn, statement, {**role, "first": 5, "last": 9})
            scans = [n for n in plan_nodes(plan) if n.get("Relation Name") == "messages"]
            assert [n.get("Index Name") for n in scans] == ["uq_messages_role_user"], scans
            _scans_by_key(conn, statement, {**role, "first": 5, "last": 9})
        # Pages of the history (the last 50, a role's page) and the messages
        # an append wrote: each message's event by key. Joined as planned for
        # "a row or two", the last 50 read the conversation's events 50 times.
        page = {
            "cid": cid,
            "tenant": repository.tenant,
            "after": -1,
            "before": sql.NO_SEQ_ABOVE,
            "limit": 50,
        }
        for descending in (True, False):
            for by_role in (False, True):
                statement = sql.history(descending=descending, role="user" if by_role else None)
                _scans_by_key(conn, statement, page)
        _scans_by_key(conn, sql.MESSAGES_WRITTEN_BY, {"cid": cid, "first": 2, "last": 101})

    await repository.start_batch(big, 1101, adjust=True)
    window = await repository.visible_window(big, agent_id="main")
    assert [m.text for m in window] == [f"b11-{i}" for i in range(100)]
    with psycopg.connect(libpq_url(database_url), autocommit=True) as conn:
        # After the compaction: each agent's window, every agent's, their
        # last messages of a role, their role counts.
        for agent in (False, True):
            params = {
                "cid": cid,
                "agent": "main",
                "role": "user",
                "n": 3,
                "tenant": repository.tenant,
            }
            _scans_by_key(conn, sql.recent_in_window(agent=agent), params)
        _scans_by_key(conn, sql.COUNT_IN_WINDOW, {"cid": cid})
        # The agent's window after a compaction, read from its batch.
        main = {"cid": cid, "agent": "main", "tenant": repository.tenant}
        head = conn.execute(sql.CONVERSATION_OF_AGENT, main).fetchone()
        assert head is not None
        assert head[-1] > 1
        for statements in (sql.ASSEMBLY_WINDOW, sql.AGENT_WINDOW):
            _scans_by_key(conn, statements[False], {**main, "batch": head[-1]})
