"""The store against the conversation stores users would pick instead, in
one run, on the same PostgreSQL server: langchain-postgres
`PostgresChatMessageHistory`, the OpenAI Agents SDK `SQLAlchemySession`,
Google ADK `DatabaseSessionService` and LangGraph `AsyncPostgresSaver` with
an `add_messages` state.

`make bench-peers` installs them into `.venv-peers` (never into the
project's `.venv`), pinned by bench/peers_requirements.txt, then runs
`python -m bench peers`. A peer that cannot be installed or started is in
the results with the reason (`systems.<name>.status`); the others go on.

Fairness:
- One process, one asyncio event loop, the same server. Each system gets
  its own fresh database: the store's from `bench.harness.bench_database`
  (migrated), each peer's an empty one beside it, its tables created by the
  peer itself. Each uses its async API and its own default or documented
  driver (`systems.<name>.driver`): psycopg 3 for the store, LangChain and
  LangGraph, asyncpg (through SQLAlchemy) for the Agents SDK and ADK.
- The same generated conversation for all (bench/workload.py: user and
  assistant turns of ≈400 characters, every 5th turn an assistant tool call
  and then its result), each message in the system's nearest native shape,
  built before any clock starts: for the store a `Message`; LangChain
  HumanMessage / AIMessage with `tool_calls` / ToolMessage; Agents SDK
  Responses input items (an assistant turn with a call is its message item
  + a `function_call` item, a result a `function_call_output`); ADK Events
  with Content parts (text, `function_call`, `function_response`), the
  model's authored by the agent; LangGraph the LangChain messages.
- What each call does and returns is in `systems.<name>.calls`. Where a
  peer has no equivalent of a call, the nearest one is used and the table
  says so (LangChain and LangGraph cannot read "the last 50": they return
  the whole conversation).
- Scenarios, in this order:
  1. single appends, one message per call, the systems taking turns in a
     rotating order, every call timed: to 1k (all), then to 5k (all but
     LangGraph: its every append re-stores the whole message list, so it
     stops at 1k and its 1k→5k is one untimed run). Medians.
  2. storage: after `VACUUM (ANALYZE)`, the growth of every table of the
     system's database since its (empty) conversation was created,
     `pg_total_relation_size` (heap, TOAST, indexes, maps), per message, at
     1k and at 5k single appends; by table in `storage`.
  3. the last 50 messages at 1k, 5k and 20k history: the store's
     `read_messages(cid, order="desc", limit=50)`; the Agents SDK's
     `get_items(limit=50)`; ADK's `get_session(config=GetSessionConfig(
     num_recent_events=50))`; LangChain's `aget_messages()` and LangGraph's
     `aget_state` (whole conversation). 5k→20k is loaded untimed with each
     system's batch call (ADK has none: the rows its `append_event` writes,
     via its own `StorageEvent.from_event`, 1,000 per transaction). First
     call untimed; then as many repeats as fit a time budget (bounded),
     interleaved, the garbage collector run before each timed call.
  4. cold load of the 5k conversation with fresh client objects (a new
     pool / connection / engine / service / compiled graph, connected before
     the clock): what each would hand an LLM (LangChain messages, Responses
     items, ADK Session events, LangGraph state) against the store's payload
     build `assemble(cid, format="openai-chat")`, which also checks tool
     pairing and converts to the provider's JSON (the peers' conversion to
     the provider format happens later, in their model clients, untimed:
     this favours the peers).
  5. 8 concurrent writers (tasks) on ONE new conversation, 250 appends each
     (50 for LangGraph, whose cost grows with history; 50 in the retry
     modes, where every append may take up to 8 attempts), every message
     tagged `[w<writer> #<index>]`; then the conversation as the system hands
     it back: stored vs submitted, duplicates, acknowledged but missing (lost
     silently), writers whose messages came back out of order, errors raised.
     The store with expected_version ANY, and with expected_version + retry
     on ConcurrencyConflict (read the version, append again); ADK without
     and with re-fetch + retry on its StaleSessionError. A retry waits
     a random 0..n ms first (n = the attempt number, at most 10), as a
     client should; at most 200 attempts per message, a message still
     refused then is counted as given up (and a tool result whose call was
     given up is then refused by the store as an orphan: counted too).
- Quick mode (`CONVO_BENCH_QUICK=1`): 250 / 1k / 2k instead of 1k / 5k /
  20k, fewer repeats and appends per writer.

No figure is asserted. `table` has, per scenario, every system's figure and
whether the store is ahead of it; `not_ahead` says where it is not, and why.
"""

from __future__ import annotations


def main() -> None:
    from bench.peers.run import main as run

    run()
