"""Cost stays flat as stored work grows: the leaderboard reads only what it shows and is cached until a
run completes (in every process), a run episode's step never loads the run's manifest, and reads never
write (idle runs expire on a timer). On both backends."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import timedelta
from typing import Any

from litestar.testing import AsyncTestClient
from sqlalchemy import event, select, update
from sqlalchemy.engine import Engine

from bench.harness import STALLED_AFTER_S
from service.app import create_app
from service.db.models import episodes as ep_table
from service.db.models import runs as runs_table
from service.db.models import utcnow
from service.settings import Settings
from tests.api.test_runs import Client, auth, create_run, play_run

STEPS: list[dict[str, Any]] = [
    {"lookup": "order"},
    {"reply": "Hello, we are looking at your order now."},
    {"add_tag": "Shipping"},
]


@contextmanager
def statements() -> Iterator[list[str]]:
    """Every SQL statement any engine of this process sends while the block runs (the step path's
    prepared statements run on the DB-API cursor and are not seen; they never touch ``runs``)."""
    seen: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        seen.append(statement)

    event.listen(Engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(Engine, "before_cursor_execute", record)


def reading_manifest(sql: list[str]) -> list[str]:
    return [s for s in sql if "manifest" in s]


# ------------------------------------------------------------------------------------ leaderboard


async def test_leaderboard_reads_only_what_it_shows_and_is_cached_until_a_run_completes(client: Client) -> None:
    first = await create_run(client, split="dev", limit_per_task=1, agent="first")
    second = await create_run(client, split="dev", limit_per_task=1, agent="second")
    await play_run(client, first)
    with statements() as sql:
        board = (await client.get("/leaderboard", params={"split": "dev"})).json()
    assert [r["run_id"] for r in board["unranked"]] == [first["run_id"]]
    assert not reading_manifest(sql), reading_manifest(sql)

    with statements() as sql:
        again = (await client.get("/leaderboard", params={"split": "dev"})).json()
    assert again == board
    assert not [s for s in sql if "summary" in s], "a cached leaderboard read its rows again"

    await play_run(client, second)  # a completion invalidates it
    board = (await client.get("/leaderboard", params={"split": "dev"})).json()
    assert {r["run_id"] for r in board["unranked"]} == {first["run_id"], second["run_id"]}
    # so does anything else the leaderboard shows of a finished run: its self-reported usage
    usage = {"prompt_tokens": 10, "completion_tokens": 2}
    assert (
        await client.post(f"/runs/{first['run_id']}/usage", json=usage, headers=auth(first["run_token"]))
    ).status_code == 200
    board = (await client.get("/leaderboard", params={"split": "dev"})).json()
    assert next(r for r in board["unranked"] if r["run_id"] == first["run_id"])["usage"]["prompt_tokens"] == 10


async def test_leaderboard_cache_follows_runs_completed_in_another_process(settings: Settings) -> None:
    async with AsyncTestClient(app=create_app(settings)) as reader, AsyncTestClient(app=create_app(settings)) as player:
        run = await create_run(player, split="dev", limit_per_task=1)
        assert (await reader.get("/leaderboard", params={"split": "dev"})).json()["unranked"] == []
        await play_run(player, run)
        board = (await reader.get("/leaderboard", params={"split": "dev"})).json()
        assert [r["run_id"] for r in board["unranked"]] == [run["run_id"]]
        assert board["unranked"][0]["resolved"] is not None  # with its summary, not before it is stored


# ------------------------------------------------------------------------------------- run steps


async def test_a_run_episode_step_never_loads_the_manifest(client: Client) -> None:
    run = await create_run(client, split="dev", limit_per_task=2, trials=2)
    started = (await client.post(f"/runs/{run['run_id']}/next", headers=auth(run["run_token"]))).json()
    episode_id = started["metadata"]["episode_id"]
    with statements() as sql:
        for _i, action in enumerate(STEPS):
            resp = await client.post(
                "/step", json={"episode_id": episode_id, "action": action}, headers=auth(run["run_token"])
            )
            assert resp.status_code == 200, resp.text
        for _ in range(3):  # this process has the manifest already: the next entries need no decode
            assert (await client.post(f"/runs/{run['run_id']}/next", headers=auth(run["run_token"]))).status_code == 200
    assert not reading_manifest(sql), reading_manifest(sql)


# --------------------------------------------------------------------------- reads never write


async def test_run_reads_never_write(settings: Settings) -> None:
    app = create_app(settings)
    async with AsyncTestClient(app=app) as client:
        run = await create_run(client, split="dev", limit_per_task=1)
        await play_run(client, run, stop_after=2)
        database = app.state.database
        writes: list[str] = []
        original = database.write

        async def counting_write(fn: Any, *args: Any, **kwargs: Any) -> Any:
            writes.append(getattr(fn, "__qualname__", repr(fn)))
            return await original(fn, *args, **kwargs)

        database.write = counting_write
        for path, params in (
            ("/leaderboard", {"split": "dev"}),
            (f"/runs/{run['run_id']}", {}),
            ("/grader", {"run_id": run["run_id"]}),
            ("/leaderboard", {"split": "dev", "format": "html"}),
        ):
            resp = await client.get(path, params=params)
            assert resp.status_code == 200, (path, resp.text)
        assert writes == [], f"reads wrote: {writes}"


async def test_idle_runs_expire_on_a_timer(settings: Settings) -> None:
    app = create_app(replace(settings, run_sweep_interval_s=0.2))
    async with AsyncTestClient(app=app) as client:
        idle = await create_run(client, split="dev", limit_per_task=1)
        await play_run(client, idle, stop_after=1)
        month_ago = utcnow() - timedelta(days=30)  # past any TTL

        def age(conn: Any) -> None:
            conn.execute(update(runs_table).where(runs_table.c.id == idle["run_id"]).values(updated_at=month_ago))
            conn.execute(update(ep_table).where(ep_table.c.run_id == idle["run_id"]).values(updated_at=month_ago))

        db = settings.database()  # this test's event loop (the app's engine lives on the client's loop)
        try:
            await db.write(age)
            status = lambda: db.read(  # noqa: E731 - the stored status
                lambda c: c.execute(select(runs_table.c.status).where(runs_table.c.id == idle["run_id"])).scalar_one()
            )
            deadline = time.monotonic() + STALLED_AFTER_S  # a safety net: the wait ends when the sweep expires it
            while await status() != "expired":
                assert time.monotonic() < deadline, "the idle run was not expired by the timer"
                await asyncio.sleep(0.05)
        finally:
            await db.dispose()
