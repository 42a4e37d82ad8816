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
import sys
from pathlib import Path
from typing import Annotated

import typer

from store.assembler.formats.xml_parser import InvalidToolCall, parse_tool_calls
from store.domain.inputs import MAX_TEXT_CHARS, text_problem

EXIT_BAD_INPUT = 2

xml_tools_app = typer.Typer(
    name="xml-tools",
    help="The XML tool protocol (for models without native function calling).",
    no_args_is_help=True,
)


def _fail(problem: str) -> typer.Exit:
    typer.echo(f"convo xml-tools parse: {' '.join(problem.split())}", err=True)
    return typer.Exit(code=EXIT_BAD_INPUT)


def _read(source: str) -> str:
    try:
        if source == "-":
            return sys.stdin.read()
        path = Path(source)
        if not path.is_file():
            raise _fail(f"no such file: {source}")
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise _fail(f"the input is not UTF-8 text ({error.reason})") from None


@xml_tools_app.command("parse")
def parse_command(
    source: Annotated[str, typer.Argument(help="The model's reply: a file, or - for stdin.")] = "-",
    id_prefix: Annotated[
        str, typer.Option("--id-prefix", help="Each call's id is <prefix>_<n>, n from 0.")
    ] = "xml_call",
) -> None:
    """Print the tool calls of a model's reply (its <sentra-tools> blocks) as JSON."""
    text = _read(source)
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
