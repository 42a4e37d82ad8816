"""How much of each request a provider's prefix cache must recompute, per
special-block placement policy.

Simulates one agent session of 200 tool rounds whose TODO list changes every
3 rounds. Before each round the agent asks for its payload; each request is
rendered deterministically in provider order (JSON, sorted keys; Anthropic:
system then messages, cache_control marks left out since they are not
content) and compared with the previous request: everything after their
longest common prefix is what the cache must recompute. Tokens are the
approximate counter's (about four characters a token) on the rendered text.

    python -m bench.cache_reuse
"""

from __future__ import annotations

import json
import time
from typing import Any

from bench.report import print_table, write_results
from store.assembler import AssembleOptions, PlacementPolicy, ProviderFormat, assemble
from store.domain.context import AgentProfile, ContextSlots, TodoItem, TodoStatus
from store.domain.messages import Message, MessageKind, ToolCall
from store.domain.tokens import approximate_tokens

ROUNDS = 200
TODO_EVERY = 3
TODO_ITEMS = 34  # enough that some item changes every TODO_EVERY rounds to the end
FORMATS = (ProviderFormat.ANTHROPIC, ProviderFormat.OPENAI_CHAT)
PROFILE = AgentProfile(
    system_prompt="You are a careful coding agent. Use the tools; keep the TODO list current.",
    role_definition="You refactor a Python service module by module, running tests as you go.",
)
USEFUL_INFO = "Tests: `pytest -q`. Style: ruff, mypy --strict. Never touch migrations/."


def _todo(round_number: int) -> tuple[TodoItem, ...]:
    progress = round_number // TODO_EVERY  # one step of progress every TODO_EVERY rounds
    items = []
    for k in range(TODO_ITEMS):
        status: TodoStatus = "pending"
        if progress >= 2 * k + 2:
            status = "completed"
        elif progress >= 2 * k + 1:
            status = "in_progress"
        items.append(TodoItem(id=str(k + 1), content=f"refactor module {k + 1}", status=status))
    return tuple(items)


def _round(round_number: int) -> list[Message]:
    calls = [
        ToolCall(
            id=f"r{round_number}c{k}", name=name, arguments={"path": f"src/mod_{round_number}.py"}
        )
        for k, name in enumerate(["read_file", "run_tests"][: 1 + (round_number % 4 == 0)])
    ]
    messages = [
        Message(
            role="assistant", content=f"Round {round_number}: next step.", tool_calls=tuple(calls)
        )
    ]
    for call in calls:
        output = f"{call.name} output for round {round_number}: " + "lorem ipsum " * (
            20 + round_number % 7 * 10
        )
        messages.append(Message(role="tool", tool_call_id=call.id, content=output))
    if round_number % 25 == 0:
        messages.append(
            Message(
                role="user",
                content=f"Status check at round {round_number}?",
                kind=MessageKind.INPUT,
            )
        )
        messages.append(Message(role="assistant", content="On track; continuing."))
    return messages


def _render(format: ProviderFormat, payload: dict[str, Any]) -> str:
    if format is ProviderFormat.ANTHROPIC:
        ordered: Any = [payload.get("system"), payload["messages"]]
    else:
        ordered = payload["messages"]
    text = json.dumps(ordered, sort_keys=True, ensure_ascii=False)
    return text.replace(', "cache_control": {"type": "ephemeral"}', "").replace(
        '"cache_control": {"type": "ephemeral"}, ', ""
    )


def _common_prefix(a: str, b: str) -> int:
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def _openai_cached(prefix_tokens: int) -> int:
    # provider-rules.md: automatic from 1024 tokens, in 128-token increments.
    return 0 if prefix_tokens < 1024 else 128 * (prefix_tokens // 128)


def simulate(policy: PlacementPolicy, format: ProviderFormat) -> dict[str, float]:
    history: list[Message] = [
        Message(role="user", content="Refactor the service; keep tests green.")
    ]
    previous = ""
    recomputed = prompt = openai_cached = 0
    distances: list[int] = []
    for round_number in range(1, ROUNDS + 1):
        slots = ContextSlots(todo=_todo(round_number), useful_info=USEFUL_INFO)
        assembly = assemble(
            history,
            profile=PROFILE,
            slots=slots,
            format=format,
            options=AssembleOptions(policy=policy),
        )
        text = _render(format, assembly.payload)
        common = _common_prefix(previous, text)
        recomputed += approximate_tokens(text[common:])
        prompt += approximate_tokens(text)
        openai_cached += _openai_cached(approximate_tokens(text[:common]))
        distances.append(assembly.diagnostics.special_block.distance_from_end or 0)
        previous = text
        history.extend(_round(round_number))
    figures = {
        "total_recomputed_tokens": recomputed,
        "mean_recomputed_per_request": recomputed / ROUNDS,
        "total_prompt_tokens": prompt,
        "reuse_ratio": 1 - recomputed / prompt,
        "mean_special_block_distance_from_end": sum(distances) / len(distances),
    }
    if format is ProviderFormat.OPENAI_CHAT:
        figures["openai_cached_ratio"] = openai_cached / prompt
    return figures


def main() -> None:
    started = time.perf_counter()
    figures: dict[str, Any] = {}
    rows: list[list[Any]] = []
    for format in FORMATS:
        for policy in PlacementPolicy:
            result = simulate(policy, format)
            figures[f"{format.value}/{policy.value}"] = result
            rows.append(
                [
                    format.value,
                    policy.value,
                    result["total_recomputed_tokens"],
                    result["mean_recomputed_per_request"],
                    result["total_prompt_tokens"],
                    result["reuse_ratio"],
                    result["mean_special_block_distance_from_end"],
                ]
            )
    elapsed = time.perf_counter() - started
    path = write_results(
        "cache_reuse",
        figures,
        notes=f"{ROUNDS} tool rounds, TODO changes every {TODO_EVERY} rounds; approximate tokens "
        f"(chars/4) on sorted-key JSON in provider order; ran in {elapsed:.1f}s",
    )
    print_table(
        f"Prefix-cache reuse over {ROUNDS} requests (results in {path})",
        ["format", "policy", "recomputed", "mean/request", "prompt", "reuse", "SP distance"],
        rows,
    )


if __name__ == "__main__":
    main()
