"""Feed positions as vectors of per-partition positions, and their tokens
(store.domain.feed_vector): what a client holds must come back as it was,
the checkpoint of before partitions must mean what it meant, and anything
else must be refused with the problem named."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from store.domain.errors import InvalidOperation
from store.domain.feed_vector import (
    FIRST_PARTITION,
    MAX_PARTITIONS,
    FeedVector,
    as_vector,
    parse_position,
    position_token,
)
from store.domain.inputs import MAX_BIGINT
from store.domain.records import FeedPosition

positions = st.builds(
    FeedPosition,
    transaction_id=st.integers(0, MAX_BIGINT),
    position=st.integers(0, MAX_BIGINT),
)
vectors = st.dictionaries(
    st.from_regex(r"[a-z0-9_]{1,32}", fullmatch=True), positions, max_size=8
).map(FeedVector.of)


def body(payload: str) -> str:
    return base64.urlsafe_b64encode(payload.encode()).decode().rstrip("=")


@given(vectors)
def test_a_token_reads_back_as_its_vector(vector: FeedVector) -> None:
    token = vector.token()
    assert parse_position(token) == vector
    assert token.startswith("v1.")
    assert all(c.isalnum() or c in "._-" for c in token)  # URL-safe as it is


@given(vectors, st.from_regex(r"[a-z0-9_]{1,32}", fullmatch=True), positions)
def test_a_stamp_is_the_token_of_the_moved_vector(
    vector: FeedVector, partition: str, position: FeedPosition
) -> None:
    stamp = vector.stamper(partition)
    moved = vector.moved(partition, position)
    assert stamp(position.transaction_id, position.position) == moved.token()


def test_a_checkpoint_of_before_partitions_is_a_position_of_the_first_partition() -> None:
    vector = parse_position("812-40311")
    assert vector == FeedVector.single(FeedPosition(transaction_id=812, position=40311))
    assert vector.at(FIRST_PARTITION) == FeedPosition(transaction_id=812, position=40311)
    assert parse_position("0-0").at(FIRST_PARTITION) == FeedPosition.start()


def test_a_partition_the_vector_does_not_name_is_read_from_its_origin() -> None:
    vector = parse_position("812-40311")
    assert vector.at("1") == FeedPosition.start()
    grown = vector.moved("1", FeedPosition(transaction_id=5, position=7))
    assert grown.partitions == (FIRST_PARTITION, "1")
    assert grown.at(FIRST_PARTITION) == vector.at(FIRST_PARTITION)


def test_what_callers_pass_as_after() -> None:
    position = FeedPosition(transaction_id=3, position=4)
    assert as_vector(None) is None
    assert as_vector(position) == FeedVector.single(position)
    assert as_vector("3-4") == FeedVector.single(position)
    assert position_token(position) == FeedVector.single(position).token()
    assert position_token("anything") == "anything"  # the server checks it
    assert parse_position(FeedVector.origin().token()) == FeedVector.origin()  # every origin


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("", "neither a token"),
        ("12", "neither a token"),
        ("-1-2", "neither a token"),
        ("1-2-3", "neither a token"),
        (f"{MAX_BIGINT + 1}-0", "out of range"),
        ("v1." + "A" * 3000, "at most 2048 characters"),
        ("v0.", "version 0"),
        ("v1.A", "base64url"),
        ("v1.__8", "base64url"),
        ("v1." + body("0:1-2,0:3-4"), "twice"),
        ("v1." + body("0:1-2,"), "entry"),
        ("v1." + body("Zero:1-2"), "entry"),
        ("v1." + body("0:1"), "entry"),
        ("v1." + body("0:1-2;DROP TABLE events"), "entry"),
        ("v1." + body(",".join(f"p{i}:1-1" for i in range(MAX_PARTITIONS + 1))), "partitions"),
        ("v1." + body(f"0:{MAX_BIGINT + 1}-0"), "out of range"),
    ],
)
def test_a_bad_token_is_refused_naming_the_problem(text: str, named: str) -> None:
    with pytest.raises(InvalidOperation, match="not a feed position") as refused:
        parse_position(text)
    assert named in str(refused.value)


def test_a_partition_the_feed_does_not_have_is_refused() -> None:
    vector = parse_position("v1." + body("0:1-1,eu_west:2-2"))
    assert vector.check_partitions(("0", "eu_west")) is vector
    with pytest.raises(InvalidOperation, match="partition 'eu_west'"):
        vector.check_partitions((FIRST_PARTITION,))
