"""API keys: who may call the HTTP API, and for which tenant.

A key is `cs_<random>` and is shown once, when it is created. Only its
sha256 is stored, so a leaked database does not leak usable keys; since the
key is 32 random bytes, a plain (unsalted) hash cannot be reversed by
guessing, and looking up by hash keeps authentication one index probe.
Revoking a key stamps `revoked_at`; the row stays so a listing shows who had
access and when it ended.

The HTTP app asks which tenant a key belongs to on every request
(`KeyLookup`). A live key's tenant is remembered, so most requests cost no
round trip; a revoked key is still refused from its next request on:
`revoke_key` sends a NOTIFY on `KEYS_CHANNEL` in the revoking transaction,
and every `KeyLookup` (one per server process) LISTENs on a connection of
its own and reads what arrived on it — a non-blocking look at its socket —
before it trusts a remembered key. PostgreSQL signals every listener when
the revoke commits; `revoke_key` returns once its own listener has the
notification, by which time the servers' have theirs (a request checked
later does not find the key remembered). If the listening
connection is lost, nothing is remembered until it is back (keys are asked
of the database meanwhile), and a remembered key is asked again after
`cache_s` seconds whatever happens (`CONVO_KEY_CACHE_S`; 0 remembers none).
A key revoked by hand in SQL, without `revoke_key`, is refused after
`cache_s` at the latest (or at once after `NOTIFY convo_api_keys`).

A key has a scope: `read_write`, or `read_only` for an analyst who reads
and must not change anything. The look-up answers it with the tenant (a
`KeyGrant`); `api.deps` refuses a read-only key on every route that writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import re
import secrets
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from select import POLLIN, poll
from typing import Any, Literal

import psycopg
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel, ConfigDict
from sqlalchemy import (
    CheckConstraint,
    Column,
    DateTime,
    Index,
    PrimaryKeyConstraint,
    Table,
    Text,
    UniqueConstraint,
    cast,
    func,
    select,
    text,
    update,
)
from sqlalchemy.dialects.postgresql import UUID
from sqlalchemy.ext.asyncio import AsyncEngine

from store.postgres.schema import metadata
from store.postgres.urls import libpq_url

_log = logging.getLogger("convo.keys")

KEY_PREFIX = "cs_"
# NOTIFYed when a key is revoked: every server process forgets the keys it remembered.
KEYS_CHANNEL = "convo_api_keys"
# How much of the key a listing shows: enough to tell keys apart, far too
# little to use.
SHOWN_CHARS = 8

KeyScope = Literal["read_write", "read_only"]
READ_WRITE: KeyScope = "read_write"
READ_ONLY: KeyScope = "read_only"

api_keys = Table(
    "api_keys",
    metadata,
    Column("id", UUID(as_uuid=True), nullable=False),
    Column("tenant", Text, nullable=False),
    Column("name", Text, nullable=False),
    # sha256 hex of the whole key; the plaintext is never stored.
    Column("key_hash", Text, nullable=False),
    Column("key_start", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=text("now()")),
    Column("revoked_at", DateTime(timezone=True), nullable=True),
    # Past it the key is refused as a revoked one is; null: it never expires.
    Column("expires_at", DateTime(timezone=True), nullable=True),
    # What the key may do: read_only keys are refused on every write route.
    Column("scope", Text, nullable=False, server_default=text("'read_write'")),
    PrimaryKeyConstraint("id", name="pk_api_keys"),
    CheckConstraint("scope IN ('read_write', 'read_only')", name="ck_api_keys_scope"),
    UniqueConstraint("key_hash", name="uq_api_keys_key_hash"),
    Index("ix_api_keys_tenant", "tenant"),
)


class ApiKey(BaseModel):
    """A key as a listing shows it: never the key itself."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: uuid.UUID
    tenant: str
    name: str
    key_start: str
    created_at: datetime
    revoked_at: datetime | None
    expires_at: datetime | None = None
    scope: KeyScope = READ_WRITE

    @property
    def expired(self) -> bool:
        return self.expires_at is not None and self.expires_at <= datetime.now(UTC)

    @property
    def active(self) -> bool:
        return self.revoked_at is None and not self.expired


@dataclass(frozen=True, slots=True)
class KeyGrant:
    """What a live key allows: its tenant, its scope, until when."""

    tenant: str
    scope: KeyScope = READ_WRITE
    expires_at: datetime | None = None

    @property
    def read_only(self) -> bool:
        return self.scope == READ_ONLY


def hash_key(plaintext: str) -> str:
    return hashlib.sha256(plaintext.encode()).hexdigest()


def new_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def _new_row(
    key_id: uuid.UUID,
    tenant: str,
    name: str,
    plaintext: str,
    expires_at: datetime | None,
    scope: KeyScope = READ_WRITE,
) -> Any:
    return api_keys.insert().values(
        id=key_id,
        tenant=tenant,
        name=name,
        key_hash=hash_key(plaintext),
        key_start=plaintext[: len(KEY_PREFIX) + SHOWN_CHARS],
        expires_at=expires_at,
        scope=scope,
    )


async def create_key(
    engine: AsyncEngine,
    tenant: str,
    name: str,
    *,
    expires_at: datetime | None = None,
    scope: KeyScope = READ_WRITE,
) -> tuple[uuid.UUID, str]:
    """A new key for `tenant`: (its id, the plaintext — shown once, never
    stored). With `expires_at` (timezone-aware, in the future) it is refused
    from then on; with `scope=READ_ONLY` it is refused on every write."""
    if not tenant.strip():
        raise ValueError("an API key needs a tenant")
    if not name.strip():
        raise ValueError("an API key needs a name")
    check_expiry(expires_at)
    check_scope(scope)
    key_id = uuid.uuid4()
    plaintext = new_key()
    async with engine.begin() as conn:
        await conn.execute(_new_row(key_id, tenant, name, plaintext, expires_at, scope))
    return key_id, plaintext


# `convo keys create --expires-in`: a number and its unit.
_DURATION = re.compile(r"(\d{1,6})([smhd])")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}
MAX_KEY_LIFE = timedelta(days=3650)


def expiry_after(duration: str) -> datetime:
    """The moment `duration` (`90m`, `12h`, `30d`…) from now."""
    match = _DURATION.fullmatch(duration.strip())
    if match is None:
        raise ValueError(f"--expires-in {duration!r}: a number and a unit, s, m, h or d (e.g. 30d)")
    life = timedelta(seconds=int(match[1]) * _UNIT_S[match[2]])
    if not timedelta(0) < life <= MAX_KEY_LIFE:
        raise ValueError(f"--expires-in {duration!r}: from 1s to {MAX_KEY_LIFE.days} days")
    return datetime.now(UTC) + life


def check_expiry(expires_at: datetime | None) -> None:
    """An expiry must say its timezone and lie ahead: a key born expired is a mistake."""
    if expires_at is None:
        return
    if expires_at.tzinfo is None:
        raise ValueError("an API key's expiry needs a timezone")
    if expires_at <= datetime.now(UTC):
        raise ValueError(f"an API key's expiry must be in the future, not {expires_at.isoformat()}")


def check_scope(scope: str) -> None:
    if scope not in (READ_WRITE, READ_ONLY):
        raise ValueError(f"an API key's scope is {READ_WRITE} or {READ_ONLY}, not {scope!r}")


# What a listing shows of a key (`ApiKey`): never its hash.
LISTED = (
    api_keys.c.id,
    api_keys.c.tenant,
    api_keys.c.name,
    api_keys.c.key_start,
    api_keys.c.created_at,
    api_keys.c.revoked_at,
    api_keys.c.expires_at,
    api_keys.c.scope,
)


async def list_keys(engine: AsyncEngine, tenant: str | None = None) -> list[ApiKey]:
    """Every key (revoked ones too), oldest first; only `tenant`'s if given."""
    query = select(*LISTED).order_by(api_keys.c.created_at, api_keys.c.id)
    if tenant is not None:
        query = query.where(api_keys.c.tenant == tenant)
    async with engine.connect() as conn:
        rows = await conn.execute(query)
        return [ApiKey.model_validate(row._asdict()) for row in rows]


async def replace_key(engine: AsyncEngine, tenant: str, name: str) -> tuple[uuid.UUID, str]:
    """A new key for `tenant` named `name`, every live key of that tenant and
    name revoked in the same transaction: the one key a development server
    prints each time it starts, never a pile of live ones."""
    key_id, plaintext = uuid.uuid4(), new_key()
    async with engine.begin() as conn:
        replaced = await conn.execute(
            update(api_keys)
            .where(
                api_keys.c.tenant == tenant,
                api_keys.c.name == name,
                api_keys.c.revoked_at.is_(None),
            )
            .values(revoked_at=func.now())
            .returning(api_keys.c.id)
        )
        for (old,) in replaced:
            await conn.execute(select(func.pg_notify(KEYS_CHANNEL, str(old))))
        await conn.execute(_new_row(key_id, tenant, name, plaintext, None))
    return key_id, plaintext


# A start of an id shorter than this fits too many keys to mean one.
MIN_ID_START = 4


class KeyNotFound(LookupError):
    """No key is known by what was given."""


class AmbiguousKey(LookupError):
    """What was given is the start of more than one key."""


def key_filter(given: str) -> Any:
    """The keys `given` names: an id, the start of an id, or the start of a
    key (what `convo keys list` shows of it). ValueError when it is none of
    those."""
    given = given.strip().rstrip("…")
    try:
        return api_keys.c.id == uuid.UUID(given)
    except ValueError:
        pass
    if given.startswith(KEY_PREFIX) and len(given) > len(KEY_PREFIX):
        return func.starts_with(api_keys.c.key_start, given[: len(KEY_PREFIX) + SHOWN_CHARS])
    start = given.lower()
    if len(start.replace("-", "")) >= MIN_ID_START and all(c in "0123456789abcdef-" for c in start):
        return func.starts_with(cast(api_keys.c.id, Text), start)
    raise ValueError(
        f"not a key id: {given} (give the id, at least its first {MIN_ID_START} characters,"
        f" or the key's first characters as `convo keys list` shows them, {KEY_PREFIX}…)"
    )


async def find_key(engine: AsyncEngine, given: str) -> ApiKey:
    """The one key `given` names (see `key_filter`): among live keys first,
    so a start shared with revoked keys still names the live one.
    KeyNotFound, AmbiguousKey, or ValueError for what names no key at all."""
    condition = key_filter(given)
    query = select(*LISTED).where(condition)
    async with engine.connect() as conn:
        found = [ApiKey.model_validate(row._asdict()) for row in await conn.execute(query)]
    live = [key for key in found if key.active]
    candidates = live or found
    if not candidates:
        raise KeyNotFound(f"no key is {given!r}")
    if len(candidates) > 1:
        names = ", ".join(f"{key.id} ({key.tenant}, {key.name})" for key in candidates[:5])
        raise AmbiguousKey(
            f"{given!r} is the start of {len(candidates)} keys: {names}; give more of it"
        )
    return candidates[0]


async def revoke_key(engine: AsyncEngine, key_id: uuid.UUID) -> bool:
    """Revoke a key; False when there is no such key or it was already revoked.

    Every server's `KeyLookup` hears of it by a NOTIFY sent when it commits;
    this returns once the notification came back to a listener of its own,
    so the servers' connections, signalled with it, have theirs too."""
    url = libpq_url(engine.url.render_as_string(hide_password=False))
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as listener:
        await listener.execute(f"LISTEN {KEYS_CHANNEL}")
        async with engine.begin() as conn:
            result = await conn.execute(
                update(api_keys)
                .where(api_keys.c.id == key_id, api_keys.c.revoked_at.is_(None))
                .values(revoked_at=func.now())
                .returning(api_keys.c.id)
            )
            revoked = result.first() is not None
            if revoked:
                # Delivered at commit, to every server's KeyLookup.
                await conn.execute(select(func.pg_notify(KEYS_CHANNEL, str(key_id))))
        if revoked:
            async for notice in listener.notifies(timeout=REVOCATION_ECHO_S):
                if notice.payload == str(key_id):
                    break
    return revoked


# How long `revoke_key` waits for its own notification to come back.
REVOCATION_ECHO_S = 5.0


# A look-up is one short statement: a few connections serve many requests.
KEY_POOL_SIZE = 4

_GRANT_OF_KEY = (
    "SELECT tenant, scope, expires_at, expires_at - now() FROM api_keys WHERE key_hash = %s"
    " AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())"
)


async def _prepare_at_first_use(conn: psycopg.AsyncConnection[Any]) -> None:
    conn.prepare_threshold = 0


# A key's grant is remembered for this long unless a revocation says otherwise.
DEFAULT_CACHE_S = 60.0
# Remembered keys, at most (all are forgotten when it is full: keys are few).
MAX_REMEMBERED = 10_000
# Between attempts to listen again after the listening connection was lost.
RELISTEN_PAUSE_S = 1.0


class KeyLookup:
    """The grant (tenant, scope, expiry) of a live key: remembered for `cache_s` seconds, forgotten
    on a revocation's NOTIFY (the module's docstring), else asked of the
    database: one prepared statement, one round trip, on a small pool of its
    own.

    (Asked through a SQLAlchemy engine, it was a pre-ping and the query, two
    round trips and a large share of the server's CPU for an append; with
    four connections, eight concurrent requests queued for them: measured
    in docs/operations.md, "Worker processes".)
    """

    def __init__(
        self,
        pool: AsyncConnectionPool[psycopg.AsyncConnection[Any]],
        *,
        url: str = "",
        options: str = "",
        cache_s: float = DEFAULT_CACHE_S,
    ) -> None:
        self.pool = pool
        self.cache_s = cache_s
        self._url, self._options = url, options
        self._grants: dict[str, tuple[KeyGrant, float]] = {}  # key hash → (grant, until)
        self._forgotten = 0  # times everything was forgotten
        self._listener: psycopg.AsyncConnection[Any] | None = None
        self._poller: Any = None  # a select.poll of the listening connection's socket
        self._relisten: asyncio.Task[None] | None = None
        self._closed = False

    @classmethod
    async def connect(
        cls,
        url: str,
        *,
        options: str,
        max_size: int = KEY_POOL_SIZE,
        timeout: float = 5.0,  # noqa: ASYNC109 - the pool's wait, not this call's
        cache_s: float = DEFAULT_CACHE_S,
    ) -> KeyLookup:
        """Keys looked up on the database at `url`, with at most `max_size`
        connections (opened as requests wait for one), each waited for at
        most `timeout` seconds; live keys remembered for `cache_s` seconds."""
        pool: AsyncConnectionPool[psycopg.AsyncConnection[Any]] = AsyncConnectionPool(
            libpq_url(url),
            min_size=1,
            max_size=max_size,
            timeout=timeout,
            kwargs={"autocommit": True, "options": options},
            configure=_prepare_at_first_use,
            open=False,
        )
        await pool.open(wait=True, timeout=timeout)
        lookup = cls(pool, url=url, options=options, cache_s=cache_s)
        if cache_s > 0:
            try:
                await lookup._listen()
            except BaseException:
                await pool.close()
                raise
        return lookup

    async def _listen(self) -> None:
        conn = await psycopg.AsyncConnection.connect(
            libpq_url(self._url), autocommit=True, options=self._options
        )
        await conn.execute(f"LISTEN {KEYS_CHANNEL}")
        poller = poll()
        poller.register(conn.pgconn.socket, POLLIN)
        self._forget()  # what was revoked while nobody listened
        self._listener, self._poller = conn, poller

    def _forget(self) -> None:
        self._grants.clear()
        self._forgotten += 1

    def _revocations_arrived(self) -> bool:
        """Read what reached the listening connection (without waiting): True
        when a key was revoked, or when the connection is gone (then nothing
        may be remembered until it is back)."""
        conn, poller = self._listener, self._poller
        if conn is None or poller is None:
            return True
        pgconn = conn.pgconn
        arrived = False
        try:
            # Read while the socket has something: notifications, or the end
            # of a connection the server closed (then reading fails).
            while poller.poll(0):
                pgconn.consume_input()
                while pgconn.notifies() is not None:
                    arrived = True
        except psycopg.OperationalError:
            self._lost_listener()
            return True
        return arrived

    def _lost_listener(self) -> None:
        _log.warning("the API keys' listening connection was lost: keys are not remembered")
        listener, self._listener, self._poller = self._listener, None, None
        if not self._closed and (self._relisten is None or self._relisten.done()):
            self._relisten = asyncio.get_running_loop().create_task(self._listen_again(listener))

    async def _listen_again(self, lost: psycopg.AsyncConnection[Any] | None) -> None:
        if lost is not None:
            with contextlib.suppress(psycopg.Error):
                await lost.close()
        while not self._closed:
            await asyncio.sleep(RELISTEN_PAUSE_S)
            try:
                await self._listen()
            except psycopg.Error:
                continue
            _log.info("listening for API key revocations again")
            return

    async def tenant_for_key(self, plaintext: str) -> str | None:
        """The tenant of a live key, or None for an unknown, revoked or expired one."""
        grant = await self.grant_for_key(plaintext)
        return None if grant is None else grant.tenant

    async def grant_for_key(self, plaintext: str) -> KeyGrant | None:
        """What a live key allows, or None for an unknown, revoked or expired one."""
        if not plaintext.startswith(KEY_PREFIX):
            return None
        key_hash = hash_key(plaintext)
        if self.cache_s > 0:
            if self._revocations_arrived():
                self._forget()
            else:
                remembered = self._grants.get(key_hash)
                if remembered is not None and remembered[1] > time.monotonic():
                    return remembered[0]
        forgotten = self._forgotten
        async with self.pool.connection() as conn:
            cursor = await conn.execute(_GRANT_OF_KEY, (key_hash,))
            row = await cursor.fetchone()
        if row is None:
            return None  # unknown keys are not remembered: a new key works at once
        grant = KeyGrant(tenant=str(row[0]), scope=row[1], expires_at=row[2])
        left = row[3]
        # Never remembered past its expiry (the server's clock says how long is left).
        keep_s = self.cache_s if left is None else min(self.cache_s, left.total_seconds())
        if keep_s > 0:
            if self._revocations_arrived():
                self._forget()
            # Not if a revocation arrived while the query ran: its answer may predate it.
            elif self._forgotten == forgotten:
                if len(self._grants) >= MAX_REMEMBERED:
                    self._grants.clear()
                self._grants[key_hash] = (grant, time.monotonic() + keep_s)
        return grant

    async def close(self) -> None:
        self._closed = True
        if self._relisten is not None:
            self._relisten.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._relisten
        if self._listener is not None:
            await self._listener.close()
        await self.pool.close()


class MemoryKeys:
    """API keys in memory, for running the HTTP app on the in-memory storage
    (tests, local experiments): the same hashing, nothing persisted."""

    def __init__(self) -> None:
        self._grants: dict[str, KeyGrant] = {}  # key hash → grant

    def create(
        self,
        tenant: str,
        name: str,
        *,
        expires_at: datetime | None = None,
        scope: KeyScope = READ_WRITE,
    ) -> str:
        if not tenant.strip() or not name.strip():
            raise ValueError("an API key needs a tenant and a name")
        check_expiry(expires_at)
        check_scope(scope)
        plaintext = new_key()
        self._grants[hash_key(plaintext)] = KeyGrant(tenant, scope, expires_at)
        return plaintext

    async def grant_for_key(self, plaintext: str) -> KeyGrant | None:
        grant = self._grants.get(hash_key(plaintext))
        if grant is None:
            return None
        if grant.expires_at is not None and grant.expires_at <= datetime.now(UTC):
            return None
        return grant

    async def tenant_for_key(self, plaintext: str) -> str | None:
        grant = await self.grant_for_key(plaintext)
        return None if grant is None else grant.tenant
