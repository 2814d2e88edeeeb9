"""Composition root: ``create_app(settings)`` wires database, migrations, routes and error handling.

``python -m service.app`` (``make run``) serves on ``HOST:PORT`` with uvicorn. For servers that
import an app object, ``uvicorn --factory service.app:app_factory`` builds one from the environment.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from litestar import Litestar, MediaType, Request, get, post
from litestar.datastructures import State
from litestar.di import NamedDependency, Provide
from litestar.openapi import OpenAPIConfig
from litestar.plugins.jinja import JinjaTemplateEngine
from litestar.template.config import TemplateConfig
from pydantic import BaseModel

from service.api.decoding import BodyNotJson, DecodedRequest, UnstorableText, check_request_params, decode_json
from service.api.deployment import load_dataset, preload_submitters
from service.api.episodes import EpisodeService
from service.api.http import BaselineCache, BenchmarkController, OpenEnvController
from service.api.limits import rate_limit_middleware, sweep_rate_limit_counters
from service.api.mcp import McpSessions, handle_jsonrpc
from service.api.problems import exception_handlers, problem_responses
from service.api.run_routes import RunController
from service.api.security_headers import SECURITY_HEADERS
from service.api.swagger import LocalSwaggerUI, swagger_assets
from service.api.runs import RunService
from service.api.ws import WsSessions, ws_endpoint
from service.db.migrate import upgrade_to_head
from service.settings import Settings

log = logging.getLogger("service.app")


@get("/openapi.json", include_in_schema=False, media_type=MediaType.JSON)
async def openapi_json(request: Request[Any, Any, Any]) -> dict[str, Any]:
    return request.app.openapi_schema.to_schema()


@get("/", include_in_schema=False)
async def index() -> dict[str, Any]:
    return {
        "name": "ecomm-support-env",
        "docs": "/docs",
        "openapi": "/openapi.json",
        "start": "POST /reset, then POST /step with the episode_id it returns; or connect to WS /ws",
    }


class ReadyResponse(BaseModel):
    status: str = "ready"


@get("/ready", summary="Readiness: the database answers (GET /health is liveness only)", responses=problem_responses())
async def ready(state: State) -> ReadyResponse:
    await state.database.ping()  # a DatabaseFault answers 503 (or 507) through the problem handlers
    return ReadyResponse()


@post("/mcp", status_code=200, summary="MCP JSON-RPC 2.0: initialize, tools/list, tools/call")
async def mcp_http(request: Request[Any, Any, Any], episodes: NamedDependency[EpisodeService]) -> dict[str, Any]:
    body = await request.body()
    try:
        payload = decode_json(body) if body.strip() else None
    except (BodyNotJson, RecursionError):
        return {"jsonrpc": "2.0", "error": {"code": -32700, "message": "Parse error: the body is not JSON"}, "id": None}
    except UnstorableText:
        payload = json.loads(body)  # valid JSON with unstorable text: answered below with the request's id
    return await handle_jsonrpc(payload, episodes, sessions=request.app.state.mcp_sessions)


GC_THRESHOLDS = (50_000, 20, 100)


def tune_gc() -> None:
    """Keep the cyclic garbage collector off the latency tail.

    With the default thresholds, collections of the older generations walked every long-lived
    object (routes, schemas, cached tickets and episodes) while requests waited: under 64
    closed-loop agents the p99 step latency was 3-4x the p95 (about 1.1x with this tuning).
    Everything alive at start-up is frozen (never scanned again) and young objects are collected
    less often. The step path creates few reference cycles (freed by reference counting), so
    memory stays flat (``bench.load`` reports the server's resident memory per round).
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def create_app(settings: Settings) -> Litestar:
    """Build the service. Nothing global: every call gets its own engine and state."""
    database = settings.database()
    runs = RunService(database, ttl_s=settings.run_ttl_s, quota=settings.test_run_quota,
                      quota_period_s=settings.test_run_quota_period_s)
    episodes = EpisodeService(database, default_split=settings.default_split, runs=runs)

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        if not await database.start():  # connection threads open now, and keep retrying if they cannot
            log.warning("the database does not answer yet (%s); requests that need it answer 503 and GET /ready "
                        "says so until it does", database.describe())
        if settings.migrate_on_start:
            await upgrade_to_head(database)
        episodes.dataset = runs.dataset = await load_dataset(database, settings)
        await preload_submitters(database, settings)
        log.info("serving ecomm-support-env; data lives in %s", database.describe())
        sweeper = asyncio.create_task(sweep_rate_limit_counters(app))
        try:
            yield
        finally:
            sweeper.cancel()
            await database.dispose()

    return Litestar(
        route_handlers=[OpenEnvController, BenchmarkController, RunController, mcp_http, ws_endpoint, ready, openapi_json, index,
                        swagger_assets()],
        dependencies={
            "episodes": Provide(lambda: episodes, sync_to_thread=False),
            "runs": Provide(lambda: runs, sync_to_thread=False),
            "settings": Provide(lambda: settings, sync_to_thread=False),
        },
        state=State(
            {
                "episodes": episodes,
                "database": database,
                "ws_sessions": WsSessions(settings.max_concurrent_envs, episodes, per_client=settings.ws_max_sessions_per_client,
                                          exempt=settings.exempt_addresses, frames_per_s=settings.rate_limit_per_s),
                "mcp_sessions": McpSessions(),
                "baseline": BaselineCache(),
            }
        ),
        lifespan=[lifespan],
        template_config=TemplateConfig(directory=Path(__file__).parent / "api" / "templates", engine=JinjaTemplateEngine),
        exception_handlers=exception_handlers,
        response_headers=SECURITY_HEADERS,
        middleware=rate_limit_middleware(settings),
        request_class=DecodedRequest,  # one JSON decoder for bodies, /mcp and WS frames
        before_request=check_request_params,
        request_max_body_size=settings.max_body_bytes,
        openapi_config=OpenAPIConfig(
            title="ecomm-support-env",
            version=settings.app_version,
            description="OpenEnv environment and benchmark service for e-commerce customer-support decisions.",
            path="/docs",
            render_plugins=[LocalSwaggerUI()],
        ),
    )


def app_factory() -> Litestar:
    """``uvicorn --factory service.app:app_factory``: settings from the environment."""
    app = create_app(Settings.from_env())
    tune_gc()
    return app


def __getattr__(name: str) -> Any:
    # `service.app:app` (openenv.yaml, plain `uvicorn service.app:app`) builds an app on access,
    # never at import time.
    if name == "app":
        return app_factory()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def uvicorn_options(settings: Settings) -> dict[str, Any]:
    """uvicorn options every entry point passes (``serve`` and the container's ``server``)."""
    return {
        "log_level": settings.log_level.lower(),
        "access_log": settings.access_log,
        "ws_per_message_deflate": settings.ws_per_message_deflate,
        # A frame over the body limit is refused (close 1009) by the protocol layer before it is read
        # whole; small headroom so the app's own check still answers a frame just over the limit.
        "ws_max_size": settings.max_body_bytes + 1024,
        **({"forwarded_allow_ips": settings.forwarded_allow_ips} if settings.forwarded_allow_ips else {}),
    }


def serve(app: Any, settings: Settings) -> None:
    """Serve ``app`` with uvicorn as ``settings`` say (uvloop and httptools when installed).

    ``app`` is an ASGI app (one process), or with ``settings.workers > 1`` the import string of
    an app factory that each worker calls. The benchmark serves its peer and ceiling through
    this same call, so every server it compares runs with the same options.
    """
    import uvicorn

    tune_gc()
    logging.basicConfig(level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    uvicorn.run(
        app,
        host=settings.host,
        port=settings.port,
        **uvicorn_options(settings),
        **({"workers": settings.workers, "factory": True} if settings.workers > 1 else {}),
    )


def main() -> None:
    settings = Settings.from_env()
    if settings.workers > 1:  # every worker builds its own app (and engine) from the environment
        serve("service.app:app_factory", settings)
    else:
        serve(create_app(settings), settings)


if __name__ == "__main__":
    main()
