"""Query parameters several routes declare alike: a page's cursor, a page's
size, an optional filter by a name or an id."""

from __future__ import annotations

from typing import Any

from fastapi import Query

# Cursors are URL-safe base64 (store.domain.listing, store.domain.search).
CURSOR_PATTERN = r"^[A-Za-z0-9_-]+$"


def cursor_query(description: str, *, max_length: int) -> Any:
    """A cursor sent back as the previous page gave it."""
    return Query(max_length=max_length, pattern=CURSOR_PATTERN, description=description)


def limit_query(description: str, *, maximum: int) -> Any:
    """How many items a page holds at most, 1 to `maximum`."""
    return Query(ge=1, le=maximum, description=description)


def name_filter(description: str, *, max_length: int, example: str) -> Any:
    """Only the items of this name or id (never empty)."""
    return Query(min_length=1, max_length=max_length, description=description, examples=[example])
