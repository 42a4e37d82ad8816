"""Cold storage: archived conversations moved out to files, and put back.

A conversation in cold storage is two files in a directory, named by its
stream id (store.domain.conversation_keys: unique across tenants, safe as a
file name whatever the conversation's id):

    <stream id>.jsonl           its events, one per line, as the raw export
                                writes them (store.repository.export)
    <stream id>.manifest.json   the tenant and id, how many events, the
                                events' hash and the file's sha256

Moving one out (`archive_conversation`), in this order:
1. its events are written to `<stream id>.jsonl.partial`, flushed to disk and
   renamed into place;
2. the file is read back and must give the same number of events with the
   same hash (`events_sha256`: each event's version, type, time and data,
   canonically encoded) as were read from the store, else `ColdCopyMismatch`;
3. the manifest is written (flushed, renamed into place);
4. only then is the conversation deleted, and only if it is still archived
   and at the version the copy ends at (`Repository.delete_archived`).
A failure or crash before 4 leaves the conversation as it was (a file left
behind is written again by the next run); one that wrote to the conversation
in between makes 4 refuse. Nothing is lost either way.

Putting one back (`restore_cold_copy`) checks the manifest against the file
(sha256, count, hash) before anything is written, then inserts the events
as they were recorded (`Repository.restore_conversation`): the same ids,
versions, seqs and payloads, views rebuilt from them in the same
transaction. A live conversation of that id is refused.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from store.domain.codec import without_default_kind
from store.domain.conversation_keys import stream_id
from store.domain.errors import ConvoStoreError, InvalidOperation
from store.domain.events import EVENT_TYPES, from_data
from store.domain.feed import FeedEvent
from store.domain.listing import conversation_query
from store.domain.values import Conversation
from store.repository.export import event_batches
from store.repository.port import RestoredEvent
from store.repository.repository import Repository

FORMAT: Literal["convo-store cold copy"] = "convo-store cold copy"
EVENTS_SUFFIX = ".jsonl"
MANIFEST_SUFFIX = ".manifest.json"
PARTIAL_SUFFIX = ".partial"
MAX_MANIFEST_BYTES = 64 * 1024
RESTORE_PAGE = 1000
LISTING_PAGE = 100


class ColdCopyMismatch(ConvoStoreError):
    """A cold copy does not read back as what it should hold: nothing was
    deleted (archiving) or written (restoring)."""


class ColdManifest(BaseModel):
    """What a cold copy holds, written beside it once it is verified."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    format: Literal["convo-store cold copy"] = FORMAT
    format_version: Literal[1] = 1
    tenant: str = Field(min_length=1, max_length=200)
    conversation_id: str = Field(min_length=1, max_length=200)
    stream_id: uuid.UUID
    events: int = Field(ge=1)
    last_version: int = Field(ge=1)
    events_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    file: str = Field(pattern=r"^[0-9a-f-]{36}\.jsonl$")
    file_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    copied_at: datetime


class _Digest:
    """The hash of a run of events, and how many: the same whether they were
    read from the store or from a file."""

    def __init__(self) -> None:
        self.events = 0
        self._sha = hashlib.sha256()

    def add(self, event: FeedEvent) -> None:
        canonical = {
            "version": event.version,
            "type": event.type,
            "recorded_at": event.recorded_at,
            "data": event.data,
        }
        self._sha.update(orjson.dumps(canonical, option=orjson.OPT_SORT_KEYS) + b"\n")
        self.events += 1

    @property
    def hexdigest(self) -> str:
        return self._sha.hexdigest()


# --- which conversations move -------------------------------------------------------


async def retention_candidates(
    repository: Repository, last_written_before: datetime
) -> AsyncIterator[Conversation]:
    """The tenant's archived conversations last written before the time,
    oldest first (keyset pages: deleting one on the way moves nothing)."""
    cursor: str | None = None
    while True:
        query = conversation_query(
            archived=True,
            updated_to=last_written_before,
            order="oldest",
            limit=LISTING_PAGE,
            cursor=cursor,
        )
        page = await repository.list_conversations(query)
        for conversation in page.items:
            yield conversation
        if page.next_cursor is None:
            return
        cursor = page.next_cursor


# --- moving one out -----------------------------------------------------------------


def cold_paths(directory: Path, tenant: str, conversation_id: str) -> tuple[Path, Path]:
    """Where the conversation's cold copy and its manifest are kept."""
    name = str(stream_id(tenant, conversation_id))
    return directory / f"{name}{EVENTS_SUFFIX}", directory / f"{name}{MANIFEST_SUFFIX}"


@contextmanager
def _written_durably(path: Path) -> Iterator[BinaryIO]:
    """`path`, written whole or not at all: a partial file, flushed to disk,
    renamed into place (and the rename flushed) when the block ends."""
    partial = path.with_name(path.name + PARTIAL_SUFFIX)
    with partial.open("wb") as file:
        yield file
        file.flush()
        os.fsync(file.fileno())
    os.replace(partial, path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def _file_sha256(path: Path) -> str:
    sha = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(1 << 20):
            sha.update(chunk)
    return sha.hexdigest()


def _read_events(path: Path, conversation_id: str) -> Iterator[FeedEvent]:
    """The cold copy's events, each line checked; `ColdCopyMismatch` names a bad one."""
    with path.open("rb") as file:
        for number, line in enumerate(file, start=1):
            try:
                event = FeedEvent.model_validate_json(line)
            except ValidationError as error:
                problem = error.errors()[0]
                raise ColdCopyMismatch(
                    f"{path.name} line {number} is not an event: {problem['msg']}"
                ) from None
            if event.conversation_id != conversation_id:
                raise ColdCopyMismatch(
                    f"{path.name} line {number} is an event of another conversation"
                )
            yield event


def read_back(path: Path, conversation_id: str) -> tuple[int, str]:
    """How many events the cold copy holds, and their hash (`events_sha256`)."""
    digest = _Digest()
    for event in _read_events(path, conversation_id):
        digest.add(event)
    return digest.events, digest.hexdigest


def verify_cold_copy(path: Path, conversation_id: str, *, events: int, events_sha256: str) -> None:
    """`ColdCopyMismatch` unless the file reads back as `events` events whose
    hash is `events_sha256`."""
    found, sha256 = read_back(path, conversation_id)
    if (found, sha256) != (events, events_sha256):
        raise ColdCopyMismatch(
            f"{path.name} reads back as {found} events (hash {sha256[:12]}),"
            f" not the {events} (hash {events_sha256[:12]}) it should hold"
        )


async def archive_conversation(
    repository: Repository, conversation: Conversation, directory: Path
) -> ColdManifest:
    """Move one archived conversation to cold storage (the module docstring); its manifest."""
    if not conversation.archived:
        raise InvalidOperation(f"conversation {conversation.id} is not archived; it stays")
    key = conversation.id
    path, manifest_path = cold_paths(directory, repository.tenant, key)
    # A copy written again (a run that failed, a conversation archived once
    # more) has no manifest until it is verified: an old one must not vouch for it.
    manifest_path.unlink(missing_ok=True)
    digest = _Digest()
    last_version = 0
    with _written_durably(path) as file:
        async for page in event_batches(repository, key):
            for event in page:
                digest.add(event)
            file.write(b"".join(orjson.dumps(e.model_dump(mode="json")) + b"\n" for e in page))
            last_version = page[-1].version
    if digest.events == 0:
        path.unlink()
        raise InvalidOperation(f"conversation {key} has no events to copy; it stays")
    verify_cold_copy(path, key, events=digest.events, events_sha256=digest.hexdigest)
    manifest = ColdManifest(
        tenant=repository.tenant,
        conversation_id=key,
        stream_id=stream_id(repository.tenant, key),
        events=digest.events,
        last_version=last_version,
        events_sha256=digest.hexdigest,
        file=path.name,
        file_sha256=_file_sha256(path),
        copied_at=datetime.now(UTC),
    )
    with _written_durably(manifest_path) as file:
        file.write(manifest.model_dump_json(indent=2).encode() + b"\n")
    await repository.delete_archived(key, version=last_version)
    return manifest


# --- putting one back ---------------------------------------------------------------


def read_manifest(path: Path) -> tuple[ColdManifest, Path]:
    """The manifest of the cold copy at `path` (the copy or its manifest),
    and the copy's path; `InvalidOperation` naming what is wrong."""
    name = path.name
    if name.endswith(MANIFEST_SUFFIX):
        manifest_path = path
    elif name.endswith(EVENTS_SUFFIX):
        manifest_path = path.with_name(name.removesuffix(EVENTS_SUFFIX) + MANIFEST_SUFFIX)
    else:
        raise InvalidOperation(f"{name}: a cold copy ends in {EVENTS_SUFFIX} or {MANIFEST_SUFFIX}")
    if not manifest_path.is_file():
        raise InvalidOperation(
            f"{manifest_path.name} is missing: a copy without its manifest was never verified"
        )
    if manifest_path.stat().st_size > MAX_MANIFEST_BYTES:
        raise InvalidOperation(f"{manifest_path.name} is larger than a manifest can be")
    try:
        manifest = ColdManifest.model_validate_json(manifest_path.read_bytes())
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'manifest'}: {e['msg']}"
            for e in error.errors()[:3]
        )
        raise InvalidOperation(
            f"{manifest_path.name} is not a cold copy's manifest: {problems}"
        ) from None
    if manifest.file != f"{manifest.stream_id}{EVENTS_SUFFIX}":
        raise InvalidOperation(f"{manifest_path.name}: its file is not its stream id's")
    if manifest.stream_id != stream_id(manifest.tenant, manifest.conversation_id):
        raise InvalidOperation(
            f"{manifest_path.name}: its stream id does not match its tenant and id"
        )
    return manifest, manifest_path.with_name(manifest.file)


def check_cold_copy(manifest: ColdManifest, path: Path) -> None:
    """`ColdCopyMismatch` unless the copy is the file its manifest describes."""
    if not path.is_file():
        raise ColdCopyMismatch(f"{path.name} is missing")
    if _file_sha256(path) != manifest.file_sha256:
        raise ColdCopyMismatch(f"{path.name} changed since it was copied (its sha256 differs)")
    verify_cold_copy(
        path, manifest.conversation_id, events=manifest.events, events_sha256=manifest.events_sha256
    )


def _check_payload(path: Path, event: FeedEvent) -> None:
    """`ColdCopyMismatch` unless the event is one the log can hold (the
    replay would fail on it inside the restore's transaction, less clearly)."""
    try:
        if event.type not in EVENT_TYPES:
            raise ValueError(f"unknown event type {event.type[:40]!r}")
        from_data(event.type, event.data)
    except (ValidationError, ValueError, KeyError, TypeError) as error:
        problem = error.errors()[0]["msg"] if isinstance(error, ValidationError) else error
        raise ColdCopyMismatch(
            f"{path.name} version {event.version} is not an event the log can hold: {problem}"
        ) from None


async def _restored_pages(path: Path, conversation_id: str) -> AsyncIterator[list[RestoredEvent]]:
    page: list[RestoredEvent] = []
    for event in _read_events(path, conversation_id):
        _check_payload(path, event)
        data = dict(event.data)
        if event.type == "message_appended" and isinstance(data.get("message"), dict):
            data["message"] = without_default_kind(dict(data["message"]))
        page.append(
            RestoredEvent(
                version=event.version, type=event.type, data=data, recorded_at=event.recorded_at
            )
        )
        if len(page) == RESTORE_PAGE:
            yield page
            page = []
    if page:
        yield page


async def restore_cold_copy(repository: Repository, path: Path) -> Conversation:
    """Put the conversation of the cold copy at `path` back (the module docstring)."""
    manifest, copy = read_manifest(path)
    if manifest.tenant != repository.tenant:
        raise InvalidOperation(
            f"{copy.name} is tenant {manifest.tenant!r}'s; restore it as that tenant"
        )
    check_cold_copy(manifest, copy)
    return await repository.restore_conversation(
        manifest.conversation_id, _restored_pages(copy, manifest.conversation_id)
    )
