"""api.routes.assembly: payloads in provider formats, options, errors."""

from __future__ import annotations

import json

import httpx
import pytest

from api.routes.assembly import assemble_options
from store.assembler import AssembleOptions, PlacementPolicy
from tests.api.conftest import TOOL_TURN, new_conversation


async def _session(client: httpx.AsyncClient) -> str:
    cid = await new_conversation(client)
    await client.post(f"/conversations/{cid}/messages", json={"messages": TOOL_TURN})
    await client.put(
        f"/conversations/{cid}/agents/main/slots/todo",
        json={"value": [{"id": "1", "content": "answer the user", "status": "in_progress"}]},
    )
    return cid


async def test_openai_chat_payload(acme: httpx.AsyncClient) -> None:
    cid = await _session(acme)
    response = await acme.post(f"/conversations/{cid}/assemble", json={"format": "openai-chat"})
    assert response.status_code == 200, response.text
    body = response.json()
    messages = body["payload"]["messages"]
    assert messages[0] == {"role": "system", "content": "You are terse."}
    assert any(m.get("tool_calls") for m in messages)
    assert any(m["role"] == "tool" and m["tool_call_id"] == "call_1" for m in messages)
    assert "answer the user" in str(messages)
    diagnostics = body["diagnostics"]
    assert diagnostics["format"] == "openai-chat"
    assert diagnostics["agent_id"] == "main"
    assert diagnostics["special_block"]["slots"] == ["todo"]
    assert diagnostics["token_estimate"] > 0
    # Computed when read (store.assembler.diagnostics.StablePrefix), and sent.
    prefix = diagnostics["stable_prefix"]
    assert set(prefix) == {"fingerprint", "tokens", "message_count"}
    assert len(prefix["fingerprint"]) == 64
    again = await acme.post(f"/conversations/{cid}/assemble", json={"format": "openai-chat"})
    assert again.json()["diagnostics"]["stable_prefix"] == prefix


async def test_anthropic_payload_with_options(acme: httpx.AsyncClient) -> None:
    cid = await _session(acme)
    await acme.put(f"/conversations/{cid}/agents/main", json={"system_prompt": "Be exact."})
    response = await acme.post(
        f"/conversations/{cid}/assemble",
        json={"format": "anthropic", "options": {"policy": "tail", "cache_breakpoints": False}},
    )
    assert response.status_code == 200, response.text
    payload = response.json()["payload"]
    assert "Be exact." in str(payload["system"])
    assert payload["messages"][0]["role"] == "user"
    assert any(
        part.get("type") == "tool_use"
        for m in payload["messages"]
        if isinstance(m["content"], list)
        for part in m["content"]
    )
    diagnostics = response.json()["diagnostics"]
    assert diagnostics["special_block"]["policy"] == "tail"
    assert diagnostics["cache_breakpoints"] == []
    assert diagnostics["system_prompt_source"] == "custom"


async def test_assembly_errors_are_422(acme: httpx.AsyncClient) -> None:
    cid = await _session(acme)
    url = f"/conversations/{cid}/assemble"
    bad_format = await acme.post(url, json={"format": "cohere"})
    assert bad_format.status_code == 422
    assert bad_format.json()["detail"].startswith("body.format:")
    bad_option = await acme.post(url, json={"options": {"policy": "somewhere"}})
    assert bad_option.status_code == 422
    assert bad_option.json()["detail"].startswith("body.options.policy:")
    unknown_option = await acme.post(url, json={"options": {"colour": "red"}})
    assert "body.options.colour: Extra inputs are not permitted" in unknown_option.json()["detail"]
    code_option = await acme.post(url, json={"options": {"token_counter": "len"}})
    assert code_option.json()["detail"] == ("body.options.token_counter: cannot be set over HTTP")


async def test_a_sub_agent_without_a_role_definition_is_a_configuration_error(
    acme: httpx.AsyncClient,
) -> None:
    cid = await _session(acme)
    await acme.post(
        f"/conversations/{cid}/messages",
        json={"messages": [{"role": "user", "content": "go", "agent_id": "helper"}]},
    )
    response = await acme.post(f"/conversations/{cid}/assemble", json={"agent_id": "helper"})
    assert response.status_code == 422
    assert response.json()["type"] == "ConfigurationError"
    assert "helper" in response.json()["detail"]


def test_options_are_validated_into_the_assemblers_model() -> None:
    assert assemble_options({}) == AssembleOptions()
    assert assemble_options({"policy": "from_end", "n": 2}).policy is PlacementPolicy.FROM_END
    with pytest.raises(Exception, match="options"):
        assemble_options({"n": 0})


async def test_tool_results_are_clipped_in_the_payload_not_in_the_store(
    acme: httpx.AsyncClient,
) -> None:
    cid = await new_conversation(acme)
    big = "HEAD" + "m" * 200_000 + "TAIL"
    turn = [
        {"role": "user", "content": "read the log"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "c1", "name": "read_log", "arguments": {}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": big},
    ]
    appended = await acme.post(f"/conversations/{cid}/messages", json={"messages": turn})
    assert appended.status_code in {200, 201}, appended.text
    url = f"/conversations/{cid}/assemble"
    options = {"max_tool_result_chars": 50_000, "max_tool_result_chars_by_tool": {"read_log": 500}}
    response = await acme.post(url, json={"format": "anthropic", "options": options})
    assert response.status_code == 200, response.text
    text = str(response.json()["payload"])
    assert "HEAD" in text
    assert "TAIL" in text
    assert "characters cut from this tool result" in text
    clipped = response.json()["diagnostics"]["clipped_tool_results"]
    assert clipped["clipped"] == 1
    assert clipped["call_ids"] == ["c1"]
    stored = await acme.get(f"/conversations/{cid}/messages")
    assert big in stored.text
    refused = await acme.post(url, json={"options": {"max_tool_result_chars": 5}})
    assert refused.status_code == 422
    assert refused.json()["detail"].startswith("body.options.max_tool_result_chars:")


async def test_reasoning_content_is_appended_and_replayed_on_chat(acme: httpx.AsyncClient) -> None:
    cid = await new_conversation(acme)
    turn = [
        {"role": "user", "content": "what time is it?"},
        {
            "role": "assistant",
            "content": "",
            "reasoning_content": "I should call the clock.",
            "tool_calls": [{"id": "c1", "name": "clock", "arguments": {}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "12:00"},
    ]
    appended = await acme.post(f"/conversations/{cid}/messages", json={"messages": turn})
    assert appended.status_code in {200, 201}, appended.text
    url = f"/conversations/{cid}/assemble"
    response = await acme.post(url, json={"format": "openai-chat"})
    assert response.status_code == 200, response.text
    [assistant] = [m for m in response.json()["payload"]["messages"] if m["role"] == "assistant"]
    assert assistant["reasoning_content"] == "I should call the clock."
    replay = response.json()["diagnostics"]["reasoning_replay"]
    assert replay == {
        "mode": "current_tool_loop",
        "replayed": 1,
        "left_out": 0,
        "other_providers": 0,
    }
    off = await acme.post(url, json={"options": {"chat_reasoning": "off"}})
    assert "reasoning_content" not in str(off.json()["payload"])
    bad = await acme.post(
        f"/conversations/{cid}/messages",
        json={"messages": [{"role": "user", "content": "x", "reasoning_content": "no"}]},
    )
    assert bad.status_code == 422
    assert "only assistant messages carry reasoning_content" in bad.json()["detail"]


async def test_xml_tool_calls_are_parsed_over_http(acme: httpx.AsyncClient) -> None:
    reply = (
        "Let me look.\n<SENTRA-TOOLS>\n  <Invoke name=ls>\n"
        '    <Parameter NAME="path"><STRING>src</STRING></Parameter>\n'
        "  </Invoke>\n</SENTRA-TOOLS>"
    )
    response = await acme.post("/xml-tools/parse", json={"text": reply, "id_prefix": "r1"})
    assert response.status_code == 200, response.text
    assert response.json() == {
        "calls": [{"id": "r1_0", "name": "ls", "arguments": {"path": "src"}}]
    }
    nothing = await acme.post("/xml-tools/parse", json={"text": "no tools"})
    assert nothing.json() == {"calls": []}
    long_name = "n" * 300
    bad = await acme.post(
        "/xml-tools/parse",
        json={
            "text": f'<sentra-tools><invoke name="{long_name}">'
            '<parameter name="a">1</parameter></invoke></sentra-tools>'
        },
    )
    assert bad.status_code == 422
    assert bad.json()["detail"].startswith("body.text: invoke 0")
    nul = await acme.post("/xml-tools/parse", json={"text": "a\u0000b"})
    assert nul.status_code == 422
    assert "NUL" in nul.json()["detail"]
    prefix = await acme.post("/xml-tools/parse", json={"text": "x", "id_prefix": "a b"})
    assert prefix.status_code == 422
    assert prefix.json()["detail"].startswith("body.id_prefix:")
    too_long = await acme.post("/xml-tools/parse", json={"text": "x" * 1_000_001})
    assert too_long.status_code in {413, 422}


async def test_images_from_tools_are_sent_and_limited(acme: httpx.AsyncClient) -> None:
    cid = await new_conversation(acme)
    shot = {"type": "image", "data": "A" * 4_000, "media_type": "image/png"}
    turn = [
        {"role": "user", "content": "take a screenshot"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "c1", "name": "screenshot", "arguments": {}}],
        },
        {
            "role": "tool",
            "tool_call_id": "c1",
            "content": [{"type": "text", "text": "here it is"}, shot],
        },
    ]
    appended = await acme.post(f"/conversations/{cid}/messages", json={"messages": turn})
    assert appended.status_code in {200, 201}, appended.text
    url = f"/conversations/{cid}/assemble"
    anthropic = await acme.post(url, json={"format": "anthropic"})
    assert anthropic.status_code == 200, anthropic.text
    [result] = anthropic.json()["payload"]["messages"][-1]["content"][:1]
    assert result["content"][1]["source"]["data"] == shot["data"]
    chat = await acme.post(url, json={"format": "openai-chat"})
    assert chat.json()["payload"]["messages"][-1]["content"][0] == {
        "type": "text",
        "text": "[images returned by tool call c1]",
    }
    refused = await acme.post(url, json={"options": {"max_tool_image_bytes": 1_000}})
    assert refused.status_code == 422
    assert "3,000 bytes, over the limit of 1,000 per image" in refused.json()["detail"]


async def test_useful_information_items_keep_the_newest_over_http(acme: httpx.AsyncClient) -> None:
    cid = await new_conversation(acme)
    await acme.post(
        f"/conversations/{cid}/messages", json={"messages": [{"role": "user", "content": "hi"}]}
    )
    items = json.dumps([{"content": f"fact {i}"} for i in range(5)])
    put = await acme.put(
        f"/conversations/{cid}/agents/main/slots/useful_info", json={"value": items}
    )
    assert put.status_code in {200, 201}, put.text
    response = await acme.post(
        f"/conversations/{cid}/assemble", json={"options": {"useful_info_items": 2}}
    )
    assert response.status_code == 200, response.text
    text = json.dumps(response.json()["payload"])
    assert "- fact 3\\n- fact 4" in text
    assert "fact 2" not in text
