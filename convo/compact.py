"""`convo compact`: run the compaction job (store.compaction) on one tenant.

    convo compact --tenant acme --max-messages 400 --keep-last user=2 --dry-run
    convo compact --tenant acme --max-tokens 60000 --conversation user-123
    convo compact --tenant acme --max-messages 400 --summarizer openai-compatible

Finds the tenant's conversations whose agent's window is over a threshold
(or takes the ones named with `--conversation`), and starts a new batch
for each, led by a summary: by the default, extractive summarizer, or with
`--summarizer openai-compatible` by the model the settings name
(`CONVO_SUMMARIZER_URL`, `CONVO_SUMMARIZER_MODEL`, `CONVO_SUMMARIZER_API_KEY`;
without them, exit 2 naming them). A model that fails leaves that
conversation as it was (reported, exit 3). A rich
progress bar on stderr while it runs; a table of what happened to each
conversation, or with `--json` the report as JSON, on stdout.

Exit codes: 0 when every conversation was compacted or had nothing to do;
3 when some could not be (a failed summary, writers that kept the
conversation changing, a store error — the table says which); 2 for bad
options; 1 for a database problem (one line on stderr, as every database
command).
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from convo.errors import database_errors, load_settings

if TYPE_CHECKING:
    from hosting.settings import Settings
    from store.compaction import CompactionPolicy, CompactionReport, Summarizer

EXIT_BAD_OPTIONS = 2
EXIT_SOME_FAILED = 3

err_console = Console(stderr=True)


def _fail(problem: str) -> typer.Exit:
    typer.echo(f"convo compact: {' '.join(problem.split())}", err=True)
    return typer.Exit(code=EXIT_BAD_OPTIONS)


def _policy(
    max_messages: int | None,
    max_tokens: int | None,
    keep_last: list[str],
    agent: str,
    target_ratio: float,
) -> CompactionPolicy:
    from pydantic import ValidationError

    from store.compaction import CompactionPolicy, parse_keep_last, policy_refusal
    from store.domain.errors import InvalidOperation

    try:
        return CompactionPolicy(
            max_messages=max_messages,
            max_tokens=max_tokens,
            keep_last=parse_keep_last(keep_last),
            agent_id=agent,
            target_ratio=target_ratio,
        )
    except ValidationError as error:
        raise _fail(str(policy_refusal(error))) from None
    except InvalidOperation as error:
        raise _fail(str(error)) from None


def _summarizer(name: str, settings: Settings) -> Summarizer:
    from store.compaction import make_summarizer
    from store.domain.errors import ConfigurationError

    key = settings.summarizer_api_key
    try:
        return make_summarizer(
            name,
            url=None if settings.summarizer_url is None else str(settings.summarizer_url),
            model=settings.summarizer_model,
            api_key=None if key is None else key.get_secret_value(),
            timeout=settings.summarizer_timeout_s,
        )
    except ConfigurationError as error:
        raise _fail(str(error)) from None


def _size(size: object) -> str:
    messages = getattr(size, "messages", None)
    return "" if messages is None else f"{messages} / {getattr(size, 'tokens', 0)}"


def report_table(report: CompactionReport) -> Table:
    what = "would be compacted (dry run)" if report.dry_run else "compacted"
    table = Table(title=f"compaction of tenant {report.tenant}, agent {report.agent_id}: {what}")
    for column in (
        "conversation",
        "status",
        "before (msgs / tokens)",
        "boundary (seq, kind)",
        "leaving",
        "retained",
        "after (msgs / tokens)",
        "detail",
    ):
        table.add_column(column, overflow="fold", no_wrap=column in ("conversation", "status"))
    for r in report.results:
        table.add_row(
            r.conversation_id,
            r.status,
            _size(r.before),
            "" if r.boundary_seq is None else f"{r.boundary_seq} ({r.boundary_kind})",
            f"{r.hidden} (seq {r.hidden_range[0]}-{r.hidden_range[1]})" if r.hidden_range else "",
            str(len(r.retained)) if r.retained else "",
            _size(r.after),
            r.detail or "",
        )
    return table


def register(app: typer.Typer) -> None:
    @app.command()
    def compact(
        tenant: Annotated[str, typer.Option(help="The tenant whose conversations to compact.")],
        max_messages: Annotated[
            int | None,
            typer.Option(min=1, help="Compact windows holding more messages than this."),
        ] = None,
        max_tokens: Annotated[
            int | None,
            typer.Option(min=1, help="Compact windows of more tokens (estimated) than this."),
        ] = None,
        keep_last: Annotated[
            list[str] | None,
            typer.Option(
                help="ROLE=N: keep the last N messages of ROLE visible (repeat per role).",
            ),
        ] = None,
        agent: Annotated[str, typer.Option(help="The agent whose window to compact.")] = "main",
        target_ratio: Annotated[
            float,
            typer.Option(
                min=0.05,
                max=0.95,
                help="Keep at most this share of a threshold after the boundary.",
            ),
        ] = 0.5,
        dry_run: Annotated[
            bool,
            typer.Option(
                "--dry-run", help="Say what would be compacted and where; change nothing."
            ),
        ] = False,
        conversation: Annotated[
            list[str] | None,
            typer.Option(help="Only this conversation (its id; repeat for several)."),
        ] = None,
        limit: Annotated[
            int | None, typer.Option(min=1, help="Look at most at this many conversations.")
        ] = None,
        concurrency: Annotated[
            int, typer.Option(min=1, max=64, help="Conversations compacted at once.")
        ] = 4,
        as_json: Annotated[
            bool, typer.Option("--json", help="Print the report as JSON instead of a table.")
        ] = False,
        summarizer: Annotated[
            str,
            typer.Option(
                help="extractive (no model) | openai-compatible (CONVO_SUMMARIZER_* settings)."
            ),
        ] = "extractive",
    ) -> None:
        """Start a new batch, led by a summary, for each conversation whose
        agent's window is over a threshold. Nothing is deleted."""
        from hosting.database import open_database

        if not tenant.strip():
            raise _fail("--tenant cannot be empty")
        policy = _policy(max_messages, max_tokens, keep_last or [], agent, target_ratio)
        with database_errors("compact"):
            settings = load_settings()
            writer = _summarizer(summarizer, settings)
            with open_database(settings) as database:
                from hosting.migrate import upgrade_database

                upgrade_database(database.url, settings)
                report = asyncio.run(
                    _run(
                        database.url,
                        settings,
                        tenant=tenant,
                        policy=policy,
                        conversation_ids=conversation,
                        limit=limit,
                        dry_run=dry_run,
                        concurrency=concurrency,
                        summarizer=writer,
                    )
                )
        if as_json:
            typer.echo(json.dumps(report.model_dump(mode="json"), ensure_ascii=False))
        else:
            console = Console()
            console.print(report_table(report))
            counts = {s: report.count(s) for s in sorted({r.status for r in report.results})}
            console.print(
                ", ".join(f"{n} {s}" for s, n in counts.items()) or "nothing over the thresholds"
            )
        # A conversation named that is not there could not be compacted either.
        if report.failed or report.count("not_found"):
            raise typer.Exit(code=EXIT_SOME_FAILED)


async def _run(
    url: str,
    settings: Settings,
    *,
    tenant: str,
    policy: CompactionPolicy,
    conversation_ids: list[str] | None,
    limit: int | None,
    dry_run: bool,
    concurrency: int,
    summarizer: Summarizer,
) -> CompactionReport:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    from hosting.bootstrap import open_storage, repository
    from store.compaction import CompactionJob

    storage = await open_storage(url, settings, max_size=2 * concurrency + 2)
    try:
        job = CompactionJob(
            repository(storage, settings, tenant=tenant),
            policy,
            concurrency=concurrency,
            summarizer=summarizer,
        )
        with Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=err_console,
            transient=False,
        ) as bar:
            task = bar.add_task("planning" if dry_run else "compacting", total=None)
            return await job.run(
                conversation_ids=conversation_ids,
                limit=limit,
                dry_run=dry_run,
                on_start=lambda total: bar.update(task, total=total),
                on_result=lambda _: bar.advance(task),
            )
    finally:
        await storage.close()
