"""hosting.keys: keys are shown once, stored hashed, scoped to a tenant."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from sqlalchemy import select
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


@pytest.mark.parametrize(("tenant", "name"), [("", "ci"), ("acme", " ")])
async def test_a_key_needs_a_tenant_and_a_name(engine: AsyncEngine, tenant: str, name: str) -> None:
    with pytest.raises(ValueError, match="needs a"):
        await create_key(engine, tenant, name)
