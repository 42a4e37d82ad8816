"""The messages the write- and read-path benchmarks store, and the plain table
their raw baselines store the same JSON in.

Every message is the JSON a client sends in `POST /conversations/{id}/messages`
(about 400 characters of text). The store is handed that JSON parsed into a
`Message` (what the route hands it after FastAPI parsed the body); the baseline
is handed the same JSON as text. Both are built before the clock starts.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

from store.domain.messages import Message

CHARS = 400
TOOL_EVERY = 5  # with tools: the 4th and 5th message of every 5 are a call and its result
SCHEMA = "baseline"
RAW_TABLE = f"{SCHEMA}.messages"

_VOCABULARY = (
    "def class return import self async await if else for while try except raise with "
    "yield lambda None True False parser token node tree visit error test fixture assert "
    "result value index cache query session commit rollback migration schema table column "
    "row batch window message role tool call summary history agent context file path line"
)
_WORDS = _VOCABULARY.split()


def _corpus(seed: int, chars: int) -> str:
    rng = random.Random(seed)
    words: list[str] = []
    size = 0
    while size < chars:
        words.append(rng.choice(_WORDS))
        size += len(words[-1]) + 1
    return " ".join(words)


CORPUS = _corpus(1234, 50_000)


@dataclass
class Script:
    """An endless, deterministic conversation: user and assistant take turns;
    with `tools`, every `TOOL_EVERY`th turn is an assistant tool call followed
    by its result. Call ids carry `prefix` so they are unique per conversation."""

    seed: int = 0
    tools: bool = True
    prefix: str = "call"
    count: int = 0
    _rng: random.Random = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def _text(self) -> str:
        length = self._rng.randint(CHARS - 40, CHARS + 40)
        start = self._rng.randrange(0, len(CORPUS) - length)
        return CORPUS[start : start + length]

    def next(self) -> dict[str, Any]:
        i = self.count
        self.count += 1
        call_id = f"{self.prefix}_{i // TOOL_EVERY:07d}"
        if self.tools and i % TOOL_EVERY == TOOL_EVERY - 2:
            return {
                "role": "assistant",
                "content": self._text(),
                "tool_calls": [
                    {
                        "id": call_id,
                        "name": "read_file",
                        "arguments": {"path": f"src/module_{i % 97}.py", "limit": 200},
                    }
                ],
            }
        if self.tools and i % TOOL_EVERY == TOOL_EVERY - 1:
            return {"role": "tool", "tool_call_id": call_id, "content": self._text()}
        return {"role": "user" if i % 2 == 0 else "assistant", "content": self._text()}

    def take(self, n: int) -> list[dict[str, Any]]:
        return [self.next() for _ in range(n)]


def as_messages(raw: list[dict[str, Any]]) -> list[Message]:
    """What the store is handed: the JSON parsed as the route's body model does."""
    return [Message.model_validate(m) for m in raw]


def as_json(raw: list[dict[str, Any]]) -> list[str]:
    """What the baseline is handed: the same JSON, as text."""
    return [json.dumps(m) for m in raw]


def raw_table_ddl(*, conversation_index: bool) -> list[str]:
    """The baseline's plain table (its own schema, so sizes of the store's
    tables in `public` never include it). With `conversation_index`, the index
    a read of one conversation in order needs."""
    statements = [
        f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}",
        f"CREATE TABLE {RAW_TABLE} ("
        "id bigserial PRIMARY KEY, conversation_id uuid NOT NULL, data jsonb NOT NULL)",
    ]
    if conversation_index:
        statements.append(
            f"CREATE INDEX messages_conversation_id ON {RAW_TABLE} (conversation_id, id)"
        )
    return statements
