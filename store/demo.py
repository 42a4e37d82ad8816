"""`make demo`: a realistic agent session, end to end, printed as a user sees it.

A main agent takes a task, delegates a search to a sub-agent, both call
tools, the TODO list changes as work progresses, a system reminder is
recorded, and a compaction job starts a new batch with a summary. Then we
print what each reader cares about: the visible window, "last 3 user
messages", counts by role, the tool blocks, the batches — and the payload
the main agent's next LLM call would send, in two provider formats.
"""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from store.bootstrap import open_storage, repository
from store.context import AgentProfile, TodoItem
from store.messages import Message, StoredMessage, ToolCall
from store.repository import Repository
from store.settings import Settings

console = Console()


def _call(call_id: str, name: str, **arguments: Any) -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=arguments)


def _describe(message: StoredMessage) -> str:
    if message.tool_calls:
        calls = ", ".join(f"{c.name}({json.dumps(c.arguments)})" for c in message.tool_calls)
        return f"{message.text + ' ' if message.text else ''}→ {calls}"
    if message.tool_call_id:
        return f"[{message.tool_call_id}] {message.text}"
    return message.text


def _window_table(title: str, window: list[StoredMessage]) -> Table:
    table = Table(title=title, show_lines=False)
    for column in ("seq", "batch", "agent", "role", "kind", "content"):
        table.add_column(column, overflow="fold")
    for m in window:
        # Text, not markup: message content like '[x]' must print as it is.
        table.add_row(
            str(m.seq), str(m.batch), m.agent_id, m.role, m.kind.value, Text(_describe(m))
        )
    return table


async def _session(repo: Repository) -> Any:
    conversation = await repo.create_conversation(metadata={"title": "fix the flaky parser test"})
    cid = conversation.id
    await repo.configure_agent(
        cid,
        AgentProfile(
            system_prompt="You are a careful coding agent working in the user's repository.",
            role_definition="Main agent: plan the work, delegate searches, make the fix.",
        ),
    )
    await repo.configure_agent(
        cid,
        AgentProfile(
            agent_id="searcher",
            is_sub_agent=True,
            role_definition="Sub-agent: find code and report file paths with line numbers.",
        ),
    )
    todo = [
        TodoItem(id="1", content="Find where the parser test fails", status="in_progress"),
        TodoItem(id="2", content="Fix the tokenizer edge case"),
        TodoItem(id="3", content="Run the test suite"),
    ]
    await repo.update_slot(cid, "todo", todo)
    await repo.update_slot(cid, "useful_info", "Tests run with `make test`; CI uses Python 3.11.")
    await repo.append_messages(
        cid,
        [
            Message(
                role="user",
                content="The parser test fails about one run in ten. Fix it?",
                client_message_id="u-1",
            ),
            Message(
                role="assistant",
                content="I'll ask the searcher to find the test first.",
                tool_calls=(
                    _call("call_1", "delegate", agent="searcher", task="find parser test"),
                ),
            ),
        ],
    )
    # The sub-agent's own thread: its messages never reach the main agent's payload.
    await repo.append_messages(
        cid,
        [
            Message(role="user", agent_id="searcher", content="Find the flaky parser test."),
            Message(
                role="assistant",
                agent_id="searcher",
                content="",
                tool_calls=(_call("s_1", "grep", pattern="def test_parse"),),
            ),
            Message(
                role="tool",
                agent_id="searcher",
                tool_call_id="s_1",
                content="tests/test_parser.py:42: def test_parse_unicode_edge()",
            ),
            Message(
                role="assistant",
                agent_id="searcher",
                content="tests/test_parser.py:42 — test_parse_unicode_edge",
            ),
        ],
    )
    await repo.append_messages(
        cid,
        [
            Message(
                role="tool",
                tool_call_id="call_1",
                content="searcher: tests/test_parser.py:42 test_parse_unicode_edge",
            ),
            Message(
                role="assistant",
                content="",
                tool_calls=(
                    _call("call_2", "read_file", path="src/tokenizer.py"),
                    _call("call_3", "read_file", path="tests/test_parser.py"),
                ),
            ),
            Message(
                role="tool", tool_call_id="call_2", content="def tokenize(text): ... set(...) ..."
            ),
            Message(
                role="tool", tool_call_id="call_3", content="def test_parse_unicode_edge(): ..."
            ),
        ],
    )
    todo[0] = todo[0].model_copy(update={"status": "completed"})
    todo[1] = todo[1].model_copy(update={"status": "in_progress"})
    await repo.update_slot(cid, "todo", todo)
    await repo.append_messages(
        cid,
        [
            Message(
                role="system", kind="reminder", content="The TODO list changed: item 1 completed."
            ),
            Message(
                role="assistant",
                content="The tokenizer iterates over a set: order varies.",
                tool_calls=(
                    _call(
                        "call_4",
                        "edit_file",
                        path="src/tokenizer.py",
                        change="iterate over sorted(...)",
                    ),
                ),
            ),
            Message(role="tool", tool_call_id="call_4", content="edited src/tokenizer.py"),
            Message(
                role="user",
                content="Nice. Please also run the whole suite.",
                client_message_id="u-2",
            ),
            Message(
                role="assistant",
                content="",
                tool_calls=(_call("call_5", "run", command="make test"),),
            ),
            Message(role="tool", tool_call_id="call_5", content="212 passed in 41.2s"),
            Message(role="assistant", content="All 212 tests pass; the test is no longer flaky."),
            Message(
                role="user", content="Thanks! Summarise what changed.", client_message_id="u-3"
            ),
        ],
    )
    # A compaction job: a new batch from the second user message on, led by a summary.
    boundary = (await repo.recent_by_role(cid, "user", 2, agent_id="main"))[0].seq
    await repo.start_batch(
        cid,
        boundary,
        summary=Message(
            role="user",
            content="Summary so far: the flaky parser test came from "
            "set iteration order in the tokenizer; the searcher found the test.",
        ),
        adjust=True,
    )
    return cid


async def run_demo(url: str, settings: Settings, *, where: str) -> None:
    storage = await open_storage(url, settings)
    repo = repository(storage, settings)
    try:
        cid = await _session(repo)
        conversation = await repo.get_conversation(cid)
        console.print(
            Panel.fit(
                f"database: {where}\nconversation: {cid}\n"
                f"version (events): {conversation.version} · "
                f"current batch: {conversation.current_batch}",
                title="convo-store demo",
            )
        )
        console.print(
            _window_table(
                "batch 1 as it was (everything, both agents)",
                await repo.visible_window(cid, batch=1),
            )
        )
        console.print(
            _window_table(
                f"visible window now (batch {conversation.current_batch}, main agent)",
                await repo.visible_window(cid, agent_id="main"),
            )
        )
        last_users = await repo.recent_by_role(cid, "user", 3, scope="history", agent_id="main")
        console.print(_window_table("last 3 user messages (whole history, main agent)", last_users))
        counts = await repo.count_by_role(cid, scope="history")
        visible = await repo.count_by_role(cid)
        console.print(Text(f"messages by role — history: {counts} · visible: {visible}"))
        blocks = await repo.tool_blocks(cid)
        console.print(
            Text(
                "tool calls: " + ", ".join(f"{b.call_id}:{b.tool_name}({b.status})" for b in blocks)
            )
        )
        for fmt in ("anthropic", "openai-chat"):
            assembly = await repo.assemble(cid, agent_id="main", format=fmt)
            console.print(
                Panel(
                    Text(json.dumps(assembly.payload, indent=2, ensure_ascii=False)),
                    title=f"the main agent's next request body — {fmt}",
                )
            )
            diagnostics = assembly.diagnostics.model_dump(mode="json")
            console.print(
                Text(f"diagnostics ({fmt}): {json.dumps(diagnostics, ensure_ascii=False)}")
            )
    finally:
        await storage.close()
