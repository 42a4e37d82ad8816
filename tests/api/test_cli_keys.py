"""convo.keys: `convo keys create / list / revoke`."""

from __future__ import annotations

import uuid

import psycopg
from typer.testing import CliRunner

from convo import app
from hosting.keys import KEY_PREFIX
from hosting.settings import libpq_url


def _convo(database_url: str, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["keys", *args], env={"DATABASE_URL": database_url})
    return result.exit_code, result.stdout, result.stderr


def test_create_prints_the_key_once_with_a_warning(database_url: str) -> None:
    code, out, err = _convo(database_url, "create", "--tenant", "acme", "--name", "ci")
    assert code == 0, err
    key = out.strip()
    assert key.startswith(KEY_PREFIX)
    assert "not shown again" in err
    assert "tenant 'acme'" in err

    code, listing, _ = _convo(database_url, "list")
    assert code == 0
    assert "acme" in listing
    assert "ci" in listing
    assert key[:11] in listing  # the first characters, to tell keys apart
    assert key not in listing


def test_list_by_tenant_and_revoke(database_url: str) -> None:
    _convo(database_url, "create", "--tenant", "acme", "--name", "one")
    _convo(database_url, "create", "--tenant", "globex", "--name", "two")
    code, listing, _ = _convo(database_url, "list", "--tenant", "globex")
    assert code == 0
    assert "globex" in listing
    assert "acme" not in listing
    key_id = next(word for line in listing.splitlines() for word in line.split() if _is_uuid(word))

    code, _, err = _convo(database_url, "revoke", key_id)
    assert code == 0, err
    assert f"revoked key {key_id}" in err
    _, listing, _ = _convo(database_url, "list", "--tenant", "globex")
    assert "revoked" in listing

    code, _, err = _convo(database_url, "revoke", key_id)
    assert code == 1
    assert "no active key" in err


def test_bad_input_exits_2(database_url: str) -> None:
    code, _, err = _convo(database_url, "revoke", "nope")
    assert code == 2
    assert "not a key id: nope" in err
    code, _, err = _convo(database_url, "create", "--tenant", " ", "--name", "x")
    assert code == 2
    assert "needs a tenant" in err


def test_list_with_no_keys(database_url: str) -> None:
    code, _, err = _convo(database_url, "list", "--tenant", "nobody")
    assert code == 0
    assert "no keys for tenant 'nobody'" in err


def _is_uuid(word: str) -> bool:
    try:
        uuid.UUID(word)
    except ValueError:
        return False
    return True


def test_revoke_by_what_the_listing_shows(database_url: str) -> None:
    _, key, _ = _convo(database_url, "create", "--tenant", "acme", "--name", "laptop")
    code, _, err = _convo(database_url, "revoke", key.strip()[:11] + "…")
    assert code == 0, err
    assert "revoked key" in err
    _, listing, _ = _convo(database_url, "list")
    assert "revoked" in listing


def test_revoke_by_the_start_of_the_id(database_url: str) -> None:
    _convo(database_url, "create", "--tenant", "acme", "--name", "laptop")
    _, listing, _ = _convo(database_url, "list")
    key_id = next(word for line in listing.splitlines() for word in line.split() if _is_uuid(word))
    code, _, err = _convo(database_url, "revoke", key_id[:8])
    assert code == 0, err
    assert f"revoked key {key_id}" in err


def test_an_ambiguous_start_is_refused_naming_the_keys(database_url: str) -> None:
    with psycopg.connect(libpq_url(database_url), autocommit=True) as conn:
        for n, name in ((1, "laptop"), (2, "runner")):
            conn.execute(
                "INSERT INTO api_keys (id, tenant, name, key_hash, key_start)"
                " VALUES (%s, 'acme', %s, %s, %s)",
                (f"3f0c0000-0000-4000-8000-00000000000{n}", name, f"hash{n}", f"cs_abcdefg{n}"),
            )
    code, _, err = _convo(database_url, "revoke", "3f0c")
    assert code == 1
    assert len(err.strip().splitlines()) == 1
    assert "'3f0c' is the start of 2 keys" in err
    assert "(acme, laptop)" in err
    assert "(acme, runner)" in err
    code, _, err = _convo(database_url, "revoke", "3f0c0000-0000-4000-8000-000000000002")
    assert code == 0, err
    # Now the start names one live key.
    code, _, err = _convo(database_url, "revoke", "3f0c")
    assert code == 0, err
    assert "revoked key 3f0c0000-0000-4000-8000-000000000001" in err


def test_a_start_too_short_or_unknown_is_one_line(database_url: str) -> None:
    code, _, err = _convo(database_url, "revoke", "3f0")
    assert code == 2
    assert len(err.strip().splitlines()) == 1
    assert "at least its first 4 characters" in err
    code, _, err = _convo(database_url, "revoke", "cs_nosuchkey")
    assert code == 1
    assert err.strip() == "convo keys revoke: no key is 'cs_nosuchkey'"


async def test_the_development_key_replaces_the_last_one(database_url: str) -> None:
    from convo.database import DEVELOPMENT_KEY_NAME
    from hosting.engines import make_async_engine
    from hosting.keys import list_keys, replace_key
    from hosting.settings import Settings

    engine = make_async_engine(database_url, Settings.from_env(), pool_size=1, max_overflow=0)
    try:
        first, _ = await replace_key(engine, "default", DEVELOPMENT_KEY_NAME)
        second, _ = await replace_key(engine, "default", DEVELOPMENT_KEY_NAME)
        keys = {key.id: key.active for key in await list_keys(engine, "default")}
    finally:
        await engine.dispose()
    assert keys == {first: False, second: True}


def test_a_key_may_expire_and_the_listing_says_when(database_url: str) -> None:
    code, _, err = _convo(
        database_url, "create", "--tenant", "acme", "--name", "temp", "--expires-in", "30d"
    )
    assert code == 0, err
    assert "expires " in err
    code, listing, _ = _convo(database_url, "list", "--tenant", "acme")
    assert code == 0
    assert "never" not in listing
    assert "active" in listing

    code, _, err = _convo(
        database_url, "create", "--tenant", "acme", "--name", "x", "--expires-in", "soon"
    )
    assert code == 2
    assert err.count("\n") == 1
    assert "--expires-in 'soon'" in err


def test_a_read_only_key_is_made_and_listed_with_its_scope(database_url: str) -> None:
    code, key, err = _convo(
        database_url, "create", "--tenant", "acme", "--name", "analyst", "--read-only"
    )
    assert code == 0, err
    assert key.strip().startswith(KEY_PREFIX)
    assert "created read-only key" in err
    _convo(database_url, "create", "--tenant", "acme", "--name", "agent")
    _, listing, _ = _convo(database_url, "list", "--tenant", "acme")
    assert "scope" in listing
    rows = {line.split("│")[3].strip(): line for line in listing.splitlines() if "acme" in line}
    assert "read-only" in rows["analyst"]
    assert "read-write" in rows["agent"]
