"""Composition root: ``create_app(settings)`` wires database, migrations, routes and error handling.

``python -m service.app`` (``make run``) serves on ``HOST:PORT`` with uvicorn. For servers that
import an app object, ``uvicorn --factory service.app:app_factory`` builds one from the environment.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from litestar import Litestar, Request
from litestar.datastructures import State
from litestar.di import Provide
from litestar.openapi import OpenAPIConfig
from litestar.plugins.jinja import JinjaTemplateEngine
from litestar.template.config import TemplateConfig
from litestar.types import ControllerRouterHandler

from service import env as core
from service.db.engine import Database
from service.db.readiness import Readiness
from service.deployment import set_up_database
from service.domain.benchmark.controllers import BenchmarkController
from service.domain.benchmark.services import BaselineCache
from service.domain.episodes.controllers import OpenEnvController
from service.domain.episodes.cookies import ImplicitEpisode
from service.domain.episodes.credentials import refuse_tokens_in_url
from service.domain.episodes.mcp import McpSessions, mcp_http
from service.domain.episodes.services import EpisodeService
from service.domain.episodes.websocket import WsSessions, ws_endpoint
from service.domain.runs.controllers import RunController
from service.domain.runs.pages import RenderedPages
from service.domain.runs.services import RunService
from service.domain.system import controllers as system
from service.housekeeping import retention_loop
from service.lib import access_log, connections
from service.lib.decoding import DecodedRequest, check_request_params
from service.lib.formatting import register_filters
from service.lib.limits import (
    ClientAddresses,
    EpisodeQuota,
    RequestBudgets,
    client_addresses,
    rate_limit_middleware,
    sweep_rate_limit_counters,
)
from service.lib.problems import exception_handlers
from service.lib.security_headers import add_security_headers
from service.lib.swagger import LocalSwaggerUI, swagger_assets
from service.settings import Settings

log = logging.getLogger("service.app")


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


async def check_request(request: Request[Any, Any, Any]) -> None:
    """``before_request`` of every route: a secret in the query string is a 400 before anything else
    (credentials); then path and query text follows the bodies' rule (decoding: no NUL, no lone surrogate)."""
    await refuse_tokens_in_url(request)
    await check_request_params(request)


@dataclass(frozen=True)
class Services:
    """The app's long-lived objects, built once per app from its settings."""

    database: Database
    runs: RunService
    episodes: EpisodeService
    clients: ClientAddresses

    @classmethod
    def build(cls, settings: Settings) -> Services:
        database = settings.database()
        runs = RunService(
            database,
            ttl_s=settings.run_ttl_s,
            quota=settings.test_run_quota,
            quota_period_s=settings.test_run_quota_period_s,
            budget=settings.test_run_budget,
        )
        episodes = EpisodeService(
            database, default_split=settings.default_split, runs=runs, default_tasks=settings.default_tasks
        )
        # one storage cap per client address, for plain episodes and runs' episodes alike
        episodes.quota = runs.episode_quota = EpisodeQuota(
            database, settings.max_active_episodes_per_client, settings.max_episodes_per_client_per_day
        )
        return cls(database, runs, episodes, client_addresses(settings))

    def state(self, settings: Settings) -> State:
        """What handlers find on ``app.state`` (cheaper than a second dependency: see BenchmarkController)."""
        budgets = RequestBudgets(settings)  # HTTP requests and WS frames spend from the same budgets
        return State(
            {
                "episodes": self.episodes,
                "database": self.database,
                "readiness": Readiness(self.database),
                "clients": self.clients,
                "budgets": budgets,
                "ws_sessions": WsSessions(
                    settings.max_concurrent_envs,
                    self.episodes,
                    per_client=settings.ws_max_sessions_per_client,
                    budgets=budgets,
                    reserved=settings.ws_reserved_sessions,
                ),
                "mcp_sessions": McpSessions(
                    self.database, settings.mcp_session_idle_s, settings.mcp_max_sessions_per_client
                ),
                "baseline": BaselineCache(),
                "implicit_episode": ImplicitEpisode(settings.single_session),
                "rendered_pages": RenderedPages(),
            }
        )

    def lifespan(self, settings: Settings) -> Callable[[Litestar], AbstractAsyncContextManager[None]]:
        """Start: the database threads, migrations and the deployment's keys, the background loops.
        Stop: the loops, then the database."""

        @asynccontextmanager
        async def lifespan(app: Litestar) -> AsyncIterator[None]:
            if not await self.database.start():  # connection threads open now, and keep retrying if they cannot
                log.warning(
                    "the database does not answer yet (%s); requests that need it answer 503 and GET /ready "
                    "says so until it does",
                    self.database.describe(),
                )
            self.episodes.dataset = self.runs.dataset = await set_up_database(self.database, settings)
            log.info("serving %s; data lives in %s", core.ENV_NAME, self.database.describe())
            if settings.single_session:
                log.warning(
                    "SINGLE_SESSION=1: an HTTP request with no episode_id and no cookie means the episode of the "
                    "latest /reset that named none; serve one client at a time"
                )
                if not settings.default_tasks:
                    log.warning(
                        "SINGLE_SESSION=1 without DEFAULT_TASKS: a reset that names no task picks any of the %d "
                        "tasks; seed A's client expects refund decisions: set DEFAULT_TASKS=easy,medium,hard",
                        len(core.TASKS),
                    )
            background = [
                asyncio.create_task(self.runs.maintain(settings.run_sweep_interval_s), name="run-sweep"),
                asyncio.create_task(retention_loop(self.database, self.runs, settings), name="retention"),
                asyncio.create_task(sweep_rate_limit_counters(app), name="rate-limit-sweep"),
            ]
            try:
                yield
            finally:
                for task in background:
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
                await self.database.dispose()

        return lifespan


ROUTES: list[ControllerRouterHandler] = [
    OpenEnvController,
    BenchmarkController,
    RunController,
    mcp_http,
    ws_endpoint,
    *system.ROUTES,
]


# GET routes that change something: a HEAD (link checkers, proxies, uptime probes) must not start an episode.
GETS_WITHOUT_HEAD = frozenset({"/reset"})


class ServiceApp(Litestar):
    """The app, with ``HEAD`` answered wherever a ``GET`` is (RFC 9110: the GET's status and headers,
    no body), except on :data:`GETS_WITHOUT_HEAD`. Served as the GET itself, so nothing differs."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "HEAD" and scope["path"] not in GETS_WITHOUT_HEAD:
            scope = {**scope, "method": "GET"}
            send = _without_body(send)
        await super().__call__(scope, receive, send)


def _without_body(send: Any) -> Any:
    async def send_headers_only(message: Any) -> None:
        if message["type"] == "http.response.body":
            message = {**message, "body": b""}
        await send(message)

    return send_headers_only


def create_app(settings: Settings) -> Litestar:
    """Build the service. Nothing global: every call gets its own engine and state."""
    services = Services.build(settings)
    return ServiceApp(
        route_handlers=[*ROUTES, swagger_assets()],
        dependencies={
            "episodes": Provide(lambda: services.episodes, sync_to_thread=False),
            "runs": Provide(lambda: services.runs, sync_to_thread=False),
            "settings": Provide(lambda: settings, sync_to_thread=False),
        },
        state=services.state(settings),
        lifespan=[services.lifespan(settings)],
        template_config=TemplateConfig(
            directory=Path(__file__).parent / "lib" / "templates",
            engine=JinjaTemplateEngine,
            engine_callback=register_filters,  # numbers printed with the API's rounding rule
        ),
        exception_handlers=exception_handlers,
        before_send=[add_security_headers(settings.frame_ancestors)],  # every response, errors included
        middleware=rate_limit_middleware(settings, services.clients),
        request_class=DecodedRequest,  # one JSON decoder for bodies, /mcp and WS frames
        before_request=check_request,
        request_max_body_size=settings.max_body_bytes,
        openapi_config=OpenAPIConfig(
            title=core.ENV_NAME,
            version=settings.app_version,
            description="OpenEnv environment and benchmark service for e-commerce customer-support decisions.",
            path="/docs",
            render_plugins=[LocalSwaggerUI()],
        ),
    )


def app_factory() -> Litestar:
    """``uvicorn --factory service.app:app_factory``: settings from the environment."""
    settings = Settings.from_env()
    app = create_app(settings)
    connections.configure(settings)  # each worker process has its own guard (served with uvicorn_options)
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
        # A request must arrive whole in time, and one address holds a bounded number of connections
        # (service.lib.connections; configure() sets the limits in each process).
        "http": connections.HTTP_PROTOCOL,
        "ws": connections.WS_PROTOCOL,
        "timeout_keep_alive": 5,
        # log lines keep a URL's path only: no query string (secrets, session ids, episode ids), no episode id
        "log_config": access_log.log_config(),
    }


FD_HEADROOM = 256  # open files a worker needs beside its sessions' sockets: database, logs, HTTP keep-alive


def raise_open_file_limit(settings: Settings) -> int:
    """Every WebSocket session holds a socket: raise the soft ``RLIMIT_NOFILE`` to the hard limit (which
    needs no privilege; workers inherit it) and warn when even that is below what ``MAX_CONCURRENT_ENVS``
    needs. Returns the soft limit in force."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = hard if hard != resource.RLIM_INFINITY else 1 << 20
    if soft != resource.RLIM_INFINITY and soft < wanted:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            soft = wanted
        except (ValueError, OSError) as exc:
            log.warning("could not raise the open-file limit from %d to %d: %s", soft, wanted, exc)
    needed = settings.max_concurrent_envs + FD_HEADROOM
    if soft != resource.RLIM_INFINITY and soft < needed:
        log.warning(
            "open-file limit %d (hard %d) is below the %d that MAX_CONCURRENT_ENVS=%d needs: sessions past it are "
            "refused at accept; raise the hard limit (ulimit -Hn, LimitNOFILE=, docker --ulimit nofile=) or lower "
            "MAX_CONCURRENT_ENVS",
            soft,
            hard,
            needed,
            settings.max_concurrent_envs,
        )
    return int(soft)


def serve(app: Any, settings: Settings) -> None:
    """Serve ``app`` with uvicorn as ``settings`` say (uvloop and httptools when installed).

    ``app`` is an ASGI app (one process), or with ``settings.workers > 1`` an app factory (or its
    import string) that each worker calls: the workers are forked by ``service.workers`` after
    everything is imported, so one starts in a fraction of a second even on a busy machine. The
    benchmark serves its peer and ceiling through this same call, so every server it compares runs
    with the same options.
    """
    import uvicorn
    from uvicorn.importer import import_from_string

    connections.configure(settings)
    logging.basicConfig(level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    raise_open_file_limit(settings)
    if settings.workers > 1:
        from service.workers import serve_workers

        factory = import_from_string(app) if isinstance(app, str) else app
        tune_gc()  # after every import: the workers share what it froze, copy-on-write
        options = uvicorn_options(settings)
        bounds = (settings.worker_timeout_s, settings.worker_timeout_s + settings.db_start_timeout_s)
        serve_workers(factory, settings.host, settings.port, settings.workers, *bounds, options)
        return
    tune_gc()
    uvicorn.run(app, host=settings.host, port=settings.port, **uvicorn_options(settings))


def main() -> None:
    settings = Settings.from_env()
    if settings.workers > 1:  # every worker builds its own app (and engine) from the environment
        serve(app_factory, settings)
    else:
        serve(create_app(settings), settings)


if __name__ == "__main__":
    main()
