"""Fixtures for the service tests: one fresh database (SQLite always; PostgreSQL too when
TEST_DATABASE_URL is set — each test in its own schema), one app per test, in-process clients,
and a live uvicorn server on 127.0.0.1 for end-to-end tests."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path

import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from bench.harness import ServerProcess, free_port, pg_schema
from service.app import create_app
from service.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
PG_URL = os.environ.get("TEST_DATABASE_URL")
BACKENDS = ["sqlite"] + (["postgresql"] if PG_URL else [])


@asynccontextmanager
async def empty_database(backend: str, tmp_path: Path, filename: str = "test.db") -> AsyncIterator[Settings]:
    """Settings pointing at an empty database: a SQLite file, or a fresh PostgreSQL schema (dropped after)."""
    # The in-process test client ("testclient") counts as local, like loopback: tests of the limits
    # themselves set rate_limit_exempt="".
    base = Settings(
        max_concurrent_envs=256,
        ws_idle_timeout_s=30.0,
        baseline_seeds_per_task=1,
        rate_limit_exempt="127.0.0.1,::1,testclient",
    )
    if backend == "sqlite":
        yield replace(base, database_url=f"sqlite+aiosqlite:///{tmp_path / 'data' / filename}")
        return
    schema = "t_" + uuid.uuid4().hex[:16]
    await pg_schema(PG_URL, "create", schema)
    try:
        yield replace(base, database_url=PG_URL, database_schema=schema)
    finally:
        await pg_schema(PG_URL, "drop", schema)


@pytest.fixture(params=BACKENDS)
async def settings(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Settings]:
    """Settings pointing at an empty database of the parametrized backend."""
    async with empty_database(request.param, tmp_path) as s:
        yield s


@pytest.fixture
def app(settings: Settings) -> Litestar:
    return create_app(settings)


@pytest.fixture
async def client(app: Litestar) -> AsyncIterator[AsyncTestClient[Litestar]]:
    async with AsyncTestClient(app=app) as c:
        yield c


class LiveServer(ServerProcess):
    """The service of ``settings`` on 127.0.0.1 in a subprocess, healthy when constructed; stopped by its
    process group. ``command`` defaults to ``uvicorn --factory service.app:app_factory``; HOST and PORT
    are also in its environment, for ``python -m service.app``."""

    def __init__(
        self,
        settings: Settings,
        log_path: Path,
        extra_env: dict[str, str] | None = None,
        command: list[str] | None = None,
    ) -> None:
        self.settings = settings
        port = free_port()
        env = dict(os.environ)
        env.update(
            DATABASE_URL=settings.database_url,
            DATABASE_SCHEMA=settings.database_schema or "",
            MAX_CONCURRENT_ENVS=str(settings.max_concurrent_envs),
            WS_IDLE_TIMEOUT_S=str(settings.ws_idle_timeout_s),
            BASELINE_SEEDS_PER_TASK=str(settings.baseline_seeds_per_task),
            LOG_LEVEL="WARNING",
            HOST="127.0.0.1",
            PORT=str(port),
        )
        env.update(extra_env or {})  # may override the defaults above (LOG_LEVEL, ...)
        command = command or [
            sys.executable,
            "-m",
            "uvicorn",
            "--factory",
            "service.app:app_factory",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ]
        log_path.parent.mkdir(parents=True, exist_ok=True)
        super().__init__(log_path.stem, command, port, env, log_path.parent)
        try:
            self.wait_healthy()
        except BaseException:
            self.stop()
            raise


@pytest.fixture
def live_server(settings: Settings, tmp_path: Path) -> Iterator[LiveServer]:
    server = LiveServer(settings, tmp_path / "server.log")
    try:
        yield server
    finally:
        server.stop()
