"""A multi-replica deployment on one machine: N ``python -m service.app`` replicas on their own ports,
one PostgreSQL, and HAProxy in front, balancing every request and every WebSocket round-robin
(non-sticky: any replica serves any step, because every episode lives in the database).

    .venv/bin/python -m bench.cluster --replicas 3            # serves until Ctrl-C; prints the balancer's URL
    .venv/bin/python -m bench.cluster --replicas 2 --database-url postgresql+asyncpg://postgres@127.0.0.1:5432/test

Used by ``tests/system/test_cluster.py`` (a replica SIGKILLed under 64 agents) and
``bench/scaling.py`` (throughput against the number of replicas). The balancer's configuration is
:func:`haproxy_config` — the same text ``deploy/haproxy.cfg`` ships for the compose file (a test
keeps them in step). Each replica runs in its own session (process group), so a kill takes its
workers with it; HAProxy runs in the foreground (``-db``) in its own session too. Everything binds
127.0.0.1 and is stopped by PID. Without ``--database-url`` a fresh schema of
``TEST_DATABASE_URL``'s (or the local test) database is created and dropped afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import secrets
import shutil
import signal
import sys
import tempfile
import time
import urllib.request
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.harness import HOST, STALLED_AFTER_S, ServerProcess, free_port, pg_schema, proc_cpu_seconds

DEFAULT_DATABASE_URL = "postgresql+asyncpg://postgres@127.0.0.1:5432/test"
HEALTH_INTERVAL_MS = 1000  # how often HAProxy asks each replica's /ready ...
CHECK_TIMEOUT_S = 5  # ... and how long an answer may take: a replica slowed by a busy machine is not dead
FALL, RISE = 3, 2  # failed checks before a replica is out, passed checks before it is back in


def haproxy_config(
    bind: str,
    servers: list[tuple[str, str]] | None = None,
    template: tuple[str, int, str] | None = None,
    dns: str | None = None,
    forwardfor: bool = False,
    maxconn: int = 20000,
) -> str:
    """HAProxy's configuration for the replicas ``servers`` ([(name, "host:port")]) — or, for a
    container platform, ``template`` (prefix, count, "name:port": one server per address the name
    resolves to through ``dns``) — behind ``bind``:

    - ``balance roundrobin``, no stickiness: consecutive requests and sockets of one client go to
      different replicas;
    - ``option httpchk GET /ready``: a replica whose database is unreachable or not migrated is out
      of rotation after ``FALL`` failed checks (a dead one refuses the connection: 3 s), and a
      restarted one is back once it answers ready ``RISE`` times. ``timeout check`` is generous:
      with 500 ms (HAProxy's default, the check interval) replicas slowed by a loaded machine were
      all marked down at once and the balancer answered 503 with no replica dead;
    - ``observe layer4 error-limit 1 on-error mark-down``: a replica that refuses one connection is
      out of rotation at once, not after ``FALL`` checks (until it passes ``RISE`` checks again);
    - ``retry-on conn-failure`` + ``option redispatch 1``: a request that could not *connect* (a
      dead replica before it is marked down) goes to another replica; one that reached a replica is
      never replayed by the balancer (a step without ``request_id`` would be applied twice) — the
      client retries it with its ``request_id`` (client/wire.py does);
    - ``timeout tunnel 1h``: an open WebSocket may sit between frames for as long as an agent thinks
      (the app reaps sessions idle past ``WS_IDLE_TIMEOUT_S`` itself);
    - ``forwardfor``: append the client's address to ``X-Forwarded-For`` (then the replicas run with
      ``TRUSTED_PROXY_HOPS=1`` and limits apply per client, not to the balancer's one address);
    - ``maxconn``: connections it holds at once (each takes two descriptors, client and replica side).
    """
    checks = (
        f"check inter {HEALTH_INTERVAL_MS}ms fall {FALL} rise {RISE} observe layer4 error-limit 1 on-error mark-down"
    )
    if template is not None:
        prefix, count, target = template
        backends = [f"    server-template {prefix} {count} {target} {checks} resolvers platform init-addr none"]
    else:
        backends = [f"    server {name} {address} {checks}" for name, address in servers or []]
    lines = [
        "global",
        f"    maxconn {maxconn}",
        "",
        *(["resolvers platform", f"    nameserver dns {dns}", "    hold valid 5s", ""] if dns else []),
        "defaults",
        "    mode http",
        "    timeout connect 2s",
        "    timeout client 60s",
        "    timeout server 60s",
        "    timeout tunnel 1h",
        "    timeout http-keep-alive 10s",
        f"    timeout check {CHECK_TIMEOUT_S}s",
        "    retries 3",
        "    retry-on conn-failure",
        "    option redispatch 1",
        *(["    option forwardfor"] if forwardfor else []),
        "",
        "frontend balancer",
        f"    bind {bind}",
        "    default_backend replicas",
        "",
        "backend replicas",
        "    balance roundrobin",
        "    option httpchk GET /ready",
        "    http-check expect status 200",
        *backends,
        "",
    ]
    return "\n".join(lines)


COMPOSE_BALANCER = {"bind": "*:8080", "template": ("app", 3, "app:7860"), "dns": "127.0.0.11:53", "forwardfor": True}


def find_haproxy() -> str | None:
    return shutil.which("haproxy") or next(
        (p for p in ("/usr/sbin/haproxy", "/usr/local/sbin/haproxy") if os.access(p, os.X_OK)), None
    )


@dataclass
class Cluster:
    """``replicas`` servers + HAProxy on one PostgreSQL schema; :meth:`start` brings them up healthy."""

    replicas: int
    database_url: str
    schema: str
    workdir: Path
    workers_per_replica: int = 1
    extra_env: dict[str, str] = field(default_factory=dict)
    servers: list[ServerProcess] = field(default_factory=list)
    ports: list[int] = field(default_factory=list)
    balancer: ServerProcess | None = None
    generation: int = 0

    @property
    def url(self) -> str:
        assert self.balancer is not None
        return self.balancer.url

    def replica_env(self, port: int) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "DATABASE_SCHEMA", "WORKERS")}
        env.update(
            DATABASE_URL=self.database_url,
            DATABASE_SCHEMA=self.schema,
            HOST=HOST,
            PORT=str(port),
            WORKERS=str(self.workers_per_replica),
            LOG_LEVEL="INFO",
            PYTHONUNBUFFERED="1",
            **self.extra_env,
        )
        return env

    def _start_replica(self, index: int) -> ServerProcess:
        self.generation += 1
        port = self.ports[index]
        server = ServerProcess(
            f"replica{index + 1}-{self.generation}",
            [sys.executable, "-m", "service.app"],
            port,
            self.replica_env(port),
            self.workdir,
        )
        return server

    def start(self) -> Cluster:
        haproxy = find_haproxy()
        if haproxy is None:
            raise RuntimeError("haproxy is not installed (Debian: apt-get install haproxy)")
        self.ports = [free_port() for _ in range(self.replicas)]
        first = self._start_replica(0)  # migrates the schema; the others then find it at head
        self.servers.append(first)
        first.wait_healthy()
        self.servers += [self._start_replica(i) for i in range(1, self.replicas)]
        for s in self.servers[1:]:
            s.wait_healthy()
        port = free_port()
        names = [(f"r{i + 1}", f"{HOST}:{p}") for i, p in enumerate(self.ports)]
        config = self.workdir / "haproxy.cfg"
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        maxconn = 20000 if hard == resource.RLIM_INFINITY else max(256, min(20000, (hard - 64) // 2))
        config.write_text(haproxy_config(f"{HOST}:{port}", names, maxconn=maxconn))
        cmd = [haproxy, "-db", "-f", str(config)]
        self.balancer = ServerProcess("haproxy", cmd, port, dict(os.environ), self.workdir)
        self.wait_in_rotation()
        return self

    def wait_in_rotation(self, timeout: float = STALLED_AFTER_S) -> None:
        """Until every live replica answers ready through the balancer (a full round-robin round)."""
        assert self.balancer is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.balancer.proc.poll() is not None:
                raise RuntimeError(f"haproxy exited with {self.balancer.proc.returncode}:\n{self.balancer.tail()}")
            try:
                for _ in range(2 * self.replicas):
                    with urllib.request.urlopen(self.url + "/ready", timeout=2) as resp:  # noqa: S310 - loopback
                        resp.read()
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"the balancer did not serve /ready within {timeout:.0f}s:\n{self.balancer.tail()}")

    def kill(self, index: int) -> int:
        """SIGKILL replica ``index``'s whole process group (its supervisor and workers); its PID."""
        server = self.servers[index]
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.proc.pid, signal.SIGKILL)
        server.proc.wait()
        server.stop()
        return server.proc.pid

    def restart(self, index: int) -> ServerProcess:
        """A new replica ``index`` on the same port; returns once it is healthy."""
        server = self._start_replica(index)
        self.servers[index] = server
        server.wait_healthy()
        return server

    def replica_pids(self) -> list[list[int]]:
        return [list(s.session_members()) for s in self.servers]

    def cpu_seconds(self) -> dict[str, float]:
        """CPU so far of the replicas (each with its workers) and of the balancer."""
        return {
            "replicas": sum(s.cpu_seconds() for s in self.servers),
            "balancer": proc_cpu_seconds(self.balancer.proc.pid) if self.balancer else 0.0,
        }

    def stop(self) -> None:
        if self.balancer is not None:
            self.balancer.stop()
        for s in self.servers:
            s.stop()


@contextlib.asynccontextmanager
async def running_cluster(replicas: int, database_url: str, workdir: Path, **kw: Any) -> AsyncIterator[Cluster]:
    """A started :class:`Cluster` on a fresh schema of ``database_url``, stopped and dropped afterwards."""
    schema = "cluster_" + secrets.token_hex(6)
    await pg_schema(database_url, "create", schema)
    cluster = Cluster(replicas, database_url, schema, workdir, **kw)
    try:
        await asyncio.to_thread(cluster.start)
        yield cluster
    finally:
        cluster.stop()
        with contextlib.suppress(Exception):
            await pg_schema(database_url, "drop", schema)


async def serve_forever(args: argparse.Namespace) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="ecomm-cluster-"))
    async with running_cluster(args.replicas, args.database_url, workdir, workers_per_replica=args.workers) as c:
        print(json.dumps({"balancer": c.url, "replicas": [s.url for s in c.servers], "logs": str(workdir)}), flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.cluster", description=__doc__.split("\n\n")[0])
    p.add_argument("--replicas", type=int, default=3)
    p.add_argument("--workers", type=int, default=1, help="WORKERS of each replica (default 1)")
    p.add_argument("--database-url", default=os.environ.get("TEST_DATABASE_URL") or DEFAULT_DATABASE_URL)
    args = p.parse_args(argv)
    if not args.database_url.startswith("postgresql"):
        p.error("replicas share one PostgreSQL database: --database-url postgresql+asyncpg://…")
    asyncio.run(serve_forever(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
