"""Content parts shared by the adapters: text and images, with whatever a
part carries beyond them kept aside (`extra`) so it comes back unchanged."""

from __future__ import annotations

import re
from typing import Any

from store.domain.messages import ImagePart, TextPart

_DATA_URL = re.compile(r"data:([^;,]+);base64,(.*)", re.DOTALL)


class Unmapped(Exception):
    """This value has no structure in the store: keep it opaque."""


def image_from_url(url: Any) -> ImagePart:
    if not isinstance(url, str):
        raise Unmapped("image without a URL")
    found = _DATA_URL.fullmatch(url)
    if found:
        return ImagePart(data=found.group(2), media_type=found.group(1))
    return ImagePart(url=url)


def image_url(part: ImagePart) -> str:
    if part.url is not None:
        return part.url
    return f"data:{part.media_type};base64,{part.data}"


def text_part(text: Any) -> TextPart:
    if not isinstance(text, str):
        raise Unmapped("text part without text")
    return TextPart(text=text)
