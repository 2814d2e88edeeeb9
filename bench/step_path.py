"""CPU per step of the persisted step path, in process, next to the environment core alone.

    .venv/bin/python -m bench.step_path                 # 3000 episodes x 3 rounds, SQLite in a temp dir
    .venv/bin/python -m bench.step_path --database-url postgresql+asyncpg://postgres@127.0.0.1:5432/test

No HTTP, no sockets: this isolates what the service adds to each step — the episode cache, the
write through the group-commit writer (durable: acknowledged after COMMIT), the stored grade, the
wire observation — from the framework and the transport, which ``bench.load`` measures end to end.
Both targets replay the same recorded episodes of each family's heuristic agent (reset → steps →
grade) over the same tickets, so they do the same environment work; the ticket tasks (decision and
workflow) and the store desk are measured apart (a store episode is ~11 tool calls, with a larger
state and a grade over every call so far), and ``all`` is the two together:

- ``core`` — ``service.env`` only: reset, step, the observation and grade dumped to JSON-ready
  dicts, in memory (the least any server of this environment must do per step);
- ``service`` — ``EpisodeService.reset/step/grade`` with ``--agents`` concurrent asyncio agents
  against a fresh database (SQLite file by default; ``--database-url`` for PostgreSQL, in a
  throw-away schema).

CPU is ``time.process_time()`` (every thread of this process; on PostgreSQL the server's CPU is
not counted). Both targets run with the garbage collector tuned as the server runs it
(``service.app.tune_gc``: start-up objects frozen, young collections less often); with Python's
defaults, full collections walking the service's long-lived objects were a quarter of the service's
measured overhead, a cost the served service does not pay. Rounds interleave the targets; the
report gives medians and the ratio. Targets (#22): service overhead (service − core) ≤ 0.3 ms per
persisted step, the core step < 0.2 ms (all), a store step's core ≤ 1 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import secrets
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.harness import pg_schema
from bench.load import git_commit
from service import env as core
from service.app import tune_gc
from service.db.migrate import upgrade_to_head
from service.domain.episodes.schemas import ResetParams
from service.domain.episodes.services import EpisodeService
from service.domain.runs.services import RunService
from service.env.agents import play_episode
from service.settings import Settings

Script = tuple[str, int, list[dict[str, Any]]]


def record(episodes: int, seed0: int) -> list[Script]:
    """Heuristic-agent action lists, round-robin over the tasks, one fresh ticket per episode."""
    tasks = list(core.TASKS)
    scripts = []
    for i in range(episodes):
        task_id, seed = tasks[i % len(tasks)], seed0 + i
        _, actions = play_episode("heuristic", task_id, seed, "train")
        scripts.append((task_id, seed, [a.model_dump(mode="json", exclude_none=True) for a in actions]))
    return scripts


def run_core(scripts: list[Script]) -> tuple[float, int]:
    steps = 0
    start = time.process_time()
    for task_id, seed, actions in scripts:
        state, observation = core.reset(task_id, seed, "train")
        observation.model_dump(mode="json")
        for payload in actions:
            result = core.step(state, core.Action.model_validate(payload))
            result.observation.model_dump(mode="json")
            state = result.state
            steps += 1
        result.grade.model_dump(mode="json")
    return time.process_time() - start, steps


async def run_service(scripts: list[Script], settings: Settings, agents: int) -> tuple[float, int]:
    db = settings.database()
    await upgrade_to_head(db)
    service = EpisodeService(db, runs=RunService(db, ttl_s=3600))
    queue = iter(scripts)
    steps = 0

    async def agent() -> None:
        nonlocal steps
        for task_id, seed, actions in queue:
            result = await service.reset(ResetParams(task_id=task_id, seed=seed, run_token=None))
            for payload in actions:
                result = await service.step(result.episode_id, payload)
                steps += 1
            if not result.done:
                raise RuntimeError(f"episode {result.episode_id} did not finish as recorded")
            await service.grade(result.episode_id)

    try:
        start = time.process_time()
        await asyncio.gather(*(agent() for _ in range(agents)))
        return time.process_time() - start, steps
    finally:
        await db.dispose()


FAMILIES = ("ticket", "store")


def family_of(task_id: str) -> str:
    return "store" if core.TASKS[task_id].family == "store" else "ticket"


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="step-path-"))
    schema = None
    if args.database_url and args.database_url.startswith("postgresql"):
        schema = "bench_" + secrets.token_hex(6)
        await pg_schema(args.database_url, "create", schema)
    # per family and target: (cpu seconds, steps) of each round
    runs: dict[str, dict[str, list[tuple[float, int]]]] = {f: {"core": [], "service": []} for f in FAMILIES}
    tune_gc()  # as service.app.serve does before it serves
    try:
        for r in range(args.rounds):
            scripts = record(args.episodes, seed0=10_000 + r * args.episodes)
            for family in FAMILIES:
                mine = [x for x in scripts if family_of(x[0]) == family]
                runs[family]["core"].append(run_core(mine))
                url = args.database_url or f"sqlite+aiosqlite:///{workdir / f'round{r}-{family}.db'}"
                settings = Settings.from_env(
                    {**os.environ, "DATABASE_URL": url, **({"DATABASE_SCHEMA": schema} if schema else {})}
                )
                runs[family]["service"].append(await run_service(mine, settings, args.agents))
    finally:
        if schema:
            await pg_schema(args.database_url, "drop", schema)
        shutil.rmtree(workdir, ignore_errors=True)

    def per_step(samples: list[tuple[float, int]]) -> list[float]:
        return [1000 * cpu / steps for cpu, steps in samples]

    both = {  # the two families of each round together: CPU over steps
        target: [
            (
                runs["ticket"][target][r][0] + runs["store"][target][r][0],
                runs["ticket"][target][r][1] + runs["store"][target][r][1],
            )
            for r in range(args.rounds)
        ]
        for target in ("core", "service")
    }
    lines = {"all": both} | {f: runs[f] for f in FAMILIES}

    def line(samples: dict[str, list[tuple[float, int]]]) -> dict[str, Any]:
        ms = {k: per_step(v) for k, v in samples.items()}
        med = {k: round(statistics.median(v), 4) for k, v in ms.items()}
        return {
            "cpu_ms_per_step": {k: {"median": med[k], "rounds": [round(x, 4) for x in v]} for k, v in ms.items()},
            "service_over_core": round(med["service"] / med["core"], 2),
            "service_overhead_ms_per_step": round(med["service"] - med["core"], 4),
            "steps_per_round": samples["service"][0][1],
        }

    report = {name: line(samples) for name, samples in lines.items()}
    return {
        "config": {
            "episodes_per_round": args.episodes,
            "agents": args.agents,
            "rounds": args.rounds,
            "database": "postgresql (server CPU not counted)" if schema else "sqlite file in a temp dir",
            "sqlite": {"journal_mode": settings.sqlite_journal_mode, "synchronous": settings.sqlite_synchronous},
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "commit": git_commit(),
            "loadavg": [round(x, 2) for x in os.getloadavg()],
            "gc": "service.app.tune_gc (as served)",
        },
        # the lines as before this report had families: every episode together
        **report["all"],
        "by_family": {f: report[f] for f in FAMILIES},
        "targets": {
            "service_overhead_ms_per_step": "<= 0.3 (all)",
            "core_ms_per_step": "< 0.2 (all)",
            "store_core_ms_per_step": "<= 1",
        },
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--episodes", type=int, default=3000, help="episodes per round (default 3000)")
    p.add_argument("--agents", type=int, default=64, help="concurrent agents for the service (default 64)")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds; medians reported (default 3)")
    p.add_argument("--database-url", default=None, help="default: a fresh SQLite file per round")
    p.add_argument("--json-out", type=Path, default=None, help="also write the JSON report here")
    args = p.parse_args(argv)
    if args.episodes < 1 or args.agents < 1 or args.rounds < 1:
        p.error("--episodes, --agents and --rounds must be positive")
    report = asyncio.run(measure(args))
    text = json.dumps(report, indent=2)
    print(text)
    if args.json_out:
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        args.json_out.write_text(text + "\n")


if __name__ == "__main__":
    main()
