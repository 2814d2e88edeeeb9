"""Sessions at scale on one worker: N concurrent WebSocket sessions whose agents think between steps,
on 127.0.0.1 only. Prints one JSON document.

    .venv/bin/python -m bench.sessions --sessions 4096                  # think 1-5 s, 60 s of play
    .venv/bin/python -m bench.sessions --sessions 1024 --think-s 1,5 --duration 60

One server, ``python -m service.app`` with one worker (``MAX_CONCURRENT_ENVS`` = N) on a fresh
durable SQLite file (or ``--database-url``, a fresh PostgreSQL schema), and one load-generator
process (asyncio + uvloop, ``websockets``, one connection per session) go through four phases:

1. **connect** — N sockets opened at ``--connect-rate`` per second, nothing sent: the server's
   resident memory per connected session.
2. **idle** — each session resets an episode, then all wait: memory per *idle session* (a socket
   holding an episode, between steps) = (RSS now - RSS before the first socket) / N.
3. **active** — for ``--duration`` seconds every agent thinks a uniform ``--think-s`` interval,
   then sends its next step (or, after ``done``, a reset): step latency p50/p99 (client side, frame
   sent -> reply parsed), the server's CPU per frame, RSS per active session, and how late the
   generator's own event loop woke up (a step's latency includes that).
4. **resume** — every session drops its socket, reconnects and resumes its episode with
   ``{"episode_id": E, "resume": true}``, then steps once: latency of reconnect + resume (the step
   not included) and the server's CPU per session over the phase (the step included).

Agents replay the actions the heuristic agent plays on the same (task, seed) — the episodes are
deterministic, so every replayed episode ends exactly where it ended in process and the generator
spends almost no CPU per step. Every error (a refused socket, an error frame, a reply that is not
the next observation, a 30 s silence) is counted with samples; the targets (p99 <= 50 ms, <= 50 kB
per idle session, 0 errors) are reported met or not. The load generator raises its own soft
open-file limit to the hard one; the server raises its own at start (``service.app``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import os
import random
import resource
import secrets
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.harness import HOST, ServerProcess, cpu_pressure, free_port, pg_schema
from bench.load import SCRIPT_SEEDS, fetch_tasks, git_commit, log, machine_busy_seconds, percentiles, record_scripts
from bench.load import server_env as clean_env

REPLY_TIMEOUT_S = 30.0
TARGETS = {"step_p99_ms": 50.0, "idle_kb_per_session": 50.0, "errors": 0}


@dataclass
class Stats:
    latencies: dict[str, list[float]] = field(default_factory=lambda: {"connect": [], "reset": [], "step": []})
    errors: int = 0
    samples: list[str] = field(default_factory=list)
    episodes: int = 0

    def error(self, message: str) -> None:
        self.errors += 1
        if len(self.samples) < 8 and not any(s[:80] == message[:80] for s in self.samples):
            self.samples.append(message[:300])


class Session:
    """One agent on one socket: resets, replays its script one think at a time, resumes."""

    def __init__(self, index: int, port: int, tasks: list[str], scripts: dict[Any, list[bytes]], stats: Stats) -> None:
        self.index, self.port, self.tasks, self.scripts, self.stats = index, port, tasks, scripts, stats
        self.rng = random.Random(index)
        self.ws: Any = None
        self.k = 0  # episodes started
        self.episode_id: str | None = None
        self.script: list[bytes] = []
        self.position = 0
        self.broken = False

    async def connect(self) -> None:
        from websockets.asyncio.client import connect

        t0 = time.perf_counter()
        self.ws = await connect(
            f"ws://{HOST}:{self.port}/ws", compression=None, ping_interval=None, max_size=2**22, open_timeout=60
        )
        self.stats.latencies["connect"].append((time.perf_counter() - t0) * 1000)

    async def frame(self, text: str, bucket: str | None) -> dict[str, Any]:
        t0 = time.perf_counter()
        await self.ws.send(text)
        reply = json.loads(await asyncio.wait_for(self.ws.recv(), REPLY_TIMEOUT_S))
        if bucket is not None:
            self.stats.latencies[bucket].append((time.perf_counter() - t0) * 1000)
        if reply.get("type") != "observation":
            raise RuntimeError(f"{json.loads(text)['type']} -> {json.dumps(reply)[:200]}")
        return reply["data"]

    async def reset(self) -> None:
        task_id = self.tasks[(self.index + self.k) % len(self.tasks)]
        seed = (self.index * 7 + self.k) % SCRIPT_SEEDS  # the episodes the scripts were recorded on
        self.k += 1
        data = await self.frame(json.dumps({"type": "reset", "data": {"task_id": task_id, "seed": seed}}), "reset")
        self.episode_id = data["observation"]["episode_id"]
        self.script, self.position = self.scripts[(task_id, seed)], 0

    async def step(self) -> None:
        action = self.script[self.position]
        data = await self.frame('{"type":"step","data":' + action.decode() + "}", "step")
        self.position += 1
        finished = self.position == len(self.script)
        if bool(data["done"]) != finished:
            raise RuntimeError(f"episode {self.episode_id}: done={data['done']} after {self.position} steps")
        if finished:
            self.stats.episodes += 1
            self.episode_id = None

    async def act(self) -> None:
        await (self.reset() if self.episode_id is None else self.step())

    async def play(self, deadline: float, think: tuple[float, float]) -> None:
        while not self.broken:
            think_s = self.rng.uniform(*think)
            if time.perf_counter() + think_s >= deadline:
                return  # its next step would fall after the window: the agent stops thinking now
            await asyncio.sleep(think_s)
            await self.guard(self.act)

    async def resume(self) -> float:
        """Drop the socket, reconnect, resume the episode, step once; the reconnect + resume time (ms)."""
        with contextlib.suppress(Exception):
            await self.ws.close()
        t0 = time.perf_counter()
        await self.connect()
        if self.episode_id is None:
            await self.reset()
        else:
            data = await self.frame(
                json.dumps({"type": "reset", "data": {"episode_id": self.episode_id, "resume": True}}), None
            )
            if data["observation"]["episode_id"] != self.episode_id:
                raise RuntimeError(f"resumed {data['observation']['episode_id']}, not {self.episode_id}")
        took = (time.perf_counter() - t0) * 1000
        await self.act()
        return took

    async def guard(self, action: Callable[[], Awaitable[Any]]) -> Any:
        if self.broken:
            return None
        try:
            return await action()
        except Exception as exc:  # noqa: BLE001 - counted; this session stops
            self.stats.error(f"session {self.index}: {type(exc).__name__}: {exc}")
            self.broken = True
            return None

    async def close(self) -> None:
        if self.ws is not None:
            with contextlib.suppress(Exception):
                await self.ws.send('{"type":"close"}')
                await self.ws.close()


async def ramp(sessions: list[Session], what: Callable[[Session], Awaitable[Any]], per_s: float) -> list[Any]:
    """``what(session)`` for every session, started at ``per_s`` a second."""
    tasks, t0 = [], time.perf_counter()
    for i, s in enumerate(sessions):
        delay = t0 + i / per_s - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(s.guard(functools.partial(what, s))))
    return await asyncio.gather(*tasks)


class Meter:
    """The server's CPU and resident memory, the generator's CPU and the machine's, between marks."""

    def __init__(self, server: ServerProcess) -> None:
        self.server = server
        self.mark()

    def mark(self) -> None:
        self.t = (time.perf_counter(), self.server.cpu_seconds(), time.process_time(), machine_busy_seconds())

    def since(self) -> dict[str, Any]:
        now = (time.perf_counter(), self.server.cpu_seconds(), time.process_time(), machine_busy_seconds())
        wall, srv, gen, busy = (now[i] - self.t[i] for i in range(4))
        wall = max(wall, 1e-9)
        return {
            "wall_s": round(wall, 2),
            "server_cpu_s": round(srv, 3),
            "cpu_cores": {
                "server": round(srv / wall, 3),
                "generator": round(gen / wall, 3),
                "other": round(max(0.0, busy - srv - gen) / wall, 3),
            },
        }


class LoopLag:
    """How late the generator's own event loop wakes up (a 50 ms sleep, measured): when it is late, so is
    every reply it reads, and the step latencies say as much about the generator as about the server."""

    def __init__(self) -> None:
        self.samples: list[float] = []
        self.task: asyncio.Task[None] | None = None

    async def _probe(self) -> None:
        while True:
            t0 = time.perf_counter()
            await asyncio.sleep(0.05)
            self.samples.append((time.perf_counter() - t0 - 0.05) * 1000)

    def start(self) -> None:
        self.samples.clear()
        self.task = asyncio.get_running_loop().create_task(self._probe())

    def stop(self) -> dict[str, float | None]:
        if self.task is not None:
            self.task.cancel()
        return percentiles(self.samples)


def kb_per(mb_now: float, mb_base: float, n: int) -> float:
    return round((mb_now - mb_base) * 1024 / n, 2)


async def phases(args: argparse.Namespace, server: ServerProcess) -> dict[str, Any]:
    tasks = await asyncio.to_thread(fetch_tasks, server.url)
    scripts = record_scripts(tasks)
    stats = Stats()
    meter = Meter(server)
    warm = [Session(-1 - i, server.port, tasks, scripts, stats) for i in range(8)]  # code paths warm, then gone
    await ramp(warm, lambda s: s.connect(), 100)
    for _ in range(12):
        await asyncio.gather(*(w.guard(w.act) for w in warm))
    await asyncio.gather(*(w.close() for w in warm))
    await asyncio.sleep(1.0)
    for bucket in stats.latencies.values():
        bucket.clear()
    base_mb = server.rss_mb()
    out: dict[str, Any] = {"server_rss_mb_before": base_mb}
    sessions = [Session(i, server.port, tasks, scripts, stats) for i in range(args.sessions)]
    n = len(sessions)

    meter.mark()
    await ramp(sessions, lambda s: s.connect(), args.connect_rate)
    await asyncio.sleep(args.settle_s)
    out["connect"] = {"latency_ms": percentiles(stats.latencies["connect"]), **meter.since()}
    out["connect"]["kb_per_session"] = kb_per(server.rss_mb(), base_mb, n)

    meter.mark()
    await ramp(sessions, lambda s: s.reset(), args.connect_rate)
    await asyncio.sleep(args.settle_s)
    idle_mb = server.rss_mb()
    out["idle"] = {"server_rss_mb": idle_mb, "kb_per_session": kb_per(idle_mb, base_mb, n), **meter.since()}
    out["idle"]["reset_latency_ms"] = percentiles(stats.latencies["reset"])

    for name in ("reset", "step"):
        stats.latencies[name].clear()
    meter.mark()
    lag = LoopLag()
    lag.start()
    deadline = time.perf_counter() + args.duration
    await asyncio.gather(*(s.play(deadline, args.think) for s in sessions))
    active = meter.since()
    generator_lag = lag.stop()
    frames = len(stats.latencies["step"]) + len(stats.latencies["reset"])
    out["active"] = {
        "steps": len(stats.latencies["step"]),
        "resets": len(stats.latencies["reset"]),
        "episodes_finished": stats.episodes,
        "steps_per_s": round(len(stats.latencies["step"]) / active["wall_s"], 1),
        "step_latency_ms": percentiles(stats.latencies["step"]),
        "reset_latency_ms": percentiles(stats.latencies["reset"]),
        "server_cpu_ms_per_frame": round(active["server_cpu_s"] * 1000 / max(frames, 1), 3),
        "generator_loop_lag_ms": generator_lag,
        "server_rss_mb": server.rss_mb(),
        "kb_per_session": kb_per(server.rss_mb(), base_mb, n),
        **active,
    }

    meter.mark()
    took = await ramp(sessions, lambda s: s.resume(), args.connect_rate)
    resumed = [t for t in took if t is not None]
    out["resume"] = {
        "sessions": len(resumed),
        "latency_ms": percentiles(resumed),
        "server_cpu_ms_per_resume": round(meter.since()["server_cpu_s"] * 1000 / max(len(resumed), 1), 3),
        **meter.since(),
    }
    await asyncio.gather(*(s.close() for s in sessions))
    out["errors"] = stats.errors
    out["error_samples"] = stats.samples
    out["sessions_broken"] = sum(s.broken for s in sessions)
    return out


def targets_met(result: dict[str, Any]) -> dict[str, Any]:
    p99 = result["active"]["step_latency_ms"]["p99"]
    return {
        "step_p99_ms<=50": p99 is not None and p99 <= TARGETS["step_p99_ms"],
        "idle_kb_per_session<=50": result["idle"]["kb_per_session"] <= TARGETS["idle_kb_per_session"],
        "errors==0": result["errors"] == 0,
    }


def raise_open_files(needed: int) -> tuple[int, int]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if hard != resource.RLIM_INFINITY and hard < needed:
        raise SystemExit(f"{needed} sessions need ~{needed} open files here; the hard limit is {hard} (ulimit -Hn)")
    return resource.getrlimit(resource.RLIMIT_NOFILE)


async def run(args: argparse.Namespace, workdir: Path, started: list[ServerProcess]) -> dict[str, Any]:
    limits = raise_open_files(args.sessions + 64)
    database_url = args.database_url or f"sqlite+aiosqlite:///{workdir / 'sessions.db'}"
    schema = "bench_" + secrets.token_hex(6) if database_url.startswith("postgresql") else None
    if schema is not None:
        await pg_schema(database_url, "create", schema)
    try:
        port = free_port()
        env = clean_env(
            DATABASE_URL=database_url,
            HOST=HOST,
            PORT=str(port),
            LOG_LEVEL="WARNING",
            MAX_CONCURRENT_ENVS=str(args.max_concurrent_envs or args.sessions + 8),
            WS_IDLE_TIMEOUT_S=str(max(300.0, 4 * args.think[1])),
            **({"DATABASE_SCHEMA": schema} if schema else {}),
        )
        env.update(dict(kv.split("=", 1) for kv in args.server_env))
        server = ServerProcess("sessions", [sys.executable, "-m", "service.app"], port, env, workdir)
        started.append(server)
        await asyncio.to_thread(server.wait_healthy)
        load0 = os.getloadavg()
        result = await phases(args, server)
        server.stop()
        return {
            "config": {
                "sessions": args.sessions,
                "think_s": list(args.think),
                "duration_s": args.duration,
                "connect_rate_per_s": args.connect_rate,
                "max_concurrent_envs": int(env["MAX_CONCURRENT_ENVS"]),
                "server_env": args.server_env,
                "database": "postgresql" if schema else "sqlite (WAL, synchronous=FULL)",
                "workers": 1,
                "generator_open_file_limit": list(limits),
                "commit": git_commit(),
                "cpus": os.cpu_count(),
                "loadavg_before": [round(x, 2) for x in load0],
                "cpu_pressure_at_end": cpu_pressure(),
                "loadavg_after": [round(x, 2) for x in os.getloadavg()],
            },
            "results": result,
            "targets_met": targets_met(result),
        }
    finally:
        for s in started:
            s.stop()
        if schema is not None:
            with contextlib.suppress(Exception):
                await pg_schema(database_url, "drop", schema)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.sessions", description=__doc__.split("\n\n")[0])
    p.add_argument("--sessions", type=int, default=4096, help="concurrent WebSocket sessions (default 4096)")
    p.add_argument("--think-s", default="1,5", help="think time between steps, uniform in LOW,HIGH seconds")
    p.add_argument("--duration", type=float, default=60.0, help="seconds of play in the active phase (default 60)")
    p.add_argument("--connect-rate", type=float, default=500.0, help="sockets opened (and resumed) per second")
    p.add_argument("--settle-s", type=float, default=3.0, help="wait before reading memory after a phase")
    p.add_argument("--max-concurrent-envs", type=int, default=None, help="the server's cap (default sessions + 8)")
    p.add_argument("--database-url", default=None, help="PostgreSQL URL (a fresh schema); default a SQLite file")
    p.add_argument("--server-env", action="append", default=[], metavar="NAME=VALUE", help="a setting for the server")
    p.add_argument("--json-out", type=Path, default=None)
    args = p.parse_args(argv)
    if any("=" not in kv for kv in args.server_env):
        p.error("--server-env takes NAME=VALUE")
    try:
        low, high = (float(x) for x in args.think_s.split(","))
    except ValueError:
        p.error("--think-s is LOW,HIGH in seconds, e.g. 1,5")
    if args.sessions < 1 or args.duration <= 0 or args.connect_rate <= 0 or not 0 <= low <= high:
        p.error("--sessions, --duration and --connect-rate must be positive and --think-s LOW <= HIGH")
    args.think = (low, high)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="ecomm-bench-sessions-"))
    started: list[ServerProcess] = []
    try:
        try:
            import uvloop

            report = uvloop.run(run(args, workdir, started))
        except ImportError:
            report = asyncio.run(run(args, workdir, started))
        text = json.dumps(report, indent=2)
        print(text)
        if args.json_out is not None:
            args.json_out.write_text(text + "\n")
        return 0
    finally:
        for s in started:
            s.stop()
        shutil.rmtree(workdir, ignore_errors=True)
        log("sessions: servers stopped")


if __name__ == "__main__":
    sys.exit(main())
