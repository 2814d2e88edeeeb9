"""Fixtures for the service tests: one database per test (SQLite always; PostgreSQL too when
TEST_DATABASE_URL is set — each test in its own schema), one app per test, in-process clients,
and a live uvicorn server on 127.0.0.1 for end-to-end tests.

A test's database is migrated and holds its test-split key, as the service's first start leaves
it: the first start is run once per test process (on a template SQLite file, and on a template
PostgreSQL schema whose statements are recorded) and each test gets a copy — a file copy, or the
recorded statements replayed in its own schema. Tests of the first start itself (migrations, an
unmigrated database) ask for ``empty_settings``."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient
from litestar.testing.websocket_test_session import WebSocketTestSession
from sqlalchemy import event
from sqlalchemy.engine import Engine

from bench.harness import ServerProcess, free_port, pg_schema
from service.app import create_app
from service.deployment import set_up_database
from service.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
PG_URL = os.environ.get("TEST_DATABASE_URL")
BACKENDS = ["sqlite"] + (["postgresql"] if PG_URL else [])
T = TypeVar("T")


# `make test` runs the suite in pytest-xdist workers that take whole modules (--dist loadscope: a module's
# fixtures are built once), in collection order: the modules that start servers, clients and tools go
# first, so that the many short modules even out the end instead of one long one running alone.
FIRST = ("tests/system/", "tests/client/")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: 0 if item.nodeid.startswith(FIRST) else 1)  # stable: the order within kept


async def _ws_session_asgi_call(self: WebSocketTestSession) -> None:
    """Litestar's ``WebSocketTestSession.do_asgi_call`` (2.25), except that the app's ``receive`` waits for
    the test's next frame in 1 ms sleeps: litestar's ``sleep(0)`` loop kept a core busy for as long as a
    test let a session idle (the idle-reaping tests: seconds each, beside the other xdist worker)."""

    async def receive() -> Any:
        while self.receive_queue.empty():
            await anyio.sleep(0.001)
        return self.receive_queue.get()

    async def send(message: Any) -> None:
        if message["type"] == "websocket.accept":
            headers = message.get("headers", [])
            if headers:
                self.scope["headers"] = [*self.scope["headers"], *headers]
            subprotocols = message.get("subprotocols")
            if subprotocols:
                self.scope["subprotocols"].append(subprotocols)
        self.send_queue.put(message)

    try:
        await self.client.app(self.scope, receive, send)
    except BaseException as exc:
        self.send_queue.put(exc)
        raise


WebSocketTestSession.do_asgi_call = _ws_session_asgi_call  # type: ignore[method-assign]


def base_settings() -> Settings:
    # The in-process test client ("testclient") counts as local, like loopback: tests of the limits
    # themselves set rate_limit_exempt="".
    return Settings(
        max_concurrent_envs=256,
        ws_idle_timeout_s=30.0,
        baseline_seeds_per_task=1,
        rate_limit_exempt="127.0.0.1,::1,testclient",
    )


@asynccontextmanager
async def empty_database(backend: str, tmp_path: Path, filename: str = "test.db") -> AsyncIterator[Settings]:
    """Settings pointing at an empty database: a SQLite file, or a fresh PostgreSQL schema (dropped after)."""
    base = base_settings()
    if backend == "sqlite":
        yield replace(base, database_url=f"sqlite+aiosqlite:///{tmp_path / 'data' / filename}")
        return
    schema = "t_" + uuid.uuid4().hex[:16]
    await pg_schema(PG_URL, "create", schema)
    try:
        yield replace(base, database_url=PG_URL, database_schema=schema)
    finally:
        await pg_schema(PG_URL, "drop", schema)


def in_a_thread(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run the coroutine ``make()`` to its end on an event loop of its own, in a thread of its own:
    a session fixture may be set up from inside a test's running loop."""
    result: list[T] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            result.append(asyncio.run(make()))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread below
            failure.append(exc)

    thread = threading.Thread(target=run, name="fixture-loop")
    thread.start()
    thread.join()
    if failure:
        raise failure[0]
    return result[0]


async def _first_start(settings: Settings, record: list[tuple[str, Any]] | None = None) -> None:
    """What the service's start does to a new database (:func:`set_up_database`: migrations, the
    test split's key); with ``record``, every statement that changes something is appended to it."""
    here = threading.get_ident()  # PostgreSQL's statements run on this thread's loop, whatever engine sends them

    def _record(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        if threading.get_ident() == here and statement.lstrip().split(None, 1)[0].upper() not in ("SELECT", "SHOW"):
            assert record is not None  # reads change nothing: they are left out
            record.append((statement, parameters))

    database = settings.database()
    if record is not None:  # on every engine: migrations open one of their own
        event.listen(Engine, "before_cursor_execute", _record)
    try:
        await database.start()
        await set_up_database(database, settings)
    finally:
        if record is not None:
            event.remove(Engine, "before_cursor_execute", _record)
        await database.dispose()


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file as the service's first start leaves it (migrated, its test key stored), made
    once per test process; tests get a copy of it."""
    path = tmp_path_factory.mktemp("template") / "template.db"
    in_a_thread(lambda: _first_start(replace(base_settings(), database_url=f"sqlite+aiosqlite:///{path}")))
    # the last connection closed: the WAL was checkpointed into the file, which alone is the database
    assert not path.with_name(path.name + "-wal").exists(), "the template's WAL was not checkpointed"
    return path


@pytest.fixture(scope="session")
def postgresql_template() -> Iterator[list[tuple[str, Any]]]:
    """The statements the service's first start runs on an empty PostgreSQL schema, recorded once
    per test process (on a template schema) and replayed in each test's own schema."""
    assert PG_URL is not None
    schema = "tmpl_" + uuid.uuid4().hex[:16]
    statements: list[tuple[str, Any]] = []
    url = PG_URL
    in_a_thread(lambda: pg_schema(url, "create", schema))
    try:
        template = replace(base_settings(), database_url=url, database_schema=schema)
        in_a_thread(lambda: _first_start(template, statements))
        in_a_thread(lambda: _check_replay(template, statements))
        yield statements
    finally:
        in_a_thread(lambda: pg_schema(url, "drop", schema))


async def _catalog(url: str, schema: str) -> dict[str, Any]:
    """What a PostgreSQL schema holds, named without the schema: its tables' columns, constraints,
    indexes, triggers, sequences and rows."""
    import asyncpg

    conn = await asyncpg.connect(url.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        queries = {
            "columns": "SELECT table_name, column_name, data_type, is_nullable, column_default "
            "FROM information_schema.columns WHERE table_schema = $1",
            "constraints": "SELECT c.conrelid::regclass::text, c.conname, pg_get_constraintdef(c.oid) "
            "FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace WHERE n.nspname = $1",
            "indexes": "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = $1",
            "triggers": "SELECT event_object_table, trigger_name, action_statement "
            "FROM information_schema.triggers WHERE trigger_schema = $1",
            "sequences": "SELECT sequence_name FROM information_schema.sequences WHERE sequence_schema = $1",
        }
        found = {
            what: sorted(tuple(str(v).replace(schema + ".", "") for v in row) for row in await conn.fetch(q, schema))
            for what, q in queries.items()
        }
        tables = [
            r["table_name"]
            for r in await conn.fetch(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = $1", schema
            )
        ]
        found["rows"] = {
            t: sorted(map(repr, map(tuple, await conn.fetch(f'SELECT * FROM "{schema}"."{t}"')))) for t in tables
        }
        return found
    finally:
        await conn.close()


async def _check_replay(template: Settings, statements: list[tuple[str, Any]]) -> None:
    """The recorded statements, replayed in a new schema, build what the first start built."""
    assert PG_URL is not None and template.database_schema is not None
    copy = "check_" + uuid.uuid4().hex[:16]
    await pg_schema(PG_URL, "create", copy)
    try:
        await _replay(replace(template, database_schema=copy), statements)
        assert await _catalog(PG_URL, copy) == await _catalog(PG_URL, template.database_schema), (
            "replaying the first start's statements did not rebuild its schema"
        )
    finally:
        await pg_schema(PG_URL, "drop", copy)


async def _replay(settings: Settings, statements: list[tuple[str, Any]]) -> None:
    database = settings.database()
    try:
        async with database.unbounded_connection() as conn, conn.begin():
            for statement, parameters in statements:
                await conn.exec_driver_sql(statement, parameters)
    finally:
        await database.dispose()


@asynccontextmanager
async def migrated_database(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest, filename: str = "test.db"
) -> AsyncIterator[Settings]:
    """Settings pointing at a database as the service's first start leaves it: migrated to head,
    holding a test-split key (the same in every test of a process), no episodes."""
    template = request.getfixturevalue(f"{backend}_template")
    async with empty_database(backend, tmp_path, filename) as settings:
        if backend == "sqlite":
            path = tmp_path / "data" / filename
            path.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(template, path)
        else:
            await _replay(settings, template)
        yield settings


@pytest.fixture(params=BACKENDS)
async def settings(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Settings]:
    """Settings pointing at a new database of the parametrized backend, migrated (see the module)."""
    async with migrated_database(request.param, tmp_path, request) as s:
        yield s


@pytest.fixture(params=BACKENDS)
async def empty_settings(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Settings]:
    """Settings pointing at an empty database of the parametrized backend: nothing has started on it."""
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
        env.update(extra_env or {})  # a test's own settings win (LOG_LEVEL too)
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
