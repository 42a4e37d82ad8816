"""`convo xml-tools parse`: the tool calls of a model's reply in the XML tool
protocol, as JSON.

Reads the reply from a file or stdin and prints `{"calls": [{"id", "name",
"arguments"}, ...]}` — what `POST /xml-tools/parse` answers (tags in any
case; an invoke with no name or no parameter is ignored). An invoke the
store could not hold as a tool call, or input that is not text, exits 2
with one line on stderr.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from convo.errors import EXIT_BAD_INPUT, fail, read_input
from store.assembler.formats.xml_parser import InvalidToolCall, parse_tool_calls
from store.domain.inputs import MAX_TEXT_CHARS, text_problem

xml_tools_app = typer.Typer(
    name="xml-tools",
    help="The XML tool protocol (for models without native function calling).",
    no_args_is_help=True,
)


def _fail(problem: str) -> typer.Exit:
    return fail("xml-tools parse", problem, EXIT_BAD_INPUT)


@xml_tools_app.command("parse")
def parse_command(
    source: Annotated[str, typer.Argument(help="The model's reply: a file, or - for stdin.")] = "-",
    id_prefix: Annotated[
        str, typer.Option("--id-prefix", help="Each call's id is <prefix>_<n>, n from 0.")
    ] = "xml_call",
) -> None:
    """Print the tool calls of a model's reply (its <sentra-tools> blocks) as JSON."""
    text = read_input("xml-tools parse", source)
    if len(text) > MAX_TEXT_CHARS:
        raise _fail(f"the input is {len(text)} characters, over the limit of {MAX_TEXT_CHARS}")
    if problem := text_problem(text):
        raise _fail(f"the input {problem}")
    try:
        calls = parse_tool_calls(text, id_prefix=id_prefix)
    except InvalidToolCall as error:
        raise _fail(str(error)) from None
    output = {"calls": [call.model_dump(mode="json") for call in calls]}
    typer.echo(json.dumps(output, indent=2, ensure_ascii=False))


def register(app: typer.Typer) -> None:
    app.add_typer(xml_tools_app)
