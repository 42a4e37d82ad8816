"""Alternating turns for providers that need user/model alternation
(Anthropic, Gemini): consecutive same-role pieces are merged into one turn.

Merged user turns keep tool results first (Anthropic A5; Gemini's
functionResponse parts answer the previous model turn); merged model turns
keep thinking blocks first (Anthropic A9).

A merge is a listed repair when it joins two messages the history kept
apart: two user messages, two assistant messages, or a tool result that
came after the user's words and is moved before them. Tool results sharing
one user turn, and the user's words following them in it, are the
provider's own shape for "here are the results, and then I say" (A5), not
a repair: listing them put one repair per tool round into the diagnostics
of every healthy conversation, burying the ones that say something.
"""

from __future__ import annotations

from typing import Any

from store.assembler.diagnostics import Repair, RepairKind

Block = dict[str, Any]


class Turns:
    def __init__(self, *, user_role: str, content_key: str) -> None:
        self.user_role = user_role
        self.content_key = content_key
        self.turns: list[dict[str, Any]] = []
        self.other_repairs: list[Repair] = []
        self.merged: dict[int, int] = {}  # turn index -> pieces merged into it
        # The last turn's role and blocks (None: no turn yet), and how many
        # leading (result / thinking) blocks it starts with.
        self._role: str | None = None
        self._blocks: list[Block] = []
        self._lead = 0
        # Whether the last turn holds a piece other than leading blocks (the
        # user's words, in a user turn): a second one is a listed merge.
        self._ordinary = False

    @property
    def repairs(self) -> list[Repair]:
        """One repair per merged turn (not one per piece), then the others."""
        merges = [
            Repair(
                kind=RepairKind.MERGED_FOR_ALTERNATION,
                detail=f"{count + 1} consecutive {self.turns[index]['role']} messages "
                "merged into one turn",
                payload_index=index,
            )
            for index, count in sorted(self.merged.items())
        ]
        return merges + self.other_repairs

    def add(self, role: str, blocks: list[Block], lead: int = 0) -> None:
        """Add one message's pieces, its `lead` leading ones (tool results in
        a user turn, thinking in a model turn) first; the list becomes the
        turn's (callers pass a fresh one).

        The caller says how many lead, rather than the turn asking each block:
        it built them, and a predicate called per block would be paid by
        every block of a long conversation (docs/assembler.md, "What the
        fingerprint and the renderers cost")."""
        if not blocks:
            return
        ordinary = lead < len(blocks)
        if role != self._role:
            self.turns.append({"role": role, self.content_key: blocks})
            self._role, self._blocks, self._lead = role, blocks, lead
            self._ordinary = ordinary
            return
        index = len(self.turns) - 1
        content = self._blocks
        # Results (and the words after them) share a user turn by the
        # provider's rules; anything else joined here was apart in the history.
        listed = role != self.user_role or self._ordinary
        self._ordinary = self._ordinary or ordinary
        moved = False
        if lead:
            # The new leading blocks go after the turn's, the others at the
            # end: the turn stays ordered in time linear in the pieces added.
            at = self._lead
            moved = len(content) > at
            content[at:at] = blocks[:lead]
            self._lead = at + lead
            if lead < len(blocks):
                content.extend(blocks[lead:])
        else:
            content.extend(blocks)
        if moved and role != self.user_role:
            self.other_repairs.append(
                Repair(
                    kind=RepairKind.HOISTED_THINKING,
                    detail="thinking blocks moved first in a merged assistant turn",
                    payload_index=index,
                )
            )
        if listed:
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
