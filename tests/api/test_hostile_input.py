"""Hostile input is refused with a 4xx naming the field, never a 500, and
nothing stored changes. One table; every row runs on both backends.

Each case sends one request against a conversation that holds a user
message and an assistant message whose call `call_1` waits for its result
(version 3). A case names the status it expects and a piece of text the
error message must contain (the field). After the request the
conversation must still be at version 3, and a conversation a case tried
to create (`NEW_ID`, replaced by a fresh id for each case) must not exist.

Bodies are sent as raw bytes: `json.dumps` escapes NUL and lone surrogates
(`\\u0000`, `\\ud800`) and writes `NaN` / `Infinity` as bare words, which
is what a hostile client sends; `1e400` is sent as raw text.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from tests.api.conftest import new_conversation

NEW_ID = "00000000-0000-4000-8000-00000000beef"
BIG = 2**63  # one past PostgreSQL's bigint
BIG32 = 2**31  # one past PostgreSQL's integer
NAN = float("nan")
INF = float("inf")

Body = Any | Callable[[], bytes]


@dataclass(frozen=True)
class Case:
    id: str
    path: str  # relative to the conversation, or absolute when it starts with "/"
    body: Body = None
    method: str = "POST"
    field: str = ""  # the error message must contain this
    status: int = 422
    headers: dict[str, Any] = dataclasses.field(default_factory=dict)


def token_body(payload: str) -> str:
    """A feed token's body: base64url without padding of `payload`."""
    return base64.urlsafe_b64encode(payload.encode()).decode().rstrip("=")


def user(content: Any = "hi", **extra: Any) -> dict[str, Any]:
    return {"role": "user", "content": content, **extra}


def append(*messages: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"messages": list(messages), **extra}


def call(**overrides: Any) -> dict[str, Any]:
    return {"id": "c9", "name": "ls", "arguments": {}, **overrides}


def assistant_calling(*calls: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": "", "tool_calls": list(calls)}


def deep(depth: int, where: str) -> Callable[[], bytes]:
    """An append whose `where` ("arguments" or "metadata") is `depth` objects
    deep, as text: the client's own JSON encoder would overflow first."""
    value = '{"a": ' * (depth - 1) + "{}" + "}" * (depth - 1)
    if where == "arguments":
        call = f'{{"id": "c9", "name": "ls", "arguments": {value}}}'
        message = f'{{"role": "assistant", "content": "", "tool_calls": [{call}]}}'
    else:
        message = f'{{"role": "user", "content": "x", "metadata": {value}}}'
    return raw(f'{{"messages": [{message}]}}')


def raw(text: str) -> Callable[[], bytes]:
    return lambda: text.encode()


def big_arguments(megabytes: int) -> Callable[[], bytes]:
    def build() -> bytes:
        arguments = {"blob": "x" * (megabytes * 1024 * 1024)}
        return json.dumps(append(assistant_calling(call(arguments=arguments)))).encode()

    return build


def big_metadata(megabytes: int) -> Callable[[], bytes]:
    def build() -> bytes:
        metadata = {f"k{i}": "x" * 1000 for i in range(megabytes * 1024)}
        return json.dumps(append(user(metadata=metadata))).encode()

    return build


def many_messages(count: int) -> Callable[[], bytes]:
    return lambda: json.dumps(append(*[user(f"m{i}") for i in range(count)])).encode()


def many_calls(count: int) -> Callable[[], bytes]:
    calls = [call(id=f"c{i}") for i in range(count)]
    return lambda: json.dumps(append(assistant_calling(*calls))).encode()


M = "messages"
S = "agents/main/slots/useful_info"
NUL = "a\x00b"
LONE = "a\ud800b"


def text_fields(label: str, bad: str) -> list[Case]:
    """`bad` text in each field of a message or slot that takes text: each
    refused by the field's name."""
    return [
        Case(f"{label}-content", M, append(user(bad)), field="messages.0.content"),
        Case(
            f"{label}-text-part", M, append(user([{"type": "text", "text": bad}])), field="content"
        ),
        Case(
            f"{label}-call-id", M, append(assistant_calling(call(id=bad))), field="tool_calls.0.id"
        ),
        Case(
            f"{label}-call-name",
            M,
            append(assistant_calling(call(name=bad))),
            field="tool_calls.0.name",
        ),
        Case(
            f"{label}-arguments-key",
            M,
            append(assistant_calling(call(arguments={bad: 1}))),
            field="tool_calls.0.arguments",
        ),
        Case(f"{label}-metadata-value", M, append(user(metadata={"k": bad})), field="metadata"),
        Case(f"{label}-agent-id", M, append(user(agent_id=bad)), field="agent_id"),
        Case(
            f"{label}-client-id", M, append(user(client_message_id=bad)), field="client_message_id"
        ),
        Case(f"{label}-slot-value", S, {"value": bad}, method="PUT", field="value"),
    ]


CASES: list[Case] = [
    # --- NUL characters --------------------------------------------------------
    *text_fields("nul", NUL),
    Case(
        "nul-arguments-value",
        M,
        append(assistant_calling(call(arguments={"p": [NUL]}))),
        field="tool_calls.0.arguments",
    ),
    Case("nul-metadata-key", M, append(user(metadata={NUL: 1})), field="metadata"),
    Case(
        "nul-tool-call-id",
        M,
        append({"role": "tool", "tool_call_id": NUL, "content": "x"}),
        field="tool_call_id",
    ),
    Case(
        "nul-reasoning",
        M,
        append({"role": "assistant", "content": "x", "reasoning": [{"provider": NUL}]}),
        field="reasoning",
    ),
    Case(
        "nul-todo-item",
        "agents/main/slots/todo",
        {"value": [{"id": "1", "content": NUL}]},
        method="PUT",
        field="value",
    ),
    Case(
        "nul-system-prompt",
        "agents/main",
        {"system_prompt": NUL},
        method="PUT",
        field="system_prompt",
    ),
    Case("nul-replace", "messages/1", {"content": NUL}, method="PUT", field="content"),
    Case(
        "nul-conversation-metadata",
        "/conversations",
        {"id": NEW_ID, "metadata": {"k": NUL}},
        field="metadata",
    ),
    Case(
        "nul-filter",
        "batches",
        {"operation": "filter", "content_contains": [NUL]},
        field="content_contains",
    ),
    Case(
        "nul-summary",
        "batches",
        {"operation": "start_batch", "boundary_seq": 2, "summary": user(NUL)},
        field="summary",
    ),
    Case("nul-assemble-agent", "assemble", {"agent_id": NUL}, field="agent_id"),
    Case(
        "nul-idempotency-key",
        M,
        append(user()),
        headers={"Idempotency-Key": "k\x00"},
        field="Idempotency-Key",
    ),
    Case("nul-url-agent", "agents/a%00b", {}, method="PUT", field="agent_id"),
    Case("nul-url-slot", "agents/main/slots/a%00b", {"value": "x"}, method="PUT", field="slot"),
    Case("nul-query-agent", "window?agent_id=a%00b", method="GET", field="agent_id"),
    # --- lone surrogates -----------------------------------------------------------
    *text_fields("lone", LONE),
    Case(
        "lone-arguments-value",
        M,
        append(assistant_calling(call(arguments={"p": {"q": LONE}}))),
        field="tool_calls.0.arguments",
    ),
    Case(
        "lone-role-definition",
        "agents/main",
        {"role_definition": LONE},
        method="PUT",
        field="role_definition",
    ),
    Case(
        "lone-conversation-metadata",
        "/conversations",
        {"id": NEW_ID, "metadata": {LONE: 1}},
        field="metadata",
    ),
    Case(
        "lone-filter",
        "batches",
        {"operation": "filter", "content_excludes": [LONE]},
        field="content_excludes",
    ),
    Case(
        "lone-assemble-option",
        "assemble",
        {"format": "xml-tools", "options": {"xml_final_instruction": LONE}},
        field="options",
    ),
    Case(
        "non-ascii-idempotency-key",
        M,
        append(user()),
        headers={"Idempotency-Key": b"k\xed\xa0\x80"},
        field="Idempotency-Key",
    ),
    Case("lone-url-agent", "agents/%ED%A0%80", {}, method="PUT", field="path"),
    Case("lone-query-agent", "window?agent_id=%ED%A0%80", method="GET", field="query"),
    Case(
        "invalid-utf8-body",
        M,
        lambda: b'{"messages": [{"role": "user", "content": "\xed\xa0\x80"}]}',
        field="body",
    ),
    # --- numbers that are not JSON numbers ---------------------------------------------
    Case("nan-expected-version", M, append(user(), expected_version=NAN), field="expected_version"),
    Case("infinity-token-estimate", M, append(user(token_estimate=INF)), field="token_estimate"),
    Case(
        "1e400-token-estimate",
        M,
        raw('{"messages": [{"role": "user", "content": "x", "token_estimate": 1e400}]}'),
        field="token_estimate",
    ),
    Case("nan-metadata", M, append(user(metadata={"score": NAN})), field="metadata"),
    Case(
        "infinity-arguments",
        M,
        append(assistant_calling(call(arguments={"limit": INF}))),
        field="tool_calls.0.arguments",
    ),
    Case(
        "1e400-arguments",
        M,
        raw(
            '{"messages": [{"role": "assistant", "content": "", "tool_calls": '
            '[{"id": "c9", "name": "ls", "arguments": {"n": 1e400}}]}]}'
        ),
        field="tool_calls.0.arguments",
    ),
    Case(
        "nan-conversation-metadata",
        "/conversations",
        {"id": NEW_ID, "metadata": {"x": NAN}},
        field="metadata",
    ),
    Case(
        "nan-slot-version",
        S,
        {"value": "x", "expected_version": NAN},
        method="PUT",
        field="expected_version",
    ),
    # --- integers past the columns' ranges ------------------------------------------
    Case("batch-query-past-int", f"window?batch={BIG32}", method="GET", field="batch"),
    Case("batch-query-negative", "window?batch=-1", method="GET", field="batch"),
    Case("batch-path-past-int", f"batches/{BIG32}/messages", method="GET", field="batch"),
    Case("seq-past-bigint", f"messages/{BIG}", {"content": "x"}, method="PUT", field="seq"),
    Case("n-past-bigint", f"messages/recent?role=user&n={BIG}", method="GET", field="n"),
    Case("first-past-bigint", f"roles/user?first={BIG}&last={BIG}", method="GET", field="first"),
    Case("token-estimate-past-int", M, append(user(token_estimate=BIG32)), field="token_estimate"),
    Case("token-estimate-negative", M, append(user(token_estimate=-5)), field="token_estimate"),
    Case(
        "expected-version-past-bigint",
        M,
        append(user(), expected_version=BIG),
        field="expected_version",
    ),
    Case(
        "rollback-past-int",
        "batches",
        {"operation": "rollback_to_batch", "batch": BIG32},
        field="batch",
    ),
    Case(
        "keep-last-past-bigint",
        "batches",
        {"operation": "truncate", "keep_last": BIG},
        field="keep_last",
    ),
    # --- loose types ---------------------------------------------------------------------
    Case(
        "expected-version-string", M, append(user(), expected_version="1"), field="expected_version"
    ),
    Case(
        "expected-version-bool", M, append(user(), expected_version=True), field="expected_version"
    ),
    Case(
        "expected-version-float", M, append(user(), expected_version=1.0), field="expected_version"
    ),
    Case("token-estimate-string", M, append(user(token_estimate="5")), field="token_estimate"),
    Case(
        "is-error-string",
        M,
        append({"role": "tool", "tool_call_id": "call_1", "content": "x", "is_error": "yes"}),
        field="is_error",
    ),
    Case(
        "sub-agent-string",
        "agents/helper",
        {"is_sub_agent": "true"},
        method="PUT",
        field="is_sub_agent",
    ),
    # --- depth -------------------------------------------------------------------------------
    Case(
        "arguments-500-deep",
        M,
        deep(500, "arguments"),
        field="tool_calls.0.arguments",
    ),
    Case(
        "arguments-1000-deep",
        M,
        deep(1000, "arguments"),
        field="body",
    ),
    Case("metadata-200-deep", M, deep(200, "metadata"), field="metadata"),
    # --- sizes -------------------------------------------------------------------------------
    Case("10001-messages", M, many_messages(10_001), field="messages"),
    Case("1001-messages", M, many_messages(1_001), field="messages"),
    Case("10000-tool-calls", M, many_calls(10_000), field="tool_calls"),
    Case("129-tool-calls", M, many_calls(129), field="tool_calls"),
    Case("2mb-arguments", M, big_arguments(2), field="tool_calls.0.arguments"),
    Case("50mb-arguments", M, big_arguments(50), field="body", status=413),
    Case("20mb-metadata", M, big_metadata(20), field="metadata"),
    Case("100kb-metadata", M, append(user(metadata={"k": "x" * 100_000})), field="metadata"),
    Case(
        "100kb-conversation-metadata",
        "/conversations",
        {"id": NEW_ID, "metadata": {"k": "x" * 100_000}},
        field="metadata",
    ),
    Case(
        "201-char-call-id",
        M,
        append(assistant_calling(call(id="c" * 201))),
        field="tool_calls.0.id",
    ),
    Case(
        "201-char-client-id",
        M,
        append(user(client_message_id="u" * 201)),
        field="client_message_id",
    ),
    Case("101-char-agent-id", M, append(user(agent_id="a" * 101)), field="agent_id"),
    Case("control-char-agent-id", M, append(user(agent_id="a\nb")), field="agent_id"),
    Case("101-char-url-agent", "agents/" + "a" * 101, {}, method="PUT", field="agent_id"),
    Case(
        "101-char-slot-name",
        "agents/main/slots/" + "s" * 101,
        {"value": "x"},
        method="PUT",
        field="slot",
    ),
    Case(
        "201-char-idempotency-key",
        M,
        append(user()),
        headers={"Idempotency-Key": "k" * 201},
        field="Idempotency-Key",
    ),
    Case("oversized-slot", S, {"value": "x" * 1_000_001}, method="PUT", field="value"),
    Case(
        "oversized-system-prompt",
        "agents/main",
        {"system_prompt": "x" * 1_000_001},
        method="PUT",
        field="system_prompt",
    ),
    Case(
        "1001-todo-items",
        "agents/main/slots/todo",
        {"value": [{"id": str(i), "content": "x"} for i in range(1001)]},
        method="PUT",
        field="value",
    ),
    Case(
        "1001-text-parts", M, append(user([{"type": "text", "text": "x"}] * 1001)), field="content"
    ),
    # Feed positions (store.domain.feed_vector): from a URL or a header, never trusted.
    Case("feed-after-past-bigint", f"/events?after={BIG}-0", method="GET", field="out of range"),
    Case("feed-after-junk", "/events?after=12", method="GET", field="neither a token"),
    Case("feed-after-nul", "/events?after=v1.%00", method="GET", field="after"),
    Case("feed-after-huge", f"/events?after=v1.{'A' * 5000}", method="GET", field="after"),
    Case("feed-token-version", "/events?after=v99.MDoxLTE", method="GET", field="version 99"),
    Case("feed-token-not-base64", "/events?after=v1.A", method="GET", field="base64url"),
    Case(
        "feed-token-past-bigint",
        f"/events?after=v1.{token_body(f'0:{BIG}-1')}",
        method="GET",
        field="out of range",
    ),
    Case(
        "feed-token-unknown-partition",
        f"/events?after=v1.{token_body('zz:1-1')}",
        method="GET",
        field="partition 'zz'",
    ),
    Case(
        "feed-token-many-partitions",
        f"/events?after=v1.{token_body(','.join(f'p{i}:1-1' for i in range(65)))}",
        method="GET",
        field="partitions",
    ),
    Case(
        "tail-last-event-id-junk",
        "/events/stream",
        method="GET",
        headers={"Last-Event-ID": "v1.%%%"},
        field="last-event-id",
    ),
    Case(
        "tail-last-event-id-bad-entry",
        "/events/stream",
        method="GET",
        headers={"Last-Event-ID": f"v1.{token_body('0:1')}"},
        field="entry",
    ),
]


def _body_bytes(body: Body) -> bytes | None:
    if body is None:
        return None
    if callable(body):
        return body()
    return json.dumps(body).encode()


async def _run(client: httpx.AsyncClient, case: Case) -> str | None:
    """What is wrong with how `case` was answered, or None."""
    cid = await new_conversation(client)
    seeded = append(user("list the files"), assistant_calling(call(id="call_1")))
    response = await client.post(f"/conversations/{cid}/messages", json=seeded)
    assert response.status_code == 201, response.text
    base = f"/conversations/{cid}"
    url = case.path if case.path.startswith("/") else f"{base}/{case.path}"
    # A fresh id for each case: a conversation one case created must not
    # make the next case's create a 409.
    new_id = str(uuid.uuid4())
    content = _body_bytes(case.body)
    if content is not None:
        content = content.replace(NEW_ID.encode(), new_id.encode())
    headers = dict(case.headers)
    if content is not None:
        headers["Content-Type"] = "application/json"
    response = await client.request(case.method, url, content=content, headers=headers)

    problems = []
    if response.status_code != case.status:
        problems.append(f"status {response.status_code}: {response.text[:160]!r}")
    else:
        message = response.json()["detail"]
        if case.field.lower() not in message.lower():
            problems.append(f"the message does not name {case.field!r}: {message[:160]!r}")
    if (await client.get(base)).json()["version"] != 3:
        problems.append("the conversation changed")
    if (await client.get(f"/conversations/{new_id}")).status_code != 404:
        problems.append("a conversation was created")
    return "; ".join(problems) or None


async def test_hostile_input_is_refused(acme: httpx.AsyncClient) -> None:
    # One test per backend, the cases in a loop: a database per case would
    # cost more than all the cases together.
    failures = [(case.id, problem) for case in CASES if (problem := await _run(acme, case))]
    assert not failures, "\n".join(f"{name}: {problem}" for name, problem in failures)
