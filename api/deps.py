"""Dependencies the routes declare, as `Annotated` aliases.

    ServicesDep    what the app was wired with (`api.app.Services`)
    TenantDep      the tenant of the request's API key (401 without a live key)
    RepositoryDep  the repository of that tenant

The key comes from `Authorization: Bearer <key>` or `X-API-Key: <key>`.
Scoping the repository by tenant is the whole isolation story: the store
treats another tenant's conversation exactly like a missing one (404).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, cast

from fastapi import Depends, Request
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from api.errors import Unauthorized
from store.domain.commands import Limits
from store.repository import Repository
from store.repository.port import Storage

bearer_scheme = HTTPBearer(auto_error=False, description="`Authorization: Bearer cs_…`")
api_key_scheme = APIKeyHeader(
    name="X-API-Key", auto_error=False, description="The same key in `X-API-Key`"
)

KeyLookup = Callable[[str], Awaitable[str | None]]


@dataclass(frozen=True, kw_only=True)
class Services:
    """What the routes run on: a storage, a way to check keys, the limits."""

    storage: Storage
    tenant_for_key: KeyLookup
    limits: Limits


# Dependencies are `async def` though they never wait: FastAPI runs a plain
# `def` dependency in its thread pool, a hand-off to a thread and back for
# each, which was a tenth of the server's CPU for an append.
async def get_services(request: Request) -> Services:
    return cast(Services, request.app.state.services)


ServicesDep = Annotated[Services, Depends(get_services)]


async def get_tenant(
    services: ServicesDep,
    bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer_scheme)],
    api_key: Annotated[str | None, Depends(api_key_scheme)],
) -> str:
    key = bearer.credentials if bearer is not None else api_key
    if not key:
        raise Unauthorized("an API key is required: send 'Authorization: Bearer <key>'")
    tenant = await services.tenant_for_key(key)
    if tenant is None:
        raise Unauthorized("the API key is unknown or revoked")
    return tenant


TenantDep = Annotated[str, Depends(get_tenant)]


async def get_repository(services: ServicesDep, tenant: TenantDep) -> Repository:
    return Repository(services.storage, tenant=tenant, limits=services.limits)


RepositoryDep = Annotated[Repository, Depends(get_repository)]
