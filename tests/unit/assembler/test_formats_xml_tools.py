"""The Sentra XML tool protocol: rendering, typed values, parser (behaviours §5)."""

from __future__ import annotations

import math

import pytest

from store.assembler import DEFAULT_XML_FINAL_INSTRUCTION, parse_tool_calls, render_tool_calls
from store.assembler.formats.xml_tools import render_result, user_question
from store.assembler.formats.xml_values import render_value
from store.domain.context import ContextSlots
from store.domain.messages import Message, ToolCall
from tests.unit.assembler.builders import A, R, T, U, build

NO_SLOTS = ContextSlots()


def test_tool_call_xml_has_the_exact_layout() -> None:
    call = ToolCall(id="c1", name="image_draw", arguments={"prompt": "a <logo> & text"})
    assert render_tool_calls([call]) == (
        "<sentra-tools>\n"
        '  <invoke name="image_draw">\n'
        '    <parameter name="prompt"><string>a &lt;logo&gt; &amp; text</string></parameter>\n'
        "  </invoke>\n"
        "</sentra-tools>"
    )


@pytest.mark.parametrize(
    ("value", "xml"),
    [
        (None, "<null/>"),
        (True, "<boolean>true</boolean>"),
        (3, "<number>3</number>"),
        (2.5, "<number>2.5</number>"),
        (math.inf, "<string>Infinity</string>"),
        (-math.inf, "<string>-Infinity</string>"),
        (math.nan, "<string>NaN</string>"),
        ([1, "a"], "<array><number>1</number><string>a</string></array>"),
        ({"k": False}, '<object><parameter name="k"><boolean>false</boolean></parameter></object>'),
    ],
)
def test_typed_values(value: object, xml: str) -> None:
    assert render_value(value) == xml


def test_result_xml() -> None:
    call = ToolCall(id="c1", name="ls", arguments={"path": "."})
    result = Message(
        role="tool", tool_call_id="c1", content="a<b", is_error=True, metadata={"reason": "look"}
    )
    assert render_result(step=2, call=call, result=result) == (
        '<sentra-result step="2" tool="ls" success="false">\n'
        "  <reason>look</reason>\n"
        '  <arguments>{"path": "."}</arguments>\n'
        "  <data>a&lt;b</data>\n"
        "</sentra-result>"
    )


def test_each_round_is_one_assistant_message_and_the_instruction_is_folded() -> None:
    payload = build(
        [U("draw"), A("", 1, 2), T(1), T(2)], format="xml-tools", slots=NO_SLOTS
    ).payload
    messages = payload["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    round_text = messages[2]["content"]
    tools, results = round_text.split("\n\n", 1)
    assert tools.startswith("<sentra-tools>")
    assert tools.endswith("</sentra-tools>")
    assert results.count("<sentra-result ") == 2
    assert '<sentra-result step="0" tool="tool1" success="true">' in results
    assert '<sentra-result step="1" tool="tool2" success="true">' in results
    assert messages[3]["content"] == DEFAULT_XML_FINAL_INSTRUCTION
    assert all("tool_calls" not in m for m in messages)


def test_the_final_instruction_never_makes_two_user_messages() -> None:
    messages = build([U("task")], format="xml-tools", slots=NO_SLOTS).payload["messages"]
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[1]["content"] == f"{user_question('task')}\n\n{DEFAULT_XML_FINAL_INSTRUCTION}"


def test_special_block_and_reminders_fold_into_one_user_message() -> None:
    messages = build([U("task"), R()], format="xml-tools", xml_final_instruction=None).payload[
        "messages"
    ]
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[1]["content"] == (
        f"{user_question('task')}\n\n<system-reminder>\ntodo changed\n</system-reminder>"
        "\n\n## Useful Information\n\nfacts"
    )


def test_step_numbers_run_across_rounds() -> None:
    messages = build(
        [U(), A("", 1), T(1), A("", 2), T(2)], format="xml-tools", slots=NO_SLOTS
    ).payload["messages"]
    assert 'step="1"' in messages[2]["content"]


def test_parser_round_trips_typed_arguments() -> None:
    arguments = {
        "s": "a <b> & c",
        "n": -3,
        "f": 1.5,
        "b": True,
        "z": None,
        "l": [1, [2]],
        "o": {"k": "v"},
    }
    text = "Sure.\n" + render_tool_calls([ToolCall(id="x", name="run", arguments=arguments)])
    [call] = parse_tool_calls(text)
    assert (call.name, call.arguments, call.id) == ("run", arguments, "xml_call_0")


def test_parser_ignores_an_invoke_without_parameters() -> None:
    text = render_tool_calls(
        [ToolCall(id="1", name="noop"), ToolCall(id="2", name="ls", arguments={"p": "."})]
    )
    assert [c.name for c in parse_tool_calls(text)] == ["ls"]


def test_parser_reads_untyped_values_as_json_or_text() -> None:
    text = (
        '<sentra-tools><invoke name="t">'
        '<parameter name="a">42</parameter><parameter name="b">{"x": 1}</parameter>'
        '<parameter name="c">plain words</parameter>'
        "</invoke></sentra-tools>"
    )
    [call] = parse_tool_calls(text)
    assert call.arguments == {"a": 42, "b": {"x": 1}, "c": "plain words"}


def test_parser_finds_nothing_without_a_tools_block() -> None:
    assert parse_tool_calls("no tools here <invoke name='x'>") == ()
