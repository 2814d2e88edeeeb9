"""Run pages as JSON or HTML: content negotiation, strong ETags from a cheap version, and the pages
already sent kept in memory, so a page read again unchanged costs neither a read nor a render."""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import msgspec
from litestar import MediaType, Request, Response
from litestar.openapi.datastructures import ResponseSpec


def page_spec(body: type, description: str) -> ResponseSpec:
    """OpenAPI's description of a 200 answered as JSON ``body`` (the HTML page is a view of the same data)."""
    return ResponseSpec(data_container=body, description=description)


def wants_html(request: Request[Any, Any, Any]) -> bool:
    """HTML for browsers (they list text/html in Accept) or ``?format=html``; JSON otherwise.

    The HTML pages are a view of the same data, not part of the JSON API's schema.
    """
    fmt = request.query_params.get("format")
    if fmt is not None:
        return fmt == "html"
    return "text/html" in request.headers.get("accept", "")


class RenderedPages:
    """Run pages as sent — JSON or HTML bytes — by ETag (one app's, bounded, least recently used out).
    The ETag is a hash of the page's version (:meth:`RunService.page_version`), known before the page
    is built: a page read again unchanged is neither read from the database, nor encoded, nor rendered."""

    def __init__(self, capacity: int = 128) -> None:
        self.capacity = capacity
        self._by_etag: OrderedDict[str, bytes] = OrderedDict()

    def get(self, etag: str) -> bytes | None:
        page = self._by_etag.get(etag)
        if page is not None:
            self._by_etag.move_to_end(etag)
        return page

    def put(self, etag: str, page: bytes) -> None:
        self._by_etag[etag] = page
        while len(self._by_etag) > self.capacity:
            self._by_etag.popitem(last=False)


def _etag_matches(request: Request[Any, Any, Any], etag: str) -> bool:
    header = request.headers.get("if-none-match")
    if not header:
        return False
    candidates = {c.strip().removeprefix("W/") for c in header.split(",")}
    return "*" in candidates or etag in candidates


_Body = TypeVar("_Body")  # the page's JSON body (a TypedDict view)


async def conditional_page(
    request: Request[Any, Any, Any],
    version: str,
    build: Callable[[], Awaitable[_Body]],
    template: str,
    context: Callable[[_Body], dict[str, Any]],
) -> Response[Any]:
    """JSON or HTML with a strong ETag made from ``version`` (one per representation). ``If-None-Match``
    with it answers 304 without building anything; a page already sent with this ETag is sent again
    from memory; only otherwise is ``build()`` awaited and its body encoded or rendered. Clients
    revalidate (``no-cache``)."""
    html = wants_html(request)
    etag = '"' + hashlib.blake2b(version.encode(), digest_size=12).hexdigest() + ('-html"' if html else '"')
    headers = {"ETag": etag, "Cache-Control": "no-cache", "Vary": "Accept"}
    if _etag_matches(request, etag):
        return Response(content=b"", status_code=304, headers=headers)
    media_type = MediaType.HTML if html else MediaType.JSON
    pages: RenderedPages = request.app.state.rendered_pages
    page = pages.get(etag)
    if page is None:
        body = await build()
        if html:
            engine = request.app.template_engine
            assert engine is not None, "the app is built with a template config (service.app)"
            page = engine.get_template(template).render(**context(body)).encode()
        else:
            page = msgspec.json.encode(body)
        pages.put(etag, page)
    return Response(content=page, media_type=media_type, headers=headers)
