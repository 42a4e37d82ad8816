"""Rows of the projection tables turned into the API's values."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from sqlalchemy import Select, select

from store.messages import StoredMessage
from store.projections.tables import messages
from store.window import WindowEntry

MESSAGE_COLUMNS = (
    messages.c.seq,
    messages.c.batch,
    messages.c.role_ordinal,
    messages.c.body,
    messages.c.recorded_at,
    messages.c.edited_at,
)


def select_messages() -> Select[Any]:
    return select(*MESSAGE_COLUMNS)


def stored_message(row: Any) -> StoredMessage:
    return StoredMessage.model_validate(
        {
            **row.body,
            "seq": row.seq,
            "batch": row.batch,
            "role_ordinal": row.role_ordinal,
            "recorded_at": row.recorded_at,
            "edited": row.edited_at is not None,
        }
    )


WINDOW_COLUMNS = (
    messages.c.seq,
    messages.c.sort_key,
    messages.c.role,
    messages.c.agent_id,
    messages.c.text,
    messages.c.tool_call_id,
    messages.c.body["tool_calls"].label("tool_calls"),
)


def window_entry(row: Any) -> WindowEntry:
    return WindowEntry(
        seq=row.seq,
        sort_key=Decimal(row.sort_key),
        role=row.role,
        agent_id=row.agent_id,
        text=row.text,
        call_ids=tuple(c["id"] for c in row.tool_calls or ()),
        answers=row.tool_call_id,
    )
