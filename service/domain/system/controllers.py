"""Operational endpoints: readiness, the limits a client counts against, the OpenAPI document and
the index (``GET /health``, OpenEnv's liveness, is with the OpenEnv routes)."""

from __future__ import annotations

from typing import Any

from litestar import MediaType, Request, Response, get
from litestar.datastructures import State
from litestar.di import NamedDependency
from litestar.response import Template

from service import env as core
from service.domain.runs.pages import wants_html
from service.domain.system.schemas import LimitsResponse, ProxyView, ReadyResponse
from service.lib.decoding import close_openapi_bodies
from service.lib.problems import problem_responses
from service.settings import Settings

# What GET /limits shows: the settings that bound one client.
SHOWN_LIMITS = (
    "rate_limit_per_s",
    "rate_limit_run_token_per_s",
    "rate_limit_address_per_s",
    "rate_limit_burst",
    "rate_limit_heavy_reads_per_min",
    "rate_limit_trajectories_per_min",
    "rate_limit_runs_per_min",
    "ws_max_sessions_per_client",
    "max_connections_per_client",
    "mcp_max_sessions_per_client",
    "max_active_episodes_per_client",
    "max_episodes_per_client_per_day",
    "max_body_bytes",
)


@get("/openapi.json", include_in_schema=False, media_type=MediaType.JSON)
async def openapi_json(request: Request[Any, Any, Any]) -> dict[str, Any]:
    return close_openapi_bodies(request.app.openapi_schema.to_schema())  # reset/step bodies are closed


@get("/", include_in_schema=False)
async def index(request: Request[Any, Any, Any], settings: NamedDependency[Settings]) -> Any:
    """A landing page for browsers (what this is, the leaderboard, the docs, how to connect); the same
    pointers as JSON for API clients (``Accept`` without ``text/html``)."""
    if wants_html(request):
        base_url = str(request.base_url).rstrip("/")
        context = {
            "tasks": list(core.TASKS.values()),
            "base_url": base_url,
            "version": settings.app_version,
            "dataset_version": core.DATASET_VERSION,
            "grader_version": core.GRADER_VERSION,
        }
        return Template(
            template_name="index.html", context=context, headers={"Vary": "Accept"}, media_type=MediaType.HTML
        )
    return Response(
        {
            "name": "ecomm-support-env",
            "docs": "/docs",
            "openapi": "/openapi.json",
            "leaderboard": "/leaderboard",
            "tasks": "/tasks",
            "start": "POST /reset, then POST /step with the episode_id it returns; or connect to WS /ws",
        },
        headers={"Vary": "Accept"},
    )


@get("/limits", summary="The client address the limits count this request against, and the limits (docs/security.md)")
async def limits(request: Request[Any, Any, Any], settings: NamedDependency[Settings]) -> LimitsResponse:
    client = request.app.state.clients.of(request)
    hops = settings.trusted_proxy_hops
    if hops and client.forwarded:
        counted = f"X-Forwarded-For entry {min(hops, client.forwarded)} from the right (written by the outermost proxy)"
    else:
        counted = "the TCP peer" + (" (X-Forwarded-For is ignored: TRUSTED_PROXY_HOPS=0)" if client.forwarded else "")
    return LimitsResponse(
        client_address=client.address,
        exempt=client.exempt,
        limits={name: getattr(settings, name) for name in SHOWN_LIMITS},
        proxy=ProxyView(trusted_proxy_hops=hops, forwarded_for_entries=client.forwarded, counted=counted),
    )


@get(
    "/ready",
    summary="Readiness: the database answers, is not stalled and is migrated (GET /health is liveness only)",
    responses=problem_responses(),
)
async def ready(state: State) -> ReadyResponse:
    await state.readiness.check()  # a DatabaseFault answers 503 (or 507) through the problem handlers
    return ReadyResponse()


ROUTES = [openapi_json, index, limits, ready]
