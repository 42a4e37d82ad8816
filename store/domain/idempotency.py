"""Recognising a retried append by its client message ids.

An agent that retries after a timeout sends the same messages with the same
`client_message_id`s. If every one of them is already stored with the same
content, the retry is answered with the stored messages and nothing is
written; a mix of known and new ids, or a known id with other content, is
an `IdempotencyConflict` rather than a guess. (Retries by idempotency key
are recognised by the request's hash; see `store.repository`.)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from store.domain.errors import IdempotencyConflict
from store.domain.messages import Message, StoredMessage
from store.domain.records import canonical_hash


def request_hash(messages: Sequence[Message]) -> str:
    """What an idempotency key is bound to: the append's messages."""
    return canonical_hash([m.model_dump(mode="json") for m in messages])


def client_ids(messages: Sequence[Message]) -> list[str]:
    return [m.client_message_id for m in messages if m.client_message_id is not None]


def replay_by_client_ids(
    messages: Sequence[Message], found: Mapping[str, StoredMessage]
) -> list[StoredMessage] | None:
    """The stored messages this append repeats, or None if it is new.

    `found` maps the append's client ids that are already stored to their
    stored messages.
    """
    if not found:
        return None
    if len(found) != len(messages):
        raise IdempotencyConflict(
            ",".join(sorted(found)),
            "some client message ids are already stored and others are not",
        )
    replay = []
    for message in messages:
        assert message.client_message_id is not None
        original = found[message.client_message_id]
        if _comparable(original.as_message()) != _comparable(message):
            raise IdempotencyConflict(
                message.client_message_id, "a message with this client id has other content"
            )
        replay.append(original)
    return replay


def _comparable(message: Message) -> Message:
    # The store may have computed the token estimate on the first attempt.
    return message.model_copy(update={"token_estimate": None})
