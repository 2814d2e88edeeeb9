"""Fixtures for the service tests: one fresh database (SQLite always; PostgreSQL too when
TEST_DATABASE_URL is set — each test in its own schema), one app per test, in-process clients,
and a live uvicorn server on 127.0.0.1 for end-to-end tests."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from service.app import create_app
from service.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
PG_URL = os.environ.get("TEST_DATABASE_URL")
BACKENDS = ["sqlite"] + (["postgresql"] if PG_URL else [])


async def _pg_schema(action: str, schema: str) -> None:
    assert PG_URL is not None
    engine = create_async_engine(PG_URL)
    try:
        async with engine.begin() as conn:
            if action == "create":
                await conn.execute(text(f'CREATE SCHEMA "{schema}"'))
            else:
                await conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
    finally:
        await engine.dispose()


@asynccontextmanager
async def empty_database(backend: str, tmp_path: Path, filename: str = "test.db") -> AsyncIterator[Settings]:
    """Settings pointing at an empty database: a SQLite file, or a fresh PostgreSQL schema (dropped after)."""
    # The in-process test client ("testclient") counts as local, like loopback: tests of the limits
    # themselves set rate_limit_exempt="".
    base = Settings(max_concurrent_envs=256, ws_idle_timeout_s=30.0, baseline_seeds_per_task=1,
                    rate_limit_exempt="127.0.0.1,::1,testclient")
    if backend == "sqlite":
        yield replace(base, database_url=f"sqlite+aiosqlite:///{tmp_path / 'data' / filename}")
        return
    schema = "t_" + uuid.uuid4().hex[:16]
    await _pg_schema("create", schema)
    try:
        yield replace(base, database_url=PG_URL, database_schema=schema)
    finally:
        await _pg_schema("drop", schema)


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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LiveServer:
    """A uvicorn subprocess serving ``create_app`` on 127.0.0.1; stopped by its PID."""

    def __init__(
        self, settings: Settings, log_path: Path, extra_env: dict[str, str] | None = None, command: list[str] | None = None
    ) -> None:
        """``command`` defaults to ``uvicorn --factory service.app:app_factory``; HOST and PORT are
        also in its environment, for ``python -m service.app``."""
        self.settings = settings
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        env = dict(os.environ)
        env.update(
            DATABASE_URL=settings.database_url,
            DATABASE_SCHEMA=settings.database_schema or "",
            MAX_CONCURRENT_ENVS=str(settings.max_concurrent_envs),
            WS_IDLE_TIMEOUT_S=str(settings.ws_idle_timeout_s),
            BASELINE_SEEDS_PER_TASK=str(settings.baseline_seeds_per_task),
            LOG_LEVEL="WARNING",
            HOST="127.0.0.1",
            PORT=str(self.port),
            **(extra_env or {}),
        )
        self._log = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            command or [sys.executable, "-m", "uvicorn", "--factory", "service.app:app_factory",
                        "--host", "127.0.0.1", "--port", str(self.port), "--log-level", "warning"],
            cwd=ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT,
        )
        self._wait_ready()

    def _wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited early:\n{self.log_path.read_text()}")
            try:
                if httpx.get(self.url + "/health", timeout=1.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"server not ready in {timeout}s:\n{self.log_path.read_text()}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()  # this exact PID, started above
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self._log.close()


@pytest.fixture
def live_server(settings: Settings, tmp_path: Path) -> Iterator[LiveServer]:
    server = LiveServer(settings, tmp_path / "server.log")
    try:
        yield server
    finally:
        server.stop()
