"""The console at /ui in a real browser: Debian's Chromium, headless,
driven by Selenium through Debian's chromedriver, against the app as
`convo serve` runs it (`create_app` with a database URL, under uvicorn in a
thread) on a database of its own, shared by this folder's tests.

The tests are skipped, saying why, where /usr/bin/chromium or
/usr/bin/chromedriver is missing (`apt-get install chromium
chromium-driver`; .ci/run installs them). Each view's screenshot is
written to `CONVO_CONSOLE_SCREENSHOTS` when it is set (docs/console/ holds
the current ones: docs/console.md says how to refresh them), else to a
temporary folder.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.types import ASGIApp, Receive, Scope, Send

from api.app import create_app
from hosting.keys import READ_ONLY
from hosting.settings import Settings
from tests.client.serving import on_uvicorn
from tests.conftest import _admin, _with_database

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1280,860",
)
LONG = "long-run"
LONG_MESSAGES = 5_000
TENANT = "acme"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Marked, so a run may leave them to another (.ci/run runs them once).
    driven = [item for item in items if "browser" in getattr(item, "fixturenames", ())]
    for item in driven:
        item.add_marker(pytest.mark.browser)
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    if not missing:
        return
    skip = pytest.mark.skip(
        reason=f"no browser: {', '.join(missing)} missing"
        " (apt-get install -y chromium chromium-driver)"
    )
    for item in driven:
        item.add_marker(skip)


@dataclass
class Recorder:
    """Every request's method, path and query string, as the server saw it:
    what the console asked, and proof that the key is never in a URL."""

    app: ASGIApp
    requests: list[tuple[str, str, str]] = field(default_factory=list)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            query = scope.get("query_string", b"").decode("latin-1")
            self.requests.append((scope["method"], scope["path"], query))
        await self.app(scope, receive, send)

    def asked(self, path: str) -> list[str]:
        """The query strings of the GET requests to `path`."""
        return [query for method, seen, query in self.requests if (method, seen) == ("GET", path)]


@dataclass(frozen=True)
class Console:
    base_url: str
    writer: str  # a read-write key of TENANT
    reader: str  # a read-only key of TENANT
    stranger: str  # a key of another tenant
    recorder: Recorder

    def client(self, key: str | None = None) -> httpx.Client:
        return httpx.Client(
            base_url=self.base_url,
            headers={"X-API-Key": key or self.writer},
            timeout=60,
        )


@pytest.fixture(scope="session")
def console_database(database_server: str, template_database: str) -> Iterator[str]:
    """One migrated database for every console test (they only add to it)."""
    name = f"convo_console_{uuid.uuid4().hex[:12]}"
    _admin(database_server, f'CREATE DATABASE "{name}" TEMPLATE "{template_database}"')
    yield _with_database(database_server, name)
    _admin(database_server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _keys(url: str) -> tuple[str, str, str]:
    import asyncio

    from hosting.engines import make_async_engine
    from hosting.keys import create_key

    async def make() -> tuple[str, str, str]:
        engine = make_async_engine(url, Settings.from_env(), pool_size=1, max_overflow=0)
        try:
            _, writer = await create_key(engine, TENANT, "console-writer")
            _, reader = await create_key(engine, TENANT, "console-reader", scope=READ_ONLY)
            _, stranger = await create_key(engine, "globex", "console-stranger")
            return writer, reader, stranger
        finally:
            await engine.dispose()

    return asyncio.run(make())


@pytest.fixture(scope="session")
def console(console_database: str) -> Iterator[Console]:
    """The app as `convo serve` runs it, with the conversations the tests read."""
    settings = Settings.from_env()
    recorder = Recorder(create_app(settings, database_url=console_database))
    with on_uvicorn(recorder) as url:
        writer, reader, stranger = _keys(console_database)
        served = Console(url, writer, reader, stranger, recorder)
        seed(served)
        yield served


def _append(client: httpx.Client, cid: str, messages: list[dict[str, Any]]) -> None:
    response = client.post(f"/conversations/{cid}/messages", json={"messages": messages})
    assert response.status_code in (200, 201), response.text


def seed(console: Console) -> None:
    """What the views show: a long conversation with batches, a summary and
    tool blocks, a few more to list, Chinese text, content that looks like HTML."""
    with console.client() as client:
        for n in range(30):
            created = client.post(
                "/conversations",
                json={
                    "id": f"chat-{n:02d}",
                    "metadata": {"project": "atlas" if n % 3 else "billing"},
                },
            )
            assert created.status_code == 201, created.text
            _append(client, f"chat-{n:02d}", [{"role": "user", "content": f"question {n}"}])
        client.post(f"/conversations/chat-{5:02d}/archive").raise_for_status()
        assert client.post("/conversations", json={"id": LONG}).status_code == 201
        first: list[dict[str, Any]] = [
            {"role": "system", "content": "You are a careful deploy assistant."},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": "call_ls", "name": "ls", "arguments": {"path": "/srv"}}],
            },
            {"role": "tool", "tool_call_id": "call_ls", "content": "app.log deploy.sh"},
        ]
        rest = [
            {
                "role": "user" if n % 2 else "assistant",
                "content": f"step {n}: the deploy of build {n} ran",
            }
            for n in range(len(first) + 1, LONG_MESSAGES)
        ]
        pending: dict[str, Any] = {
            "role": "assistant",
            "content": "checking the log",
            "tool_calls": [{"id": "call_tail", "name": "tail", "arguments": {"file": "app.log"}}],
        }
        messages: list[dict[str, Any]] = [*first, *rest, pending]
        assert len(messages) == LONG_MESSAGES
        for start in range(0, len(messages), 1_000):
            _append(client, LONG, messages[start : start + 1_000])
        summary = {
            "role": "user",
            "content": "Summary: builds 1 to 4000 deployed cleanly.",
            "kind": "summary",
        }
        batch = client.post(
            f"/conversations/{LONG}/batches",
            json={"operation": "start_batch", "boundary_seq": 4_001, "summary": summary},
        )
        assert batch.status_code == 201, batch.text
        client.put(f"/conversations/{LONG}/messages/4500/pin").raise_for_status()

        assert client.post("/conversations", json={"id": "travel"}).status_code == 201
        _append(
            client,
            "travel",
            [
                {"role": "user", "content": "明天 北京 见面 deploy window at noon"},
                {"role": "assistant", "content": "好的，我们明天在北京见面。"},
            ],
        )
        hostile = {"note": "<img src=x onerror=window.__xss=1>"}
        assert (
            client.post("/conversations", json={"id": "hostile", "metadata": hostile}).status_code
            == 201
        )
        _append(
            client,
            "hostile",
            [
                {
                    "role": "user",
                    "content": "<script>window.__xss = 1; alert('xss')</script> xsscheck",
                },
                {
                    "role": "assistant",
                    "content": '<img src=x onerror="window.__xss=1;alert(1)"> xsscheck',
                },
            ],
        )
    with console.client(console.stranger) as client:
        assert client.post("/conversations", json={"id": "globex-secret"}).status_code == 201


@pytest.fixture(scope="session")
def screenshots() -> Iterator[Path]:
    chosen = os.environ.get("CONVO_CONSOLE_SCREENSHOTS")
    if chosen:
        folder = Path(chosen)
        folder.mkdir(parents=True, exist_ok=True)
        yield folder
        return
    with tempfile.TemporaryDirectory(prefix="convo-console-") as temporary:
        yield Path(temporary)


@pytest.fixture(scope="session")
def downloads() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="convo-downloads-") as temporary:
        yield Path(temporary)


@pytest.fixture(scope="session")
def browser(console: Console, downloads: Path) -> Iterator[Any]:
    """Headless Chromium with a fresh profile, for the whole session (closed
    before the server stops: a live tail it holds open would keep it up)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="convo-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.add_experimental_option(
        "prefs",
        {"download.default_directory": str(downloads), "download.prompt_for_download": False},
    )
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


__all__ = ["LONG", "LONG_MESSAGES", "TENANT", "Console", "Recorder"]
