"""Assembly options: which provider shape, where the special block goes, what
to repair, and how reminders and budgets are handled.

Everything here is a frozen value with a default, so
`assemble(..., options=None)` gives the documented default behaviour.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from store.domain.inputs import MAX_TEXT_CHARS, Identifier, at_most
from store.domain.tokens import TokenCounter, approximate_tokens

# A clipped result keeps at least this much besides its marker; a smaller
# limit would send the marker alone.
MIN_TOOL_RESULT_CHARS = 200
MAX_TOOL_LIMITS = 256  # per-tool overrides in one request

# Images from tools: one image, and all of a payload's, decoded. Anthropic
# takes at most 5 MB an image; the whole request has its own cap.
DEFAULT_TOOL_IMAGE_BYTES = 5 * 1024 * 1024
DEFAULT_TOOL_IMAGES_BYTES = 20 * 1024 * 1024
MAX_TOOL_IMAGES_BYTES = 512 * 1024 * 1024

ToolResultChars = Annotated[int, Field(ge=MIN_TOOL_RESULT_CHARS, le=MAX_TEXT_CHARS, strict=True)]


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


class ChatReasoning(StrEnum):
    """Which stored `reasoning_content` an `openai-chat` payload sends back
    (OpenAI-compatible endpoints that think: DeepSeek, Qwen, Kimi, ...).

    `current_tool_loop`: the assistant messages since the last user message
    (the tool-use loop under way), which such endpoints expect back; earlier
    turns' reasoning is left out, as they expect. `all`: every assistant
    message's. `off`: none."""

    OFF = "off"
    CURRENT_TOOL_LOOP = "current_tool_loop"
    ALL = "all"


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
    # xml-tools: the user's last typed message wrapped in <sentra-user-question>.
    xml_user_question: bool = Field(default=True, strict=True)
    token_counter: TokenCounter = approximate_tokens
    # Images from tools: refused over these sizes (`store.assembler.tool_images`).
    max_tool_image_bytes: int = Field(
        default=DEFAULT_TOOL_IMAGE_BYTES, ge=1, le=MAX_TOOL_IMAGES_BYTES, strict=True
    )
    max_tool_images_bytes: int = Field(
        default=DEFAULT_TOOL_IMAGES_BYTES, ge=1, le=MAX_TOOL_IMAGES_BYTES, strict=True
    )
    # Reasoning replay on `openai-chat` (`ChatReasoning`).
    chat_reasoning: ChatReasoning = ChatReasoning.CURRENT_TOOL_LOOP
    # Useful information and folder notes given as items (`slot_items`):
    # the newest items, and each folder's last notes.
    useful_info_items: int = Field(default=10, ge=1, le=1_000, strict=True)
    folder_notes_per_folder: int = Field(default=3, ge=1, le=1_000, strict=True)
    # Tool results longer than this are sent as head + marker + tail
    # (`store.assembler.clipping`); None = sent whole.
    max_tool_result_chars: ToolResultChars | None = None
    # The limit for one tool's results, by tool name; wins over the default.
    max_tool_result_chars_by_tool: Annotated[
        dict[Identifier, ToolResultChars], at_most(MAX_TOOL_LIMITS, "per-tool limits")
    ] = Field(default_factory=dict)

    @property
    def effective_n(self) -> int:
        """`n`, or the policy's default when `n` is not set."""
        return self.n if self.n is not None else DEFAULT_N[self.policy]
