"""RFC 9457 problem details for every error the service returns, and the handlers that make them; the one
module that maps the services' domain errors (:mod:`service.errors`) to each transport.

A domain error's kind gives its HTTP status and its WebSocket error frame's code (:data:`KINDS`); its
``slug`` ends its problem type's URL, and :data:`TITLES` gives its problem's title. Over HTTP it is answered as a
problem document (:func:`problem_body`; a :class:`~service.errors.QuotaSpent` adds ``Retry-After``), over a
WebSocket as an error frame (:func:`ws_error_data`), over MCP as a tool result with ``isError`` whose payload
is the same problem document (:func:`mcp_tool_error`: MCP reports a tool that failed in its result, not as a
JSON-RPC error). Each problem carries a ``detail`` telling the caller what to do next. Database faults
(:mod:`service.db.errors`) become 503 (unavailable) or 507 (disk full) with ``Retry-After``, logged
one line each. Unexpected exceptions become a 500 problem without internals (logged server-side
with a traceback).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from litestar import MediaType, Request, Response
from litestar.exceptions import HTTPException, NotFoundException, ValidationException
from litestar.openapi.datastructures import ResponseSpec
from litestar.status_codes import HTTP_500_INTERNAL_SERVER_ERROR
from pydantic import BaseModel, ConfigDict
from sqlalchemy.exc import IntegrityError

from service.db.errors import DatabaseFault, DatabaseFull, FaultLog
from service.errors import (
    MAX_LISTED_ERRORS,
    Conflict,
    DomainError,
    InvalidRequest,
    MalformedRequest,
    NotAllowed,
    NotFound,
    QuotaSpent,
    Unauthenticated,
    bounded_errors,
    clip,
)

log = logging.getLogger("service.problems")

PROBLEM_JSON = "application/problem+json"
TYPE_BASE = "https://ecomm-support-env.local/problems/"


class ProblemDetails(BaseModel):
    """RFC 9457 problem details, as every error of this API is answered."""

    model_config = ConfigDict(extra="allow")

    type: str
    title: str
    status: int
    detail: str


def problem_responses(*statuses: int) -> dict[int, ResponseSpec]:
    """OpenAPI entries for the problem statuses a route can answer (400, 413, 422, 503 and 507 always)."""
    described = {
        400: "The body is not JSON, or a token was sent in the query string",
        401: "A run episode without its run token, or a client-chosen episode id without its episode token",
        403: (
            "The wrong run, episode or submitter token, the test split outside a run, or a test episode's private "
            "results"
        ),
        404: "No such episode, run or route",
        409: (
            "The episode or run is in a state that does not allow this (finished, raced, hidden results, exhausted run)"
        ),
        413: "The body is larger than MAX_BODY_BYTES",
        429: "Too many requests for this key or client (see Retry-After)",
        422: "Invalid fields (listed in `errors`)",
        503: "The database is unavailable or did not answer in time; retry after Retry-After seconds",
        507: "The server's disk is full; nothing new can be stored until space is freed (retry after Retry-After)",
    }
    codes = sorted({400, 413, 422, 503, 507, *statuses})
    return {
        code: ResponseSpec(
            data_container=ProblemDetails, media_type=PROBLEM_JSON, description=described[code], generate_examples=False
        )
        for code in codes
    }


def listed(errors: list[dict[str, Any]], key: str = "field", separator: str = "; ") -> str:
    """``errors`` as one line for a ``detail`` ("field (message); …"), as bounded as :func:`bounded_errors`."""
    parts = []
    for error in bounded_errors(errors, key):
        name, message = error.get(key), error.get("message")
        if error.get("type") == "more_errors":
            parts.append(str(message))
        else:
            parts.append(f"{name} ({message})" if message else str(name))
    return separator.join(parts)


WS_VALIDATION_ERROR = "VALIDATION_ERROR"  # the frame lists the fields in ``errors``
WS_EXECUTION_ERROR = "EXECUTION_ERROR"  # the frame carries the HTTP status the same refusal would have


@dataclass(frozen=True)
class Wire:
    """How one kind of domain error is answered: its HTTP status, and its WebSocket error frame's code."""

    status: int
    ws_code: str


KINDS: dict[type[DomainError], Wire] = {
    MalformedRequest: Wire(400, WS_EXECUTION_ERROR),
    Unauthenticated: Wire(401, WS_EXECUTION_ERROR),
    NotAllowed: Wire(403, WS_EXECUTION_ERROR),
    NotFound: Wire(404, WS_EXECUTION_ERROR),
    Conflict: Wire(409, WS_EXECUTION_ERROR),
    InvalidRequest: Wire(422, WS_VALIDATION_ERROR),
    QuotaSpent: Wire(429, WS_EXECUTION_ERROR),
}

# The title of each problem type, by the domain error's slug (the end of the type URL). A table of data: one
# row per slug, which tests/api/test_domain_errors.py checks against every domain error the service defines.
TITLES: dict[str, str] = {
    "not-json": "Body is not JSON",
    "token-in-url": "Secrets never travel in a URL",
    "validation-error": "Request validation failed",
    "episode-id-required": "episode_id is required",
    "episode-token-required": "Episode token required",
    "run-token-required": "Run token required",
    "submitter-key-required": "Submitter key required",
    "episode-token-invalid": "Episode token does not match",
    "run-token-invalid": "Run token does not match",
    "submitter-key-invalid": "Submitter key not recognised",
    "test-split-needs-run": "The test split is played only as a run",
    "test-results-private": "Test-split episodes are never shown one by one",
    "test-run-budget-spent": "No test runs left under this test key",
    "episode-not-found": "Episode not found",
    "run-not-found": "Run not found",
    "episode-conflict": "Episode state conflict",
    "episode-exists": "Episode already exists",
    "episode-finished": "Episode is finished",
    "episode-not-finished": "Episode is not finished",
    "step-conflict": "Concurrent step on the same episode",
    "no-episode": "No episode to act on",
    "run-not-active": "Run is not active",
    "run-episode-id-taken": "The run's next episode id is taken",
    "run-in-progress": "Per-episode results are shown once the run completes",
    "agent-name-taken": "Agent name belongs to another submitter",
    "quota-exceeded": "Too many test runs",
    "episode-quota-exceeded": "Too many episodes from this client",
    "rate-limited": "Too many requests",
}


def wire_of(exc: DomainError) -> Wire:
    """How ``exc`` is answered: the :data:`KINDS` entry of the nearest kind it derives."""
    for cls in type(exc).__mro__:
        wire = KINDS.get(cls)
        if wire is not None:
            return wire
    raise LookupError(f"{type(exc).__name__} derives no kind of service.errors")


def problem_body(exc: DomainError) -> dict[str, Any]:
    """``exc`` as an RFC 9457 problem document (HTTP's body, and MCP's tool error payload)."""
    return {
        "type": TYPE_BASE + exc.slug,
        "title": TITLES[exc.slug],
        "status": wire_of(exc).status,
        "detail": exc.detail,
        **exc.extra,
    }


def ws_error_data(exc: DomainError) -> dict[str, Any]:
    """``exc`` as the ``data`` of a WebSocket error frame: the fields for a validation error, the HTTP status
    the same refusal has otherwise."""
    wire = wire_of(exc)
    if wire.ws_code == WS_VALIDATION_ERROR:
        return {"message": exc.detail, "code": wire.ws_code, "errors": exc.extra.get("errors", [])}
    return {"message": exc.detail, "code": wire.ws_code, "status": wire.status}


def mcp_tool_error(exc: DomainError) -> dict[str, Any]:
    """``exc`` as the payload of an MCP tool result with ``isError`` (the problem document, as over HTTP)."""
    return problem_body(exc)


def bearer(request: Request[Any, Any, Any]) -> str | None:
    """The run token from ``Authorization: Bearer …`` (None when absent)."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return (token.strip() or None) if scheme.lower() == "bearer" else None


def problem_response(
    status: int, title: str, detail: str, slug: str, headers: dict[str, str] | None = None, **extra: Any
) -> Response[dict[str, Any]]:
    body = {"type": TYPE_BASE + slug, "title": title, "status": status, "detail": detail, **extra}
    return Response(content=body, status_code=status, media_type=PROBLEM_JSON, headers=headers)


def _domain_error_handler(_: Request[Any, Any, Any], exc: DomainError) -> Response[dict[str, Any]]:
    headers = {"Retry-After": str(exc.retry_after_s)} if isinstance(exc, QuotaSpent) else None
    return Response(
        content=problem_body(exc), status_code=wire_of(exc).status, media_type=PROBLEM_JSON, headers=headers
    )


def _validation_handler(request: Request[Any, Any, Any], exc: ValidationException) -> Response[dict[str, Any]]:
    errors = exc.extra if isinstance(exc.extra, list) else ([exc.extra] if exc.extra else [])
    keyed = [e for e in errors if isinstance(e, dict) and e.get("key")]
    detail = str(exc.detail) if exc.detail else "the request is invalid"
    if keyed:
        detail = "fix these fields and retry: " + listed(keyed, key="key")
    elif "JSON" in detail or "decode" in detail.lower():
        detail = "the body is not valid JSON; send a JSON object (Content-Type: application/json)"
    shown = bounded_errors([e if isinstance(e, dict) else {"message": str(e)} for e in errors], key="key")
    return problem_response(422, "Request validation failed", clip(detail, 2000), "validation-error", errors=shown)


_HINTS = {
    404: "no such route; GET /openapi.json lists every endpoint",
    405: "this route does not accept that method; GET /openapi.json lists the allowed ones",
    413: "the request body is too large; send at most the configured MAX_BODY_BYTES",
}


def _http_handler(request: Request[Any, Any, Any], exc: HTTPException) -> Response[dict[str, Any]]:
    status = exc.status_code
    detail = _HINTS.get(status) or (str(exc.detail) if exc.detail else "request failed")
    if status == 413:
        detail = f"{_HINTS[413]} ({request.app.request_max_body_size} bytes)"
    if status == 400 and "JSON" in detail:
        detail = f"the body is not valid JSON ({detail}); send a JSON object with Content-Type: application/json"
    slug = {404: "not-found", 405: "method-not-allowed", 413: "payload-too-large"}.get(status, "http-error")
    title = {400: "Bad request", 404: "Not found", 405: "Method not allowed", 413: "Payload too large"}.get(
        status, str(exc.detail) if exc.detail else "HTTP error"
    )
    if status == 429:  # Litestar's RateLimitMiddleware: the per-minute limits of the costly routes
        reset = (exc.headers or {}).get("RateLimit-Reset", "")
        wait = max(1, int(reset)) if reset.isdigit() else 60
        return problem_response(
            429,
            "Too many requests",
            "this client address read run pages, the leaderboard or trajectories, or created runs, more often this "
            "minute than RATE_LIMIT_HEAVY_READS_PER_MIN / RATE_LIMIT_TRAJECTORIES_PER_MIN / RATE_LIMIT_RUNS_PER_MIN "
            f"allow; wait Retry-After ({wait} s) and retry",
            "rate-limited",
            retry_after_s=wait,
            headers={"Retry-After": str(wait)},
        )
    response = problem_response(status, title, detail, slug)
    if exc.headers:
        response.headers.update(exc.headers)
    return response


def _integrity_handler(request: Request[Any, Any, Any], exc: IntegrityError) -> Response[dict[str, Any]]:
    # Expected collisions are mapped where they happen; this is the net for any other insert.
    log.warning("integrity conflict on %s %s: %s", request.method, request.url.path, type(exc.orig).__name__)
    return problem_response(
        409,
        "Conflict",
        "what you asked to create already exists (or conflicts with stored data); "
        "choose another id, or omit it to let the server make one",
        "conflict",
    )


def _too_deep_handler(request: Request[Any, Any, Any], exc: RecursionError) -> Response[dict[str, Any]]:
    # msgspec raises RecursionError while decoding absurdly nested JSON: that is the caller's input.
    return problem_response(
        400, "Body nested too deeply", "send a flat JSON object; nesting this deep is never valid here", "too-deep"
    )


def _internal_handler(request: Request[Any, Any, Any], exc: Exception) -> Response[dict[str, Any]]:
    log.exception("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return problem_response(
        HTTP_500_INTERNAL_SERVER_ERROR,
        "Internal server error",
        "the server failed unexpectedly; retry later — a retried step with the same request_id is applied at most once",
        "internal-error",
    )


# How a database fault is answered: 507 while nothing new can be stored, 503 (retry later) otherwise.
FAULT_STATUS: dict[type[DatabaseFault], int] = {DatabaseFull: 507, DatabaseFault: 503}


def fault_status(exc: DatabaseFault) -> int:
    """The HTTP status of ``exc``: the :data:`FAULT_STATUS` entry of the nearest class it derives."""
    return next(FAULT_STATUS[cls] for cls in type(exc).__mro__ if cls in FAULT_STATUS)


def fault_body(exc: DatabaseFault) -> dict[str, Any]:
    """A database fault as a problem document — over HTTP, as an MCP tool error, in a WebSocket error frame:
    ``outcome-unknown`` (the write may be applied: retry with the same request_id, or check first) is its
    own type everywhere, apart from ``database-unavailable`` (not applied: retry) and ``storage-full``."""
    return {
        "type": TYPE_BASE + exc.slug,
        "title": exc.title,
        "status": fault_status(exc),
        "detail": exc.detail,
        "retry_after_s": exc.retry_after_s,
    }


def _database_fault_handler(request: Request[Any, Any, Any], exc: DatabaseFault) -> Response[dict[str, Any]]:
    # One log line per failure; a traceback at most once a minute (an outage fails every request).
    faults: FaultLog | None = getattr(getattr(request.app.state, "database", None), "faults", None)
    status = fault_status(exc)
    if faults is not None:
        faults.failure(log, f"{request.method} {request.url.path}", exc)
    else:
        log.warning("%s %s: %s → %d: %s", request.method, request.url.path, exc.title.lower(), status, exc.reason)
    response = Response(content=fault_body(exc), status_code=status, media_type=PROBLEM_JSON)
    response.headers["Retry-After"] = str(exc.retry_after_s)
    return response


exception_handlers: dict[Any, Any] = {
    DomainError: _domain_error_handler,
    DatabaseFault: _database_fault_handler,
    IntegrityError: _integrity_handler,
    ValidationException: _validation_handler,
    NotFoundException: _http_handler,
    HTTPException: _http_handler,
    RecursionError: _too_deep_handler,
    Exception: _internal_handler,
}

__all__ = [
    "MAX_LISTED_ERRORS",  # at home in service.errors, where the bounds are applied; tests read it here
    "PROBLEM_JSON",
    "MediaType",
    "exception_handlers",
    "mcp_tool_error",
    "problem_body",
    "problem_response",
    "ws_error_data",
]
