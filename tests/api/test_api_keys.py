"""hosting.keys: keys are shown once, stored hashed, scoped to a tenant."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from hosting.keys import (
    KEY_PREFIX,
    KeyLookup,
    api_keys,
    create_key,
    hash_key,
    list_keys,
    revoke_key,
)
from hosting.settings import Settings


@pytest_asyncio.fixture
async def keys(database_url: str, settings: Settings) -> AsyncIterator[KeyLookup]:
    """What the app asks at every request."""
    keys = await KeyLookup.connect(database_url, options=settings.connection_options())
    yield keys
    await keys.close()


async def test_a_key_maps_to_its_tenant(engine: AsyncEngine, keys: KeyLookup) -> None:
    _, acme = await create_key(engine, "acme", "ci")
    _, globex = await create_key(engine, "globex", "ci")
    assert acme.startswith(KEY_PREFIX)
    assert len(acme) > 40
    assert await keys.tenant_for_key(acme) == "acme"
    assert await keys.tenant_for_key(globex) == "globex"
    assert await keys.tenant_for_key(acme + "x") is None
    assert await keys.tenant_for_key("not even a key") is None


async def test_only_the_hash_is_stored(engine: AsyncEngine) -> None:
    key_id, plaintext = await create_key(engine, "acme", "ci")
    async with engine.connect() as conn:
        row = (await conn.execute(select(api_keys).where(api_keys.c.id == key_id))).one()
    assert row.key_hash == hash_key(plaintext)
    assert plaintext not in [str(v) for v in row]
    assert plaintext.startswith(row.key_start)


async def test_list_and_revoke(engine: AsyncEngine, keys: KeyLookup) -> None:
    first, key = await create_key(engine, "acme", "one")
    second, _ = await create_key(engine, "acme", "two")
    await create_key(engine, "globex", "three")
    assert [k.name for k in await list_keys(engine)] == ["one", "two", "three"]
    assert [k.id for k in await list_keys(engine, "acme")] == [first, second]

    assert await revoke_key(engine, first) is True
    assert await revoke_key(engine, first) is False  # already revoked
    assert await keys.tenant_for_key(key) is None
    listed = {k.id: k.active for k in await list_keys(engine, "acme")}
    assert listed == {first: False, second: True}


def _asked(keys: KeyLookup) -> int:
    """How many times the look-up asked the database (its pool's requests)."""
    return int(keys.pool.get_stats().get("requests_num", 0))


async def test_a_live_key_is_remembered(engine: AsyncEngine, keys: KeyLookup) -> None:
    _, key = await create_key(engine, "acme", "ci")
    assert await keys.tenant_for_key(key) == "acme"
    asked = _asked(keys)
    for _ in range(5):
        assert await keys.tenant_for_key(key) == "acme"
    assert _asked(keys) == asked
    # Unknown keys are not remembered: a key made now works at once.
    assert await keys.tenant_for_key(key + "x") is None
    assert await keys.tenant_for_key(key + "x") is None
    assert _asked(keys) == asked + 2


async def test_a_remembered_key_is_refused_from_the_request_after_its_revocation(
    engine: AsyncEngine, keys: KeyLookup
) -> None:
    key_id, key = await create_key(engine, "acme", "ci")
    _, other = await create_key(engine, "acme", "still live")
    assert await keys.tenant_for_key(key) == "acme"
    assert await keys.tenant_for_key(other) == "acme"
    assert await revoke_key(engine, key_id)
    # The NOTIFY reaches this look-up's own connection a moment after the
    # revoking one's echo (milliseconds, longer on a busy machine).
    for _ in range(50):
        if await keys.tenant_for_key(key) is None:
            break
        await asyncio.sleep(0.05)
    assert await keys.tenant_for_key(key) is None
    assert await keys.tenant_for_key(other) == "acme"  # asked again, still live


async def test_without_its_listening_connection_nothing_is_remembered(
    engine: AsyncEngine, keys: KeyLookup, database_url: str
) -> None:
    key_id, key = await create_key(engine, "acme", "ci")
    assert await keys.tenant_for_key(key) == "acme"
    listener = keys._listener
    assert listener is not None
    async with engine.begin() as conn:  # the listening connection dies
        await conn.execute(select(func.pg_terminate_backend(listener.pgconn.backend_pid)))
    await asyncio.sleep(0.2)
    asked = _asked(keys)
    assert await keys.tenant_for_key(key) == "acme"
    assert await keys.tenant_for_key(key) == "acme"
    assert _asked(keys) == asked + 2  # asked every time
    # A revocation nobody heard is still refused at once.
    assert await revoke_key(engine, key_id)
    assert await keys.tenant_for_key(key) is None
    # It listens again, then remembers again.
    deadline = asyncio.get_running_loop().time() + 10
    while keys._listener is None:
        assert asyncio.get_running_loop().time() < deadline, "it did not listen again"
        await asyncio.sleep(0.1)
    _, fresh = await create_key(engine, "acme", "after")
    await keys.tenant_for_key(fresh)
    asked = _asked(keys)
    assert await keys.tenant_for_key(fresh) == "acme"
    assert _asked(keys) == asked


async def test_a_cache_of_0_seconds_asks_every_time(
    engine: AsyncEngine, database_url: str, settings: Settings
) -> None:
    _, key = await create_key(engine, "acme", "ci")
    keys = await KeyLookup.connect(database_url, options=settings.connection_options(), cache_s=0)
    try:
        for _ in range(3):
            assert await keys.tenant_for_key(key) == "acme"
        assert _asked(keys) == 3
    finally:
        await keys.close()


@pytest.mark.parametrize(("tenant", "name"), [("", "ci"), ("acme", " ")])
async def test_a_key_needs_a_tenant_and_a_name(engine: AsyncEngine, tenant: str, name: str) -> None:
    with pytest.raises(ValueError, match="needs a"):
        await create_key(engine, tenant, name)
