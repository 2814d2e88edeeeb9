"""Scale-out: two server processes on ONE database serve the same episodes.

- An episode stepped alternately through both processes (each step to the other one) stays
  consistent: step indices, state, rewards and the final grade equal a sequential replay.
- 16 agents in 8 pairs, every request to a random process; the two agents of a pair race each step
  on their shared episode, half the time with distinct actions (competing agents), half the time
  with the same ``request_id`` (a duplicated delivery). Exactly one winner per step index, the loser
  gets 409 or the stored result, and the stored transitions are exactly the winners — none lost,
  none duplicated, every episode replays exactly.

PostgreSQL is the deployment this is for (runs when TEST_DATABASE_URL is set); the SQLite variant
(two processes on one file: WAL + BEGIN IMMEDIATE + busy_timeout) always runs.
"""

from __future__ import annotations

import random
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from bench.harness import STALLED_AFTER_S
from service import env as core
from service.settings import Settings
from tests.conftest import PG_URL, LiveServer, empty_database
from tests.system.test_durability import STEADY, assert_not_corrupt, load_database

PAIRS = 8
ROUNDS = 14  # per pair: a fixed workload (~220 step requests), so a slow, shared machine runs the same race
WORKFLOW = next(t.id for t in core.TASKS.values() if t.family == "workflow")
ENDINGS = [
    {"decision": "reject", "reply": "Sorry, this is outside the policy."},
    {"close_ticket": True, "reply": "Closing, thanks."},
]


@pytest.fixture(
    params=[
        "sqlite",
        pytest.param(
            "postgresql",
            marks=pytest.mark.skipif(
                PG_URL is None,
                reason="scale-out on PostgreSQL needs TEST_DATABASE_URL=postgresql+asyncpg://… (a server to share)",
            ),
        ),
    ]
)
async def shared_settings(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Settings]:
    async with empty_database(request.param, tmp_path, "shared.db") as s:
        yield s


@pytest.fixture
def two_servers(shared_settings: Settings, tmp_path: Path) -> Iterator[tuple[LiveServer, LiveServer]]:
    first = LiveServer(shared_settings, tmp_path / "a.log")
    try:
        second = LiveServer(shared_settings, tmp_path / "b.log")  # its startup migration finds head
    except BaseException:
        first.stop()
        raise
    try:
        assert first.proc.pid != second.proc.pid
        yield first, second
    finally:
        second.stop()
        first.stop()


async def test_episode_stepped_alternately_through_both_servers(
    two_servers: tuple[LiveServer, LiveServer], shared_settings: Settings
) -> None:
    token = "alt-secret-".ljust(40, "x")  # the chosen id's token, chosen too: both servers check it
    a, b = (
        httpx.Client(base_url=s.url, timeout=STALLED_AFTER_S, headers={"X-Episode-Token": token}) for s in two_servers
    )
    servers = [a, b]
    rng = random.Random(7)
    try:
        a.post(
            "/reset", json={"episode_id": "alt", "episode_token": token, "task_id": WORKFLOW, "seed": 11}
        ).raise_for_status()
        actions: list[dict[str, Any]] = []
        rewards: list[float] = []
        done = False
        while not done:
            here, there = servers[len(actions) % 2], servers[(len(actions) + 1) % 2]
            action = rng.choice(STEADY) if len(actions) < 12 else ENDINGS[1]
            resp = here.post("/step", json={"episode_id": "alt", "action": action, "request_id": f"alt-{len(actions)}"})
            assert resp.status_code == 200, resp.text
            body = resp.json()
            assert body["metadata"]["step_index"] == len(actions) + 1 and body["metadata"]["replayed"] is False
            actions.append(action)
            rewards.append(body["reward"])
            done = body["done"]
            # the other process sees the step at once
            assert there.get("/state", params={"episode_id": "alt"}).json()["step_count"] == len(actions)
            # and a retry through the other process is recognised there, not applied again
            again = there.post(
                "/step", json={"episode_id": "alt", "action": action, "request_id": f"alt-{len(actions) - 1}"}
            )
            assert again.status_code == 200 and again.json()["metadata"]["replayed"] is True, again.text
            assert (again.json()["reward"], again.json()["metadata"]["step_index"]) == (body["reward"], len(actions))
        grades = [s.get("/grader", params={"episode_id": "alt"}) for s in servers]
        assert all(g.status_code == 200 for g in grades) and grades[0].json() == grades[1].json()
    finally:
        a.close()
        b.close()
    replayed = core.replay(WORKFLOW, 11, "train", [core.Action.model_validate(x) for x in actions])
    assert replayed.rewards == tuple(rewards)
    assert grades[0].json()["score"] == core.grade_episode(replayed).score
    stored = (await load_database(shared_settings))["alt"]
    assert_not_corrupt(stored)
    assert [t["request_id"] for t in stored.transitions] == [f"alt-{i}" for i in range(len(actions))]


@dataclass
class Outcome:
    round: int
    episode_id: str
    request_id: str
    action: dict[str, Any]
    status: int
    body: dict[str, Any]


@dataclass
class Pair:
    index: int
    barrier: threading.Barrier = field(default_factory=lambda: threading.Barrier(2, timeout=STALLED_AFTER_S))
    lock: threading.Lock = field(default_factory=threading.Lock)
    episode_id: str | None = None
    episode_done: bool = False
    stop: bool = False
    outcomes: list[Outcome] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def pair_token(episode_id: str) -> str:
    """Both members of a pair step one chosen id, so they share its token."""
    return f"pair-secret-{episode_id}".ljust(40, "x")


def race(urls: list[str], pair: Pair, member: int) -> None:
    """One agent of a pair: every round both members step the shared episode at once."""
    clients = [httpx.Client(base_url=u, timeout=STALLED_AFTER_S) for u in urls]
    mine = random.Random(pair.index * 10 + member)
    try:
        episodes = 0
        for rnd in range(ROUNDS):
            if member == 0:
                with pair.lock:
                    if pair.episode_id is None or pair.episode_done:
                        pair.episode_id, pair.episode_done = f"p{pair.index}-e{episodes}", False
                        resp = mine.choice(clients).post(
                            "/reset",
                            json={
                                "episode_id": pair.episode_id,
                                "episode_token": pair_token(pair.episode_id),
                                "task_id": WORKFLOW,
                                "seed": rnd,
                            },
                        )
                        episodes += 1
                        if resp.status_code != 200:
                            pair.errors.append(f"reset {resp.status_code} {resp.text[:200]}")
                            pair.stop = True
            pair.barrier.wait()  # both see the same episode and stop flag
            if pair.stop:
                return
            shared = random.Random(pair.index * 100_000 + rnd)  # both members draw the same round plan
            duplicate = shared.random() < 0.5
            if duplicate:
                request_id = f"{pair.episode_id}-r{rnd}-dup"
                action = shared.choice(STEADY) if shared.random() > 0.08 else shared.choice(ENDINGS)
            else:
                request_id = f"{pair.episode_id}-r{rnd}-m{member}"
                action = mine.choice(STEADY) if mine.random() > 0.08 else mine.choice(ENDINGS)
            resp = mine.choice(clients).post(
                "/step",
                json={
                    "episode_id": pair.episode_id,
                    "episode_token": pair_token(pair.episode_id),
                    "action": action,
                    "request_id": request_id,
                },
            )
            body = resp.json()
            with pair.lock:
                pair.outcomes.append(Outcome(rnd, pair.episode_id, request_id, action, resp.status_code, body))
                if (
                    resp.status_code == 200
                    and body["done"]
                    or resp.status_code == 409
                    and body["type"].endswith("episode-finished")
                ):
                    pair.episode_done = True
                elif resp.status_code not in (200, 409):
                    pair.errors.append(f"step {resp.status_code} {resp.text[:300]}")
            pair.barrier.wait()  # the round is over for both
    except threading.BrokenBarrierError:
        pair.errors.append("barrier broken (the other member failed)")
    except BaseException as exc:  # noqa: BLE001 - reported by the test
        pair.errors.append(f"{type(exc).__name__}: {exc}")
        pair.barrier.abort()
    finally:
        for c in clients:
            c.close()


async def test_racing_agents_across_two_servers(
    two_servers: tuple[LiveServer, LiveServer], shared_settings: Settings
) -> None:
    urls = [s.url for s in two_servers]
    pairs = [Pair(i) for i in range(PAIRS)]
    threads = [threading.Thread(target=race, args=(urls, p, m), daemon=True) for p in pairs for m in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=STALLED_AFTER_S)
    assert not any(t.is_alive() for t in threads), "a racing agent hung"
    errors = [e for p in pairs for e in p.errors]
    assert not errors, errors[:5]

    db = await load_database(shared_settings)
    outcomes = [o for p in pairs for o in p.outcomes]
    winners: dict[tuple[str, int], Outcome] = {}
    conflicts = replays = 0
    for o in outcomes:
        if o.status == 409:
            assert o.body["type"].endswith(("step-conflict", "episode-finished")), o.body
            conflicts += 1
            continue
        index = o.body["metadata"]["step_index"]
        if o.body["metadata"]["replayed"]:
            replays += 1
            continue
        key = (o.episode_id, index)
        assert key not in winners, f"two winners for step {index} of {o.episode_id}: {winners[key]} and {o}"
        winners[key] = o
    for o in outcomes:  # a replayed answer is the winner's stored result
        if o.status == 200 and o.body["metadata"]["replayed"]:
            winner = winners[(o.episode_id, o.body["metadata"]["step_index"])]
            assert (winner.request_id, winner.body["reward"], winner.body["observation"]) == (
                o.request_id,
                o.body["reward"],
                o.body["observation"],
            )

    rounds: dict[tuple[str, int], list[Outcome]] = {}
    for o in outcomes:
        rounds.setdefault((o.episode_id, o.round), []).append(o)
    for (_episode_id, _rnd), both in rounds.items():
        applied = [o for o in both if o.status == 200 and not o.body["metadata"]["replayed"]]
        # nothing else steps a pair's episode: each round has a winner, unless the episode had already ended
        assert applied or all(o.status == 409 and o.body["type"].endswith("episode-finished") for o in both), both
        if both[0].request_id.endswith("-dup"):  # a duplicated delivery: applied once; the other copy gets the
            # stored result (test_duplicate_delivery_to_a_process_with_a_stale_copy_gets_the_stored_result)
            assert len(applied) == 1 and all(o.status == 200 for o in both), both
    stored_transitions = 0
    for ep in db.values():
        assert_not_corrupt(ep)
        for t in ep.transitions:  # the stored steps are exactly the winners: none lost, none extra
            w = winners.pop((ep.id, t["step_index"]), None)
            assert w is not None, f"stored step {t['step_index']} of {ep.id} answered to nobody"
            assert (t["request_id"], t["action"], t["reward"]) == (
                w.request_id,
                core.Action.model_validate(w.action).as_json(),
                w.body["reward"],
            )
            stored_transitions += 1
    assert not winners, f"acknowledged steps not stored: {list(winners)[:5]}"
    assert stored_transitions >= PAIRS * 3, f"only {stored_transitions} steps: the race did not run"
    assert conflicts + replays > 0, "no step ever raced: the test proved nothing"
    print(
        f"\nscale-out[{shared_settings.database_url.split(':')[0]}]: {len(outcomes)} step requests, "
        f"{stored_transitions} applied, {conflicts} conflicts (409), "
        f"{replays} duplicate deliveries answered with the stored result, {len(db)} episodes"
    )


async def test_duplicate_delivery_to_a_process_with_a_stale_copy_gets_the_stored_result(
    two_servers: tuple[LiveServer, LiveServer], shared_settings: Settings
) -> None:
    a, b = two_servers
    answers: list[httpx.Response] = []
    token = {"X-Episode-Token": "stale-secret-".ljust(40, "x")}  # every chosen id here shares one token
    with (
        httpx.Client(base_url=a.url, timeout=STALLED_AFTER_S, headers=token) as ca,
        httpx.Client(base_url=b.url, timeout=STALLED_AFTER_S, headers=token) as cb,
    ):
        for trial in range(10):
            episode_id = f"stale-{trial}"
            ca.post(
                "/reset",
                json={
                    "episode_id": episode_id,
                    "episode_token": token["X-Episode-Token"],
                    "task_id": WORKFLOW,
                    "seed": trial,
                },
            ).raise_for_status()
            cb.post(
                "/step", json={"episode_id": episode_id, "action": {"lookup": "policy"}}
            ).raise_for_status()  # b caches step 1
            ca.post(
                "/step", json={"episode_id": episode_id, "action": {"lookup": "order"}}
            ).raise_for_status()  # b's copy is stale
            barrier = threading.Barrier(4, timeout=STALLED_AFTER_S)

            # the same request, delivered 4 times to b at once
            def deliver(episode_id: str = episode_id, barrier: threading.Barrier = barrier) -> None:
                with httpx.Client(base_url=b.url, timeout=STALLED_AFTER_S, headers=token) as c:
                    barrier.wait()
                    answers.append(
                        c.post(
                            "/step",
                            json={"episode_id": episode_id, "action": {"lookup": "customer"}, "request_id": "dup"},
                        )
                    )

            threads = [threading.Thread(target=deliver) for _ in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=STALLED_AFTER_S)
    db = await load_database(shared_settings)
    for ep in db.values():  # nothing is corrupted or applied twice: the bug is the answer, not the data
        assert_not_corrupt(ep)
        assert [t["request_id"] for t in ep.transitions].count("dup") == 1
    conflicts = [r.json() for r in answers if r.status_code != 200]
    assert not conflicts, f"{len(conflicts)} of {len(answers)} copies of an applied request got 409: {conflicts[0]}"


def _children(pid: int) -> list[int]:
    kids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != "Z":
                kids.append(int(entry.name))
    return kids


def test_workers_setting_serves_from_that_many_processes(shared_settings: Settings, tmp_path: Path) -> None:
    """``WORKERS=2 python -m service.app``: two worker processes behind one port, one database."""
    server = LiveServer(
        shared_settings,
        tmp_path / "workers.log",
        extra_env={"WORKERS": "2", "LOG_LEVEL": "INFO"},
        command=[sys.executable, "-m", "service.app"],
    )
    try:
        # the supervisor logs each worker's "serving" line once its startup is complete (service/workers.py)
        serving = server.wait_for_log(") serving,", 2)
        workers = _children(server.proc.pid)
        assert len(serving) == 2 and len(workers) == 2, (serving, workers)
        assert all(f"(pid {pid}) serving" in "\n".join(serving) for pid in workers)
        # an episode played with a new connection per request (any worker may answer) stays consistent
        episode = httpx.post(
            server.url + "/reset", json={"task_id": WORKFLOW, "seed": 5}, timeout=STALLED_AFTER_S
        ).json()["observation"]["episode_id"]
        for action in [*STEADY[:3], ENDINGS[1]]:
            r = httpx.post(
                server.url + "/step", json={"episode_id": episode, "action": action}, timeout=STALLED_AFTER_S
            )
            assert r.status_code == 200, r.text
        grade = httpx.get(server.url + "/grader", params={"episode_id": episode}, timeout=STALLED_AFTER_S).json()
        assert grade["step_count"] == 4 and 0.0 <= grade["score"] <= 1.0
    finally:
        server.stop()  # the supervisor we started; it stops its workers
    assert not _children(server.proc.pid)
