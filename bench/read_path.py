"""The read paths agents call, against a raw read of the same rows.

Everything goes through the store's public repository (`bench.harness.
open_repository`); each baseline is plain async psycopg on its own
connection (autocommit: one statement, one round trip), in the same event
loop, against the same server, reading the same JSON from a plain table
`baseline.messages (id bigserial PRIMARY KEY, conversation_id uuid, data
jsonb)` with an index on `(conversation_id, id)`, rows decoded by psycopg's
default jsonb loader (`json.loads`) — fetch and decode, nothing else.

Two conversations, 5,000 and 20,000 messages (user and assistant turns of
about 400 characters, a tool call and its result every 5th turn, no
compaction: the visible window is the whole history), are loaded through
`append_messages` in calls of 100 messages (timed: messages/s; the same rows
`COPY`'d into the baseline table, timed too, for information), then
`VACUUM (ANALYZE)` runs once, before any measurement.

- 5k window: `visible_window(cid)` and the payload build `assemble(cid,
  format=...)` for openai-chat and anthropic (window + profile + slots
  read, then the pure assembler) vs `SELECT data FROM baseline.messages
  WHERE conversation_id = %s ORDER BY id`. The payload build does more than
  the baseline by design; the goal says how much more is acceptable. The
  diagnostics' stable-prefix fingerprint is computed when first read, so a
  caller that sends the payload does not pay for it; an info row reads it
  too (openai-chat), as the HTTP API does.
- last 50 at 20k: `read_messages(cid, order="desc", limit=50)` vs `SELECT
  data ... ORDER BY id DESC LIMIT 50`; `recent_by_role(cid, "user", 50,
  scope="history")` against the same baseline, for information. A
  repository without `read_messages` gets a null figure and a note.

The store's calls and the baseline take turns within every repetition (the
order rotating) after a warm-up; medians. Before each 5k-row call the garbage
collector runs, untimed, so neither side pays for collecting the other's
garbage (a store call leaves a lot); each pays for the collections its own
allocations trigger, which in this process (the store's modules loaded) cost
more than in a bare psycopg script. cProfile of the store side (payload
build at 5k, top 20 by cumulative and by own time) is in `profile`. No
figure is asserted; goals are compared in `comparisons`.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg

from bench import harness
from bench.report import Compared, compared, comparison
from bench.workload import RAW_TABLE, Script, as_json, as_messages, raw_table_ddl
from hosting.settings import Settings
from store.domain.context import AgentProfile
from store.repository import Repository

QUICK = harness.quick_mode()
WINDOW_SIZE = 5_000  # the goals' sizes, in both modes
HISTORY_SIZE = 20_000
CHUNK = 100
WINDOW_REPEATS = 9 if QUICK else 40
WINDOW_WARMUP = 1 if QUICK else 3
LAST_REPEATS = 150 if QUICK else 500
LAST_WARMUP = 20 if QUICK else 50
LAST_N = 50
PROFILE_CALLS = 3 if QUICK else 10
FORMATS = ("openai-chat", "anthropic")

GOAL_WINDOW = 1.5
GOAL_LAST = 1.3

SELECT_ALL = f"SELECT data FROM {RAW_TABLE} WHERE conversation_id = %s ORDER BY id"
SELECT_LAST = (
    f"SELECT data FROM {RAW_TABLE} WHERE conversation_id = %s ORDER BY id DESC LIMIT {LAST_N}"
)
COPY = f"COPY {RAW_TABLE} (conversation_id, data) FROM STDIN"
PROFILE = AgentProfile(
    system_prompt="You are a careful coding agent. Read before you edit; run the tests."
)


async def load(
    repository: Repository, conn: psycopg.AsyncConnection[Any], size: int, seed: int
) -> dict[str, Any]:
    """One conversation of `size` messages through the repository, in calls of
    `CHUNK`; the same rows into the baseline table with COPY."""
    conversation = await repository.create_conversation(metadata={"bench": "read_path"})
    cid, version = conversation.id, conversation.version
    await repository.configure_agent(cid, PROFILE, expected_version=version)
    version += 1
    raw = Script(seed=seed, tools=True, prefix=f"c{seed}").take(size)
    messages, texts = as_messages(raw), as_json(raw)
    started = time.perf_counter()
    for at in range(0, size, CHUNK):
        appended = await repository.append_messages(
            cid, messages[at : at + CHUNK], expected_version=version
        )
        version = appended.version
    store_seconds = time.perf_counter() - started
    started = time.perf_counter()
    async with conn.cursor() as cursor, cursor.copy(COPY) as copy:
        for data in texts:
            await copy.write_row((cid, data))
    raw_seconds = time.perf_counter() - started
    return {
        "conversation_id": cid,
        "messages": size,
        "store_seconds": store_seconds,
        "store_messages_per_s": size / store_seconds,
        "raw_copy_seconds": raw_seconds,
        "raw_copy_messages_per_s": size / raw_seconds,
    }


Action = Callable[[int], Awaitable[object]]


def counted(results: dict[str, int], name: str, read: Callable[[], Awaitable[Any]]) -> Action:
    """`read` as a timed action that remembers how many items it returned."""

    async def action(_: int) -> None:
        result = await read()
        # An Assembly counts its neutral message list (system prompt +
        # history) in its diagnostics: reading `messages` would make them,
        # which a caller that sends the payload never does (store.assembler.plain).
        diagnostics = getattr(result, "diagnostics", None)
        results[name] = len(result) if diagnostics is None else diagnostics.message_count

    return action


def payload(
    repository: Repository, conversation_id: str, format: str, *, fingerprint: bool = False
) -> Callable[[], Awaitable[Any]]:
    async def build() -> Any:
        assembly = await repository.assemble(conversation_id, format=format)
        # Computed when first read (store.assembler.diagnostics); read here
        # without `assert`, which `python -O` would skip.
        if fingerprint and not assembly.diagnostics.stable_prefix.fingerprint:
            raise RuntimeError("the build gave no stable-prefix fingerprint")
        return assembly

    return build


async def run(url: str, settings: Settings) -> dict[str, Any]:
    with harness.raw_sync_connection(url, settings) as admin:
        for statement in raw_table_ddl(conversation_index=True):
            admin.execute(statement)
        admin.commit()
    conn = await harness.raw_async_connection(url, settings)
    await conn.set_autocommit(True)
    try:
        async with harness.open_repository(
            url, settings, pool_size=harness.SEQUENTIAL_POOL, min_size=1
        ) as repository:
            print(f"loading {WINDOW_SIZE:,} + {HISTORY_SIZE:,} messages ...", flush=True)
            small = await load(repository, conn, WINDOW_SIZE, seed=5)
            large = await load(repository, conn, HISTORY_SIZE, seed=6)
            harness.vacuum(url, settings)
            return await measure(repository, conn, small, large)
    finally:
        await conn.close()


async def measure(
    repository: Repository,
    conn: psycopg.AsyncConnection[Any],
    small: dict[str, Any],
    large: dict[str, Any],
) -> dict[str, Any]:
    small_id: str = small["conversation_id"]
    large_id: str = large["conversation_id"]
    returned: dict[str, int] = {}

    async def raw_all() -> list[Any]:
        cursor = await conn.execute(SELECT_ALL, (small_id,))
        return await cursor.fetchall()

    async def raw_last() -> list[Any]:
        cursor = await conn.execute(SELECT_LAST, (large_id,))
        return await cursor.fetchall()

    print("5k window and payloads ...", flush=True)
    window_actions: dict[str, Action] = {
        "visible_window": counted(
            returned, "visible_window", lambda: repository.visible_window(small_id)
        ),
        **{
            f"assemble_{f}": counted(returned, f"assemble_{f}", payload(repository, small_id, f))
            for f in FORMATS
        },
        "assemble_openai-chat_fingerprint": counted(
            returned,
            "assemble_openai-chat_fingerprint",
            payload(repository, small_id, "openai-chat", fingerprint=True),
        ),
        "raw_select_all": counted(returned, "raw_select_all", raw_all),
    }
    window = await harness.time_interleaved(
        window_actions, WINDOW_REPEATS, WINDOW_WARMUP, collect=True
    )

    print("last 50 at 20k ...", flush=True)
    read_messages = getattr(repository, "read_messages", None)
    last_actions: dict[str, Action] = {}
    if read_messages is not None:
        last_actions["read_messages_desc_50"] = counted(
            returned,
            "read_messages_desc_50",
            lambda: read_messages(large_id, order="desc", limit=LAST_N),
        )
    last_actions["recent_by_role_user_50_history"] = counted(
        returned,
        "recent_by_role_user_50_history",
        lambda: repository.recent_by_role(large_id, "user", LAST_N, scope="history"),
    )
    last_actions["raw_select_last_50"] = counted(returned, "raw_select_last_50", raw_last)
    last = await harness.time_interleaved(last_actions, LAST_REPEATS, LAST_WARMUP)

    print("profile ...", flush=True)

    async def build(_: int) -> None:
        await repository.assemble(small_id, format="openai-chat")

    cumulative, own = await harness.profile_calls(build, PROFILE_CALLS)

    def strip(load: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in load.items() if k != "conversation_id"}

    return {
        "quick": QUICK,
        "load": {
            "chunk": CHUNK,
            "conversations": [strip(small), strip(large)],
            "store_messages_per_s": (small["messages"] + large["messages"])
            / (small["store_seconds"] + large["store_seconds"]),
            "raw_copy_messages_per_s": (small["messages"] + large["messages"])
            / (small["raw_copy_seconds"] + large["raw_copy_seconds"]),
        },
        "window_5k": {
            "messages": WINDOW_SIZE,
            "repeats": WINDOW_REPEATS,
            "warmup": WINDOW_WARMUP,
            "median_ms": {name: harness.median_ms(s) for name, s in window.items()},
        },
        "last_50_at_20k": {
            "history": HISTORY_SIZE,
            "repeats": LAST_REPEATS,
            "warmup": LAST_WARMUP,
            "read_messages_available": read_messages is not None,
            "median_ms": {
                "read_messages_desc_50": None,
                **{name: harness.median_ms(s) for name, s in last.items()},
            },
        },
        "items_returned": returned,
        "profile": {
            f"assemble_openai_chat_{WINDOW_SIZE}_cumulative": cumulative,
            f"assemble_openai_chat_{WINDOW_SIZE}_own_time": own,
        },
    }


def comparisons(figures: dict[str, Any]) -> list[dict[str, Any]]:
    window = figures["window_5k"]["median_ms"]
    last = figures["last_50_at_20k"]["median_ms"]
    load = figures["load"]
    # Each read's median against a raw SELECT's, in milliseconds.
    whole_window = "SELECT data … ORDER BY id"
    last_page = "SELECT … ORDER BY id DESC LIMIT 50"
    unmeasured = (
        ""
        if figures["last_50_at_20k"]["read_messages_available"]
        else "the repository has no read_messages yet"
    )
    timed: list[Compared] = [
        (
            "visible window, 5k messages",
            window["visible_window"],
            window["raw_select_all"],
            whole_window,
            ("<=", GOAL_WINDOW),
            "",
        ),
        *(
            (
                f"payload build ({f}), 5k messages",
                window[f"assemble_{f}"],
                window["raw_select_all"],
                whole_window,
                ("<=", GOAL_WINDOW),
                "",
            )
            for f in FORMATS
        ),
        (
            "payload build (openai-chat) and its stable-prefix fingerprint read, 5k (info)",
            window["assemble_openai-chat_fingerprint"],
            window["raw_select_all"],
            whole_window,
            None,
            "",
        ),
        (
            "last 50 messages at 20k (read_messages desc)",
            last["read_messages_desc_50"],
            last["raw_select_last_50"],
            last_page,
            ("<=", GOAL_LAST),
            unmeasured,
        ),
        (
            "last 50 user messages at 20k, recent_by_role history (info)",
            last["recent_by_role_user_50_history"],
            last["raw_select_last_50"],
            last_page,
            None,
            "",
        ),
    ]
    rows = compared(timed, unit="ms")
    rows.append(
        comparison(
            f"load through append_messages ({CHUNK} per call, info)",
            load["store_messages_per_s"],
            load["raw_copy_messages_per_s"],
            unit="msg/s",
            baseline_name="COPY, one per conversation",
        )
    )
    return rows


def main() -> None:
    figures = harness.run_and_show(
        "read_path", run, comparisons, title="read path vs raw psycopg", notes=__doc__ or ""
    )
    print("items returned per call:", figures["items_returned"])
    print("profile of the 5k payload build (top 20 by cumulative time):")
    print(figures["profile"][f"assemble_openai_chat_{WINDOW_SIZE}_cumulative"])


if __name__ == "__main__":
    main()
