"""The standalone payload validator: the numbered rules of provider-rules.md
for each format, usable on any payload (not only ours).

    validate("anthropic", payload)   -> list of Violation(rule, where, message)
    ensure_valid("anthropic", payload)  raises InvalidPayload listing them

Rule ids: provider-rules.md's, plus the ones each `rules` module adds
(O7-O10, R6-R11, A11-A14, G7-G9 and G11, X3) and J1 (strict JSON) for all;
docs/assembler.md has the table of every rule and where it is enforced.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from store.assembler.options import ProviderFormat
from store.assembler.rules import (
    anthropic,
    gemini,
    json_values,
    openai_chat,
    openai_responses,
    xml_tools,
)
from store.assembler.rules.violation import Violation
from store.domain.errors import ConvoStoreError

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
    """The format's rules, then J1 (the payload is strict JSON), for every format."""
    return [*_CHECKS[ProviderFormat(format)](payload), *json_values.check(payload)]


def ensure_valid(format: ProviderFormat | str, payload: dict[str, Any]) -> None:
    violations = validate(format, payload)
    if violations:
        raise InvalidPayload(str(ProviderFormat(format).value), violations)
