"""store.domain.operations: batch operations as values, and deciding them.

What a value refuses on its own (named by operation and field), parsing the
union, the `parameters` the `BatchStarted` event records (the dicts the log
already holds: they must not change), and what `store.domain.commands` refuses
against a conversation, over a small in-memory `ConversationState`.
"""

from __future__ import annotations

import itertools
import uuid
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from store.domain.commands import Head, Limits, decide_batch_operation
from store.domain.errors import BoundaryError, InvalidMessage, InvalidOperation
from store.domain.events import BatchStarted, DomainEvent, MessageAppended
from store.domain.messages import ROLES, Message, MessageKind, ToolCall
from store.domain.operations import (
    BATCH_OPERATION,
    MAX_FILTER_CHARS,
    MAX_FILTER_STRINGS,
    MAX_INSERTED,
    MAX_INT,
    MAX_RETAINED,
    TRUNCATE_FORMS,
    BatchOperation,
    Clear,
    Filter,
    Insert,
    RollbackToBatch,
    StartBatch,
    Truncate,
    parse_operation,
    refusal,
)
from store.domain.validation import CallState
from store.domain.window import WindowEntry

HI = Message(role="user", content="hi")
ROLE_LIST = "roles are system, user, assistant, tool"


def refused(kind: type[Any], **fields: Any) -> str:
    """The InvalidOperation text for constructing `kind` from `fields`."""
    with pytest.raises(ValidationError) as caught:
        kind(**fields)
    return str(refusal(caught.value))


# --- what a value refuses on its own ------------------------------------------------

REFUSALS: list[tuple[type[Any], dict[str, Any], str]] = [
    # start_batch
    (StartBatch, {"boundary_seq": 0}, "start_batch boundary_seq: seqs count from 1, got 0"),
    (StartBatch, {"boundary_seq": -3}, "start_batch boundary_seq: seqs count from 1, got -3"),
    (
        StartBatch,
        {"boundary_seq": MAX_INT + 1},
        f"start_batch boundary_seq: Input should be less than or equal to {MAX_INT}",
    ),
    (StartBatch, {"boundary_seq": True}, "start_batch boundary_seq: Input should be a valid int"),
    (StartBatch, {"boundary_seq": "3"}, "start_batch boundary_seq: Input should be a valid int"),
    (StartBatch, {}, "start_batch boundary_seq: Field required"),
    (
        StartBatch,
        {"boundary_seq": 2, "retain": (1, 0)},
        "start_batch retain.1: seqs count from 1, got 0",
    ),
    (
        StartBatch,
        {"boundary_seq": 2, "retain": tuple(range(1, MAX_RETAINED + 2))},
        f"start_batch retain: Tuple should have at most {MAX_RETAINED} items",
    ),
    (
        StartBatch,
        {"boundary_seq": 2, "summary": {"role": "user", "content": " "}},
        "start_batch summary: Value error, empty user message",
    ),
    (StartBatch, {"boundary_seq": 2, "adjust": "yes"}, "start_batch adjust: Input should be a"),
    # truncate
    (
        Truncate,
        {},
        "truncate needs one of keep_first, keep_last, remove_first, remove_last, range",
    ),
    (Truncate, {"role": "user"}, "truncate needs one of keep_first"),
    (Truncate, {"keep_first": -1}, "truncate keep_first: cannot be negative, got -1"),
    (Truncate, {"keep_last": -1}, "truncate keep_last: cannot be negative, got -1"),
    (Truncate, {"remove_first": -2}, "truncate remove_first: cannot be negative, got -2"),
    (Truncate, {"remove_last": -2}, "truncate remove_last: cannot be negative, got -2"),
    (Truncate, {"keep_last": 1.5}, "truncate keep_last: Input should be a valid integer"),
    (Truncate, {"range": (3, 1)}, "truncate range: start must not be after end, got [3, 1]"),
    (Truncate, {"range": (-1, 2)}, "truncate range.0: cannot be negative, got -1"),
    (Truncate, {"range": (1, 2, 3)}, "truncate range: Tuple should have at most 2 items"),
    (
        Truncate,
        {"keep_last": 1, "role": "robot"},
        f"truncate role: unknown role 'robot'; {ROLE_LIST}",
    ),
    # filter
    (Filter, {}, "filter needs roles, content_contains or content_excludes"),
    (Filter, {"content_contains": []}, "filter needs roles, content_contains or content_excludes"),
    (Filter, {"roles": ["robot", "user"]}, f"filter roles: unknown roles ['robot']; {ROLE_LIST}"),
    (Filter, {"roles": []}, "filter roles: name at least one role (to hide every message, use"),
    (Filter, {"roles": ["user"] * 5}, "filter roles: Tuple should have at most 4 items"),
    (
        Filter,
        {"content_contains": ["ok", ""]},
        "filter content_contains.1: String should have at least 1 character",
    ),
    (
        Filter,
        {"content_excludes": ["x" * (MAX_FILTER_CHARS + 1)]},
        f"filter content_excludes.0: String should have at most {MAX_FILTER_CHARS} characters",
    ),
    (
        Filter,
        {"content_contains": ["x"] * (MAX_FILTER_STRINGS + 1)},
        f"filter content_contains: Tuple should have at most {MAX_FILTER_STRINGS} items",
    ),
    # clear
    (Clear, {"keep_system": "no"}, "clear keep_system: Input should be a valid boolean"),
    (Clear, {"keep_last": 2}, "clear keep_last: Extra inputs are not permitted"),
    # insert
    (
        Insert,
        {"position": -1, "messages": (HI,)},
        "insert position: -1 is outside the window: positions count from 0",
    ),
    (Insert, {"position": 0, "messages": ()}, "insert messages: insert needs at least one message"),
    (
        Insert,
        {"position": 0, "messages": (HI,) * (MAX_INSERTED + 1)},
        f"insert messages: Tuple should have at most {MAX_INSERTED} items",
    ),
    (
        Insert,
        {"position": 0, "messages": [{"role": "user", "content": ""}]},
        "insert messages.0: Value error, empty user message",
    ),
    (
        Insert,
        {"position": 0, "messages": (HI,), "adjust": True},
        "insert adjust: Extra inputs are not permitted",
    ),
    # rollback_to_batch
    (
        RollbackToBatch,
        {"batch": 0},
        "rollback_to_batch batch: there is no batch 0 to roll back to: batches are numbered from 1",
    ),
    (RollbackToBatch, {}, "rollback_to_batch batch: Field required"),
]


@pytest.mark.parametrize(
    ("kind", "fields", "message"),
    REFUSALS,
    ids=[f"{kind.__name__}-{'-'.join(fields) or 'nothing'}" for kind, fields, _ in REFUSALS],
)
def test_a_value_that_breaks_a_rule_is_refused_naming_the_field(
    kind: type[Any], fields: dict[str, Any], message: str
) -> None:
    assert refused(kind, **fields).startswith(message)


CONFLICTING = [
    pair
    for pair in itertools.combinations(TRUNCATE_FORMS, 2)
    if set(pair) != {"remove_first", "remove_last"}
]


@pytest.mark.parametrize("pair", CONFLICTING, ids=["+".join(p) for p in CONFLICTING])
def test_truncate_takes_one_form(pair: tuple[str, str]) -> None:
    fields = {name: (1, 2) if name == "range" else 1 for name in pair}
    assert refused(Truncate, **fields) == (
        "truncate takes one form: keep_first, keep_last, range, or remove_first and/or "
        f"remove_last; got {pair[0]} and {pair[1]} (together, the result would depend on the "
        "order they apply in)"
    )


def test_truncate_forms_that_commute_combine() -> None:
    both = Truncate(remove_first=1, remove_last=2, role="user")
    assert (both.remove_first, both.remove_last, both.role) == (1, 2, "user")
    assert "got keep_first and remove_first and remove_last" in refused(
        Truncate, keep_first=1, remove_first=1, remove_last=1
    )


def test_every_single_truncate_form_is_accepted() -> None:
    for name in TRUNCATE_FORMS:
        value = Truncate(**{name: (0, 0) if name == "range" else 0})
        assert getattr(value, name) is not None


def test_an_empty_filter_list_is_the_same_as_none() -> None:
    assert Filter(roles=["user"], content_contains=[], content_excludes=()) == Filter(
        roles=("user",)
    )


def test_the_limits_themselves_are_allowed() -> None:
    StartBatch(boundary_seq=MAX_INT, retain=tuple(range(1, MAX_RETAINED + 1)))
    Insert(position=0, messages=(HI,) * MAX_INSERTED)
    Filter(
        roles=ROLES,
        content_contains=("x" * MAX_FILTER_CHARS,) * MAX_FILTER_STRINGS,
        content_excludes=("y",) * MAX_FILTER_STRINGS,
    )
    Truncate(keep_last=0)
    RollbackToBatch(batch=1)


def test_values_are_frozen_and_keyword_only() -> None:
    value = Truncate(keep_last=2)
    with pytest.raises(ValidationError, match="frozen"):
        value.keep_last = 3  # type: ignore[misc]
    positional: Any = Truncate
    with pytest.raises(TypeError):
        positional(2)
    assert {value: "hashable"}[Truncate(keep_last=2)] == "hashable"


# --- parsing the union ----------------------------------------------------------------

PARSED: list[tuple[str, BatchOperation]] = [
    (
        '{"operation": "start_batch", "boundary_seq": 6, "retain": [1],'
        ' "summary": {"role": "user", "content": "so far"}, "adjust": true}',
        StartBatch(
            boundary_seq=6,
            retain=(1,),
            summary=Message(role="user", content="so far"),
            adjust=True,
        ),
    ),
    ('{"operation": "truncate", "range": [2, 4]}', Truncate(range=(2, 4))),
    (
        '{"operation": "truncate", "keep_last": 1, "role": "user"}',
        Truncate(keep_last=1, role="user"),
    ),
    (
        '{"operation": "filter", "roles": ["system", "user"], "content_excludes": ["x"]}',
        Filter(roles=("system", "user"), content_excludes=("x",)),
    ),
    ('{"operation": "clear"}', Clear()),
    ('{"operation": "clear", "keep_system": false}', Clear(keep_system=False)),
    (
        '{"operation": "insert", "position": 1, "messages": [{"role": "user", "content": "hi"}]}',
        Insert(position=1, messages=(HI,)),
    ),
    ('{"operation": "rollback_to_batch", "batch": 1}', RollbackToBatch(batch=1)),
]


@pytest.mark.parametrize(("body", "value"), PARSED, ids=[v.operation for _, v in PARSED])
def test_the_operation_field_picks_the_value(body: str, value: BatchOperation) -> None:
    parsed = BATCH_OPERATION.validate_json(body)
    assert type(parsed) is type(value)
    assert parsed == value


def test_parsing_refuses_with_the_operation_and_field_in_the_location() -> None:
    with pytest.raises(ValidationError) as caught:
        BATCH_OPERATION.validate_json('{"operation": "truncate", "keep_last": -1}')
    [problem] = caught.value.errors()
    assert (problem["loc"], problem["msg"]) == (
        ("truncate", "keep_last"),
        "cannot be negative, got -1",
    )
    with pytest.raises(ValidationError, match="shuffle"):
        BATCH_OPERATION.validate_json('{"operation": "shuffle"}')
    with pytest.raises(ValidationError, match="keep_last"):
        BATCH_OPERATION.validate_json('{"operation": "clear", "keep_last": 2}')


def test_parse_operation_answers_with_the_stores_error() -> None:
    assert parse_operation({"operation": "clear"}) == Clear()
    with pytest.raises(InvalidOperation, match=r"^truncate keep_last: cannot be negative"):
        parse_operation({"operation": "truncate", "keep_last": -1})
    with pytest.raises(InvalidOperation, match=r"^filter needs roles"):
        parse_operation({"operation": "filter"})
    with pytest.raises(InvalidOperation, match="does not match any of the expected tags"):
        parse_operation({"operation": "shuffle"})
    with pytest.raises(InvalidOperation, match="discriminator 'operation'"):
        parse_operation({"keep_last": 1})


# --- what the BatchStarted event records ------------------------------------------------

SUMMARY = Message(role="assistant", content="summary")

# The dicts the store recorded before the operations were values (and the log
# holds): what each operation's `parameters()` must go on producing.
RECORDED: list[tuple[BatchOperation, dict[str, Any]]] = [
    (StartBatch(boundary_seq=5), {"boundary_seq": 5, "retain": []}),
    (
        StartBatch(boundary_seq=5, retain=(2, 1), summary=SUMMARY, adjust=True),
        {"boundary_seq": 5, "retain": [2, 1]},
    ),
    (Truncate(keep_first=2), {"keep_first": 2}),
    (Truncate(keep_last=0), {"keep_last": 0}),
    (Truncate(remove_first=2), {"remove_first": 2}),
    (Truncate(remove_last=2, adjust=True), {"remove_last": 2}),
    (Truncate(remove_first=1, remove_last=2), {"remove_first": 1, "remove_last": 2}),
    (Truncate(range=(1, 3)), {"range": [1, 3]}),
    (Truncate(keep_last=1, role="user"), {"keep_last": 1, "role": "user"}),
    (Filter(roles=("user",)), {"roles": ["user"]}),
    (Filter(content_contains=("hello", "ok")), {"content_contains": ["hello", "ok"]}),
    (
        Filter(roles=("user", "assistant"), content_excludes=("bye",), adjust=True),
        {"roles": ["user", "assistant"], "content_excludes": ["bye"]},
    ),
    (Filter(roles=("tool",), content_contains=[], content_excludes=[]), {"roles": ["tool"]}),
    (Clear(), {"keep_system": True}),
    (Clear(keep_system=False, adjust=True), {"keep_system": False}),
    (Insert(position=2, messages=(HI, SUMMARY)), {"position": 2, "count": 2}),
    (RollbackToBatch(batch=2), {"batch": 2}),
]


@pytest.mark.parametrize(
    ("value", "recorded"), RECORDED, ids=[f"{v.operation}-{i}" for i, (v, _) in enumerate(RECORDED)]
)
def test_parameters_are_what_the_log_records(
    value: BatchOperation, recorded: dict[str, Any]
) -> None:
    assert value.parameters() == recorded
    event = BatchStarted(
        batch=3, boundary=Decimal(1), operation=value.operation, parameters=value.parameters()
    )
    # The event keeps them as JSON, unchanged.
    assert event.model_dump(mode="json")["parameters"] == recorded


def test_a_rollbacks_recorded_batch_is_its_source() -> None:
    value = RollbackToBatch(batch=2)
    event = BatchStarted(
        batch=7, boundary=Decimal(1), operation=value.operation, parameters=value.parameters()
    )
    assert event.source_batch == 2


# --- any valid value survives JSON --------------------------------------------------------

counts = st.integers(min_value=0, max_value=MAX_INT)
seqs = st.integers(min_value=1, max_value=MAX_INT)
roles = st.sampled_from(ROLES)
# Text that can be stored (store.domain.inputs: no NUL, no lone surrogate), and
# identifiers (printable).
texts = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=20)
identifiers = st.text(st.characters(categories=("L", "N", "P", "S")), min_size=1, max_size=20)
messages = st.builds(
    Message,
    role=st.sampled_from(["system", "user", "assistant"]),
    content=texts.filter(lambda t: t.strip() != ""),
    agent_id=st.sampled_from(["main", "helper"]),
    kind=st.sampled_from(list(MessageKind)),
    client_message_id=st.none() | identifiers,
    metadata=st.dictionaries(texts, st.integers(-(2**63), 2**63 - 1) | texts, max_size=2),
)


@st.composite
def truncates(draw: st.DrawFn) -> Truncate:
    form = draw(st.sampled_from([*TRUNCATE_FORMS, "remove_both"]))
    fields: dict[str, Any]
    if form == "range":
        start, end = sorted(draw(st.lists(counts, min_size=2, max_size=2)))
        fields = {"range": (start, end)}
    elif form == "remove_both":
        fields = {"remove_first": draw(counts), "remove_last": draw(counts)}
    else:
        fields = {form: draw(counts)}
    return Truncate(**fields, role=draw(st.none() | roles), adjust=draw(st.booleans()))


@st.composite
def filters(draw: st.DrawFn) -> Filter:
    strings = st.none() | st.lists(texts, min_size=1, max_size=3).map(tuple)
    criteria = {
        "roles": draw(st.none() | st.lists(roles, min_size=1, max_size=4).map(tuple)),
        "content_contains": draw(strings),
        "content_excludes": draw(strings),
    }
    if all(v is None for v in criteria.values()):
        criteria["roles"] = ("user",)
    return Filter(**criteria, adjust=draw(st.booleans()))


operations: st.SearchStrategy[BatchOperation] = st.one_of(
    st.builds(
        StartBatch,
        boundary_seq=seqs,
        summary=st.none() | messages,
        retain=st.lists(seqs, max_size=5).map(tuple),
        adjust=st.booleans(),
    ),
    truncates(),
    filters(),
    st.builds(Clear, keep_system=st.booleans(), adjust=st.booleans()),
    st.builds(
        Insert,
        position=counts,
        messages=st.lists(messages, min_size=1, max_size=3).map(tuple),
    ),
    st.builds(RollbackToBatch, batch=seqs),
)


@given(operations)
def test_any_valid_operation_survives_json(value: BatchOperation) -> None:
    assert BATCH_OPERATION.validate_json(value.model_dump_json()) == value
    assert BATCH_OPERATION.validate_python(value.model_dump(mode="json")) == value


# --- deciding an operation against a conversation ---------------------------------------


def entry(seq: int, role: str = "user", calls: tuple[str, ...] = ()) -> WindowEntry:
    answers = f"c{seq - 1}" if role == "tool" else None
    return WindowEntry(
        seq=seq,
        sort_key=Decimal(seq),
        role=role,  # type: ignore[arg-type]
        agent_id="main",
        call_ids=calls,
        answers=answers,
    )


@dataclass
class Conversation:
    """A `ConversationState` over a visible window of messages 1..n."""

    entries: list[WindowEntry]
    current_batch: int = 1
    pending: set[str] = field(default_factory=set)
    conversation_id: uuid.UUID = field(default_factory=uuid.uuid4)

    async def head(self) -> Head:
        return Head(next_seq=len(self.entries) + 1, current_batch=self.current_batch)

    async def calls(self, call_ids: set[str]) -> dict[str, CallState]:
        return {}

    async def pending_call_ids(self, agent_id: str | None = None) -> set[str]:
        return set(self.pending)

    async def window(self, agent_id: str) -> list[WindowEntry]:
        return list(self.entries)

    async def batch_window(
        self, batch: int, agent_id: str | None = None
    ) -> list[WindowEntry] | None:
        return list(self.entries) if 1 <= batch <= self.current_batch else None

    async def key_after(self, key: Decimal) -> Decimal | None:
        return next((e.sort_key for e in self.entries if e.sort_key > key), None)

    async def key_before(self, key: Decimal) -> Decimal | None:
        return next((e.sort_key for e in reversed(self.entries) if e.sort_key < key), None)

    async def message(self, seq: int) -> None:
        return None


def five() -> Conversation:
    return Conversation([entry(s, r) for s, r in enumerate(["system", "user", "assistant"] * 2, 1)])


def started(events: list[DomainEvent]) -> BatchStarted:
    assert isinstance(events[0], BatchStarted)
    return events[0]


@pytest.mark.parametrize(
    ("value", "recorded"), RECORDED, ids=[f"{v.operation}-{i}" for i, (v, _) in enumerate(RECORDED)]
)
async def test_the_event_records_the_operation_and_its_parameters(
    value: BatchOperation, recorded: dict[str, Any]
) -> None:
    conversation = five()
    conversation.current_batch = 2
    events = await decide_batch_operation(conversation, value, Limits())
    event = started(events)
    assert (event.batch, event.operation, event.parameters) == (3, value.operation, recorded)


async def test_start_batch_boundary_is_at_most_the_next_seq() -> None:
    conversation = five()  # messages 1..6; the next is 7
    with pytest.raises(
        InvalidOperation,
        match=r"^start_batch boundary_seq 8 is past the end of the conversation: it must be "
        r"between 1 and 7 \(the next message's seq\)$",
    ):
        await decide_batch_operation(conversation, StartBatch(boundary_seq=8), Limits())

    events = await decide_batch_operation(
        conversation, StartBatch(boundary_seq=7, summary=SUMMARY), Limits()
    )
    event = started(events)
    assert (event.boundary, event.retained, event.summary_seq) == (Decimal(7), (), 7)
    [summary] = events[1:]
    assert isinstance(summary, MessageAppended)
    assert (summary.seq, summary.batch, summary.message.kind) == (7, 2, MessageKind.SUMMARY)


async def test_insert_position_is_within_the_window() -> None:
    conversation = five()
    with pytest.raises(
        InvalidOperation, match=r"^insert position 7 is outside the window \(0..6\)$"
    ):
        await decide_batch_operation(conversation, Insert(position=7, messages=(HI,)), Limits())
    events = await decide_batch_operation(
        conversation, Insert(position=6, messages=(HI,)), Limits()
    )
    assert [type(e) for e in events] == [BatchStarted, MessageAppended]


async def test_insert_refuses_tool_messages_as_a_message_rule() -> None:
    call = Message(role="assistant", tool_calls=(ToolCall(id="c9", name="ls"),))
    with pytest.raises(InvalidMessage, match=r"message #1: tool calls and tool results cannot"):
        await decide_batch_operation(five(), Insert(position=0, messages=(HI, call)), Limits())


async def test_rollback_names_the_batches_there_are() -> None:
    conversation = five()
    conversation.current_batch = 2
    with pytest.raises(
        InvalidOperation, match=r"^there is no batch 3 to roll back to: batches are 1..2$"
    ):
        await decide_batch_operation(conversation, RollbackToBatch(batch=3), Limits())


async def test_a_selection_that_hides_a_pending_call_needs_adjust() -> None:
    conversation = Conversation([entry(1), entry(2, "assistant", calls=("c2",)), entry(3)])
    conversation.pending = {"c2"}
    with pytest.raises(BoundaryError, match="c2"):
        await decide_batch_operation(conversation, Truncate(keep_last=1), Limits())
    events = await decide_batch_operation(
        conversation, Truncate(keep_last=1, adjust=True), Limits()
    )
    assert (started(events).boundary, started(events).retained) == (Decimal(2), ())
