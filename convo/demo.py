"""`make demo`: a realistic agent session, end to end, through the HTTP API,
printed as its users see it.

An agent builder's session: a main agent takes a task, delegates a search
to a sub-agent, both call tools, the TODO list changes, a system reminder is
recorded. A compaction job then plans (dry run) and starts a new batch for
the main agent with a summary, leaving the sub-agent's window alone. We
print the window, the last user messages, the tool blocks, and the payload
of the main agent's next LLM call in two provider formats. An analyst then
searches by role and by text, pages through the history and exports it.

Everything goes through the HTTP routes (an in-process client: the same
app `convo serve` runs, without a socket), with an API key made for the
demo and revoked at the end.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from hosting.bootstrap import open_storage
from hosting.settings import Settings, limits_from_settings
from store.domain.context import TodoItem
from store.domain.messages import Message, ToolCall
from store.repository import DEFAULT_TENANT

console = Console()


def _call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return ToolCall(id=call_id, name=name, arguments=arguments).model_dump(mode="json")


def _message(role: str, content: str = "", **fields: Any) -> dict[str, Any]:
    """A message as the HTTP body carries it (validated as the store will)."""
    message = Message.model_validate({"role": role, "content": content, **fields})
    return message.model_dump(mode="json", exclude_defaults=True) | {"role": role}


class _Api:
    """The HTTP calls of the demo: each must succeed, or the demo stops
    with the answer's status and error body."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client

    async def __call__(
        self, method: str, path: str, *, json_body: Any = None, **params: Any
    ) -> Any:
        query = {k: v for k, v in params.items() if v is not None}
        response = await self.client.request(method, path, json=json_body, params=query)
        if response.status_code >= 400:
            raise RuntimeError(f"{method} {path} answered {response.status_code}: {response.text}")
        if response.headers.get("content-type", "").startswith("application/json"):
            return response.json()
        return response.text


def _text(content: Any) -> str:
    """A message's text as the HTTP API returns it: a string, or parts."""
    if isinstance(content, str):
        return content
    return " ".join(p.get("text", "") for p in content or [] if isinstance(p, dict))


def _describe(message: dict[str, Any]) -> str:
    text = _text(message.get("content"))
    if message.get("tool_calls"):
        calls = ", ".join(
            f"{c['name']}({json.dumps(c.get('arguments', {}))})" for c in message["tool_calls"]
        )
        return f"{text + ' ' if text else ''}→ {calls}"
    if message.get("tool_call_id"):
        return f"[{message['tool_call_id']}] {text}"
    return text


def _window_table(title: str, window: list[dict[str, Any]]) -> Table:
    table = Table(title=title, show_lines=False)
    for column in ("seq", "batch", "agent", "role", "kind", "content"):
        table.add_column(column, overflow="fold")
    for m in window:
        # Text, not markup: message content like '[x]' must print as it is.
        table.add_row(
            str(m["seq"]),
            str(m["batch"]),
            m["agent_id"],
            m["role"],
            m["kind"],
            Text(_describe(m)),
        )
    return table


async def _session(api: _Api, cid: str) -> None:
    """The agents' writes, as an agent framework would send them."""
    await api(
        "POST",
        "/conversations",
        json_body={"id": cid, "metadata": {"title": "fix the flaky parser test", "team": "core"}},
    )
    base = f"/conversations/{cid}"
    await api(
        "PUT",
        f"{base}/agents/main",
        json_body={
            "system_prompt": "You are a careful coding agent working in the user's repository.",
            "role_definition": "Main agent: plan the work, delegate searches, make the fix.",
        },
    )
    await api(
        "PUT",
        f"{base}/agents/searcher",
        json_body={
            "is_sub_agent": True,
            "role_definition": "Sub-agent: find code and report file paths with line numbers.",
        },
    )
    todo = [
        TodoItem(id="1", content="Find where the parser test fails", status="in_progress"),
        TodoItem(id="2", content="Fix the tokenizer edge case"),
        TodoItem(id="3", content="Run the test suite"),
    ]

    async def set_todo() -> None:
        value = [t.model_dump(mode="json") for t in todo]
        await api("PUT", f"{base}/agents/main/slots/todo", json_body={"value": value})

    async def append(*messages: dict[str, Any]) -> None:
        await api("POST", f"{base}/messages", json_body={"messages": list(messages)})

    await set_todo()
    await api(
        "PUT",
        f"{base}/agents/main/slots/useful_info",
        json_body={"value": "Tests run with `make test`; CI uses Python 3.11."},
    )
    await append(
        _message(
            "user",
            "The parser test fails about one run in ten. Fix it?",
            client_message_id="u-1",
        ),
        _message(
            "assistant",
            "I'll ask the searcher to find the test first.",
            tool_calls=[_call("call_1", "delegate", agent="searcher", task="find parser test")],
        ),
    )
    # The sub-agent's own thread: its messages never reach the main agent's payload.
    await append(
        _message("user", "Find the flaky parser test.", agent_id="searcher"),
        _message(
            "assistant",
            agent_id="searcher",
            tool_calls=[_call("s_1", "grep", pattern="def test_parse")],
        ),
        _message(
            "tool",
            "tests/test_parser.py:42: def test_parse_unicode_edge()",
            agent_id="searcher",
            tool_call_id="s_1",
        ),
        _message(
            "assistant", "tests/test_parser.py:42 — test_parse_unicode_edge", agent_id="searcher"
        ),
    )
    await append(
        _message(
            "tool",
            "searcher: tests/test_parser.py:42 test_parse_unicode_edge",
            tool_call_id="call_1",
        ),
        _message(
            "assistant",
            tool_calls=[
                _call("call_2", "read_file", path="src/tokenizer.py"),
                _call("call_3", "read_file", path="tests/test_parser.py"),
            ],
        ),
        _message("tool", "def tokenize(text): ... set(...) ...", tool_call_id="call_2"),
        _message("tool", "def test_parse_unicode_edge(): ...", tool_call_id="call_3"),
    )
    todo[0] = todo[0].model_copy(update={"status": "completed"})
    todo[1] = todo[1].model_copy(update={"status": "in_progress"})
    await set_todo()
    await append(
        _message("system", "The TODO list changed: item 1 completed.", kind="reminder"),
        _message(
            "assistant",
            "The tokenizer iterates over a set: order varies.",
            tool_calls=[
                _call(
                    "call_4",
                    "edit_file",
                    path="src/tokenizer.py",
                    change="iterate over sorted(...)",
                )
            ],
        ),
        _message("tool", "edited src/tokenizer.py", tool_call_id="call_4"),
        _message("user", "Nice. Please also run the whole suite.", client_message_id="u-2"),
        _message("assistant", tool_calls=[_call("call_5", "run", command="make test")]),
        _message("tool", "212 passed in 41.2s", tool_call_id="call_5"),
        _message("assistant", "All 212 tests pass; the test is no longer flaky."),
        _message("user", "Thanks! Summarise what changed.", client_message_id="u-3"),
    )


def _compaction_table(title: str, report: dict[str, Any]) -> Table:
    table = Table(title=title)
    for column in ("conversation", "status", "window before", "after", "boundary", "hidden"):
        table.add_column(column, overflow="fold")
    for r in report.get("results", [report]):
        before, after = r.get("before") or {}, r.get("after") or {}
        table.add_row(
            r["conversation_id"],
            r["status"],
            f"{before.get('messages', '-')} msgs",
            f"{after.get('messages', '-')} msgs",
            str(r.get("boundary_seq") or "-"),
            str(r.get("hidden", 0)),
        )
    return table


async def _compact(api: _Api, cid: str) -> None:
    """The compaction job, as an operator runs it: plan, then do."""
    policy = {"max_messages": 8, "keep_last": {"user": 1}}
    for dry_run in (True, False):
        report = await api(
            "POST", f"/conversations/{cid}/compact", json_body={**policy, "dry_run": dry_run}
        )
        title = "compaction, dry run (nothing changes)" if dry_run else "compaction, for real"
        console.print(_compaction_table(title, report))


async def _show_agent_view(api: _Api, cid: str) -> None:
    base = f"/conversations/{cid}"
    conversation = await api("GET", base)
    console.print(
        _window_table(
            f"main agent's visible window now (batch {conversation['current_batch']})",
            await api("GET", f"{base}/window", agent_id="main"),
        )
    )
    console.print(
        _window_table(
            "the searcher's window (untouched by the main agent's compaction)",
            await api("GET", f"{base}/window", agent_id="searcher"),
        )
    )
    last_users = await api(
        "GET", f"{base}/messages", role="user", agent_id="main", order="desc", limit=3
    )
    console.print(_window_table("last 3 user messages (whole history)", last_users["items"]))
    counts = await api("GET", f"{base}/counts", scope="history")
    visible = await api("GET", f"{base}/counts")
    console.print(Text(f"messages by role — history: {counts} · visible: {visible}"))
    blocks = await api("GET", f"{base}/tool-blocks")
    console.print(
        Text(
            "tool calls: "
            + ", ".join(f"{b['call_id']}:{b['tool_name']}({b['status']})" for b in blocks)
        )
    )
    for fmt in ("anthropic", "openai-chat"):
        assembly = await api(
            "POST", f"{base}/assemble", json_body={"agent_id": "main", "format": fmt}
        )
        console.print(
            Panel(
                Text(json.dumps(assembly["payload"], indent=2, ensure_ascii=False)),
                title=f"the main agent's next request body — {fmt}",
            )
        )
        console.print(Text(f"diagnostics ({fmt}): {json.dumps(assembly['diagnostics'])}"))


def _hits_table(title: str, page: dict[str, Any]) -> Table:
    table = Table(title=title)
    for column in ("conversation", "seq", "batch", "agent", "role", "kind", "snippet"):
        table.add_column(column, overflow="fold")
    for hit in page["hits"]:
        snippet = Text(hit["snippet"])
        for start, end in hit.get("highlights", []):
            snippet.stylize("bold yellow", start, end)
        table.add_row(
            hit["conversation_id"],
            str(hit["seq"]),
            str(hit["batch"]),
            hit["agent_id"],
            hit["role"],
            hit["kind"],
            snippet,
        )
    return table


async def _analyst(api: _Api, cid: str) -> None:
    """What an analyst reads afterwards: search, a page of history, export."""
    console.print(
        _hits_table(
            "search: text 'tokenizer', assistant messages (compacted ones found too)",
            await api("GET", "/messages/search", q="tokenizer", role="assistant"),
        )
    )
    # On every server, with or without the substring index (docs/search.md).
    console.print(
        _hits_table(
            "search: substring 'flak' (works without word boundaries, e.g. Chinese)",
            await api("GET", "/messages/search", q="flak", mode="substring"),
        )
    )
    page = await api("GET", f"/conversations/{cid}/messages", limit=4)
    console.print(_window_table("history, first page of 4 (keyset on seq)", page["items"]))
    console.print(Text(f"next page: ?after_seq={page['next_after_seq']}"))
    exported = await api("GET", f"/conversations/{cid}/export")
    lines = exported.splitlines()
    console.print(
        Panel(
            Text("\n".join(lines[:4]) + f"\n… ({len(lines)} lines)"),
            title=f"GET /conversations/{cid}/export (JSON Lines, typed)",
        )
    )
    listing = await api("GET", "/conversations", limit=3)
    console.print(
        Text("conversations, newest first: " + ", ".join(c["id"] for c in listing["items"]))
    )


async def run_demo(url: str, settings: Settings, *, where: str) -> None:
    from api.app import create_app
    from api.deps import Services
    from hosting.engines import make_async_engine
    from hosting.keys import KeyLookup, create_key, revoke_key

    storage = await open_storage(url, settings)
    engine = make_async_engine(url, settings, pool_size=1, max_overflow=1)
    key_id, key = await create_key(engine, DEFAULT_TENANT, "make demo")
    keys = await KeyLookup.connect(url, options=settings.connection_options(), max_size=1)
    services = Services(
        storage=storage, tenant_for_key=keys.tenant_for_key, limits=limits_from_settings(settings)
    )
    app = create_app(settings, services=services)
    cid = f"flaky-parser-{uuid.uuid4().hex[:6]}"
    try:
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app),
            base_url="http://convo.demo",
            headers={"Authorization": f"Bearer {key}"},
        ) as client:
            api = _Api(client)
            await _session(api, cid)
            conversation = await api("GET", f"/conversations/{cid}")
            console.print(
                Panel.fit(
                    f"database: {where}\nconversation: {cid} (an id we chose)\n"
                    f"version (events): {conversation['version']} · "
                    f"through: the HTTP API, tenant {DEFAULT_TENANT!r}",
                    title="convo-store demo",
                )
            )
            await _compact(api, cid)
            await _show_agent_view(api, cid)
            await _analyst(api, cid)
    finally:
        await revoke_key(engine, key_id)
        await engine.dispose()
        await keys.close()
        await storage.close()
