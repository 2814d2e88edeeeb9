"""Connections that hold the server without using it (issue 21, finding 12), against a live
``python -m service.app`` on 127.0.0.1, with raw sockets, bounded in count and time.

Before: a connection that never finished its request was never closed (2,000 from one address, none
closed after 70 s; about 1,005 locked everyone out at a 1,024 open-files limit), and a WebSocket kept its
slot for ever by sending resume frames (39 addresses held all 256). Now a request must arrive whole within
CONNECTION_REQUEST_TIMEOUT_S (408, closed), one address holds at most MAX_CONNECTIONS_PER_CLIENT open
connections (the next is answered 503 and closed), and only episode work keeps a WebSocket slot."""

from __future__ import annotations

import socket
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from litestar.testing import TestClient

from bench.harness import STALLED_AFTER_S
from service import env as core
from service.app import create_app
from service.settings import Settings
from tests.conftest import LiveServer
from tests.waiting import until

TASK = next(t.id for t in core.TASKS.values() if t.family == "workflow")
STALLED = 40  # connections that send half a request and stop


@contextmanager
def serving(settings: Settings, tmp_path: Path, **env: str) -> Iterator[LiveServer]:
    server = LiveServer(
        settings,
        tmp_path / "server.log",
        extra_env={"RATE_LIMIT_EXEMPT": "", "RATE_LIMIT_PER_S": "0", **env},
        command=[sys.executable, "-m", "service.app"],
    )
    try:
        yield server
    finally:
        server.stop()


def _connect(port: int, source: str = "127.0.0.1") -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=STALLED_AFTER_S, source_address=(source, 0))


def _answer(sock: socket.socket, deadline: float | None = None) -> bytes:
    """Everything the server sends until it closes the connection; ``<still open>`` if it has not by
    ``deadline`` (monotonic; by default STALLED_AFTER_S from now: a safety net, not a budget — a server
    that never closes fails the test instead of hanging it)."""
    deadline = deadline if deadline is not None else time.monotonic() + STALLED_AFTER_S
    data = b""
    try:
        while True:
            sock.settimeout(max(0.01, deadline - time.monotonic()))
            if not (chunk := sock.recv(4096)):
                return data
            data += chunk
    except TimeoutError:
        return data + b"<still open>"


def test_a_request_that_never_arrives_whole_is_closed(settings: Settings, tmp_path: Path) -> None:
    with serving(settings, tmp_path, CONNECTION_REQUEST_TIMEOUT_S="1", MAX_CONNECTIONS_PER_CLIENT="0") as server:
        with ExitStack() as stack:
            stalled = [stack.enter_context(_connect(server.port)) for _ in range(STALLED)]
            for i, sock in enumerate(stalled):  # half of them stop in the headers, half in the body
                if i % 2:
                    sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ")
                else:
                    sock.sendall(b"POST /reset HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n"
                                 b"content-length: 100\r\n\r\n{")  # fmt: skip
            deadline = time.monotonic() + STALLED_AFTER_S  # one safety net for all of them
            answers = [_answer(sock, deadline) for sock in stalled]
        closed = [a for a in answers if not a.endswith(b"<still open>")]
        assert len(closed) == STALLED, f"{len(closed)} of {STALLED} stalled connections closed"
        assert all(a.startswith(b"HTTP/1.1 408") for a in closed), answers[0]
        with _connect(server.port) as sock:  # a whole request on a fresh connection is served as ever
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            assert _answer(sock).startswith(b"HTTP/1.1 200")


def test_one_address_holds_a_bounded_number_of_connections(settings: Settings, tmp_path: Path) -> None:
    with serving(settings, tmp_path, CONNECTION_REQUEST_TIMEOUT_S="30", MAX_CONNECTIONS_PER_CLIENT="5") as server:
        with ExitStack() as stack:
            held = [stack.enter_context(_connect(server.port, "127.0.0.3")) for _ in range(5)]
            for sock in held:
                sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")  # open, never finished
            with _connect(server.port, "127.0.0.3") as one_more:
                answer = _answer(one_more)
                assert answer.startswith(b"HTTP/1.1 503") and b"MAX_CONNECTIONS_PER_CLIENT" in answer, answer
            with _connect(server.port, "127.0.0.4") as another:  # another address is served meanwhile
                another.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                assert _answer(another).startswith(b"HTTP/1.1 200")

        def served_again() -> bool:  # once they are closed, the address may connect again
            with _connect(server.port, "127.0.0.3") as again:
                again.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                return _answer(again).startswith(b"HTTP/1.1 200")

        until(served_again, "the address got its connections back", poll_s=0.05)


def test_resume_frames_do_not_keep_a_websocket_slot(settings: Settings) -> None:
    app = create_app(Settings(**{**settings.__dict__, "ws_idle_timeout_s": 1.0, "rate_limit_per_s": 0}))
    with TestClient(app) as client, client.websocket_connect("/ws") as ws:
        ws.send_json({"type": "reset", "data": {"task_id": TASK, "seed": 1}})
        episode = ws.receive_json()["data"]["observation"]["episode_id"]
        deadline = time.monotonic() + STALLED_AFTER_S  # a safety net: only the idle reaper ends this loop
        while True:  # resumes every 0.1 s: before, each one refreshed the idle deadline, and it never came
            ws.send_json({"type": "reset", "data": {"episode_id": episode, "resume": True}})
            reaped = ws.receive_json()
            if reaped["type"] == "error":
                break
            assert time.monotonic() < deadline, "resume frames kept an idle session alive"
            time.sleep(0.1)
        assert reaped["data"]["code"] == "SESSION_ERROR", reaped
