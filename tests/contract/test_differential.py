"""Contract, differentially: the same seeded random script of operations
(valid and invalid ones) runs on the fake and on PostgreSQL, and after
every step everything a reader can observe must be equal — results,
errors (type and message), every batch's window, tool blocks, counts,
slots, profiles. It finds the differences no hand-written case thought of.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from pydantic import BaseModel

from store.domain.context import AgentProfile, TodoItem
from store.domain.errors import ConvoStoreError
from store.domain.messages import ROLES, Message, Role
from store.memory import InMemoryRepository
from store.postgres import PostgresStorage
from store.repository import Repository
from tests.contract.conftest import assistant, call, system, tool, user

pytestmark = pytest.mark.integration

STEPS = 50
WORDS = ("alpha", "beta", "gamma", "delta")
Operation = Callable[[Repository], Awaitable[Any]]


class Script:
    """Random operations, steered by what the fake shows now so that most
    of them are valid and the rest fail in interesting ways."""

    def __init__(self, rng: random.Random, conversation_id: str) -> None:
        self.rng = rng
        self.cid = conversation_id
        self.calls = 0

    def text(self) -> str:
        return " ".join(self.rng.choices(WORDS, k=2))

    def message(self, calls: list[str]) -> Message:
        rng = self.rng
        agent = rng.choice(["main", "main", "helper"])
        kind = rng.randrange(6)
        if kind == 0 and calls:
            return tool(rng.choice(calls), self.text(), agent_id=agent)
        if kind == 1:
            self.calls += 1
            return assistant("", call(f"c{self.calls}", "search"), agent_id=agent)
        if kind == 2:
            return system(self.text(), kind="reminder")
        role: Role = rng.choice(["user", "assistant"])
        return Message(role=role, content=self.text(), agent_id=agent)

    async def next(self, fake: Repository) -> tuple[str, Operation]:
        rng, cid = self.rng, self.cid
        head = await fake.get_conversation(cid)
        window = [m.seq for m in await fake.visible_window(cid)]
        calls = [b.call_id for b in await fake.tool_blocks(cid)]
        adjust = rng.random() < 0.5
        choice = rng.randrange(11)
        if choice <= 2:
            batch = [self.message(calls) for _ in range(rng.randint(1, 3))]
            return "append", lambda r: r.append_messages(cid, batch)
        if choice == 3:
            boundary = rng.randint(0, head.next_seq + 1)
            retain = rng.sample(window, k=min(len(window), rng.randint(0, 2)))
            summary = user("summary " + self.text()) if rng.random() < 0.5 else None
            return "start_batch", lambda r: r.start_batch(
                cid, boundary, summary=summary, retain=retain, adjust=adjust
            )
        if choice == 4:
            name = rng.choice(["keep_first", "keep_last", "remove_first", "remove_last"])
            count = rng.randint(0, len(window) + 1)
            role: Role | None = rng.choice([None, *ROLES])
            return "truncate", lambda r: r.truncate(cid, **{name: count}, role=role, adjust=adjust)
        if choice == 5:
            roles: list[Role] = rng.sample(list(ROLES), k=rng.randint(1, 4))
            excluded = [rng.choice(WORDS)]
            return "filter", lambda r: r.filter(
                cid, roles=roles, content_excludes=excluded, adjust=adjust
            )
        if choice == 6:
            keep_system = rng.random() < 0.7
            return "clear", lambda r: r.clear(cid, keep_system=keep_system, adjust=adjust)
        if choice == 7:
            position = rng.randint(0, len(window) + 1)
            inserted = [user(self.text()), assistant(self.text())][: rng.randint(1, 2)]
            return "insert", lambda r: r.insert(cid, position, inserted)
        if choice == 8:
            seq = rng.randint(1, head.next_seq)
            content = rng.choice([self.text(), "alpha alpha", " "])
            return "replace", lambda r: r.replace(cid, seq, content)
        if choice == 9:
            batch_number = rng.randint(0, head.current_batch + 1)
            return "rollback", lambda r: r.rollback_to_batch(cid, batch_number)
        return self.context_operation()

    def context_operation(self) -> tuple[str, Operation]:
        rng, cid = self.rng, self.cid
        agent = rng.choice(["main", "helper"])
        if rng.random() < 0.2:
            profile = AgentProfile(
                agent_id=agent, is_sub_agent=agent != "main", system_prompt=self.text()
            )
            return "configure_agent", lambda r: r.configure_agent(cid, profile)
        slot = rng.choice(["todo", "useful_info", "role_definition", "zeta", "alpha"])
        value: str | list[TodoItem] | None = None
        if rng.random() < 0.8:
            value = (
                [TodoItem(id=str(i), content=self.text()) for i in range(rng.randint(0, 2))]
                if slot == "todo"
                else self.text()
            )
        return "update_slot", lambda r: r.update_slot(cid, slot, value, agent_id=agent)


def _comparable(value: Any) -> Any:
    """Values with their wall-clock timestamps removed (each backend has its own)."""
    if isinstance(value, BaseModel):
        data = value.model_dump()
        return {
            k: _comparable(v)
            for k, v in data.items()
            if k not in {"recorded_at", "started_at", "updated_at"}
        }
    if isinstance(value, dict):
        return {
            k: _comparable(v)
            for k, v in value.items()
            if k not in {"recorded_at", "started_at", "updated_at"}
        }
    if isinstance(value, list | tuple):
        return [_comparable(v) for v in value]
    return value


async def _outcome(operation: Operation, repository: Repository) -> Any:
    try:
        return ("ok", _comparable(await operation(repository)))
    except ConvoStoreError as error:
        return ("error", type(error).__name__, str(error))


async def _observe(
    repository: Repository, cid: str, *, every_batch: bool = False
) -> dict[str, Any]:
    conversation = await repository.get_conversation(cid)
    seen: dict[str, Any] = {
        "conversation": conversation,
        "batches": await repository.batches(cid),
        "tool_blocks": await repository.tool_blocks(cid),
        "visible counts": await repository.count_by_role(cid),
        "history counts": await repository.count_by_role(cid, scope="history"),
    }
    if every_batch:
        for number in range(1, conversation.current_batch + 1):
            seen[f"batch {number}"] = await repository.visible_window(cid, batch=number)
            seen[f"appended in {number}"] = await repository.batch_messages(cid, number)
    else:
        seen["window"] = await repository.visible_window(cid)
    for agent in ("main", "helper"):
        seen[f"{agent} window"] = await repository.visible_window(cid, agent_id=agent)
        seen[f"{agent} slots"] = await repository.context_slots(cid, agent)
        seen[f"{agent} profile"] = await repository.agent_profile(cid, agent)
        seen[f"{agent} pending"] = await repository.tool_blocks(
            cid, pending_only=True, agent_id=agent
        )
    for role in ROLES:
        seen[f"recent {role}"] = await repository.recent_by_role(cid, role, 2)
        seen[f"recent {role} history"] = await repository.recent_by_role(
            cid, role, 3, scope="history", agent_id="main"
        )
        seen[f"{role} 2..4"] = await repository.role_range(cid, role, 2, 4)
    return {k: _comparable(v) for k, v in seen.items()}


@pytest.mark.parametrize("seed", [1, 2])
async def test_fake_and_postgres_agree_step_by_step(
    seed: int, contract_storage: PostgresStorage
) -> None:
    fake = InMemoryRepository()
    postgres = Repository(contract_storage)
    cid = str(uuid.uuid4())
    await fake.create_conversation(cid)
    await postgres.create_conversation(cid)
    script = Script(random.Random(seed), cid)
    outcomes: set[str] = set()

    for step in range(STEPS):
        name, operation = await script.next(fake)
        on_fake = await _outcome(operation, fake)
        on_postgres = await _outcome(operation, postgres)
        assert on_fake == on_postgres, f"step {step}: {name}"
        assert await _observe(fake, cid) == await _observe(postgres, cid), f"step {step}: {name}"
        outcomes.add(f"{name} {on_fake[0]}")

    # Older batches never change after the fact, so they are compared once.
    assert await _observe(fake, cid, every_batch=True) == await _observe(
        postgres, cid, every_batch=True
    )
    # The script exercised the commonest operations, and refusals.
    assert {"append ok", "start_batch ok", "truncate ok"} <= outcomes
    assert any(o.endswith(" error") for o in outcomes)
