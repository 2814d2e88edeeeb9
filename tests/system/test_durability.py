"""Durability under load: SIGKILL the server while 16 agents step, restart it, check nothing acknowledged
was lost, no episode is corrupt, and every agent resumes and finishes its episode.

What an agent records is only what it saw acknowledged (a 200 with ``metadata.step_index``). A step
whose request was in flight at the kill may or may not have been applied; the agent re-sends it with
the same ``request_id`` after the restart, and the server must answer with the stored result when it
had been applied (``replayed: true``, same index and reward) and apply it exactly once otherwise.

The database is read directly (plain SQL on ``episodes``/``transitions``/``grades``), so the check does
not depend on the service's repository code. The helpers here are shared with ``test_scale_out.py``.
"""

from __future__ import annotations

import json
import os
import random
import signal
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from bench.harness import STALLED_AFTER_S
from service import env as core
from service.settings import Settings
from tests.conftest import LiveServer
from tests.waiting import until

AGENTS = 16
KILL_AFTER_ACKS = 4 * AGENTS  # the server is killed once this many steps are acknowledged, with more in flight
MAX_REQUESTS_PER_AGENT = 400  # bounds the load loop even on a very fast machine
REPLY = "Thanks for your patience; we are looking into it."
STEADY: list[dict[str, Any]] = [
    {"lookup": "policy"},
    {"lookup": "order"},
    {"lookup": "customer"},
    {"add_tag": "Refund"},
    {"add_tag": "Damaged"},
    {"reply": REPLY},
    {"reassign_queue": "Returns"},
    {"decision": "request_info", "reply": "Could you send a photo of the item, please?"},
]
FINISHING: list[dict[str, Any]] = [
    {"decision": "reject", "reply": REPLY},
    {"decision": "approve_refund"},
    {"close_ticket": True, "reply": "Closing this, thank you."},
]


def next_action(rng: random.Random) -> dict[str, Any]:
    """Mostly steady actions, so episodes run long enough to be cut by the kill."""
    return rng.choice(FINISHING) if rng.random() < 0.06 else rng.choice(STEADY)


# ---- what the clients saw ----------------------------------------------------------------------


@dataclass
class Ack:
    episode_id: str
    step_index: int
    request_id: str
    action: dict[str, Any]
    reward: float
    done: bool


@dataclass
class AgentLog:
    agent: int
    acks: list[Ack] = field(default_factory=list)
    episodes: list[str] = field(default_factory=list)
    current: str | None = None  # episode not seen finished
    pending: tuple[str, dict[str, Any]] | None = None  # (request_id, action) sent, no answer
    errors: list[str] = field(default_factory=list)
    in_flight_was_applied: bool = False  # set on resume: the lost response's step had been stored


def token_for(episode_id: str) -> str:
    """The agent's own episode token for its chosen id: it can resume even when a reset's response was lost."""
    return f"secret-of-{episode_id}".ljust(40, "x")


def play(base_urls: list[str], log: AgentLog, stop: threading.Event, rng: random.Random) -> None:
    """reset → steps with a unique request_id each, until ``stop`` or the server goes away.

    With several ``base_urls`` every request goes to a random one of them.
    """
    clients = [httpx.Client(base_url=u, timeout=STALLED_AFTER_S) for u in base_urls]
    try:
        requests = 0
        n_episode = 0
        while not stop.is_set() and requests < MAX_REQUESTS_PER_AGENT:
            if log.current is None:
                episode_id = f"a{log.agent:02d}-e{n_episode:03d}"
                n_episode += 1
                args = {
                    "episode_id": episode_id,
                    "episode_token": token_for(episode_id),
                    "task_id": list(core.TASKS)[(log.agent + n_episode) % len(core.TASKS)],
                    "seed": rng.randrange(10_000),
                }
                try:
                    resp = rng.choice(clients).post("/reset", json=args)
                except httpx.TransportError:
                    # the reset may have been stored: the episode is resumed (or found absent) later
                    log.episodes.append(episode_id)
                    log.current = episode_id
                    return
                requests += 1
                if resp.status_code != 200:
                    log.errors.append(f"reset {resp.status_code} {resp.text[:200]}")
                    return
                log.episodes.append(episode_id)
                log.current = episode_id
            step_no = sum(1 for a in log.acks if a.episode_id == log.current) + 1
            request_id = f"{log.current}-r{step_no:03d}-{rng.randrange(10**6)}"
            action = next_action(rng)
            log.pending = (request_id, action)
            try:
                resp = rng.choice(clients).post(
                    "/step",
                    json={
                        "episode_id": log.current,
                        "episode_token": token_for(log.current),
                        "action": action,
                        "request_id": request_id,
                    },
                )
            except httpx.TransportError:
                return  # the server died with this step in flight: log.pending stays set
            requests += 1
            log.pending = None
            if resp.status_code == 200:
                body = resp.json()
                log.acks.append(
                    Ack(log.current, body["metadata"]["step_index"], request_id, action, body["reward"], body["done"])
                )
                if body["done"]:
                    log.current = None
            elif resp.status_code == 409 and resp.json()["type"].endswith("episode-finished"):
                log.current = None
            else:
                log.errors.append(f"step {resp.status_code} {resp.text[:200]}")
                return
    finally:
        for c in clients:
            c.close()


def run_agents(base_urls: list[str], acks: int, agents: int = AGENTS, kill: LiveServer | None = None) -> list[AgentLog]:
    """Agents in threads until ``acks`` steps are acknowledged (however long that takes: the state the
    test needs, not a time); then, if ``kill`` is given, SIGKILL that server's exact PID."""
    logs = [AgentLog(i) for i in range(agents)]
    stop = threading.Event()
    threads = [
        threading.Thread(target=play, args=(base_urls, log, stop, random.Random(log.agent)), daemon=True)
        for log in logs
    ]
    for t in threads:
        t.start()
    until(
        lambda: sum(len(log.acks) for log in logs) >= acks or not any(t.is_alive() for t in threads),
        f"{acks} steps acknowledged",
    )
    if kill is not None:
        os.kill(kill.proc.pid, signal.SIGKILL)  # a crash: no shutdown hooks run
        kill.proc.wait(timeout=STALLED_AFTER_S)
    stop.set()
    for t in threads:
        t.join(timeout=STALLED_AFTER_S)
    assert not any(t.is_alive() for t in threads), "an agent thread hung"
    return logs


# ---- what the database holds --------------------------------------------------------------------


@dataclass
class StoredEpisode:
    id: str
    task_id: str
    seed: int
    split: str
    status: str
    step_count: int
    state: dict[str, Any]
    transitions: list[dict[str, Any]]
    grades: int


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


async def load_database(settings: Settings) -> dict[str, StoredEpisode]:
    kwargs: dict[str, Any] = {}
    if settings.database_schema:
        kwargs["connect_args"] = {"server_settings": {"search_path": settings.database_schema}}
    engine = create_async_engine(settings.database_url, **kwargs)
    try:
        async with engine.connect() as conn:
            episodes = (
                await conn.execute(text("SELECT id, task_id, seed, split, status, step_count, state FROM episodes"))
            ).all()
            transitions = (
                await conn.execute(
                    text(
                        "SELECT episode_id, step_index, request_id, action, reward, done FROM transitions "
                        "ORDER BY episode_id, step_index"
                    )
                )
            ).all()
            grades = (await conn.execute(text("SELECT episode_id, grader_version FROM grades"))).all()
    finally:
        await engine.dispose()
    out = {
        e.id: StoredEpisode(e.id, e.task_id, e.seed, e.split, e.status, e.step_count, _json(e.state), [], 0)
        for e in episodes
    }
    for t in transitions:
        out[t.episode_id].transitions.append(
            {
                "step_index": t.step_index,
                "request_id": t.request_id,
                "action": _json(t.action),
                "reward": t.reward,
                "done": bool(t.done),
            }
        )
    for g in grades:
        if g.grader_version == core.GRADER_VERSION:
            out[g.episode_id].grades += 1
    return out


def assert_not_corrupt(ep: StoredEpisode) -> None:
    """Indices 1..n, step_count == n, rewards and the state snapshot equal a replay, status/grade agree."""
    indices = [t["step_index"] for t in ep.transitions]
    assert indices == list(range(1, len(indices) + 1)), (ep.id, indices)
    assert ep.step_count == len(indices), (ep.id, ep.step_count, len(indices))
    request_ids = [t["request_id"] for t in ep.transitions if t["request_id"] is not None]
    assert len(request_ids) == len(set(request_ids)), (ep.id, "a request_id applied twice")
    actions = [core.Action.model_validate(t["action"]) for t in ep.transitions]
    state, _ = core.reset(ep.task_id, ep.seed, ep.split)
    for t, action in zip(ep.transitions, actions, strict=True):
        result = core.step(state, action)
        state = result.state
        assert (t["reward"], t["done"]) == (result.reward, result.done), (ep.id, t["step_index"])
    assert core.replay(ep.task_id, ep.seed, ep.split, actions).as_json() == ep.state == state.as_json(), ep.id
    assert ep.status == ("done" if state.done else "active"), ep.id
    assert ep.grades == (1 if state.done else 0), (ep.id, ep.grades)


def assert_acks_stored(logs: list[AgentLog], db: dict[str, StoredEpisode]) -> int:
    """Every acknowledged step is stored at its index with the same request_id, action and reward."""
    n = 0
    for log in logs:
        for ack in log.acks:
            ep = db.get(ack.episode_id)
            assert ep is not None, f"acknowledged episode {ack.episode_id} lost"
            assert ack.step_index <= len(ep.transitions), f"acknowledged step {ack} lost (stored {len(ep.transitions)})"
            t = ep.transitions[ack.step_index - 1]
            expected_action = core.Action.model_validate(ack.action).as_json()
            assert (t["request_id"], t["action"], t["reward"], t["done"]) == (
                ack.request_id,
                expected_action,
                ack.reward,
                ack.done,
            ), (ack, t)
            n += 1
    return n


# ---- resuming after the restart -----------------------------------------------------------------


def resume_and_finish(base_urls: list[str], log: AgentLog, db: dict[str, StoredEpisode], rng: random.Random) -> None:
    """Re-attach to the unfinished episode, re-send a lost step with its request_id, play to the end."""
    episode_id = log.current
    if episode_id is None:
        return
    clients = [httpx.Client(base_url=u, timeout=STALLED_AFTER_S) for u in base_urls]
    try:
        if episode_id not in db:  # the reset itself was in flight and not stored: nothing to resume
            resp = clients[0].post(
                "/reset", json={"episode_id": episode_id, "resume": True, "episode_token": token_for(episode_id)}
            )
            assert resp.status_code == 404, resp.text
            return
        resp = rng.choice(clients).post(
            "/reset", json={"episode_id": episode_id, "resume": True, "episode_token": token_for(episode_id)}
        )
        assert resp.status_code == 200, resp.text
        body = resp.json()
        stored = db[episode_id]
        assert body["metadata"]["resumed"] is True and body["metadata"]["step_count"] == stored.step_count, body[
            "metadata"
        ]
        done = body["done"]
        if log.pending is not None:
            request_id, action = log.pending
            applied = next((t for t in stored.transitions if t["request_id"] == request_id), None)
            resp = rng.choice(clients).post(
                "/step",
                json={
                    "episode_id": episode_id,
                    "episode_token": token_for(episode_id),
                    "action": action,
                    "request_id": request_id,
                },
            )
            assert resp.status_code == 200, resp.text
            meta = resp.json()["metadata"]
            if applied is not None:  # it was applied before the crash: the stored result, nothing applied again
                log.in_flight_was_applied = True
                assert meta["replayed"] is True and meta["step_index"] == applied["step_index"], meta
                assert resp.json()["reward"] == applied["reward"]
            else:
                assert meta["replayed"] is False and meta["step_index"] == stored.step_count + 1, meta
            log.acks.append(
                Ack(episode_id, meta["step_index"], request_id, action, resp.json()["reward"], resp.json()["done"])
            )
            done = resp.json()["done"]
        k = 0
        while not done:
            k += 1
            assert k <= 100, f"{episode_id} never finished"
            action = next_action(rng)
            request_id = f"{episode_id}-resumed-{k}"
            resp = rng.choice(clients).post(
                "/step",
                json={
                    "episode_id": episode_id,
                    "episode_token": token_for(episode_id),
                    "action": action,
                    "request_id": request_id,
                },
            )
            assert resp.status_code == 200, resp.text
            body = resp.json()
            log.acks.append(
                Ack(episode_id, body["metadata"]["step_index"], request_id, action, body["reward"], body["done"])
            )
            done = body["done"]
        log.current = None
        grade = rng.choice(clients).get(
            "/grader", params={"episode_id": episode_id}, headers={"X-Episode-Token": token_for(episode_id)}
        )
        assert grade.status_code == 200 and 0.0 <= grade.json()["score"] <= 1.0, grade.text
    finally:
        for c in clients:
            c.close()


def resume_all(base_urls: list[str], logs: list[AgentLog], db: dict[str, StoredEpisode]) -> None:
    failures: list[BaseException] = []

    def run(log: AgentLog) -> None:
        try:
            resume_and_finish(base_urls, log, db, random.Random(1000 + log.agent))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test thread
            failures.append(exc)

    threads = [threading.Thread(target=run, args=(log,), daemon=True) for log in logs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=STALLED_AFTER_S)
    assert not any(t.is_alive() for t in threads), "a resuming agent hung"
    if failures:
        raise failures[0]


# ---- the test -----------------------------------------------------------------------------------


async def test_sigkill_under_load_loses_nothing_acknowledged(settings: Settings, tmp_path: Path) -> None:
    server = LiveServer(settings, tmp_path / "before.log")
    try:
        logs = run_agents([server.url], KILL_AFTER_ACKS, kill=server)
    finally:
        server.stop()  # already dead; closes the log
    assert server.proc.returncode == -signal.SIGKILL
    errors = [e for log in logs for e in log.errors]
    assert not errors, errors[:5]
    acked = sum(len(log.acks) for log in logs)
    assert acked >= KILL_AFTER_ACKS, f"only {acked} steps acknowledged before the kill: the load did not run"

    db = await load_database(settings)  # before any restart: what the crash left on disk
    for ep in db.values():
        assert_not_corrupt(ep)
    assert assert_acks_stored(logs, db) == acked

    server = LiveServer(settings, tmp_path / "after.log")
    try:
        resume_all([server.url], logs, db)
    finally:
        server.stop()
    final = await load_database(settings)
    for ep in final.values():
        assert_not_corrupt(ep)
    assert assert_acks_stored(logs, final) == sum(len(log.acks) for log in logs)
    played = {e for log in logs for e in log.episodes if e in final}
    assert all(final[e].status == "done" for e in played), [e for e in played if final[e].status != "done"]
    assert set(final) == played  # nothing stored that no agent created
    in_flight_applied = sum(log.in_flight_was_applied for log in logs)
    print(
        f"\ndurability[{settings.database_url.split(':')[0]}]: {acked} steps acknowledged before SIGKILL, "
        f"{sum(1 for log in logs if log.pending)} in flight ({in_flight_applied} of them had been applied), "
        f"{len(played)} episodes, all finished after restart"
    )
