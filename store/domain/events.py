"""Domain events: what happened to a conversation, as the log records it.

Frozen pydantic models, one per event type, joined in the `DomainEvent`
discriminated union. Each carries everything its projections need, decided
once when the command ran (sequence numbers, sort keys, the batch a
selection defines), so replaying the log rebuilds exactly what inline
maintenance built.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

from store.domain.codec import encode_message, trusted, with_kind
from store.domain.context import AgentProfile, TodoItem
from store.domain.inputs import STORED, Metadata
from store.domain.messages import Content, Message


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    def data(self) -> dict[str, Any]:
        """What the log's `data` column keeps of this event (its type is a column)."""
        return self.model_dump(mode="json", exclude={"type"})


class ConversationStarted(_Event):
    type: Literal["conversation_started"] = "conversation_started"
    tenant: str
    # The id its creator chose (store.domain.conversation_keys); events recorded
    # before ids were chosen lack it (their stream row has it).
    key: str | None = None
    # Bounded, finite JSON (store.domain.inputs): NaN never reaches the storage.
    metadata: Metadata = Field(default_factory=dict)


class MessageAppended(_Event):
    """One message. `sort_key` orders the visible window: it equals `seq`
    for an ordinary append, and lies between two neighbours for a message
    inserted into the window (the log itself stays append-only)."""

    type: Literal["message_appended"] = "message_appended"
    seq: int
    sort_key: Decimal
    batch: int
    message: Message

    @model_validator(mode="before")
    @classmethod
    def _sort_key_defaults_to_seq(cls, data: Any) -> Any:
        if isinstance(data, dict) and "sort_key" not in data and "seq" in data:
            return {**data, "sort_key": data["seq"]}
        return data

    @classmethod
    def decided(
        cls, *, seq: int, sort_key: Decimal, batch: int, message: Message
    ) -> MessageAppended:
        """The event of an append the store decided (`store.domain.commands`): its
        numbers computed there, its message validated on the way in. Built
        without validating again, which would run the message's own checks
        twice more per message."""
        values = {
            "type": "message_appended",
            "seq": seq,
            "sort_key": sort_key,
            "batch": batch,
            "message": message,
        }
        return trusted(cls, values)

    def data(self) -> dict[str, Any]:
        # The message body is stored here once (the views reference this
        # event), so it is kept compact: see store.domain.codec. An ordinary
        # append's sort key is its seq and is left out.
        data: dict[str, Any] = {"seq": self.seq, "batch": self.batch}
        if self.sort_key != self.seq:
            data["sort_key"] = str(self.sort_key)
        data["message"] = encode_message(self.message)
        return data


class MessageEdited(_Event):
    """`replace`: new content for a message; the original stays in the log."""

    type: Literal["message_edited"] = "message_edited"
    seq: int
    content: Content
    previous_content: Content
    token_estimate: int | None = None  # of the edited message


class AgentConfigured(_Event):
    type: Literal["agent_configured"] = "agent_configured"
    profile: AgentProfile


class ContextSlotUpdated(_Event):
    """A slot's new value; None clears it. `todo` holds items, others text."""

    type: Literal["context_slot_updated"] = "context_slot_updated"
    agent_id: str
    slot: str
    text: str | None = None
    todo: tuple[TodoItem, ...] | None = None


class BatchStarted(_Event):
    """A new visibility window: retained ∪ summary ∪ {sort_key ≥ boundary}
    over the messages that exist when it starts, plus everything appended
    after. `operation` and `parameters` say which call made it."""

    type: Literal["batch_started"] = "batch_started"
    batch: int
    boundary: Decimal
    retained: tuple[int, ...] = ()
    summary_seq: int | None = None
    operation: str
    parameters: dict[str, Any] = Field(default_factory=dict)
    # The agent whose window this batch is (docs/storage.md, "A window per
    # agent"): only its messages are shown, and only its messages join it.
    # None: a batch of every agent's window, as every batch recorded before
    # migration 0007 was.
    agent_id: str | None = None
    # The batch it selects from (that agent's window before it); None in
    # events recorded before 0007, where it follows from the operation.
    source: int | None = None

    @property
    def source_batch(self) -> int:
        """The batch whose window this one selects from: as recorded, else
        the batch rolled back to, or else the one it follows (before 0007 a
        new batch was always current + 1)."""
        if self.source is not None:
            return self.source
        if self.operation == "rollback_to_batch":
            return int(self.parameters["batch"])
        return self.batch - 1

    def data(self) -> dict[str, Any]:
        # An event of one window names it; one of every agent's (recorded
        # before 0007) keeps the shape it had.
        data = self.model_dump(mode="json", exclude={"type"})
        for name in ("agent_id", "source"):
            if data[name] is None:
                del data[name]
        return data


class MessagePinned(_Event):
    """A message was pinned (`pinned`) or unpinned: a compaction keeps
    pinned messages in the new window. Nothing else reads the flag."""

    type: Literal["message_pinned"] = "message_pinned"
    seq: int
    pinned: bool = True


class ConversationForked(_Event):
    """The first event of a fork: a new conversation whose history is
    `parent`'s messages up to `up_to_seq` (only `agent_id`'s, if given), as
    they read at the parent's version `parent_version`. The messages follow
    this event in the fork's own log, as `message_appended` events (then
    `message_pinned`, agent profiles and slots), so the fork owns what it
    shows: see docs/storage.md, "Forks"."""

    type: Literal["conversation_forked"] = "conversation_forked"
    tenant: str
    key: str  # the fork's id (store.domain.conversation_keys)
    parent: str  # the parent's id
    parent_version: int
    up_to_seq: int
    agent_id: str | None = None
    messages: int = 0
    metadata: Metadata = Field(default_factory=dict)


class ConversationArchived(_Event):
    """The conversation became read-only (`store.domain.errors.ConversationIsArchived`)."""

    type: Literal["conversation_archived"] = "conversation_archived"


class ConversationUnarchived(_Event):
    """The conversation is writable again."""

    type: Literal["conversation_unarchived"] = "conversation_unarchived"


class ConversationMetadataChanged(_Event):
    """The conversation's metadata, whole, as a merge patch left it (the
    patch was applied once, when the command ran)."""

    type: Literal["conversation_metadata_changed"] = "conversation_metadata_changed"
    metadata: Metadata = Field(default_factory=dict)


class ConversationPurged(_Event):
    """The conversation's events and projection rows were purged; this event
    (no content) is all that remains, so feed readers can purge too."""

    type: Literal["conversation_deleted"] = "conversation_deleted"


DomainEvent = Annotated[
    ConversationStarted
    | MessageAppended
    | MessageEdited
    | AgentConfigured
    | ContextSlotUpdated
    | BatchStarted
    | MessagePinned
    | ConversationForked
    | ConversationArchived
    | ConversationUnarchived
    | ConversationMetadataChanged
    | ConversationPurged,
    Field(discriminator="type"),
]

_adapter: TypeAdapter[DomainEvent] = TypeAdapter(DomainEvent)


def from_data(type_: str, data: dict[str, Any]) -> DomainEvent:
    """The domain event the log recorded as (`type`, `data`).

    The limits on input (`store.domain.inputs`) are not applied again: what the log
    holds was accepted under the limits of its day, and must replay. A
    message's kind is the stored format's default when the log left it out
    (`store.domain.codec.STORED_DEFAULT_KIND`), whatever the model's default is."""
    if type_ == "message_appended" and "kind" not in data["message"]:
        data = {**data, "message": with_kind(dict(data["message"]))}
    return _adapter.validate_python({"type": type_, **data}, context=STORED)


# Every type the log can hold, in declaration order: the `event_type` enum's
# names (migration 0015; a new one needs `ALTER TYPE event_type ADD VALUE`).
EVENT_TYPES: tuple[str, ...] = tuple(
    event.model_fields["type"].default for event in get_args(get_args(DomainEvent)[0])
)
