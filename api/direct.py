"""Lean routes answered from the request's envelope, past FastAPI's
middleware stack and router.

Between the envelope (`api.middleware`) and a route's handler, FastAPI
puts four layers and a router: its body-limit and exception-telemetry
layers, Starlette's exception middleware, FastAPI's exit-stack middleware,
the router's walk over the routes, then the route's own wrappers (two
exit stacks and an exception wrapper). Each is a coroutine per request,
most with a wrapped `send`; skipping them took about a tenth of an HTTP
append's instructions (docs/http-api.md, "Speed", fourth round).

A request to a route with a lean path (`api.fast_path`, a route whose
every part the lean path handles) is answered here instead:

- the route is the one the router would choose: the first route, in the
  router's order, whose `matches` is FULL (each earlier route that could
  take the path is asked, as the router asks it), and only for a plain
  scope (no `root_path`, no route context of an included app);
- the scope gets what the router gives it (`route`, `endpoint`,
  `path_params`, `router`), so the access line, the metrics and the
  handlers see the same request;
- the lean path answers a request that validates, and errors raised by
  the key check or the endpoint go through Starlette's own
  `wrap_app_handling_exceptions` with the very handlers Starlette's
  exception middleware holds, as the route's wrapper sends them;
- a request the lean path does not answer (`fast_path.Fallback`: a body or
  parameter that does not validate, a dependency override) goes to the
  whole stack, its body replayed: FastAPI answers it exactly as before.
  `Fallback` is raised before anything was called, so nothing runs twice.

What is skipped does nothing for these routes: the body limit is the
envelope's (FastAPI's own is unset), telemetry is off (`api.app`), and
the exit stacks close only what a dependency with `yield` or an uploaded
file opens, which a lean route has none of.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fastapi.routing import _get_scope_effective_route_context
from starlette._exception_handler import wrap_app_handling_exceptions
from starlette.middleware.exceptions import ExceptionMiddleware
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.fast_path import Fallback, Handler
from api.routing import JSONRequest, JSONRoute, Shape

__all__ = ["DirectRoutes"]


def _fits(shape: Shape, path: str) -> bool:
    start, end, slashes = shape
    return path.startswith(start) and path.endswith(end) and path.count("/") == slashes


class _Direct:
    """One lean route, with the routes before it that could take its paths."""

    __slots__ = ("answer", "rivals", "route", "shape")

    def __init__(self, route: JSONRoute, answer: Handler, rivals: list[BaseRoute]) -> None:
        assert route.shape is not None
        self.route = route
        self.shape: Shape = route.shape
        self.answer = answer
        self.rivals = rivals

    def taken_earlier(self, scope: Scope) -> bool:
        """Whether the router would choose a route before this one."""
        for rival in self.rivals:
            shape = getattr(rival, "shape", None)
            if shape is not None and not _fits(shape, scope["path"]):
                continue
            if rival.matches(scope)[0] is Match.FULL:
                return True
        return False


class DirectRoutes:
    """The lean routes of `routes` by method, and how to answer one.

    `exceptions` is the exception middleware the envelope calls next: its
    handlers are the ones a route's errors go to."""

    def __init__(
        self, router: ASGIApp, routes: Sequence[BaseRoute], exceptions: ExceptionMiddleware
    ) -> None:
        self.router = router
        self.handlers = (exceptions._exception_handlers, exceptions._status_handlers)
        self.by_method: dict[str, list[_Direct]] = {}
        for index, route in enumerate(routes):
            lean = getattr(route, "lean", None)
            if not isinstance(route, JSONRoute) or lean is None or route.shape is None:
                continue
            rivals = [
                earlier
                for earlier in routes[:index]
                if _may_overlap(getattr(earlier, "shape", None), route.shape)
            ]
            for method in route.methods or ():
                self.by_method.setdefault(method, []).append(_Direct(route, lean, rivals))

    def find(self, scope: Scope) -> _Direct | None:
        """The lean route the router would send this request to, if any."""
        candidates = self.by_method.get(scope["method"])
        if not candidates or scope.get("root_path"):
            return None
        if _get_scope_effective_route_context(scope) is not None:
            return None
        path: str = scope["path"]
        for direct in candidates:
            if _fits(direct.shape, path):
                if direct.taken_earlier(scope):
                    return None
                match, child = direct.route.matches(scope)
                if match is not Match.FULL:
                    continue
                scope.update(child)
                scope.setdefault("router", self.router)
                scope["starlette.exception_handlers"] = self.handlers
                return direct
        return None

    async def answer(
        self, direct: _Direct, scope: Scope, receive: Receive, send: Send, stack: ASGIApp
    ) -> None:
        """`direct`'s answer; a request it does not take goes to `stack`."""
        request = JSONRequest(scope, receive, send)
        fell_back = False

        async def respond(scope: Scope, receive: Receive, send: Send) -> None:
            nonlocal fell_back
            try:
                response = await direct.answer(request)
            except Fallback:
                fell_back = True
                return
            await response(scope, receive, send)

        await wrap_app_handling_exceptions(respond, request)(scope, receive, send)
        if fell_back:
            await stack(scope, _replayed(request, receive), send)


def _may_overlap(earlier: Shape | None, shape: Shape) -> bool:
    """Whether a path of `shape` could also be one of `earlier`'s."""
    if earlier is None:
        return True
    start, end, slashes = earlier
    return (
        slashes == shape[2]
        and (start.startswith(shape[0]) or shape[0].startswith(start))
        and (end.endswith(shape[1]) or shape[1].endswith(end))
    )


def _replayed(request: JSONRequest, receive: Receive) -> Receive:
    """`receive`, with the body the lean path already read sent first."""
    body: bytes | None = getattr(request, "_body", None)
    if body is None:
        return receive
    pending: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]

    async def replay() -> Message:
        if pending:
            return pending.pop()
        return await receive()

    return replay


def direct_routes(app: Any, next_layer: ASGIApp) -> DirectRoutes | None:
    """The direct routes of the FastAPI `app`, when the envelope's next layer
    is Starlette's exception middleware (as `FastAPI.build_middleware_stack`
    places it after the user's middleware); else None: every request goes
    through the stack."""
    router = getattr(app, "router", None)
    if router is None or not isinstance(next_layer, ExceptionMiddleware):
        return None
    return DirectRoutes(router, list(router.routes), next_layer)
