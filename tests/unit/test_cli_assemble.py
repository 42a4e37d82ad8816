"""`convo assemble`: in-process with CliRunner and as the installed console script."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from convo import app
from store.assembler import validate

DOCUMENT: dict[str, Any] = {
    "messages": [
        {"role": "user", "content": "list the files"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "ls", "arguments": '{"path": "."}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "a.txt"},
        {"role": "user", "content": "sub-agent work", "agent": "helper"},
    ],
    "agent": {
        "id": "main",
        "sub_agent": False,
        "system_prompt": None,
        "role_definition": "You list files.",
    },
    "slots": {
        "todo": [{"id": "1", "content": "list files", "status": "in_progress"}],
        "useful_info": "cwd is /",
    },
}
CONVO = Path(sys.executable).parent / "convo"


def invoke(*args: str, stdin: str = "") -> Any:
    return CliRunner().invoke(app, ["assemble", *args], input=stdin)


@pytest.mark.parametrize(
    "format", ["openai-chat", "openai-responses", "anthropic", "gemini", "xml-tools"]
)
def test_prints_payload_and_diagnostics(format: str) -> None:
    result = invoke("--format", format, "-", stdin=json.dumps(DOCUMENT))
    assert result.exit_code == 0, result.output
    output = json.loads(result.stdout)
    assert set(output) == {"payload", "diagnostics"}
    assert validate(format, output["payload"]) == []
    assert output["diagnostics"]["special_block"]["index"] == 2
    assert "sub-agent work" not in result.stdout


def test_reads_a_file_and_takes_policy_and_n(tmp_path: Path) -> None:
    path = tmp_path / "doc.json"
    path.write_text(json.dumps(DOCUMENT))
    result = invoke("--format", "openai-chat", "--policy", "tail", "--n", "2", str(path))
    assert result.exit_code == 0, result.output
    placement = json.loads(result.stdout)["diagnostics"]["special_block"]
    assert (placement["policy"], placement["n"], placement["index"]) == ("tail", 2, 4)


def test_output_is_deterministic() -> None:
    first = invoke("--format", "anthropic", stdin=json.dumps(DOCUMENT))
    second = invoke("--format", "anthropic", stdin=json.dumps(DOCUMENT))
    assert first.stdout == second.stdout


@pytest.mark.parametrize(
    ("args", "stdin", "problem"),
    [
        (["--format", "nope"], json.dumps(DOCUMENT), "unknown provider format 'nope'"),
        (["--format", "gemini"], "{not json", "input is not valid JSON"),
        (["--format", "gemini", "/no/such/file.json"], "", "no such file"),
        (
            ["--format", "gemini"],
            json.dumps({"agent": {"id": "r", "sub_agent": True}}),
            "no role definition",
        ),
        (["--format", "gemini", "--policy", "middle"], json.dumps(DOCUMENT), "policy"),
    ],
)
def test_bad_input_exits_2_with_one_line(args: list[str], stdin: str, problem: str) -> None:
    result = invoke(*args, stdin=stdin)
    assert result.exit_code == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert problem in lines[0]
    assert "Traceback" not in result.stderr


@pytest.fixture(scope="module")
def convo() -> Path:
    if not CONVO.exists():
        pytest.fail(f"console script missing: {CONVO} (run .venv/bin/pip install -e . --no-deps)")
    return CONVO


def test_console_script_assembles(convo: Path) -> None:
    completed = subprocess.run(
        [str(convo), "assemble", "--format", "anthropic", "-"],
        input=json.dumps(DOCUMENT),
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert completed.returncode == 0, completed.stderr
    output = json.loads(completed.stdout)
    assert output["diagnostics"]["cache_breakpoints"] == ["system[0]", "messages[0].content[0]"]


def test_console_script_reports_a_configuration_error(convo: Path) -> None:
    document = {"agent": {"id": "reviewer", "sub_agent": True}, "messages": []}
    completed = subprocess.run(
        [str(convo), "assemble", "--format", "openai-chat"],
        input=json.dumps(document),
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert completed.returncode == 2
    assert completed.stderr.strip() == (
        "convo assemble: sub-agent 'reviewer' has no role definition; "
        "set one before building a payload for it"
    )


# --- payloads the providers refused before (docs/assembler.md, "Validator") ---


def test_an_image_only_assistant_turn_with_a_thought_signature_assembles_for_gemini() -> None:
    document = {
        "messages": [
            {"role": "user", "content": "draw it"},
            {
                "role": "assistant",
                "content": [{"type": "image_url", "image_url": {"url": "https://x/a.png"}}],
                "reasoning": [{"provider": "gemini", "signature": "Z3NpZw=="}],
            },
            {"role": "user", "content": "thanks"},
        ]
    }
    result = invoke("--format", "gemini", stdin=json.dumps(document))
    assert result.exit_code == 0, result.output
    output = json.loads(result.stdout)
    assert validate("gemini", output["payload"]) == []
    kinds = [r["kind"] for r in output["diagnostics"]["repairs"]]
    assert "dropped_empty_assistant_message" in kinds


@pytest.mark.parametrize("format", ["openai-responses", "anthropic", "gemini"])
def test_an_empty_window_exits_2_with_one_line(format: str) -> None:
    result = invoke("--format", format, stdin=json.dumps({"messages": []}))
    assert result.exit_code == 2
    assert result.stdout == ""
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"convo assemble: nothing to send to {format}:")


def test_an_unexpected_error_is_one_line_too(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise IndexError("list index out of range")

    monkeypatch.setattr("convo.assemble.assemble", broken)
    result = invoke("--format", "gemini", stdin=json.dumps(DOCUMENT))
    assert result.exit_code == 2
    [line] = result.stderr.strip().splitlines()
    assert "IndexError: list index out of range" in line
    assert "Traceback" not in result.stderr


def test_non_finite_arguments_in_a_document_are_refused_in_one_line() -> None:
    document = json.loads(json.dumps(DOCUMENT))
    document["messages"][1]["tool_calls"][0]["function"]["arguments"] = '{"depth": NaN}'
    result = invoke("--format", "openai-chat", stdin=json.dumps(document))
    assert result.exit_code == 2
    [line] = result.stderr.strip().splitlines()
    assert "numbers must be finite" in line


def test_reasoning_content_and_clipping_from_the_document() -> None:
    document = json.loads(json.dumps(DOCUMENT))
    document["messages"][1]["reasoning_content"] = "I should list the files."
    document["messages"][2]["content"] = "a.txt\n" * 1_000
    document["options"] = {"max_tool_result_chars": 500}
    result = invoke("--format", "openai-chat", stdin=json.dumps(document))
    assert result.exit_code == 0, result.output
    output = json.loads(result.stdout)
    messages = output["payload"]["messages"]
    [assistant] = [m for m in messages if m.get("tool_calls")]
    assert assistant["reasoning_content"] == "I should list the files."
    [tool] = [m for m in messages if m["role"] == "tool"]
    assert len(tool["content"]) <= 500
    diagnostics = output["diagnostics"]
    assert diagnostics["reasoning_replay"]["replayed"] == 1
    assert diagnostics["clipped_tool_results"]["clipped"] == 1


def test_any_option_from_the_command_line() -> None:
    document = json.loads(json.dumps(DOCUMENT))
    document["messages"][2]["content"] = "a.txt\n" * 1_000
    result = invoke(
        "--format",
        "anthropic",
        "--option",
        "max_tool_result_chars=400",
        "-o",
        'max_tool_result_chars_by_tool={"ls": 300}',
        "-o",
        "chat_reasoning=all",
        stdin=json.dumps(document),
    )
    assert result.exit_code == 0, result.output
    clipped = json.loads(result.stdout)["diagnostics"]["clipped_tool_results"]
    assert clipped["clipped"] == 1
    assert "characters cut" in result.stdout


@pytest.mark.parametrize(
    ("option", "problem"),
    [
        ("max_tool_result_chars", "NAME=VALUE"),
        ("max_tool_result_chars=5", "greater than or equal to 200"),
        ("colour=red", "colour"),
        ("token_counter=len", "cannot be set"),
    ],
)
def test_a_bad_option_exits_2_with_one_line(option: str, problem: str) -> None:
    result = invoke("--format", "openai-chat", "--option", option, stdin=json.dumps(DOCUMENT))
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1
    assert problem in result.stderr
