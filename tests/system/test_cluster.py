"""Three replicas behind HAProxy (round-robin, no stickiness) on one PostgreSQL, 64 agents — 32 over
HTTP with the evaluation client's own ``EnvClient`` (client/wire.py), 32 over WebSocket with a client
that reconnects and resumes — while one replica is SIGKILLed and restarted (``bench/cluster.py``).

Every step a client saw acknowledged is stored at its index with its action and reward, every
stored episode replays exactly, and every agent finishes the episode it was playing. What the
clients saw (errors by kind, reconnects, the longest time from a failure to the next success) is
printed and checked to have happened at all: a kill nobody noticed proved nothing.

Waits are on events: the kill comes after a number of acknowledged steps, the restart after more
steps were acknowledged by the survivors, the agents stop once the restarted replica is back in
rotation and has served again.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from bench.cluster import find_haproxy, running_cluster
from bench.harness import STALLED_AFTER_S
from client.wire import EnvClient, ServiceError
from service import env as core
from service.settings import Settings
from tests.conftest import PG_URL
from tests.system.test_durability import assert_not_corrupt, load_database, next_action, token_for

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(find_haproxy() is None, reason="needs HAProxy (Debian: apt-get install haproxy; .ci/run does)"),
    pytest.mark.skipif(
        PG_URL is None, reason="replicas share one PostgreSQL: set TEST_DATABASE_URL=postgresql+asyncpg://…"
    ),
]

HTTP_AGENTS = WS_AGENTS = 32
KILL_AFTER_ACKS = 300  # acknowledged steps before the kill ...
SURVIVE_ACKS = 300  # ... and after it, served by the two survivors, before the restart
AFTER_RESTART_ACKS = 300  # and after the restarted replica is back in rotation, before the agents stop
THINK_S = (0.01, 0.04)
TASKS = [t.id for t in core.TASKS.values() if t.family == "workflow"]


@dataclass
class Ack:
    episode_id: str
    step_index: int
    request_id: str | None
    action: dict[str, Any]
    reward: float
    done: bool


@dataclass
class Seen:
    """What one agent saw."""

    acks: list[Ack] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    reconnects: int = 0
    recovery_s: list[float] = field(default_factory=list)  # a failed call (or socket) -> its next success
    current: str | None = None


class Run:
    def __init__(self) -> None:
        self.acks = 0
        self.stop = asyncio.Event()
        self.progress = asyncio.Condition()

    async def acked(self, seen: Seen, ack: Ack) -> None:
        seen.acks.append(ack)
        async with self.progress:
            self.acks += 1
            self.progress.notify_all()

    async def until(self, acks: int) -> None:
        async with self.progress:
            await self.progress.wait_for(lambda: self.acks >= acks)


class CountingTransport(httpx.AsyncHTTPTransport):
    """The transport under EnvClient: counts what its retries hide (refused connections, 5xx)."""

    def __init__(self, seen: Seen) -> None:
        super().__init__()
        self.seen = seen

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        try:
            response = await super().handle_async_request(request)
        except httpx.TransportError as exc:
            self.seen.errors[f"http transport: {type(exc).__name__}"] += 1
            raise
        if response.status_code >= 500:
            self.seen.errors[f"http {response.status_code}"] += 1
        return response


def agent_obs(result: dict[str, Any]) -> core.Observation:
    fields = core.Observation.model_fields
    obs = {k: v for k, v in result["observation"].items() if k in fields}
    return core.Observation.model_validate({**obs, "reward": result.get("reward"), "done": bool(result["done"])})


async def http_reset(env: EnvClient, seen: Seen, episode_id: str, task: str | None, seed: int = 0) -> dict[str, Any]:
    """A reset with a chosen id and token (``task`` None: a resume), retried until it answers; a retry
    that finds its first attempt applied (409: the id is taken) resumes instead. EnvClient.reset is
    not retried by the client (a reset without a chosen id is not idempotent), so the agent does it."""
    resume = {"episode_id": episode_id, "episode_token": token_for(episode_id), "resume": True}
    body = resume if task is None else {**resume, "resume": False, "task_id": task, "seed": seed}
    failed_at = None
    while True:
        try:
            resp = await env.http.post("/reset", json=body)
            if resp.status_code == 409 and task is not None:
                resp = await env.http.post("/reset", json=resume)
            if resp.status_code == 200:
                if failed_at is not None:
                    seen.recovery_s.append(time.monotonic() - failed_at)
                return resp.json()
            seen.errors[f"reset {resp.status_code}"] += 1
        except httpx.TransportError as exc:
            seen.errors[f"reset {type(exc).__name__}"] += 1
        failed_at = failed_at or time.monotonic()
        await asyncio.sleep(0.2)


async def http_agent(index: int, url: str, run: Run) -> Seen:
    seen, rng = Seen(), random.Random(index)
    env = EnvClient(url)
    await env.http.aclose()
    env.http = httpx.AsyncClient(base_url=url, timeout=STALLED_AFTER_S, transport=CountingTransport(seen))
    try:
        k = 0
        while not run.stop.is_set():
            episode_id, k = f"h{index}-{k}-{rng.getrandbits(32):08x}", k + 1
            seen.current = episode_id
            env.http.headers["X-Episode-Token"] = token_for(episode_id)
            result = await http_reset(env, seen, episode_id, TASKS[index % len(TASKS)], index * 100 + k)
            steps = result["metadata"].get("step_count", 0)
            while not result["done"]:
                await asyncio.sleep(rng.uniform(*THINK_S))
                action = next_action(rng)
                t0, errors_before = time.monotonic(), sum(seen.errors.values())
                try:
                    result = await env.step(episode_id, action)  # EnvClient's own retries, same request_id
                    if sum(seen.errors.values()) > errors_before:  # it retried: how long until it got through
                        seen.recovery_s.append(time.monotonic() - t0)
                except ServiceError as exc:  # it gave up: find out whether the step was applied, go on
                    seen.errors[f"EnvClient gave up: HTTP {exc.status}"] += 1
                    result = await http_reset(env, seen, episode_id, None)  # a resume
                    steps = result["metadata"]["step_count"]
                    seen.recovery_s.append(time.monotonic() - t0)
                    continue
                meta = result["metadata"]
                assert meta["step_index"] == steps + 1, (episode_id, meta, steps)
                steps = meta["step_index"]
                ack = Ack(episode_id, steps, meta["request_id"], action, result["reward"], result["done"])
                await run.acked(seen, ack)
            seen.finished.append(episode_id)
            seen.current = None
    finally:
        await env.aclose()
    return seen


class WsAgent:
    """An agent on one socket through the balancer; when the socket dies it reconnects, resumes its
    episode and compares ``step_count`` with what it saw acknowledged: one more means the step in
    flight was applied (its observation is the resumed one), the same means it resends it."""

    def __init__(self, index: int, url: str, run: Run) -> None:
        self.index, self.url, self.run = index, url.replace("http://", "ws://") + "/ws", run
        self.seen, self.rng, self.ws = Seen(), random.Random(10_000 + index), None

    async def connect(self) -> None:
        from websockets.asyncio.client import connect

        while True:
            try:
                self.ws = await connect(self.url, compression=None, open_timeout=STALLED_AFTER_S)
                return
            except (OSError, TimeoutError) as exc:
                self.seen.errors[f"ws connect: {type(exc).__name__}"] += 1
            except Exception as exc:  # noqa: BLE001 - websockets' InvalidStatus (a 502/503 from the balancer)
                self.seen.errors[f"ws connect: {type(exc).__name__}"] += 1
            await asyncio.sleep(0.2)

    async def send(self, kind: str, data: dict[str, Any]) -> dict[str, Any]:
        assert self.ws is not None
        await self.ws.send(json.dumps({"type": kind, "data": data}))
        reply = json.loads(await asyncio.wait_for(self.ws.recv(), 30))
        if reply["type"] != "observation":
            raise RuntimeError(f"{kind}: {reply}")
        return reply["data"]

    async def recover(self, episode_id: str, reset: dict[str, Any]) -> dict[str, Any]:
        """A new socket and the episode resumed on it (or reset, if the reset never arrived)."""
        failed_at = time.monotonic()
        while True:
            self.seen.reconnects += 1
            await self.connect()
            try:
                try:
                    result = await self.send(
                        "reset", {"episode_id": episode_id, "resume": True, "episode_token": token_for(episode_id)}
                    )
                except RuntimeError as exc:
                    if "404" not in str(exc) and "not found" not in str(exc).lower():
                        raise
                    result = await self.send("reset", reset)
                self.seen.recovery_s.append(time.monotonic() - failed_at)
                return result
            except Exception as exc:  # noqa: BLE001 - the new socket failed too: count it, try again
                self.seen.errors[f"ws resume: {type(exc).__name__}"] += 1
                await asyncio.sleep(0.2)

    async def episode(self, k: int) -> None:
        episode_id = f"w{self.index}-{k}-{self.rng.getrandbits(32):08x}"
        self.seen.current = episode_id
        reset = {
            "episode_id": episode_id,
            "episode_token": token_for(episode_id),
            "task_id": TASKS[self.index % len(TASKS)],
            "seed": self.index * 100 + k,
        }
        try:
            result = await self.send("reset", reset)
        except Exception as exc:  # noqa: BLE001 - the socket died under the reset
            self.seen.errors[f"ws reset: {type(exc).__name__}"] += 1
            result = await self.recover(episode_id, reset)
        steps = result["metadata"].get("step_count", 0)
        while not result["done"]:
            await asyncio.sleep(self.rng.uniform(*THINK_S))
            action = next_action(self.rng)
            try:
                result = await self.send("step", action)
            except Exception as exc:  # noqa: BLE001 - the replica behind this socket died
                self.seen.errors[f"ws step: {type(exc).__name__}"] += 1
                result = await self.recover(episode_id, reset)
                if result["metadata"]["step_count"] == steps:
                    continue  # not applied: the next round sends a step again
                assert result["metadata"]["step_count"] == steps + 1, (episode_id, result["metadata"], steps)
                steps += 1  # applied before the socket died; its answer was lost, so it is not an ack
                continue
            assert result["metadata"]["step_index"] == steps + 1, (episode_id, result["metadata"], steps)
            steps += 1
            await self.run.acked(self.seen, Ack(episode_id, steps, None, action, result["reward"], result["done"]))
        self.seen.finished.append(episode_id)
        self.seen.current = None

    async def play(self) -> Seen:
        await self.connect()
        k = 0
        while not self.run.stop.is_set():
            await self.episode(k)
            k += 1
        assert self.ws is not None
        await self.ws.close()
        return self.seen


def recovery(seconds: list[float]) -> dict[str, Any]:
    ordered = sorted(seconds)
    return {
        "count": len(ordered),
        "median": round(ordered[len(ordered) // 2], 3) if ordered else None,
        "max": round(ordered[-1], 3) if ordered else None,
    }


def check_stored(seen: list[Seen], db: dict[str, Any]) -> int:
    n = 0
    for s in seen:
        for ack in s.acks:
            ep = db.get(ack.episode_id)
            assert ep is not None and ack.step_index <= len(ep.transitions), f"acknowledged step lost: {ack}"
            t = ep.transitions[ack.step_index - 1]
            assert (t["action"], t["reward"], t["done"]) == (
                core.Action.model_validate(ack.action).as_json(),
                ack.reward,
                ack.done,
            ), (ack, t)
            assert ack.request_id is None or t["request_id"] == ack.request_id, (ack, t)
            n += 1
    return n


async def test_a_replica_killed_under_64_agents_loses_no_acknowledged_step(
    tmp_path: Path, record_property: Any
) -> None:
    assert PG_URL is not None
    async with running_cluster(3, PG_URL, tmp_path) as cluster, asyncio.timeout(STALLED_AFTER_S):  # a safety net
        run = Run()
        agents = [asyncio.create_task(http_agent(i, cluster.url, run)) for i in range(HTTP_AGENTS)]
        agents += [asyncio.create_task(WsAgent(i, cluster.url, run).play()) for i in range(WS_AGENTS)]
        await run.until(KILL_AFTER_ACKS)
        killed = await asyncio.to_thread(cluster.kill, 1)
        killed_at, acks_at_kill = time.monotonic(), run.acks
        await run.until(acks_at_kill + SURVIVE_ACKS)
        await asyncio.to_thread(cluster.restart, 1)
        await asyncio.to_thread(cluster.wait_in_rotation)
        back_after = time.monotonic() - killed_at
        await run.until(run.acks + AFTER_RESTART_ACKS)
        run.stop.set()
        seen = await asyncio.gather(*agents)
        schema = cluster.schema
        settings = Settings(database_url=PG_URL, database_schema=schema)
        db = await load_database(settings)

    assert all(s.current is None for s in seen), "an agent stopped in the middle of an episode"
    stored = check_stored(seen, db)
    for episode_id in {e for s in seen for e in s.finished}:
        assert_not_corrupt(db[episode_id])
        assert db[episode_id].status == "done", episode_id
    errors = sum((s.errors for s in seen), Counter())
    http_rec = [r for s in seen[:HTTP_AGENTS] for r in s.recovery_s]
    ws_rec = [r for s in seen[HTTP_AGENTS:] for r in s.recovery_s]
    report = {
        "killed_replica_pid": killed,
        "acks_at_kill": acks_at_kill,
        "replica_back_in_rotation_s_after_kill": round(back_after, 2),
        "acknowledged_steps": stored,
        "episodes_finished": sum(len(s.finished) for s in seen),
        "client_errors": dict(errors.most_common()),
        "ws_reconnects": sum(s.reconnects for s in seen[HTTP_AGENTS:]),
        **{f"{kind}_recovery_s": recovery(rs) for kind, rs in (("http", http_rec), ("ws", ws_rec))},
    }
    print("\ncluster kill:", json.dumps(report))  # shown with -s; and in the JUnit XML report:
    record_property("clients_saw", json.dumps(report))
    assert stored >= KILL_AFTER_ACKS + SURVIVE_ACKS + AFTER_RESTART_ACKS
    assert report["ws_reconnects"] > 0, "no WebSocket was cut by the kill: the test proved nothing"
