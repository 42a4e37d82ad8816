"""The LangChain chat history adapter under RunnableWithMessageHistory,
with LangChain's fake chat model (no network)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("langchain_core")

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables.history import RunnableWithMessageHistory

from store.adapters.langchain import ConvoChatMessageHistory, run_sync
from store.memory import InMemoryRepository
from store.repository import Repository

# langchain-core 1.x deprecates RunnableWithMessageHistory (for LangGraph);
# it is what BaseChatMessageHistory users run, so it is what we test.
pytestmark = pytest.mark.filterwarnings(
    "ignore:RunnableWithMessageHistory is deprecated:DeprecationWarning"
)

MESSAGES: list[BaseMessage] = [
    SystemMessage("Be brief."),
    HumanMessage(
        [
            {"type": "text", "text": "What is this?"},
            {"type": "image_url", "image_url": {"url": "https://x.test/a.png", "detail": "low"}},
            {"type": "image", "base64": "iVBORw0KGgo=", "mime_type": "image/png"},
            "plain string block",
        ],
        id="h1",
    ),
    AIMessage(
        "",
        tool_calls=[{"id": "c1", "name": "look", "args": {"q": "cat", "n": 2}}],
        response_metadata={"model": "fake"},
    ),
    ToolMessage("a cat", tool_call_id="c1", status="error", artifact={"raw": [1]}),
    AIMessage(
        "It is a cat.", usage_metadata={"input_tokens": 1, "output_tokens": 2, "total_tokens": 3}
    ),
    ToolMessage("orphan", tool_call_id="nowhere"),
]


def _chain(repository: Repository, replies: list[str]) -> RunnableWithMessageHistory:
    prompt = ChatPromptTemplate.from_messages(
        [("system", "Answer."), MessagesPlaceholder("history"), ("human", "{question}")]
    )
    model = GenericFakeChatModel(messages=iter(AIMessage(r) for r in replies))
    return RunnableWithMessageHistory(
        prompt | model,
        lambda session_id: ConvoChatMessageHistory(session_id, repository),
        input_messages_key="question",
        history_messages_key="history",
    )


async def test_chain_keeps_history_across_turns(repository: Repository) -> None:
    chain = _chain(repository, ["Hi Ann.", "Your name is Ann."])
    config: Any = {"configurable": {"session_id": "s1"}}
    await chain.ainvoke({"question": "I am Ann."}, config=config)
    answer = await chain.ainvoke({"question": "Who am I?"}, config=config)
    assert answer.content == "Your name is Ann."
    history = await ConvoChatMessageHistory("s1", repository).aget_messages()
    assert [(type(m).__name__, m.content) for m in history] == [
        ("HumanMessage", "I am Ann."),
        ("AIMessage", "Hi Ann."),
        ("HumanMessage", "Who am I?"),
        ("AIMessage", "Your name is Ann."),
    ]


async def test_every_message_type_round_trips(repository: Repository) -> None:
    history = ConvoChatMessageHistory("all", repository)
    await history.aadd_messages(MESSAGES)
    assert await ConvoChatMessageHistory("all", repository).aget_messages() == MESSAGES
    await history.aclear()
    assert await history.aget_messages() == []
    await history.aadd_messages(MESSAGES[2:4])  # the same call ids again, after a clear
    assert await history.aget_messages() == MESSAGES[2:4]


def test_sync_methods_run_on_the_background_loop() -> None:
    repository = InMemoryRepository()
    chain = _chain(repository, ["one", "two"])
    config: Any = {"configurable": {"session_id": "sync"}}
    chain.invoke({"question": "a"}, config=config)
    chain.invoke({"question": "b"}, config=config)
    history = ConvoChatMessageHistory("sync", repository)
    assert [m.content for m in history.messages] == ["a", "one", "b", "two"]
    history.clear()
    assert history.messages == []
    assert (
        run_sync(repository.count_by_role(history._conversation.id, scope="history"))["user"] == 2
    )


async def test_sync_method_on_its_own_loop_is_refused() -> None:
    history = ConvoChatMessageHistory(
        "x", InMemoryRepository(), loop=__import__("asyncio").get_running_loop()
    )
    with pytest.raises(RuntimeError, match="async method"):
        history.add_messages([HumanMessage("hi")])


_text = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=20
).filter(str.strip)


@st.composite
def _messages(draw: st.DrawFn) -> list[BaseMessage]:
    out: list[BaseMessage] = []
    for n in range(draw(st.integers(1, 5))):
        kind = draw(st.integers(0, 3))
        if kind == 0:
            out.append(HumanMessage(draw(_text), id=draw(st.none() | _text)))
        elif kind == 1:
            out.append(SystemMessage(draw(_text)))
        elif kind == 2:
            out.append(
                AIMessage(
                    draw(_text), additional_kwargs=draw(st.dictionaries(_text, _text, max_size=2))
                )
            )
        else:
            args = draw(st.dictionaries(_text, st.integers(0, 9) | _text, max_size=3))
            out.append(AIMessage("", tool_calls=[{"id": f"c{n}", "name": "t", "args": args}]))
            out.append(
                ToolMessage(
                    draw(st.text(max_size=5).filter(lambda s: "\x00" not in s)),
                    tool_call_id=f"c{n}",
                )
            )
    return out


@given(messages=_messages())
async def test_round_trip_property(messages: list[BaseMessage]) -> None:
    history = ConvoChatMessageHistory("prop", InMemoryRepository())
    await history.aadd_messages(messages)
    assert await history.aget_messages() == messages
