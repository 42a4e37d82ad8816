"""Read latency against history length: 1k, 10k and 100k messages, one run.

What is measured, through the store's public repository (`bench.harness.
open_repository`: the agents' API, so the figure includes the head look-up,
the database layer and building `StoredMessage`s):

- `visible_window(cid)`: the current batch's window;
- `recent_by_role(cid, "user", 3)`: last 3 user messages, visible scope;
- `recent_by_role(cid, "assistant", 3, scope="history")`;
- `role_range(cid, "tool", n - 5, n)`: the last six tool results by ordinal;
- `count_by_role(cid, scope="history")`.

Each is reported as a median over `REPEATS` calls (fewer with
`CONVO_BENCH_QUICK=1`; the sizes stay, the target names them) and as a ratio
to the 1k figure. The issue's target: every read at 100k within 1.3x of 1k.

The conversations look like a coding agent's: a user request (sometimes
preceded by a system reminder), then assistant steps each carrying one to
three tool calls followed by their results (200-2000 chars, some errors),
then a final assistant answer; lengths vary from ~50 to 2000 chars. A
compaction job runs between turns once `COMPACT_EVERY` messages have
arrived since the last one: `start_batch(max(1, next_seq - KEEP),
summary=..., adjust=True)`, i.e. a summary plus the last ~`KEEP` messages (grown to
whole tool-call blocks), so the visible window stays a few hundred
messages however long the history gets.

Why the comparison is fair:

- Three conversations, one per size, are loaded into the same database and
  measured only after all three are loaded and `VACUUM (ANALYZE)` ran: the
  tables, their indexes, statistics and caches are the same for all three
  measurements; only the conversation's own history length differs. (Growing
  one conversation and measuring at 1k, 10k, 100k would also measure a
  1k-row table against a 100k-row one.) `VACUUM` also keeps autovacuum, which
  the bulk load would otherwise trigger, from running during measurement.
- The visible windows are identical in size and shape. A history is built
  from compaction cycles generated newest-first with fixed seeds: the last
  (partial, `PARTIAL` messages) cycle and the full one before it are the
  same messages in all three conversations, so the last compaction keeps the
  same tail and the measurement happens the same number of messages after
  it. Older cycles only make the history longer; the oldest is cut to hit
  the exact history size (plus a few leading system reminders).
- Sizes are interleaved: each repetition reads 1k, 10k, 100k in turn, after
  a warm-up of every read on every size, so drift (caches, CPU frequency,
  background work) hits all three alike.

Loading goes through the normal append path (`append_messages`, chunks of
up to `CHUNK` messages per call, projections inline) and is timed too.
After the reads, the same turn is appended `APPEND_REPEATS` times to each
conversation, sizes interleaved: append cost per message by history length.

Plans: the SQL each read runs is captured and its plan shape (EXPLAIN,
COSTS OFF, ids and numbers masked) saved per size, with a flag saying
whether the plan is the same at every size. If a read comes out above the
target, `EXPLAIN (ANALYZE, BUFFERS)` of its statements at 1k and 100k is
printed and saved too. Statements are captured from every SQLAlchemy engine
in the process (a store that stops going through SQLAlchemy leaves the plans
empty) and explained on a separate connection. These are the plans for the statement with its
values inlined (custom plans); the driver's prepared statements may run a
generic plan after a few executions.
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine, event

from bench.harness import (
    SEQUENTIAL_POOL,
    median_ms,
    open_repository,
    quick_mode,
    run_and_record,
    time_each,
    vacuum,
)
from bench.report import comparison, print_table
from hosting.engines import make_sync_engine
from hosting.settings import Settings
from store.domain.messages import Message, MessageKind, ToolCall
from store.repository import Repository

SIZES = (1_000, 10_000, 100_000)
TARGET_RATIO = 1.3
QUICK = quick_mode()
REPEATS = 50 if QUICK else 200
WARMUP = 5 if QUICK else 20
CHUNK = 64  # messages per append_messages call while loading
APPEND_REPEATS = 5 if QUICK else 20  # appends of one turn per size, after the reads
APPEND_SEED = 10_000
COMPACT_EVERY = 500  # messages since the last compaction that trigger one
KEEP = 100  # messages a compaction keeps after its summary
PARTIAL = 250  # messages appended since the last compaction when measured

TOOLS = ("read_file", "edit_file", "bash", "grep", "list_dir", "run_tests")
VOCABULARY = (
    "def class return import self async await if else for while try except "
    "raise with yield lambda None True False parser token node tree visit "
    "error test fixture assert result value index cache query session "
    "commit rollback migration schema table column row batch window "
    "message role tool call summary history agent context file path line"
)
WORDS = VOCABULARY.split()


def _corpus(rng: random.Random, chars: int) -> str:
    words: list[str] = []
    size = 0
    while size < chars:
        word = rng.choice(WORDS)
        words.append(word)
        size += len(word) + 1
    return " ".join(words)


CORPUS = _corpus(random.Random(1234), 20_000)


# --- the conversation's shape ------------------------------------------------


@dataclass
class Turn:
    """One user request and everything the agent did for it: messages in
    order, with `None` in place of the tool call ids, filled in at load time
    so they are unique within the conversation."""

    messages: list[dict[str, Any]] = field(default_factory=list)


def _text(rng: random.Random, low: int, high: int) -> str:
    length = rng.randint(low, high)
    start = rng.randrange(0, len(CORPUS) - length)
    return CORPUS[start : start + length]


def _turn(rng: random.Random) -> Turn:
    turn = Turn()
    if rng.random() < 0.15:
        turn.messages.append(
            {"role": "system", "kind": MessageKind.REMINDER, "content": _text(rng, 50, 300)}
        )
    turn.messages.append({"role": "user", "content": _text(rng, 50, 600)})
    for _ in range(rng.randint(1, 6)):
        calls = [
            {"name": rng.choice(TOOLS), "arguments": {"path": _text(rng, 10, 40)}}
            for _ in range(rng.choices((1, 2, 3), weights=(6, 3, 1))[0])
        ]
        turn.messages.append({"role": "assistant", "content": _text(rng, 50, 400), "calls": calls})
        for _ in calls:
            turn.messages.append(
                {
                    "role": "tool",
                    "content": _text(rng, 200, 2000),
                    "is_error": rng.random() < 0.05,
                }
            )
    turn.messages.append({"role": "assistant", "content": _text(rng, 100, 1500)})
    return turn


def _cycle(seed: int, at_least: int) -> list[Turn]:
    """The turns between two compactions: whole turns, `at_least` messages."""
    rng = random.Random(seed)
    turns: list[Turn] = []
    count = 0
    while count < at_least:
        turns.append(_turn(rng))
        count += len(turns[-1].messages)
    return turns


@dataclass(frozen=True)
class Plan:
    """A history of exactly `size` messages: leading system reminders, then
    compaction cycles (oldest first), each but the last ending in a
    compaction that appends one summary message."""

    size: int
    lead: int
    cycles: list[list[Turn]]


def plan_history(size: int) -> Plan:
    def length(cycle: list[Turn]) -> int:
        return sum(len(t.messages) for t in cycle)

    # Newest first: seed 0 is the partial cycle being measured, seed k the
    # k-th full cycle before it; the same in every conversation.
    newest_first = [_cycle(0, PARTIAL)]
    total = length(newest_first[0])
    seed = 1
    while True:
        cycle = _cycle(seed, COMPACT_EVERY)
        if total + length(cycle) + 1 > size:
            break
        newest_first.append(cycle)
        total += length(cycle) + 1  # + the summary its compaction appends
        seed += 1
    # The oldest cycle: as many of the next cycle's turns as still fit.
    oldest: list[Turn] = []
    for turn in cycle:
        if total + len(turn.messages) + 1 > size:
            break
        oldest.append(turn)
        total += len(turn.messages)
    if oldest:
        newest_first.append(oldest)
        total += 1
    if len(newest_first) < 3:
        raise ValueError(f"a {size}-message history is too short for this shape")
    return Plan(size=size, lead=size - total, cycles=newest_first[::-1])


# --- loading -------------------------------------------------------------------


class _Ids:
    def __init__(self) -> None:
        self.next = 0

    def new(self) -> str:
        self.next += 1
        return f"toolu_{self.next:08d}"


@dataclass
class Loaded:
    size: int
    conversation_id: str
    seconds: float
    compactions: int
    history: int = 0
    window: int = 0
    batch: int = 0
    tool_count: int = 0
    ids: _Ids = field(default_factory=_Ids)


def _messages(turn: Turn, ids: _Ids) -> Iterator[Message]:
    open_calls: list[str] = []
    for raw in turn.messages:
        if raw["role"] == "assistant" and "calls" in raw:
            calls = tuple(ToolCall(id=ids.new(), **c) for c in raw["calls"])
            open_calls = [c.id for c in calls]
            yield Message(role="assistant", content=raw["content"], tool_calls=calls)
        elif raw["role"] == "tool":
            yield Message(
                role="tool",
                content=raw["content"],
                tool_call_id=open_calls.pop(0),
                is_error=raw["is_error"],
            )
        else:
            yield Message.model_validate(raw)


async def load(repository: Repository, plan: Plan) -> Loaded:
    started = time.perf_counter()
    conversation = await repository.create_conversation(metadata={"bench": "read_scaling"})
    cid = conversation.id
    ids = _Ids()  # handed on to `Loaded`: later appends need fresh call ids
    next_seq = conversation.next_seq
    pending: list[Message] = []

    async def flush() -> None:
        nonlocal next_seq
        if pending:
            appended = await repository.append_messages(cid, pending)
            next_seq = appended.messages[-1].seq + 1
            pending.clear()

    for i in range(plan.lead):
        pending.append(
            Message(
                role="system", kind=MessageKind.REMINDER, content=f"reminder {i}: {CORPUS[:80]}"
            )
        )
    compactions = 0
    for number, cycle in enumerate(plan.cycles):
        for turn in cycle:
            for message in _messages(turn, ids):
                pending.append(message)
                if len(pending) >= CHUNK:
                    await flush()
        await flush()
        if number < len(plan.cycles) - 1:
            summary = Message(role="user", content=f"Summary {number}: {CORPUS[:1500]}")
            await repository.start_batch(cid, max(1, next_seq - KEEP), summary=summary, adjust=True)
            next_seq += 1
            compactions += 1
    return Loaded(
        size=plan.size,
        conversation_id=cid,
        seconds=time.perf_counter() - started,
        compactions=compactions,
        ids=ids,
    )


# --- reading ----------------------------------------------------------------------

Read = Callable[[Repository, Loaded], Awaitable[object]]

READS: dict[str, Read] = {
    "visible_window": lambda r, c: r.visible_window(c.conversation_id),
    "recent_user_3_visible": lambda r, c: r.recent_by_role(c.conversation_id, "user", 3),
    "recent_assistant_3_history": lambda r, c: r.recent_by_role(
        c.conversation_id, "assistant", 3, scope="history"
    ),
    "role_range_tool_last_6": lambda r, c: r.role_range(
        c.conversation_id, "tool", c.tool_count - 5, c.tool_count
    ),
    "count_by_role_history": lambda r, c: r.count_by_role(c.conversation_id, scope="history"),
}


async def describe(repository: Repository, loaded: Loaded) -> None:
    cid = loaded.conversation_id
    counts = await repository.count_by_role(cid, scope="history")
    loaded.history = sum(counts.values())
    loaded.tool_count = counts["tool"]
    loaded.window = len(await repository.visible_window(cid))
    loaded.batch = (await repository.get_conversation(cid)).current_batch


async def measure(
    repository: Repository, conversations: list[Loaded]
) -> dict[str, dict[int, float]]:
    """Median ms per read per size, sizes interleaved within each repetition."""
    medians: dict[str, dict[int, float]] = {}
    for name, read in READS.items():
        for loaded in conversations:

            async def once(_: int, read: Read = read, loaded: Loaded = loaded) -> None:
                await read(repository, loaded)

            await time_each(once, WARMUP)
        samples: dict[int, list[float]] = {c.size: [] for c in conversations}
        for _ in range(REPEATS):
            for loaded in conversations:
                started = time.perf_counter()
                await read(repository, loaded)
                samples[loaded.size].append(time.perf_counter() - started)
        medians[name] = {size: median_ms(s) for size, s in samples.items()}
    return medians


async def explain(
    explainer: Engine,
    repository: Repository,
    read: Read,
    loaded: Loaded,
    *,
    analyze: bool,
) -> list[str]:
    """The statements one call of `read` runs, each with its plan: with
    `analyze`, EXPLAIN (ANALYZE, BUFFERS); else the plan's shape alone
    (COSTS OFF), which is what to compare across sizes."""
    captured: list[tuple[str, Any]] = []

    def capture(conn: Any, cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        if not statement.lstrip().upper().startswith("EXPLAIN"):
            captured.append((statement, parameters))

    event.listen(Engine, "before_cursor_execute", capture)
    try:
        await read(repository, loaded)
    finally:
        event.remove(Engine, "before_cursor_execute", capture)
    options = "ANALYZE, BUFFERS" if analyze else "COSTS OFF"
    reports = []
    with explainer.connect() as conn:
        for statement, parameters in captured:
            rows = conn.exec_driver_sql(f"EXPLAIN ({options}) {statement}", parameters)
            plan = "\n".join(str(r[0]) for r in rows)
            if analyze:
                reports.append(f"{statement}\n-- parameters: {parameters}\n{plan}")
            else:
                reports.append(_shape(plan))
    return reports


def _shape(plan: str) -> str:
    """A plan without the values that differ by conversation (ids, numbers)."""
    plan = re.sub(r"'[0-9a-f]{8}-[0-9a-f-]{27}'", "'<id>'", plan)
    return re.sub(r"\b\d+\b", "N", plan)


async def measure_appends(repository: Repository, conversations: list[Loaded]) -> dict[int, float]:
    """Median ms per appended message, the same turn appended to every size in
    turn, `APPEND_REPEATS` times (after the reads: it changes the windows)."""
    turn = _cycle(APPEND_SEED, 1)[0]
    samples: dict[int, list[float]] = {c.size: [] for c in conversations}
    for _ in range(APPEND_REPEATS):
        for loaded in conversations:
            batch = list(_messages(turn, loaded.ids))
            started = time.perf_counter()
            await repository.append_messages(loaded.conversation_id, batch)
            samples[loaded.size].append((time.perf_counter() - started) / len(batch))
    return {size: median_ms(s) for size, s in samples.items()}


# --- the run ---------------------------------------------------------------------------


async def run(url: str, settings: Settings) -> dict[str, Any]:
    async with open_repository(url, settings, pool_size=SEQUENTIAL_POOL, min_size=1) as repository:
        explainer = make_sync_engine(url, settings)
        try:
            return await _run(repository, explainer, url, settings)
        finally:
            explainer.dispose()


async def _run(
    repository: Repository, explainer: Engine, url: str, settings: Settings
) -> dict[str, Any]:
    conversations = []
    load_started = time.perf_counter()
    for size in SIZES:
        loaded = await load(repository, plan_history(size))
        print(f"loaded {size} messages in {loaded.seconds:.1f} s", flush=True)
        conversations.append(loaded)
    load_seconds = time.perf_counter() - load_started

    vacuum(url, settings)

    for loaded in conversations:
        await describe(repository, loaded)
    windows = {c.window for c in conversations}
    assert len(windows) == 1, f"visible windows differ: {windows}"
    assert all(c.history == c.size for c in conversations), [c.history for c in conversations]

    medians = await measure(repository, conversations)
    base = SIZES[0]
    ratios = {
        name: {size: ms / by_size[base] for size, ms in by_size.items()}
        for name, by_size in medians.items()
    }
    over = sorted(name for name, r in ratios.items() if r[SIZES[-1]] > TARGET_RATIO)
    shapes = {
        name: {
            str(c.size): await explain(explainer, repository, read, c, analyze=False)
            for c in conversations
        }
        for name, read in READS.items()
    }
    plans = {
        name: {
            str(c.size): await explain(explainer, repository, READS[name], c, analyze=True)
            for c in (conversations[0], conversations[-1])
        }
        for name in over
    }
    append_ms = await measure_appends(repository, conversations)

    return {
        "quick": QUICK,
        "target_ratio_100k_to_1k": TARGET_RATIO,
        "repeats": REPEATS,
        "warmup": WARMUP,
        "load": {
            "seconds": load_seconds,
            "messages": sum(c.size for c in conversations),
            "messages_per_second": sum(c.size for c in conversations) / load_seconds,
            "chunk": CHUNK,
        },
        "sizes": {
            str(c.size): {
                "history_messages": c.history,
                "visible_window_messages": c.window,
                "current_batch": c.batch,
                "compactions": c.compactions,
                "load_seconds": c.seconds,
                "median_ms": {name: medians[name][c.size] for name in READS},
                "ratio_to_1k": {name: ratios[name][c.size] for name in READS},
            }
            for c in conversations
        },
        "over_target": over,
        "explain_over_target": plans,
        "same_plan_at_every_size": {
            name: len({tuple(p) for p in by_size.values()}) == 1 for name, by_size in shapes.items()
        },
        "plan_shapes": shapes,
        "append_ms_per_message": {str(size): ms for size, ms in append_ms.items()},
        "append_ratio_to_1k": {str(size): ms / append_ms[base] for size, ms in append_ms.items()},
    }


def comparisons(figures: dict[str, Any]) -> list[dict[str, Any]]:
    """Each read at the largest size against the same read at the smallest."""
    small, large = (figures["sizes"][str(size)] for size in (SIZES[0], SIZES[-1]))
    label = f"{SIZES[-1] // 1000}k vs {SIZES[0] // 1000}k"
    rows = [
        comparison(
            f"{name}, {label}",
            large["median_ms"][name],
            small["median_ms"][name],
            unit="ms",
            baseline_name=f"same read at {SIZES[0] // 1000}k",
            goal=("<=", TARGET_RATIO),
        )
        for name in READS
    ]
    appends = figures["append_ms_per_message"]
    rows.append(
        comparison(
            f"append, ms per message, {label} (info)",
            appends[str(SIZES[-1])],
            appends[str(SIZES[0])],
            unit="ms",
            baseline_name=f"same append at {SIZES[0] // 1000}k",
        )
    )
    return rows


def main() -> None:
    figures = run_and_record("read_scaling", run, comparisons, notes=__doc__ or "")
    sizes = figures["sizes"]
    print_table(
        "histories (one conversation each, same database)",
        ["history", "visible window", "batch", "compactions", "load s"],
        [
            [
                s["history_messages"],
                s["visible_window_messages"],
                s["current_batch"],
                s["compactions"],
                s["load_seconds"],
            ]
            for s in sizes.values()
        ],
    )
    load = figures["load"]
    print(
        f"load: {load['messages']} messages in {load['seconds']:.1f} s "
        f"({load['messages_per_second']:.0f} msg/s, {CHUNK} per append)"
    )
    labels = [f"{int(size) // 1000}k" for size in sizes]
    columns = [
        "read",
        *(f"{label} ms" for label in labels),
        *(f"{label}/1k" for label in labels[1:]),
    ]
    rows: list[list[Any]] = []
    for name in READS:
        same = "" if figures["same_plan_at_every_size"][name] else " *"
        rows.append(
            [
                name + same,
                *(s["median_ms"][name] for s in sizes.values()),
                *(s["ratio_to_1k"][name] for s in list(sizes.values())[1:]),
            ]
        )
    appends = figures["append_ms_per_message"]
    ratios = figures["append_ratio_to_1k"]
    rows.append(
        [
            "(append, ms per message)",
            *(appends[size] for size in sizes),
            *(ratios[size] for size in list(sizes)[1:]),
        ]
    )
    print_table(f"read latency by history length (median of {REPEATS})", columns, rows)
    if not all(figures["same_plan_at_every_size"].values()):
        print("* the plan differs between sizes: see plan_shapes in the results file")
    if figures["over_target"]:
        print(f"above {TARGET_RATIO}x at 100k: {', '.join(figures['over_target'])}")
        for name, by_size in figures["explain_over_target"].items():
            for size, reports in by_size.items():
                print(f"--- {name} at {size}:")
                for report in reports:
                    print(report)
    else:
        print(f"every read at 100k is within {TARGET_RATIO}x of 1k")


if __name__ == "__main__":
    main()
