"""API keys that expire: how a lifetime is written, what an expiry may be,
and the in-memory keys refusing an expired one."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from hosting.keys import ApiKey, MemoryKeys, check_expiry, expiry_after


@pytest.mark.parametrize(
    ("duration", "seconds"), [("90s", 90), ("90m", 5400), ("12h", 43200), ("30d", 2592000)]
)
def test_a_lifetime_is_a_number_and_a_unit(duration: str, seconds: int) -> None:
    left = (expiry_after(duration) - datetime.now(UTC)).total_seconds()
    assert seconds - 5 < left <= seconds


@pytest.mark.parametrize("duration", ["", "30", "d", "1.5h", "-1d", "1w", "0s", "4000d", "1d2h"])
def test_a_bad_lifetime_is_refused_by_name(duration: str) -> None:
    with pytest.raises(ValueError, match="--expires-in"):
        expiry_after(duration)


def test_an_expiry_needs_a_timezone_and_a_future() -> None:
    check_expiry(None)
    check_expiry(datetime.now(UTC) + timedelta(minutes=1))
    with pytest.raises(ValueError, match="timezone"):
        check_expiry(datetime.now() + timedelta(days=1))
    with pytest.raises(ValueError, match="in the future"):
        check_expiry(datetime.now(UTC) - timedelta(seconds=1))


def test_a_listed_key_past_its_expiry_is_not_active() -> None:
    now = datetime.now(UTC)
    fields: dict[str, object] = {"id": "00000000-0000-0000-0000-000000000001", "tenant": "t"}
    fields |= {"name": "n", "key_start": "cs_abcdefgh", "created_at": now, "revoked_at": None}
    assert ApiKey.model_validate({**fields, "expires_at": None}).active
    assert ApiKey.model_validate({**fields, "expires_at": now + timedelta(hours=1)}).active
    expired = ApiKey.model_validate({**fields, "expires_at": now - timedelta(seconds=1)})
    assert expired.expired
    assert not expired.active


async def test_memory_keys_refuse_a_key_once_it_expires() -> None:
    keys = MemoryKeys()
    forever = keys.create("acme", "forever")
    brief = keys.create("acme", "brief", expires_at=datetime.now(UTC) + timedelta(seconds=0.3))
    assert await keys.tenant_for_key(brief) == "acme"
    await asyncio.sleep(0.4)
    assert await keys.tenant_for_key(brief) is None
    assert await keys.tenant_for_key(forever) == "acme"
