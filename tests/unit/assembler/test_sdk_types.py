"""Payloads valid by the providers' own SDK types, not only by our validator
(docs/assembler.md, "The SDK types check").

1. The property: generated conversations (`strategies`: empty windows,
   image-only assistant turns, thinking blocks and thought signatures, odd
   and reused tool ids, non-finite numbers in arguments, blank results), in
   every format × policy, give payloads that the validator accepts and that
   validate as the SDKs' request types (`sdk_types`), or `EmptyWindow`
   exactly where a format has nothing it may send.
2. The SDK check has teeth: each broken shape the issue found is refused.
3. One offline round trip per SDK: its own client sends our payload to a
   stub server on 127.0.0.1 and the body arrives unchanged.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anthropic
import openai
import pytest
from google import genai
from google.genai import types as genai_types
from hypothesis import given, settings

from store.assembler import AssembleOptions, ProviderFormat, validate
from store.domain.context import AgentProfile, ContextSlots
from store.domain.messages import ImagePart, Message, Reasoning
from tests.unit.assembler.builders import FOUR_SLOTS, R, T, U, build
from tests.unit.assembler.every_format import assemble_every_format, every_policy
from tests.unit.assembler.sdk_types import MODEL, same_bytes, sdk_problems
from tests.unit.assembler.strategies import (
    AssemblyInput,
    argument_samples,
    assembly_inputs,
    tool_call,
)

# Each example assembles its conversation 25 times (5 formats x 5 policies)
# and checks every distinct payload twice (validator, SDK types): the
# default keeps this file short enough for every `make test` (it is marked
# slow, so `make test-unit` leaves it out); CONVO_SDK_EXAMPLES=5000 runs a
# deeper search.
EXAMPLES = int(os.environ.get("CONVO_SDK_EXAMPLES", "600"))


@pytest.mark.slow
@settings(max_examples=EXAMPLES, database=None)
@given(drawn=assembly_inputs(arguments=argument_samples))
def test_every_format_and_policy_gives_a_payload_the_sdk_types_accept(
    drawn: AssemblyInput,
) -> None:
    checked: set[tuple[ProviderFormat, str]] = set()
    for policy, built in every_policy(drawn):
        for format, assembly in built.items():
            key = (format, json.dumps(assembly.payload, sort_keys=True, allow_nan=True))
            if key in checked:  # policies often place nothing differently
                continue
            checked.add(key)
            assert validate(format, assembly.payload) == [], (format, policy)
            assert sdk_problems(format, assembly.payload) == [], (format, policy)


# --- the SDK check refuses what the issue found ------------------------------------------


def _user(text: str = "hi") -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def test_sdk_check_refuses_cache_control_on_thinking() -> None:
    thinking = {"type": "thinking", "thinking": "t", "signature": "s"}
    marked = {**thinking, "cache_control": {"type": "ephemeral"}}
    ok = {"messages": [_user(), {"role": "assistant", "content": [thinking, _text("a")]}]}
    bad = {"messages": [_user(), {"role": "assistant", "content": [marked, _text("a")]}]}
    assert sdk_problems("anthropic", ok) == []
    [problem] = sdk_problems("anthropic", bad)
    assert "cache_control: Extra inputs are not permitted" in problem


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def test_sdk_check_refuses_non_finite_numbers() -> None:
    use = {"type": "tool_use", "id": "c1", "name": "f", "input": {"x": float("nan")}}
    payload = {"messages": [_user(), {"role": "assistant", "content": [use]}]}
    assert sdk_problems("anthropic", payload)[0].startswith("not strict JSON")


def test_sdk_check_refuses_a_responses_assistant_item_without_id_and_status() -> None:
    item: dict[str, Any] = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "x", "annotations": []}],
    }
    user = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "q"}]}
    assert sdk_problems("openai-responses", {"input": [user, item]})
    complete = {**item, "id": "msg_1", "status": "completed"}
    assert sdk_problems("openai-responses", {"input": [user, complete]}) == []


def test_sdk_check_refuses_what_gemini_cannot_read() -> None:
    good = {"role": "model", "parts": [{"text": "x", "thoughtSignature": "Z3NpZw=="}]}
    assert sdk_problems("gemini", {"contents": [good]}) == []
    not_base64 = {"role": "model", "parts": [{"text": "x", "thoughtSignature": "g-sig"}]}
    assert "base64" in sdk_problems("gemini", {"contents": [not_base64]})[0]
    unknown_key = {"role": "user", "parts": [{"text": "x", "cache_control": {}}]}
    assert "Extra inputs" in sdk_problems("gemini", {"contents": [unknown_key]})[0]


def test_sdk_check_refuses_an_unknown_chat_role_and_key() -> None:
    assert sdk_problems("openai-chat", {"messages": [{"role": "user", "content": "x"}]}) == []
    assert sdk_problems("openai-chat", {"messages": [{"role": "robot", "content": "x"}]})
    assert sdk_problems("openai-chat", {"messages": [{"role": "user", "content": "x", "y": 1}]})


# --- one offline round trip per SDK ------------------------------------------------------

_ANSWERS: dict[str, dict[str, Any]] = {
    "/v1/chat/completions": {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": MODEL,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "ok"},
                "finish_reason": "stop",
            }
        ],
    },
    "/v1/responses": {
        "id": "resp_1",
        "object": "response",
        "created_at": 0,
        "model": MODEL,
        "output": [],
        "status": "completed",
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    },
    "/v1/messages": {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [{"type": "text", "text": "ok"}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    },
}
_GEMINI_ANSWER = {"candidates": [{"content": {"role": "model", "parts": [{"text": "ok"}]}}]}


class _Stub(BaseHTTPRequestHandler):
    received: list[tuple[str, Any]]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        self.received.append((self.path, json.loads(body)))
        answer = _ANSWERS.get(self.path.split("?")[0], _GEMINI_ANSWER)
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class Stub:
    def __init__(self, url: str, received: list[tuple[str, Any]]) -> None:
        self.url = url
        self.received = received

    def body(self) -> tuple[str, Any]:
        [(path, body)] = self.received
        self.received.clear()
        return path, body


@pytest.fixture
def stub(monkeypatch: pytest.MonkeyPatch) -> Iterator[Stub]:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)  # 127.0.0.1 directly, never a proxy
    received: list[tuple[str, Any]] = []
    handler = type("Handler", (_Stub,), {"received": received})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Stub(f"http://127.0.0.1:{server.server_address[1]}", received)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _rich_conversation() -> list[Message]:
    """One conversation with what broke payloads: odd, long and reused ids,
    NaN in arguments, a blank result, thinking, Gemini signatures, images."""
    odd = tool_call("functions.ls:0", "ls", {"path": ".", "depth": float("nan")})
    long = tool_call("call_" + "x" * 70, "cat", {"n": float("inf")})
    reused = tool_call("functions.ls:0", "ls", {"path": "src"})
    thinking = (
        Reasoning(provider="anthropic", text="look first", signature="sig"),
        Reasoning(provider="gemini", signature="+vv8/f7/+/8="),
        Reasoning(provider="openai", item_id="rs_1", text="plan", data="ENC"),
    )
    image = ImagePart(data="aGk=", media_type="image/png")
    return [
        U("what is here?"),
        Message(role="assistant", content="", tool_calls=(odd, long), reasoning=thinking),
        Message(role="tool", tool_call_id="functions.ls:0", content="a.txt"),
        R(),
        Message(role="tool", tool_call_id="call_" + "x" * 70, content="  "),
        Message(role="user", content=(image,)),
        Message(role="assistant", content=(image,), reasoning=thinking),
        Message(role="assistant", content="again", tool_calls=(reused,)),
        T("never"),  # an orphan, dropped
        Message(role="tool", tool_call_id="functions.ls:0", content='{"files": ["b"]}'),
        U("thanks"),
    ]


def _payload(format: str) -> dict[str, Any]:
    assembly = build(_rich_conversation(), format=format, slots=FOUR_SLOTS)
    assert validate(format, assembly.payload) == []
    assert sdk_problems(format, assembly.payload) == []
    return assembly.payload


def test_openai_chat_round_trip(stub: Stub) -> None:
    payload = _payload("openai-chat")
    client = openai.OpenAI(api_key="test", base_url=f"{stub.url}/v1", max_retries=0)
    client.chat.completions.create(model=MODEL, **payload)
    assert stub.body() == ("/v1/chat/completions", {"model": MODEL, **payload})


def test_openai_responses_round_trip(stub: Stub) -> None:
    payload = _payload("openai-responses")
    client = openai.OpenAI(api_key="test", base_url=f"{stub.url}/v1", max_retries=0)
    client.responses.create(model=MODEL, **payload)
    assert stub.body() == ("/v1/responses", {"model": MODEL, **payload})


def test_anthropic_round_trip(stub: Stub) -> None:
    payload = _payload("anthropic")
    client = anthropic.Anthropic(api_key="test", base_url=stub.url, max_retries=0)
    client.messages.create(model=MODEL, max_tokens=64, **payload)
    assert stub.body() == ("/v1/messages", {"model": MODEL, "max_tokens": 64, **payload})


def test_gemini_round_trip(stub: Stub) -> None:
    payload = _payload("gemini")
    client = genai.Client(api_key="test", http_options=genai_types.HttpOptions(base_url=stub.url))
    client.models.generate_content(
        model=MODEL,
        contents=payload["contents"],
        config=genai_types.GenerateContentConfig(system_instruction=payload["systemInstruction"]),
    )
    path, body = stub.body()
    assert path.endswith(f"/models/{MODEL}:generateContent")
    # The SDK sends bytes in URL-safe base64 (the same bytes) and spells inline
    # data's mimeType `mime_type` (the API reads both spellings, as proto JSON).
    assert _camel_inline_data(body["contents"]) == same_bytes(payload["contents"])
    assert body["systemInstruction"] == payload["systemInstruction"]
    assert set(body) <= {"contents", "systemInstruction", "generationConfig"}


def _camel_inline_data(value: Any) -> Any:
    if isinstance(value, list):
        return [_camel_inline_data(item) for item in value]
    if not isinstance(value, dict):
        return value
    out = {key: _camel_inline_data(item) for key, item in value.items()}
    inline = out.get("inlineData")
    if isinstance(inline, dict) and "mime_type" in inline:
        out["inlineData"] = {
            ("mimeType" if key == "mime_type" else key): item for key, item in inline.items()
        }
    return out


def test_the_rich_conversation_keeps_its_pairs_in_every_format() -> None:
    for format in ProviderFormat:
        assembly = build(_rich_conversation(), format=format, slots=FOUR_SLOTS)
        kinds = {r.kind.value for r in assembly.diagnostics.repairs}
        assert {"renamed_duplicate_tool_id", "replaced_non_finite_number"} <= kinds, format
        assert "dropped_empty_assistant_message" in kinds


def test_no_profile_and_no_slots_is_an_empty_window_not_a_crash() -> None:
    built = assemble_every_format(
        [], profile=AgentProfile(), slots=ContextSlots(), options=AssembleOptions()
    )
    assert set(built) == {ProviderFormat.XML_TOOLS}  # the final instruction alone
