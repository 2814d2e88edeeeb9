"""Processes and databases for the tests and the benchmarks — one module, so each is done one way:
a free port on loopback, a server subprocess polled until ``/health`` says healthy and stopped by the
process group it was started in, and a PostgreSQL schema created and dropped around a run."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
HOST = "127.0.0.1"
CLK_TCK = os.sysconf("SC_CLK_TCK")


def proc_stat(pid: int) -> list[bytes] | None:
    """The fields of ``/proc/<pid>/stat`` after "pid (comm)" (state ppid pgrp session …), None when gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None


def stat_cpu_seconds(fields: list[bytes]) -> float:
    """user + system CPU seconds from :func:`proc_stat`'s fields, in clock ticks (10 ms on Linux)."""
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def proc_cpu_seconds(pid: int) -> float:
    """user + system CPU seconds one process has used so far (0 when it is gone)."""
    fields = proc_stat(pid)
    return 0.0 if fields is None else stat_cpu_seconds(fields)


# A safety net, not a budget: waits end when the server reports what they wait for, and fail at once
# when it exits; this only keeps a wedged run from hanging forever.
STALLED_AFTER_S = 600.0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


class ServerProcess:
    """A server subprocess in its own session; its process group id is its PID."""

    def __init__(
        self, name: str, cmd: list[str], port: int, env: dict[str, str], log_dir: Path, cwd: Path = ROOT
    ) -> None:
        """Start ``cmd`` (from ``cwd``, the repository root by default, with exactly ``env``), its output in
        ``log_dir/<name>.log``."""
        self.name, self.port = name, port
        self.url = f"http://{HOST}:{port}"
        self.log_path = log_dir / f"{name}.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self._stopped = False
        self.proc = subprocess.Popen(
            cmd, cwd=cwd, env=env, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True
        )

    def wait_healthy(self, timeout: float = STALLED_AFTER_S) -> None:
        """Until ``/health`` says healthy; fails as soon as the server exits."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n{self.tail()}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as resp:  # noqa: S310 - loopback
                    if json.loads(resp.read()).get("status") == "healthy":
                        return
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"{self.name} not healthy after {timeout:.0f}s:\n{self.tail()}")

    def log_lines(self, needle: str) -> list[str]:
        """The lines of this server's log so far that contain ``needle``."""
        if not self._log.closed:
            self._log.flush()
        text = self.log_path.read_bytes().decode("utf-8", "replace")
        return [line for line in text.splitlines() if needle in line]

    def wait_for_log(self, needle: str, count: int = 1, timeout: float = STALLED_AFTER_S) -> list[str]:
        """Until ``count`` lines of the log contain ``needle`` (an event the server reports, such as
        ``service.workers``' "serving" line); fails as soon as the server exits."""
        deadline = time.monotonic() + timeout
        while len(lines := self.log_lines(needle)) < count:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n{self.tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name}: {len(lines)}/{count} lines with {needle!r}:\n{self.tail()}")
            time.sleep(0.05)
        return lines

    def tail(self, n: int = 4000) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_bytes()[-n:].decode("utf-8", "replace")

    def session_members(self) -> dict[int, float]:
        """PID → user+system CPU seconds of every live process in this server's session."""
        out = {}
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            fields = proc_stat(int(entry.name))
            if fields is not None and int(fields[3]) == self.proc.pid:  # fields[3]: the session id
                out[int(entry.name)] = stat_cpu_seconds(fields)
        return out

    def cpu_seconds(self) -> float:
        """CPU of the server, uvicorn workers included."""
        return sum(self.session_members().values())

    def rss_mb(self) -> float:
        """Resident memory of the server, uvicorn workers included (MB)."""
        total_kb = 0
        for pid in self.session_members():
            try:
                with open(f"/proc/{pid}/status", "rb") as f:
                    total_kb += next((int(line.split()[1]) for line in f if line.startswith(b"VmRSS:")), 0)
            except OSError:
                continue
        return round(total_kb / 1024, 1)

    def stop(self) -> None:
        """SIGTERM to the process group we created (its id is our child's PID), then SIGKILL."""
        if self._stopped:
            return
        self._stopped = True
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=5)
        for pid in self.session_members():  # a worker that outlived its supervisor
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self._log.close()


async def pg_schema(url: str, action: str, schema: str) -> None:
    """``action`` "create" or "drop" the schema ``schema`` in the PostgreSQL database of ``url``
    (a SQLAlchemy ``postgresql+asyncpg://`` URL)."""
    import asyncpg

    parts = urlsplit(url)
    dsn = parts._replace(scheme="postgresql").geturl()
    conn = await asyncpg.connect(dsn)
    try:
        if action == "create":
            await conn.execute(f'CREATE SCHEMA "{schema}"')
        else:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()


def cpu_pressure() -> dict[str, float] | None:
    """The kernel's CPU pressure (PSI): the share of time runnable tasks waited for a CPU, over the last
    10 and 60 s (%). On a shared machine it says how much of a latency was waiting for a core."""
    try:
        with open("/proc/pressure/cpu") as f:
            some = f.readline().split()
    except OSError:
        return None
    values = dict(part.split("=") for part in some[1:3])
    return {"some_avg10": float(values["avg10"]), "some_avg60": float(values["avg60"])}
