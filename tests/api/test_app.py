"""api.app: the factory, health, the OpenAPI document, an owned engine."""

from __future__ import annotations

import httpx
from fastapi import FastAPI

from api.app import create_app
from hosting.settings import Settings
from tests.api.conftest import BASE_URL, MakeKey, brief, summarise

ROUTES = {
    ("get", "/me"),
    ("get", "/conversations"),
    ("post", "/conversations"),
    ("patch", "/conversations/{conversation_id}"),
    ("post", "/conversations/{conversation_id}/unarchive"),
    ("get", "/conversations/{conversation_id}/messages"),
    ("get", "/conversations/{conversation_id}"),
    ("post", "/conversations/{conversation_id}/archive"),
    ("delete", "/conversations/{conversation_id}"),
    ("post", "/conversations/{conversation_id}/messages"),
    ("put", "/conversations/{conversation_id}/messages/{seq}"),
    ("put", "/conversations/{conversation_id}/agents/{agent_id}"),
    ("put", "/conversations/{conversation_id}/agents/{agent_id}/slots/{slot}"),
    ("get", "/conversations/{conversation_id}/agents/{agent_id}"),
    ("post", "/conversations/{conversation_id}/batches"),
    ("get", "/conversations/{conversation_id}/batches"),
    ("get", "/conversations/{conversation_id}/batches/{batch}/messages"),
    ("get", "/conversations/{conversation_id}/window"),
    ("get", "/conversations/{conversation_id}/messages/recent"),
    ("get", "/conversations/{conversation_id}/roles/{role}"),
    ("get", "/conversations/{conversation_id}/counts"),
    ("get", "/conversations/{conversation_id}/tool-blocks"),
    ("post", "/conversations/{conversation_id}/assemble"),
    ("get", "/conversations/{conversation_id}/export"),
    ("get", "/conversations/{conversation_id}/events"),
    ("get", "/events"),
    ("get", "/events/stream"),
    ("get", "/messages/search"),
    ("post", "/conversations/{conversation_id}/fork"),
    ("put", "/conversations/{conversation_id}/messages/{seq}/pin"),
    ("delete", "/conversations/{conversation_id}/messages/{seq}/pin"),
    ("post", "/compactions"),
    ("post", "/xml-tools/parse"),
    ("post", "/conversations/{conversation_id}/compact"),
    ("get", "/health"),
    ("get", "/ready"),
    ("get", "/metrics"),
}


async def test_health_needs_no_key(client: httpx.AsyncClient) -> None:
    response = await client.get("/health")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


async def test_openapi_lists_every_route_with_tags_and_summaries(
    client: httpx.AsyncClient,
) -> None:
    document = (await client.get("/openapi.json")).json()
    listed = {(method, path) for path, ops in document["paths"].items() for method in ops}
    assert listed == ROUTES
    for path, ops in document["paths"].items():
        for method, op in ops.items():
            assert op["tags"], f"{method} {path} has no tag"
            assert op["summary"], f"{method} {path} has no summary"
    assert set(document["components"]["securitySchemes"]) == {"HTTPBearer", "APIKeyHeader"}


async def test_unknown_route_has_the_error_shape(client: httpx.AsyncClient) -> None:
    response = await client.get("/nowhere")
    assert response.status_code == 404
    assert brief(response) == {"type": "HTTPError", "detail": "Not Found"}
    assert response.json()["title"] == "Not Found"


async def test_an_app_without_injected_services_owns_them_for_its_lifespan(
    database_url: str, settings: Settings
) -> None:
    app: FastAPI = create_app(settings, database_url=database_url)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as client:
            # A 401 for a well-formed key means the database answered the look-up.
            response = await client.post("/conversations", headers={"X-API-Key": "cs_nope"})
            assert response.status_code == 401
    assert hasattr(app.state, "services")


async def test_an_agent_session_end_to_end(client: httpx.AsyncClient, make_key: MakeKey) -> None:
    """What an agent runtime does over HTTP, with a key made by the key API."""
    key = await make_key("acme")
    client.headers["Authorization"] = f"Bearer {key}"
    cid = (await client.post("/conversations", json={"metadata": {"user": "ana"}})).json()["id"]
    base = f"/conversations/{cid}"

    await client.put(f"{base}/agents/main", json={"system_prompt": "You are a file assistant."})
    turn = await client.post(
        f"{base}/messages",
        json={
            "messages": [
                {"role": "user", "content": "what is in the folder?"},
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [{"id": "c1", "name": "ls", "arguments": {}}],
                },
            ]
        },
        headers={"Idempotency-Key": "turn-1"},
    )
    assert turn.status_code == 201
    pending = (await client.get(f"{base}/tool-blocks", params={"pending_only": True})).json()
    assert [b["call_id"] for b in pending] == ["c1"]

    version = turn.json()["version"]
    result = await client.post(
        f"{base}/messages",
        json={
            "messages": [
                {"role": "tool", "tool_call_id": "c1", "content": "notes.md"},
                {"role": "assistant", "content": "One file: notes.md"},
            ],
            "expected_version": version,
        },
    )
    assert result.status_code == 201
    await client.put(
        f"{base}/agents/main/slots/todo",
        json={"value": [{"id": "1", "content": "summarise notes.md", "status": "pending"}]},
    )
    assert (await client.get(f"{base}/counts")).json() == {
        "system": 0,
        "user": 1,
        "assistant": 2,
        "tool": 1,
    }
    assert (await client.get(f"{base}/tool-blocks", params={"pending_only": True})).json() == []

    compacted = await summarise(client, cid, 4, "The folder holds notes.md.")
    assert compacted.status_code == 201, compacted.text
    window = (await client.get(f"{base}/window")).json()
    assert [m["kind"] for m in window] == ["summary", "output"]

    for format in ("openai-responses", "gemini"):
        assembled = await client.post(f"{base}/assemble", json={"format": format})
        assert assembled.status_code == 200, assembled.text
        assert assembled.json()["diagnostics"]["format"] == format
        assert "summarise notes.md" in str(assembled.json()["payload"])
