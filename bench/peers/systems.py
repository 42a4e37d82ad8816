"""The systems compared, behind one small interface: the store (through its
public repository) and each peer (through its own public API, on its own
default driver), each handed the generated conversation in its own nearest
native shape.

A peer's package is imported when the peer is opened, never at module
import: a peer that is not installed (or fails to start) is reported with
the reason by the runner, and the others go on.
"""

from __future__ import annotations

import importlib
import json
import re
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Annotated, Any, TypedDict

from sqlalchemy import make_url

from bench.harness import open_repository
from bench.workload import TOOL_EVERY
from hosting.settings import Settings, libpq_url


def peer(module: str) -> Any:
    """A peer's module, imported when a peer is opened. Typed Any on purpose:
    the peers are installed in .venv-peers only, so `make lint` in .venv
    checks this code the same whether or not a peer happens to be installed
    there, and needs no mypy override that would also change how other code
    using those packages is checked."""
    return importlib.import_module(module)


TAG = re.compile(r"^\[w(\d+) #(\d+)\] ")


def tagged(raw: dict[str, Any], writer: int, index: int) -> dict[str, Any]:
    """`raw` with `[w<writer> #<index>] ` before its text: concurrent writers'
    messages are recognised in what each system hands back."""
    return {**raw, "content": f"[w{writer} #{index:04d}] {raw['content']}"}


def driver_url(url: str, driver: str) -> str:
    """The SQLAlchemy URL of the same database with another driver."""
    return (
        make_url(url).set(drivername=f"postgresql+{driver}").render_as_string(hide_password=False)
    )


class Conflict(Exception):
    """What a writer may retry after `refresh()`: the system refused the write
    because another writer moved the conversation on (not a lost message)."""


class Writer(ABC):
    """One of several concurrent writers on one conversation, with its own
    client-side state (a version, a session object) as a separate worker
    would have."""

    @abstractmethod
    async def append(self, item: Any) -> None: ...

    async def refresh(self) -> None:  # noqa: B027 (optional: most writers have nothing to do)
        """Catch up after a `Conflict` (re-read what the system needs)."""

    async def close(self) -> None:  # noqa: B027 (optional)
        """Release what this writer opened."""


class System(ABC):
    """One conversation store, opened on its own database."""

    name: str
    #: Distributions whose versions the results record.
    packages: tuple[str, ...] = ()
    #: The database driver the system talks through.
    driver: str = ""
    #: Whether `last_50` can ask for only the last 50 (else: the whole conversation).
    has_last_n: bool = True
    #: Whether one append's cost grows with the conversation's length (the
    #: runner then stops its single appends earlier, and says so).
    grows_with_history: bool = False
    #: Concurrency modes: name -> whether a writer retries after a `Conflict`.
    modes: dict[str, bool] = {"default": False}  # noqa: RUF012
    #: What each call does and returns, for the results' notes.
    calls: dict[str, str] = {}  # noqa: RUF012

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.url = ""

    @abstractmethod
    async def open(self, url: str) -> None:
        """Connect to `url` (a SQLAlchemy URL) and create the system's tables."""

    async def close(self) -> None:  # noqa: B027 (optional)
        """Close what `open` opened."""

    @abstractmethod
    def native(self, raw: dict[str, Any], index: int) -> Any:
        """Workload message `raw` (the `index`th of its conversation) in this
        system's shape: built before any clock starts."""

    @abstractmethod
    async def new_thread(self) -> Any:
        """A new, empty conversation (session, thread); its handle."""

    @abstractmethod
    async def append(self, thread: Any, item: Any) -> None:
        """Store one message, in one call."""

    async def load(self, thread: Any, items: Sequence[Any]) -> None:
        """Store many messages, untimed (the system's batch call where it has one)."""
        for item in items:
            await self.append(thread, item)

    @abstractmethod
    async def last_50(self, thread: Any) -> int:
        """The nearest equivalent of "the last 50 messages"; how many items came back."""

    @abstractmethod
    async def cold_load(self, thread: Any) -> tuple[float, int]:
        """With fresh client objects (connected before the clock), seconds to
        load what would be handed to an LLM, and how many items came back."""

    async def cold_read(self, thread: Any) -> tuple[float, int] | None:
        """For information, where it differs from `cold_load`: the whole
        conversation as stored objects, without building anything from them."""
        return None

    @abstractmethod
    async def texts(self, thread: Any) -> list[str]:
        """The stored messages' texts in the order the system returns them."""

    @abstractmethod
    async def writer(self, thread: Any, mode: str) -> Writer:
        """A concurrent writer on `thread`."""


def _tool_call(raw: dict[str, Any]) -> dict[str, Any] | None:
    calls = raw.get("tool_calls") or []
    return calls[0] if calls else None


def _call_name(raw: dict[str, Any], index: int) -> str:
    # The workload's only tool; a result does not carry its call's name.
    return "read_file"


# --- the store ---------------------------------------------------------------------------


class ConvoStore(System):
    name = "convo-store"
    packages = ("convo-store", "psycopg", "sqlalchemy")
    driver = "psycopg 3 (async), the store's pool"
    modes = {"expected_version ANY": False, "expected_version + retry": True}  # noqa: RUF012
    calls = {  # noqa: RUF012
        "append": "repository.append_messages(cid, [message]) (expected_version ANY): one "
        "transaction that locks the conversation's stream row, checks tool-call pairing, "
        "writes the event, the message row and the head; returns the stored message "
        "numbered (seq, batch, role ordinal).",
        "last_50": "repository.read_messages(cid, order='desc', limit=50): a keyset read "
        "of the last 50 rows by seq; returns 50 StoredMessage.",
        "cold_load": "repository.assemble(cid, format='openai-chat') on a new repository "
        "(new pool, 1 connection, connected before the clock): reads the visible window, "
        "profile and slots, checks/repairs tool pairing and renders the OpenAI Chat "
        "Completions payload: what is sent to the provider, conversion included. For "
        "information, `convo-store read_messages`: every message by read_messages pages of "
        "1,000 on a new repository (StoredMessage objects, no payload build).",
        "concurrency": "8 tasks, one shared repository (pool of up to 10), append_messages one "
        "message per call; with ANY no version check; with expected_version the writer "
        "passes the version its last append returned and, on ConcurrencyConflict, reads "
        "the conversation's version and retries the same message.",
    }

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self._context: Any = None
        self.repository: Any = None

    async def open(self, url: str) -> None:
        self.url = url
        # Opened like the app's (one connection, more when callers wait), as
        # the peers' engines open theirs.
        self._context = open_repository(url, self.settings, pool_size=10, min_size=1)
        self.repository = await self._context.__aenter__()

    async def close(self) -> None:
        if self._context is not None:
            await self._context.__aexit__(None, None, None)
            self._context = None

    def native(self, raw: dict[str, Any], index: int) -> Any:
        from bench.workload import as_messages

        return as_messages([raw])[0]

    async def new_thread(self) -> Any:
        conversation = await self.repository.create_conversation(metadata={"bench": "peers"})
        return conversation.id

    async def append(self, thread: Any, item: Any) -> None:
        await self.repository.append_messages(thread, [item])

    async def load(self, thread: Any, items: Sequence[Any]) -> None:
        for at in range(0, len(items), 100):
            await self.repository.append_messages(thread, list(items[at : at + 100]))

    async def last_50(self, thread: Any) -> int:
        return len(await self.repository.read_messages(thread, order="desc", limit=50))

    async def cold_load(self, thread: Any) -> tuple[float, int]:
        async with open_repository(self.url, self.settings, pool_size=1) as repository:
            started = time.perf_counter()
            assembly = await repository.assemble(thread, format="openai-chat")
            seconds = time.perf_counter() - started
        return seconds, len(assembly.payload["messages"])

    async def cold_read(self, thread: Any) -> tuple[float, int] | None:
        async with open_repository(self.url, self.settings, pool_size=1) as repository:
            started = time.perf_counter()
            messages = await self._all(repository, thread)
            return time.perf_counter() - started, len(messages)

    @staticmethod
    async def _all(repository: Any, thread: Any) -> list[Any]:
        """Every message, by `read_messages` pages of 1,000 (its most)."""
        out: list[Any] = []
        after: int | None = None
        while True:
            page = await repository.read_messages(thread, after_seq=after, limit=1000)
            out += page
            if len(page) < 1000:
                return out
            after = page[-1].seq

    async def texts(self, thread: Any) -> list[str]:
        return [m.text for m in await self._all(self.repository, thread)]

    async def writer(self, thread: Any, mode: str) -> Writer:
        from store.domain.errors import ConcurrencyConflict

        repository = self.repository
        checked = self.modes[mode]
        version = (await repository.get_conversation(thread)).version

        class StoreWriter(Writer):
            def __init__(self) -> None:
                self.version = version

            async def append(self, item: Any) -> None:
                if not checked:
                    await repository.append_messages(thread, [item])
                    return
                try:
                    appended = await repository.append_messages(
                        thread, [item], expected_version=self.version
                    )
                except ConcurrencyConflict as error:
                    raise Conflict(str(error)) from error
                self.version = appended.version

            async def refresh(self) -> None:
                self.version = (await repository.get_conversation(thread)).version

        return StoreWriter()


# --- langchain-postgres -----------------------------------------------------------------


class LangChainPostgres(System):
    name = "langchain-postgres"
    packages = ("langchain-postgres", "langchain-core", "psycopg")
    driver = "psycopg 3 (async), one AsyncConnection per client"
    has_last_n = False
    calls = {  # noqa: RUF012
        "append": "PostgresChatMessageHistory.aadd_messages([message]): json.dumps of "
        "message_to_dict, one INSERT into (id serial, session_id uuid, message jsonb, "
        "created_at) + COMMIT. No ordering number, no pairing check.",
        "last_50": "aget_messages(): it has no limit, so this is ALL the conversation's "
        "rows (SELECT ... WHERE session_id ORDER BY id, with an index on session_id only) "
        "turned into BaseMessage objects: the nearest equivalent, not the same request.",
        "cold_load": "aget_messages() on a new AsyncConnection + new history object: the "
        "BaseMessage list a LangChain chat model takes (its conversion to the provider's "
        "JSON happens later, inside the model integration, and is not timed).",
        "concurrency": "8 tasks, each its own AsyncConnection and history object, "
        "aadd_messages one message per call.",
    }
    table = "chat_history"

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.conn: Any = None

    async def _connect(self) -> Any:
        import psycopg

        return await psycopg.AsyncConnection.connect(libpq_url(self.url))

    async def open(self, url: str) -> None:
        self.url = url
        self.conn = await self._connect()
        history = peer("langchain_postgres").PostgresChatMessageHistory
        await history.acreate_tables(self.conn, self.table)

    async def close(self) -> None:
        if self.conn is not None:
            await self.conn.close()

    def _history(self, thread: Any, conn: Any) -> Any:
        history = peer("langchain_postgres").PostgresChatMessageHistory
        return history(self.table, str(thread), async_connection=conn)

    def native(self, raw: dict[str, Any], index: int) -> Any:
        return langchain_message(raw, index)

    async def new_thread(self) -> Any:
        return self._history(uuid.uuid4(), self.conn)

    async def append(self, thread: Any, item: Any) -> None:
        await thread.aadd_messages([item])

    async def load(self, thread: Any, items: Sequence[Any]) -> None:
        for at in range(0, len(items), 100):
            await thread.aadd_messages(list(items[at : at + 100]))

    async def last_50(self, thread: Any) -> int:
        return len(await thread.aget_messages())

    async def cold_load(self, thread: Any) -> tuple[float, int]:
        conn = await self._connect()
        try:
            history = self._history(thread._session_id, conn)
            started = time.perf_counter()
            messages = await history.aget_messages()
            return time.perf_counter() - started, len(messages)
        finally:
            await conn.close()

    async def texts(self, thread: Any) -> list[str]:
        return [str(m.content) for m in await thread.aget_messages()]

    async def writer(self, thread: Any, mode: str) -> Writer:
        conn = await self._connect()
        history = self._history(thread._session_id, conn)

        class LangChainWriter(Writer):
            async def append(self, item: Any) -> None:
                await history.aadd_messages([item])

            async def close(self) -> None:
                await conn.close()

        return LangChainWriter()


def langchain_message(raw: dict[str, Any], index: int) -> Any:
    """A LangChain message: HumanMessage, AIMessage (with `tool_calls`) or ToolMessage."""
    messages = peer("langchain_core.messages")

    role, text = raw["role"], raw["content"]
    if role == "user":
        return messages.HumanMessage(content=text)
    if role == "tool":
        return messages.ToolMessage(content=text, tool_call_id=raw["tool_call_id"])
    call = _tool_call(raw)
    if call is None:
        return messages.AIMessage(content=text)
    return messages.AIMessage(
        content=text,
        tool_calls=[{"id": call["id"], "name": call["name"], "args": call["arguments"]}],
    )


# --- OpenAI Agents SDK --------------------------------------------------------------------


class OpenAIAgents(System):
    name = "openai-agents"
    packages = ("openai-agents", "sqlalchemy", "asyncpg")
    driver = "asyncpg through SQLAlchemy's async engine (the SDK's documented URL)"
    calls = {  # noqa: RUF012
        "append": "SQLAlchemySession.add_items(items): one message is 1 Responses input item "
        "(2 for an assistant turn with a tool call: its message + function_call); one "
        "transaction: SELECT the session row (+ FOR UPDATE, INSERT on first write), "
        "INSERT the items' JSON text, UPDATE the session's updated_at, COMMIT.",
        "last_50": "get_items(limit=50): SELECT ... ORDER BY created_at DESC, id DESC "
        "LIMIT 50 on an index (session_id, created_at), json.loads each; returns the "
        "last 50 items (an assistant turn with a tool call is 2 items, so slightly fewer "
        "than 50 messages).",
        "cold_load": "get_items() on a new engine + new SQLAlchemySession (pool connected "
        "before the clock): every item, json.loads'd: Responses input items, which the SDK "
        "passes to the Responses API as they are (no further conversion).",
        "concurrency": "8 tasks, each its own SQLAlchemySession object on one shared "
        "engine (pool), add_items one message per call. The session row is created by the "
        "writers' first add_items (the SDK has no create call), racing as it would.",
    }

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.engine: Any = None

    def _engine(self) -> Any:
        from sqlalchemy.ext.asyncio import create_async_engine

        return create_async_engine(driver_url(self.url, "asyncpg"), pool_size=10)

    async def open(self, url: str) -> None:
        memory = peer("agents.extensions.memory.sqlalchemy_session")

        self.url = url
        self.engine = self._engine()
        # create_tables=True once, as the SDK's setup; every session after without it.
        await memory.SQLAlchemySession("setup", engine=self.engine, create_tables=True).get_items()

    async def close(self) -> None:
        if self.engine is not None:
            await self.engine.dispose()

    def _session(self, session_id: str, engine: Any) -> Any:
        memory = peer("agents.extensions.memory.sqlalchemy_session")

        return memory.SQLAlchemySession(session_id, engine=engine)

    def native(self, raw: dict[str, Any], index: int) -> Any:
        return responses_items(raw, index)

    async def new_thread(self) -> Any:
        return self._session(f"s-{uuid.uuid4()}", self.engine)

    async def append(self, thread: Any, item: Any) -> None:
        await thread.add_items(item)

    async def load(self, thread: Any, items: Sequence[Any]) -> None:
        for at in range(0, len(items), 100):
            await thread.add_items([i for group in items[at : at + 100] for i in group])

    async def last_50(self, thread: Any) -> int:
        return len(await thread.get_items(limit=50))

    async def cold_load(self, thread: Any) -> tuple[float, int]:
        from sqlalchemy import text

        engine = self._engine()
        try:
            async with engine.connect() as conn:
                await conn.execute(text("SELECT 1"))
            session = self._session(thread.session_id, engine)
            started = time.perf_counter()
            items = await session.get_items()
            return time.perf_counter() - started, len(items)
        finally:
            await engine.dispose()

    async def texts(self, thread: Any) -> list[str]:
        out = []
        for item in await thread.get_items():
            if item.get("type") == "function_call":
                continue
            if item.get("type") == "function_call_output":
                out.append(item["output"])
            elif isinstance(item["content"], str):
                out.append(item["content"])
            else:
                out.append(item["content"][0]["text"])
        return out

    async def writer(self, thread: Any, mode: str) -> Writer:
        session = self._session(thread.session_id, self.engine)

        class AgentsWriter(Writer):
            async def append(self, item: Any) -> None:
                await session.add_items(item)

        return AgentsWriter()


def responses_items(raw: dict[str, Any], index: int) -> list[dict[str, Any]]:
    """One message as the Agents SDK stores it: Responses API input items."""
    role, text = raw["role"], raw["content"]
    if role == "user":
        return [{"role": "user", "content": text}]
    if role == "tool":
        return [{"type": "function_call_output", "call_id": raw["tool_call_id"], "output": text}]
    items: list[dict[str, Any]] = [
        {
            "type": "message",
            "role": "assistant",
            "id": f"msg_{index:07d}",
            "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }
    ]
    call = _tool_call(raw)
    if call is not None:
        items.append(
            {
                "type": "function_call",
                "id": f"fc_{index:07d}",
                "call_id": call["id"],
                "name": call["name"],
                "arguments": json.dumps(call["arguments"]),
                "status": "completed",
            }
        )
    return items


# --- Google ADK -----------------------------------------------------------------------------

APP, USER = "bench", "user-1"


class GoogleADK(System):
    name = "google-adk"
    packages = ("google-adk", "google-genai", "sqlalchemy", "asyncpg")
    driver = "asyncpg through SQLAlchemy's async engine (postgresql+asyncpg)"
    modes = {"no retry": False, "re-fetch + retry": True}  # noqa: RUF012
    calls = {  # noqa: RUF012
        "append": "DatabaseSessionService.append_event(session, event): an in-process "
        "asyncio lock per session, then one transaction: SELECT the session row FOR "
        "UPDATE, the app and user state rows, a stale-session check, UPDATE the session's "
        "update_time, INSERT the event (its whole model_dump as JSON), COMMIT.",
        "last_50": "get_session(config=GetSessionConfig(num_recent_events=50)): the "
        "session row, the last 50 events (ORDER BY timestamp DESC, id DESC LIMIT 50 on an "
        "index), app and user state, every event validated into a pydantic Event.",
        "cold_load": "get_session() on a new DatabaseSessionService (its prepare_tables "
        "and a first connection done before the clock): the Session with every Event; "
        "ADK builds the Gemini request from session.events at call time (that step is "
        "not timed).",
        "concurrency": "8 tasks, one shared service, each writer its own Session object "
        "from get_session, append_event one event per call. A writer whose Session is "
        "stale gets StaleSessionError ('the session has been modified in storage'); "
        "with retry it re-fetches the session (num_recent_events=0) and appends the "
        "same event again, without retry the event is not stored (the error is "
        "counted).",
    }

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.service: Any = None

    def _service(self) -> Any:
        sessions = peer("google.adk.sessions")

        return sessions.DatabaseSessionService(db_url=driver_url(self.url, "asyncpg"))

    async def open(self, url: str) -> None:
        self.url = url
        self.service = self._service()
        await self.service.prepare_tables()

    async def close(self) -> None:
        if self.service is not None:
            await self.service.close()

    def native(self, raw: dict[str, Any], index: int) -> Any:
        return adk_event(raw, index)

    async def new_thread(self) -> Any:
        return await self.service.create_session(app_name=APP, user_id=USER)

    async def append(self, thread: Any, item: Any) -> None:
        await self.service.append_event(thread, stamped(item))

    async def load(self, thread: Any, items: Sequence[Any]) -> None:
        # Untimed. append_event one event at a time would take minutes for
        # 15k events; these are the rows append_event writes (the
        # service's own StorageEvent.from_event), 1,000 per transaction, with
        # timestamps 10 µs apart (get_session orders by timestamp).
        schema = self.service._get_schema_classes()
        start = time.time()
        for at in range(0, len(items), 1000):
            async with self.service.database_session_factory() as sql:
                for offset, event in enumerate(items[at : at + 1000]):
                    event.timestamp = start + (at + offset) * 1e-5
                    sql.add(schema.StorageEvent.from_event(thread, event))
                await sql.commit()

    async def _get(self, service: Any, session_id: str, recent: int | None) -> Any:
        base = peer("google.adk.sessions.base_session_service")

        config = None if recent is None else base.GetSessionConfig(num_recent_events=recent)
        return await service.get_session(
            app_name=APP, user_id=USER, session_id=session_id, config=config
        )

    async def last_50(self, thread: Any) -> int:
        session = await self._get(self.service, thread.id, 50)
        return len(session.events)

    async def cold_load(self, thread: Any) -> tuple[float, int]:
        service = self._service()
        try:
            await service.prepare_tables()
            started = time.perf_counter()
            session = await self._get(service, thread.id, None)
            return time.perf_counter() - started, len(session.events)
        finally:
            await service.close()

    async def texts(self, thread: Any) -> list[str]:
        session = await self._get(self.service, thread.id, None)
        out = []
        for event in session.events:
            part = event.content.parts[0]
            out.append(
                part.text if part.text is not None else part.function_response.response["result"]
            )
        return out

    async def writer(self, thread: Any, mode: str) -> Writer:
        stale = peer("google.adk.errors").StaleSessionError

        system = self
        session = await self._get(self.service, thread.id, 0)

        class ADKWriter(Writer):
            def __init__(self) -> None:
                self.session = session

            async def append(self, item: Any) -> None:
                try:
                    await system.service.append_event(self.session, stamped(item))
                except stale as error:
                    # Without a retry the writer must still re-fetch to go on at all.
                    self.session = await system._get(system.service, thread.id, 0)
                    raise Conflict(str(error)) from error

        return ADKWriter()


def stamped(event: Any) -> Any:
    """`event` with its timestamp set now, as an ADK runner creates events
    just before appending them (get_session orders by timestamp)."""
    event.timestamp = time.time()
    return event


def adk_event(raw: dict[str, Any], index: int) -> Any:
    """One message as an ADK Event: Content with text, function_call and
    function_response parts; the model's turns authored by the agent."""
    event = peer("google.adk.events").Event
    types = peer("google.genai.types")

    role, text = raw["role"], raw["content"]
    turn = f"inv-{index // TOOL_EVERY:07d}"
    if role == "user":
        content = types.Content(role="user", parts=[types.Part(text=text)])
        return event(invocation_id=turn, author="user", content=content)
    if role == "tool":
        response = types.FunctionResponse(
            id=raw["tool_call_id"], name=_call_name(raw, index), response={"result": text}
        )
        content = types.Content(role="user", parts=[types.Part(function_response=response)])
        return event(invocation_id=turn, author="coder", content=content)
    parts = [types.Part(text=text)]
    call = _tool_call(raw)
    if call is not None:
        parts.append(
            types.Part(
                function_call=types.FunctionCall(
                    id=call["id"], name=call["name"], args=call["arguments"]
                )
            )
        )
    return event(
        invocation_id=turn, author="coder", content=types.Content(role="model", parts=parts)
    )


# --- LangGraph ----------------------------------------------------------------------------


class LangGraph(System):
    name = "langgraph"
    grows_with_history = True
    packages = ("langgraph", "langgraph-checkpoint-postgres", "langgraph-checkpoint", "psycopg")
    driver = "psycopg 3 (async) AsyncConnectionPool, as the checkpointer's docs set it up"
    has_last_n = False
    calls = {  # noqa: RUF012
        "append": "graph.ainvoke({'messages': [message]}, thread) on a one-node graph (the "
        "node returns no update) whose state is messages: Annotated[list, add_messages], "
        "with AsyncPostgresSaver: loads the latest checkpoint and its blobs, runs the "
        "reducer, writes new checkpoints (the input step and the node's step) and the "
        "messages channel's new blob: the WHOLE list, msgpack-serialised, every time.",
        "last_50": "graph.aget_state(thread): the latest checkpoint with the whole "
        "messages list deserialised; there is no 'last N' (the nearest equivalent).",
        "cold_load": "aget_state(thread) on a new pool + new saver + newly compiled graph "
        "(connected before the clock): the LangChain message list a model node hands its "
        "chat model (conversion to provider JSON not timed).",
        "concurrency": "8 tasks, one compiled graph and saver on a pool of 10 "
        "connections, ainvoke with one message per call on the same thread_id. "
        "LangGraph's OSS checkpointer has no cross-writer lock: each run reads the "
        "latest checkpoint and writes its own successor, so runs that read the same "
        "checkpoint fork: a message on a losing branch stays in the checkpoint tables but "
        "is not in the state aget_state returns (counted as lost silently).",
    }

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.pool: Any = None
        self.graph: Any = None

    async def _pool(self, size: int) -> Any:
        from psycopg.rows import dict_row
        from psycopg_pool import AsyncConnectionPool

        pool = AsyncConnectionPool(
            libpq_url(self.url),
            min_size=size,
            max_size=size,
            open=False,
            kwargs={
                "autocommit": True,
                "prepare_threshold": 0,
                "row_factory": dict_row,
            },
        )
        await pool.open(wait=True)
        return pool

    @staticmethod
    def _compile(pool: Any) -> Any:
        postgres = peer("langgraph.checkpoint.postgres.aio")
        graphs = peer("langgraph.graph")
        add_messages = peer("langgraph.graph.message").add_messages

        # Built at run time (not a class statement): the annotation must be a
        # real object for LangGraph to find the reducer, not a string.
        state = TypedDict("state", {"messages": Annotated[list[Any], add_messages]})  # noqa: UP013

        def record(state: Any) -> dict[str, Any]:
            return {}

        builder = graphs.StateGraph(state)
        builder.add_node("record", record)
        builder.add_edge(graphs.START, "record")
        saver = postgres.AsyncPostgresSaver(pool)
        return builder.compile(checkpointer=saver), saver

    async def open(self, url: str) -> None:
        self.url = url
        self.pool = await self._pool(10)
        self.graph, saver = self._compile(self.pool)
        await saver.setup()

    async def close(self) -> None:
        if self.pool is not None:
            await self.pool.close()

    def native(self, raw: dict[str, Any], index: int) -> Any:
        return langchain_message(raw, index)

    async def new_thread(self) -> Any:
        return {"configurable": {"thread_id": str(uuid.uuid4())}}

    async def append(self, thread: Any, item: Any) -> None:
        await self.graph.ainvoke({"messages": [item]}, thread)

    async def load(self, thread: Any, items: Sequence[Any]) -> None:
        # One run: one checkpoint with the whole list (loading is not timed).
        await self.graph.ainvoke({"messages": list(items)}, thread)

    async def last_50(self, thread: Any) -> int:
        state = await self.graph.aget_state(thread)
        return len(state.values["messages"])

    async def cold_load(self, thread: Any) -> tuple[float, int]:
        pool = await self._pool(1)
        try:
            graph, _ = self._compile(pool)
            started = time.perf_counter()
            state = await graph.aget_state(thread)
            return time.perf_counter() - started, len(state.values["messages"])
        finally:
            await pool.close()

    async def texts(self, thread: Any) -> list[str]:
        state = await self.graph.aget_state(thread)
        return [str(m.content) for m in state.values.get("messages", [])]

    async def writer(self, thread: Any, mode: str) -> Writer:
        graph = self.graph

        class GraphWriter(Writer):
            async def append(self, item: Any) -> None:
                await graph.ainvoke({"messages": [item]}, thread)

        return GraphWriter()


SYSTEMS: tuple[type[System], ...] = (
    ConvoStore,
    LangChainPostgres,
    OpenAIAgents,
    GoogleADK,
    LangGraph,
)
