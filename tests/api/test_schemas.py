"""api.schemas: request bodies refuse what they do not know."""

from __future__ import annotations

import pytest
from pydantic import TypeAdapter, ValidationError

from api.schemas import (
    BatchOperation,
    Clear,
    MessagesAppend,
    RollbackToBatch,
    SlotUpdate,
    Truncate,
    expected_version,
)
from store.context import TodoItem
from store.records import StreamState

OPERATION: TypeAdapter[BatchOperation] = TypeAdapter(BatchOperation)


def test_expected_version_null_means_any() -> None:
    assert expected_version(None) is StreamState.ANY
    assert expected_version(0) == 0


def test_the_operation_field_picks_the_body() -> None:
    assert OPERATION.validate_python({"operation": "clear"}) == Clear(operation="clear")
    truncate = OPERATION.validate_python({"operation": "truncate", "range": [2, 4]})
    assert isinstance(truncate, Truncate)
    assert truncate.range == (2, 4)
    rollback = OPERATION.validate_python({"operation": "rollback_to_batch", "batch": 1})
    assert rollback == RollbackToBatch(operation="rollback_to_batch", batch=1)


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
