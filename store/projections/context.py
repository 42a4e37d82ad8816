"""Agent profiles and context slots: the latest value of each."""

from __future__ import annotations

import uuid

from sqlalchemy import delete
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncConnection

from store.context import ROLE_DEFINITION
from store.events import AgentConfigured, ContextSlotUpdated
from store.messages import MAIN_AGENT
from store.projections.tables import agent_profiles, context_slots


async def configure(
    conn: AsyncConnection, conversation_id: uuid.UUID, event: AgentConfigured, *, version: int
) -> None:
    profile = event.profile
    values = {
        "is_sub_agent": profile.is_sub_agent,
        "system_prompt": profile.system_prompt,
        "role_definition": profile.role_definition,
        "event_version": version,
    }
    await conn.execute(
        insert(agent_profiles)
        .values(conversation_id=conversation_id, agent_id=profile.agent_id, **values)
        .on_conflict_do_update(constraint="pk_agent_profiles", set_=values)
    )


async def update_slot(
    conn: AsyncConnection, conversation_id: uuid.UUID, event: ContextSlotUpdated, *, version: int
) -> None:
    if event.slot == ROLE_DEFINITION:
        # The role definition is part of the agent's profile; a slot update
        # of it is the same fact as configuring it.
        await conn.execute(
            insert(agent_profiles)
            .values(
                conversation_id=conversation_id,
                agent_id=event.agent_id,
                is_sub_agent=event.agent_id != MAIN_AGENT,
                role_definition=event.text,
                event_version=version,
            )
            .on_conflict_do_update(
                constraint="pk_agent_profiles",
                set_={"role_definition": event.text, "event_version": version},
            )
        )
        return
    key = (
        context_slots.c.conversation_id == conversation_id,
        context_slots.c.agent_id == event.agent_id,
        context_slots.c.slot == event.slot,
    )
    value: object = (
        [item.model_dump(mode="json") for item in event.todo]
        if event.todo is not None
        else event.text
    )
    if value is None:
        await conn.execute(delete(context_slots).where(*key))
        return
    await conn.execute(
        insert(context_slots)
        .values(
            conversation_id=conversation_id,
            agent_id=event.agent_id,
            slot=event.slot,
            value=value,
            event_version=version,
        )
        .on_conflict_do_update(
            constraint="pk_context_slots", set_={"value": value, "event_version": version}
        )
    )
