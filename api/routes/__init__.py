"""Every route that needs an API key, on one router (health lives in `api.app`).

One module per resource: conversations, messages, agents (profiles and
slots), batches, forks and pins, reads, assembly.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends

from api.deps import get_tenant
from api.routes import agents, assembly, batches, conversations, forks, messages, reads
from api.routes import compaction as compaction_routes
from api.routes import events as events_routes
from api.routes import export as export_routes
from api.routes import search as search_routes

# The key is checked here too, so a route that forgets RepositoryDep is still
# protected; FastAPI resolves get_tenant once per request either way.
api_router = APIRouter(dependencies=[Depends(get_tenant)])
for _module in (
    conversations,
    messages,
    agents,
    batches,
    forks,
    reads,
    assembly,
    export_routes,
    events_routes,
    compaction_routes,
    search_routes,
):
    api_router.include_router(_module.router)

__all__ = ["api_router"]
