"""``WORKERS`` > 1: a pre-fork supervisor — import once, fork the workers, replace any that dies or hangs.

uvicorn's own supervisor *spawns* each worker: a fresh interpreter that imports the whole app
(about 1 s of CPU here) before it answers the supervisor's 5 s health check. On a busy machine that
import takes longer than the check, so workers were killed while they were still importing — at a
load of 7–8 on 2 cores, 14 kills and 86.8 s before the first 200 (``bench/workers.py`` measures it).

Here the supervisor imports everything (its caller has), binds the socket, freezes what import built
out of the collector's way, and forks: a worker starts with every module already loaded and only
builds its app (``app_factory``: its own engine, threads and event loop, none of which cross the
fork) and runs the lifespan — about 0.2 s of CPU. Then:

- a worker tells the supervisor through a pipe when it serves (uvicorn's startup is complete; the
  supervisor logs ``worker N (pid P) serving, T s after its start``) and then every second from its
  event loop, so a worker whose loop has not run for ``WORKER_TIMEOUT_S`` is killed and replaced —
  a hung loop, not merely a hung process. A start is never cut short for being slow on a busy
  machine: only one not serving after ``WORKER_TIMEOUT_S`` + ``DB_START_TIMEOUT_S`` (its lifespan
  itself waits that long for the database) is taken for wedged;
- a worker that exits is replaced at once; one that exits before serving is replaced after a
  backoff (1 s, doubling to 30 s) while others serve; but while no worker has served yet, the
  first one that exits by itself stops the supervisor with its exit code (an app that cannot load, or a
  database still away after ``DB_START_TIMEOUT_S``, fails the same way in every worker);
- SIGTERM, SIGINT, SIGQUIT or SIGHUP stops every worker (SIGTERM: uvicorn's graceful shutdown,
  SIGKILL after ``STOP_GRACE_S``) and then the supervisor (uvicorn's rolling restart on SIGHUP is
  not reproduced: restart the supervisor); a supervisor that dies anyway (SIGKILL) takes its
  workers with it (Linux ``PR_SET_PDEATHSIG``), so no orphan keeps serving the socket.
"""

from __future__ import annotations

import contextlib
import logging
import os
import selectors
import signal
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import uvicorn

log = logging.getLogger("service.workers")

READY, BEAT = b"R", b"."
BEAT_INTERVAL_S = 1.0  # at most; a quarter of WORKER_TIMEOUT_S when that is shorter
STOP_GRACE_S = 30.0
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT, signal.SIGHUP)
PR_SET_PDEATHSIG = 1
RESPAWN_BACKOFF_S = (1.0, 30.0)


class _ReportingServer(uvicorn.Server):
    """uvicorn's server, telling the supervisor when it serves and that its event loop runs."""

    def __init__(self, config: uvicorn.Config, report_fd: int, beat_s: float) -> None:
        super().__init__(config)
        self.report_fd, self.beat_s = report_fd, beat_s
        self._beat: Any = None

    def _send(self, what: bytes) -> None:
        with contextlib.suppress(BlockingIOError, BrokenPipeError):  # a full pipe: the next beat will do
            os.write(self.report_fd, what)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started and not self.should_exit:
            import asyncio

            self._send(READY)
            self._beat = asyncio.get_running_loop().create_task(self._heartbeat())

    async def _heartbeat(self) -> None:
        import asyncio

        while True:
            await asyncio.sleep(self.beat_s)
            self._send(BEAT)


def _die_with(supervisor: int) -> None:
    """Linux: SIGTERM this worker when the supervisor dies (even by SIGKILL), so no orphan keeps serving
    the socket; elsewhere a no-op."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        return
    if os.getppid() != supervisor:  # it died before the request took effect
        os.kill(os.getpid(), signal.SIGTERM)


@dataclass
class Worker:
    slot: int
    pid: int
    report_fd: int
    started: float
    ready_at: float | None = None
    last_beat: float = 0.0
    killed: bool = False  # by the supervisor (hung): its exit says nothing about the app


class Supervisor:
    """Forks ``count`` workers serving ``config``'s app on ``sock`` and keeps that many alive."""

    def __init__(
        self, config: uvicorn.Config, sock: socket.socket, count: int, timeout_s: float, start_timeout_s: float
    ) -> None:
        self.config, self.sock, self.count = config, sock, count
        self.timeout_s, self.start_timeout_s = timeout_s, start_timeout_s
        self.workers: dict[int, Worker] = {}  # pid -> worker
        self.selector = selectors.DefaultSelector()
        self.stopping: int | None = None  # the signal that asked us to stop
        self.served_once = False
        self.exit_code = 0
        self.failures: dict[int, int] = {}  # slot -> starts in a row that never served
        self.respawn_at: dict[int, float] = {}  # slot -> when to fork its replacement

    # -- the worker side

    def _fork(self, slot: int) -> None:
        read_fd, write_fd = os.pipe()
        os.set_blocking(write_fd, False)
        sys.stdout.flush()
        sys.stderr.flush()
        supervisor = os.getpid()
        pid = os.fork()
        if pid == 0:  # the worker: never returns into the supervisor's code
            code = 1
            try:
                os.close(read_fd)
                for fd in [w.report_fd for w in self.workers.values()]:
                    os.close(fd)
                for sig in STOP_SIGNALS:
                    signal.signal(sig, signal.SIG_DFL)
                _die_with(supervisor)
                _ReportingServer(self.config, write_fd, min(BEAT_INTERVAL_S, self.timeout_s / 4)).run(
                    sockets=[self.sock]
                )
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
            except BaseException:
                log.exception("worker %d (pid %d) failed", slot, os.getpid())
            finally:
                logging.shutdown()
                os._exit(code)
        os.close(write_fd)
        os.set_blocking(read_fd, False)
        worker = Worker(slot, pid, read_fd, time.monotonic())
        self.workers[pid] = worker
        self.selector.register(read_fd, selectors.EVENT_READ, worker)

    # -- the supervisor side

    def run(self) -> int:
        for sig in STOP_SIGNALS:
            signal.signal(sig, self._on_signal)
        log.info("supervisor pid %d: forking %d workers", os.getpid(), self.count)
        for slot in range(1, self.count + 1):
            self._fork(slot)
        while self.stopping is None:
            self._read_reports(0.5)
            self._reap()
            self._kill_hung()
            self._respawn_due()
        self._stop_all()
        return self.exit_code

    def _on_signal(self, signum: int, _frame: Any) -> None:
        self.stopping = signum

    def _read_reports(self, timeout: float) -> None:
        for key, _ in self.selector.select(timeout):
            worker: Worker = key.data
            try:
                data = os.read(worker.report_fd, 4096)
            except BlockingIOError:
                continue
            if not data:  # the worker closed its end: it exited; _reap handles it
                self._forget_pipe(worker)
                continue
            now = time.monotonic()
            worker.last_beat = now
            if READY in data and worker.ready_at is None:
                worker.ready_at = now
                self.served_once = True
                self.failures.pop(worker.slot, None)
                log.info(
                    "worker %d (pid %d) serving, %.1f s after its start", worker.slot, worker.pid, now - worker.started
                )

    def _forget_pipe(self, worker: Worker) -> None:
        with contextlib.suppress(KeyError, ValueError):
            self.selector.unregister(worker.report_fd)
        with contextlib.suppress(OSError):
            os.close(worker.report_fd)

    def _reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            worker = self.workers.pop(pid, None)
            if worker is None:
                continue
            self._forget_pipe(worker)
            code = os.waitstatus_to_exitcode(status)
            if self.stopping is not None:
                continue
            self._replace(worker, code)

    def _replace(self, worker: Worker, code: int) -> None:
        now = time.monotonic()
        if worker.ready_at is not None:
            log.warning(
                "worker %d (pid %d) exited (code %d) after serving; forking its replacement",
                worker.slot,
                worker.pid,
                code,
            )
            self.respawn_at[worker.slot] = now
            return
        if not self.served_once and not worker.killed:
            log.error(
                "worker %d (pid %d) exited (code %d) before serving and no worker has served yet: stopping "
                "(the app fails the same way in every worker; its log lines are above)",
                worker.slot,
                worker.pid,
                code,
            )
            self.exit_code, self.stopping = (code if code > 0 else 1), signal.SIGTERM
            return
        failures = self.failures[worker.slot] = self.failures.get(worker.slot, 0) + 1
        delay = min(RESPAWN_BACKOFF_S[0] * 2 ** (failures - 1), RESPAWN_BACKOFF_S[1])
        log.warning(
            "worker %d (pid %d) exited (code %d) before serving; forking its replacement in %.0f s",
            worker.slot,
            worker.pid,
            code,
            delay,
        )
        self.respawn_at[worker.slot] = now + delay

    def _kill_hung(self) -> None:
        now = time.monotonic()
        for worker in list(self.workers.values()):
            serving = worker.ready_at is not None
            since, bound = (worker.last_beat, self.timeout_s) if serving else (worker.started, self.start_timeout_s)
            if not worker.killed and now - since > bound:
                what = "its event loop has not run" if worker.ready_at is not None else "it has not started serving"
                log.error(
                    "worker %d (pid %d): %s for %.0f s (%s): killing it",
                    worker.slot,
                    worker.pid,
                    what,
                    now - since,
                    "WORKER_TIMEOUT_S" if serving else "WORKER_TIMEOUT_S + DB_START_TIMEOUT_S",
                )
                with contextlib.suppress(ProcessLookupError):
                    os.kill(worker.pid, signal.SIGKILL)
                worker.killed = True  # once: _reap replaces it when it is gone

    def _respawn_due(self) -> None:
        now = time.monotonic()
        for slot, when in list(self.respawn_at.items()):
            if when <= now:
                del self.respawn_at[slot]
                self._fork(slot)

    def _stop_all(self) -> None:
        log.info("supervisor: stopping %d workers (%s)", len(self.workers), signal.Signals(self.stopping or 15).name)
        for worker in self.workers.values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(worker.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        while self.workers and time.monotonic() < deadline:
            self._reap()
            time.sleep(0.05)
        for worker in self.workers.values():
            log.warning(
                "worker %d (pid %d) still running after %.0f s: killing it", worker.slot, worker.pid, STOP_GRACE_S
            )
            with contextlib.suppress(ProcessLookupError):
                os.kill(worker.pid, signal.SIGKILL)
        while self.workers:
            pid, _ = os.waitpid(-1, 0)
            self.workers.pop(pid, None)


def serve_workers(
    app_factory: Callable[[], Any],
    host: str,
    port: int,
    count: int,
    timeout_s: float,
    start_timeout_s: float,
    options: dict[str, Any],
) -> None:
    """Serve ``app_factory()`` (built in each worker) from ``count`` forked workers on ``host:port``; a
    worker silent ``timeout_s`` after serving, or not serving ``start_timeout_s`` after its fork, is
    killed and replaced."""
    config = uvicorn.Config(app_factory, factory=True, host=host, port=port, **options)
    sock = config.bind_socket()
    sys.exit(Supervisor(config, sock, count, timeout_s, start_timeout_s).run())
