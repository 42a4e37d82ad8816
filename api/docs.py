"""`/docs` (Swagger UI) and `/redoc` (ReDoc), served whole by the app itself.

FastAPI's own pages load their scripts and styles from a public CDN, so on
a machine without the internet they stay blank. These are FastAPI's pages
with FastAPI's documented recipe for self-hosting: the same HTML, pointing
at the assets under `/docs/assets/`, which come from an installed package
(`fastapi-offline` ships Swagger UI's and ReDoc's builds as package data).
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS_PATH = "/docs/assets"
# The package the assets come from, and the files used from it.
ASSETS_PACKAGE = "fastapi_offline"
ASSETS = ("swagger-ui-bundle.js", "swagger-ui.css", "redoc.standalone.js", "favicon.png")


def assets_directory() -> Path:
    return Path(str(files(ASSETS_PACKAGE) / "static"))


def install_docs(app: FastAPI) -> None:
    app.mount(ASSETS_PATH, StaticFiles(directory=assets_directory()), name="docs-assets")
    title = app.title

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=f"{title} - Swagger UI",
            swagger_js_url=f"{ASSETS_PATH}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS_PATH}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS_PATH}/favicon.png",
        )

    @app.get("/redoc", include_in_schema=False)
    async def redoc() -> HTMLResponse:
        return get_redoc_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=f"{title} - ReDoc",
            redoc_js_url=f"{ASSETS_PATH}/redoc.standalone.js",
            redoc_favicon_url=f"{ASSETS_PATH}/favicon.png",
            with_google_fonts=False,
        )
