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

import pytest
from litestar.testing import TestClient

from service import env as core
from service.app import create_app
from service.settings import Settings
from tests.conftest import LiveServer

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
    sock = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0))
    sock.settimeout(10)  # every wait below is bounded: a server that never answers fails the test
    return sock


def _answer(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (or the bound runs out)."""
    data = b""
    try:
        while chunk := sock.recv(4096):
            data += chunk
    except TimeoutError:
        return data + b"<still open>"
    return data


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
            answers = [_answer(sock) for sock in stalled]
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
        for _ in range(100):  # once they are closed, the address may connect again
            with _connect(server.port, "127.0.0.3") as again:
                again.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                if _answer(again).startswith(b"HTTP/1.1 200"):
                    break
            time.sleep(0.05)
        else:
            pytest.fail("the address never got its connections back")


def test_resume_frames_do_not_keep_a_websocket_slot(settings: Settings) -> None:
    app = create_app(Settings(**{**settings.__dict__, "ws_idle_timeout_s": 1.0, "rate_limit_per_s": 0}))
    with TestClient(app) as client, client.websocket_connect("/ws") as ws:
        ws.send_json({"type": "reset", "data": {"task_id": TASK, "seed": 1}})
        episode = ws.receive_json()["data"]["observation"]["episode_id"]
        reaped = None
        for _ in range(60):  # resumes every 0.1 s: before, each one refreshed the idle deadline
            ws.send_json({"type": "reset", "data": {"episode_id": episode, "resume": True}})
            msg = ws.receive_json()
            if msg["type"] == "error":
                reaped = msg
                break
            time.sleep(0.1)
        assert reaped is not None and reaped["data"]["code"] == "SESSION_ERROR", reaped
