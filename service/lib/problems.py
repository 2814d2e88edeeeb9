"""RFC 9457 problem details for every error the service returns, and the handlers that make them.

Each problem carries a ``detail`` telling the caller what to do next. Database faults
(:mod:`service.db.errors`) become 503 (unavailable) or 507 (disk full) with ``Retry-After``, logged
one line each. Unexpected exceptions become a 500 problem without internals (logged server-side
with a traceback).
"""

from __future__ import annotations

import logging
from typing import Any

from litestar import MediaType, Request, Response
from litestar.exceptions import HTTPException, NotFoundException, ValidationException
from litestar.openapi.datastructures import ResponseSpec
from litestar.status_codes import HTTP_500_INTERNAL_SERVER_ERROR
from pydantic import BaseModel, ConfigDict
from sqlalchemy.exc import IntegrityError

from service.db.errors import DatabaseFault, FaultLog

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


class Problem(Exception):
    """An error with an HTTP status and a caller-facing explanation."""

    status = 400
    slug = "bad-request"
    title = "Bad request"

    def __init__(self, detail: str, **extra: Any) -> None:
        super().__init__(detail)
        self.detail = detail
        self.extra = extra

    def body(self) -> dict[str, Any]:
        return {
            "type": TYPE_BASE + self.slug,
            "title": self.title,
            "status": self.status,
            "detail": self.detail,
            **self.extra,
        }


# A response never grows with the number (or length) of the mistakes in a request: at most this many
# errors are listed one by one — the rest are counted — and text echoed from the request is cut short.
MAX_LISTED_ERRORS = 5
MAX_ECHOED_CHARS = 64  # of a field name or value the client sent, quoted back
MAX_MESSAGE_CHARS = 500


def clip(text: str, limit: int = MAX_ECHOED_CHARS) -> str:
    """``text`` cut to ``limit`` characters (the cut marked with …)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def bounded_errors(errors: list[dict[str, Any]], key: str = "field") -> list[dict[str, Any]]:
    """At most :data:`MAX_LISTED_ERRORS` of ``errors``, their texts clipped, then one entry that says how many
    more there were (``key`` names the field of each error: ``field`` in our problems, ``key`` in Litestar's)."""
    counted = [e for e in errors if e.get("type") == "more_errors" or e.get(key) == "…"]  # already bounded
    listed_ = [e for e in errors if e not in counted]
    shown = [
        {
            name: clip(value, MAX_MESSAGE_CHARS if name == "message" else MAX_ECHOED_CHARS)
            if isinstance(value, str)
            else value
            for name, value in error.items()
        }
        for error in listed_[:MAX_LISTED_ERRORS]
    ]
    more = len(listed_) - MAX_LISTED_ERRORS
    if more > 0:
        shown.append({key: "…", "message": f"and {more} more not listed", "type": "more_errors", "more": more})
    return shown + counted[:1]


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


class InvalidInput(Problem):
    status = 422
    slug = "validation-error"
    title = "Request validation failed"

    def __init__(self, detail: str, **extra: Any) -> None:
        if isinstance(extra.get("errors"), list):
            extra["errors"] = bounded_errors(extra["errors"])
        super().__init__(clip(detail, 2 * MAX_MESSAGE_CHARS + MAX_LISTED_ERRORS * MAX_ECHOED_CHARS), **extra)


class EpisodeNotFound(Problem):
    status = 404
    slug = "episode-not-found"
    title = "Episode not found"

    def __init__(self, episode_id: str) -> None:
        super().__init__(
            f"no episode with id {episode_id!r}; call POST /reset to start an episode — it returns episode_id",
            episode_id=episode_id,
        )


class MissingEpisodeId(Problem):
    status = 422
    slug = "episode-id-required"
    title = "episode_id is required"

    def __init__(self) -> None:
        super().__init__(
            "pass the episode_id returned by POST /reset (in observation.episode_id and metadata.episode_id); "
            "over HTTP, a client that sends back the ecomm_episode cookie /reset sets may leave it out. For a client "
            "that keeps no cookies and sends no id (seed A's inference.py and baseline.py), the operator starts a "
            "server for it alone with SINGLE_SESSION=1 DEFAULT_TASKS=easy,medium,hard (Docker: -e SINGLE_SESSION=1 "
            "-e DEFAULT_TASKS=easy,medium,hard): the first lets an id-less request mean the latest reset, the second "
            "makes a reset that names no task a refund decision, as seed A's were",
            errors=[{"field": "episode_id", "message": "field required"}],
        )


class EpisodeConflict(Problem):
    status = 409
    slug = "episode-conflict"
    title = "Episode state conflict"


class EpisodeAlreadyExists(EpisodeConflict):
    slug = "episode-exists"
    title = "Episode already exists"


class EpisodeFinishedProblem(EpisodeConflict):
    slug = "episode-finished"
    title = "Episode is finished"


class EpisodeNotFinished(EpisodeConflict):
    slug = "episode-not-finished"
    title = "Episode is not finished"


class StepRaceLost(EpisodeConflict):
    slug = "step-conflict"
    title = "Concurrent step on the same episode"


class RunTokenMissing(Problem):
    status = 401
    slug = "run-token-required"
    title = "Run token required"


class RunTokenInvalid(Problem):
    status = 403
    slug = "run-token-invalid"
    title = "Run token does not match"


class EpisodeTokenMissing(Problem):
    status = 401
    slug = "episode-token-required"
    title = "Episode token required"

    def __init__(self, episode_id: str) -> None:
        super().__init__(
            f"episode {episode_id!r} has a client-chosen id, so it needs the episode_token its reset returned "
            "(metadata.episode_token): send it in the `X-Episode-Token` header (or `Authorization: Bearer`, or "
            "`episode_token` in a POST body) — never in the URL",
            episode_id=episode_id,
        )


class EpisodeTokenInvalid(Problem):
    status = 403
    slug = "episode-token-invalid"
    title = "Episode token does not match"

    def __init__(self, episode_id: str) -> None:
        super().__init__(
            f"that is not the episode_token of episode {episode_id!r}; only the client whose reset created it may "
            "act on it — POST /reset without episode_id starts an episode of your own",
            episode_id=episode_id,
        )


class TokenInUrl(Problem):
    status = 400
    slug = "token-in-url"
    title = "Secrets never travel in a URL"


class RunNotFound(Problem):
    status = 404
    slug = "run-not-found"
    title = "Run not found"


class RunNotActive(Problem):
    status = 409
    slug = "run-not-active"
    title = "Run is not active"


class RunEpisodeIdTaken(Problem):
    status = 409
    slug = "run-episode-id-taken"
    title = "The run's next episode id is taken"


class AgentNameTaken(Problem):
    status = 409
    slug = "agent-name-taken"
    title = "Agent name belongs to another submitter"


class TestSplitNeedsRun(Problem):
    status = 403
    slug = "test-split-needs-run"
    title = "The test split is played only as a run"


class TestResultsPrivate(Problem):
    status = 403
    slug = "test-results-private"
    title = "Test-split episodes are never shown one by one"


class RunResultsPending(Problem):
    """A run episode's per-episode results (grade, page, trajectory) wait for its run to complete."""

    status = 409
    slug = "run-in-progress"
    title = "Per-episode results are shown once the run completes"


class SubmitterKeyMissing(Problem):
    status = 401
    slug = "submitter-key-required"
    title = "Submitter key required"


class SubmitterKeyInvalid(Problem):
    status = 403
    slug = "submitter-key-invalid"
    title = "Submitter key not recognised"


class QuotaExceeded(Problem):
    status = 429
    slug = "quota-exceeded"
    title = "Too many test runs"

    def __init__(self, detail: str, retry_after_s: int, **extra: Any) -> None:
        super().__init__(detail, retry_after_s=retry_after_s, **extra)
        self.headers = {"Retry-After": str(retry_after_s)}


class TestRunBudgetSpent(Problem):
    """A submitter key has completed (or holds open) its lifetime budget of test runs under this test key."""

    status = 403
    slug = "test-run-budget-spent"
    title = "No test runs left under this test key"


def bearer(request: Request[Any, Any, Any]) -> str | None:
    """The run token from ``Authorization: Bearer …`` (None when absent)."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return (token.strip() or None) if scheme.lower() == "bearer" else None


def problem_response(
    status: int, title: str, detail: str, slug: str, headers: dict[str, str] | None = None, **extra: Any
) -> Response[dict[str, Any]]:
    body = {"type": TYPE_BASE + slug, "title": title, "status": status, "detail": detail, **extra}
    return Response(content=body, status_code=status, media_type=PROBLEM_JSON, headers=headers)


def _problem_handler(_: Request[Any, Any, Any], exc: Problem) -> Response[dict[str, Any]]:
    return Response(
        content=exc.body(), status_code=exc.status, media_type=PROBLEM_JSON, headers=getattr(exc, "headers", None)
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


def fault_body(exc: DatabaseFault) -> dict[str, Any]:
    """A database fault as a problem document — over HTTP, as an MCP tool error, in a WebSocket error frame:
    ``outcome-unknown`` (the write may be applied: retry with the same request_id, or check first) is its
    own type everywhere, apart from ``database-unavailable`` (not applied: retry) and ``storage-full``."""
    return {
        "type": TYPE_BASE + exc.slug,
        "title": exc.title,
        "status": exc.status,
        "detail": exc.detail,
        "retry_after_s": exc.retry_after_s,
    }


def _database_fault_handler(request: Request[Any, Any, Any], exc: DatabaseFault) -> Response[dict[str, Any]]:
    # One log line per failure; a traceback at most once a minute (an outage fails every request).
    faults: FaultLog | None = getattr(getattr(request.app.state, "database", None), "faults", None)
    if faults is not None:
        faults.failure(log, f"{request.method} {request.url.path}", exc)
    else:
        log.warning("%s %s: %s → %d: %s", request.method, request.url.path, exc.title.lower(), exc.status, exc.reason)
    response = Response(content=fault_body(exc), status_code=exc.status, media_type=PROBLEM_JSON)
    response.headers["Retry-After"] = str(exc.retry_after_s)
    return response


exception_handlers: dict[Any, Any] = {
    Problem: _problem_handler,
    DatabaseFault: _database_fault_handler,
    IntegrityError: _integrity_handler,
    ValidationException: _validation_handler,
    NotFoundException: _http_handler,
    HTTPException: _http_handler,
    RecursionError: _too_deep_handler,
    Exception: _internal_handler,
}

__all__ = ["PROBLEM_JSON", "MediaType", "Problem", "exception_handlers", "problem_response"]
