"""Images returned by tools (screenshots, rendered pages): sent with their
result where the format takes them, after the results where it does not,
and refused when too large.

Where each format puts them (docs/assembler.md, "Images from tools"):
- Anthropic: in the `tool_result` block's content, after its text;
- OpenAI Responses: in the `function_call_output`'s output list
  (`input_text`, then `input_image`s);
- Gemini: as `parts` of the `functionResponse` (inline data, or file data
  for a URL);
- OpenAI Chat and xml-tools, whose tool results are text only: in one user
  message right after the block's results (or the round's assistant
  message), each call's images after a line naming the call.

Size: an inline image's decoded bytes are counted (a URL's size is not
known to the store, and is the provider's to fetch and limit). One image
over `max_tool_image_bytes`, or the images of the payload's tool results
together over `max_tool_images_bytes`, refuse the build with
`ToolImageTooLarge`, which names the call and the sizes: sending it would
be refused by the provider anyway, after the upload.
"""

from __future__ import annotations

from collections.abc import Sequence

from store.assembler.errors import ToolImageTooLarge
from store.domain.messages import ImagePart, Message


def result_images(message: Message) -> list[ImagePart]:
    """The image parts of a tool result (none when its content is text)."""
    content = message.content
    if isinstance(content, str):
        return []
    return [p for p in content if isinstance(p, ImagePart)]


def images_note(call_id: str) -> str:
    """The line put before a call's images where they follow the results."""
    return f"[images returned by tool call {call_id}]"


def image_bytes(part: ImagePart) -> int:
    """An inline image's decoded size in bytes (0 for a URL)."""
    data = part.data
    if data is None:
        return 0
    stripped = data.rstrip("=")
    return len(stripped) * 3 // 4


def check_tool_images(history: Sequence[Message], *, per_image: int, per_payload: int) -> None:
    """Refuse a history whose tool-result images are over the limits."""
    total = 0
    for message in history:
        if message.role != "tool" or isinstance(message.content, str):
            continue
        for index, part in enumerate(result_images(message)):
            size = image_bytes(part)
            call = message.tool_call_id or ""
            if size > per_image:
                raise ToolImageTooLarge(
                    f"image {index} of the result of tool call {call!r} is {size:,} bytes, "
                    f"over the limit of {per_image:,} per image (max_tool_image_bytes)"
                )
            total += size
            if total > per_payload:
                raise ToolImageTooLarge(
                    f"the images of the tool results come to over {per_payload:,} bytes "
                    f"(at the result of tool call {call!r}: {total:,}), over the limit per "
                    "payload (max_tool_images_bytes)"
                )
