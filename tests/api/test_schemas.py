"""api.schemas: request bodies refuse what they do not know."""

from __future__ import annotations

from typing import get_args

import pytest
from pydantic import BaseModel, TypeAdapter, ValidationError

from api.schemas import (
    BatchOperationRequest,
    ClearRequest,
    FilterRequest,
    InsertRequest,
    MessagesAppend,
    RollbackToBatchRequest,
    SlotUpdate,
    StartBatchRequest,
    TruncateRequest,
    expected_version,
)
from store.domain import operations
from store.domain.context import TodoItem
from store.domain.messages import Message
from store.domain.records import StreamState

OPERATION: TypeAdapter[BatchOperationRequest] = TypeAdapter(BatchOperationRequest)


def test_expected_version_null_means_any() -> None:
    assert expected_version(None) is StreamState.ANY
    assert expected_version(0) == 0


def test_the_operation_field_picks_the_body() -> None:
    assert OPERATION.validate_python({"operation": "clear"}) == ClearRequest()
    truncate = OPERATION.validate_python({"operation": "truncate", "range": [2, 4]})
    assert isinstance(truncate, TruncateRequest)
    assert truncate.range == (2, 4)
    rollback = OPERATION.validate_python({"operation": "rollback_to_batch", "batch": 1})
    assert rollback == RollbackToBatchRequest(batch=1)


def test_a_body_is_the_stores_value_plus_expected_version() -> None:
    body = OPERATION.validate_python(
        {
            "operation": "insert",
            "position": 1,
            "messages": [{"role": "user", "content": "hi"}],
            "expected_version": 4,
        }
    )
    assert isinstance(body, InsertRequest)
    assert isinstance(body, operations.Insert)
    assert body.expected_version == 4
    command = body.command()
    assert type(command) is operations.Insert
    assert command == operations.Insert(position=1, messages=(Message(role="user", content="hi"),))


BODIES: list[tuple[type[BaseModel], type[BaseModel]]] = [
    (StartBatchRequest, operations.StartBatch),
    (TruncateRequest, operations.Truncate),
    (FilterRequest, operations.Filter),
    (ClearRequest, operations.Clear),
    (InsertRequest, operations.Insert),
    (RollbackToBatchRequest, operations.RollbackToBatch),
]


def test_each_body_adds_only_expected_version_to_a_store_value() -> None:
    [union, _] = get_args(BatchOperationRequest)
    assert get_args(union) == tuple(body for body, _ in BODIES)
    assert get_args(get_args(operations.BatchOperation)[0]) == tuple(value for _, value in BODIES)
    for body, value in BODIES:
        assert issubclass(body, value)
        assert list(body.model_fields) == [*value.model_fields, "expected_version"]


def test_expected_version_may_be_omitted_or_null() -> None:
    assert OPERATION.validate_python({"operation": "clear"}).expected_version is None
    clear = OPERATION.validate_python({"operation": "clear", "expected_version": None})
    assert clear.command() == operations.Clear()


def test_a_body_refuses_what_the_value_refuses() -> None:
    with pytest.raises(ValidationError) as caught:
        OPERATION.validate_python({"operation": "truncate", "keep_first": 1, "keep_last": 1})
    [problem] = caught.value.errors()
    assert problem["loc"] == ("truncate",)
    assert "got keep_first and keep_last" in problem["msg"]
    with pytest.raises(ValidationError, match="expected_version"):
        OPERATION.validate_python({"operation": "clear", "expected_version": -1})


def test_parameters_of_another_operation_are_refused() -> None:
    with pytest.raises(ValidationError, match="keep_last"):
        OPERATION.validate_python({"operation": "clear", "keep_last": 2})


def test_expected_version_is_not_negative() -> None:
    with pytest.raises(ValidationError, match="expected_version"):
        MessagesAppend.model_validate({"messages": [], "expected_version": -1})


def test_a_slot_value_is_text_todo_items_or_null() -> None:
    assert SlotUpdate.model_validate({"value": None}).value is None
    todo = SlotUpdate.model_validate({"value": [{"id": "1", "content": "x"}]}).value
    assert todo == [TodoItem(id="1", content="x")]
    with pytest.raises(ValidationError):
        SlotUpdate.model_validate({"value": 3})
