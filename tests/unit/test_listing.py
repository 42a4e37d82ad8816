"""store.domain.listing: cursors round-trip and refuse garbage; jsonb containment;
the CLI refuses bad filters before it opens a database."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from typer.testing import CliRunner

from convo import app
from store.domain.errors import InvalidOperation
from store.domain.listing import (
    ConversationCursor,
    decode_conversation_cursor,
    decode_window_cursor,
    encode_conversation_cursor,
    encode_window_cursor,
    json_contains,
)


def test_cursors_round_trip() -> None:
    cursor = ConversationCursor(created_at=datetime.now(UTC), id=uuid.uuid4())
    assert decode_conversation_cursor(encode_conversation_cursor(cursor)) == cursor
    key = Decimal("3.3333333333333333333333333333")
    assert decode_window_cursor(encode_window_cursor(key)) == key


@pytest.mark.parametrize("bad", ["", "!!", "é", "AAAA", "W10", "x" * 500, "WyJOYU4iXQ"])
def test_bad_cursors_are_invalid_operations(bad: str) -> None:
    with pytest.raises(InvalidOperation, match="invalid cursor"):
        decode_conversation_cursor(bad)
    with pytest.raises(InvalidOperation, match="invalid cursor"):
        decode_window_cursor(bad)


@pytest.mark.parametrize(
    ("container", "contained", "expected"),
    [
        ({"a": 1}, {"a": 1.0}, True),
        ({"a": 1}, {"a": True}, False),
        ({"a": True}, {"a": 1}, False),
        ({"a": [1, 2]}, {"a": [2]}, True),
        ({"a": [1, 2]}, {"a": 2}, False),
        ({"a": {"b": 1, "c": 2}}, {"a": {"b": 1}}, True),
        ({"a": None}, {"a": None}, True),
        ({"a": "1"}, {"a": 1}, False),
        ({}, {}, True),
    ],
)
def test_json_contains_is_jsonb_containment(
    container: object, contained: object, expected: bool
) -> None:
    assert json_contains(container, contained) is expected


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--metadata", "{"], "not JSON"),
        (["--metadata", "[1]"], "JSON object"),
        (["--created-from", "yesterday"], "not an ISO 8601 time"),
        (["--updated-to", "2026-01-01T00:00:00"], "time zone"),
    ],
)
def test_the_cli_refuses_bad_filters(args: list[str], message: str) -> None:
    result = CliRunner().invoke(app, ["conversations", *args])
    assert result.exit_code == 2
    assert message in result.output
