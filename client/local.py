"""A local service for the client when nothing answers: this repository's service on 127.0.0.1
with a temporary SQLite database, started as its own process and stopped (by its PID) on exit."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from client.wire import service_answers

ROOT = Path(__file__).resolve().parents[1]
START_TIMEOUT_S = 60.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def local_service(extra_env: dict[str, str] | None = None) -> Iterator[str]:
    """The service's URL while it runs; its log goes to a file, never to stdout. ``extra_env`` adds
    settings (e.g. SUBMITTER_KEYS)."""
    with tempfile.TemporaryDirectory(prefix="ecomm-local-") as tmp:
        port = free_port()
        env = dict(
            os.environ,
            DATABASE_URL=f"sqlite+aiosqlite:///{tmp}/local.db",
            HOST="127.0.0.1",
            PORT=str(port),
            LOG_LEVEL="WARNING",
            WORKERS="1",
            **(extra_env or {}),
        )
        log_path = Path(tmp) / "service.log"
        with open(log_path, "wb") as log_file:
            proc = subprocess.Popen(
                [sys.executable, "-m", "service.app"],
                cwd=ROOT,
                env=env,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
            url = f"http://127.0.0.1:{port}"
            try:
                deadline = time.monotonic() + START_TIMEOUT_S
                while not service_answers(url):
                    if proc.poll() is not None or time.monotonic() > deadline:
                        log_file.flush()
                        raise RuntimeError("the local service did not start:\n" + log_path.read_text()[-2000:])
                    time.sleep(0.2)
                yield url
            finally:
                _stop(proc)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)
