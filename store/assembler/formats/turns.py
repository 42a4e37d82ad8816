"""Alternating turns for providers that need user/model alternation
(Anthropic, Gemini): consecutive same-role pieces are merged into one turn.

Merged user turns keep tool results first (Anthropic A5; Gemini's
functionResponse parts answer the previous model turn); merged model turns
keep thinking blocks first (Anthropic A9). Each merge is a listed repair.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from store.assembler.diagnostics import Repair, RepairKind

Block = dict[str, Any]


class Turns:
    def __init__(
        self,
        *,
        user_role: str,
        content_key: str,
        is_result: Callable[[Block], bool],
        is_thinking: Callable[[Block], bool] = lambda block: False,
    ) -> None:
        self.user_role = user_role
        self.content_key = content_key
        self.is_result = is_result
        self.is_thinking = is_thinking
        self.turns: list[dict[str, Any]] = []
        self.other_repairs: list[Repair] = []
        self.merged: dict[int, int] = {}  # turn index -> pieces merged into it
        # Leading (result / thinking) blocks of the last turn once a merge has
        # ordered it; None until then.
        self._lead: int | None = None

    @property
    def repairs(self) -> list[Repair]:
        """One repair per merged turn (not one per piece), then the others."""
        merges = [
            Repair(
                kind=RepairKind.MERGED_FOR_ALTERNATION,
                detail=f"{count + 1} consecutive {self.turns[index]['role']} pieces "
                "merged into one turn",
                payload_index=index,
            )
            for index, count in sorted(self.merged.items())
        ]
        return merges + self.other_repairs

    def add(self, role: str, blocks: list[Block]) -> None:
        """Add one message's pieces; the list becomes the turn's (callers pass a
        fresh one)."""
        if not blocks:
            return
        turns = self.turns
        if not turns or turns[-1]["role"] != role:
            turns.append({"role": role, self.content_key: blocks})
            self._lead = None
            return
        index = len(turns) - 1
        content: list[Block] = turns[index][self.content_key]
        first = self.is_result if role == self.user_role else self.is_thinking
        if self._lead is None:
            # First merge into this turn: order it whole. From then on it is
            # ordered, and `_lead` counts its leading (results / thinking) blocks.
            merged = content + blocks
            ordered = [b for b in merged if first(b)]
            self._lead = len(ordered)
            ordered += [b for b in merged if not first(b)]
            moved = ordered != merged
            turns[index][self.content_key] = ordered
        else:
            # Put the new leading blocks after the turn's, the others at the end:
            # the same order as sorting the whole turn again, in time linear in
            # the pieces added rather than in the turn's length.
            leading = [b for b in blocks if first(b)]
            others = [b for b in blocks if not first(b)] if leading else blocks
            moved = bool(leading) and (
                len(content) > self._lead or blocks[: len(leading)] != leading
            )
            if leading:
                content[self._lead : self._lead] = leading
                self._lead += len(leading)
            content.extend(others)
        if moved and role != self.user_role:
            self.other_repairs.append(
                Repair(
                    kind=RepairKind.HOISTED_THINKING,
                    detail="thinking blocks moved first in a merged assistant turn",
                    payload_index=index,
                )
            )
        self.merged[index] = self.merged.get(index, 0) + 1

    def last_block(self) -> tuple[int, int] | None:
        """(turn, block) of the last block added so far."""
        if not self.turns:
            return None
        return len(self.turns) - 1, len(self.turns[-1][self.content_key]) - 1

    def ensure_user_first(self, continuation: Block) -> bool:
        """Start with a minimal user turn if the history starts with the model."""
        if self.turns and self.turns[0]["role"] != self.user_role:
            self.turns.insert(0, {"role": self.user_role, self.content_key: [continuation]})
            # Everything recorded so far moved one turn down.
            self.merged = {index + 1: count for index, count in self.merged.items()}
            self.other_repairs = [
                r.model_copy(update={"payload_index": (r.payload_index or 0) + 1})
                for r in self.other_repairs
            ]
            self.other_repairs.insert(
                0,
                Repair(
                    kind=RepairKind.INSERTED_USER_TURN,
                    detail="the visible history starts with an assistant turn",
                    payload_index=0,
                ),
            )
            return True
        return False
