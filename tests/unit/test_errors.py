"""The error tree stays complete: store.domain.errors' docstring, api.errors' status
table (STATUS_OF and its docstring) and docs/errors.md name every error that
store/domain/errors.py defines, and nothing that does not exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import api.errors
import store.domain.errors
from store.domain.errors import (
    DEFAULT_RETRY_AFTER,
    ConcurrencyConflict,
    ConversationBusy,
    ConvoStoreError,
    IdempotencyConflict,
    StorageError,
    StorageFailure,
    StorageUnavailable,
)

ROOT = Path(__file__).resolve().parents[2]


def _defined_errors() -> dict[str, type[ConvoStoreError]]:
    """Every ConvoStoreError (the base included) defined in store/domain/errors.py."""
    return {
        name: value
        for name, value in vars(store.domain.errors).items()
        if isinstance(value, type)
        and issubclass(value, ConvoStoreError)
        and value.__module__ == store.domain.errors.__name__
    }


def _tree() -> dict[str, str | None]:
    """The docstring's tree: each name → the name it hangs from (None: root)."""
    doc = store.domain.errors.__doc__ or ""
    tree: dict[str, str | None] = {}
    stack: list[tuple[int, str]] = []  # (column of the name, name)
    for line in doc.splitlines():
        match = re.match(r"^(\s*(?:[│ ]*[├└]── )?)([A-Z]\w*)(?:\s|$)", line)
        if match is None or not line.startswith("    "):
            continue
        column, name = len(match.group(1)), match.group(2)
        while stack and stack[-1][0] >= column:
            stack.pop()
        assert name not in tree, f"{name} appears twice in the tree"
        tree[name] = stack[-1][1] if stack else None
        stack.append((column, name))
    return tree


def _error_parent(kind: type[ConvoStoreError]) -> str | None:
    parents = [base for base in kind.__bases__ if issubclass(base, ConvoStoreError)]
    assert len(parents) <= 1, f"{kind.__name__} has more than one ConvoStoreError base"
    return parents[0].__name__ if parents else None


def test_the_docstring_tree_names_every_error_and_nothing_else() -> None:
    tree = _tree()
    defined = _defined_errors()
    assert set(tree) == set(defined), (
        f"missing from the tree: {sorted(set(defined) - set(tree))}; "
        f"in the tree but not defined: {sorted(set(tree) - set(defined))}"
    )


def test_the_docstring_tree_hangs_each_error_from_its_base() -> None:
    tree = _tree()
    for name, kind in _defined_errors().items():
        assert tree[name] == _error_parent(kind), f"{name} hangs from the wrong node"


def _store_errors_below_the_root() -> dict[str, type[ConvoStoreError]]:
    return {n: k for n, k in _defined_errors().items() if k is not ConvoStoreError}


def _first_match(kind: type[ConvoStoreError]) -> int:
    for listed, status in api.errors.STATUS_OF:
        if issubclass(kind, listed):
            return status
    return api.errors.DEFAULT_STORE_STATUS


def test_status_of_lists_every_error() -> None:
    listed = {kind.__name__ for kind, _ in api.errors.STATUS_OF}
    assert listed == set(_store_errors_below_the_root())


def test_status_of_lists_subclasses_before_their_bases() -> None:
    kinds = [kind for kind, _ in api.errors.STATUS_OF]
    for i, earlier in enumerate(kinds):
        for later in kinds[i + 1 :]:
            assert not issubclass(later, earlier), f"{later.__name__} is shadowed by {earlier}"


def _docstring_table() -> dict[str, int]:
    """api.errors' docstring table: the name each line starts with → its status."""
    table: dict[str, int] = {}
    for line in (api.errors.__doc__ or "").splitlines():
        match = re.match(r"^\s+([A-Z]\w*)\b.*→\s*(\d{3})", line)
        if match:
            table[match.group(1)] = int(match.group(2))
    return table


def test_the_api_docstring_table_names_every_error_with_its_status() -> None:
    table = _docstring_table()
    for name, kind in _defined_errors().items():
        assert name in table, f"{name} is missing from api.errors' status table"
        assert table[name] == _first_match(kind), f"the table gives {name} the wrong status"


def test_the_api_docstring_table_names_no_error_that_does_not_exist() -> None:
    # Besides the store's errors, only the API's own types.
    api_types = {"Unauthorized", "ReadOnlyKey"}
    assert set(_docstring_table()) - set(_defined_errors()) == api_types


def test_docs_errors_md_names_every_error() -> None:
    text = (ROOT / "docs" / "errors.md").read_text(encoding="utf-8")
    for name in _defined_errors():
        assert re.search(rf"\b{name}\b", text), f"docs/errors.md does not mention {name}"


# The new errors themselves.


def test_storage_failures_are_store_errors_with_retry_hints() -> None:
    busy = ConversationBusy("c1")
    assert isinstance(busy, StorageFailure)
    assert busy.retryable
    assert busy.retry_after == DEFAULT_RETRY_AFTER
    assert busy.conversation_id == "c1"
    assert "c1" in str(busy)
    assert "retry after 1 s" in str(busy)

    unavailable = StorageUnavailable("the pool is empty", retry_after=2.5)
    assert unavailable.retryable
    assert unavailable.retry_after == 2.5
    assert "the pool is empty" in str(unavailable)

    error = StorageError(sqlstate="23514", error_class="CheckViolation")
    assert not error.retryable
    assert error.retry_after is None
    assert (error.sqlstate, error.error_class) == ("23514", "CheckViolation")
    assert str(error) == "the database failed: CheckViolation (SQLSTATE 23514)"


def test_a_busy_conversation_need_not_be_named() -> None:
    busy = ConversationBusy(None, retry_after=3)
    assert busy.conversation_id is None
    assert str(busy).startswith("the conversation is busy")


@pytest.mark.parametrize(
    "kind", [ConversationBusy, StorageUnavailable, StorageError, StorageFailure]
)
def test_storage_failures_hang_from_storage_failure(kind: type[StorageFailure]) -> None:
    assert issubclass(kind, StorageFailure)
    assert issubclass(kind, ConvoStoreError)


def test_existing_errors_keep_their_messages() -> None:
    assert str(ConcurrencyConflict("c", 1, 2)) == (
        "concurrency conflict on conversation c: expected 1, but it is at version 2"
    )
    assert str(ConcurrencyConflict("c", "no stream", None)).endswith("it is at no stream")
    assert str(IdempotencyConflict("k", "why")) == (
        "idempotency key 'k' was already used for a different append: why"
    )


def test_a_lost_race_names_no_versions() -> None:
    conflict = ConcurrencyConflict.lost_race("c")
    assert (conflict.expected, conflict.actual) == (None, None)
    assert "another writer" in str(conflict)
    assert IdempotencyConflict(None).key is None
