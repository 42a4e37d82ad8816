"""`make demo`: a short agent session, appended to the log and read back."""

from __future__ import annotations

import uuid

from rich.console import Console
from rich.table import Table

from store.db import make_async_engine
from store.log import EventLog
from store.records import NewEvent, StreamState
from store.settings import Settings

console = Console()


async def run_demo(url: str, settings: Settings, *, where: str) -> None:
    engine = make_async_engine(url, settings)
    log = EventLog(engine)
    try:
        conversation = uuid.uuid4()
        session = [
            {"role": "system", "content": "You are a careful coding agent."},
            {"role": "user", "content": "What is in README.md?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"id": "call_1", "name": "read_file", "arguments": {"path": "README.md"}}
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "# convo-store\n..."},
            {"role": "assistant", "content": "It describes convo-store and its two commands."},
        ]
        result = await log.append(
            conversation,
            [NewEvent(type="message_appended", data={"message": m}) for m in session],
            expected_version=StreamState.NO_STREAM,
        )
        console.print(f"[bold]database[/bold]: {where}")
        console.print(
            f"[bold]conversation[/bold] {conversation}: appended versions "
            f"{result.first_version}..{result.last_version}"
        )
        table = Table(title="the conversation, read back from the event log")
        for column in ("version", "position", "role", "content"):
            table.add_column(column)
        for event in await log.read_stream(conversation):
            message = event.data["message"]
            content = message.get("content") or ", ".join(
                f"{c['name']}({c['arguments']})" for c in message.get("tool_calls", [])
            )
            table.add_row(str(event.version), str(event.position), message["role"], content)
        console.print(table)
    finally:
        await engine.dispose()
