"""A reader's place in a feed made of partitions: one position per partition.

Positions in the feed are `(transaction_id, position)` pairs
(`store.postgres.feed`), and transaction ids only mean something on the
server that handed them out. A feed spread over several servers is
therefore a set of partitions, each ordered on its own, and a reader's
place is a vector: the last position it read in each partition. A single
server is one partition, `FIRST_PARTITION`.

A partition the vector does not name is read from its origin, so a
partition added later is read from its beginning and the reader's vector
gains its entry as soon as it reads past it; nothing in it is skipped.

On the wire the vector is a token: opaque to clients, URL-safe, versioned
(`v1.` then base64url without padding of `partition:tx-pos,...`, entries
sorted by partition), so its encoding can change without breaking the
tokens clients hold. The checkpoint written before partitions existed,
`<transaction_id>-<position>`, still parses: it is a position in the
first partition, so a reader holding one resumes where it was.

A token comes from anywhere (a URL, a header, a file), so parsing checks
its size, version, encoding, each entry's form and each number's range,
and names the problem (`InvalidOperation`) rather than failing later.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from store.domain.errors import InvalidOperation
from store.domain.inputs import MAX_BIGINT
from store.domain.records import FeedPosition

FIRST_PARTITION = "0"
TOKEN_VERSION = 1
MAX_TOKEN_CHARS = 2048
MAX_PARTITIONS = 64

PARTITION_NAME = re.compile(r"[a-z0-9_]{1,32}")
_TOKEN = re.compile(r"v(\d{1,3})\.([A-Za-z0-9_-]*)")
_LEGACY = re.compile(r"(\d{1,20})-(\d{1,20})")
_ENTRY = re.compile(r"([a-z0-9_]{1,32}):(\d{1,20})-(\d{1,20})")


def _bad(problem: str) -> InvalidOperation:
    return InvalidOperation(f"not a feed position: {problem}")


def _number(text: str, what: str) -> int:
    value = int(text)
    if value > MAX_BIGINT:
        raise _bad(f"{what} {text[:24]} is out of range (at most {MAX_BIGINT})")
    return value


@dataclass(frozen=True, slots=True)
class FeedVector:
    """The last position read in each partition (a partition not named: its origin)."""

    entries: tuple[tuple[str, FeedPosition], ...] = ()

    @classmethod
    def origin(cls) -> FeedVector:
        """Before every event of every partition."""
        return cls()

    @classmethod
    def of(cls, positions: Mapping[str, FeedPosition]) -> FeedVector:
        for name in positions:
            if PARTITION_NAME.fullmatch(name) is None:
                raise InvalidOperation(f"not a partition name: {name[:40]!r}")
        return cls(tuple(sorted(positions.items())))

    @classmethod
    def single(cls, position: FeedPosition) -> FeedVector:
        """A position of the first partition (what a pre-partition checkpoint meant)."""
        return cls(((FIRST_PARTITION, position),))

    @property
    def partitions(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.entries)

    def at(self, partition: str) -> FeedPosition:
        """Where the reader is in `partition`: its origin if the vector does not name it."""
        for name, position in self.entries:
            if name == partition:
                return position
        return FeedPosition.start()

    def moved(self, partition: str, position: FeedPosition) -> FeedVector:
        """The vector with `partition` at `position`."""
        return FeedVector.of({**dict(self.entries), partition: position})

    def token(self) -> str:
        """The vector as clients hold it (the module docstring)."""
        return _encode(f"{name}:{p.transaction_id}-{p.position}" for name, p in self.entries)

    def stamper(self, partition: str) -> Callable[[int, int], str]:
        """A function giving the token of this vector with `partition` moved
        to `(transaction_id, position)`: the checkpoint of each event of a
        page, built without a new vector per event."""
        before = [f"{n}:{p.transaction_id}-{p.position}" for n, p in self.entries if n < partition]
        after = [f"{n}:{p.transaction_id}-{p.position}" for n, p in self.entries if n > partition]
        head = ",".join(before) + "," if before else ""
        tail = "," + ",".join(after) if after else ""
        return lambda tx, pos: _encode_text(f"{head}{partition}:{tx}-{pos}{tail}")

    def check_partitions(self, known: Iterable[str]) -> FeedVector:
        """This vector, if it names only partitions of `known`; else `InvalidOperation`."""
        names = set(known)
        unknown = [name for name in self.partitions if name not in names]
        if unknown:
            raise InvalidOperation(
                f"the feed position names partition {unknown[0]!r}, which this feed does not"
                f" have (it has: {', '.join(sorted(names))}); it comes from another deployment"
            )
        return self


def _encode(entries: Iterable[str]) -> str:
    return _encode_text(",".join(entries))


_PREFIX = f"v{TOKEN_VERSION}."
_URL_SAFE = bytes.maketrans(b"+/", b"-_")


def _encode_text(payload: str) -> str:
    # base64url without padding; binascii directly, as every event of a page
    # is stamped with one (`stamper`).
    encoded = binascii.b2a_base64(payload.encode("ascii"), newline=False)
    return _PREFIX + encoded.translate(_URL_SAFE).rstrip(b"=").decode("ascii")


def parse_position(text: str) -> FeedVector:
    """A token (or a pre-partition checkpoint `<transaction_id>-<position>`)
    as a vector; `InvalidOperation` naming what is wrong with it."""
    if not isinstance(text, str):
        raise _bad(f"a feed position is a string, got {type(text).__name__}")
    if len(text) > MAX_TOKEN_CHARS:
        raise _bad(f"at most {MAX_TOKEN_CHARS} characters, got {len(text)}")
    text = text.strip()
    legacy = _LEGACY.fullmatch(text)
    if legacy is not None:
        return FeedVector.single(
            FeedPosition(
                transaction_id=_number(legacy[1], "transaction id"),
                position=_number(legacy[2], "position"),
            )
        )
    token = _TOKEN.fullmatch(text)
    if token is None:
        raise _bad(
            f"{text[:40]!r} is neither a token ('v{TOKEN_VERSION}.…', as `next` and each"
            " event's `checkpoint` give it) nor a checkpoint '<transaction_id>-<position>'"
        )
    if int(token[1]) != TOKEN_VERSION:
        raise _bad(f"token version {int(token[1])} is not known (this server reads v1)")
    payload = token[2]
    try:
        decoded = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)).decode("ascii")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise _bad("the token's body is not valid base64url of text") from None
    positions: dict[str, FeedPosition] = {}
    entries = decoded.split(",") if decoded else []
    if len(entries) > MAX_PARTITIONS:
        raise _bad(f"at most {MAX_PARTITIONS} partitions, got {len(entries)}")
    for entry in entries:
        found = _ENTRY.fullmatch(entry)
        if found is None:
            raise _bad(f"entry {entry[:40]!r} is not '<partition>:<transaction_id>-<position>'")
        if found[1] in positions:
            raise _bad(f"partition {found[1]!r} appears twice")
        positions[found[1]] = FeedPosition(
            transaction_id=_number(found[2], "transaction id"),
            position=_number(found[3], "position"),
        )
    return FeedVector.of(positions)


def as_vector(after: FeedVector | FeedPosition | str | None) -> FeedVector | None:
    """What a caller passed as `after`, as a vector: a vector as it is, a
    position as one of the first partition, a token parsed; None stays None."""
    if after is None or isinstance(after, FeedVector):
        return after
    if isinstance(after, FeedPosition):
        return FeedVector.single(after)
    return parse_position(after)


def position_token(after: FeedVector | FeedPosition | str | None) -> str | None:
    """What a caller passed as `after`, as the token a server reads: a token
    is sent as it is (the server checks it and names what is wrong)."""
    if after is None or isinstance(after, str):
        return after
    if isinstance(after, FeedPosition):
        return FeedVector.single(after).token()
    return after.token()
