"""Assembly options: which provider shape, where the special block goes, what
to repair, and how reminders and budgets are handled.

Everything here is a frozen value with a default, so
`assemble(..., options=None)` gives the documented default behaviour.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from store.domain.tokens import TokenCounter, approximate_tokens


class ProviderFormat(StrEnum):
    OPENAI_CHAT = "openai-chat"
    OPENAI_RESPONSES = "openai-responses"
    ANTHROPIC = "anthropic"
    GEMINI = "gemini"
    XML_TOOLS = "xml-tools"


class PlacementPolicy(StrEnum):
    """Where the special block goes (behaviours §1)."""

    AFTER_TOOL_RESULT = "after_tool_result"
    BEFORE_ASSISTANT = "before_assistant"
    FROM_END = "from_end"
    AFTER_SYSTEM = "after_system"
    TAIL = "tail"


class ReminderStyle(StrEnum):
    """`native`: each reminder at its place, in the provider's shape.
    `inline`: the source CLI's legacy style, folded into the last user message."""

    NATIVE = "native"
    INLINE = "inline"


DEFAULT_N: dict[PlacementPolicy, int] = {
    PlacementPolicy.AFTER_TOOL_RESULT: 3,
    PlacementPolicy.BEFORE_ASSISTANT: 3,
    PlacementPolicy.FROM_END: 5,
    PlacementPolicy.AFTER_SYSTEM: 0,
    PlacementPolicy.TAIL: 0,
}

DEFAULT_XML_FINAL_INSTRUCTION = (
    "To call a tool, reply with exactly one <sentra-tools> block and nothing else:\n"
    "<sentra-tools>\n"
    '  <invoke name="TOOL_NAME">\n'
    '    <parameter name="PARAM"><string>value</string></parameter>\n'
    "  </invoke>\n"
    "</sentra-tools>\n"
    "Values are typed: <string>, <number>, <boolean>, <null/>, <array>, or <object> of "
    "<parameter>s. Results come back as <sentra-result> blocks. "
    "If no tool is needed, answer normally."
)


class AssembleOptions(BaseModel):
    """How to assemble one payload. Frozen; build a new one to change it."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    policy: PlacementPolicy = PlacementPolicy.AFTER_TOOL_RESULT
    n: int | None = Field(default=None, ge=1)
    repair: bool = True
    merge_same_role: bool = False
    token_budget: int | None = Field(default=None, ge=1)
    reminder_style: ReminderStyle = ReminderStyle.NATIVE
    cache_breakpoints: bool = True
    # Folded into the last user message in xml-tools mode; None or "" = none.
    xml_final_instruction: str | None = DEFAULT_XML_FINAL_INSTRUCTION
    token_counter: TokenCounter = approximate_tokens

    @property
    def effective_n(self) -> int:
        """`n`, or the policy's default when `n` is not set."""
        return self.n if self.n is not None else DEFAULT_N[self.policy]
