"""Dependencies the routes declare, as `Annotated` aliases.

    ServicesDep    what the app was wired with (`api.app.Services`)
    TenantDep      the tenant of the request's API key (401 without a live key;
                   403 for a read-only key on a route that writes)
    GrantDep       what the request's key allows: tenant, scope, expiry
    RepositoryDep  the repository of that tenant
    KeyWatchDep    the key and its tenant, for a stream to watch (`api.revocation`)

The key comes from `Authorization: Bearer <key>` or `X-API-Key: <key>`,
read from the request's headers by `get_tenant` itself: each dependency
FastAPI resolves costs a request tens of microseconds, so the key check is
one, not four. The OpenAPI document still declares both ways of sending a
key (`SECURITY_SCHEMES`, added by `api.openapi` to every operation behind
the check). Scoping the repository by tenant is the whole isolation story:
the store treats another tenant's conversation exactly like a missing one
(404).

A read-only key (`convo keys create --read-only`) is refused with 403
`ReadOnlyKey` on every route that writes, decided here, once, for all
routes: every method but GET and HEAD writes, except the POST routes in
`READING_POSTS`, which only compute an answer from what is stored (a
payload, parsed tool calls). A new write route is refused by default;
tests/api/test_read_only_keys.py walks the OpenAPI document to hold it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, cast

from fastapi import Depends, Request

from api.errors import ReadOnlyKey, Unauthorized, route_path
from api.quota import CREATING, QuotaExceeded, TenantQuotas
from api.ratelimit import KeyRateLimits, RateLimited
from api.revocation import KeyWatch
from hosting.keys import KeyGrant
from store.domain.commands import Limits
from store.repository import Repository
from store.repository.port import Storage

API_KEY_HEADER = "x-api-key"
# How the OpenAPI document describes the two ways of sending a key.
SECURITY_SCHEMES: dict[str, dict[str, str]] = {
    "HTTPBearer": {
        "type": "http",
        "description": "`Authorization: Bearer cs_…`",
        "scheme": "bearer",
    },
    "APIKeyHeader": {
        "type": "apiKey",
        "description": "The same key in `X-API-Key`",
        "in": "header",
        "name": "X-API-Key",
    },
}

KeyLookup = Callable[[str], Awaitable[str | None]]
GrantLookup = Callable[[str], Awaitable[KeyGrant | None]]


@dataclass(frozen=True, kw_only=True)
class Services:
    """What the routes run on: a storage, a way to check keys, the limits.

    `grant_for_key` answers a key's scope with its tenant; without it (an
    embedding application that knows only tenants) every key may write."""

    storage: Storage
    tenant_for_key: KeyLookup
    limits: Limits
    grant_for_key: GrantLookup | None = None

    async def grant(self, key: str) -> KeyGrant | None:
        if self.grant_for_key is not None:
            return await self.grant_for_key(key)
        tenant = await self.tenant_for_key(key)
        return None if tenant is None else KeyGrant(tenant)


# Dependencies are `async def` though they never wait: FastAPI runs a plain
# `def` dependency in its thread pool, a hand-off to a thread and back for
# each, which was a tenth of the server's CPU for an append.
async def get_services(request: Request) -> Services:
    return cast(Services, request.app.state.services)


ServicesDep = Annotated[Services, Depends(get_services)]


def _key_of(request: Request) -> str | None:
    """The key the request sends: a Bearer credential, else `X-API-Key`."""
    headers = request.headers
    authorization = headers.get("authorization")
    if authorization:
        scheme, _, credentials = authorization.partition(" ")
        if scheme.lower() == "bearer" and credentials.strip():
            return credentials.strip()
    return headers.get(API_KEY_HEADER) or None


async def get_tenant(request: Request) -> str:
    key = _key_of(request)
    if not key:
        raise Unauthorized("an API key is required: send 'Authorization: Bearer <key>'")
    services: Services = request.app.state.services
    grant = await services.grant(key)
    if grant is None:
        raise Unauthorized("the API key is unknown or revoked")
    if grant.read_only and writes(request):
        raise ReadOnlyKey(
            f"this API key is read-only: {request.method} {route_path(request.scope)}"
            " changes the store; use a read-write key of the tenant"
        )
    tenant = grant.tenant
    state = request.app.state
    limits: KeyRateLimits | None = getattr(state, "rate_limits", None)
    quotas: TenantQuotas | None = getattr(state, "quotas", None)
    if limits is not None or quotas is not None:
        # The body is read already where a route takes one (FastAPI parses it
        # before the dependencies), and limited in size (api.middleware).
        sent = len(await request.body()) if request.method in _WITH_BODY else 0
        try:
            if limits is not None:
                limits.charge(key, sent)
            if quotas is not None:
                route = getattr(request.scope.get("route"), "path", "")
                await quotas.admit(
                    tenant,
                    services.storage,
                    creates=(request.method, route) in CREATING,
                    body_bytes=sent,
                )
        except (RateLimited, QuotaExceeded) as error:
            state.metrics.refused(error)
            raise
    request.state.tenant = tenant
    request.state.grant = grant
    return tenant


_WITH_BODY = frozenset({"POST", "PUT", "PATCH"})
# Methods that never change anything.
_READING_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# POST routes that only compute an answer from what is stored (by operation id).
READING_POSTS = frozenset({"assemblePayload", "parseXmlToolCalls"})


def writes(request: Request) -> bool:
    """Whether the request's route may change the store: a read-only key is refused on it."""
    if request.method in _READING_METHODS:
        return False
    if request.method != "POST":
        return True
    return getattr(request.scope.get("route"), "operation_id", None) not in READING_POSTS


async def get_grant(request: Request) -> KeyGrant:
    """What the request's key allows (checked by `get_tenant` first)."""
    if getattr(request.state, "grant", None) is None:
        await get_tenant(request)
    return cast(KeyGrant, request.state.grant)


GrantDep = Annotated[KeyGrant, Depends(get_grant)]


TenantDep = Annotated[str, Depends(get_tenant)]


async def get_repository(request: Request) -> Repository:
    # Every route checks the key first (`api.routes.install_routes`): its
    # tenant is on the request. (Not a sub-dependency: one fewer to resolve.)
    tenant = getattr(request.state, "tenant", None) or await get_tenant(request)
    services: Services = request.app.state.services
    return Repository(services.storage, tenant=tenant, limits=services.limits)


RepositoryDep = Annotated[Repository, Depends(get_repository)]


async def get_key_watch(request: Request) -> KeyWatch:
    """The request's key and tenant, for a stream that must end when the key
    does (`api.revocation`)."""
    tenant = getattr(request.state, "tenant", None) or await get_tenant(request)
    key = _key_of(request)
    assert key is not None  # the tenant was found by it
    services: Services = request.app.state.services
    return KeyWatch(key=key, tenant=tenant, tenant_for_key=services.tenant_for_key)


KeyWatchDep = Annotated[KeyWatch, Depends(get_key_watch)]
