"""Contract fixtures: every test under tests/contract runs twice, against
the in-memory fake (`memory`) and against PostgreSQL (`postgres`), through
one `repository` fixture.

The PostgreSQL side is asked for lazily, so `-k memory` runs need no
server. It uses one migrated database for the whole contract run, cloned
from the session's template, rather than tests/conftest.py's per-test
`engine`: every contract test works on conversations of its own (fresh
uuid4 ids, or a tenant of its own), which is exactly the isolation the
repository promises, and a clone per test would cost more than the test.

Also here: small message builders the contract modules share, and
`Snapshot`, the observable state a refused write must leave unchanged.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import psycopg
import pytest
import pytest_asyncio
from sqlalchemy import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from hosting.engines import make_async_engine
from hosting.settings import Settings, libpq_url
from store.domain.commands import Limits
from store.domain.context import ContextSlots
from store.domain.conversation_keys import ConversationRef
from store.domain.messages import Message, Role, StoredMessage, ToolCall
from store.memory import InMemoryRepository
from store.postgres import PostgresStorage
from store.postgres.schema import DEFAULT_TENANT
from store.repository import Batch, Conversation, Repository, ToolBlock


class RepositoryFactory(Protocol):
    """A repository of `tenant` on the backend under test, sharing its storage."""

    def __call__(
        self, *, tenant: str = DEFAULT_TENANT, limits: Limits | None = None
    ) -> Repository: ...


@pytest.fixture(scope="session")
def contract_database_url(database_server: str, template_database: str) -> Iterator[str]:
    name = f"convo_contract_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(libpq_url(database_server), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template_database}"')
    yield make_url(database_server).set(database=name).render_as_string(hide_password=False)
    with psycopg.connect(libpq_url(database_server), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest_asyncio.fixture(scope="session")
async def contract_storage(
    contract_database_url: str, settings: Settings
) -> AsyncIterator[PostgresStorage]:
    storage = await PostgresStorage.connect(
        contract_database_url, options=settings.connection_options(), max_size=20
    )
    yield storage
    await storage.close()


@pytest_asyncio.fixture(scope="session")
async def contract_engine(
    contract_database_url: str, settings: Settings
) -> AsyncIterator[AsyncEngine]:
    """For the tests that look at the tables themselves."""
    engine = make_async_engine(contract_database_url, settings, pool_size=5, max_overflow=5)
    yield engine
    await engine.dispose()


@pytest.fixture
def make_repository(backend: str, request: pytest.FixtureRequest) -> RepositoryFactory:
    if backend == "memory":
        shared = InMemoryRepository()

        def memory(*, tenant: str = DEFAULT_TENANT, limits: Limits | None = None) -> Repository:
            return shared.for_tenant(tenant, limits=limits or Limits())

        return memory

    storage: PostgresStorage = request.getfixturevalue("contract_storage")

    def postgres(*, tenant: str = DEFAULT_TENANT, limits: Limits | None = None) -> Repository:
        return Repository(storage, tenant=tenant, limits=limits)

    return postgres


@pytest.fixture
def repository(make_repository: RepositoryFactory) -> Repository:
    return make_repository()


@pytest.fixture
async def conversation_id(repository: Repository) -> str:
    return (await repository.create_conversation()).id


# --- message builders -------------------------------------------------------------


def system(text: str, **extra: Any) -> Message:
    return Message(role="system", content=text, **extra)


def user(text: str, **extra: Any) -> Message:
    return Message(role="user", content=text, **extra)


def assistant(text: str = "", *calls: ToolCall, **extra: Any) -> Message:
    return Message(role="assistant", content=text, tool_calls=calls, **extra)


def call(call_id: str, name: str = "search", **arguments: Any) -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=arguments)


def tool(call_id: str, text: str = "result", **extra: Any) -> Message:
    return Message(role="tool", content=text, tool_call_id=call_id, **extra)


def seqs(messages: list[StoredMessage] | tuple[StoredMessage, ...]) -> list[int]:
    return [m.seq for m in messages]


def assert_blocks_complete(window: Sequence[StoredMessage]) -> None:
    """Every tool result in the window follows its call, which is in it too."""
    calls: set[str] = set()
    for m in window:
        calls.update(c.id for c in m.tool_calls)
        if m.tool_call_id is not None:
            assert m.tool_call_id in calls, f"result {m.seq} without its call"


def roles(messages: list[StoredMessage] | tuple[StoredMessage, ...]) -> list[Role]:
    return [m.role for m in messages]


async def append_texts(
    repository: Repository, conversation_id: ConversationRef, *pattern: str
) -> list[StoredMessage]:
    """Append plain messages by role letter: "U", "A", "S" (text = letter + seq)."""
    role_of: dict[str, Role] = {"U": "user", "A": "assistant", "S": "system"}
    start = (await repository.get_conversation(conversation_id)).next_seq
    batch = [
        Message(role=role_of[letter], content=f"{letter}{start + i}")
        for i, letter in enumerate(pattern)
    ]
    return list((await repository.append_messages(conversation_id, batch)).messages)


@dataclass(frozen=True, kw_only=True)
class Snapshot:
    """What a reader can see of a conversation: a refused write must leave
    all of it exactly as it was."""

    conversation: Conversation
    window: list[StoredMessage]
    history: dict[Role, int]
    batches: list[Batch]
    tool_blocks: list[ToolBlock]
    slots: ContextSlots

    @classmethod
    async def take(cls, repository: Repository, conversation_id: ConversationRef) -> Snapshot:
        return cls(
            conversation=await repository.get_conversation(conversation_id),
            window=await repository.visible_window(conversation_id),
            history=await repository.count_by_role(conversation_id, scope="history"),
            batches=await repository.batches(conversation_id),
            tool_blocks=await repository.tool_blocks(conversation_id),
            slots=await repository.context_slots(conversation_id),
        )
