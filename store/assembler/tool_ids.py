"""Each provider's rule for tool-call ids, and the renaming of ids it would
refuse (behaviours §3).

| format | rule (what the provider answers otherwise) |
|---|---|
| anthropic | `^[a-zA-Z0-9_-]+$` ("tool_use.id: String should match pattern") |
| openai-chat | at most 40 characters ("string too long. Expected ... maximum length 40") |
| openai-responses | at most 64 characters (`call_id`, "maximum length 64") |
| gemini, xml-tools | none known (xml-tools sends no ids) |

An id the rule refuses is renamed, the same way for the call and every
result naming it, so the payload stays paired: the characters the rule does
not allow become `_`, the id is cut to leave room, and `_` plus the first 8
hex digits of the id's sha256 is appended (`functions.ls:0` →
`functions_ls_0_<8 hex>`), longer digits only if that name is taken in the
payload. The new name depends only on the id (and, on a clash, on the ids of
the payload), so the same call gets the same name at every build and the
prefix cache holds. One `renamed_tool_id` repair per renamed id.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from hashlib import sha256

from store.assembler.diagnostics import Repair, RepairKind
from store.domain.messages import Message

_NOT_ANTHROPIC = re.compile(r"[^a-zA-Z0-9_-]")


@dataclass(frozen=True, kw_only=True)
class IdRule:
    format: str
    rule: str  # how the docs and repairs say it
    refused_characters: re.Pattern[str] | None = None  # matches a character it refuses
    max_length: int | None = None

    def accepts(self, tool_id: str) -> bool:
        if not tool_id:
            return False
        if self.max_length is not None and len(tool_id) > self.max_length:
            return False
        return self.refused_characters is None or self.refused_characters.search(tool_id) is None

    def accepts_all(self, ids: list[str]) -> bool:
        """Whether every id is accepted, in one pass over their text."""
        if not ids:
            return True
        if not all(ids) or (self.max_length is not None and max(map(len, ids)) > self.max_length):
            return False
        # "-" is accepted by every rule: joining by it adds no refused character.
        return self.refused_characters is None or (
            self.refused_characters.search("-".join(ids)) is None
        )

    def rename(self, tool_id: str, taken: set[str]) -> str:
        cleaned = (
            self.refused_characters.sub("_", tool_id)
            if self.refused_characters is not None
            else tool_id
        )
        digest = sha256(tool_id.encode("utf-8", "surrogatepass")).hexdigest()
        for size in (8, 12, 16, 24, 32):
            suffix = f"_{digest[:size]}"
            if self.max_length is not None:
                room = self.max_length - len(suffix)
                if room < 1:
                    break
                candidate = cleaned[:room] + suffix
            else:
                candidate = cleaned + suffix
            if candidate not in taken:
                return candidate
        n = 2  # every digest length taken: count on
        while True:
            suffix = f"_{digest[:8]}_{n}"
            keep = None if self.max_length is None else self.max_length - len(suffix)
            candidate = cleaned[:keep] + suffix
            if candidate not in taken:
                return candidate
            n += 1


ANTHROPIC = IdRule(
    format="anthropic", rule="match ^[a-zA-Z0-9_-]+$", refused_characters=_NOT_ANTHROPIC
)
OPENAI_CHAT = IdRule(format="openai-chat", rule="are at most 40 characters", max_length=40)
OPENAI_RESPONSES = IdRule(
    format="openai-responses", rule="(call_id) are at most 64 characters", max_length=64
)


def _ids(history: Iterable[Message]) -> list[str]:
    """Every call id and result id, in order of first appearance."""
    found: dict[str, None] = {}
    for message in history:
        if message.tool_calls:
            for call in message.tool_calls:
                found[call.id] = None
        elif message.tool_call_id is not None:
            found[message.tool_call_id] = None
    return list(found)


def provider_ids(history: Iterable[Message], rule: IdRule) -> tuple[dict[str, str], list[Repair]]:
    """The renamings the rule needs ({} when every id is accepted), and their repairs."""
    ids = _ids(history)
    if rule.accepts_all(ids):
        return {}, []
    refused = [tool_id for tool_id in ids if not rule.accepts(tool_id)]
    taken = {tool_id for tool_id in ids if rule.accepts(tool_id)}
    renamed: dict[str, str] = {}
    repairs: list[Repair] = []
    for tool_id in refused:
        new_id = rule.rename(tool_id, taken)
        taken.add(new_id)
        renamed[tool_id] = new_id
        repairs.append(
            Repair(
                kind=RepairKind.RENAMED_TOOL_ID,
                detail=f"tool id {tool_id!r} sent as {new_id!r}: {rule.format} tool ids "
                f"{rule.rule}",
            )
        )
    return renamed, repairs
