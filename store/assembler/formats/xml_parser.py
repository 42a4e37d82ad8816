"""Parsing model output in the Sentra XML tool protocol back into ToolCalls.

A small lenient tag reader (no DTDs, no entities beyond the five XML ones),
so model output that is not quite well-formed still yields what it can,
read as the XML-tool agent's parser reads it (docs/behaviours.md §5):
- tag and attribute names in any case (`<SENTRA-TOOLS>`, `<Invoke
  NAME="x">`, `<String>`); attribute values double-quoted, single-quoted or
  bare (`<invoke name=tool>`, as the protocol's own summary writes it);
- an `<invoke>` with no name or no parameters is ignored, as in the source;
- a parameter whose value is untyped text is read as JSON when it parses,
  else as a string; a `<number>` that is not a finite number stays text
  (the renderer writes non-finite numbers as strings).
A call the store could not hold (a name over 200 characters, arguments over
their limits) raises `InvalidToolCall` naming the invoke and the problem.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from store.assembler.formats.xml_values import unescape
from store.domain.inputs import MAX_JSON_DEPTH
from store.domain.messages import ToolCall


class InvalidToolCall(ValueError):
    """An invoke in the model's output that is no tool call the store can hold."""


_VALUE = r"""(?:"[^"]*"|'[^']*'|[^\s"'<>/=`]+)"""
_TAG = re.compile(rf"<(/?)([A-Za-z][\w\-]*)((?:\s+[\w\-]+\s*=\s*{_VALUE})*)\s*(/?)>")
_ATTRIBUTE = re.compile(r"""([\w\-]+)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'<>/=`]+))""")
_BLOCK_TAG = re.compile(r"<(/?)sentra-tools\s*>", re.IGNORECASE)
# Deeper than any argument may be (`MAX_JSON_DEPTH`), with room for the
# invoke, its parameter and a typed value around it.
MAX_DEPTH = MAX_JSON_DEPTH * 2 + 4
_INTEGER = re.compile(r"-?\d+")
_TYPED = {"string", "number", "boolean", "null", "array", "object"}


@dataclass
class _Node:
    tag: str
    attributes: dict[str, str]
    children: list[_Node | str] = field(default_factory=list)

    def elements(self) -> list[_Node]:
        return [child for child in self.children if isinstance(child, _Node)]

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)


def _tree(text: str) -> _Node:
    root = _Node(tag="", attributes={})
    stack = [root]
    position = 0
    for match in _TAG.finditer(text):
        if match.start() > position:
            stack[-1].children.append(unescape(text[position : match.start()]))
        position = match.end()
        closing, tag, attributes, self_closing = match.groups()
        tag = tag.lower()
        if closing:
            if any(node.tag == tag for node in stack[1:]):
                while stack.pop().tag != tag:
                    pass
            continue
        if len(stack) > MAX_DEPTH:
            raise InvalidToolCall(f"tags nested more than {MAX_DEPTH} levels deep")
        node = _Node(
            tag=tag,
            attributes={
                name.lower(): unescape(double or single or bare)
                for name, double, single, bare in _ATTRIBUTE.findall(attributes)
            },
        )
        stack[-1].children.append(node)
        if not self_closing:
            stack.append(node)
    if position < len(text):
        stack[-1].children.append(unescape(text[position:]))
    return root


def _typed(node: _Node) -> Any:
    text = node.text()
    if node.tag == "string":
        return text
    if node.tag == "number":
        stripped = text.strip()
        try:
            number = int(stripped) if _INTEGER.fullmatch(stripped) else float(stripped)
        except ValueError:
            return stripped
        return number if math.isfinite(number) else stripped
    if node.tag == "boolean":
        return text.strip().lower() == "true"
    if node.tag == "null":
        return None
    if node.tag == "array":
        return [_typed(child) for child in node.elements()]
    return {
        child.attributes.get("name", ""): _parameter_value(child)
        for child in node.elements()
        if child.tag == "parameter"
    }


def _parameter_value(parameter: _Node) -> Any:
    elements = parameter.elements()
    if len(elements) == 1 and elements[0].tag in _TYPED:
        return _typed(elements[0])
    raw = parameter.text().strip()
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):  # not JSON, or nested past the parser's stack
        return raw
    # JSON text may say NaN or 1e999, which no argument may hold: kept as text.
    return raw if _non_finite(value) else value


def _non_finite(value: Any) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, list):
        return any(_non_finite(v) for v in value)
    if isinstance(value, dict):
        return any(_non_finite(v) for v in value.values())
    return False


def _blocks(text: str) -> list[str]:
    """The text of each `<sentra-tools>` block: from an opening tag to the
    next closing one (an unclosed block is no block). One pass over the
    tags: a search per opening tag for its close would be quadratic in a
    reply of many unclosed ones."""
    blocks: list[str] = []
    start: int | None = None
    for match in _BLOCK_TAG.finditer(text):
        if not match.group(1):
            if start is None:
                start = match.end()
        elif start is not None:
            blocks.append(text[start : match.start()])
            start = None
    return blocks


def parse_tool_calls(text: str, *, id_prefix: str = "xml_call") -> tuple[ToolCall, ...]:
    """Every invoke with a name and at least one parameter, in order."""
    calls: list[ToolCall] = []
    for block in _blocks(text):
        for invoke in _tree(block).elements():
            name = invoke.attributes.get("name", "")
            parameters = [p for p in invoke.elements() if p.tag == "parameter"]
            if invoke.tag != "invoke" or not name or not parameters:
                continue
            arguments = {p.attributes.get("name", ""): _parameter_value(p) for p in parameters}
            try:
                call = ToolCall(id=f"{id_prefix}_{len(calls)}", name=name, arguments=arguments)
            except ValidationError as error:
                first = error.errors()[0]
                where = ".".join(str(p) for p in first["loc"])
                raise InvalidToolCall(
                    f"invoke {len(calls)} ({name[:40]!r}): {where}: {first['msg']}"
                ) from None
            calls.append(call)
    return tuple(calls)
