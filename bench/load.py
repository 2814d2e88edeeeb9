"""Load benchmark: N scripted agents playing whole episodes against our server, the OpenEnv peer
and a no-op ceiling, side by side in one run, on 127.0.0.1 only. Prints one JSON document.

    .venv/bin/python -m bench.load                       # 64 agents, 10 s per measurement, 3 rounds
    .venv/bin/python -m bench.load --database-url postgresql+asyncpg://postgres@127.0.0.1:5432/test --workers 2

What is measured (each a "target"; every target runs once per round, rounds interleave so that
background noise hits all of them alike, and the report gives the median over rounds):

- ``ours/http``, ``ours/ws`` — ``python -m service.app`` (one uvicorn worker; ``--workers N`` sets
  ``WORKERS=N``: N worker processes, each building the app) on a fresh SQLite file or PostgreSQL
  schema. An episode is ``POST /reset`` → ``POST /step`` until ``done`` → ``GET /grader``; over WS it
  is a ``reset`` frame → ``step`` frames on the agent's long-lived socket → ``GET /grader``.
- ``peer/ws`` — openenv 0.10's own ``create_app`` over our core, in memory (``bench.reference_server``),
  same agents, same episodes over ``/ws``, ``GET /grader`` from memory.
- ``ceiling/http``, ``ceiling/ws`` — Litestar routes that do nothing (``bench.noop_app``) served the
  same way; agents replay recorded episodes of the same tasks (same request bodies and counts).

Agents are the heuristic reference agent of each task's family (one per episode; the store desk's plays its
tool calls), tasks round-robin over ``GET /tasks``, split
``train``. Every target gets ``--warmup`` seconds that are not counted, then ``--duration`` seconds
(or fewer if ``--max-requests`` is reached) whose completed requests are counted. Step latency is
client-side: request written → response parsed. One generator process (asyncio, uvloop, a minimal
keep-alive HTTP/1.1 client and ``websockets``) drives everything; the servers are subprocesses in
their own sessions and are stopped by PID (process group = that PID) at the end, even on error.
The report carries the CPU used by the generator, by the server under test and by everything else
on the machine during each window, so a noisy or generator-bound measurement is visible.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import random
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bench.harness import CLK_TCK, HOST, ServerProcess, free_port, pg_schema
from service.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
MAX_EPISODE_STEPS = 64  # far above any task's max_steps: a longer episode is an error
STOP_GRACE_S = 10.0  # in-flight requests get this long to finish after a window closes
KEEPALIVE_REUSE_S = 4.0  # below uvicorn's default --timeout-keep-alive of 5 s


# ------------------------------------------------------------------------------- servers


class ExternalServer:
    """``--ours-url``: a server this script did not start (never stopped, CPU not measured)."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        if parts.hostname not in ("127.0.0.1", "localhost"):
            raise SystemExit("--ours-url must point at 127.0.0.1: load only ever targets loopback")
        self.name, self.port, self.url = "ours", parts.port or 80, f"http://{HOST}:{parts.port or 80}"

    def cpu_seconds(self) -> float:
        return 0.0

    def rss_mb(self) -> float | None:
        return None


def machine_busy_seconds() -> float:
    """CPU seconds (all cores) the machine spent not idle, from /proc/stat."""
    with open("/proc/stat") as f:
        parts = [int(x) for x in f.readline().split()[1:]]
    idle = parts[3] + (parts[4] if len(parts) > 4 else 0)
    return (sum(parts[:8]) - idle) / CLK_TCK


# --------------------------------------------------------------------------- HTTP client


class HttpError(Exception):
    pass


class HttpConnection:
    """One keep-alive HTTP/1.1 connection. Far cheaper per request than a general client, which
    keeps the generator from being the bottleneck."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self._head = f"Host: {host}:{port}\r\n"
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.last_used = 0.0

    async def request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
        # uvicorn closes keep-alive connections idle for 5 s (its default): reconnect before that,
        # and retry once when a reused connection turns out closed before any byte of the answer.
        if self.writer is not None and time.monotonic() - self.last_used > KEEPALIVE_REUSE_S:
            await self.close()
        reused = self.writer is not None
        try:
            return await self._request(method, path, body)
        except (asyncio.IncompleteReadError, ConnectionError) as exc:
            partial = getattr(exc, "partial", b"")
            if not reused or partial:
                raise
            await self.close()
            return await self._request(method, path, body)

    async def _request(self, method: str, path: str, body: bytes | None) -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        head = f"{method} {path} HTTP/1.1\r\n{self._head}"
        if body is not None:
            head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        self.writer.write(head.encode("latin-1") + b"\r\n" + (body or b""))
        raw = await self.reader.readuntil(b"\r\n\r\n")
        lines = raw.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        length, chunked, close = None, False, False
        for line in lines[1:]:
            name, _, value = line.partition(":")
            name = name.strip().lower()
            if name == "content-length":
                length = int(value)
            elif name == "transfer-encoding" and "chunked" in value.lower():
                chunked = True
            elif name == "connection" and "close" in value.lower():
                close = True
        if chunked:
            data = bytearray()
            while True:
                size = int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16)
                chunk = await self.reader.readexactly(size + 2)
                if size == 0:
                    break
                data += chunk[:-2]
            payload = bytes(data)
        elif length is not None:
            payload = await self.reader.readexactly(length)
        else:
            raise HttpError(f"{method} {path}: response without length")
        if close:
            await self.close()
        self.last_used = time.monotonic()
        return status, payload

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            with contextlib.suppress(Exception):
                await self.writer.wait_closed()
        self.reader = self.writer = None


# ------------------------------------------------------------------------------ episodes


@dataclass
class Window:
    """Counters for one measurement; only completions inside [start, end] are counted."""

    start: float
    deadline: float
    max_requests: int
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    end: float | None = None
    requests_sent: int = 0
    step_ms: list[float] = field(default_factory=list)
    reset_ms: list[float] = field(default_factory=list)
    grader_ms: list[float] = field(default_factory=list)
    episodes: int = 0
    episode_steps: int = 0
    family_step_ms: dict[str, list[float]] = field(default_factory=dict)  # step latencies per task family
    errors: int = 0
    error_samples: list[str] = field(default_factory=list)

    def may_send(self) -> bool:
        if self.stop.is_set():
            return False
        now = time.perf_counter()
        if now >= self.deadline or self.requests_sent >= self.max_requests:
            self.close(now)
            return False
        self.requests_sent += 1
        return True

    def close(self, now: float) -> None:
        if not self.stop.is_set():
            self.end = now
            self.stop.set()

    def counts(self, t: float) -> bool:
        return t >= self.start and (self.end is None or t <= self.end)

    def record(self, bucket: list[float], t0: float, family: str | None = None) -> None:
        t1 = time.perf_counter()
        if self.counts(t1):
            bucket.append((t1 - t0) * 1000.0)
            if family is not None:
                self.family_step_ms.setdefault(family, []).append((t1 - t0) * 1000.0)

    def error(self, message: str) -> None:
        # every error counts, warm-up included: the run must be clean, not just its window
        self.errors += 1
        if len(self.error_samples) < 5 and not any(m[:100] == message[:100] for m in self.error_samples):
            self.error_samples.append(message)


class Stopped(Exception):
    """The window closed; abandon the episode quietly."""


class Schedule:
    """Which (task, seed) agent ``i`` plays as its ``k``-th episode: tasks round-robin, seeds spread."""

    def __init__(self, tasks: list[str]) -> None:
        self.tasks = tasks

    def pick(self, agent: int, k: int) -> tuple[str, int]:
        return self.tasks[(agent + k) % len(self.tasks)], agent * 7919 + k


def agent_observation(observation: dict[str, Any], reward: Any, done: Any) -> Any:
    """The wire observation as the core's ``Observation`` (extension keys such as episode_id dropped)."""
    from service.env import Observation

    fields = Observation.model_fields
    return Observation.model_validate(
        {**{k: v for k, v in observation.items() if k in fields}, "reward": reward, "done": bool(done)}
    )


def episode_id_of(result: dict[str, Any]) -> str:
    meta = result.get("metadata") or {}
    episode_id = meta.get("episode_id") or result["observation"].get("episode_id")
    if not episode_id:
        raise HttpError("reset result carries no episode_id")
    return episode_id


class Player:
    """One agent: plays episodes back to back over one transport until the window closes."""

    def __init__(
        self,
        index: int,
        target: Target,
        window: Window,
        schedule: Schedule,
        scripts: dict[Any, list[bytes]],
        think_ms: float = 0.0,
    ) -> None:
        self.index, self.target, self.window = index, target, window
        self.schedule, self.scripts = schedule, scripts
        self.think_s = think_ms / 1000.0
        self.rng = random.Random(index)
        self.http = HttpConnection(HOST, target.port)
        self.ws: Any = None

    # -- transport primitives (each checks the window, times itself, raises on a bad answer)

    async def http_json(
        self, method: str, path: str, body: bytes | None, bucket: list[float], family: str | None = None
    ) -> dict[str, Any]:
        if not self.window.may_send():
            raise Stopped
        t0 = time.perf_counter()
        status, payload = await self.http.request(method, path, body)
        result = json.loads(payload)
        self.window.record(bucket, t0, family)
        if status != 200:
            raise HttpError(f"{method} {path.split('?')[0]} -> {status}: {payload[:200]!r}")
        return result

    async def ws_frame(self, frame: str, bucket: list[float], family: str | None = None) -> dict[str, Any]:
        if not self.window.may_send():
            raise Stopped
        if self.ws is None:
            from websockets.asyncio.client import connect

            # websockets' defaults (permessage-deflate on, like openenv's own client)
            self.ws = await connect(f"ws://{HOST}:{self.target.port}/ws", max_size=2**24, open_timeout=30)
        t0 = time.perf_counter()
        await self.ws.send(frame)
        reply = json.loads(await self.ws.recv())
        self.window.record(bucket, t0, family)
        if reply.get("type") != "observation":
            raise HttpError(f"ws {json.loads(frame)['type']} -> {json.dumps(reply)[:200]}")
        return reply["data"]

    async def think(self) -> None:
        """Simulated agent (LLM) time between steps: think_ms on average, uniform ±50%."""
        if self.think_s > 0:
            await asyncio.sleep(self.think_s * self.rng.uniform(0.5, 1.5))

    # -- one episode

    async def play_real(self, k: int) -> None:
        from service.env.agents import make_agent

        task_id, seed = self.schedule.pick(self.index, k)
        reset_body = {"task_id": task_id, "seed": seed, "split": "train"}
        w = self.window
        if self.target.transport == "http":
            result = await self.http_json("POST", "/reset", json.dumps(reset_body).encode(), w.reset_ms)
        else:
            result = await self.ws_frame(json.dumps({"type": "reset", "data": reset_body}), w.reset_ms)
        episode_id = episode_id_of(result)
        agent = make_agent("heuristic", seed, result["observation"]["ticket_id"])  # the family's own heuristic
        family = task_family(task_id)
        steps = 0
        while not result["done"]:
            if steps >= MAX_EPISODE_STEPS:
                raise HttpError(f"episode {episode_id} not done after {steps} steps")
            action = agent.act(agent_observation(result["observation"], result["reward"], result["done"]))
            await self.think()
            payload = action.model_dump(mode="json", exclude_defaults=True)
            if self.target.transport == "http":
                body = json.dumps({"episode_id": episode_id, "action": payload}).encode()
                result = await self.http_json("POST", "/step", body, w.step_ms, family)
            else:
                result = await self.ws_frame(json.dumps({"type": "step", "data": payload}), w.step_ms, family)
            steps += 1
        grade = await self.http_json("GET", f"/grader?episode_id={episode_id}", None, w.grader_ms)
        if not isinstance(grade.get("score"), (int, float)):
            raise HttpError(f"grader answered without a score: {json.dumps(grade)[:200]}")
        self.finished(steps)

    async def play_replay(self, k: int) -> None:
        """Ceiling: the same requests a real episode of this (task, seed) sends, answers ignored."""
        task_id, seed = self.schedule.pick(self.index, k)
        script = self.scripts[(task_id, seed % SCRIPT_SEEDS)]
        w = self.window
        reset_body = {"task_id": task_id, "seed": seed, "split": "train"}
        episode_id = "0" * 32
        family = task_family(task_id)
        if self.target.transport == "http":
            await self.http_json("POST", "/reset", json.dumps(reset_body).encode(), w.reset_ms)
            for action in script:
                await self.think()
                body = b'{"episode_id":"' + episode_id.encode() + b'","action":' + action + b"}"
                await self.http_json("POST", "/step", body, w.step_ms, family)
        else:
            await self.ws_frame(json.dumps({"type": "reset", "data": reset_body}), w.reset_ms)
            for action in script:
                await self.think()
                await self.ws_frame('{"type":"step","data":' + action.decode() + "}", w.step_ms, family)
        await self.http_json("GET", f"/grader?episode_id={episode_id}", None, w.grader_ms)
        self.finished(len(script))

    def finished(self, steps: int) -> None:
        if self.window.counts(time.perf_counter()):
            self.window.episodes += 1
            self.window.episode_steps += steps

    async def run(self) -> None:
        play = self.play_replay if self.target.kind == "ceiling" else self.play_real
        k = 0
        try:
            while not self.window.stop.is_set():
                try:
                    await play(k)
                except Stopped:
                    break
                except Exception as exc:  # noqa: BLE001 - count it, reconnect, go on
                    self.window.error(f"{type(exc).__name__}: {exc}"[:300])
                    await self.reset_transport()
                    await asyncio.sleep(0.05)
                k += 1
        finally:
            await self.reset_transport(polite=True)

    async def reset_transport(self, polite: bool = False) -> None:
        await self.http.close()
        if self.ws is not None:
            ws, self.ws = self.ws, None
            with contextlib.suppress(Exception):
                if polite:
                    await ws.send('{"type":"close"}')
                await ws.close()


SCRIPT_SEEDS = 16


def task_family(task_id: str) -> str:
    """``store`` for the store desk's tasks, ``ticket`` for the others (decision and workflow)."""
    from service.env import TASKS

    task = TASKS.get(task_id)
    return "store" if task is not None and task.family == "store" else "ticket"


def record_scripts(tasks: list[str]) -> dict[tuple[str, int], list[bytes]]:
    """Action bodies of HeuristicAgent episodes played on the core in-process (for the ceiling)."""
    from service.env import TASKS, reset, step
    from service.env.agents import make_agent

    scripts: dict[tuple[str, int], list[bytes]] = {}
    for task_id in tasks:
        if task_id not in TASKS:
            continue
        for seed in range(SCRIPT_SEEDS):
            state, obs = reset(task_id, seed, "train")
            agent, actions = make_agent("heuristic", seed, state.ticket_id), []
            for _ in range(MAX_EPISODE_STEPS):
                action = agent.act(obs)
                actions.append(json.dumps(action.model_dump(mode="json", exclude_defaults=True)).encode())
                result = step(state, action)
                state, obs = result.state, result.observation
                if result.done:
                    break
            scripts[(task_id, seed)] = actions
    return scripts


# ---------------------------------------------------------------------------- measuring


@dataclass(frozen=True)
class Target:
    kind: str  # ours | peer | ceiling
    transport: str  # http | ws
    port: int
    server: ServerProcess | ExternalServer  # only its CPU and memory are read

    @property
    def name(self) -> str:
        return f"{self.kind}/{self.transport}"


def percentiles(samples: list[float]) -> dict[str, float | None]:
    if not samples:
        return {"p50": None, "p95": None, "p99": None, "max": None, "mean": None}
    s = sorted(samples)

    def q(p: float) -> float:
        return round(s[min(len(s) - 1, int(round(p * (len(s) - 1))))], 3)

    return {"p50": q(0.50), "p95": q(0.95), "p99": q(0.99), "max": round(s[-1], 3), "mean": round(sum(s) / len(s), 3)}


async def measure(
    target: Target,
    agents: int,
    warmup: float,
    duration: float,
    max_requests: int,
    schedule: Schedule,
    scripts: dict[Any, list[bytes]],
    think_ms: float = 0.0,
) -> dict[str, Any]:
    now = time.perf_counter()
    window = Window(start=now + warmup, deadline=now + warmup + duration, max_requests=max_requests)
    players = [Player(i, target, window, schedule, scripts, think_ms) for i in range(agents)]
    tasks = [asyncio.create_task(p.run()) for p in players]

    await asyncio.sleep(max(0.0, window.start - time.perf_counter()))
    cpu0 = (time.process_time(), target.server.cpu_seconds(), machine_busy_seconds(), time.perf_counter())
    await window.stop.wait()
    cpu1 = (time.process_time(), target.server.cpu_seconds(), machine_busy_seconds(), time.perf_counter())
    _, pending = await asyncio.wait(tasks, timeout=STOP_GRACE_S)
    for t in pending:
        t.cancel()
    await asyncio.gather(*pending, return_exceptions=True)

    end = window.end if window.end is not None else cpu1[3]
    elapsed = max(1e-9, end - window.start)
    wall = max(1e-9, cpu1[3] - cpu0[3])
    gen, srv, busy = (cpu1[i] - cpu0[i] for i in range(3))
    steps = len(window.step_ms)
    return {
        "target": target.name,
        "window_s": round(elapsed, 3),
        "steps": steps,
        "episodes": window.episodes,
        "requests": steps + len(window.reset_ms) + len(window.grader_ms),
        "steps_per_s": round(steps / elapsed, 1),
        "episodes_per_s": round(window.episodes / elapsed, 1),
        "mean_steps_per_episode": round(window.episode_steps / window.episodes, 2) if window.episodes else None,
        "step_latency_ms": percentiles(window.step_ms),
        # the ticket tasks and the store desk apart: their share of the window's steps and their latency
        "by_family": {
            f: {"steps_per_s": round(len(ms) / elapsed, 1), "step_latency_ms": percentiles(ms)}
            for f, ms in sorted(window.family_step_ms.items())
        },
        "reset_latency_ms": percentiles(window.reset_ms),
        "grader_latency_ms": percentiles(window.grader_ms),
        "errors": window.errors,
        "error_samples": window.error_samples,
        # CPU during the window, in cores (1.0 = one core fully busy)
        "cpu_cores": {
            "generator": round(gen / wall, 3),
            "server": round(srv / wall, 3),
            "other": round(max(0.0, busy - gen - srv) / wall, 3),
        },
        "server_cpu_ms_per_step": round(1000 * srv / steps, 4) if steps and srv else None,
        # the server stays up across rounds: a leak shows as growth from round to round
        "server_rss_mb": target.server.rss_mb(),
    }


def median(values: list[float]) -> float | None:
    vals = sorted(v for v in values if v is not None)
    if not vals:
        return None
    mid = len(vals) // 2
    return vals[mid] if len(vals) % 2 else (vals[mid - 1] + vals[mid]) / 2


def summarize(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Median over rounds of every headline number; the per-round values are kept alongside."""

    def med(path: tuple[str, ...]) -> Any:
        vals = []
        for r in rounds:
            v: Any = r
            for key in path:
                v = v[key]
            vals.append(v)
        m = median(vals)
        return round(m, 3) if m is not None else None

    return {
        "steps_per_s": med(("steps_per_s",)),
        "episodes_per_s": med(("episodes_per_s",)),
        "step_latency_ms": {k: med(("step_latency_ms", k)) for k in ("p50", "p95", "p99")},
        "reset_latency_ms": {k: med(("reset_latency_ms", k)) for k in ("p50", "p99")},
        "grader_latency_ms": {k: med(("grader_latency_ms", k)) for k in ("p50", "p99")},
        "mean_steps_per_episode": med(("mean_steps_per_episode",)),
        "by_family": {
            f: {
                "steps_per_s": med(("by_family", f, "steps_per_s")),
                "step_latency_ms": {k: med(("by_family", f, "step_latency_ms", k)) for k in ("p50", "p95", "p99")},
            }
            for f in sorted(set.intersection(*(set(r["by_family"]) for r in rounds)))
        },
        "errors": sum(r["errors"] for r in rounds),
        "error_samples": [s for r in rounds for s in r["error_samples"]][:5],
        "cpu_cores": {k: med(("cpu_cores", k)) for k in ("generator", "server", "other")},
        "server_cpu_ms_per_step": med(("server_cpu_ms_per_step",)),
        "server_rss_mb": max((r["server_rss_mb"] for r in rounds if r["server_rss_mb"] is not None), default=None),
        "rounds": [
            {k: r[k] for k in ("steps_per_s", "episodes_per_s", "errors", "window_s", "cpu_cores", "server_rss_mb")}
            | {"step_p99_ms": r["step_latency_ms"]["p99"]}
            for r in rounds
        ],
    }


def ratio(a: Any, b: Any) -> float | None:
    return round(a / b, 3) if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b else None


def steps_per_cpu_s(result: dict[str, Any]) -> float | None:
    """Steps per second of the server's CPU (median steps/s over median server cores)."""
    cores = result["cpu_cores"]["server"]
    return round(result["steps_per_s"] / cores, 1) if cores else None


def ratios(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """ours/peer and ours/ceiling for throughput (higher is better) and p99 (lower is better)."""
    out: dict[str, Any] = {}
    for transport in ("http", "ws"):
        ours = results.get(f"ours/{transport}")
        if ours is None:
            continue
        for other in ("peer/ws", f"ceiling/{transport}"):
            ref = results.get(other)
            if ref is None:
                continue
            out[f"ours/{transport} vs {other}"] = {
                "steps_per_s": ratio(ours["steps_per_s"], ref["steps_per_s"]),
                "episodes_per_s": ratio(ours["episodes_per_s"], ref["episodes_per_s"]),
                "step_p99": ratio(ours["step_latency_ms"]["p99"], ref["step_latency_ms"]["p99"]),
                # steps per second of server CPU: what each step costs the server, whatever share of the
                # machine each server got in its windows (on a busy machine that share decides steps_per_s)
                "steps_per_server_cpu_s": ratio(steps_per_cpu_s(ours), steps_per_cpu_s(ref)),
            }
    return out


# ------------------------------------------------------------------------------- wiring


def server_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "DATABASE_SCHEMA", "PORT", "HOST")}
    env.update(PYTHONUNBUFFERED="1", **extra)
    return env


def fetch_tasks(url: str) -> list[str]:
    with urllib.request.urlopen(url + "/tasks", timeout=10) as resp:  # noqa: S310 - loopback
        body = json.loads(resp.read())
    return [t["id"] for t in body["tasks"]]


def git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=5
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "service"], cwd=ROOT, capture_output=True, text=True, timeout=5
        )
        return out.stdout.strip() + ("+dirty(service)" if dirty.stdout.strip() else "")
    except OSError:
        return None


def log(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


@dataclass
class Lineup:
    """The servers of one invocation (all stay up for the whole run; idle ones cost nothing)."""

    ours: ServerProcess | ExternalServer
    peer: ServerProcess | None
    ceiling: ServerProcess | None
    started: list[ServerProcess]
    command: list[str]
    settings: Settings  # what ours is served with (service.app.serve)

    def targets(self, transports: list[str]) -> list[Target]:
        targets = [Target("ours", t, self.ours.port, self.ours) for t in transports]
        if self.peer is not None:
            targets.append(Target("peer", "ws", self.peer.port, self.peer))
        if self.ceiling is not None:
            targets += [Target("ceiling", t, self.ceiling.port, self.ceiling) for t in transports]
        return targets


async def start_lineup(
    args: argparse.Namespace, database_url: str, schema: str | None, servers: list[ServerProcess], workdir: Path
) -> Lineup:
    """Ours (or ``--ours-url``), the OpenEnv peer and the no-op ceiling, healthy."""
    py, log_level = sys.executable, args.log_level.upper()
    port = free_port()
    env = server_env(
        DATABASE_URL=database_url,
        HOST=HOST,
        PORT=str(port),
        LOG_LEVEL=log_level,
        WORKERS=str(args.workers),
        MAX_CONCURRENT_ENVS=str(max(256, 2 * args.agents)),
        **({"DATABASE_SCHEMA": schema} if schema else {}),
    )
    cmd = [py, "-m", "service.app"]
    started: list[ServerProcess] = []
    ours: ServerProcess | ExternalServer
    if args.ours_url:  # drive a server someone else started (e.g. under a profiler)
        ours = ExternalServer(args.ours_url)
    else:
        ours = ServerProcess("ours", cmd, port, env, workdir)
        started.append(ours)
    peer = ceiling = None
    if not args.no_peer:
        p = free_port()
        peer = ServerProcess(
            "peer",
            [py, "-m", "bench.reference_server", "--host", HOST, "--port", str(p)],
            p,
            server_env(LOG_LEVEL=log_level, ENABLE_WEB_INTERFACE="false"),
            workdir,
        )
        started.append(peer)
    if not args.no_ceiling:
        p = free_port()
        ceiling = ServerProcess(
            "ceiling",
            [py, "-m", "bench.noop_app", "--host", HOST, "--port", str(p)],
            p,
            server_env(LOG_LEVEL=log_level),
            workdir,
        )
        started.append(ceiling)
    servers += started
    for s in started:
        await asyncio.to_thread(s.wait_healthy)
    log("servers up: " + ", ".join(f"{s.name}=pid {s.proc.pid} port {s.port}" for s in started))
    return Lineup(ours, peer, ceiling, started, cmd, Settings.from_env(env))


async def measure_rounds(
    args: argparse.Namespace, lineup: Lineup, transports: list[str]
) -> dict[str, list[dict[str, Any]]]:
    """Every target once per round, interleaved, so slow drift of the machine hits all alike."""
    tasks = await asyncio.to_thread(fetch_tasks, lineup.ours.url)
    schedule = Schedule(tasks)
    scripts = record_scripts(tasks) if lineup.ceiling is not None else {}
    targets = lineup.targets(transports)
    per_round: dict[str, list[dict[str, Any]]] = {t.name: [] for t in targets}
    for r in range(args.rounds):
        for target in targets:
            res = await measure(
                target, args.agents, args.warmup, args.duration, args.max_requests, schedule, scripts, args.think_ms
            )
            per_round[target.name].append(res)
            log(
                f"round {r + 1}/{args.rounds} {target.name}: {res['steps_per_s']} steps/s, "
                f"p99 {res['step_latency_ms']['p99']} ms, errors {res['errors']}, cpu {res['cpu_cores']}"
            )
    return per_round


def report_config(
    args: argparse.Namespace,
    lineup: Lineup,
    transports: list[str],
    database_url: str,
    load0: tuple[float, float, float],
) -> dict[str, Any]:
    is_pg = database_url.startswith("postgresql")
    served = lineup.settings
    return {
        "agents": args.agents,
        "think_ms": args.think_ms,
        "duration_s": args.duration,
        "warmup_s": args.warmup,
        "rounds": args.rounds,
        "max_requests_per_measurement": args.max_requests,
        "transports": transports,
        "database": "postgresql" if is_pg else "sqlite",
        "database_url": (
            urlsplit(database_url)._replace(netloc=urlsplit(database_url).hostname or "").geturl()
            if is_pg
            else f"sqlite file in a temp dir (journal_mode={served.sqlite_journal_mode}, "
            f"synchronous={served.sqlite_synchronous})"
        ),
        "access_log": served.access_log,
        "ws_per_message_deflate": served.ws_per_message_deflate,
        "workers": args.workers,
        "log_level": args.log_level.upper(),
        "ours_command": args.ours_url or f"WORKERS={args.workers} python " + " ".join(lineup.command[1:]),
        "server_pids": {s.name: s.proc.pid for s in lineup.started},
        "commit": git_commit(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "loadavg_before": [round(x, 2) for x in load0],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "notes": [
            "median over rounds; step latency client-side (request written -> response parsed)",
            "cpu_cores: CPU used during the window (1.0 = one core); 'other' = everything else on the machine",
            "server_rss_mb: resident memory of the server at the end of a window (max over rounds)",
            "peer = openenv create_app over our core, in memory, stepped in openenv's per-session threads",
            "ceiling = Litestar no-op routes, canned observation replies, replayed episodes",
        ],
    }


async def run(args: argparse.Namespace, servers: list[ServerProcess], workdir: Path) -> dict[str, Any]:
    """Start the lineup, measure every target for ``args.rounds`` interleaved rounds, report."""
    transports = [t.strip() for t in args.transports.split(",") if t.strip()]
    for t in transports:
        if t not in ("http", "ws"):
            raise SystemExit(f"--transports: unknown transport {t!r}; use http, ws or http,ws")
    database_url = args.database_url or f"sqlite+aiosqlite:///{workdir / 'ours.db'}"
    schema = "bench_" + secrets.token_hex(6) if database_url.startswith("postgresql") else None
    if schema is not None:
        await pg_schema(database_url, "create", schema)
    try:
        lineup = await start_lineup(args, database_url, schema, servers, workdir)
        load0 = os.getloadavg()
        per_round = await measure_rounds(args, lineup, transports)
        results = {name: summarize(rs) for name, rs in per_round.items()}
        config = report_config(args, lineup, transports, database_url, load0)
        return {"config": config, "results": results, "ratios": ratios(results)}
    finally:
        if schema is not None:
            for s in servers:
                if s.name == "ours":
                    s.stop()
            with contextlib.suppress(Exception):
                await pg_schema(database_url, "drop", schema)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m bench.load",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--agents", type=int, default=64, help="concurrent scripted agents (default 64)")
    p.add_argument(
        "--think-ms",
        type=float,
        default=0.0,
        help="mean agent think time between steps, ms (default 0: "
        "closed loop, measures saturation; e.g. 500 models agents waiting on an LLM)",
    )
    p.add_argument("--duration", type=float, default=10.0, help="counted seconds per measurement (default 10)")
    p.add_argument("--warmup", type=float, default=2.0, help="uncounted seconds before each measurement (default 2)")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds; the report gives medians (default 3)")
    p.add_argument("--max-requests", type=int, default=500_000, help="request cap per measurement, warm-up included")
    p.add_argument(
        "--database-url",
        default=None,
        help="ours against this database (default: fresh SQLite file); "
        "for PostgreSQL a fresh schema is created and dropped",
    )
    p.add_argument("--workers", type=int, default=1, help="uvicorn workers for ours (default 1)")
    p.add_argument("--transports", default="http,ws", help="for ours and the ceiling (default http,ws)")
    p.add_argument("--no-peer", action="store_true", help="skip the OpenEnv reference server")
    p.add_argument("--no-ceiling", action="store_true", help="skip the no-op ceiling")
    p.add_argument(
        "--ours-url",
        default=None,
        help="drive an already running server on 127.0.0.1 instead of "
        "starting one (for profiling; its CPU is not measured)",
    )
    p.add_argument("--log-level", default="INFO", help="LOG_LEVEL of every server (default INFO, the service default)")
    p.add_argument("--json-out", type=Path, default=None, help="also write the JSON report here")
    p.add_argument("--keep-logs", action="store_true", help="keep the server logs (path printed on stderr)")
    args = p.parse_args(argv)
    if args.agents < 1 or args.duration <= 0 or args.rounds < 1 or args.workers < 1 or args.warmup < 0:
        p.error("--agents, --duration, --rounds and --workers must be positive, --warmup >= 0")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="ecomm-bench-"))
    servers: list[ServerProcess] = []

    def on_signal(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_signal)
    failed = True
    try:
        try:
            import uvloop

            report = uvloop.run(run(args, servers, workdir))
        except ImportError:
            report = asyncio.run(run(args, servers, workdir))
        text = json.dumps(report, indent=2)
        print(text)
        if args.json_out is not None:
            args.json_out.write_text(text + "\n")
        failed = False
        return 0
    finally:
        for s in servers:
            s.stop()
        if failed or args.keep_logs:
            log(f"server logs kept in {workdir}")
            for s in servers:
                if failed:
                    log(f"--- {s.name} log tail ---\n{s.tail(1500)}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
