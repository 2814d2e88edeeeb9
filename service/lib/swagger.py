"""``/docs``: Swagger UI served from this origin — the Swagger UI 5 assets vendored by the ``swagger-ui-py`` wheel
plus a small start script — so the page loads nothing from a CDN and runs under the same strict
Content-Security-Policy as every other page (no inline script)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import swagger_ui
from litestar import Request
from litestar.openapi.plugins import SwaggerRenderPlugin
from litestar.router import Router
from litestar.static_files import create_static_files_router

ASSETS = "/static/swagger-ui"
_OWN = Path(__file__).parent / "static"
_VENDORED = Path(swagger_ui.__file__).parent / "static"  # Swagger UI 5 (OpenAPI 3.1, which Litestar writes)


class LocalSwaggerUI(SwaggerRenderPlugin):
    def __init__(self) -> None:
        super().__init__(
            js_url=f"{ASSETS}/swagger-ui-bundle.js",
            css_url=f"{ASSETS}/swagger-ui.css",
            standalone_preset_js_url=f"{ASSETS}/swagger-ui-standalone-preset.js",
            favicon=f"<link rel='icon' type='image/png' href='{ASSETS}/favicon-32x32.png'>",
        )

    def render(self, request: Request[Any, Any, Any], openapi_schema: dict[str, Any]) -> bytes:
        title = str(openapi_schema["info"]["title"]).replace("<", "&lt;")
        return (
            "<!DOCTYPE html><html><head>"
            f"<title>{title}</title>{self.favicon}<meta charset='utf-8'/>"
            "<meta name='viewport' content='width=device-width, initial-scale=1'>"
            f"<link href='{self.css_url}' rel='stylesheet'>"
            f"<script src='{self.js_url}'></script><script src='{self.standalone_preset_js_url}'></script>"
            f"<script src='{ASSETS}/swagger-init.js'></script>"
            "</head><body><div id='swagger-container'></div></body></html>"
        ).encode()


def swagger_assets() -> Router:
    """The vendored Swagger UI files and our start script (ours first: it is looked up in order)."""
    return create_static_files_router(path=ASSETS, directories=[_OWN, _VENDORED], include_in_schema=False)


__all__ = ["ASSETS", "LocalSwaggerUI", "swagger_assets"]
