"""The optional `merge_same_role` pass (docs/behaviours.md §5).

Adjacent messages of the same role are joined with "\\n" into one; empty
text is dropped. Unlike the source, a message carrying tool calls or a tool
result is never merged away: tool messages never merge, a message with
calls only ever absorbs the text before it, and reasoning is kept. The
special block is never joined to the messages around it, so the stable
prefix before it stays byte-identical from one build to the next.
"""

from __future__ import annotations

from collections.abc import Sequence

from store.assembler.diagnostics import Repair, RepairKind
from store.assembler.special_block import is_special
from store.domain.messages import Content, ContentPart, Message, TextPart


def _parts(content: Content) -> tuple[ContentPart, ...]:
    if isinstance(content, str):
        return (TextPart(text=content),) if content.strip() else ()
    return tuple(p for p in content if not (isinstance(p, TextPart) and not p.text.strip()))


def _join(first: Content, second: Content) -> Content:
    if isinstance(first, str) and isinstance(second, str):
        return "\n".join(text for text in (first, second) if text.strip())
    return _parts(first) + _parts(second)


def merge_same_role(history: Sequence[Message]) -> tuple[list[Message], list[Repair]]:
    out: list[Message] = []
    repairs: list[Repair] = []
    # The run being merged into out[-1]: its first message and what joined it.
    # Each merged message is built once, at the end of its run, so a long run
    # costs time linear in its length (joining pairwise copied the growing text).
    run: list[Message] = []

    def close_run() -> None:
        if len(run) > 1:
            out[-1] = _merged(run)
        run.clear()

    for message in history:
        if run and _can_merge_into_run(run, message):
            run.append(message)
            repairs.append(
                Repair(
                    kind=RepairKind.MERGED_SAME_ROLE,
                    detail=f"adjacent {message.role} messages joined (at {len(out) - 1})",
                )
            )
        else:
            close_run()
            out.append(message)
            run.append(message)
    close_run()
    return out, repairs


def _can_merge_into_run(run: Sequence[Message], message: Message) -> bool:
    # The message the run has become so far has the first message's role, kind
    # and metadata, and the tool calls of the last one joined.
    first = run[0]
    return (
        first.role == message.role
        and message.role != "tool"
        and not run[-1].tool_calls
        and first.kind == message.kind
        and is_special(first) == is_special(message)
    )


def _merged(run: Sequence[Message]) -> Message:
    """What joining the run's messages pairwise, left to right, gives."""
    contents = [m.content for m in run]
    content: Content
    if all(isinstance(c, str) for c in contents):
        # Pairwise "\n"-joins dropping blank text: the non-blank texts, "\n"-joined.
        content = "\n".join(text for text in contents if isinstance(text, str) and text.strip())
    else:
        content = contents[0]
        for following in contents[1:]:
            content = _join(content, following)
    reasoning = tuple(block for m in run for block in m.reasoning)
    return run[0].model_copy(
        update={"content": content, "tool_calls": run[-1].tool_calls, "reasoning": reasoning}
    )
