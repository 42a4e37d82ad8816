"""`convo assemble`: build a provider payload from one JSON document, or
from a stored conversation.

From a document (the default) there is no database: the document carries
the messages, the agent, its slots and the options (see
`store.assembler.document`). With `--conversation ID [--agent A]` the
payload is built through the repository from the stored conversation's
visible window and the agent's profile and slots as they are now. Options
come from the document, and from `--policy`, `--n` and `--option
NAME=VALUE` (any assembler option, e.g. `max_tool_result_chars=20000`),
which win over it. Either
way it prints `{"payload": ..., "diagnostics": ...}` as JSON. Bad input or
configuration (a window with nothing to send included) exits 2 with one
line on stderr, never a traceback, and so does an unexpected error of the
assembler (named as a bug); a database problem (with `--conversation`)
exits 1, also with one line.
"""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, Any

import typer

from convo.errors import EXIT_BAD_INPUT, fail, read_input
from store.assembler import AssembleOptions, Assembly, ProviderFormat, assemble, parse_format
from store.assembler.document import read_document
from store.domain.errors import ConvoStoreError
from store.repository import DEFAULT_TENANT


def _fail(problem: str) -> typer.Exit:
    return fail("assemble", problem, EXIT_BAD_INPUT)


def _options(items: list[str]) -> dict[str, Any]:
    """`NAME=VALUE` items as options: the value as JSON when it is some
    (`20000`, `true`, `{"read": 500}`), else as text (`all`)."""
    found: dict[str, Any] = {}
    for item in items:
        name, sep, raw = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise _fail(f"--option takes NAME=VALUE, got {item!r}")
        if name == "token_counter":
            raise _fail("--option token_counter cannot be set from the command line")
        try:
            found[name] = json.loads(raw)
        except ValueError:
            found[name] = raw
    return found


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
    conversation: Annotated[
        str | None,
        typer.Option(
            "--conversation",
            "-c",
            help="Assemble this stored conversation (its id) instead of a document.",
        ),
    ] = None,
    agent: Annotated[
        str, typer.Option(help="With --conversation: the agent whose payload to build.")
    ] = "main",
    tenant: Annotated[
        str, typer.Option("--tenant", "-t", help="With --conversation: whose conversation.")
    ] = DEFAULT_TENANT,
    option: Annotated[
        list[str] | None,
        typer.Option(
            "--option",
            "-o",
            help="NAME=VALUE: an assembler option (VALUE read as JSON, else as text), e.g. "
            "max_tool_result_chars=20000 or chat_reasoning=all; repeat for several.",
        ),
    ] = None,
) -> None:
    """Assemble a provider request body (and diagnostics) from a JSON document
    or a stored conversation."""
    overrides: dict[str, Any] = _options(option or [])
    if policy is not None:
        overrides["policy"] = policy
    if n is not None:
        overrides["n"] = n
    try:
        provider = parse_format(format)
        if conversation is not None:
            assembly = _from_store(conversation, tenant, agent, provider, overrides)
        else:
            request = read_document(read_input("assemble", source), overrides=overrides)
            assembly = assemble(
                request.messages,
                profile=request.profile,
                slots=request.slots,
                format=provider,
                options=request.options,
            )
    except (ValueError, ConvoStoreError) as error:
        raise _fail(str(error)) from None
    except typer.Exit:
        raise
    except Exception as error:  # a bug of ours: still one line, never a traceback
        raise _fail(
            f"could not assemble this input ({type(error).__name__}: {error}); "
            "this is a bug in convo-store, please report it with the input"
        ) from None
    output = {
        "payload": assembly.payload,
        "diagnostics": assembly.diagnostics.model_dump(mode="json"),
    }
    typer.echo(json.dumps(output, indent=2, ensure_ascii=False))


def _from_store(
    conversation: str, tenant: str, agent: str, provider: ProviderFormat, overrides: dict[str, Any]
) -> Assembly:
    from convo.errors import database_errors, load_settings
    from hosting.bootstrap import open_storage, repository
    from hosting.database import open_database
    from hosting.settings import Settings

    options = AssembleOptions.model_validate(overrides)

    async def build(url: str, settings: Settings) -> Assembly:
        storage = await open_storage(url, settings, max_size=1)
        try:
            return await repository(storage, settings, tenant).assemble(
                conversation, agent_id=agent, format=provider, options=options
            )
        finally:
            await storage.close()

    # A database problem exits 1 (bad input exits 2).
    with database_errors("assemble"):
        settings = load_settings()
        with open_database(settings) as database:
            return asyncio.run(build(database.url, settings))


def register(app: typer.Typer) -> None:
    app.command("assemble")(assemble_command)
