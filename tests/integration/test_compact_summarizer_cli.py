"""`convo compact --summarizer openai-compatible` against a real database and
a stub model on 127.0.0.1: the model's summary leads the new batch; a
failing model changes nothing; no settings → exit 2 naming them."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from typer.testing import CliRunner

from convo import app
from store.domain.messages import Message, MessageKind
from store.postgres import PostgresStorage
from store.repository import Repository
from tests.chat_stub import ChatStub, chat_answer


def _seed(database_url: str, tenant: str) -> str:
    async def run() -> str:
        storage = await PostgresStorage.connect(database_url)
        try:
            repository = Repository(storage, tenant=tenant)
            cid = (await repository.create_conversation()).id
            messages = []
            for k in range(12):
                messages += [
                    Message(role="user", content=f"request {k}"),
                    Message(role="assistant", content=f"answer {k}"),
                ]
            await repository.append_messages(cid, messages)
            return str(cid)
        finally:
            await storage.close()

    return asyncio.run(run())


def _window(database_url: str, tenant: str, cid: str) -> list[Any]:
    async def run() -> list[Any]:
        storage = await PostgresStorage.connect(database_url)
        try:
            return await Repository(storage, tenant=tenant).visible_window(cid)
        finally:
            await storage.close()

    return asyncio.run(run())


def _compact(database_url: str, tenant: str, stub: ChatStub | None) -> tuple[int, str, str]:
    env = {"DATABASE_URL": database_url}
    if stub is not None:
        env |= {"CONVO_SUMMARIZER_URL": stub.url, "CONVO_SUMMARIZER_MODEL": "m"}
    result = CliRunner().invoke(
        app,
        [
            "compact",
            "--tenant",
            tenant,
            "--max-messages",
            "10",
            "--summarizer",
            "openai-compatible",
            "--json",
        ],
        env=env,
    )
    return result.exit_code, result.stdout, result.stderr


def test_the_model_writes_the_summary(database_url: str) -> None:
    cid = _seed(database_url, "cli-model")
    stub = ChatStub(chat_answer("Twelve requests, all answered."))
    try:
        code, out, err = _compact(database_url, "cli-model", stub)
    finally:
        stub.close()
    assert code == 0, err
    [result] = json.loads(out)["results"]
    assert result["status"] == "compacted"
    summaries = [
        m for m in _window(database_url, "cli-model", cid) if m.kind is MessageKind.SUMMARY
    ]
    assert [m.text for m in summaries] == ["Twelve requests, all answered."]
    assert stub.bodies[0]["model"] == "m"


def test_a_failing_model_changes_nothing(database_url: str) -> None:
    cid = _seed(database_url, "cli-down")
    before = _window(database_url, "cli-down", cid)
    stub = ChatStub({"error": "down"}, status=500)
    try:
        code, out, _ = _compact(database_url, "cli-down", stub)
    finally:
        stub.close()
    assert code == 3
    [result] = json.loads(out)["results"]
    assert result["status"] == "summary_failed"
    assert _window(database_url, "cli-down", cid) == before


def test_without_settings_it_exits_2_naming_them(database_url: str) -> None:
    code, _, err = _compact(database_url, "cli-none", None)
    assert code == 2
    assert "CONVO_SUMMARIZER_URL and CONVO_SUMMARIZER_MODEL" in err
