"""Every request the client builds is one the OpenAPI document declares:
its method and path, query parameters the operation takes, and body fields
its schema has. The client cannot import the service's models (it is a
library layer), so this is what keeps the two from drifting apart."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import pytest

from hosting.settings import Settings
from store.client import calls
from store.client.wire import Call
from store.domain.context import AgentProfile
from store.domain.listing import ConversationQuery
from store.domain.operations import Truncate
from store.domain.records import FeedPosition, StreamState
from store.domain.search import search_query
from store.memory import MemoryStorage
from tests.client.serving import serving

ANY = StreamState.ANY
C = "team/alice"

CALLS: list[Call[Any]] = [
    calls.create_conversation(C, {"a": 1}),
    calls.get_conversation(C),
    calls.list_conversations(
        ConversationQuery(
            metadata={"a": 1},
            archived=False,
            created_from=datetime(2026, 1, 1, tzinfo=UTC),
            order="oldest",
            limit=5,
        )
    ),
    calls.update_metadata(C, {"a": None}, replace=False, expected_version=3),
    calls.set_archived(C, True),
    calls.set_archived(C, False),
    calls.delete(C),
    calls.append_messages(
        C, [{"role": "user", "content": "hi"}], expected_version=ANY, idempotency_key="k"
    ),
    calls.replace(C, 2, "text", 4),
    calls.configure_agent(C, AgentProfile(agent_id="helper", role_definition="helps"), ANY),
    calls.update_slot(C, "todo", [], agent_id="main", expected_version=ANY),
    calls.agent(C, "main"),
    calls.run_batch_operation(C, Truncate(keep_last=3), 9),
    calls.batches(C),
    calls.batch_messages(C, 2),
    calls.fork(C, new_conversation_id="f", up_to_seq=3, agent_id="main", metadata={}),
    calls.pin_message(C, 3, True, 5),
    calls.pin_message(C, 3, False, ANY),
    calls.read_window(C, batch=1, agent_id="main", cursor="x", limit=10),
    calls.page_messages(
        C,
        after_seq=1,
        before_seq=None,
        limit=10,
        order="asc",
        role="user",
        agent_id="main",
        kind="input",
        scope="visible",
    ),
    calls.recent_by_role(C, "user", 3, "history", "main"),
    calls.role_range(C, "assistant", 1, 2),
    calls.count_by_role(C, "history"),
    calls.tool_blocks(C, pending_only=True, agent_id="main"),
    calls.search_messages(
        search_query(q="deploy", role="user", metadata={"a": 1}, batch=1, cursor=None)
    ),
    calls.assemble(C, agent_id="main", format="anthropic", options={"repair": True}),
    calls.read_events(FeedPosition(transaction_id=1, position=2), 10),
    calls.conversation_events(C, from_version=2, limit=10),
    calls.export(C, events=True),
]


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    app, _ = serving(MemoryStorage(), Settings.from_env())
    return app.openapi()


def _operation(document: dict[str, Any], call: Call[Any]) -> dict[str, Any]:
    for template, operations in document["paths"].items():
        pattern = re.sub(r"\{[^/]+\}", "[^/]+", template)
        if re.fullmatch(pattern, call.path) and call.method.lower() in operations:
            return operations[call.method.lower()]  # type: ignore[no-any-return]
    raise AssertionError(f"{call.method} {call.path} is no operation of the document")


def _properties(document: dict[str, Any], schema: dict[str, Any]) -> set[str]:
    """The fields a body schema allows (the union over its variants)."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return _properties(document, document["components"]["schemas"][name])
    found = set(schema.get("properties", {}))
    for variant in schema.get("oneOf", []) + schema.get("anyOf", []):
        found |= _properties(document, variant)
    return found


@pytest.mark.parametrize("call", CALLS, ids=[f"{c.method} {c.path}" for c in CALLS])
def test_each_call_is_an_operation_of_the_document(
    document: dict[str, Any], call: Call[Any]
) -> None:
    operation = _operation(document, call)
    declared = {p["name"] for p in operation.get("parameters", []) if p["in"] == "query"}
    assert set(call.params) <= declared
    headers = {p["name"].lower() for p in operation.get("parameters", []) if p["in"] == "header"}
    assert {h.lower() for h in call.headers} <= headers
    if call.body is None:
        assert "requestBody" not in operation or not operation["requestBody"].get("required")
        return
    schema = operation["requestBody"]["content"]["application/json"]["schema"]
    assert set(call.body) <= _properties(document, schema)


def test_the_escaped_id_is_one_path_segment() -> None:
    assert calls.get_conversation("team/alice").path == "/conversations/team%2Falice"
