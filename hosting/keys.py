"""API keys: who may call the HTTP API, and for which tenant.

A key is `cs_<random>` and is shown once, when it is created. Only its
sha256 is stored, so a leaked database does not leak usable keys; since the
key is 32 random bytes, a plain (unsalted) hash cannot be reversed by
guessing, and looking up by hash keeps authentication one index probe.
Revoking a key stamps `revoked_at`; the row stays so a listing shows who had
access and when it ended.

The HTTP app asks which tenant a key belongs to on every request
(`KeyLookup`), so a revoked key is refused from the next request on.
"""

from __future__ import annotations

import hashlib
import secrets
import uuid
from datetime import datetime
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel, ConfigDict
from sqlalchemy import (
    Column,
    DateTime,
    Index,
    PrimaryKeyConstraint,
    Table,
    Text,
    UniqueConstraint,
    func,
    select,
    text,
    update,
)
from sqlalchemy.dialects.postgresql import UUID
from sqlalchemy.ext.asyncio import AsyncEngine

from store.postgres.schema import metadata
from store.postgres.urls import libpq_url

KEY_PREFIX = "cs_"
# How much of the key a listing shows: enough to tell keys apart, far too
# little to use.
SHOWN_CHARS = 8

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
    PrimaryKeyConstraint("id", name="pk_api_keys"),
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

    @property
    def active(self) -> bool:
        return self.revoked_at is None


def hash_key(plaintext: str) -> str:
    return hashlib.sha256(plaintext.encode()).hexdigest()


def new_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


async def create_key(engine: AsyncEngine, tenant: str, name: str) -> tuple[uuid.UUID, str]:
    """A new key for `tenant`: (its id, the plaintext — shown once, never stored)."""
    if not tenant.strip():
        raise ValueError("an API key needs a tenant")
    if not name.strip():
        raise ValueError("an API key needs a name")
    key_id = uuid.uuid4()
    plaintext = new_key()
    async with engine.begin() as conn:
        await conn.execute(
            api_keys.insert().values(
                id=key_id,
                tenant=tenant,
                name=name,
                key_hash=hash_key(plaintext),
                key_start=plaintext[: len(KEY_PREFIX) + SHOWN_CHARS],
            )
        )
    return key_id, plaintext


async def list_keys(engine: AsyncEngine, tenant: str | None = None) -> list[ApiKey]:
    """Every key (revoked ones too), oldest first; only `tenant`'s if given."""
    query = select(
        api_keys.c.id,
        api_keys.c.tenant,
        api_keys.c.name,
        api_keys.c.key_start,
        api_keys.c.created_at,
        api_keys.c.revoked_at,
    ).order_by(api_keys.c.created_at, api_keys.c.id)
    if tenant is not None:
        query = query.where(api_keys.c.tenant == tenant)
    async with engine.connect() as conn:
        rows = await conn.execute(query)
        return [ApiKey.model_validate(row._asdict()) for row in rows]


async def revoke_key(engine: AsyncEngine, key_id: uuid.UUID) -> bool:
    """Revoke a key; False when there is no such key or it was already revoked."""
    async with engine.begin() as conn:
        result = await conn.execute(
            update(api_keys)
            .where(api_keys.c.id == key_id, api_keys.c.revoked_at.is_(None))
            .values(revoked_at=func.now())
            .returning(api_keys.c.id)
        )
        return result.first() is not None


# A look-up is one short statement: a few connections serve many requests.
KEY_POOL_SIZE = 4

_TENANT_OF_KEY = "SELECT tenant FROM api_keys WHERE key_hash = %s AND revoked_at IS NULL"


async def _prepare_at_first_use(conn: psycopg.AsyncConnection[Any]) -> None:
    conn.prepare_threshold = 0


class KeyLookup:
    """The tenant of a live key, asked of the database at every request: one
    prepared statement, one round trip, on a small pool of its own.

    (Asked through a SQLAlchemy engine, it was a pre-ping and the query, two
    round trips and a large share of the server's CPU for an append; with
    four connections, eight concurrent requests queued for them: measured
    in docs/operations.md, "Worker processes".)
    """

    def __init__(self, pool: AsyncConnectionPool[psycopg.AsyncConnection[Any]]) -> None:
        self.pool = pool

    @classmethod
    async def connect(
        cls,
        url: str,
        *,
        options: str,
        max_size: int = KEY_POOL_SIZE,
        timeout: float = 5.0,  # noqa: ASYNC109 - the pool's wait, not this call's
    ) -> KeyLookup:
        """Keys looked up on the database at `url`, with at most `max_size`
        connections (opened as requests wait for one), each waited for at
        most `timeout` seconds."""
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
        return cls(pool)

    async def tenant_for_key(self, plaintext: str) -> str | None:
        """The tenant of a live key, or None for an unknown or revoked one."""
        if not plaintext.startswith(KEY_PREFIX):
            return None
        async with self.pool.connection() as conn:
            cursor = await conn.execute(_TENANT_OF_KEY, (hash_key(plaintext),))
            row = await cursor.fetchone()
        return None if row is None else str(row[0])

    async def close(self) -> None:
        await self.pool.close()


class MemoryKeys:
    """API keys in memory, for running the HTTP app on the in-memory storage
    (tests, local experiments): the same hashing, nothing persisted."""

    def __init__(self) -> None:
        self._tenants: dict[str, str] = {}  # key hash → tenant

    def create(self, tenant: str, name: str) -> str:
        if not tenant.strip() or not name.strip():
            raise ValueError("an API key needs a tenant and a name")
        plaintext = new_key()
        self._tenants[hash_key(plaintext)] = tenant
        return plaintext

    async def tenant_for_key(self, plaintext: str) -> str | None:
        return self._tenants.get(hash_key(plaintext))
