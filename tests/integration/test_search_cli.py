"""convo.search: `convo search`, a table or JSON lines, errors as exit 2."""

from __future__ import annotations

import asyncio
import json

import psycopg
import pytest
from typer.testing import CliRunner

from convo import app
from hosting.settings import libpq_url
from store.postgres import PostgresStorage
from store.repository import Repository

pytestmark = pytest.mark.integration


def _convo(database_url: str, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["search", *args], env={"DATABASE_URL": database_url})
    return result.exit_code, result.stdout, " ".join(result.stderr.split())


async def _seed(database_url: str) -> None:
    storage = await PostgresStorage.connect(database_url)
    try:
        repository = Repository(storage)
        conversation = await repository.create_conversation()
        await repository.append_messages(
            conversation.id,
            [
                {"role": "user", "content": "where is the lighthouse"},
                {"role": "assistant", "content": "灯塔在海边, by the lighthouse road"},
            ],
        )
    finally:
        await storage.close()


def test_search_prints_hits_as_a_table_and_as_json(database_url: str) -> None:
    asyncio.run(_seed(database_url))
    code, out, err = _convo(database_url, "lighthouse")
    assert code == 0, err
    assert "2 hit(s)" in out
    code, out, err = _convo(database_url, "灯塔在", "--substring", "--json")
    assert code == 0, err
    (line,) = out.splitlines()
    hit = json.loads(line)
    assert (hit["seq"], hit["role"]) == (2, "assistant")
    code, out, _ = _convo(database_url, "lighthouse", "--tenant", "someone-else", "--json")
    assert code == 0
    assert out == ""


def test_a_bad_query_is_exit_2_naming_the_problem(database_url: str) -> None:
    code, _, err = _convo(database_url, "ab", "--substring")
    assert code == 2
    assert "at least 3 characters" in err
    code, _, err = _convo(database_url, "x", "--role", "robot")
    assert code == 2
    assert "role" in err


SHORT_PENDING_LIST = ["gin_pending_list_limit=64"]  # migration 0010


def _pending_list_option(database_url: str, index: str) -> list[str] | None:
    with psycopg.connect(libpq_url(database_url)) as conn:
        row = conn.execute(
            "SELECT reloptions FROM pg_class WHERE oid = to_regclass(%s)", (index,)
        ).fetchone()
    assert row is not None, index
    options: list[str] | None = row[0]
    return options


def _index(database_url: str, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["search-index", *args], env={"DATABASE_URL": database_url})
    return result.exit_code, " ".join(result.stdout.split()), " ".join(result.stderr.split())


def test_search_indexes_are_built_and_dropped_while_search_keeps_working(
    database_url: str,
) -> None:
    asyncio.run(_seed(database_url))
    code, out, err = _index(database_url, "status")
    assert code == 0, err
    assert "text index (ix_events_search_text): built" in out
    assert "substring index (ix_events_search_substring): not built" in out

    def found(*args: str) -> int:
        code, out, err = _convo(database_url, *args, "--json")
        assert code == 0, err
        seq: int = json.loads(out)["seq"]
        return seq

    assert _pending_list_option(database_url, "ix_events_search_text") == SHORT_PENDING_LIST
    code, out, err = _index(database_url, "disable", "text")
    assert (code, "not built" in out) == (0, True), (out, err)
    assert found("lighthouse road") == 2  # read from the events
    code, out, err = _index(database_url, "enable", "text")
    assert code == 0, (out, err)
    assert found("lighthouse road") == 2
    # Rebuilt as migration 0010 left it.
    assert _pending_list_option(database_url, "ix_events_search_text") == SHORT_PENDING_LIST

    code, out, err = _index(database_url, "enable", "substring")
    assert code == 0, err
    assert "built" in out
    assert _index(database_url, "enable", "substring")[0] == 0  # already there
    assert _pending_list_option(database_url, "ix_events_search_substring") == SHORT_PENDING_LIST
    assert found("灯塔在", "--substring") == 2
    assert found("HTHOUSE ro", "--substring") == 2  # part of a word: the grams
    code, out, err = _index(database_url, "disable", "substring")
    assert (code, "not built" in out) == (0, True), (out, err)
    assert found("灯塔在", "--substring") == 2


def test_an_unknown_search_index_is_exit_2(database_url: str) -> None:
    code, _, err = _index(database_url, "enable", "fuzzy")
    assert code == 2
    assert "text or substring" in err
