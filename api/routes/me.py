"""`GET /me`: what the request's key allows, so a client (the console at
`/ui`) knows whose data it shows and which actions to offer."""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from api.deps import GrantDep
from api.errors import CONVERSATION_ERRORS
from api.routing import JSONRoute
from hosting.keys import KeyScope

router = APIRouter(tags=["keys"], route_class=JSONRoute)


class KeyDescription(BaseModel):
    """The key a request was sent with, as the server sees it (never the key itself)."""

    model_config = ConfigDict(frozen=True)

    tenant: str = Field(description="The tenant the key acts for: every answer is its data.")
    scope: KeyScope = Field(
        description="read_write, or read_only: every route that writes answers 403 ReadOnlyKey."
    )
    read_only: bool = Field(description="scope == read_only, for clients that branch on it.")
    expires_at: datetime | None = Field(description="When the key stops working; null: never.")


@router.get(
    "/me",
    summary="What the request's API key allows",
    operation_id="describeKey",
    responses={k: v for k, v in CONVERSATION_ERRORS.items() if k in (401, 503)},
)
async def describe_key(grant: GrantDep) -> KeyDescription:
    """The key's tenant, scope and expiry."""
    return KeyDescription(
        tenant=grant.tenant,
        scope=grant.scope,
        read_only=grant.read_only,
        expires_at=grant.expires_at,
    )
