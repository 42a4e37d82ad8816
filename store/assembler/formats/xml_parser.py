"""Parsing model output in the Sentra XML tool protocol back into ToolCalls.

A small lenient tag reader (no DTDs, no entities beyond the five XML ones),
so model output that is not quite well-formed still yields what it can.
An `<invoke>` with no parameters is ignored, as in the source. A parameter
whose value is untyped text is read as JSON when it parses, else as a string.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from store.assembler.formats.xml_values import unescape
from store.domain.messages import ToolCall

_TAG = re.compile(r'<(/?)([A-Za-z][\w\-]*)((?:\s+[\w\-]+\s*=\s*"[^"]*")*)\s*(/?)>')
_ATTRIBUTE = re.compile(r'([\w\-]+)\s*=\s*"([^"]*)"')
_BLOCK = re.compile(r"<sentra-tools>(.*?)</sentra-tools>", re.DOTALL)
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
        if closing:
            if any(node.tag == tag for node in stack[1:]):
                while stack.pop().tag != tag:
                    pass
            continue
        node = _Node(tag=tag, attributes=dict(_ATTRIBUTE.findall(attributes)))
        node.attributes = {k: unescape(v) for k, v in node.attributes.items()}
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
            return int(stripped) if _INTEGER.fullmatch(stripped) else float(stripped)
        except ValueError:
            return stripped
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
        return json.loads(raw)
    except ValueError:
        return raw


def parse_tool_calls(text: str, *, id_prefix: str = "xml_call") -> tuple[ToolCall, ...]:
    """Every invoke with a name and at least one parameter, in order."""
    calls: list[ToolCall] = []
    for block in _BLOCK.findall(text):
        for invoke in _tree(block).elements():
            name = invoke.attributes.get("name", "")
            parameters = [p for p in invoke.elements() if p.tag == "parameter"]
            if invoke.tag != "invoke" or not name or not parameters:
                continue
            arguments = {p.attributes.get("name", ""): _parameter_value(p) for p in parameters}
            calls.append(ToolCall(id=f"{id_prefix}_{len(calls)}", name=name, arguments=arguments))
    return tuple(calls)
