"""Typed values of the Sentra XML tool protocol (docs/behaviours.md §5).

`<string>` (escaped), `<number>`, `<boolean>`, `<null/>`, `<array>` of
values, `<object>` of `<parameter name="k">` values. Non-finite numbers
(NaN, ±Infinity) have no JSON spelling and go as strings (`sanitize` has
already made them so in the arguments of every format).
"""

from __future__ import annotations

import json
import math
from typing import Any

from store.assembler.sanitize import non_finite_text


def escape_text(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def escape_attribute(text: str) -> str:
    return escape_text(text).replace('"', "&quot;")


def unescape(text: str) -> str:
    return (
        text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", '"')
        .replace("&apos;", "'")
        .replace("&amp;", "&")
    )


def render_value(value: Any) -> str:
    if value is None:
        return "<null/>"
    if isinstance(value, bool):
        return f"<boolean>{'true' if value else 'false'}</boolean>"
    if isinstance(value, int):
        return f"<number>{value}</number>"
    if isinstance(value, float):
        if not math.isfinite(value):
            return f"<string>{non_finite_text(value)}</string>"
        return f"<number>{json.dumps(value)}</number>"
    if isinstance(value, str):
        return f"<string>{escape_text(value)}</string>"
    if isinstance(value, list | tuple):
        return "<array>" + "".join(render_value(item) for item in value) + "</array>"
    if isinstance(value, dict):
        return (
            "<object>"
            + "".join(render_parameter(str(k), v) for k, v in value.items())
            + "</object>"
        )
    return f"<string>{escape_text(str(value))}</string>"


def render_parameter(name: str, value: Any) -> str:
    return f'<parameter name="{escape_attribute(name)}">{render_value(value)}</parameter>'


_finite_json = json.JSONEncoder(sort_keys=True, ensure_ascii=False, allow_nan=False).encode
_any_json = json.JSONEncoder(sort_keys=True, ensure_ascii=False).encode


def render_json(value: Any) -> str:
    """JSON for `<arguments>` / `<data>`; non-finite numbers as strings, escaped."""
    try:
        # Without a non-finite number, `_finite` would change nothing JSON shows.
        text = _finite_json(value)
    except ValueError:
        text = _any_json(_finite(value))
    return escape_text(text)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return non_finite_text(value)
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    return value
