"""convo.keys: `convo keys create / list / revoke`."""

from __future__ import annotations

import uuid

from typer.testing import CliRunner

from convo import app
from hosting.keys import KEY_PREFIX


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
