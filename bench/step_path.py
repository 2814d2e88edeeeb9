"""CPU per step of the persisted step path, in process, next to the environment core alone.

    .venv/bin/python -m bench.step_path                 # 3000 episodes x 3 rounds, SQLite in a temp dir
    .venv/bin/python -m bench.step_path --database-url postgresql+asyncpg://postgres@127.0.0.1:5432/test

No HTTP, no sockets: this isolates what the service adds to each step — the episode cache, the
write through the group-commit writer (durable: acknowledged after COMMIT), the stored grade, the
wire observation — from the framework and the transport, which ``bench.load`` measures end to end.
Both targets replay the same recorded heuristic-agent episodes (reset → steps → grade) over the
same tickets, so they do the same environment work:

- ``core`` — ``service.env`` only: reset, step, the observation and grade dumped to JSON-ready
  dicts, in memory (the least any server of this environment must do per step);
- ``service`` — ``EpisodeService.reset/step/grade`` with ``--agents`` concurrent asyncio agents
  against a fresh database (SQLite file by default; ``--database-url`` for PostgreSQL, in a
  throw-away schema).

CPU is ``time.process_time()`` (every thread of this process; on PostgreSQL the server's CPU is
not counted). Rounds interleave the two targets; the report gives medians and the ratio.
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
from service import env as core
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


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="step-path-"))
    schema = None
    if args.database_url and args.database_url.startswith("postgresql"):
        schema = "bench_" + secrets.token_hex(6)
        await pg_schema(args.database_url, "create", schema)
    samples: dict[str, list[float]] = {"core": [], "service": []}
    try:
        for r in range(args.rounds):
            scripts = record(args.episodes, seed0=10_000 + r * args.episodes)
            cpu, steps = run_core(scripts)
            samples["core"].append(1000 * cpu / steps)
            url = args.database_url or f"sqlite+aiosqlite:///{workdir / f'round{r}.db'}"
            settings = Settings.from_env(
                {**os.environ, "DATABASE_URL": url, **({"DATABASE_SCHEMA": schema} if schema else {})}
            )
            cpu, steps = await run_service(scripts, settings, args.agents)
            samples["service"].append(1000 * cpu / steps)
    finally:
        if schema:
            await pg_schema(args.database_url, "drop", schema)
        shutil.rmtree(workdir, ignore_errors=True)
    medians = {k: round(statistics.median(v), 4) for k, v in samples.items()}
    return {
        "config": {
            "episodes_per_round": args.episodes,
            "agents": args.agents,
            "rounds": args.rounds,
            "database": "postgresql (server CPU not counted)" if schema else "sqlite file in a temp dir",
            "sqlite": {"journal_mode": settings.sqlite_journal_mode, "synchronous": settings.sqlite_synchronous},
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
        },
        "cpu_ms_per_step": {k: {"median": medians[k], "rounds": [round(x, 4) for x in v]} for k, v in samples.items()},
        "service_over_core": round(medians["service"] / medians["core"], 2),
        "service_overhead_ms_per_step": round(medians["service"] - medians["core"], 4),
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
