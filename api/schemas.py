"""HTTP request and response bodies.

These are the API's own models, separate from the tables: requests are
validated here (unknown fields are refused), then handed to the repository.
Every field, path and query parameter and header has a type, a range and a
size limit (`store.inputs`); integers are strict (no `"1"`, no `true`).
Where the store's frozen value types are plain data (`Message`,
`StoredMessage`, `Conversation`, `Appended`, `BatchResult`, `Batch`,
`ToolBlock`, `AgentProfile`, `ContextSlots`, `Diagnostics`, the batch
operations) they are reused as they are, so the HTTP shape of a message is
exactly the store's JSON.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import Header, Path, Query
from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, field_validator

from store import operations
from store.assembler import Diagnostics, ProviderFormat
from store.context import AgentProfile, ContextSlots, TodoItem
from store.inputs import (
    MAX_BIGINT,
    MAX_INTEGER,
    MAX_METADATA_CHARS,
    MAX_TODO_ITEMS,
    AgentId,
    BoundedText,
    Metadata,
    SlotName,
    Version,
    at_most,
    idempotency_key_problem,
    json_object,
    rule,
)
from store.messages import MAIN_AGENT, Content, Message
from store.records import ExpectedVersion, StreamState
from store.repository import MAX_READ_LIMIT
from store.validation import MAX_MESSAGES_PER_APPEND

ExpectedVersionField = Annotated[
    Version | None,
    Field(
        description="The conversation version this write expects; omitted or null: any. "
        "A stale value is refused with 409 and nothing is written.",
    ),
]

# --- path, query and header parameters ------------------------------------------

AgentIdPath = Annotated[AgentId, Path(description="`main` or a sub-agent's id.")]
SlotPath = Annotated[SlotName, Path(description="A built-in or custom slot name.")]
SeqPath = Annotated[int, Path(ge=1, le=MAX_BIGINT, description="The message's seq.")]
BatchPath = Annotated[int, Path(ge=1, le=MAX_INTEGER, description="A batch number.")]
BatchQuery = Annotated[
    int | None, Query(ge=1, le=MAX_INTEGER, description="A past batch; default: current")
]
AgentQuery = Annotated[AgentId | None, Query(description="Only this agent's messages.")]
CountQuery = Annotated[int, Query(ge=0, le=MAX_READ_LIMIT)]
OrdinalQuery = Annotated[int, Query(ge=1, le=MAX_BIGINT)]
IdempotencyKeyHeader = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        description="A retry with the same key and body returns the original result "
        "(1–200 visible ASCII characters).",
    ),
    rule("idempotency_key", idempotency_key_problem),
]


def expected_version(value: int | None) -> ExpectedVersion:
    """The store's expectation for an HTTP `expected_version` (null: any)."""
    return StreamState.ANY if value is None else value


class _Body(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# --- conversations --------------------------------------------------------


class ConversationCreate(_Body):
    id: uuid.UUID | None = Field(default=None, description="Chosen by the client; else random.")
    metadata: Metadata = Field(default_factory=dict)


# --- messages and agents --------------------------------------------------


class MessagesAppend(_Body):
    messages: list[Message] = Field(
        description="Appended in order, all or nothing; at most "
        "CONVO_MAX_MESSAGES_PER_APPEND (default 1000).",
        json_schema_extra={"maxItems": MAX_MESSAGES_PER_APPEND},
    )
    expected_version: ExpectedVersionField = None

    @field_validator("messages", mode="before")
    @classmethod
    def _not_too_many(cls, value: Any) -> Any:
        # Before a single message is parsed: the configured limit
        # (`Limits.max_messages_per_append`) is checked by the store.
        if isinstance(value, list) and len(value) > MAX_MESSAGES_PER_APPEND:
            raise ValueError(
                f"{len(value)} messages in one append, over the limit of {MAX_MESSAGES_PER_APPEND}"
            )
        return value


class ContentReplace(_Body):
    content: Content
    expected_version: ExpectedVersionField = None


class AgentConfigure(_Body):
    is_sub_agent: bool | None = Field(
        default=None, strict=True, description="Default: every agent but `main` is a sub-agent."
    )
    system_prompt: BoundedText | None = None
    role_definition: BoundedText | None = None
    expected_version: ExpectedVersionField = None


def _slot_kind(value: Any) -> str:
    return "text" if isinstance(value, str) else "items"


SlotValue = Annotated[
    Annotated[BoundedText, Tag("text")]
    | Annotated[list[TodoItem], at_most(MAX_TODO_ITEMS, "items"), Tag("items")],
    Discriminator(_slot_kind),
]


class SlotUpdate(_Body):
    value: SlotValue | None = Field(
        description="Text, TODO items (the `todo` slot), or null to clear the slot."
    )
    expected_version: ExpectedVersionField = None


class Written(BaseModel):
    """A write that returns only the conversation's new version."""

    model_config = ConfigDict(frozen=True)

    conversation_id: uuid.UUID
    version: int


class Agent(BaseModel):
    model_config = ConfigDict(frozen=True)

    profile: AgentProfile
    slots: ContextSlots


# --- batch operations -----------------------------------------------------------------
#
# The body of `POST /conversations/{id}/batches` is the store's operation value
# (`store.operations`) with the write's `expected_version` next to its fields:
# one subclass per operation adds that field and nothing else, so the JSON is
# {"operation": ..., <the operation's fields>, "expected_version": ...}.


class _Expecting(_Body):
    expected_version: ExpectedVersionField = None

    def command(self) -> operations.BatchOperation:
        """The store's value this body asks to run (without `expected_version`)."""
        fields = {name: getattr(self, name) for name in type(self).model_fields}
        del fields["expected_version"]
        return operations.BATCH_OPERATION.validate_python(fields)


class StartBatchRequest(_Expecting, operations.StartBatch):
    __doc__ = operations.StartBatch.__doc__


class TruncateRequest(_Expecting, operations.Truncate):
    __doc__ = operations.Truncate.__doc__


class FilterRequest(_Expecting, operations.Filter):
    __doc__ = operations.Filter.__doc__


class ClearRequest(_Expecting, operations.Clear):
    __doc__ = operations.Clear.__doc__


class InsertRequest(_Expecting, operations.Insert):
    __doc__ = operations.Insert.__doc__


class RollbackToBatchRequest(_Expecting, operations.RollbackToBatch):
    __doc__ = operations.RollbackToBatch.__doc__


BatchOperationRequest = Annotated[
    StartBatchRequest
    | TruncateRequest
    | FilterRequest
    | ClearRequest
    | InsertRequest
    | RollbackToBatchRequest,
    Field(discriminator="operation"),
]


# --- assembly -------------------------------------------------------------


class AssembleRequest(_Body):
    agent_id: AgentId = MAIN_AGENT
    format: ProviderFormat = ProviderFormat.OPENAI_CHAT
    options: Annotated[dict[str, Any], json_object(MAX_METADATA_CHARS, "options")] = Field(
        default_factory=dict,
        description="The assembler's options (policy, n, repair, merge_same_role, "
        "token_budget, reminder_style, cache_breakpoints, xml_final_instruction); "
        "unknown names are refused.",
    )


class Assembled(BaseModel):
    model_config = ConfigDict(frozen=True)

    payload: dict[str, Any] = Field(description="The request body for the provider's SDK.")
    diagnostics: Diagnostics
