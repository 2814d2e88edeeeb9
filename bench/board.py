"""What reading a big leaderboard costs: bytes and latency of ``GET /leaderboard``, JSON and HTML.

    .venv/bin/python -m bench.board                      # 5,001 ranked runs on dev, SQLite in a temp dir
    .venv/bin/python -m bench.board --runs 1000 --reads 10

In process (``AsyncTestClient``, no sockets): ``--runs`` complete ranked runs are stored directly (one
row each: what the board reads), then the board's first page is read ``--reads`` times each way — JSON
and HTML — and, when the server sends an ``ETag``, once more with ``If-None-Match``. The report gives
the bytes and the median latency of each read (the first read, which builds the board, apart). It uses
only what the API had before paging, so before/after figures come from the same command.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from litestar.testing import AsyncTestClient
from sqlalchemy import insert

from service import env as core
from service.app import create_app
from service.db.models import runs as runs_table
from service.db.models import utcnow
from service.settings import Settings


def _row(i: int, n: int) -> dict[str, Any]:
    r = i / n
    ci = [max(0.0, r - 0.05), min(1.0, r + 0.05)]
    summary = {
        "resolved": r, "resolved_ci95": ci, "mean": r, "ci95": ci, "pass_hat_k": {"1": r}, "per_family": {},
        "per_difficulty": {}, "per_task": {}, "episodes": 400, "errors": 0,
    }  # fmt: skip
    now = utcnow()
    return dict(
        id=f"run_{i:016x}", token_sha256="0" * 64, agent=f"agent {i}", model="model", split="dev", trials=1,
        task_ids=list(core.TASKS), full_split=True, limit_per_task=None, manifest=None, episodes_total=400,
        next_index=400, episodes_done=400, status="complete", dataset_version=core.DATASET_VERSION,
        grader_version=core.GRADER_VERSION, usage=None, summary=summary, created_at=now, updated_at=now,
        finished_at=now, submitter=None, key_fingerprint=None, released=None, revision=1,
    )  # fmt: skip


async def measure(runs: int, reads: int, database_url: str) -> dict[str, Any]:
    settings = replace(Settings(), database_url=database_url, rate_limit_exempt="127.0.0.1,::1,testclient")
    async with AsyncTestClient(app=create_app(settings)) as client:
        db = settings.database()
        try:
            await db.write(lambda c: c.execute(insert(runs_table), [_row(i, runs) for i in range(runs)]))
        finally:
            await db.dispose()
        report: dict[str, Any] = {"ranked_runs": runs}
        for name, params in (("json", {"split": "dev"}), ("html", {"split": "dev", "format": "html"})):

            async def timed(
                headers: dict[str, str] | None = None, params: dict[str, str] = params
            ) -> tuple[float, Any]:
                t0 = time.perf_counter()
                resp = await client.get("/leaderboard", params=params, headers=headers or {})
                return time.perf_counter() - t0, resp

            first_s, first = await timed()
            samples = [await timed() for _ in range(reads)]
            entry: dict[str, Any] = {
                "bytes": len(first.content),
                "rows": first.text.count('class="run-row"') if name == "html" else len(first.json()["rows"]),
                "first_read_ms": round(first_s * 1000, 1),
                "read_ms_median": round(statistics.median(s for s, _ in samples) * 1000, 1),
            }
            etag = first.headers.get("etag")
            if etag:
                s304, r304 = await timed({"If-None-Match": etag})
                entry.update(conditional_status=r304.status_code, conditional_ms=round(s304 * 1000, 1))
            report[name] = entry
        return report


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5001)
    parser.add_argument("--reads", type=int, default=10)
    parser.add_argument("--database-url", default=None, help="default: a fresh SQLite file")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        url = args.database_url or f"sqlite+aiosqlite:///{Path(tmp) / 'board.db'}"
        print(json.dumps(asyncio.run(measure(args.runs, args.reads, url)), indent=2))


if __name__ == "__main__":
    main()
