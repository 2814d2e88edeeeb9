"""The scaling curve: steps/s and episodes/s for 1, 2, 3 … replicas behind HAProxy on one PostgreSQL,
with the CPU each component spends per step, so a reader can extrapolate to a bigger machine.
Prints one JSON document.

    .venv/bin/python -m bench.scaling                                   # 1,2,3 replicas, HTTP and WS
    .venv/bin/python -m bench.scaling --replicas 1,2 --duration 10 --database-url postgresql+asyncpg://…

For each replica count a fresh cluster (``bench/cluster.py``: that many ``python -m service.app``
replicas, one worker each, a fresh PostgreSQL schema, HAProxy round-robin) is started, and
``bench.load``'s closed-loop agents (``--agents``, no think time: saturation) play whole episodes
through the balancer over each transport for ``--duration`` counted seconds after ``--warmup``.
CPU comes from ``/proc/<pid>/stat`` over the counted window: the replicas (every process of their
sessions), HAProxy, the PostgreSQL backends that serve our replicas' connections (found through
the replicas' sockets to the database port) and all PostgreSQL processes (WAL writer, checkpointer
and anyone else's backends included), the load generator, and the machine's total.

What a small machine can show: the CPU per step of each component (that number does not depend on
how many cores there are, until contention), and where the throughput stops growing. It cannot show
the curve of a bigger machine: with 2 cores, one replica, PostgreSQL, HAProxy and the load generator
already share both, so more replicas only split the same cores.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit

from bench.cluster import DEFAULT_DATABASE_URL, Cluster, running_cluster
from bench.harness import cpu_pressure, proc_cpu_seconds
from bench.load import Schedule, Target, fetch_tasks, git_commit, log, machine_busy_seconds, measure

PG_PORT = 5432


def _socket_inodes(pid: int) -> set[int]:
    inodes = set()
    with contextlib.suppress(OSError):
        for fd in os.scandir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                target = os.readlink(fd.path)
                if target.startswith("socket:["):
                    inodes.add(int(target[8:-1]))
    return inodes


def ports_to(pids: list[int], remote_port: int) -> set[int]:
    """Local ports of the TCP connections ``pids`` hold to ``remote_port`` (IPv4 and IPv6)."""
    inodes: set[int] = set()
    for pid in pids:
        inodes |= _socket_inodes(pid)
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as f:
            next(f)
            for line in f:
                parts = line.split()
                local, remote, inode = parts[1], parts[2], int(parts[9])
                if inode in inodes and int(remote.rsplit(":", 1)[1], 16) == remote_port:
                    ports.add(int(local.rsplit(":", 1)[1], 16))
    return ports


def postgres_pids() -> list[int]:
    out = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError), open(f"/proc/{entry.name}/comm") as f:
                if f.read().strip() in ("postgres", "postmaster"):
                    out.append(int(entry.name))
    return out


def backends_serving(client_ports: set[int]) -> list[int]:
    """PIDs of the PostgreSQL backends whose client is one of ``client_ports`` on this host: each
    backend holds the other end of the connection (local port 5432, remote port = the client's)."""
    by_inode: dict[int, int] = {}
    for pid in postgres_pids():
        for inode in _socket_inodes(pid):
            by_inode[inode] = pid
    pids = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as f:
            next(f)
            for line in f:
                parts = line.split()
                local, remote, inode = parts[1], parts[2], int(parts[9])
                ours = int(remote.rsplit(":", 1)[1], 16) in client_ports
                if ours and int(local.rsplit(":", 1)[1], 16) == PG_PORT and inode in by_inode:
                    pids.add(by_inode[inode])
    return sorted(pids)


class Components:
    """Stands in for ``bench.load``'s server: every CPU reading it is asked for (at the start and the
    end of the counted window) also snapshots each component."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.snapshots: list[dict[str, Any]] = []

    def snapshot(self) -> dict[str, Any]:
        replica_pids = [pid for pids in self.cluster.replica_pids() for pid in pids]
        return {
            "t": time.perf_counter(),
            **self.cluster.cpu_seconds(),
            "postgres": {p: proc_cpu_seconds(p) for p in postgres_pids()},  # per PID: backends come and go
            "ours": backends_serving(ports_to(replica_pids, PG_PORT)),
            "generator": time.process_time(),
            "machine": machine_busy_seconds(),
        }

    def cpu_seconds(self) -> float:
        self.snapshots.append(self.snapshot())
        return float(self.snapshots[-1]["replicas"])

    def rss_mb(self) -> float:
        return round(sum(s.rss_mb() for s in self.cluster.servers), 1)

    def window(self, steps: int) -> dict[str, Any]:
        a, b = self.snapshots[-2], self.snapshots[-1]
        wall = b["t"] - a["t"]

        def postgres(pids: Any) -> float:  # a backend that started inside the window counts from 0
            return sum(b["postgres"].get(p, 0.0) - a["postgres"].get(p, 0.0) for p in pids if p in b["postgres"])

        used = {k: b[k] - a[k] for k in ("replicas", "balancer", "generator", "machine")}
        used["database_backends"] = postgres(set(a["ours"]) | set(b["ours"]))
        used["postgres_all"] = postgres(b["postgres"])
        return {
            "cpu_ms_per_step": {k: round(v * 1000 / max(steps, 1), 3) for k, v in used.items()},
            "cpu_cores": {k: round(v / wall, 3) for k, v in used.items()},
            "database_backends_seen": len(b["ours"]),
        }


async def measure_cluster(args: argparse.Namespace, replicas: int, workdir: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    (workdir / f"r{replicas}").mkdir()
    async with running_cluster(replicas, args.database_url, workdir / f"r{replicas}") as cluster:
        tasks = await asyncio.to_thread(fetch_tasks, cluster.url)
        components = Components(cluster)
        port = int(cluster.url.rsplit(":", 1)[1])
        for transport in args.transports:
            target = Target("ours", transport, port, cast(Any, components))  # duck-typed: CPU and memory only
            res = await measure(target, args.agents, args.warmup, args.duration, 500_000, Schedule(tasks), {})
            window = components.window(int(res["steps"]))
            out[transport] = (
                {k: res[k] for k in ("steps_per_s", "episodes_per_s", "step_latency_ms", "errors", "error_samples")}
                | window
                | {"replicas_rss_mb": components.rss_mb()}
            )
            log(f"{replicas} replicas, {transport}: {res['steps_per_s']} steps/s, cpu/step {window['cpu_ms_per_step']}")
    return out


def extrapolate(curve: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Per transport, from the one-replica run: what one core of each component serves."""
    out: dict[str, Any] = {}
    first = curve.get("1") or next(iter(curve.values()))
    for transport, r in first.items():
        ms = r["cpu_ms_per_step"]
        out[transport] = {
            "steps_per_s_per_replica_core": round(1000 / ms["replicas"], 1) if ms["replicas"] else None,
            "steps_per_s_per_database_core": round(1000 / ms["database_backends"], 1)
            if ms["database_backends"]
            else None,
            "steps_per_s_per_balancer_core": round(1000 / ms["balancer"], 1) if ms["balancer"] else None,
        }
    return out


async def run(args: argparse.Namespace) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="ecomm-bench-scaling-"))
    load0 = os.getloadavg()
    curve: dict[str, dict[str, Any]] = {}
    for n in args.replicas:
        curve[str(n)] = await measure_cluster(args, n, workdir)
    return {
        "config": {
            "replicas": args.replicas,
            "agents": args.agents,
            "duration_s": args.duration,
            "warmup_s": args.warmup,
            "transports": args.transports,
            "database": urlsplit(args.database_url)
            ._replace(netloc=urlsplit(args.database_url).hostname or "")
            .geturl(),
            "workers_per_replica": 1,
            "balancer": "haproxy, roundrobin, bench/cluster.py:haproxy_config",
            "commit": git_commit(),
            "cpus": os.cpu_count(),
            "loadavg_before": [round(x, 2) for x in load0],
            "cpu_pressure_at_end": cpu_pressure(),
            "loadavg_after": [round(x, 2) for x in os.getloadavg()],
            "notes": [
                "closed loop (no think time): each replica count at saturation of this machine",
                "cpu_ms_per_step: CPU over the counted window / steps counted (resets and /grader included in the CPU)",
                "database_backends: the PostgreSQL backends holding our replicas' connections; postgres_all: every "
                "postgres process, other tenants of the server included",
                "machine: every core's busy time, all processes",
            ],
        },
        "curve": curve,
        "per_core_from_one_replica": extrapolate(curve),
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.scaling", description=__doc__.split("\n\n")[0])
    p.add_argument("--replicas", default="1,2,3", help="replica counts, comma-separated (default 1,2,3)")
    p.add_argument("--agents", type=int, default=64)
    p.add_argument("--duration", type=float, default=10.0)
    p.add_argument("--warmup", type=float, default=2.0)
    p.add_argument("--transports", default="http,ws")
    p.add_argument("--database-url", default=os.environ.get("TEST_DATABASE_URL") or DEFAULT_DATABASE_URL)
    p.add_argument("--json-out", type=Path, default=None)
    args = p.parse_args(argv)
    args.replicas = [int(x) for x in args.replicas.split(",") if x.strip()]
    args.transports = [t.strip() for t in args.transports.split(",") if t.strip()]
    if not args.replicas or min(args.replicas) < 1 or args.agents < 1 or args.duration <= 0:
        p.error("--replicas are positive counts, --agents and --duration positive")
    if set(args.transports) - {"http", "ws"}:
        p.error("--transports: http, ws or http,ws")
    if not args.database_url.startswith("postgresql"):
        p.error("replicas share one PostgreSQL database: --database-url postgresql+asyncpg://…")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    report = asyncio.run(run(args))
    text = json.dumps(report, indent=2)
    print(text)
    if args.json_out is not None:
        args.json_out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
