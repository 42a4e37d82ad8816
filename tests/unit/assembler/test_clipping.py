"""Tool-result clipping (docs/assembler.md, "Tool-result clipping"): head
and tail kept with a marker saying how much was cut, in every format, the
block never split, the stored result unchanged, clip before the budget."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from store.assembler import AssembleOptions, ProviderFormat, assemble_stored, validate
from store.assembler.clipping import clip_parts, clip_text, marker
from store.domain.codec import StoredWindow
from store.domain.messages import ImagePart, Message, TextPart
from tests.unit.assembler.builders import AC, MAIN, ONE_SLOT, A, T, U, build, shape
from tests.unit.assembler.test_plain import stored_rows

HEAD, MIDDLE, TAIL = "HEAD" + "h" * 996, "m" * 198_000, "t" * 996 + "TAIL"
BIG = HEAD + MIDDLE + TAIL


def test_a_short_result_is_sent_whole() -> None:
    assert clip_text("abc", 200) == ("abc", 0)


def test_a_long_result_keeps_head_and_tail_with_a_marker_saying_how_much_was_cut() -> None:
    clipped, cut = clip_text(BIG, 2_000)
    assert len(clipped) <= 2_000
    assert clipped.startswith("HEAD")
    assert clipped.endswith("TAIL")
    assert cut == len(BIG) - (len(clipped) - len(marker(cut)))
    assert f"[… {cut:,} characters cut from this tool result …]" in clipped


@settings(max_examples=200, database=None)
@given(text=st.text(max_size=3_000), limit=st.integers(200, 2_500))
def test_a_clipped_text_is_within_its_limit_and_made_of_the_original(text: str, limit: int) -> None:
    clipped, cut = clip_text(text, limit)
    assert len(clipped) <= limit
    if cut == 0:
        assert clipped == text
    else:
        head, _, tail = clipped.partition(marker(cut))
        assert text.startswith(head)
        assert text.endswith(tail)
        assert len(head) + len(tail) + cut == len(text)
        assert len(head) >= len(tail)


def test_parts_are_cut_as_one_text_and_images_are_kept_in_place() -> None:
    image = ImagePart(url="https://example.com/a.png")
    parts = (TextPart(text="a" * 500), image, TextPart(text="b" * 500))
    clipped, cut = clip_parts(parts, 300)
    assert image in clipped
    text = "".join(p.text for p in clipped if isinstance(p, TextPart))
    assert text.startswith("a")
    assert text.endswith("b")
    assert marker(cut) in text
    assert len(text) <= 300
    assert sum(1 for p in clipped if isinstance(p, TextPart) and marker(cut) in p.text) == 1


@pytest.mark.parametrize("format", list(ProviderFormat))
def test_every_format_sends_the_clipped_result(format: ProviderFormat) -> None:
    history = [U("read the log"), AC(1), T(1, BIG), A("done")]
    assembly = build(history, format=format, max_tool_result_chars=2_000)
    sent = json.dumps(assembly.payload, ensure_ascii=False)
    assert "HEAD" in sent
    assert "TAIL" in sent
    assert MIDDLE not in sent
    assert "characters cut from this tool result" in sent
    assert validate(format, assembly.payload) == []
    seen = shape(assembly)
    assert seen[seen.index("A[1]") + 1] == "T1"  # the block is whole
    clipping = assembly.diagnostics.clipped_tool_results
    assert clipping is not None
    assert (clipping.clipped, clipping.call_ids) == (1, ("c1",))
    assert clipping.cut_chars == len(BIG) - 2_000 + len(marker(clipping.cut_chars))


def test_the_stored_result_is_unchanged() -> None:
    result = T(1, BIG)
    history = [U(), AC(1), result, A()]
    build(history, max_tool_result_chars=2_000)
    assert result.content == BIG
    assert history[2] is result


def test_a_per_tool_limit_wins_over_the_default() -> None:
    history = [U(), AC(1, 2), T(1, BIG), T(2, BIG), A()]
    assembly = build(
        history, max_tool_result_chars=50_000, max_tool_result_chars_by_tool={"tool2": 1_000}
    )
    [first, second] = [m for m in assembly.payload["messages"] if m["role"] == "tool"]
    assert len(first["content"]) == 50_000
    assert len(second["content"]) <= 1_000
    clipping = assembly.diagnostics.clipped_tool_results
    assert clipping is not None
    assert clipping.call_ids == ("c1", "c2")


def test_a_per_tool_limit_alone_clips_only_that_tool() -> None:
    history = [U(), AC(1, 2), T(1, BIG), T(2, BIG), A()]
    assembly = build(history, max_tool_result_chars_by_tool={"tool2": 1_000})
    [first, second] = [m for m in assembly.payload["messages"] if m["role"] == "tool"]
    assert first["content"] == BIG
    assert len(second["content"]) <= 1_000


def test_no_limit_means_no_clipping_diagnostic() -> None:
    assert build([U(), AC(1), T(1, BIG), A()]).diagnostics.clipped_tool_results is None


def test_clipping_comes_before_the_budget_so_the_block_survives() -> None:
    history = [U("question"), AC(1), T(1, BIG), A("answer")]
    # Whole, the result alone is over the budget and its block would be dropped.
    unclipped = build(history, token_budget=2_000)
    assert [s for s in shape(unclipped) if s != "SP"] == ["S", "A"]
    clipped = build(history, token_budget=2_000, max_tool_result_chars=2_000)
    assert [s for s in shape(clipped) if s != "SP"] == ["S", "U", "A[1]", "T1", "A"]
    trim = clipped.diagnostics.dropped_by_budget
    assert trim is not None
    assert trim.dropped_messages == 0


def test_limits_are_ranged_typed_and_sized() -> None:
    with pytest.raises(ValidationError, match="greater than or equal to 200"):
        AssembleOptions(max_tool_result_chars=10)
    with pytest.raises(ValidationError, match="valid integer"):
        AssembleOptions.model_validate({"max_tool_result_chars": "5000"})
    with pytest.raises(ValidationError, match="over the limit of 256"):
        AssembleOptions(max_tool_result_chars_by_tool={f"t{i}": 500 for i in range(300)})
    with pytest.raises(ValidationError):
        AssembleOptions(max_tool_result_chars_by_tool={"": 500})


@pytest.mark.parametrize(
    "format",
    [ProviderFormat.OPENAI_CHAT, ProviderFormat.OPENAI_RESPONSES, ProviderFormat.ANTHROPIC],
)
@pytest.mark.parametrize("content", ["short", BIG])
def test_a_stored_window_builds_as_the_general_path_does(
    format: ProviderFormat, content: str
) -> None:
    messages = [U(), AC(1), T(1, content), A()]
    window = StoredWindow(stored_rows(messages, [None] * len(messages)))
    options = AssembleOptions(max_tool_result_chars=2_000)
    stored = assemble_stored(window, profile=MAIN, slots=ONE_SLOT, format=format, options=options)
    general = build(messages, format=format, max_tool_result_chars=2_000)
    assert stored == general


def test_a_message_stays_valid_after_clipping() -> None:
    clipped = build([U(), AC(1), T(1, BIG), A()], max_tool_result_chars=2_000).messages
    for message in clipped:
        Message.model_validate(message.model_dump())
