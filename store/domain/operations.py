"""Batch operations as values: what a caller asks a batch operation to do.

One frozen, keyword-only model per operation of docs/behaviours.md §4, joined in
the `BatchOperation` union by its `operation` field. These values are the
only place an operation's parameters are spelled: the repository runs them
(`Repository.run_batch_operation`), `store.domain.commands` decides them into
events, `store.domain.window` selects with them, and the HTTP API takes them as
the body of `POST /conversations/{id}/batches` (adding only
`expected_version`).

Every operation acts on one agent's window (`agent_id`, default `main`):
it selects from that agent's messages, and its new batch is that agent's;
the other agents' windows are untouched (docs/storage.md).

Everything that can be checked on the value alone is checked here: ranges,
lengths, roles, truncate's one form, filter's one criterion. What needs the
conversation (a boundary past the end, an insert position past the window,
a batch that does not exist, a tool block split) is checked by
`store.domain.commands` when the operation runs.

Errors name the field. Like `Message`, a value that breaks a rule raises
pydantic's `ValidationError`, whether constructed or parsed (the HTTP body
answers 422 with it); `refusal(error)` makes that the store's
`InvalidOperation`, and `parse_operation(data)` parses untrusted data
straight to a value or an `InvalidOperation`.

`parameters()` is what the `BatchStarted` event records of the operation.
Those dicts are stored in the log and read back when it is replayed
(`BatchStarted.source_batch` reads a rollback's `"batch"`), so their shape
must not change. Older events may record combinations these values now
refuse (e.g. truncate's `keep_first` with `remove_last`); they are
replayed, never parsed back into values.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Annotated, Any, Literal, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WrapValidator,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails, PydanticCustomError

from store.domain.errors import InvalidOperation
from store.domain.inputs import TEXT_RULE, AgentId
from store.domain.messages import MAIN_AGENT, ROLES, Message, Role

# The largest value a PostgreSQL bigint holds: seqs, batch numbers and
# positions are compared with bigint columns.
MAX_INT = 2**63 - 1
MAX_RETAINED = 10_000
MAX_INSERTED = 1_000
MAX_FILTER_STRINGS = 100
MAX_FILTER_CHARS = 10_000

_ROLE_NAMES = ", ".join(ROLES)


def _rephrased(**templates: str) -> WrapValidator:
    """Say pydantic's refusals of the named error types in our words.

    `templates` maps an error type (`greater_than_equal`, `literal_error`,
    ...) to a message; `{value}` in it is the refused input, `{refused}`
    the refused items of a list. Other errors pass through unchanged."""

    def validate(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        try:
            return handler(value)
        except ValidationError as error:
            problems = error.errors()
            kinds = {e["type"] for e in problems}
            if len(kinds) != 1 or (kind := kinds.pop()) not in templates:
                raise
            refused = [e["input"] for e in problems]
            context = {"value": repr(value), "refused": repr(refused)}
            raise PydanticCustomError(kind, templates[kind], context) from None

    return WrapValidator(validate)


def _non_empty(message: str) -> AfterValidator:
    """Refuse an empty list with `message`. (Not `min_length`: pydantic then
    also reports a list whose items were refused as too short.)"""

    def validate(value: tuple[Any, ...]) -> tuple[Any, ...]:
        if not value:
            raise PydanticCustomError("too_short", message)
        return value

    return AfterValidator(validate)


_AT_LEAST_ONE = {"minItems": 1}  # what `_non_empty` checks, for the JSON schema

# --- field types ----------------------------------------------------------------

# Every whole number an operation takes: an int given as one (not "3" nor
# 3.0), that fits PostgreSQL's bigint; each type below adds its least value.
_Whole = Annotated[int, Field(strict=True, le=MAX_INT)]
Seq = Annotated[
    _Whole, Field(ge=1), _rephrased(greater_than_equal="seqs count from 1, got {value}")
]
Count = Annotated[
    _Whole, Field(ge=0), _rephrased(greater_than_equal="cannot be negative, got {value}")
]
Position = Annotated[
    _Whole,
    Field(ge=0),
    _rephrased(greater_than_equal="{value} is outside the window: positions count from 0"),
]
BatchNumber = Annotated[
    _Whole,
    Field(ge=1),
    _rephrased(
        greater_than_equal="there is no batch {value} to roll back to: batches are numbered from 1"
    ),
]
KnownRole = Annotated[
    Role, _rephrased(literal_error=f"unknown role {{value}}; roles are {_ROLE_NAMES}")
]
FilterString = Annotated[str, Field(min_length=1, max_length=MAX_FILTER_CHARS), TEXT_RULE]
Adjust = Annotated[
    bool,
    Field(
        strict=True,
        description="If the new window would split a tool-call block or hide a call still "
        "waiting for its result: grow it to whole blocks (true) instead of refusing (false).",
    ),
]


class _Operation(BaseModel, ABC):
    model_config = ConfigDict(frozen=True, extra="forbid")

    # Whose window the operation acts on: each agent has one (its messages,
    # in a batch of its own once it has run an operation); the other
    # agents' windows are untouched.
    agent_id: AgentId = Field(
        default=MAIN_AGENT,
        description="The agent whose window this acts on (`main` or a sub-agent's id); "
        "other agents' windows are untouched.",
    )

    @abstractmethod
    def parameters(self) -> dict[str, Any]:
        """What the `BatchStarted` event records as `parameters` (JSON data)."""


class StartBatch(_Operation):
    """A new batch showing the window from message `boundary_seq` on, plus
    the `retain`ed earlier messages, led by an optional `summary`."""

    operation: Literal["start_batch"] = "start_batch"
    boundary_seq: Seq = Field(
        description="The seq of the first message the new batch shows (with everything "
        "after it). At most the seq the next message will get: then only the summary, "
        "the retained messages and what is appended later are shown."
    )
    summary: Message | None = Field(
        default=None,
        description="Appended now (kind `summary`), shown just before the boundary.",
    )
    retain: tuple[Seq, ...] = Field(
        default=(),
        max_length=MAX_RETAINED,
        description="Seqs of visible messages before the boundary to keep showing.",
    )
    adjust: Adjust = False

    def parameters(self) -> dict[str, Any]:
        return {"boundary_seq": self.boundary_seq, "retain": list(self.retain)}


TRUNCATE_FORMS = ("keep_first", "keep_last", "remove_first", "remove_last", "range")
# Forms that may be given together: the result does not depend on the order
# they apply in. Every other pair would (keep_first 5 with remove_first 1 is
# the 2nd to 5th, or the 2nd to 6th), and a JSON body has no order.
_COMBINABLE = frozenset({"remove_first", "remove_last"})


class Truncate(_Operation):
    """A new batch showing part of the window — or, with `role`, part of
    that role's messages, every other role staying as it is. Exactly one
    form: `keep_first`, `keep_last`, `range`, or `remove_first` and/or
    `remove_last`."""

    operation: Literal["truncate"] = "truncate"
    keep_first: Count | None = Field(default=None, description="Show only the first n.")
    keep_last: Count | None = Field(default=None, description="Show only the last n.")
    remove_first: Count | None = Field(default=None, description="Hide the first n.")
    remove_last: Count | None = Field(default=None, description="Hide the last n.")
    range: tuple[Count, Count] | None = Field(
        default=None,
        description="[start, end]: show positions start to end-1 (0-based, end excluded).",
    )
    role: KnownRole | None = Field(
        default=None, description="Count only this role's messages; other roles stay shown."
    )
    adjust: Adjust = False

    @field_validator("range")
    @classmethod
    def _ordered(cls, value: tuple[int, int] | None) -> tuple[int, int] | None:
        if value is not None and value[0] > value[1]:
            raise PydanticCustomError(
                "truncate_range",
                "start must not be after end, got [{start}, {end}]",
                {"start": value[0], "end": value[1]},
            )
        return value

    @model_validator(mode="after")
    def _one_form(self) -> Self:
        given = [name for name in TRUNCATE_FORMS if getattr(self, name) is not None]
        if not given:
            raise PydanticCustomError(
                "truncate_form", "truncate needs one of " + ", ".join(TRUNCATE_FORMS)
            )
        if len(given) > 1 and not set(given) <= _COMBINABLE:
            raise PydanticCustomError(
                "truncate_form",
                "truncate takes one form: keep_first, keep_last, range, or remove_first "
                "and/or remove_last; got {given} (together, the result would depend on "
                "the order they apply in)",
                {"given": " and ".join(given)},
            )
        return self

    def parameters(self) -> dict[str, Any]:
        recorded: dict[str, Any] = {
            "keep_first": self.keep_first,
            "keep_last": self.keep_last,
            "remove_first": self.remove_first,
            "remove_last": self.remove_last,
            "range": list(self.range) if self.range is not None else None,
            "role": self.role,
        }
        return {k: v for k, v in recorded.items() if v is not None}


FILTER_CRITERIA = ("roles", "content_contains", "content_excludes")


class Filter(_Operation):
    """A new batch showing the messages of the given `roles` that contain
    any of `content_contains` and none of `content_excludes`."""

    operation: Literal["filter"] = "filter"
    roles: (
        Annotated[
            tuple[Role, ...],
            Field(max_length=len(ROLES), json_schema_extra=_AT_LEAST_ONE),
            _rephrased(literal_error=f"unknown roles {{refused}}; roles are {_ROLE_NAMES}"),
            _non_empty("name at least one role (to hide every message, use clear)"),
        ]
        | None
    ) = Field(default=None, description="Show only these roles.")
    content_contains: tuple[FilterString, ...] | None = Field(
        default=None,
        max_length=MAX_FILTER_STRINGS,
        description="Show only messages whose text contains at least one of these.",
    )
    content_excludes: tuple[FilterString, ...] | None = Field(
        default=None,
        max_length=MAX_FILTER_STRINGS,
        description="Hide messages whose text contains any of these.",
    )
    adjust: Adjust = False

    @field_validator("content_contains", "content_excludes", mode="before")
    @classmethod
    def _empty_is_absent(cls, value: Any) -> Any:
        # An empty list asks for nothing: the same as leaving it out.
        return None if isinstance(value, list | tuple) and not value else value

    @model_validator(mode="after")
    def _one_criterion(self) -> Self:
        if all(getattr(self, name) is None for name in FILTER_CRITERIA):
            raise PydanticCustomError(
                "filter_criterion", "filter needs roles, content_contains or content_excludes"
            )
        return self

    def parameters(self) -> dict[str, Any]:
        recorded = {name: getattr(self, name) for name in FILTER_CRITERIA}
        return {k: list(v) for k, v in recorded.items() if v is not None}


class Clear(_Operation):
    """A new batch showing nothing — or only the system messages."""

    operation: Literal["clear"] = "clear"
    keep_system: bool = Field(
        default=True, strict=True, description="Keep showing the system messages."
    )
    adjust: Adjust = False

    def parameters(self) -> dict[str, Any]:
        return {"keep_system": self.keep_system}


class Insert(_Operation):
    """A new batch with `messages` placed at `position` of the window. They
    get the next seqs (the log stays append-only) and sort keys that put
    them there. Tool calls and tool results cannot be inserted."""

    operation: Literal["insert"] = "insert"
    position: Position = Field(
        description="Where in the visible window: 0 is before the first message, the "
        "window's length after the last."
    )
    messages: Annotated[
        tuple[Message, ...],
        Field(max_length=MAX_INSERTED, json_schema_extra=_AT_LEAST_ONE),
        _non_empty("insert needs at least one message"),
    ] = Field(description="The messages to insert, in order.")

    def parameters(self) -> dict[str, Any]:
        return {"position": self.position, "count": len(self.messages)}


class RollbackToBatch(_Operation):
    """A new batch showing what batch `batch` showed."""

    operation: Literal["rollback_to_batch"] = "rollback_to_batch"
    batch: BatchNumber = Field(description="The batch whose window to show again.")

    def parameters(self) -> dict[str, Any]:
        return {"batch": self.batch}


BatchOperation = Annotated[
    StartBatch | Truncate | Filter | Clear | Insert | RollbackToBatch,
    Field(discriminator="operation"),
]

BATCH_OPERATION: TypeAdapter[BatchOperation] = TypeAdapter(BatchOperation)

SelectionOperation = StartBatch | Truncate | Filter | Clear
"""The operations whose new batch shows a part of the current window."""


_NAMES = {
    cls.__name__: cls.model_fields["operation"].default
    for cls in (StartBatch, Truncate, Filter, Clear, Insert, RollbackToBatch)
}


def parse_operation(data: Any) -> BatchOperation:
    """A batch operation from untrusted data (a dict naming its `operation`),
    or InvalidOperation naming what is wrong."""
    try:
        return BATCH_OPERATION.validate_python(data)
    except ValidationError as error:
        raise refusal(error) from None


def refusal(error: ValidationError) -> InvalidOperation:
    """The store's error for a batch operation value that failed validation
    (constructing one, or parsing one), naming the operation and the fields:
    `truncate keep_last: cannot be negative, got -1`."""
    return InvalidOperation("; ".join(_problem(e, _NAMES.get(error.title)) for e in error.errors()))


def _problem(error: ErrorDetails, operation: str | None) -> str:
    loc = error["loc"]
    if operation is None:  # parsed through the union: the location starts with the tag
        known = bool(loc) and loc[0] in _NAMES.values()
        operation, loc = (str(loc[0]), loc[1:]) if known else ("batch operation", loc)
    where = ".".join(str(part) for part in loc)
    return f"{operation} {where}: {error['msg']}" if where else error["msg"]
