"""Offline docs, gzip and CORS: /docs and /redoc load nothing from outside
the app; large responses are gzipped for clients that accept it (never the
event stream); CORS is off unless origins are configured."""

from __future__ import annotations

import gzip
import re

import httpx
import pytest
from fastapi import FastAPI

from api.app import create_app
from api.deps import Services
from hosting.settings import Settings
from tests.api.conftest import BASE_URL, auth, new_conversation
from tests.api.test_feed import SSE

GZIP = {"Accept-Encoding": "gzip"}


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
async def test_the_docs_load_every_asset_from_the_app(client: httpx.AsyncClient, page: str) -> None:
    response = await client.get(page)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    urls = re.findall(r"""(?:src|href)=["']([^"']+)["']""", response.text)
    assert urls, "the page loads its scripts"
    assert "://" not in response.text.replace("http://www.w3.org", ""), "nothing from outside"
    for url in urls:
        assert url.startswith("/"), url
        asset = await client.get(url)
        assert asset.status_code == 200, url
        assert len(asset.content) > 1000, url


async def _long_conversation(client: httpx.AsyncClient) -> str:
    cid = await new_conversation(client)
    messages = [{"role": "user", "content": f"message {i}: " + "words " * 40} for i in range(30)]
    response = await client.post(f"/conversations/{cid}/messages", json={"messages": messages})
    assert response.status_code == 201, response.text
    return cid


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/messages", None),
        ("GET", "/export", None),
        ("POST", "/assemble", {"format": "openai-chat"}),
    ],
)
async def test_large_responses_are_gzipped_for_clients_that_accept_it(
    acme: httpx.AsyncClient, method: str, path: str, body: dict[str, str] | None
) -> None:
    cid = await _long_conversation(acme)
    url = f"/conversations/{cid}{path}"
    plain = await acme.request(method, url, json=body, headers={"Accept-Encoding": "identity"})
    zipped = await acme.request(method, url, json=body, headers=GZIP)
    assert plain.status_code == zipped.status_code == 200
    assert "content-encoding" not in plain.headers
    assert zipped.headers["content-encoding"] == "gzip"
    assert zipped.content == plain.content  # httpx decoded it
    assert len(plain.content) > 4096


async def test_small_responses_are_not_gzipped(acme: httpx.AsyncClient) -> None:
    cid = await new_conversation(acme)
    response = await acme.get(f"/conversations/{cid}", headers=GZIP)
    assert response.status_code == 200
    assert "content-encoding" not in response.headers


async def test_a_gzipped_body_is_gzip(app: FastAPI, acme: httpx.AsyncClient) -> None:
    cid = await _long_conversation(acme)
    transport = httpx.ASGITransport(app=app)
    async with (
        httpx.AsyncClient(transport=transport, base_url=BASE_URL) as raw,
        raw.stream(
            "GET", f"/conversations/{cid}/export", headers={**GZIP, **acme.headers}
        ) as response,
    ):
        compressed = b"".join([chunk async for chunk in response.aiter_raw()])
    assert gzip.decompress(compressed).count(b"\n") == 30


async def test_the_event_stream_is_never_gzipped(
    app: FastAPI, acme: httpx.AsyncClient, key: str
) -> None:
    cid = await new_conversation(acme)
    async with SSE(app, key, accept_encoding="gzip") as stream:
        # Sent as it happens, in plain text: gzip would hold it back.
        await stream.until(lambda text: ": connected" in text)
        response = await acme.post(
            f"/conversations/{cid}/messages",
            json={"messages": [{"role": "user", "content": "hello"}]},
        )
        assert response.status_code == 201
        await stream.until(lambda text: "hello" in text)
    assert stream.status == 200


PREFLIGHT = {
    "Origin": "https://app.example",
    "Access-Control-Request-Method": "POST",
    "Access-Control-Request-Headers": "authorization, content-type",
}


async def test_cors_is_off_by_default(acme: httpx.AsyncClient) -> None:
    response = await acme.get("/conversations", headers={"Origin": "https://app.example"})
    assert response.status_code == 200
    assert "access-control-allow-origin" not in response.headers
    preflight = await acme.options("/conversations", headers=PREFLIGHT)
    assert "access-control-allow-origin" not in preflight.headers


async def test_cors_answers_the_configured_origins(
    settings: Settings, services: Services, key: str
) -> None:
    configured = settings.model_copy(update={"cors_origins": ("https://app.example",)})
    app = create_app(configured, services=services)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as client:
        preflight = await client.options("/conversations", headers=PREFLIGHT)
        assert preflight.status_code == 200
        assert preflight.headers["access-control-allow-origin"] == "https://app.example"
        assert "authorization" in preflight.headers["access-control-allow-headers"].lower()
        answer = await client.get(
            "/conversations", headers={"Origin": "https://app.example", **auth(key)}
        )
        assert answer.status_code == 200
        assert answer.headers["access-control-allow-origin"] == "https://app.example"
        assert "x-request-id" in answer.headers["access-control-expose-headers"].lower()
        other = await client.get(
            "/conversations", headers={"Origin": "https://evil.example", **auth(key)}
        )
        assert "access-control-allow-origin" not in other.headers
