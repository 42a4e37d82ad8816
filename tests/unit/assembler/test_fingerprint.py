"""The stable-prefix fingerprint: the fast pass of `stable_prefix` hashes
exactly the text the definition (`fingerprint`, `message_record`) names."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from store.assembler.diagnostics import Diagnostics, StablePrefix
from store.assembler.fingerprint import fingerprint, stable_prefix
from store.domain.messages import Message
from store.domain.tokens import approximate_tokens, estimate_message_tokens
from tests.unit.assembler.builders import AC, T, U, build
from tests.unit.assembler.strategies import conversations


def words(text: str) -> int:
    return len(text.split())


@settings(max_examples=200, database=None)
@given(
    conversation=conversations(),
    system_prompt=st.none() | st.sampled_from(["", "be brief", "é\n"]),
    approximate=st.booleans(),
)
def test_the_fast_pass_is_the_definition(
    conversation: tuple[list[Message], str], system_prompt: str | None, approximate: bool
) -> None:
    messages, _ = conversation
    count = approximate_tokens if approximate else words
    prefix, tokens = stable_prefix(
        format="anthropic", system_prompt=system_prompt, prefix=messages, count=count
    )
    assert prefix.fingerprint == fingerprint(
        format="anthropic", system_prompt=system_prompt, prefix=messages
    )
    assert tokens == sum(estimate_message_tokens(m, count) for m in messages)


def test_the_fingerprint_of_a_known_prefix_never_changes() -> None:
    """Version 2's value for these messages: a change to the definition
    must change the version (the header), not silently the value."""
    messages = [U("héllo"), AC(1), T(1), U("next")]
    assert fingerprint(format="openai-chat", system_prompt="be brief", prefix=messages) == (
        "abcb8d51c8542812c51b47951c4385eac44cb7996804b538767c36defae66dd2"
    )


def test_the_fingerprint_is_computed_when_first_read_and_kept() -> None:
    made: list[int] = []

    def digest() -> str:
        made.append(1)
        return "f" * 64

    prefix = StablePrefix.of(digest, tokens=7, message_count=2)
    assert made == []  # a build whose caller only sends the payload never hashes
    assert prefix.fingerprint == prefix.fingerprint == "f" * 64
    assert made == [1]
    assert prefix.model_dump(mode="json") == {
        "tokens": 7,
        "message_count": 2,
        "fingerprint": "f" * 64,
    }
    assert prefix == StablePrefix.of(lambda: "f" * 64, tokens=7, message_count=2)
    assert prefix != StablePrefix.of(lambda: "e" * 64, tokens=7, message_count=2)


def test_diagnostics_read_back_from_json_keep_the_fingerprint() -> None:
    assembly = build([U("hi"), AC(1), T(1), U("next")], format="anthropic")
    dumped = assembly.diagnostics.model_dump(mode="json")
    again = Diagnostics.model_validate(dumped)
    assert again == assembly.diagnostics
    assert again.stable_prefix.fingerprint == assembly.diagnostics.stable_prefix.fingerprint
    assert again.model_dump(mode="json") == dumped
