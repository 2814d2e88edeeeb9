"""Growth benchmark: the same server on an empty database and on one that has served for months
(300 finished runs, 165k episodes), side by side in one run, on 127.0.0.1 only. Prints one JSON document.

    .venv/bin/python -m bench.growth                     # 300 runs x 550 episodes; about 6 minutes
    .venv/bin/python -m bench.growth --runs 3 --episodes-per-run 20 --duration 1 --rounds 1   # a smoke run

The large database is built directly with bulk inserts (no HTTP): every run is a finished, ranked dev
run (550 entries: 400 tickets and 150 store-desk conversations) whose episodes were really played by
each family's heuristic agent through the core (played once, copied per run), stored as the service
stores them (compact transitions, grades, summaries). ``storage`` reports what a transition and an
episode's snapshot take per family, and a transition row on disk (SQLite ``dbstat``). Then two servers
(``python -m service.app``, one worker, SQLite) serve the empty and the large database. Each rate is
measured on both servers *in the same window* (N agents each, at once), so whatever else the machine
does then slows both alike; ``ratios`` are medians over rounds of those paired large ÷ empty ratios:

- ``steps``: scripted agents playing plain episodes (reset, steps, grader), as ``bench.load`` does.
- ``run_play_k1`` / ``run_play_k8``: agents each playing its own dev run of 1 or 8 trials (550 or
  4,400 manifest entries) episode after episode (``POST /reset`` with the run, steps with its token);
  the rate is episodes per second.
- ``steps_polled``: ``steps`` while another client reads ``GET /leaderboard`` twice a second.
- ``run_play_k8_vs_k1``: k=8 ÷ k=1 episodes per second, crossed over: one window plays k=1 on the
  empty server and k=8 on the large one, the next the other way round; per round the geometric mean
  of the two in-window ratios (the load of the moment and the servers' difference cancel).
- ``leaderboard_ms``: ``GET /leaderboard?split=dev`` one at a time on the large database, median (the
  first request after start, which builds the cache, is reported apart as ``leaderboard_first_ms``).

Targets: ``leaderboard_ms`` (median, large) ≤ 15 ms; every ratio ≥ 0.95; a store transition ≤ 2 kB.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from bench.harness import HOST, ServerProcess, free_port
from bench.load import (
    HttpConnection,
    HttpError,
    Player,
    Schedule,
    Target,
    Window,
    agent_observation,
    episode_id_of,
    git_commit,
    median,
    percentiles,
    server_env,
)

DEFAULT_RUNS = 300


def dev_run_size() -> int:
    """Entries of a full dev run (one trial of every task's pool, the store desk's included): what a ranked
    run plays, and the default size of every built run."""
    from service import env as core

    return len(core.run_manifest("dev", None, 1, None))


DEFAULT_EPISODES_PER_RUN = dev_run_size()  # 550: 400 tickets of the decision and workflow tasks, 150 store
LEADERBOARD_POLL_S = 0.5
CHUNK = 5000  # rows per bulk insert


# ----------------------------------------------------------------------------- the large database


@dataclass
class PlayedEpisode:
    """One manifest entry played by the heuristic agent, as the service stores it (``EPISODE`` stands
    for the episode id, which the first stored observation carries)."""

    task_id: str
    seed: int
    ticket_id: str
    state: dict[str, Any]
    steps: list[dict[str, Any]]  # action, observation (stored form), reward, done
    grade: dict[str, Any]


def play_templates(count: int) -> tuple[list[dict[str, Any]], list[PlayedEpisode]]:
    """The first ``count`` entries of a dev run's manifest, each played once through the pure core by the
    heuristic agent of its family (the store desk's plays tool calls)."""
    from service import env as core
    from service.db.observations import compact
    from service.domain.episodes.schemas import wire_observation
    from service.env.agents import make_agent

    manifest = [e.model_dump() for e in core.run_manifest("dev", None, 1, None)][:count]
    played = []
    for entry in manifest:
        state, obs = core.reset(entry["task_id"], entry["seed"], "dev")
        agent = make_agent("heuristic", entry["seed"], state.ticket_id)
        previous, steps, result = None, [], None
        while not state.done:
            action = agent.act(obs)
            result = core.step(state, action)
            whole = wire_observation("EPISODE", result.observation)
            steps.append(
                {
                    "action": action.as_json(),
                    "observation": compact(previous, whole),
                    "reward": result.reward,
                    "done": result.done,
                }
            )
            state, obs, previous = result.state, result.observation, whole
        assert result is not None
        grade = result.grade
        played.append(
            PlayedEpisode(
                entry["task_id"],
                entry["seed"],
                state.ticket_id,
                state.as_json(),
                steps,
                {
                    "score": grade.score,
                    "resolved": grade.resolved,
                    "breakdown": grade.model_dump(mode="json"),
                    "grader_version": grade.grader_version,
                },
            )
        )
    return manifest, played


def run_summaries(manifest: list[dict[str, Any]], played: list[PlayedEpisode], runs: int) -> list[dict[str, Any]]:
    """One summary per run: the real one of the played episodes, shifted a little per run so ranks differ."""
    from service.db.run_store import RunEpisode
    from service.domain.runs.services import summarize_run

    class Run:  # what summarize_run reads of a run
        trials = 1

    Run.manifest = manifest  # type: ignore[attr-defined]
    episodes = [
        RunEpisode(f"x-{i:05d}", p.task_id, p.seed, "done", len(p.steps), False, p.grade["score"], p.grade["resolved"])
        for i, p in enumerate(played)
    ]
    base, _ = summarize_run(Run, episodes)  # type: ignore[arg-type]
    out = []
    for i in range(runs):
        shift = ((i * 37) % 41 - 20) / 400  # ±0.05
        s = json.loads(json.dumps(base))
        s["resolved"] = round(min(1.0, max(0.0, s["resolved"] + shift)), 4)
        s["resolved_ci95"] = [round(min(1.0, max(0.0, x + shift)), 4) for x in s["resolved_ci95"]]
        out.append(s)
    return out


def _run_row(
    r: int, manifest: list[dict[str, Any]], summary: dict[str, Any], per_run: int, at: datetime
) -> dict[str, Any]:
    from service import env as core
    from service.lib.secrets import hash_secret

    return dict(
        id=f"run_growth{r:06d}",
        token_sha256=hash_secret(f"token-{r}"),
        agent=f"agent-{r:03d}",
        model=f"model-{r % 7}",
        split="dev",
        trials=1,
        task_ids=list(core.TASKS),
        full_split=per_run == DEFAULT_EPISODES_PER_RUN,
        manifest=manifest,
        episodes_total=per_run,
        next_index=per_run,
        episodes_done=per_run,
        status="complete",
        dataset_version=core.DATASET_VERSION,
        grader_version=core.GRADER_VERSION,
        usage=None,
        summary=summary,
        created_at=at,
        updated_at=at,
        finished_at=at,
        submitter=None,
        key_fingerprint=None,
        released=None,
        revision=1,
    )


def _episode_rows(
    run_id: str, index: int, p: PlayedEpisode, at: datetime
) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any]]:
    """The episode, transitions and grade rows of one played template under ``run_id``."""
    episode_id = f"{run_id}-{index:05d}"
    episode = dict(
        id=episode_id,
        task_id=p.task_id,
        split="dev",
        seed=p.seed,
        ticket_id=p.ticket_id,
        run_id=run_id,
        status="done",
        step_count=len(p.steps),
        state=p.state,
        version=len(p.steps) + 1,
        created_at=at,
        updated_at=at,
    )
    steps = []
    for n, s in enumerate(p.steps):
        obs = {**s["observation"], "episode_id": episode_id} if n == 0 else s["observation"]
        steps.append(
            dict(
                episode_id=episode_id,
                step_index=n + 1,
                request_id=None,
                action=s["action"],
                observation=obs,
                reward=s["reward"],
                done=s["done"],
                created_at=at,
            )
        )
    return episode, steps, dict(episode_id=episode_id, created_at=at, **p.grade)


def storage(played: list[PlayedEpisode], database: Path | None = None) -> dict[str, Any]:
    """What an episode stores, per family: its transitions' JSON columns as the database keeps them (the action
    and the observation, compact after the first step), its state snapshot and grade; and, from SQLite's
    ``dbstat`` of the large database, what a transition row occupies on disk with its indexes (every
    family together), from which a store transition's share is estimated (its payload plus the average
    row's overhead)."""
    from service import env as core
    from service.db.engine import json_serializer

    size = lambda value: len(json_serializer(value).encode())  # noqa: E731 - a one-line local helper
    families: dict[str, dict[str, float]] = {}
    for p in played:
        f = families.setdefault(
            "store" if core.TASKS[p.task_id].family == "store" else "ticket",
            {"episodes": 0, "transitions": 0, "action_bytes": 0, "observation_bytes": 0, "state_bytes": 0},
        )
        f["episodes"] += 1
        f["transitions"] += len(p.steps)
        f["action_bytes"] += sum(size(s["action"]) for s in p.steps)
        f["observation_bytes"] += sum(size(s["observation"]) for s in p.steps)
        f["state_bytes"] += size(p.state)
    out: dict[str, Any] = {}
    for name, f in sorted(families.items()):
        n = max(1, int(f["transitions"]))
        out[name] = {
            "episodes": int(f["episodes"]),
            "steps_per_episode": round(f["transitions"] / max(1, f["episodes"]), 2),
            "transition_payload_bytes": round((f["action_bytes"] + f["observation_bytes"]) / n),
            "action_bytes": round(f["action_bytes"] / n),
            "observation_bytes": round(f["observation_bytes"] / n),
            "state_snapshot_bytes_per_episode": round(f["state_bytes"] / max(1, f["episodes"])),
        }
    if database is not None and database.exists():
        import sqlite3

        conn = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
        try:
            names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE tbl_name = 'transitions'")]
            marks = ",".join("?" * len(names))
            disk = conn.execute(f"SELECT sum(pgsize) FROM dbstat WHERE name IN ({marks})", names).fetchone()[0]
            rows = conn.execute("SELECT count(*) FROM transitions").fetchone()[0]
            payload = conn.execute("SELECT sum(length(action) + length(observation)) FROM transitions").fetchone()[0]
        finally:
            conn.close()
        per_row = disk / max(1, rows)
        overhead = per_row - payload / max(1, rows)  # fixed columns, record headers, pages' slack, indexes
        out["on_disk"] = {
            "transition_bytes_per_row": round(per_row),
            "row_overhead_bytes": round(overhead),
            "tables_and_indexes": names,
        }
        for name in families:
            out[name]["transition_on_disk_bytes_estimate"] = round(out[name]["transition_payload_bytes"] + overhead)
    return out


async def build_large(database_url: str, runs: int, per_run: int) -> tuple[dict[str, Any], list[PlayedEpisode]]:
    """Fill an empty database with ``runs`` finished dev runs of ``per_run`` played episodes each
    (bulk inserts in chunks of CHUNK episodes)."""
    from sqlalchemy import insert
    from sqlalchemy.engine import Connection

    from service.db.migrate import upgrade_to_head
    from service.db.models import episodes, grades, transitions, utcnow
    from service.db.models import runs as runs_table
    from service.settings import Settings

    started = time.perf_counter()
    manifest, played = await asyncio.to_thread(play_templates, per_run)
    summaries = run_summaries(manifest, played, runs)
    db = Settings(database_url=database_url).database()
    counts = {"runs": 0, "episodes": 0, "transitions": 0, "grades": 0}
    pending: dict[str, tuple[Any, list[dict[str, Any]]]] = {
        "episodes": (episodes, []),
        "transitions": (transitions, []),
        "grades": (grades, []),
    }

    def insert_rows(conn: Connection, table: Any, rows: list[dict[str, Any]]) -> None:
        conn.execute(insert(table), rows)

    async def flush() -> None:
        for key, (table, rows) in pending.items():  # parents first: the dict's order
            if rows:
                await db.write_unbounded(insert_rows, table, rows)
                counts[key] += len(rows)
                rows.clear()

    try:
        await upgrade_to_head(db)
        long_ago = utcnow() - timedelta(days=90)
        for r in range(runs):
            at = long_ago + timedelta(minutes=10 * r)
            row = _run_row(r, manifest, summaries[r], per_run, at)
            await db.write_unbounded(insert_rows, runs_table, [row])
            counts["runs"] += 1
            for index, p in enumerate(played):
                episode, steps, grade = _episode_rows(row["id"], index, p, at)
                pending["episodes"][1].append(episode)
                pending["transitions"][1].extend(steps)
                pending["grades"][1].append(grade)
                if len(pending["episodes"][1]) >= CHUNK:
                    await flush()
        await flush()
    finally:
        await db.dispose()
    return {**counts, "seconds": round(time.perf_counter() - started, 1)}, played


# ------------------------------------------------------------------------------------ measuring


class RunPlayer(Player):
    """An agent playing its own run (``trials`` per ticket) episode after episode."""

    trials = 1

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.own_run: dict[str, Any] | None = None

    async def new_run(self) -> None:
        body = json.dumps({"agent": f"bench-{self.index}", "split": "dev", "trials": self.trials}).encode()
        status, payload = await self.http.request("POST", "/runs", body)  # not counted: a run is made once
        if status != 201:
            raise HttpError(f"POST /runs -> {status}: {payload[:200]!r}")
        self.own_run = json.loads(payload)

    async def play_real(self, k: int) -> None:
        from service.env.agents import make_agent

        if self.own_run is None:
            await self.new_run()
        assert self.own_run is not None
        w = self.window
        token = self.own_run["run_token"]
        try:
            result = await self.http_json(
                "POST",
                "/reset",
                json.dumps({"run_id": self.own_run["run_id"], "run_token": token}).encode(),
                w.reset_ms,
            )
        except HttpError as exc:
            if "-> 409" in str(exc):  # every entry handed out: next time, a new run
                self.own_run = None
                return
            raise
        episode_id = episode_id_of(result)
        agent = make_agent("heuristic", result["metadata"]["seed"], result["observation"]["ticket_id"])
        steps = 0
        while not result["done"]:
            action = agent.act(agent_observation(result["observation"], result["reward"], result["done"]))
            body = json.dumps(
                {
                    "episode_id": episode_id,
                    "action": action.model_dump(mode="json", exclude_defaults=True),
                    "run_token": token,
                }
            ).encode()
            result = await self.http_json("POST", "/step", body, w.step_ms)
            steps += 1
        self.finished(steps)


def player_class(kind: str) -> type[Player]:
    if kind.startswith("steps"):
        return Player
    return type(f"RunPlayerK{kind[-1]}", (RunPlayer,), {"trials": int(kind.rsplit("k", 1)[1])})


async def poll_leaderboard(port: int, stop: asyncio.Event, latencies: list[float]) -> None:
    conn = HttpConnection(HOST, port)
    try:
        while not stop.is_set():
            t0 = time.perf_counter()
            status, _ = await conn.request("GET", "/leaderboard?split=dev")
            if status != 200:
                raise HttpError(f"GET /leaderboard -> {status}")
            latencies.append((time.perf_counter() - t0) * 1000)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), LEADERBOARD_POLL_S)
    finally:
        await conn.close()


async def measure_together(
    groups: list[tuple[str, ServerProcess, str, int]],
    schedule: Schedule,
    players: dict[str, list[Player]],
    args: argparse.Namespace,
) -> dict[str, dict[str, Any]]:
    """One window in which every group — (label, server, kind, agents) — plays at the same time, so
    whatever else the machine does in that window slows every compared target alike."""
    now = time.perf_counter()
    windows, tasks, pollers = {}, [], []
    stop_polling = asyncio.Event()
    polls: dict[str, list[float]] = {}
    for label, server, kind, agents in groups:
        window = Window(
            start=now + args.warmup, deadline=now + args.warmup + args.duration, max_requests=args.max_requests
        )
        windows[label] = window
        target = Target("ours", "http", server.port, server)
        cls = player_class(kind)
        # Players keep their run (and the server its decoded manifest) across rounds, as a real agent would.
        pool = players.setdefault(
            f"{label}/{server.name}/{kind}", [cls(i, target, window, schedule, {}) for i in range(agents)]
        )
        for p in pool:
            p.window = window
        tasks += [asyncio.create_task(p.run()) for p in pool]
        if kind == "steps_polled":
            polls[label] = []
            pollers.append(asyncio.create_task(poll_leaderboard(server.port, stop_polling, polls[label])))
    await asyncio.gather(*(w.stop.wait() for w in windows.values()))
    await asyncio.wait(tasks, timeout=10)
    stop_polling.set()
    await asyncio.gather(*pollers)
    out = {}
    for label, window in windows.items():
        elapsed = max(1e-9, (window.end or time.perf_counter()) - window.start)
        out[label] = {
            "steps_per_s": round(len(window.step_ms) / elapsed, 1),
            "episodes_per_s": round(window.episodes / elapsed, 1),
            "step_p99_ms": percentiles(window.step_ms)["p99"],
            "errors": window.errors,
            "error_samples": window.error_samples,
            **({"leaderboard_polls": len(polls[label])} if label in polls else {}),
        }
    return out


async def leaderboard_latency(server: ServerProcess, requests: int) -> list[float]:
    conn = HttpConnection(HOST, server.port)
    out = []
    try:
        for _ in range(requests):
            t0 = time.perf_counter()
            status, payload = await conn.request("GET", "/leaderboard?split=dev")
            out.append((time.perf_counter() - t0) * 1000)
            if status != 200:
                raise HttpError(f"GET /leaderboard -> {status}: {payload[:200]!r}")
    finally:
        await conn.close()
    return out


# What each measurement compares: (name, [(label, server name, kind, share of the agents)], rate).
MEASUREMENTS = [
    ("steps", [("empty", "empty", "steps", 1.0), ("large", "large", "steps", 1.0)], "steps_per_s"),
    ("run_play_k1", [("empty", "empty", "run_play_k1", 1.0), ("large", "large", "run_play_k1", 1.0)], "episodes_per_s"),
    ("run_play_k8", [("empty", "empty", "run_play_k8", 1.0), ("large", "large", "run_play_k8", 1.0)], "episodes_per_s"),
    ("steps_polled", [("empty", "empty", "steps_polled", 1.0), ("large", "large", "steps_polled", 1.0)], "steps_per_s"),
    # k=8 against k=1, crossed over the two servers so each window pairs them under the same load:
    # window a plays k=1 on empty and k=8 on large, window b the other way round (see run()).
    ("k8_vs_k1_a", [("k1", "empty", "run_play_k1", 1.0), ("k8", "large", "run_play_k8", 1.0)], "episodes_per_s"),
    ("k8_vs_k1_b", [("k1", "large", "run_play_k1", 1.0), ("k8", "empty", "run_play_k8", 1.0)], "episodes_per_s"),
]


async def start_servers(
    args: argparse.Namespace, urls: dict[str, str], servers: list[ServerProcess], workdir: Path
) -> dict[str, ServerProcess]:
    by_name: dict[str, ServerProcess] = {}
    for name, url in urls.items():
        port = free_port()
        env = server_env(DATABASE_URL=url, HOST=HOST, PORT=str(port), LOG_LEVEL=args.log_level.upper(), WORKERS="1")
        by_name[name] = ServerProcess(name, [sys.executable, "-m", "service.app"], port, env, workdir)
        servers.append(by_name[name])
    for s in servers:
        await asyncio.to_thread(s.wait_healthy)
    log("servers up: " + ", ".join(f"{s.name}=pid {s.proc.pid} port {s.port}" for s in servers))
    return by_name


async def play_rounds(
    args: argparse.Namespace, by_name: dict[str, ServerProcess]
) -> tuple[dict[str, list[dict[str, dict[str, Any]]]], dict[str, list[float]]]:
    """Every measurement once per round (rotated each round, so no measurement always follows the
    same one), and the leaderboard's latency on each server before each round."""
    schedule = Schedule([t["id"] for t in json.loads(urllib_get(by_name["empty"].url + "/tasks"))["tasks"]])
    per_round: dict[str, list[dict[str, dict[str, Any]]]] = {m[0]: [] for m in MEASUREMENTS}
    lb: dict[str, list[float]] = {n: [] for n in by_name}
    players: dict[str, list[Player]] = {}
    for r in range(args.rounds):
        for name, server in by_name.items():
            lb[name].append(median(await leaderboard_latency(server, args.leaderboard_requests)) or 0.0)
        for name, groups, rate in MEASUREMENTS[r % len(MEASUREMENTS) :] + MEASUREMENTS[: r % len(MEASUREMENTS)]:
            spec = [
                (label, by_name[srv], kind, max(1, round(args.agents * share))) for label, srv, kind, share in groups
            ]
            res = await measure_together(spec, schedule, players, args)
            per_round[name].append(res)
            log(
                f"round {r + 1}/{args.rounds} {name}: "
                + ", ".join(f"{lbl} {v[rate]} {rate} ({v['errors']} errors)" for lbl, v in res.items())
            )
    return per_round, lb


def paired_ratios(
    per_round: dict[str, list[dict[str, dict[str, Any]]]],
) -> tuple[dict[str, Any], dict[str, float | None]]:
    """Per measurement: median over rounds of (large / empty) in the same window, and the medians."""
    results: dict[str, Any] = {}
    ratios: dict[str, float | None] = {}
    for name, groups, rate in MEASUREMENTS:
        if name.startswith("k8_vs_k1"):
            continue
        top, bottom = groups[1][0], groups[0][0]  # large / empty
        rounds = per_round[name]
        paired = [x[top][rate] / x[bottom][rate] for x in rounds if x[bottom][rate]]
        ratio = median(paired)
        ratios[name] = round(ratio, 3) if ratio is not None else None
        results[name] = {
            label: {
                rate: median([x[label][rate] for x in rounds]),
                "step_p99_ms": median([x[label]["step_p99_ms"] for x in rounds]),
                "errors": sum(x[label]["errors"] for x in rounds),
                "error_samples": [e for x in rounds for e in x[label]["error_samples"]][:3],
                "rounds": [x[label][rate] for x in rounds],
            }
            for label, *_ in groups
        } | {"ratio_per_round": [round(v, 3) for v in paired]}
    return results, ratios


def crossed_ratio(per_round: dict[str, list[dict[str, dict[str, Any]]]]) -> tuple[dict[str, Any], float | None]:
    """Does a 4,400-entry run play as fast as a 550-entry one? The crossover cancels both the load of
    the moment (each window pairs k=8 with k=1) and any difference between the servers (each plays
    both): per round, sqrt((k8/k1 in window a) * (k8/k1 in window b)). (Not k=1 and k=8 agents on one
    server in one window: they would share its queue, and a costlier request would slow both alike.)"""
    a, b = per_round["k8_vs_k1_a"], per_round["k8_vs_k1_b"]
    crossed = [
        (
            (x["k8"]["episodes_per_s"] / x["k1"]["episodes_per_s"])
            * (y["k8"]["episodes_per_s"] / y["k1"]["episodes_per_s"])
        )
        ** 0.5
        for x, y in zip(a, b, strict=True)
        if x["k1"]["episodes_per_s"] and y["k1"]["episodes_per_s"]
    ]
    ratio = median(crossed)
    result = {
        k: {
            "episodes_per_s": median([x[k]["episodes_per_s"] for x in a + b]),
            "rounds": [x[k]["episodes_per_s"] for x in a + b],
        }
        for k in ("k1", "k8")
    } | {"ratio_per_round": [round(v, 3) for v in crossed]}
    return result, round(ratio, 3) if ratio is not None else None


async def run(args: argparse.Namespace, servers: list[ServerProcess], workdir: Path) -> dict[str, Any]:
    """Build the large database, serve it beside an empty one, measure both in the same windows."""
    urls = {
        "empty": f"sqlite+aiosqlite:///{workdir / 'empty.db'}",
        "large": f"sqlite+aiosqlite:///{workdir / 'large.db'}",
    }
    log(f"building the large database: {args.runs} runs x {args.episodes_per_run} episodes")
    built, played = await build_large(urls["large"], args.runs, args.episodes_per_run)
    size_mb = round(sum(p.stat().st_size for p in workdir.glob("large.db*")) / 1e6, 1)
    log(f"built in {built['seconds']} s: {built} ({size_mb} MB)")
    stored = await asyncio.to_thread(storage, played, workdir / "large.db")
    by_name = await start_servers(args, urls, servers, workdir)
    first_ms = {name: (await leaderboard_latency(s, 1))[0] for name, s in by_name.items()}
    board = json.loads(urllib_get(by_name["large"].url + "/leaderboard?split=dev"))
    per_round, lb = await play_rounds(args, by_name)
    results, ratios = paired_ratios(per_round)
    results["run_play_k8_vs_k1"], ratios["run_play_k8_vs_k1"] = crossed_ratio(per_round)
    leaderboard_ms = median(lb["large"])
    return {
        "config": {
            "runs": args.runs,
            "episodes_per_run": args.episodes_per_run,
            "agents": args.agents,
            "duration_s": args.duration,
            "warmup_s": args.warmup,
            "rounds": args.rounds,
            "leaderboard_requests": args.leaderboard_requests,
            "leaderboard_poll_s": LEADERBOARD_POLL_S,
            "database": "sqlite (WAL, synchronous=FULL), one uvicorn worker",
            "server_pids": {s.name: s.proc.pid for s in servers},
            "commit": git_commit(),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "loadavg": [round(x, 2) for x in os.getloadavg()],
        },
        "large_database": {
            **built,
            "megabytes": size_mb,
            "leaderboard_rows": len(board["rows"]) + len(board.get("unranked") or []),
        },
        "storage": stored,
        "leaderboard_ms": round(leaderboard_ms, 3) if leaderboard_ms is not None else None,
        "leaderboard_ms_empty": round(median(lb["empty"]) or 0.0, 3),
        "leaderboard_first_ms": {k: round(v, 1) for k, v in first_ms.items()},
        "results": results,
        "ratios": ratios,
        "targets": {"leaderboard_ms": "<= 15", "ratios": ">= 0.95", "store transition on disk": "<= 2 kB"},
        "notes": NOTES,
    }


NOTES = [
    "each ratio: median over rounds of large / empty measured in the same window (both servers loaded at "
    "once, so background load hits both alike); run_play_k8_vs_k1: k=8 / k=1 episodes/s, crossed over "
    "the two servers in two windows (geometric mean of the in-window ratios)",
    "run play rate = episodes/s of agents each playing its own dev run; steps = plain episodes as in bench.load",
    "steps_polled: steps while another client reads GET /leaderboard every 0.5 s",
    "leaderboard_ms: median latency of GET /leaderboard?split=dev on the large database (cached; "
    "leaderboard_first_ms is the first request after start, which builds the cache)",
]


def urllib_get(url: str) -> bytes:
    import urllib.request

    with urllib.request.urlopen(url, timeout=30) as resp:  # noqa: S310 - loopback
        return resp.read()


def log(msg: str) -> None:
    print(f"[growth] {msg}", file=sys.stderr, flush=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m bench.growth",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--runs", type=int, default=DEFAULT_RUNS, help="finished runs in the large database (default 300)")
    p.add_argument(
        "--episodes-per-run",
        type=int,
        default=DEFAULT_EPISODES_PER_RUN,
        help=f"episodes per run (default and most: {DEFAULT_EPISODES_PER_RUN}, a full dev run)",
    )
    p.add_argument(
        "--agents", type=int, default=8, help="concurrent scripted agents per server and measurement (default 8)"
    )
    p.add_argument("--duration", type=float, default=4.0, help="counted seconds per measurement (default 4)")
    p.add_argument("--warmup", type=float, default=1.0, help="uncounted seconds before each measurement (default 1)")
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds; medians are reported (default 5)")
    p.add_argument(
        "--leaderboard-requests", type=int, default=40, help="GET /leaderboard per round and database (default 40)"
    )
    p.add_argument("--max-requests", type=int, default=200_000, help="request cap per measurement")
    p.add_argument("--log-level", default="WARNING", help="LOG_LEVEL of both servers (default WARNING)")
    p.add_argument("--json-out", type=Path, default=None, help="also write the JSON report here")
    args = p.parse_args(argv)
    if (
        not (1 <= args.episodes_per_run <= DEFAULT_EPISODES_PER_RUN)
        or args.runs < 1
        or args.agents < 1
        or args.rounds < 1
    ):
        p.error(
            f"--runs, --agents and --rounds must be >= 1; --episodes-per-run between 1 and {DEFAULT_EPISODES_PER_RUN}"
        )
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="ecomm-growth-"))
    servers: list[ServerProcess] = []

    def on_signal(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_signal)
    failed = True
    try:
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
        if failed:
            for s in servers:
                log(f"--- {s.name} log tail ---\n{s.tail(1500)}")
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
