"""Forking a long conversation, and building the fork's payload.

What is measured, through the store's public repository:

- `fork(parent)` of a conversation of `SIZE` messages (100,000; 10,000 with
  `CONVO_BENCH_QUICK=1`): one transaction that copies every message
  server side (`store.postgres.forks.COPY_FORKED`: one INSERT … SELECT per
  table, no row through Python), as a median of `REPEATS` forks. Its
  baseline is the raw cost of copying the parent's event rows alone, in one
  `INSERT … SELECT` on a plain psycopg connection (rolled back): what any
  copy of the log costs before views, indexes and the search index are kept.
- `assemble(fork)` against `assemble(parent)` (OpenAI Chat), interleaved:
  the fork's payload is built from its own rows, so it should cost what the
  parent's does. The window is the whole history (neither is compacted):
  the payload of `SIZE` messages.

The parent is a coding agent's history: user requests, assistant steps with
tool calls and their results (~300-char messages), loaded through the
normal append path in chunks of `CHUNK`, then `VACUUM (ANALYZE)`.
"""

from __future__ import annotations

import random
from typing import Any

from bench import harness
from bench.report import comparison, print_table
from hosting.settings import Settings
from store.domain.conversation_keys import stream_id
from store.domain.messages import Message, ToolCall

QUICK = harness.quick_mode()
SIZE = 10_000 if QUICK else 100_000
CHUNK = 1_000
REPEATS = 2 if QUICK else 3
PAYLOAD_REPEATS = 3 if QUICK else 5

RAW_COPY = (
    "INSERT INTO events (conversation_id, version, type, data)"
    " SELECT gen_random_uuid(), version, type, data FROM events WHERE conversation_id = %s"
)


def _messages(rng: random.Random, start: int, count: int) -> list[Message]:
    out: list[Message] = []
    i = start
    while len(out) < count:
        text = " ".join(rng.choice(("parse", "token", "tree", "fix", "test")) for _ in range(50))
        if i % 5 == 3 and len(out) + 2 <= count:
            call = ToolCall(id=f"c{i}", name="grep", arguments={"q": text[:40]})
            out.append(Message(role="assistant", content="", tool_calls=(call,)))
            out.append(Message(role="tool", tool_call_id=f"c{i}", content=text))
        else:
            out.append(Message(role="user" if i % 2 else "assistant", content=text))
        i += 1
    return out


async def run(url: str, settings: Settings) -> dict[str, Any]:
    rng = random.Random(42)
    async with harness.open_repository(url, settings, pool_size=4) as repository:
        parent = (await repository.create_conversation()).id
        for start in range(0, SIZE, CHUNK):
            await repository.append_messages(parent, _messages(rng, start, CHUNK))
        harness.vacuum(url, settings)

        forks: list[str] = []

        async def fork(_: int) -> None:
            forks.append((await repository.fork(parent)).id)

        fork_s = await harness.time_each(fork, REPEATS)
        harness.vacuum(url, settings)
        conn = await harness.raw_async_connection(url, settings)
        try:

            async def raw_copy(_: int) -> None:
                await conn.execute(RAW_COPY, (stream_id(repository.tenant, parent),))
                await conn.rollback()

            raw_s = await harness.time_each(raw_copy, REPEATS)
        finally:
            await conn.close()

        async def assemble_parent(_: int) -> None:
            await repository.assemble(parent)

        async def assemble_fork(_: int) -> None:
            await repository.assemble(forks[0])

        payload = await harness.time_interleaved(
            {"parent": assemble_parent, "fork": assemble_fork}, PAYLOAD_REPEATS, 1, collect=True
        )
    figures = {
        "size": SIZE,
        "fork_ms": harness.median_ms(fork_s),
        "raw_event_copy_ms": harness.median_ms(raw_s),
        "assemble_parent_ms": harness.median_ms(payload["parent"]),
        "assemble_fork_ms": harness.median_ms(payload["fork"]),
    }
    print_table(
        f"fork of a {SIZE:,}-message conversation",
        ["figure", "ms"],
        [[name, value] for name, value in figures.items() if name != "size"],
    )
    return figures


def comparisons(figures: dict[str, Any]) -> list[dict[str, Any]]:
    size = f"{figures['size']:,}"
    return [
        comparison(
            f"fork of {size} messages",
            figures["fork_ms"],
            figures["raw_event_copy_ms"],
            unit="ms",
            baseline_name="raw INSERT … SELECT of its events",
            note="events, messages, role index, membership, tool calls and search index",
        ),
        comparison(
            f"payload build of the fork ({size} messages)",
            figures["assemble_fork_ms"],
            figures["assemble_parent_ms"],
            unit="ms",
            baseline_name="the parent's",
            goal=("<=", 1.2),
        ),
    ]


def main() -> None:
    harness.run_and_record("fork", run, comparisons, notes=__doc__ or "")


if __name__ == "__main__":
    main()
