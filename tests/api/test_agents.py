"""api.routes.agents: profiles and context slots."""

from __future__ import annotations

import httpx

from tests.api.conftest import brief, new_conversation


async def test_an_unconfigured_agent_has_the_default_profile(acme: httpx.AsyncClient) -> None:
    cid = await new_conversation(acme)
    response = await acme.get(f"/conversations/{cid}/agents/researcher")
    assert response.status_code == 200
    assert response.json() == {
        "profile": {
            "agent_id": "researcher",
            "is_sub_agent": True,
            "system_prompt": None,
            "role_definition": None,
        },
        "slots": {"todo": [], "useful_info": None, "folder_notes": None, "custom": {}},
    }


async def test_profile_and_slots_round_trip(acme: httpx.AsyncClient) -> None:
    cid = await new_conversation(acme)
    base = f"/conversations/{cid}/agents/main"
    profile = await acme.put(
        base, json={"system_prompt": "Be exact.", "role_definition": "You are the lead."}
    )
    assert profile.status_code == 200, profile.text
    assert profile.json() == {"conversation_id": cid, "version": 2}
    todo = [
        {"id": "1", "content": "read the spec", "status": "completed"},
        {"id": "2", "content": "write the API"},
    ]
    assert (await acme.put(f"{base}/slots/todo", json={"value": todo})).status_code == 200
    assert (
        await acme.put(f"{base}/slots/useful_info", json={"value": "uses FastAPI"})
    ).status_code == 200
    assert (await acme.put(f"{base}/slots/deadline", json={"value": "07:40"})).status_code == 200
    cleared = await acme.put(f"{base}/slots/useful_info", json={"value": None})
    assert cleared.json()["version"] == 6

    agent = (await acme.get(base)).json()
    assert agent["profile"] == {
        "agent_id": "main",
        "is_sub_agent": False,
        "system_prompt": "Be exact.",
        "role_definition": "You are the lead.",
    }
    assert agent["slots"] == {
        "todo": [
            {"id": "1", "content": "read the spec", "status": "completed"},
            {"id": "2", "content": "write the API", "status": "pending"},
        ],
        "useful_info": None,
        "folder_notes": None,
        "custom": {"deadline": "07:40"},
    }


async def test_slot_errors_are_422_with_the_stores_message(acme: httpx.AsyncClient) -> None:
    cid = await new_conversation(acme)
    base = f"/conversations/{cid}/agents/main/slots"
    text_in_todo = await acme.put(f"{base}/todo", json={"value": "not a list"})
    assert text_in_todo.status_code == 422
    assert brief(text_in_todo) == {
        "type": "InvalidOperation",
        "detail": "the todo slot holds a list of items, not text",
    }
    bad_name = await acme.put(f"{base}/bad name!", json={"value": "x"})
    assert bad_name.status_code == 422
    assert "slot names are letters" in bad_name.json()["detail"]
    missing_value = await acme.put(f"{base}/useful_info", json={})
    assert missing_value.status_code == 422
    assert missing_value.json()["detail"] == "body.value: Field required"
    assert (await acme.get(f"/conversations/{cid}")).json()["version"] == 1


async def test_main_cannot_be_a_sub_agent(acme: httpx.AsyncClient) -> None:
    cid = await new_conversation(acme)
    response = await acme.put(f"/conversations/{cid}/agents/main", json={"is_sub_agent": True})
    assert response.status_code == 422
    assert "main agent cannot be configured as a sub-agent" in response.json()["detail"]
