"""The XML tool protocol as the XML-tool agent reads and writes it
(docs/behaviours.md §5, §7): the parser reads tags in any case, the
objective goes in `<sentra-user-question>`, and render → parse gives back
the calls whatever the case."""

from __future__ import annotations

import json
import random
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from convo import app
from store.assembler import parse_tool_calls, render_tool_calls
from store.assembler.formats.xml_parser import InvalidToolCall
from store.assembler.formats.xml_tools import user_question
from store.domain.context import ContextSlots
from store.domain.messages import ImagePart, Message, TextPart, ToolCall
from tests.unit.assembler.builders import A, T, U, build

NO_SLOTS = ContextSlots()

# The protocol summary of the XML-tool agent's system prompt (seed 003,
# "第四步：构建 system 消息"): bare attribute values, as it writes them.
SEED_SUMMARY = "格式：<invoke name=工具名><parameter name=参数名>值</parameter></invoke>"


def test_tags_and_attribute_names_in_any_case() -> None:
    text = (
        '<SENTRA-TOOLS>\n  <Invoke NAME="ls">\n    <PARAMETER Name="path"><String>.</String>'
        "</PARAMETER>\n    <parameter name='deep'><BOOLEAN>TRUE</BOOLEAN></parameter>\n"
        "  </INVOKE>\n</Sentra-Tools>"
    )
    [call] = parse_tool_calls(text)
    assert (call.name, call.arguments) == ("ls", {"path": ".", "deep": True})


def test_bare_attribute_values_as_the_seed_writes_them() -> None:
    text = "<sentra-tools>" + SEED_SUMMARY.removeprefix("格式：") + "</sentra-tools>"
    [call] = parse_tool_calls(text)
    assert (call.name, call.arguments) == ("工具名", {"参数名": "值"})


def test_non_finite_numbers_stay_text() -> None:
    text = (
        '<sentra-tools><invoke name="f"><parameter name="x"><number>NaN</number></parameter>'
        '<parameter name="y">1e999</parameter></invoke></sentra-tools>'
    )
    [call] = parse_tool_calls(text)
    assert call.arguments == {"x": "NaN", "y": "1e999"}


def test_an_invoke_the_store_cannot_hold_is_named() -> None:
    text = f'<sentra-tools><invoke name="{"n" * 300}"><parameter name="a">1</parameter></invoke>'
    with pytest.raises(InvalidToolCall, match=r"invoke 0 .*name.*over the limit of 200"):
        parse_tool_calls(text + "</sentra-tools>")


def _any_case(text: str, rng: random.Random) -> str:
    """`text` with each tag's name, and its first attribute's name, in a random case."""

    def flip(word: str) -> str:
        return "".join(c.upper() if rng.random() < 0.5 else c.lower() for c in word)

    def tag(match: re.Match[str]) -> str:
        return match.group(1) + flip(match.group(2)) + (flip(match.group(3) or ""))

    return re.sub(r"(</?)([A-Za-z][\w\-]*)(\s+name(?==))?", tag, text)


names = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=["Cs", "Cc", "Zs", "Zl", "Zp"]),
    min_size=1,
    max_size=20,
).filter(str.isprintable)
values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(
        alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"], exclude_characters="\x00"),
        max_size=30,
    ),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(names, inner, min_size=1, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=200, database=None)
@given(
    calls=st.lists(
        st.tuples(names, st.dictionaries(names, values, min_size=1, max_size=4)),
        min_size=1,
        max_size=3,
    ),
    rng=st.randoms(use_true_random=False),
)
def test_render_then_parse_gives_back_the_calls_whatever_the_case(
    calls: list[tuple[str, dict[str, Any]]], rng: random.Random
) -> None:
    tool_calls = [ToolCall(id=f"c{i}", name=n, arguments=a) for i, (n, a) in enumerate(calls)]
    text = "I will call tools.\n" + _any_case(render_tool_calls(tool_calls), rng)
    parsed = parse_tool_calls(text)
    assert [(c.name, c.arguments) for c in parsed] == [(c.name, c.arguments) for c in tool_calls]


# --- the <sentra-user-question> wrapper (seed 003, "第六步：渲染任务指令") -----


def test_the_objective_is_wrapped_as_the_seed_writes_it() -> None:
    # Seed 003: "<sentra-user-question>\n  <objective>{{objective}}</objective>"
    messages = build(
        [U("old question"), A("answer"), U("draw a <logo> & render it")],
        format="xml-tools",
        slots=NO_SLOTS,
        xml_final_instruction=None,
    ).payload["messages"]
    assert messages[-1]["content"] == (
        "<sentra-user-question>\n  <objective>draw a &lt;logo&gt; &amp; render it</objective>\n"
        "</sentra-user-question>"
    )
    assert messages[1]["content"] == "old question"  # only the current objective


def test_the_objective_precedes_the_instruction_in_one_user_message() -> None:
    # Seed 003, "方案 A": the question, then the instruction, one user message.
    messages = build([U("task"), A("", 1), T(1)], format="xml-tools", slots=NO_SLOTS).payload[
        "messages"
    ]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[1]["content"] == user_question("task")


def test_an_objective_with_images_keeps_them() -> None:
    question = Message(
        role="user",
        content=(TextPart(text="what is this?"), ImagePart(url="https://example.com/a.png")),
    )
    [*_, last] = build(
        [question], format="xml-tools", slots=NO_SLOTS, xml_final_instruction=None
    ).payload["messages"]
    assert last["content"] == [
        {"type": "text", "text": user_question("what is this?")},
        {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
    ]


def test_the_wrapper_can_be_turned_off() -> None:
    messages = build(
        [U("task")],
        format="xml-tools",
        slots=NO_SLOTS,
        xml_final_instruction=None,
        xml_user_question=False,
    ).payload["messages"]
    assert messages[-1]["content"] == "task"


# --- convo xml-tools parse ------------------------------------------------------


def test_the_cli_parses_a_reply(tmp_path: Any) -> None:
    reply = tmp_path / "reply.txt"
    reply.write_text(
        '<SENTRA-TOOLS><INVOKE name="ls"><parameter name="p"><number>2</number></parameter>'
        "</INVOKE></SENTRA-TOOLS>",
        encoding="utf-8",
    )
    result = CliRunner().invoke(app, ["xml-tools", "parse", str(reply)])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {
        "calls": [{"id": "xml_call_0", "name": "ls", "arguments": {"p": 2}}]
    }


def test_the_cli_names_a_bad_invoke_in_one_line() -> None:
    text = f'<sentra-tools><invoke name="{"n" * 300}"><parameter name="a">1</parameter>'
    result = CliRunner().invoke(
        app, ["xml-tools", "parse", "-"], input=text + "</invoke></sentra-tools>"
    )
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1
    assert "over the limit of 200" in result.stderr


def test_hostile_replies_are_read_in_linear_time_or_refused_by_name() -> None:
    import time

    started = time.perf_counter()
    assert parse_tool_calls("<sentra-tools>" * 70_000) == ()  # unclosed: no block
    assert parse_tool_calls("</SENTRA-TOOLS>" * 60_000) == ()
    deep_json = '<sentra-tools><invoke name="x"><parameter name="a">' + "[" * 500_000
    [call] = parse_tool_calls(deep_json + "</parameter></invoke></sentra-tools>")
    assert call.arguments["a"] == "[" * 500_000  # not JSON it can read: kept as text
    assert time.perf_counter() - started < 5
    with pytest.raises(InvalidToolCall, match="nested more than"):
        parse_tool_calls("<sentra-tools>" + "<invoke name=x>" * 10_000 + "</sentra-tools>")
