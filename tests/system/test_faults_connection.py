"""Database faults that are not a full disk: a file that cannot be opened, a stalled or vanished server.

While the database is unreachable every request answers fast — 503 problem details with ``Retry-After``,
never a hang and never a bare 500 — ``GET /ready`` answers 503 while ``GET /health`` stays the OpenEnv
liveness answer, and once the database is back the same process serves again without a restart.

No clock decides a pass: a fault lasts until the answers the test waits for have come (so an answer is
one given while the database is away, not after it came back), and "fast" is shown by bounds set longer
than the safety net (STALLED_AFTER_S) that fails a request never answered — or, where the bound is the
point, by the bound the service was given and a 503 during a stall that only the bound can end.

- SQLite, live server, both journal modes: the database file sits behind a directory that is
  renamed away before the first connect (``MIGRATE_ON_START=false``, so nothing else touches it at
  start), then restored; then renamed away and restored again while the server runs.
- Both backends, in process: a stall — another connection holds SQLite's write lock; PostgreSQL
  (through a loopback TCP proxy) stops answering — is bounded by ``DB_*_TIMEOUT_S``, over HTTP and
  over WebSocket; PostgreSQL also goes away completely (every connection cut, new ones refused) and
  comes back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from litestar.testing import AsyncTestClient, TestClient
from sqlalchemy.engine import make_url

from bench.harness import STALLED_AFTER_S
from service import env as core
from service.app import create_app
from service.db.migrate import upgrade_to_head
from service.settings import Settings
from tests.conftest import LiveServer
from tests.system.test_faults_disk import logged_tracebacks
from tests.waiting import until

EPISODE_TOKEN = "faults-test-episode-token".ljust(40, "x")
WORKFLOW = next(t.id for t in core.TASKS.values() if t.family == "workflow")
NEVER_S = str(2 * STALLED_AFTER_S)  # DB_*_TIMEOUT_S no answer may wait out: one that does hangs the request
BOUND_S = 1  # DB_CONNECT/POOL/STATEMENT_TIMEOUT_S of the in-process tests


def assert_unavailable(resp: httpx.Response, what: str) -> None:
    assert resp.status_code == 503, f"{what}: {resp.status_code} {resp.text[:300]}"
    assert resp.headers["content-type"].startswith("application/problem+json"), what
    assert resp.headers.get("retry-after", "").isdigit(), f"{what}: no Retry-After"
    assert "retry" in resp.json()["detail"].lower(), (
        f"{what}: the detail does not say what to do: {resp.json()['detail']}"
    )


def answered(client: httpx.Client, method: str, path: str, what: str, **kwargs: Any) -> httpx.Response:
    """The answer; a request never answered (the client's STALLED_AFTER_S) fails the test as a hang."""
    try:
        return client.request(method, path, **kwargs)
    except httpx.TimeoutException:
        pytest.fail(f"{what} hung (no answer in {client.timeout.read}s)")


def wait_until(check: Callable[[], bool], what: str) -> float:
    """Seconds until ``check()`` (reported, never asserted); STALLED_AFTER_S is a safety net."""
    started = time.monotonic()
    until(check, what, poll_s=0.1)
    return time.monotonic() - started


# ---- SQLite: a file that cannot be opened --------------------------------------------------------


@pytest.mark.parametrize("journal_mode", ["WAL", "DELETE"])
async def test_a_database_that_cannot_be_opened_fails_fast_and_recovers_without_restart(
    tmp_path: Path, journal_mode: str
) -> None:
    volume = tmp_path / "volume"
    volume.mkdir()
    base = Settings(
        database_url=f"sqlite+aiosqlite:///{volume / 'test.db'}",
        baseline_seeds_per_task=1,
        sqlite_journal_mode=journal_mode,
    )
    db = base.database()
    await upgrade_to_head(db)
    await db.dispose()
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "test.db").symlink_to(volume / "test.db")
    away = tmp_path / "volume.away"
    volume.rename(away)  # the directory holding the file is gone before anything connects

    settings = replace(base, database_url=f"sqlite+aiosqlite:///{tmp_path / 'data' / 'test.db'}")
    # With MIGRATE_ON_START=false and TEST_SPLIT_KEY set, nothing at start needs the database. No wait for
    # the database may end by its bound before the client gives up: an answer is one that did not wait.
    server = LiveServer(
        settings,
        tmp_path / "server.log",
        extra_env={
            "MIGRATE_ON_START": "false",
            "TEST_SPLIT_KEY": "k" * 40,
            "SQLITE_JOURNAL_MODE": journal_mode,
            "DB_CONNECT_TIMEOUT_S": NEVER_S,
            "DB_POOL_TIMEOUT_S": NEVER_S,
            "DB_STATEMENT_TIMEOUT_S": NEVER_S,
        },
    )
    try:
        with httpx.Client(base_url=server.url, timeout=STALLED_AFTER_S) as client:
            health = client.get("/health")
            assert (health.status_code, health.json()) == (200, {"status": "healthy"})
            for method, path, kwargs in (
                ("POST", "/reset", {"json": {"task_id": WORKFLOW, "seed": 1}}),
                ("GET", "/state", {"params": {"episode_id": "nope"}}),
                ("POST", "/step", {"json": {"episode_id": "nope", "action": {"lookup": "policy"}}}),
                ("GET", "/ready", {}),
            ):
                for attempt in range(2):  # and again: the first failure must not leave anything dead or stuck
                    resp = answered(
                        client, method, path, f"{method} {path} (file unreachable, try {attempt + 1})", **kwargs
                    )
                    assert_unavailable(resp, f"{method} {path}")

            away.rename(volume)  # the file is back: the same process serves again
            took = wait_until(
                lambda: client.get("/ready").status_code == 200, "GET /ready answers 200 once the file is back"
            )
            client.headers["X-Episode-Token"] = EPISODE_TOKEN  # a chosen id is acted on with its token
            reset = client.post(
                "/reset", json={"task_id": WORKFLOW, "seed": 1, "episode_id": "back", "episode_token": EPISODE_TOKEN}
            )
            assert reset.status_code == 200, reset.text
            step = client.post("/step", json={"episode_id": "back", "action": {"lookup": "policy"}, "request_id": "s1"})
            assert step.status_code == 200 and step.json()["metadata"]["step_index"] == 1, step.text
            assert client.get("/state", params={"episode_id": "back"}).json()["step_count"] == 1

            # Gone again, this time while both connections are open. SQLite would go on using the open
            # file (in WAL mode it commits into it), but an acknowledged step must be in the file that
            # DATABASE_URL names, and there is none: the writer sees the path no longer names its file
            # before the COMMIT, fails the step (nothing acknowledged), reopens, cannot, and fails fast.
            volume.rename(away)
            resp = answered(
                client,
                "POST",
                "/step",
                "POST /step (directory renamed while serving)",
                json={"episode_id": "back", "action": {"lookup": "order"}, "request_id": "s2"},
            )
            assert_unavailable(resp, "POST /step while the directory is renamed")
            resp = answered(client, "GET", "/ready", "GET /ready (directory renamed while serving)")
            assert_unavailable(resp, "GET /ready while the directory is renamed")
            resp = answered(
                client, "GET", "/state", "GET /state (directory renamed while serving)", params={"episode_id": "back"}
            )
            assert resp.status_code in (200, 503), resp.status_code  # an open file may still be read
            assert client.get("/health").json() == {"status": "healthy"}

            away.rename(volume)
            wait_until(
                lambda: client.get("/ready").status_code == 200, "GET /ready answers 200 once the directory is back"
            )
            retried = client.post(
                "/step", json={"episode_id": "back", "action": {"lookup": "order"}, "request_id": "s2"}
            )
            assert retried.status_code == 200 and retried.json()["metadata"]["step_index"] == 2, retried.text
            assert server.proc.poll() is None
        print(
            f"\nunopenable database [{journal_mode}]: every call answered 503 while broken; "
            f"ready again {took:.1f}s after the file came back"
        )
    finally:
        server.stop()
    log = (tmp_path / "server.log").read_text(errors="replace")
    assert logged_tracebacks(log) <= 2, "tracebacks must be rate-limited"


# ---- a stalled or vanished database: bounded waits ----------------------------------------------


class TcpProxy:
    """A 127.0.0.1 TCP proxy in front of PostgreSQL that can stall (hold every byte) or cut (close every
    connection and refuse new ones). Threads only; stopped by :meth:`close`."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.2)
        self.port = self.listener.getsockname()[1]
        self.flowing = threading.Event()
        self.flowing.set()
        self.refusing = False
        self.closed = False
        self._sockets: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._accepter = threading.Thread(target=self._accept, name="pg-proxy", daemon=True)
        self._accepter.start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            if self.refusing:
                client.close()
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._sockets.update((client, upstream))
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                while not self.flowing.wait(0.2):  # stalled: the bytes are held, the peer hears nothing
                    if self.closed:
                        return
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                self._drop(s)

    def _drop(self, s: socket.socket) -> None:
        with self._lock:
            self._sockets.discard(s)
        with contextlib.suppress(OSError):
            s.shutdown(socket.SHUT_RDWR)
        s.close()

    def stall(self) -> None:
        self.flowing.clear()

    def cut(self) -> None:
        self.refusing = True
        with self._lock:
            sockets = list(self._sockets)
        for s in sockets:
            self._drop(s)

    def restore(self) -> None:
        self.refusing = False
        self.flowing.set()

    def close(self) -> None:
        self.closed = True
        self.restore()
        self.cut()
        self.listener.close()
        self._accepter.join(timeout=5)


def bounded_settings(settings: Settings, database_url: str) -> Settings:
    """The same database with every wait bounded by BOUND_S (DB_*_TIMEOUT_S)."""
    return Settings.from_env(
        {
            "DATABASE_URL": database_url,
            "DATABASE_SCHEMA": settings.database_schema or "",
            "BASELINE_SEEDS_PER_TASK": "1",
            "DB_CONNECT_TIMEOUT_S": str(BOUND_S),
            "DB_POOL_TIMEOUT_S": str(BOUND_S),
            "DB_STATEMENT_TIMEOUT_S": str(BOUND_S),
        }
    )


class WriteLockHolder:
    """Another SQLite connection that holds the write lock (BEGIN IMMEDIATE) until released."""

    def __init__(self, url: str) -> None:
        self.conn: sqlite3.Connection | None = sqlite3.connect(
            make_url(url).database, isolation_level=None, check_same_thread=False
        )
        self.conn.execute("BEGIN IMMEDIATE")

    def release(self) -> None:
        if self.conn is not None:
            self.conn.execute("ROLLBACK")
            self.conn.close()
            self.conn = None


async def _answered(client: AsyncTestClient[Any], method: str, path: str, **kwargs: Any) -> Any:
    """The answer; none (within the safety net) means the wait for the database is not bounded."""
    try:
        return await asyncio.wait_for(client.request(method, path, **kwargs), STALLED_AFTER_S)
    except TimeoutError:
        pytest.fail(f"{method} {path} was never answered: the wait for the database is not bounded")


async def _until_ok(client: AsyncTestClient[Any], what: str, method: str, path: str, **kwargs: Any) -> Any:
    deadline = time.monotonic() + STALLED_AFTER_S  # a safety net: the loop ends when the database answers
    while True:
        resp = await _answered(client, method, path, **kwargs)
        if resp.status_code == 200:
            return resp
        assert time.monotonic() < deadline, f"{what}: still {resp.status_code} {resp.text[:200]}"
        await asyncio.sleep(0.2)


def assert_bounded_by(app: Any) -> None:
    """The service's waits for the database are the ones these tests configure (BOUND_S each)."""
    database = app.state.database
    assert (database.connect_timeout_s, database.statement_timeout_s, database.wait_s) == (
        BOUND_S,
        BOUND_S,
        2 * BOUND_S,
    ), vars(database)


async def test_a_stalled_database_answers_503_within_the_bound_and_recovers(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    """SQLite: another process holds the write lock. PostgreSQL: the server stops answering. The stall
    lasts until the steps are answered, so only the service's bound can have ended their wait."""
    proxy: TcpProxy | None = None
    holder: WriteLockHolder | None = None
    url = settings.database_url
    if not settings.is_sqlite:
        parsed = make_url(url)
        proxy = TcpProxy(parsed.host or "127.0.0.1", parsed.port or 5432)
        url = parsed.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
    bounded = bounded_settings(settings, url)
    try:
        app = create_app(bounded)
        assert_bounded_by(app)
        async with AsyncTestClient(app=app) as client:
            client.headers["X-Episode-Token"] = EPISODE_TOKEN  # a chosen id is acted on with its token
            reset = await client.post(
                "/reset", json={"task_id": WORKFLOW, "seed": 3, "episode_id": "stall", "episode_token": EPISODE_TOKEN}
            )
            assert reset.status_code == 200, reset.text

            if proxy is None:
                holder = WriteLockHolder(url)
            else:
                proxy.stall()
            caplog.clear()
            with caplog.at_level(logging.WARNING):
                answers = []
                for _i in range(3):
                    resp = await _answered(
                        client,
                        "POST",
                        "/step",
                        json={"episode_id": "stall", "action": {"lookup": "policy"}, "request_id": "q1"},
                    )
                    answers.append(resp.status_code)
                    assert resp.status_code == 503, f"step during the stall: {resp.status_code} {resp.text[:300]}"
                    assert resp.headers.get("retry-after", "").isdigit() and resp.json()["detail"], resp.text
                ready = await _answered(client, "GET", "/ready")
                assert ready.status_code == 503, ready.status_code
            health = await client.get("/health")
            assert (health.status_code, health.json()) == (200, {"status": "healthy"})
            failures = [r for r in caplog.records if r.levelno >= logging.WARNING]
            with_traceback = [r for r in failures if r.exc_info]
            assert len(with_traceback) <= 1, (
                f"{len(with_traceback)} tracebacks for {len(answers)} failures: rate-limit them"
            )

            if holder is not None:
                holder.release()
            if proxy is not None:
                proxy.restore()
            step = await _until_ok(
                client,
                "step after the stall",
                "POST",
                "/step",
                json={"episode_id": "stall", "action": {"lookup": "policy"}, "request_id": "q1"},
            )
            assert step.json()["metadata"]["step_index"] == 1
            assert (await _until_ok(client, "ready after the stall", "GET", "/ready")).status_code == 200

            if proxy is not None:  # PostgreSQL goes away completely, then comes back
                proxy.cut()
                resp = await _answered(
                    client,
                    "POST",
                    "/step",
                    json={"episode_id": "stall", "action": {"lookup": "order"}, "request_id": "q2"},
                )
                assert resp.status_code == 503 and resp.headers.get("retry-after"), resp.text
                proxy.restore()
                step = await _until_ok(
                    client,
                    "step after the outage",
                    "POST",
                    "/step",
                    json={"episode_id": "stall", "action": {"lookup": "order"}, "request_id": "q2"},
                )
                assert step.json()["metadata"]["step_index"] == 2
        print(
            f"\nstall [{'sqlite' if proxy is None else 'postgresql'}]: "
            f"steps answered {answers} during the stall, then 200"
        )
    finally:
        if holder is not None:
            holder.release()
        if proxy is not None:
            proxy.close()


def test_a_websocket_step_during_a_stall_gets_one_clear_error_frame(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    """Over WS a database outage is an EXECUTION_ERROR frame that says to retry (status 503), within
    the bound (the stall lasts until the frames are answered), one log line each; the session stays open
    and steps again once the database answers."""
    proxy: TcpProxy | None = None
    url = settings.database_url
    if not settings.is_sqlite:
        parsed = make_url(url)
        proxy = TcpProxy(parsed.host or "127.0.0.1", parsed.port or 5432)
        url = parsed.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
    holder: WriteLockHolder | None = None
    try:
        app = create_app(bounded_settings(settings, url))
        assert_bounded_by(app)
        with TestClient(app) as client, client.websocket_connect("/ws") as ws:
            ws.send_json({"type": "reset", "data": {"task_id": WORKFLOW, "seed": 5}})
            assert ws.receive_json()["type"] == "observation"
            if proxy is None:
                holder = WriteLockHolder(url)
            else:
                proxy.stall()
            caplog.clear()
            with caplog.at_level(logging.WARNING):
                for _ in range(3):
                    ws.send_json({"type": "step", "data": {"lookup": "policy"}})
                    frame = ws.receive_json()
                    assert frame["type"] == "error" and frame["data"]["code"] == "EXECUTION_ERROR", frame
                    assert frame["data"].get("status") == 503 and "retry" in frame["data"]["message"].lower(), frame
            assert len([r for r in caplog.records if r.exc_info]) <= 1, "a traceback per frame"
            if holder is not None:
                holder.release()
            if proxy is not None:
                proxy.restore()
            deadline = time.monotonic() + STALLED_AFTER_S  # a safety net: the loop ends when the database answers
            while True:
                ws.send_json({"type": "step", "data": {"lookup": "policy"}})
                frame = ws.receive_json()
                if frame["type"] == "observation":
                    break
                assert time.monotonic() < deadline, f"the session never stepped again: {frame}"
                time.sleep(0.2)
    finally:
        if holder is not None:
            holder.release()
        if proxy is not None:
            proxy.close()
