"""The analysts' console at `/ui`: static HTML, CSS and JavaScript modules
shipped in the package (no CDN, no build step), talking to the API of the
same server with the key the analyst signs in with.

The key is kept in the tab's sessionStorage and sent as `X-API-Key` on each
request the console makes; it never goes into a URL, so it is in no access
log, no history and no Referer. Everything the API answers is put on the
page as text (`textContent`, never `innerHTML`), and every file is served
with a Content-Security-Policy that allows only this origin's scripts and
styles, none inline, and no framing: content that looks like HTML stays
text, and a script slipped into a message could not run if it did not.
What a key may see is the API's business (one tenant per key); what it may
do is too, but the console hides what a read-only key would be refused
(`GET /me` says which).
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from starlette.responses import Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

STATIC = Path(__file__).parent / "static"
MOUNT = "/ui"

CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self'",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    )
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    # The files change with the package: ask each time (a 304 when unchanged).
    "Cache-Control": "no-cache",
}


class ConsoleFiles(StaticFiles):
    """The console's files (`index.html` for the folder), each with the security headers."""

    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        response.headers.update(SECURITY_HEADERS)
        return response


def install_console(app: FastAPI) -> None:
    """Serve the console at `/ui/` (`/ui` redirects there)."""
    app.mount(MOUNT, ConsoleFiles(directory=STATIC, html=True), name="console")


__all__ = ["CONTENT_SECURITY_POLICY", "MOUNT", "SECURITY_HEADERS", "install_console"]
