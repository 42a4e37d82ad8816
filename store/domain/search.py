"""Search across a tenant's messages: the query, the hits, the cursor.

Two modes (docs/search.md):

    text       words, any language: PostgreSQL full-text search with the
               'simple' configuration (no stemming, no stop words) and
               `websearch_to_tsquery` syntax: `deploy failed`, `"exact
               phrase"`, `timeout OR deadline`, `-flaky`; Chinese,
               Japanese and Korean, which have no spaces, as character
               bigrams and unigrams (`store.domain.search_words`), so
               `解析器`, `测试` and `修复 parser` are found
    substring  the characters as typed, case-insensitive, anywhere in the
               text (`ILIKE '%…%'`, over an index of five-character grams
               where an operator built one): parts of words and identifiers; at
               least 3 characters, or any number of CJK ones only (found
               through the words index, then checked as typed)

What is searched is a message's current text: its content string, or the
text parts of a content array (an edited message: its latest edit's
content), the first `SEARCHABLE_CHARS` characters. Messages of every batch
are found, visible or compacted away. Hits come newest first (by the time
the message was recorded), then by conversation and seq, in keyset pages.

The PostgreSQL storage and the in-memory one implement `Storage.search`;
this module holds what both share: the validated query, the hit and page
values, the opaque cursor, and the snippets of substring (and in-memory)
matches (`search_words` holds the tokenising rule and the CJK highlights).
"""

from __future__ import annotations

import base64
import json
import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from store.domain.errors import InvalidOperation
from store.domain.inputs import (
    MAX_BIGINT,
    MAX_INTEGER,
    AgentId,
    Identifier,
    json_object,
    rule,
    text_problem,
)
from store.domain.messages import MessageKind, Role
from store.domain.search_words import (
    QUERY_PARTS,
    WordsQuery,
    has_cjk,
    highlight_spans,
    index_words,
    is_cjk_only,
    map_query,
)

__all__ = [
    "DEFAULT_SEARCH_LIMIT",
    "MAX_SEARCH_LIMIT",
    "MAX_SEARCH_QUERY_CHARS",
    "MIN_SUBSTRING_CHARS",
    "SEARCHABLE_CHARS",
    "Candidate",
    "Cursor",
    "SearchHit",
    "SearchMode",
    "SearchPage",
    "SearchQuery",
    "search_candidates",
    "search_query",
]

MAX_SEARCH_QUERY_CHARS = 500
# Fewer would match most of a store: the grams index would hand back
# nearly every row (CJK: the words index finds one character exactly).
MIN_SUBSTRING_CHARS = 3
MAX_SEARCH_LIMIT = 1000
DEFAULT_SEARCH_LIMIT = 50
MAX_SEARCH_METADATA_CHARS = 4096  # the conversation metadata a search filters on
SEARCHABLE_CHARS = 100_000  # of each message (migrations/versions/0006_search.py)
SNIPPET_CHARS = 160  # around a substring match
MAX_CURSOR_CHARS = 512

SearchMode = Literal["text", "substring"]


def search_text_problem(value: str) -> str | None:
    """Why `value` is not a search query, or None: 1–500 characters, not
    only spaces, storable text."""
    if not value.strip():
        return "must not be empty or only spaces"
    if len(value) > MAX_SEARCH_QUERY_CHARS:
        return f"is {len(value)} characters, over the limit of {MAX_SEARCH_QUERY_CHARS}"
    return text_problem(value)


SearchText = Annotated[str, rule("search_text", search_text_problem)]


class Cursor(BaseModel):
    """Where a page ended: the last hit's sort key (newest first)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    recorded_at: datetime
    conversation: uuid.UUID  # the storage's id, not the client's
    seq: int = Field(ge=1, le=MAX_BIGINT)

    def encode(self) -> str:
        raw = json.dumps(
            [self.recorded_at.isoformat(), str(self.conversation), self.seq],
            separators=(",", ":"),
        )
        return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")

    @classmethod
    def decode(cls, text: str) -> Cursor:
        """The cursor `text` encodes, or InvalidOperation naming the problem."""
        problem = "cursor is not one this API returned"
        if len(text) > MAX_CURSOR_CHARS or not text.isascii():
            raise InvalidOperation(problem)
        try:
            raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
            at, conversation, seq = json.loads(raw)
            cursor = cls(recorded_at=at, conversation=conversation, seq=seq)
        except (ValueError, TypeError, ValidationError):
            raise InvalidOperation(problem) from None
        if cursor.recorded_at.tzinfo is None:
            raise InvalidOperation(problem)
        return cursor


class SearchQuery(BaseModel):
    """What to search for, and in which messages. Every field is checked
    (type, range, size); use `search_query(...)` to get InvalidOperation
    (422) instead of pydantic's ValidationError."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    q: SearchText
    mode: SearchMode = "text"
    role: Role | None = None
    agent_id: AgentId | None = None
    kind: MessageKind | None = None
    tool_name: Identifier | None = None
    conversation_id: Identifier | None = None  # the client's id (or the UUID)
    batch: int | None = Field(default=None, ge=1, le=MAX_INTEGER)
    recorded_from: datetime | None = None  # inclusive
    recorded_to: datetime | None = None  # exclusive
    metadata: (
        Annotated[
            dict[str, Any],
            json_object(MAX_SEARCH_METADATA_CHARS, "the metadata filter"),
        ]
        | None
    ) = None
    limit: int = Field(default=DEFAULT_SEARCH_LIMIT, ge=1, le=MAX_SEARCH_LIMIT)
    cursor: str | None = Field(default=None, max_length=MAX_CURSOR_CHARS)

    @model_validator(mode="after")
    def _coherent(self) -> Self:
        if (
            self.mode == "substring"
            and not self.indexed_as_words
            and (len(self.needle) < MIN_SUBSTRING_CHARS)
        ):
            raise ValueError(
                f"a substring search needs at least {MIN_SUBSTRING_CHARS} characters, or"
                f" only Chinese, Japanese or Korean ones (got {len(self.needle)}); search"
                " whole words of any length with mode=text"
            )
        if self.mode == "text" and not _terms(self.q)[0]:
            # Only exclusions (`-word`) would match nearly every message:
            # the whole index read, for nothing a person wants.
            raise ValueError(
                "a text search needs at least one word to find (not only -excluded words)"
            )
        for name in ("recorded_from", "recorded_to"):
            value = getattr(self, name)
            if value is not None and value.tzinfo is None:
                raise ValueError(f"{name} needs a time zone (e.g. 2026-01-01T00:00:00Z)")
        if (
            self.recorded_from is not None
            and self.recorded_to is not None
            and self.recorded_from >= self.recorded_to
        ):
            raise ValueError("recorded_from must be before recorded_to")
        return self

    @property
    def needle(self) -> str:
        """The substring searched for (surrounding spaces dropped)."""
        return self.q.strip()

    @property
    def indexed_as_words(self) -> bool:
        """Whether the words index finds this search: text mode, or a
        substring of CJK characters only (their bigrams are indexed)."""
        return self.mode == "text" or is_cjk_only(self.needle)

    @property
    def words(self) -> WordsQuery:
        """What the words index is asked, CJK mapped to its bigrams and
        unigrams (`search_words.map_query`)."""
        return map_query(self.q if self.mode == "text" else self.needle)

    def after(self) -> Cursor | None:
        return None if self.cursor is None else Cursor.decode(self.cursor)


def search_query(**fields: Any) -> SearchQuery:
    """A `SearchQuery`, or InvalidOperation naming each field at fault."""
    try:
        return SearchQuery(**fields)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'query'}:"
            f" {e['msg'].removeprefix('Value error, ')}"
            for e in error.errors(include_url=False)
        )
        raise InvalidOperation(f"invalid search: {problems}") from None


class SearchHit(BaseModel):
    """One message found: where it is, what it is, the matching passage.

    `snippet` is a passage of the message's text; `highlights` are the
    [start, end) character offsets of the matches within `snippet`."""

    model_config = ConfigDict(frozen=True)

    conversation_id: str
    seq: int
    role: Role
    agent_id: str
    kind: MessageKind
    batch: int
    recorded_at: datetime
    edited: bool
    snippet: str
    highlights: list[tuple[int, int]]


class SearchPage(BaseModel):
    """A page of hits, newest first; `next_cursor` fetches the next page
    (None: this was the last)."""

    model_config = ConfigDict(frozen=True)

    hits: list[SearchHit]
    next_cursor: str | None = None


# --- snippets -------------------------------------------------------------------------

# Marks ts_headline puts around a match; removed from the text beforehand.
START_MARK = "\x02"
STOP_MARK = "\x03"


def marked_snippet(marked: str) -> tuple[str, list[tuple[int, int]]]:
    """A snippet with START_MARK/STOP_MARK around matches → (text, offsets)."""
    out: list[str] = []
    highlights: list[tuple[int, int]] = []
    length = 0
    start = None
    for piece in re.split(f"([{START_MARK}{STOP_MARK}])", marked):
        if piece == START_MARK:
            start = length
        elif piece == STOP_MARK:
            if start is not None and length > start:
                highlights.append((start, length))
            start = None
        else:
            out.append(piece)
            length += len(piece)
    return "".join(out), highlights


def _window(
    text: str, spans: list[tuple[int, int]], width: int = SNIPPET_CHARS
) -> tuple[str, list[tuple[int, int]]]:
    """About `width` characters of `text` around the first span, with the
    spans inside it (offsets relative to the window)."""
    if not spans:
        snippet = text[:width]
        return (snippet + "…" if len(text) > width else snippet), []
    first_start, first_end = spans[0]
    before = max(0, (width - (first_end - first_start)) // 2)
    start = max(0, first_start - before)
    end = min(len(text), max(first_end, start + width))
    # Not in the middle of a word, when a space is near.
    if start > 0:
        space = text.find(" ", start, first_start)
        if space != -1 and space - start < 20:
            start = space + 1
    prefix = "…" if start > 0 else ""
    suffix = "…" if end < len(text) else ""
    shift = len(prefix) - start
    inside = [(s + shift, e + shift) for s, e in spans if s >= start and e <= end]
    return prefix + text[start:end] + suffix, inside


def text_snippet(text: str, q: str) -> tuple[str, list[tuple[int, int]]]:
    """A window around the first word of the text query `q` in `text`
    (the snippet of a hit with CJK, which `ts_headline` cannot split)."""
    return _window(text, highlight_spans(text, q))


def substring_snippet(text: str, needle: str) -> tuple[str, list[tuple[int, int]]]:
    """A window around the first case-insensitive occurrence of `needle`."""
    pattern = re.compile(re.escape(needle), re.IGNORECASE)
    spans = [m.span() for m in pattern.finditer(text)]
    return _window(text, spans)


# --- the in-memory storage's matching -----------------------------------------------------

_WORD = re.compile(r"\w+")


def _terms(q: str) -> tuple[list[list[str]], list[list[str]]]:
    """A text query as (required phrases, excluded phrases; each a list of
    words): `websearch_to_tsquery`'s syntax, without OR."""
    required: list[list[str]] = []
    excluded: list[list[str]] = []
    for minus, phrase, word in QUERY_PARTS.findall(q):
        if phrase:
            words = [w.lower() for w in _WORD.findall(phrase)]
            if words:
                (excluded if minus else required).append(words)
        elif word.startswith("-"):
            excluded += [[w.lower()] for w in _WORD.findall(word)]
        elif word.lower() != "or":
            required += [[w.lower()] for w in _WORD.findall(word)]
    return required, excluded


def _contains(words: list[str], phrase: list[str]) -> Iterable[int]:
    n = len(phrase)
    return (i for i in range(len(words) - n + 1) if words[i : i + n] == phrase)


def _found(words: list[str], phrase: list[str]) -> bool:
    return next(iter(_contains(words, phrase)), None) is not None


def text_match(text: str, q: str) -> tuple[str, list[tuple[int, int]]] | None:
    """The in-memory storage's text mode: every word (and quoted phrase) of
    `q` appears as a whole word, case-insensitively, and no `-word` does; a
    snippet around the first match, or None when the text does not match."""
    mapped = map_query(q)
    required, excluded = _terms(mapped.words)
    if not required:
        return None
    if has_cjk(q) or has_cjk(text):
        words = [w.lower() for w in _WORD.findall(index_words(text))]
        if (
            any(_found(words, phrase) for phrase in excluded)
            or not all(_found(words, phrase) for phrase in required)
            or not all(run in text for run in mapped.runs)
        ):
            return None
        return text_snippet(text, q)
    found = [(m.group().lower(), m.span()) for m in _WORD.finditer(text)]
    words = [w for w, _ in found]
    if any(_found(words, phrase) for phrase in excluded):
        return None
    spans: list[tuple[int, int]] = []
    for phrase in required:
        starts = list(_contains(words, phrase))
        if not starts:
            return None
        spans += [(found[i][1][0], found[i + len(phrase) - 1][1][1]) for i in starts]
    return _window(text, sorted(spans))


def substring_match(text: str, needle: str) -> tuple[str, list[tuple[int, int]]] | None:
    """The substring mode: `needle` anywhere in `text`, case-insensitively."""
    if needle.lower() not in text.lower():
        return None
    return substring_snippet(text, needle)


def like_pattern(needle: str) -> str:
    """`needle` as an ILIKE pattern matching it anywhere, wildcards escaped."""
    escaped = needle.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


@dataclass(frozen=True, kw_only=True)
class Candidate:
    """A message as the in-memory storage offers it to `search_candidates`."""

    conversation: uuid.UUID
    shown_id: str  # the client's id of the conversation
    metadata: dict[str, Any]  # the conversation's
    seq: int
    role: Role
    agent_id: str
    kind: str
    batch: int
    recorded_at: datetime
    edited: bool
    text: str  # the current text
    tool_names: frozenset[str]  # of the calls it makes or answers


def _contains_json(whole: Any, part: Any) -> bool:
    """jsonb's `@>` (containment), for the in-memory storage."""
    if isinstance(part, dict):
        return isinstance(whole, dict) and all(
            k in whole and _contains_json(whole[k], v) for k, v in part.items()
        )
    if isinstance(part, list):
        return isinstance(whole, list) and all(
            any(_contains_json(w, p) for w in whole) for p in part
        )
    if isinstance(whole, list) and not isinstance(part, dict | list):
        return part in whole
    return bool(whole == part and type(whole) is type(part))


def search_candidates(query: SearchQuery, candidates: Iterable[Candidate]) -> SearchPage:
    """What `Storage.search_messages` answers, over candidates in memory."""
    after = query.after()
    found: list[tuple[tuple[datetime, uuid.UUID, int], SearchHit]] = []
    for c in candidates:
        key = (c.recorded_at, c.conversation, c.seq)
        if (
            (query.conversation_id is not None and c.shown_id != query.conversation_id)
            or (query.role is not None and c.role != query.role)
            or (query.agent_id is not None and c.agent_id != query.agent_id)
            or (query.kind is not None and c.kind != query.kind.value)
            or (query.batch is not None and c.batch != query.batch)
            or (query.tool_name is not None and query.tool_name not in c.tool_names)
            or (query.recorded_from is not None and c.recorded_at < query.recorded_from)
            or (query.recorded_to is not None and c.recorded_at >= query.recorded_to)
            or (query.metadata is not None and not _contains_json(c.metadata, query.metadata))
            or (after is not None and key >= (after.recorded_at, after.conversation, after.seq))
        ):
            continue
        text = c.text[:SEARCHABLE_CHARS]
        if query.mode == "substring":
            match = substring_match(text, query.needle)
        else:
            match = text_match(text, query.q)
        if match is None:
            continue
        snippet, highlights = match
        hit = SearchHit(
            conversation_id=c.shown_id,
            seq=c.seq,
            role=c.role,
            agent_id=c.agent_id,
            kind=MessageKind(c.kind),
            batch=c.batch,
            recorded_at=c.recorded_at,
            edited=c.edited,
            snippet=snippet,
            highlights=highlights,
        )
        found.append((key, hit))
    found.sort(key=lambda item: item[0], reverse=True)
    page = found[: query.limit]
    more = len(found) > query.limit
    next_cursor = None
    if more and page:
        at, conversation, seq = page[-1][0]
        next_cursor = Cursor(recorded_at=at, conversation=conversation, seq=seq).encode()
    return SearchPage(hits=[hit for _, hit in page], next_cursor=next_cursor)
