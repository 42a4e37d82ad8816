"""Every route that needs an API key (health lives in `api.app`).

One module per resource: conversations, messages, agents (profiles and
slots), batches, forks and pins, reads, assembly, export, events,
compaction, search, the XML tool protocol, and `/me` (the key itself).
`install_routes` adds their routes to the app itself, each with the key
check (`api.deps.get_tenant`) as a dependency of its own, so a route that
forgets `RepositoryDep` is still protected. Added one by one, not as
included routers: FastAPI matches a request against included routers level
by level, which cost a request more CPU than its own validation did
(docs/benchmarks.md, http_load).
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, FastAPI
from fastapi.routing import APIRoute

from api.deps import get_tenant
from api.routes import agents, assembly, batches, conversations, forks, messages, reads
from api.routes import compaction as compaction_routes
from api.routes import events as events_routes
from api.routes import export as export_routes
from api.routes import me as me_routes
from api.routes import search as search_routes
from api.routes import xml_tools as xml_tools_routes

ROUTERS: tuple[APIRouter, ...] = tuple(
    module.router
    for module in (
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
        xml_tools_routes,
        me_routes,
    )
)


def install_routes(app: FastAPI) -> None:
    """Each route of `ROUTERS` on the app, behind the key check."""
    for router in ROUTERS:
        for route in router.routes:
            assert isinstance(route, APIRoute), f"{route!r} is not an API route"
            app.router.add_api_route(
                route.path,
                route.endpoint,
                response_model=route.response_model,
                status_code=route.status_code,
                tags=list(route.tags),
                dependencies=[Depends(get_tenant), *route.dependencies],
                summary=route.summary,
                description=route.description,
                response_description=route.response_description,
                responses=route.responses,
                deprecated=route.deprecated,
                methods=route.methods,
                operation_id=route.operation_id,
                response_model_include=route.response_model_include,
                response_model_exclude=route.response_model_exclude,
                response_model_by_alias=route.response_model_by_alias,
                response_model_exclude_unset=route.response_model_exclude_unset,
                response_model_exclude_defaults=route.response_model_exclude_defaults,
                response_model_exclude_none=route.response_model_exclude_none,
                include_in_schema=route.include_in_schema,
                response_class=route.response_class,
                name=route.name,
                route_class_override=type(route),
                callbacks=route.callbacks,
                openapi_extra=route.openapi_extra,
            )


__all__ = ["ROUTERS", "install_routes"]
