"""Composition root: ``create_app(settings)`` wires database, migrations, routes and error handling.

``python -m service.app`` (``make run``) serves on ``HOST:PORT`` with uvicorn. For servers that
import an app object, ``uvicorn --factory service.app:app_factory`` builds one from the environment.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from alembic.runtime.migration import MigrationContext
from litestar import Litestar, MediaType, Request, get, post
from litestar.datastructures import State
from litestar.di import NamedDependency, Provide
from litestar.openapi import OpenAPIConfig
from litestar.plugins.jinja import JinjaTemplateEngine
from litestar.template.config import TemplateConfig
from pydantic import BaseModel

from service.domain.episodes.credentials import refuse_tokens_in_url
from service.lib.decoding import (
    BodyNotJson,
    DecodedRequest,
    UnstorableText,
    check_request_params,
    close_openapi_bodies,
    decode_json,
)
from service.deployment import load_dataset, preload_submitters
from service.domain.episodes.services import EpisodeService
from service.domain.benchmark.services import BaselineCache
from service.domain.benchmark.controllers import BenchmarkController
from service.domain.episodes.controllers import OpenEnvController
from service.domain.episodes.cookies import ImplicitEpisode
from service.lib.limits import (
    EpisodeQuota,
    client_addresses,
    rate_limit_middleware,
    sweep_rate_limit_counters,
)
from service.domain.episodes.mcp import McpSessions, handle_jsonrpc
from service.lib.problems import exception_handlers, problem_responses
from service.domain.runs.pages import RenderedPages
from service.domain.runs.controllers import RunController
from service.lib.security_headers import SECURITY_HEADERS
from service.lib.swagger import LocalSwaggerUI, swagger_assets
from service.domain.runs.services import RunService
from service.domain.episodes.websocket import WsSessions, ws_endpoint
from service import env as core
from service.db.engine import Database
from service.db.errors import DatabaseNotMigrated, fault_from
from service.db.migrate import head_revision, upgrade_to_head
from service.db.readiness import Readiness
from service.housekeeping import retention_loop
from service.settings import Settings

log = logging.getLogger("service.app")


@get("/openapi.json", include_in_schema=False, media_type=MediaType.JSON)
async def openapi_json(request: Request[Any, Any, Any]) -> dict[str, Any]:
    return close_openapi_bodies(request.app.openapi_schema.to_schema())  # reset/step bodies are closed


@get("/", include_in_schema=False)
async def index() -> dict[str, Any]:
    return {
        "name": "ecomm-support-env",
        "docs": "/docs",
        "openapi": "/openapi.json",
        "start": "POST /reset, then POST /step with the episode_id it returns; or connect to WS /ws",
    }


class LimitsResponse(BaseModel):
    client_address: str  # the address this request counts against (TRUSTED_PROXY_HOPS, docs/security.md)
    exempt: bool
    limits: dict[str, int]


@get("/limits", summary="The client address the limits count this request against, and the limits (docs/security.md)")
async def limits(request: Request[Any, Any, Any], settings: NamedDependency[Settings]) -> LimitsResponse:
    client = request.app.state.clients.of(request)
    return LimitsResponse(client_address=client.address, exempt=client.exempt, limits={
        "rate_limit_per_s": settings.rate_limit_per_s,
        "rate_limit_run_token_per_s": settings.rate_limit_run_token_per_s,
        "rate_limit_heavy_reads_per_min": settings.rate_limit_heavy_reads_per_min,
        "rate_limit_trajectories_per_min": settings.rate_limit_trajectories_per_min,
        "rate_limit_runs_per_min": settings.rate_limit_runs_per_min,
        "ws_max_sessions_per_client": settings.ws_max_sessions_per_client,
        "mcp_max_sessions_per_client": settings.mcp_max_sessions_per_client,
        "max_active_episodes_per_client": settings.max_active_episodes_per_client,
        "max_episodes_per_client_per_day": settings.max_episodes_per_client_per_day,
        "max_body_bytes": settings.max_body_bytes,
    })


class ReadyResponse(BaseModel):
    status: str = "ready"


@get("/ready", summary="Readiness: the database answers, is not stalled and is migrated (GET /health is liveness only)",
     responses=problem_responses())
async def ready(state: State) -> ReadyResponse:
    await state.readiness.check()  # a DatabaseFault answers 503 (or 507) through the problem handlers
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
    return await handle_jsonrpc(payload, episodes, sessions=request.app.state.mcp_sessions,
                                client=request.app.state.clients.of(request))


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


class StartupFailed(Exception):
    """The database did not answer within DB_START_TIMEOUT_S while the service was setting it up."""


async def set_up_database(database: Database, settings: Settings) -> core.Dataset:
    """What start needs from the database — migrations (MIGRATE_ON_START), the test split's key when
    TEST_SPLIT_KEY is unset, preloaded submitter keys — retried while the database is unavailable, one
    log line per attempt, for at most ``db_start_timeout_s``; then :class:`StartupFailed` with one line
    that says what to check (no driver traceback)."""
    deadline = time.monotonic() + settings.db_start_timeout_s
    delay, attempt = 0.25, 0
    while True:
        attempt += 1
        try:
            if settings.migrate_on_start:
                await upgrade_to_head(database)
            else:
                await _warn_unless_migrated(database)
            dataset = await load_dataset(database, settings)
            await preload_submitters(database, settings)
            return dataset
        except Exception as exc:  # noqa: BLE001 - database faults are retried; anything else is re-raised
            fault = fault_from(exc)
            if fault is None:
                raise
            left = deadline - time.monotonic()
            if left <= 0:
                what = "not migrated" if isinstance(fault, DatabaseNotMigrated) else "unavailable"
                message = (f"the database ({database.describe()}) was still {what} after {attempt} attempts in "
                           f"DB_START_TIMEOUT_S={settings.db_start_timeout_s:g} s: {fault.reason} — check DATABASE_URL and "
                           "that the database is up" + (" and migrated (alembic upgrade head)" if what == "not migrated" else ""))
                log.error("start failed: %s", message)
                raise StartupFailed(message) from None
            log.warning("database %s at start (attempt %d: %s); retrying in %.1f s, for up to %.0f s more (DB_START_TIMEOUT_S)",
                        "not migrated" if isinstance(fault, DatabaseNotMigrated) else "unavailable", attempt, fault.reason,
                        min(delay, left), left)
            await asyncio.sleep(min(delay, left))
            delay = min(delay * 2, 5.0)


async def _warn_unless_migrated(database: Database) -> None:
    """MIGRATE_ON_START=false: say so at start if the database is behind this version (requests answer 503)."""
    try:
        current = await database.read(lambda conn: MigrationContext.configure(conn).get_current_revision())
    except Exception as exc:  # noqa: BLE001 - only a warning; unreachable is reported by GET /ready
        log.warning("MIGRATE_ON_START=false: cannot read the database's revision (%s)", fault_from(exc) or type(exc).__name__)
        return
    if current != head_revision():
        log.warning("MIGRATE_ON_START=false and the database is at revision %s, not %s: requests that need the missing "
                    "tables answer 503 until the operator runs `alembic upgrade head`", current, head_revision())


async def check_request(request: Request[Any, Any, Any]) -> None:
    """``before_request`` of every route: a secret in the query string is a 400 before anything else
    (credentials); then path and query text follows the bodies' rule (decoding: no NUL, no lone surrogate)."""
    await refuse_tokens_in_url(request)
    await check_request_params(request)


def create_app(settings: Settings) -> Litestar:
    """Build the service. Nothing global: every call gets its own engine and state."""
    database = settings.database()
    runs = RunService(database, ttl_s=settings.run_ttl_s, quota=settings.test_run_quota,
                      quota_period_s=settings.test_run_quota_period_s)
    episodes = EpisodeService(database, default_split=settings.default_split, runs=runs, default_tasks=settings.default_tasks)
    clients = client_addresses(settings)
    episodes.quota = EpisodeQuota(database, settings.max_active_episodes_per_client, settings.max_episodes_per_client_per_day)

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        if not await database.start():  # connection threads open now, and keep retrying if they cannot
            log.warning("the database does not answer yet (%s); requests that need it answer 503 and GET /ready "
                        "says so until it does", database.describe())
        episodes.dataset = runs.dataset = await set_up_database(database, settings)
        log.info("serving ecomm-support-env; data lives in %s", database.describe())
        if settings.single_session:
            log.warning("SINGLE_SESSION=1: an HTTP request with no episode_id and no cookie means the episode of the "
                        "latest /reset that named none; serve one client at a time")
        background = [
            asyncio.create_task(runs.maintain(settings.run_sweep_interval_s), name="run-sweep"),
            asyncio.create_task(retention_loop(database, runs, settings), name="retention"),
            asyncio.create_task(sweep_rate_limit_counters(app), name="rate-limit-sweep"),
        ]
        try:
            yield
        finally:
            for task in background:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            await database.dispose()

    return Litestar(
        route_handlers=[OpenEnvController, BenchmarkController, RunController, mcp_http, ws_endpoint, ready, limits, openapi_json, index,
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
                "readiness": Readiness(database),
                "clients": clients,
                "ws_sessions": WsSessions(settings.max_concurrent_envs, episodes, per_client=settings.ws_max_sessions_per_client,
                                          frames_per_s=settings.rate_limit_per_s, reserved=settings.ws_reserved_sessions),
                "mcp_sessions": McpSessions(database, settings.mcp_session_idle_s, settings.mcp_max_sessions_per_client),
                "baseline": BaselineCache(),
                "implicit_episode": ImplicitEpisode(settings.single_session),
                "rendered_pages": RenderedPages(),
            }
        ),
        lifespan=[lifespan],
        template_config=TemplateConfig(directory=Path(__file__).parent / "lib" / "templates", engine=JinjaTemplateEngine),
        exception_handlers=exception_handlers,
        response_headers=SECURITY_HEADERS,
        middleware=rate_limit_middleware(settings, clients),
        request_class=DecodedRequest,  # one JSON decoder for bodies, /mcp and WS frames
        before_request=check_request,
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
        # The app works out the client address itself (TRUSTED_PROXY_HOPS, service.lib.limits): uvicorn's own
        # rewrite of it from X-Forwarded-For would trust entries the client wrote.
        "proxy_headers": False,
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
