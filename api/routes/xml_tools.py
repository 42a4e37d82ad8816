"""The Sentra XML tool protocol over HTTP: a model's output → its tool calls.

`POST /xml-tools/parse` (`parseXmlToolCalls`) reads the `<sentra-tools>`
blocks of a model's reply, as `convo xml-tools parse` and
`store.assembler.parse_tool_calls` do (docs/assembler.md, "The XML tool
protocol"): tags in any case, every invoke with a name and a parameter, in
order. An invoke the store could not hold as a tool call (a name over 200
characters, arguments over their limits) is a 422 naming it.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ConfigDict, Field

from api.routing import JSONRoute
from store.assembler.formats.xml_parser import InvalidToolCall, parse_tool_calls
from store.domain.inputs import MAX_TEXT_CHARS, Text, at_most
from store.domain.messages import ToolCall

router = APIRouter(prefix="/xml-tools", tags=["assembly"], route_class=JSONRoute)

# Room for `_<n>` after the prefix within an id's 200 characters.
MAX_ID_PREFIX_CHARS = 100


class XmlToolsParseRequest(BaseModel):
    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "text": '<sentra-tools>\n  <invoke name="ls">\n    <parameter name="path">'
                    "<string>.</string></parameter>\n  </invoke>\n</sentra-tools>"
                }
            ]
        },
    )

    text: Annotated[Text, at_most(MAX_TEXT_CHARS, "characters")] = Field(
        description="The model's reply, with its <sentra-tools> blocks."
    )
    id_prefix: str = Field(
        default="xml_call",
        min_length=1,
        max_length=MAX_ID_PREFIX_CHARS,
        pattern=r"^[A-Za-z0-9_\-]+$",
        description="Each call's id is `<id_prefix>_<n>`, n from 0.",
    )


class ParsedToolCalls(BaseModel):
    model_config = ConfigDict(frozen=True)

    calls: list[ToolCall] = Field(description="The tool calls, in the order they were written.")


@router.post(
    "/parse",
    summary="Read the tool calls of a model's reply in the XML tool protocol",
    operation_id="parseXmlToolCalls",
)
def parse(body: XmlToolsParseRequest) -> ParsedToolCalls:
    """Every `<invoke>` with a name and at least one parameter, in order, its
    typed values read back (`<string>`, `<number>`, `<boolean>`, `<null/>`,
    `<array>`, `<object>`; untyped text as JSON when it parses)."""
    try:
        calls = parse_tool_calls(body.text, id_prefix=body.id_prefix)
    except InvalidToolCall as error:
        raise RequestValidationError(
            [{"loc": ("body", "text"), "msg": str(error), "type": "value_error"}]
        ) from None
    return ParsedToolCalls(calls=list(calls))
