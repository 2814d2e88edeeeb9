"""Abuse benchmark: does one client at its rate limit slow an honest agent down? Side by side in one
run, on 127.0.0.1 only, bounded in time; prints one JSON document.

    .venv/bin/python -m bench.abuse                    # 3 rounds x (alone, with abuser), 8 s windows
    .venv/bin/python -m bench.abuse --tiny             # a few seconds: the shape of the report (tests)

One server (``python -m service.app``, SQLite file or ``--database-url``), started with
``RATE_LIMIT_EXEMPT=127.0.0.1`` and ``RATE_LIMIT_PER_S``, ``RATE_LIMIT_ADDRESS_PER_S`` and
``RATE_LIMIT_BURST`` at ``--limit``. Loopback has a whole /8, so the
two clients come from different addresses:

- the **honest agent** connects from 127.0.0.1 (exempt, as local agents are by default) and plays
  whole episodes closed-loop with the heuristic agent (reset, steps until done) as fast as it can;
  its steps per second is what is measured;
- the **abuser** connects from 127.0.0.2 (limited) and spends its whole allowance on writes: it
  resets episodes and steps them (``paced``: exactly ``--limit`` requests a second), or retries
  without backoff at ``--flood-factor`` times its limit (``flood``: most answered 429). Both are
  open-loop and evenly spaced, so the abuser's own client stays well under a CPU core (a closed-loop
  flooder on a shared 2-vCPU machine measures its own client's CPU, not the server's);
- the **error amplifier** (``errors``) spends its whole allowance on 58.5 kB bodies of 4,500 invented
  fields, to ``/reset`` and as the arguments of an MCP reset in turn: every answer is an error, and what
  is measured is whether building those errors costs the honest agent;
- the **page reader** (``pages``) is a visitor at its limit on the costliest reads: it reads a
  ``--run-trials``-trial dev run's page (3,200 entries at 8 trials, ``--run-started`` of them handed
  out) at ``--heavy-limit`` requests a second (``RATE_LIMIT_HEAVY_READS_PER_MIN`` / 60), every read a page it
  has not read before — another page number and page size each time, JSON and HTML in turn — so no
  read is a 304 or a cached page: the most a reader under its limit can make the server build.

Rounds interleave honest-alone and honest-with-abuser windows so background noise hits both alike;
the report gives medians, the ratio of medians and the median of per-round ratios per abuser mode,
and the server's CPU seconds per second in each window. The abuser runs in its own
process so its client CPU is not the honest agent's. The server is stopped by its PID at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from multiprocessing.context import SpawnContext
from pathlib import Path
from typing import Any

import httpx

from bench.harness import HOST, ServerProcess, free_port, proc_cpu_seconds
from service import env as core
from service.env.agents import HeuristicAgent

HONEST_ADDRESS, ABUSER_ADDRESS = HOST, "127.0.0.2"
# The error amplifier's body: 4,500 invented fields, 58.5 kB (under MAX_BODY_BYTES), each refused by name.
UNKNOWN_FIELDS = json.dumps({f"k{i:05d}": 0 for i in range(4500)})


def _client(base: str, source: str) -> httpx.AsyncClient:
    transport = httpx.AsyncHTTPTransport(local_address=source)
    return httpx.AsyncClient(base_url=base, transport=transport, timeout=30.0)


async def honest_window(base: str, seconds: float) -> dict[str, Any]:
    """Closed-loop heuristic episodes for ``seconds``; steps/s and step latency."""
    steps, errors, latencies = 0, 0, []
    tasks = list(core.TASKS)
    fields = core.Observation.model_fields
    async with _client(base, HONEST_ADDRESS) as client:
        deadline = time.monotonic() + seconds
        episode = 0
        while time.monotonic() < deadline:
            resp = await client.post("/reset", json={"task_id": tasks[episode % len(tasks)], "seed": episode})
            episode += 1
            if resp.status_code != 200:
                errors += 1
                continue
            body, agent = resp.json(), HeuristicAgent()
            episode_id = body["metadata"]["episode_id"]
            while not body["done"] and time.monotonic() < deadline:
                obs = core.Observation.model_validate({k: v for k, v in body["observation"].items() if k in fields})
                action = agent.act(obs).model_dump(exclude_defaults=True)
                started = time.perf_counter()
                resp = await client.post("/step", json={"episode_id": episode_id, "action": action})
                if resp.status_code != 200:
                    errors += 1
                    break
                latencies.append((time.perf_counter() - started) * 1000)
                steps += 1
                body = resp.json()
    latencies.sort()
    return {
        "steps_per_s": round(steps / seconds, 1),
        "errors": errors,
        "step_p50_ms": round(latencies[len(latencies) // 2], 2) if latencies else None,
        "step_p95_ms": round(latencies[int(len(latencies) * 0.95)], 2) if latencies else None,
    }


async def _abuse(
    base: str, mode: str, seconds: float, limit: int, flood_factor: int, run_id: str | None = None, heavy_limit: int = 2
) -> dict[str, int]:
    counts = {"sent": 0, "served": 0, "limited": 0, "server_errors": 0}
    stop = time.monotonic() + seconds

    async def read_page(client: httpx.AsyncClient, n: int) -> httpx.Response:
        per_page = 200 - n % 100  # a page size, number and format never asked before: never a cached page
        params: dict[str, str | int] = {"page": 1 + n % 3, "per_page": per_page}
        if n % 2:
            params["format"] = "html"
        return await client.get(f"/runs/{run_id}", params=params)

    async def invalid_body(client: httpx.AsyncClient, n: int) -> httpx.Response:
        if n % 2:  # the same fields as the arguments of an MCP reset
            call = {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {"name": "reset", "arguments": {}}}
            body = json.dumps(call).replace('"arguments": {}', '"arguments": ' + UNKNOWN_FIELDS)
            return await client.post("/mcp", content=body, headers={"content-type": "application/json"})
        return await client.post("/reset", content=UNKNOWN_FIELDS, headers={"content-type": "application/json"})

    async def one(client: httpx.AsyncClient, n: int) -> None:
        if mode in ("pages", "errors"):
            resp = await (read_page(client, n) if mode == "pages" else invalid_body(client, n))
            counts["sent"] += 1
            key = "limited" if resp.status_code == 429 else "server_errors" if resp.status_code >= 500 else "served"
            counts[key] += 1
            return
        # a write the server must store: a new episode every 4 requests, steps in between
        if n % 4 == 0:
            resp = await client.post("/reset", json={"seed": n % 1000})
            if resp.status_code == 200:
                one.episode_id = resp.json()["metadata"]["episode_id"]  # type: ignore[attr-defined]
        else:
            resp = await client.post(
                "/step", json={"episode_id": getattr(one, "episode_id", "none"), "action": {"reply": "x" * 200}}
            )
        counts["sent"] += 1
        # served: the server did the work (200, or a 4xx such as stepping a finished episode); limited: 429
        key = "limited" if resp.status_code == 429 else "server_errors" if resp.status_code >= 500 else "served"
        counts[key] += 1

    async with _client(base, ABUSER_ADDRESS) as client:
        if mode == "paced":  # `limit` requests a second, evenly spaced: the whole allowance, no 429 needed
            rate = float(limit)
        elif mode == "pages":  # its whole allowance of heavy reads
            rate = float(heavy_limit)
        elif mode == "errors":  # its whole allowance of invalid bodies (every answer a 422 or an MCP error)
            rate = float(limit)
        else:  # flood: `flood_factor` times the limit, retrying without backoff (most answered 429)
            rate = float(limit * flood_factor)
        n, due, pending = 0, time.monotonic(), set()
        while time.monotonic() < stop:
            task = asyncio.ensure_future(one(client, n))  # open loop: a slow answer does not slow the abuser
            pending.add(task)
            task.add_done_callback(pending.discard)
            n += 1
            due += 1.0 / rate
            await asyncio.sleep(max(0.0, due - time.monotonic()))
        await asyncio.gather(*pending)
    return counts


def _abuser_process(
    base: str,
    mode: str,
    seconds: float,
    limit: int,
    flood_factor: int,
    out: Any,
    run_id: str | None = None,
    heavy_limit: int = 2,
) -> None:
    out.put(asyncio.run(_abuse(base, mode, seconds, limit, flood_factor, run_id, heavy_limit)))


def _big_run(base: str, trials: int, started: int) -> str:
    """A dev run of ``trials`` trials with ``started`` episodes handed out (made from the exempt address)."""
    with httpx.Client(base_url=base, transport=httpx.HTTPTransport(local_address=HONEST_ADDRESS), timeout=60) as client:
        created = client.post("/runs", json={"agent": "bench-pages", "split": "dev", "trials": trials})
        created.raise_for_status()
        run = created.json()
        for _ in range(started):
            client.post(
                f"/runs/{run['run_id']}/next", headers={"Authorization": f"Bearer {run['run_token']}"}
            ).raise_for_status()
        return run["run_id"]


def _server_env(args: argparse.Namespace, database_url: str, port: int) -> dict[str, str]:
    """The server's environment: the abuser's address limited, the honest agent's exempt."""
    return {
        **os.environ,
        "DATABASE_URL": database_url,
        "HOST": HOST,
        "PORT": str(port),
        "LOG_LEVEL": "WARNING",
        # --limit is everything the abuser's address may send a second (its ceiling; each budget the
        # same), in bursts of one second's worth
        "RATE_LIMIT_PER_S": str(args.limit),
        "RATE_LIMIT_ADDRESS_PER_S": str(args.limit),
        "RATE_LIMIT_BURST": str(args.limit),
        "RATE_LIMIT_EXEMPT": HONEST_ADDRESS,
        "RATE_LIMIT_HEAVY_READS_PER_MIN": str(args.heavy_limit * 60),
    }


def _honest_measured(server: ServerProcess, duration: float) -> dict[str, Any]:
    """One honest window, with the server's CPU seconds per second spent during it."""
    cpu0 = proc_cpu_seconds(server.proc.pid)
    honest = asyncio.run(honest_window(server.url, duration))
    honest["server_cpu_s_per_s"] = round((proc_cpu_seconds(server.proc.pid) - cpu0) / duration, 3)
    return honest


def _with_abuser(
    server: ServerProcess, args: argparse.Namespace, mode: str, run_id: str | None, ctx: SpawnContext
) -> dict[str, Any]:
    """One honest window while an abuser of ``mode`` runs in its own process (a second longer)."""
    out = ctx.Queue()
    abuser = ctx.Process(
        target=_abuser_process,
        args=(
            server.url,
            mode,
            args.duration + 1.0,
            args.limit,
            args.flood_factor,
            out,
            run_id,
            args.heavy_limit,
        ),
    )
    abuser.start()
    time.sleep(0.5)  # the abuser is at its rate before the honest window opens
    honest = _honest_measured(server, args.duration)
    abuser.join(timeout=args.duration + 30)
    if abuser.is_alive():
        abuser.terminate()  # our own child, by handle
    counts = out.get(timeout=5) if not out.empty() else {}
    return {
        **honest,
        "abuser": {**counts, "served_per_s": round(counts.get("served", 0) / (args.duration + 1.0), 1)},
    }


def _rounds(server: ServerProcess, args: argparse.Namespace, modes: list[str]) -> list[dict[str, Any]]:
    """Warm up, then each round: the honest agent alone, then beside each abuser mode in turn."""
    ctx = multiprocessing.get_context("spawn")
    rounds: list[dict[str, Any]] = []
    server.wait_healthy()
    run_id = _big_run(server.url, args.run_trials, args.run_started) if "pages" in modes else None
    asyncio.run(honest_window(server.url, args.warmup))  # warm caches, JIT-free but connection pools
    for _ in range(args.rounds):
        row: dict[str, Any] = {"alone": _honest_measured(server, args.duration)}
        for mode in modes:
            row[mode] = _with_abuser(server, args, mode, run_id, ctx)
        rounds.append(row)
    return rounds


def _summary(rounds: list[dict[str, Any]], modes: list[str], args: argparse.Namespace) -> dict[str, Any]:
    """Medians over the rounds, per abuser mode, against the honest agent alone."""
    alone = statistics.median(r["alone"]["steps_per_s"] for r in rounds)
    summary: dict[str, Any] = {"honest_alone_steps_per_s": alone}
    for mode in modes:
        with_abuser = statistics.median(r[mode]["steps_per_s"] for r in rounds)
        ratio = round(with_abuser / alone, 3) if alone else None
        pairwise = statistics.median(
            r[mode]["steps_per_s"] / r["alone"]["steps_per_s"] for r in rounds if r["alone"]["steps_per_s"]
        )
        summary[mode] = {
            "honest_steps_per_s": with_abuser,
            "ratio_to_alone": ratio,
            "ratio_median_of_rounds": round(pairwise, 3),
            "server_cpu_s_per_s": statistics.median(r[mode]["server_cpu_s_per_s"] for r in rounds),
            "abuser_served_per_s": statistics.median(r[mode]["abuser"].get("served_per_s", 0) for r in rounds),
            "abuser_sent_per_s": statistics.median(
                r[mode]["abuser"].get("sent", 0) / (args.duration + 1.0) for r in rounds
            ),
            "drop_within_20pct": ratio is not None and ratio >= 0.8 and pairwise >= 0.8,
        }
    return summary


def _config(args: argparse.Namespace, modes: list[str]) -> dict[str, Any]:
    """What was measured, and on what machine."""
    return {
        "limit_per_s": args.limit,
        "duration_s": args.duration,
        "rounds": args.rounds,
        "modes": modes,
        "flood_factor": args.flood_factor,
        "heavy_reads_per_s": args.heavy_limit,
        "run_trials": args.run_trials if "pages" in modes else None,
        "database": "postgresql" if args.database_url and args.database_url.startswith("postgresql") else "sqlite",
        "cpus": os.cpu_count(),
        "load_avg_at_end": [round(x, 2) for x in os.getloadavg()],
    }


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Run the rounds and build the report."""
    modes = {"both": ["paced", "flood"], "all": ["paced", "flood", "pages"]}.get(args.mode, [args.mode])
    with tempfile.TemporaryDirectory(prefix="bench-abuse-") as tmp:
        database_url = args.database_url or f"sqlite+aiosqlite:///{tmp}/abuse.db"
        port = free_port()
        env = _server_env(args, database_url, port)
        server = ServerProcess("ours", [sys.executable, "-m", "service.app"], port, env, Path(tmp))
        try:
            rounds = _rounds(server, args, modes)
        finally:
            server.stop()
    return {
        "benchmark": "abuse",
        "config": _config(args, modes),
        "summary": _summary(rounds, modes, args),
        "rounds": rounds,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=20, help="RATE_LIMIT_PER_S for the abuser's address")
    parser.add_argument("--duration", type=float, default=8.0, help="seconds per measured window")
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--mode",
        choices=["paced", "flood", "pages", "errors", "both", "all"],
        default="all",
        help="both: paced and flood; all: those and the run-page reader; errors: invalid 58 kB bodies at the limit",
    )
    parser.add_argument(
        "--heavy-limit",
        type=int,
        default=2,
        help=(
            "heavy reads per second (the server gets 60 times it as RATE_LIMIT_HEAVY_READS_PER_MIN): "
            "the page reader's pace"
        ),
    )
    parser.add_argument(
        "--run-trials", type=int, default=8, help="trials of the dev run the page reader reads (8: 3,200 entries)"
    )
    parser.add_argument("--run-started", type=int, default=200, help="episodes of it handed out before the rounds")
    parser.add_argument("--flood-factor", type=int, default=10, help="flood mode sends this many times the limit")
    parser.add_argument("--database-url", default=None, help="default: a fresh SQLite file")
    parser.add_argument("--tiny", action="store_true", help="1 round of 1 s windows: checks the report's shape")
    args = parser.parse_args(argv)
    if args.tiny:
        args.duration, args.warmup, args.rounds, args.run_trials, args.run_started = 1.0, 0.3, 1, 1, 5
    print(json.dumps(measure(args), indent=2))


if __name__ == "__main__":
    main()
