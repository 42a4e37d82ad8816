"""Dependencies the routes declare, as `Annotated` aliases.

    EngineDep      the app's AsyncEngine
    TenantDep      the tenant of the request's API key (401 without a live key)
    RepositoryDep  PostgresRepository scoped to that tenant

The key comes from `Authorization: Bearer <key>` or `X-API-Key: <key>`.
Scoping the repository by tenant is the whole isolation story: the store
treats another tenant's conversation exactly like a missing one (404).
"""

from __future__ import annotations

from typing import Annotated, cast

from fastapi import Depends, Request
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.ext.asyncio import AsyncEngine

from api.errors import Unauthorized
from store import commands
from store.api_keys import tenant_for_key
from store.postgres import PostgresRepository

bearer_scheme = HTTPBearer(auto_error=False, description="`Authorization: Bearer cs_…`")
api_key_scheme = APIKeyHeader(
    name="X-API-Key", auto_error=False, description="The same key in `X-API-Key`"
)


def get_engine(request: Request) -> AsyncEngine:
    return cast(AsyncEngine, request.app.state.engine)


EngineDep = Annotated[AsyncEngine, Depends(get_engine)]


async def get_tenant(
    engine: EngineDep,
    bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer_scheme)],
    api_key: Annotated[str | None, Depends(api_key_scheme)],
) -> str:
    key = bearer.credentials if bearer is not None else api_key
    if not key:
        raise Unauthorized("an API key is required: send 'Authorization: Bearer <key>'")
    tenant = await tenant_for_key(engine, key)
    if tenant is None:
        raise Unauthorized("the API key is unknown or revoked")
    return tenant


TenantDep = Annotated[str, Depends(get_tenant)]


def get_repository(request: Request, engine: EngineDep, tenant: TenantDep) -> PostgresRepository:
    limits = cast(commands.Limits, request.app.state.limits)
    return PostgresRepository(engine, tenant=tenant, limits=limits)


RepositoryDep = Annotated[PostgresRepository, Depends(get_repository)]
