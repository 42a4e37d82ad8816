"""The plans behind the paged reads: "the last N messages" walks the
messages' primary key backwards (O(N) at any history length), and a page of
conversations is a range of (tenant, created_at, id)."""

from __future__ import annotations

from typing import Any

from store.domain.conversation_keys import stream_id
from store.domain.messages import Message
from store.postgres import PostgresStorage, sql
from store.repository import Repository
from tests.integration.plans import plan_nodes


async def _plan(storage: PostgresStorage, statement: str, params: dict[str, Any]) -> str:
    async with storage.pool.connection() as conn:
        await conn.execute("ANALYZE")
        cursor = await conn.execute(f"EXPLAIN {statement}", params)
        return "\n".join(row[0] for row in await cursor.fetchall())


async def test_the_last_n_messages_walk_the_primary_key_backwards(
    storage: PostgresStorage, repository: Repository
) -> None:
    key = (await repository.create_conversation()).id
    for _ in range(3):
        batch = [Message(role="user", content=f"m{i}") for i in range(1000)]
        await repository.append_messages(key, batch)
    page = await repository.page_messages(key, order="desc", limit=5)
    assert [m.seq for m in page.items] == [3000, 2999, 2998, 2997, 2996]
    params = {
        "cid": stream_id(repository.tenant, key),
        "tenant": repository.tenant,
        "after": -1,
        "before": 2**62,
        "limit": 5,
        "role": None,
        "agent": None,
        "kind": None,
    }
    plan = await _plan(storage, sql.history(descending=True), params)
    assert "Index Scan Backward using pk_messages" in plan, plan
    assert "Sort" not in plan, plan


async def test_a_page_of_a_rare_role_walks_the_roles_index(
    storage: PostgresStorage, repository: Repository
) -> None:
    """Two system messages in 3,000: their page reads them, not the history
    between them, from no cursor and from the previous page's last one."""
    key = (await repository.create_conversation()).id
    await repository.append_messages(key, [Message(role="system", content="rules")])
    for _ in range(3):
        batch = [Message(role="user", content=f"m{i}") for i in range(1000)]
        await repository.append_messages(key, batch)
    await repository.append_messages(key, [Message(role="system", content="reminder")])
    first = await repository.page_messages(key, role="system", order="desc", limit=1)
    assert [m.text for m in first.items] == ["reminder"]
    assert first.next_before_seq == 3002
    rest = await repository.page_messages(
        key, role="system", order="desc", limit=1, before_seq=first.next_before_seq
    )
    assert [m.text for m in rest.items] == ["rules"]
    params = {
        "cid": stream_id(repository.tenant, key),
        "tenant": repository.tenant,
        "after": -1,
        "limit": 1,
    }
    async with storage.pool.connection() as conn:
        await conn.execute("ANALYZE")
        for before in (sql.NO_SEQ_ABOVE, 3002):
            cursor = await conn.execute(
                f"EXPLAIN (ANALYZE, FORMAT JSON) {sql.history(descending=True, role='system')}",
                {**params, "before": before},
            )
            row = await cursor.fetchone()
            assert row is not None
            scans = [
                node
                for node in plan_nodes(row[0][0]["Plan"])
                if node.get("Relation Name") == "messages" and node.get("Actual Loops", 0) > 0
            ]
            # Each scan reads a row or none (the page's, the cursor's look-up
            # by seq): none walks past the users' messages in between.
            read = [n["Actual Rows"] + n.get("Rows Removed by Filter", 0) for n in scans]
            assert max(read) <= 1, scans
            assert any(node.get("Index Name") == "uq_messages_role_system" for node in scans)


async def test_a_page_of_conversations_is_an_index_range(
    storage: PostgresStorage, repository: Repository
) -> None:
    for _ in range(3):
        await repository.create_conversation()
    statement = sql.list_conversations(newest=True)  # no filter, the first page
    async with storage.pool.connection() as conn:
        # A three-row table is read whole whatever the indexes: ask whether
        # the order can come from the index at all.
        await conn.execute("SET enable_seqscan = off")
        await conn.execute("SET enable_sort = off")
        cursor = await conn.execute(
            f"EXPLAIN {statement}", {"tenant": repository.tenant, "limit": 10}
        )
        plan = "\n".join(row[0] for row in await cursor.fetchall())
    assert "ix_conversations_tenant_created_at_id" in plan, plan


async def _prepared(storage: PostgresStorage, containing: str) -> list[tuple[Any, ...]]:
    """The prepared statements whose text contains `containing`: (the
    statement's start, generic plans run, custom plans made)."""
    async with storage.pool.connection() as conn:
        cursor = await conn.execute(
            "SELECT left(statement, 60), generic_plans, custom_plans FROM pg_prepared_statements"
            " WHERE strpos(statement, %s) > 0 AND strpos(statement, 'pg_prepared') = 0",
            (containing,),
        )
        return [tuple(row) for row in await cursor.fetchall()]


async def test_short_reads_reuse_their_plans(database_url: str) -> None:
    """A short read's LIMIT is hidden from the planner (`sql._limit_of`), so
    from the sixth call on its prepared statement runs a reused plan rather
    than being planned anew at every call."""
    storage = await PostgresStorage.connect(database_url, min_size=1, max_size=1)
    try:
        repository = Repository(storage)
        key = (await repository.create_conversation()).id
        for _ in range(3):
            batch = [Message(role=r, content="x") for r in ("user", "assistant") * 100]
            await repository.append_messages(key, batch)
        async with storage.pool.connection() as conn:
            await conn.execute("ANALYZE")
        for _ in range(7):
            await repository.read_messages(key, order="desc", limit=50)
            await repository.recent_by_role(key, "user", 3)
            await repository.recent_by_role(key, "user", 50, scope="history")
        plans = await _prepared(storage, "LIMIT (SELECT")
    finally:
        await storage.close()
    assert len(plans) == 3, plans
    assert all(generic >= 1 for _, generic, _ in plans), plans


async def test_role_reads_reuse_their_plans_whatever_the_conversations_sizes(
    database_url: str,
) -> None:
    """A role's last N, and its n-th..m-th, run a reused plan even where a
    plan made for the call's conversation looks cheaper: a small
    conversation in a database of a few, one of them big. (Without the
    ordinal range of `sql.recent_in_history`, its last N was planned anew at
    every call there, the planning costing more than the read:
    docs/storage.md, "Short reads".)"""
    storage = await PostgresStorage.connect(database_url, min_size=1, max_size=1)
    try:
        repository = Repository(storage)
        small, big = [(await repository.create_conversation()).id for _ in range(2)]
        turn = [Message(role=r, content="x") for r in ("user", "assistant")]
        for key, turns in ((small, 500), (big, 5000)):
            for _ in range(0, turns, 500):
                await repository.append_messages(key, turn * 500)
        async with storage.pool.connection() as conn:
            await conn.execute("ANALYZE")
        for key in (small,) * 7 + (big,) * 2:
            await repository.recent_by_role(key, "assistant", 3, scope="history")
            await repository.role_range(key, "assistant", 2, 5)
        plans = await _prepared(storage, "m.role = 'assistant'")
    finally:
        await storage.close()
    assert len(plans) == 2, plans
    assert all(generic >= 1 for _, generic, _ in plans), plans
