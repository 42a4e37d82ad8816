"""HTTP request and response bodies.

These are the API's own models, separate from the tables: requests are
validated here (unknown fields are refused), then handed to the repository.
Every field, path and query parameter and header has a type, a range and a
size limit (`store.domain.inputs`); integers are strict (no `"1"`, no `true`).
Where the store's frozen value types are plain data (`Message`,
`StoredMessage`, `Conversation`, `Appended`, `BatchResult`, `Batch`,
`ToolBlock`, `AgentProfile`, `ContextSlots`, `Diagnostics`, the batch
operations) they are reused as they are, so the HTTP shape of a message is
exactly the store's JSON.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import Header, Path, Query
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    field_validator,
)

from store.assembler import Diagnostics, ProviderFormat
from store.domain import operations
from store.domain.context import AgentProfile, ContextSlots, TodoItem
from store.domain.conversation_keys import MAX_KEY_LENGTH, key_problem
from store.domain.inputs import (
    MAX_BIGINT,
    MAX_ID_CHARS,
    MAX_INTEGER,
    MAX_METADATA_CHARS,
    MAX_TODO_ITEMS,
    AgentId,
    BoundedText,
    Metadata,
    SlotName,
    Version,
    at_most,
    documented,
    idempotency_key_problem,
    json_limits,
    json_object,
    rule,
)
from store.domain.messages import MAIN_AGENT, Content, Message
from store.domain.records import ExpectedVersion, StreamState
from store.domain.validation import MAX_MESSAGES_PER_APPEND
from store.repository import MAX_READ_LIMIT

ExpectedVersionField = Annotated[
    Version | None,
    Field(
        description="The conversation version this write expects; omitted or null: any. "
        "A stale value is refused with 409 and nothing is written.",
    ),
]

# --- path, query and header parameters ------------------------------------------

ConversationIdPath = Annotated[
    str,
    # `/` in an id travels as %2F (api.middleware.ESCAPED_SLASH).
    AfterValidator(lambda value: value.replace("\x00", "/")),
    Path(
        min_length=1,
        max_length=200,
        description="The conversation's id: the string its creator chose (1-200 printable"
        " characters), or the UUID generated when none was given. Unique per tenant.",
        examples=["user-123"],
    ),
]


def _checked_key(value: str) -> str:
    problem = key_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


ConversationKey = Annotated[
    str, Field(min_length=1, max_length=MAX_KEY_LENGTH), AfterValidator(_checked_key)
]

AgentIdPath = Annotated[AgentId, Path(description="`main` or a sub-agent's id.")]
SlotPath = Annotated[SlotName, Path(description="A built-in or custom slot name.")]
SeqPath = Annotated[int, Path(ge=1, le=MAX_BIGINT, description="The message's seq.")]
BatchPath = Annotated[int, Path(ge=1, le=MAX_INTEGER, description="A batch number.")]
BatchQuery = Annotated[
    int | None, Query(ge=1, le=MAX_INTEGER, description="A past batch; default: current")
]
AgentQuery = Annotated[AgentId | None, Query(description="Only this agent's messages.")]
CountQuery = Annotated[
    int, Query(ge=0, le=MAX_READ_LIMIT, description=f"How many (0..{MAX_READ_LIMIT}).")
]
OrdinalQuery = Annotated[int, Query(ge=1, le=MAX_BIGINT)]
IdempotencyKeyHeader = Annotated[
    Annotated[str, documented(minLength=1, maxLength=MAX_ID_CHARS, pattern="^[!-~]+$")] | None,
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
    model_config = ConfigDict(
        json_schema_extra={"examples": [{"metadata": {"project": "billing", "user": "u-42"}}]}
    )

    id: ConversationKey | None = Field(
        default=None,
        description="The id to address it by, unique per tenant: 1-200 printable characters,"
        " e.g. a framework's session id. Omitted: a new UUID.",
        examples=["user-123"],
    )
    metadata: Metadata = Field(default_factory=dict)


class ConversationUpdate(_Body):
    """A change to the conversation's metadata, recorded as an event."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"metadata": {"status": "resolved", "draft": None}, "expected_version": 7}]
        }
    )

    metadata: Metadata = Field(
        description="mode=merge: a JSON merge patch (RFC 7396): each key is set, an object"
        " merges into the one there, null removes the key. mode=replace: the new metadata"
        " whole (null values dropped). At most 65,536 characters of JSON, before and after."
    )
    mode: Literal["merge", "replace"] = Field(
        default="merge", description="merge (default) or replace the metadata."
    )
    expected_version: ExpectedVersionField = None


# --- messages and agents --------------------------------------------------


class MessagesAppend(_Body):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "messages": [
                        {"role": "user", "content": "What is in the repo?", "kind": "input"},
                        {"role": "assistant", "content": "Let me look."},
                    ],
                    "expected_version": 3,
                }
            ]
        }
    )

    messages: list[Message] = Field(
        description="Appended in order, all or nothing; at most "
        "CONVO_MAX_MESSAGES_PER_APPEND (default 1000). An assistant message may "
        "carry `reasoning_content` (text, as OpenAI-compatible Chat endpoints "
        "return it): it is stored as reasoning of provider `openai-chat`.",
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
    model_config = ConfigDict(
        json_schema_extra={"examples": [{"content": "corrected text", "expected_version": 5}]}
    )

    content: Content
    expected_version: ExpectedVersionField = None


class AgentConfigure(_Body):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "is_sub_agent": True,
                    "role_definition": "You review diffs and report risky changes.",
                }
            ]
        }
    )

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
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"value": "The tests live in tests/; run them with make test."},
                {"value": [{"id": "1", "content": "write the parser", "status": "pending"}]},
            ]
        }
    )

    value: SlotValue | None = Field(
        description="Text, TODO items (the `todo` slot), or null to clear the slot."
    )
    expected_version: ExpectedVersionField = None


class Written(BaseModel):
    """A write that returns only the conversation's new version."""

    model_config = ConfigDict(frozen=True)

    conversation_id: str
    version: int


class Agent(BaseModel):
    model_config = ConfigDict(frozen=True)

    profile: AgentProfile
    slots: ContextSlots


# --- pins and forks -------------------------------------------------------------------


ExpectedVersionQuery = Annotated[
    int | None,
    Query(
        ge=0,
        le=MAX_BIGINT,
        description="The conversation version this write expects; omitted: any. A stale "
        "value is refused with 409 and nothing is written.",
    ),
]


class ForkRequest(_Body):
    """What to fork: the parent's messages up to `up_to_seq`, of `agent_id`."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"new_conversation_id": "user-123-retry", "up_to_seq": 40},
                {"up_to_seq": 12, "agent_id": "searcher", "metadata": {"why": "replay"}},
            ]
        }
    )

    new_conversation_id: ConversationKey | None = Field(
        default=None, description="The fork's id, unique per tenant; omitted: a new UUID."
    )
    up_to_seq: Annotated[int, Field(strict=True, ge=1, le=MAX_BIGINT)] | None = Field(
        default=None,
        description="The last message the fork copies; omitted: the parent's last message.",
    )
    agent_id: AgentId | None = Field(
        default=None, description="Copy only this agent's messages (and its profile and slots)."
    )
    metadata: Metadata = Field(default_factory=dict)


# --- batch operations -----------------------------------------------------------------
#
# The body of `POST /conversations/{id}/batches` is the store's operation value
# (`store.domain.operations`) with the write's `expected_version` next to its fields:
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
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"agent_id": "main", "format": "anthropic", "options": {"repair": True}}]
        }
    )

    agent_id: AgentId = MAIN_AGENT
    format: ProviderFormat = ProviderFormat.OPENAI_CHAT
    options: Annotated[
        dict[str, Any], json_object(MAX_METADATA_CHARS, "options"), json_limits(MAX_METADATA_CHARS)
    ] = Field(
        default_factory=dict,
        description="The assembler's options (policy, n, repair, merge_same_role, "
        "token_budget, reminder_style, cache_breakpoints, xml_final_instruction, "
        "max_tool_result_chars, max_tool_result_chars_by_tool, chat_reasoning); "
        "unknown names are refused.",
    )


class Assembled(BaseModel):
    model_config = ConfigDict(frozen=True)

    payload: dict[str, Any] = Field(description="The request body for the provider's SDK.")
    diagnostics: Diagnostics
