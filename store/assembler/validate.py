"""The standalone payload validator: the numbered rules of provider-rules.md
for each format, usable on any payload (not only ours).

    validate("anthropic", payload)   -> list of Violation(rule, where, message)
    ensure_valid("anthropic", payload)  raises InvalidPayload listing them
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from store.assembler.options import ProviderFormat
from store.assembler.rules import anthropic, gemini, openai_chat, openai_responses, xml_tools
from store.assembler.rules.violation import Violation
from store.errors import ConvoStoreError

_CHECKS: dict[ProviderFormat, Callable[[dict[str, Any]], list[Violation]]] = {
    ProviderFormat.OPENAI_CHAT: openai_chat.check,
    ProviderFormat.OPENAI_RESPONSES: openai_responses.check,
    ProviderFormat.ANTHROPIC: anthropic.check,
    ProviderFormat.GEMINI: gemini.check,
    ProviderFormat.XML_TOOLS: xml_tools.check,
}


class InvalidPayload(ConvoStoreError, ValueError):
    """A payload breaks one or more provider rules."""

    def __init__(self, format: str, violations: list[Violation]) -> None:
        self.format = format
        self.violations = violations
        listed = "; ".join(str(v) for v in violations)
        super().__init__(f"{format} payload breaks {len(violations)} rule(s): {listed}")


def validate(format: ProviderFormat | str, payload: dict[str, Any]) -> list[Violation]:
    return _CHECKS[ProviderFormat(format)](payload)


def ensure_valid(format: ProviderFormat | str, payload: dict[str, Any]) -> None:
    violations = validate(format, payload)
    if violations:
        raise InvalidPayload(str(ProviderFormat(format).value), violations)
