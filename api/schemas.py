"""HTTP request and response bodies.

These are the API's own models, separate from the tables: requests are
validated here (unknown fields are refused), then handed to the repository.
Where the store's frozen value types are plain data (`Message`,
`StoredMessage`, `Conversation`, `Appended`, `BatchResult`, `Batch`,
`ToolBlock`, `AgentProfile`, `ContextSlots`, `Diagnostics`, the batch
operations) they are reused as they are, so the HTTP shape of a message is
exactly the store's JSON.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from store import operations
from store.assembler import Diagnostics, ProviderFormat
from store.context import AgentProfile, ContextSlots, TodoItem
from store.messages import MAIN_AGENT, Content, Message
from store.records import ExpectedVersion, StreamState

ExpectedVersionField = Annotated[
    int | None,
    Field(
        ge=0,
        description="The conversation version this write expects; omitted or null: any. "
        "A stale value is refused with 409 and nothing is written.",
    ),
]


def expected_version(value: int | None) -> ExpectedVersion:
    """The store's expectation for an HTTP `expected_version` (null: any)."""
    return StreamState.ANY if value is None else value


class _Body(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# --- conversations --------------------------------------------------------


class ConversationCreate(_Body):
    id: uuid.UUID | None = Field(default=None, description="Chosen by the client; else random.")
    metadata: dict[str, Any] = Field(default_factory=dict)


# --- messages and agents --------------------------------------------------


class MessagesAppend(_Body):
    messages: list[Message] = Field(description="Appended in order, all or nothing.")
    expected_version: ExpectedVersionField = None


class ContentReplace(_Body):
    content: Content
    expected_version: ExpectedVersionField = None


class AgentConfigure(_Body):
    is_sub_agent: bool | None = Field(
        default=None, description="Default: every agent but `main` is a sub-agent."
    )
    system_prompt: str | None = None
    role_definition: str | None = None
    expected_version: ExpectedVersionField = None


class SlotUpdate(_Body):
    value: str | list[TodoItem] | None = Field(
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
    agent_id: str = MAIN_AGENT
    format: ProviderFormat = ProviderFormat.OPENAI_CHAT
    options: dict[str, Any] = Field(
        default_factory=dict,
        description="The assembler's options (policy, n, repair, merge_same_role, "
        "token_budget, reminder_style, cache_breakpoints, xml_final_instruction); "
        "unknown names are refused.",
    )


class Assembled(BaseModel):
    model_config = ConfigDict(frozen=True)

    payload: dict[str, Any] = Field(description="The request body for the provider's SDK.")
    diagnostics: Diagnostics
