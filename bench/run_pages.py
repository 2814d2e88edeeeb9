"""What a big run costs to create and to read: bytes of ``POST /runs``, latency of its page.

    .venv/bin/python -m bench.run_pages                 # dev split, trials 8 (3,200 entries), SQLite in a temp dir
    .venv/bin/python -m bench.run_pages --trials 4 --reads 30

In process (``AsyncTestClient``, no sockets): one run is created and ``--started`` of its
episodes handed out, then every page of it is read once (each built, never read before), then
its first page is read ``--reads`` times each way — JSON, HTML, and (when the server sends an
``ETag``) a conditional read with ``If-None-Match`` — and the report gives the bytes and the
median latency of each. The same script runs against older code (it only uses what the API had
then), so before/after figures come from one command.
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

from service.app import create_app
from service.settings import Settings


async def measure(trials: int, started: int, reads: int, database_url: str) -> dict[str, Any]:
    # The in-process client ("testclient") is this host, like loopback: no rate limit (tests/conftest.py does the same).
    settings = replace(
        Settings(), database_url=database_url, baseline_seeds_per_task=1, rate_limit_exempt="127.0.0.1,::1,testclient"
    )
    async with AsyncTestClient(app=create_app(settings)) as client:
        created = await client.post("/runs", json={"agent": "bench", "split": "dev", "trials": trials})
        assert created.status_code == 201, created.text
        run = created.json()
        for _ in range(started):
            r = await client.post(
                f"/runs/{run['run_id']}/next", headers={"Authorization": f"Bearer {run['run_token']}"}
            )
            assert r.status_code == 200, r.text
        url = f"/runs/{run['run_id']}"

        async def timed(**kw: Any) -> tuple[float, int, Any]:
            t0 = time.perf_counter()
            resp = await client.get(url, **kw)
            return time.perf_counter() - t0, len(resp.content), resp

        report: dict[str, Any] = {"episodes_total": run["episodes_total"], "post_runs_bytes": len(created.content)}
        for name, kw in (("json", {}), ("html", {"params": {"format": "html"}})):
            # every page of the run read once: each is built (never read before, so never cached)
            n_pages = -(-run["episodes_total"] // 200)
            builds = [
                await timed(params={"page": n, "per_page": 200, **kw.get("params", {})}) for n in range(1, n_pages + 1)
            ]
            samples = [await timed(**kw) for _ in range(reads)]
            first = samples[0][2]
            report[name] = {
                "median_ms": round(statistics.median(s[0] for s in samples) * 1000, 2),
                "bytes": samples[0][1],
                "status": first.status_code,
                "first_read_of_each_page_median_ms": round(statistics.median(b[0] for b in builds) * 1000, 2),
            }
            etag = first.headers.get("etag")
            if etag:
                cond = [await timed(headers={"If-None-Match": etag}, **kw) for _ in range(reads)]
                report[name]["if_none_match"] = {
                    "median_ms": round(statistics.median(s[0] for s in cond) * 1000, 2),
                    "status": cond[0][2].status_code,
                }
        return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("--started", type=int, default=20, help="episodes handed out before reading")
    parser.add_argument("--reads", type=int, default=20)
    parser.add_argument("--database-url", default=None, help="default: SQLite in a temp dir")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = args.database_url or f"sqlite+aiosqlite:///{Path(tmp) / 'bench.db'}"
        print(json.dumps(asyncio.run(measure(args.trials, args.started, args.reads, url)), indent=2))


if __name__ == "__main__":
    main()
