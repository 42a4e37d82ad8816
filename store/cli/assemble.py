"""`convo assemble`: build a provider payload offline from one JSON document.

No database: the document carries the messages, the agent, its slots and
the options (see `store.assembler.document`). Prints
`{"payload": ..., "diagnostics": ...}` as JSON. Bad input or configuration
exits 2 with one line on stderr, never a traceback.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from store.assembler import assemble, parse_format
from store.assembler.document import read_document
from store.errors import ConfigurationError

EXIT_BAD_INPUT = 2


def _fail(problem: str) -> typer.Exit:
    typer.echo(f"convo assemble: {' '.join(problem.split())}", err=True)
    return typer.Exit(code=EXIT_BAD_INPUT)


def _read(source: str) -> str:
    if source == "-":
        return sys.stdin.read()
    path = Path(source)
    if not path.is_file():
        raise _fail(f"no such file: {source}")
    return path.read_text(encoding="utf-8")


def assemble_command(
    format: Annotated[
        str,
        typer.Option(
            "--format",
            "-f",
            help="openai-chat | openai-responses | anthropic | gemini | xml-tools",
        ),
    ],
    source: Annotated[str, typer.Argument(help="JSON document file, or - for stdin.")] = "-",
    policy: Annotated[
        str | None,
        typer.Option(help="after_tool_result | before_assistant | from_end | after_system | tail"),
    ] = None,
    n: Annotated[int | None, typer.Option("--n", help="The policy's n.")] = None,
) -> None:
    """Assemble a provider request body (and diagnostics) from a JSON document."""
    overrides: dict[str, Any] = {}
    if policy is not None:
        overrides["policy"] = policy
    if n is not None:
        overrides["n"] = n
    try:
        provider = parse_format(format)
        request = read_document(_read(source), overrides=overrides)
        assembly = assemble(
            request.messages,
            profile=request.profile,
            slots=request.slots,
            format=provider,
            options=request.options,
        )
    except (ValueError, ConfigurationError) as error:
        raise _fail(str(error)) from None
    output = {
        "payload": assembly.payload,
        "diagnostics": assembly.diagnostics.model_dump(mode="json"),
    }
    typer.echo(json.dumps(output, indent=2, ensure_ascii=False))


def register(app: typer.Typer) -> None:
    app.command("assemble")(assemble_command)
