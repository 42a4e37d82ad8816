"""System reminders: stored as their own system messages (kind `reminder`),
rendered per provider at read time (docs/behaviours.md §6).

`wrap_reminder` is the `<system-reminder>` text used where a provider has no
mid-conversation system role (Anthropic, Gemini, the XML protocol).
`inline_reminders` is the legacy `inline` style of the source CLI: every
reminder folded into the last user message instead of its own place.
"""

from __future__ import annotations

from collections.abc import Sequence

from store.assembler.diagnostics import Repair, RepairKind
from store.domain.messages import Message, MessageKind, TextPart


def wrap_reminder(text: str) -> str:
    return f"<system-reminder>\n{text}\n</system-reminder>"


def is_reminder(message: Message) -> bool:
    return message.role == "system" and message.kind is MessageKind.REMINDER


def inline_reminders(history: Sequence[Message]) -> tuple[list[Message], list[Repair]]:
    """Prepend the reminders to the last user message's text (or append a text
    block when its content is a list), as the source CLI did."""
    reminders = [message for message in history if is_reminder(message)]
    if not reminders:
        return list(history), []
    last_user = max((i for i, m in enumerate(history) if m.role == "user"), default=None)
    if last_user is None:
        # Nowhere to fold them: keep each at its place, rendered natively.
        repair = Repair(
            kind=RepairKind.INLINE_REMINDER_FALLBACK,
            detail=f"no user message to fold {len(reminders)} reminder(s) into; kept in place",
        )
        return list(history), [repair]
    text = "\n".join(wrap_reminder(reminder.text) for reminder in reminders)
    target = history[last_user]
    if isinstance(target.content, str):
        folded = target.model_copy(update={"content": f"{text}\n{target.content}"})
    else:
        folded = target.model_copy(update={"content": (*target.content, TextPart(text=text))})
    out: list[Message] = []
    for i, message in enumerate(history):
        if is_reminder(message):
            continue
        out.append(folded if i == last_user else message)
    return out, []
