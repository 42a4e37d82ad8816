"""The frame of the service's own middlewares: plain ASGI classes (no
`BaseHTTPMiddleware`, whose task per request costs more than the work most
of them do), each acting on HTTP requests only and passing every other
scope (the lifespan, a websocket) through untouched."""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send


class HttpMiddleware:
    """Wraps `app`; `http(scope, receive, send)` handles an HTTP request."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await self.http(scope, receive, send)

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        raise NotImplementedError
