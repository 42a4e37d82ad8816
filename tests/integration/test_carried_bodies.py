"""A carried member points at its message's event (migration 0021): its
row's `agent_id`, `event_version` and `edit_version` are its message's,
however the member and the edits came to be; and a member of a window
payload builds read keeps a copy of its event's body (migration 0022), so
that a payload build reads a compacted window from the members alone
(`window_sql.bodies_in`)."""

from __future__ import annotations

from hosting.settings import Settings
from store.domain.messages import Message
from store.repository import Repository
from tests.integration.test_forks import rich_parent
from tests.integration.test_membership_migration import migrate_to, table_rows

MISMATCHED = (
    "SELECT b.conversation_id, b.batch, b.seq, b.agent_id, b.event_version, b.edit_version,"
    " m.agent_id, m.event_version, m.edit_version"
    " FROM batch_carried AS b JOIN messages AS m USING (conversation_id, seq)"
    " WHERE (b.agent_id, b.event_version, b.edit_version)"
    " IS DISTINCT FROM (m.agent_id, m.event_version, m.edit_version)"
)
CARRIED = "SELECT count(*) FROM batch_carried"
# Copies that are not their event's.
UNEQUAL_COPIES = (
    "SELECT b.batch, b.seq FROM batch_carried AS b JOIN events AS e"
    " ON e.conversation_id = b.conversation_id AND e.version = b.event_version"
    " WHERE b.body IS NOT NULL"
    " AND (b.body::text <> e.data::text OR b.body_position IS DISTINCT FROM e.position)"
)
# Members with a copy, by whether their batch is the window of their agent.
COPIES_BY_WINDOW = (
    "SELECT b.batch = coalesce((c.agent_batches ->> b.agent_id)::int, c.current_batch),"
    " count(*), count(b.body), count(b.body_position)"
    " FROM batch_carried AS b JOIN conversations AS c ON c.id = b.conversation_id"
    " GROUP BY 1 ORDER BY 1"
)


async def _compacted_and_edited(repository: Repository) -> str:
    """Batches of two agents (`rich_parent`), then edits of carried members
    and another batch operation over them."""
    cid = await rich_parent(repository)
    for member in await repository.visible_window(cid, agent_id="main"):
        if member.role == "user" and member.batch == 1 and member.seq % 2:
            await repository.replace(cid, member.seq, f"edited {member.seq}")
    await repository.append_messages(cid, [Message(role="user", content="one more")])
    window = await repository.visible_window(cid, agent_id="main")
    await repository.start_batch(
        cid, window[len(window) // 2].seq, retain=[window[0].seq], adjust=True, agent_id="main"
    )
    return cid


async def test_every_member_points_at_what_its_message_does(
    repository: Repository, database_url: str, settings: Settings
) -> None:
    await _compacted_and_edited(repository)
    assert table_rows(database_url, settings, CARRIED)[0][0] > 0
    edited = "SELECT count(*) FROM batch_carried WHERE edit_version IS NOT NULL"
    assert table_rows(database_url, settings, edited)[0][0] > 0
    assert table_rows(database_url, settings, MISMATCHED) == []


async def test_a_member_written_without_them_takes_them_from_its_message(
    repository: Repository, database_url: str, settings: Settings
) -> None:
    # As a release from before 0021 writes a batch operation's members,
    # during a deploy that runs it beside this one.
    cid = await _compacted_and_edited(repository)
    copy = (
        "INSERT INTO batch_carried (conversation_id, batch, sort_key, seq)"
        " SELECT conversation_id, 99, sort_key, seq FROM batch_carried"
        " WHERE batch = (SELECT max(batch) FROM batch_carried) RETURNING 1"
    )
    assert table_rows(database_url, settings, copy)
    assert table_rows(database_url, settings, MISMATCHED) == []
    assert (await repository.assemble(cid, format="openai-chat")).payload


async def test_the_migration_fills_the_members_written_before_it(
    repository: Repository, database_url: str, settings: Settings
) -> None:
    cid = await _compacted_and_edited(repository)
    payload = (await repository.assemble(cid, format="anthropic")).payload
    carried = table_rows(database_url, settings, CARRIED)

    copies = table_rows(database_url, settings, COPIES_BY_WINDOW)

    migrate_to(database_url, settings, "0020_search_substring_grams", down=True)
    migrate_to(database_url, settings, "head")
    assert table_rows(database_url, settings, CARRIED) == carried
    assert table_rows(database_url, settings, MISMATCHED) == []
    # The upgrade copies the bodies of the current windows' members only.
    assert table_rows(database_url, settings, COPIES_BY_WINDOW) == copies
    assert table_rows(database_url, settings, UNEQUAL_COPIES) == []
    assert (await repository.assemble(cid, format="anthropic")).payload == payload


async def test_a_window_s_members_keep_their_bodies_and_the_left_batch_s_do_not(
    repository: Repository, database_url: str, settings: Settings
) -> None:
    # Two batch operations of "main": the first batch's carried members are
    # left behind by the second, and only the current windows keep copies.
    await _compacted_and_edited(repository)
    by_window = {row[0]: row[1:] for row in table_rows(database_url, settings, COPIES_BY_WINDOW)}
    members, bodies, positions = by_window[True]
    assert members == bodies == positions > 0
    assert by_window[False][0] > 0
    assert by_window[False][1:] == (0, 0)
    assert table_rows(database_url, settings, UNEQUAL_COPIES) == []


async def test_a_rollback_drops_the_bodies_of_the_window_it_leaves(
    repository: Repository, database_url: str, settings: Settings
) -> None:
    # A rollback selects from an older batch, not from the window it leaves:
    # main's first batch, while its window is in its second.
    cid = await _compacted_and_edited(repository)
    mains = "SELECT batch FROM batches WHERE agent_id = 'main' ORDER BY batch"
    first, *_ = [row[0] for row in table_rows(database_url, settings, mains)]
    await repository.rollback_to_batch(cid, first)
    by_window = {row[0]: row[1:] for row in table_rows(database_url, settings, COPIES_BY_WINDOW)}
    members, bodies, _ = by_window[True]
    assert members == bodies > 0
    assert by_window[False][1:] == (0, 0)


async def test_a_member_without_its_copy_is_read_from_its_event(
    repository: Repository, database_url: str, settings: Settings
) -> None:
    # As a release from before 0022 writes a batch operation's members.
    cid = await _compacted_and_edited(repository)
    payloads = {
        fmt: (await repository.assemble(cid, format=fmt)).payload
        for fmt in ("openai-chat", "anthropic")
    }
    dropped = "UPDATE batch_carried SET body = NULL, body_position = NULL RETURNING 1"
    assert table_rows(database_url, settings, dropped)
    for fmt, payload in payloads.items():
        assert (await repository.assemble(cid, format=fmt)).payload == payload
