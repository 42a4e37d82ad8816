"""The storage's cache of stable-prefix hashes (`store.assembler.prefix_cache`):
what it answers is `digest_rows`'s answer, whatever it kept, and it keeps
no more than its bounds. The same through the repository on the in-memory
storage: tests/contract/test_prefix_cache.py, and below, a property over
random appends, edits and builds."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from store.assembler.fingerprint import digest_rows, fingerprint
from store.assembler.prefix_cache import PrefixCache
from store.assembler.system_prompt import choose_system_prompt
from store.domain.context import AgentProfile
from store.domain.errors import InvalidOperation
from store.domain.messages import Message, ToolCall
from store.memory import InMemoryRepository


def row(text: str, position: int, edit: str | None = None, edit_version: int = 0) -> Any:
    """A row as a storage reads it for a payload build (`StoredWindow`)."""
    body = {"message": {"role": "user", "content": text}}
    return (body, None if edit is None else {"content": edit}, position, edit_version)


def test_what_it_answers_is_digest_rows() -> None:
    cache = PrefixCache()
    rows = [row(f"m{n}", 100 + n) for n in range(6)]
    for size in (3, 3, 6, 2, 6):  # grown, unchanged, shorter, longer again
        assert cache.digest("w", "openai-chat", None, rows[:size]) == digest_rows(
            "openai-chat", None, rows[:size]
        )
    edited = [*rows[:2], row("m2", 102, "m2, edited", 40), *rows[3:]]
    assert cache.digest("w", "openai-chat", None, edited) == digest_rows(
        "openai-chat", None, edited
    )


def test_the_window_only_chooses_the_hash_tried() -> None:
    """Other messages under the same window name (a window that is not what
    it was): their positions differ, so nothing kept is reused."""
    cache = PrefixCache()
    first = [row("a", 1), row("b", 2)]
    other = [row("c", 3), row("d", 4), row("e", 5)]
    cache.digest("w", "anthropic", "be brief", first)
    assert cache.digest("w", "anthropic", "be brief", other) == digest_rows(
        "anthropic", "be brief", other
    )
    assert cache.digest("w", "anthropic", None, other) == digest_rows("anthropic", None, other)


def test_it_keeps_no_more_than_its_bounds() -> None:
    cache = PrefixCache(windows=3, messages=10)
    for window in range(5):
        cache.digest(window, "openai-chat", None, [row("x", 10 * window + n) for n in range(2)])
    assert len(cache) == 3  # the least recently used went first
    cache.digest("long", "openai-chat", None, [row("y", 100 + n) for n in range(9)])
    assert len(cache) == 1  # 9 messages' identities: room for no other window
    cache.digest("too long", "openai-chat", None, [row("z", 200 + n) for n in range(11)])
    assert len(cache) == 1  # over the bound alone: answered, not kept


WORDS = st.sampled_from(["alpha", "beta", "", "日本", "fix\nthe parser", "ok"])
OPERATION = st.one_of(
    st.tuples(st.just("append"), st.sampled_from(["user", "assistant", "call"]), WORDS),
    st.tuples(st.just("edit"), st.integers(1, 30), WORDS),
    st.tuples(
        st.just("build"),
        st.sampled_from(["openai-chat", "openai-responses", "anthropic"]),
        st.sampled_from([None, "You code.", "You review."]),
    ),
)


async def _run(operations: list[tuple[Any, Any, Any]]) -> None:
    repository = InMemoryRepository()
    cid = (await repository.create_conversation()).id
    calls = 0
    for kind, first, second in operations:
        if kind == "append":
            if first == "call":
                calls += 1
                call = ToolCall(id=f"c{calls}", name="search", arguments={"q": second})
                messages = [
                    Message(role="assistant", content="", tool_calls=(call,)),
                    Message(role="tool", content=second, tool_call_id=call.id),
                ]
            else:
                messages = [Message(role=first, content=second or "x")]
            await repository.append_messages(cid, messages)
        elif kind == "edit":
            if first < (await repository.get_conversation(cid)).next_seq:
                with contextlib.suppress(InvalidOperation):  # the content it has already
                    await repository.replace(cid, first, second or "x")
        else:
            await repository.configure_agent(cid, AgentProfile(system_prompt=second))
            window = await repository.visible_window(cid)
            if not window:
                continue
            prefix = (await repository.assemble(cid, format=first)).diagnostics.stable_prefix
            text = choose_system_prompt(AgentProfile(system_prompt=second)).text
            before_block = prefix.message_count - (text is not None)
            assert prefix.fingerprint == fingerprint(
                format=first, system_prompt=text, prefix=window[:before_block]
            )


@settings(max_examples=150, deadline=None, database=None)
@given(operations=st.lists(OPERATION, min_size=1, max_size=40))
def test_random_appends_edits_and_builds(operations: list[tuple[Any, Any, Any]]) -> None:
    asyncio.run(_run(operations))
