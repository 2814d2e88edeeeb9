"""The step path's shortcuts: prepared statements on the DB-API cursor, and grades served from the
episode cache. Each must give exactly what the plain paths give, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from sqlalchemy import bindparam, insert, select, update
from sqlalchemy.exc import IntegrityError

from service import env as core
from service.db import repository as repo
from service.db.migrate import upgrade_to_head
from service.db.models import episodes, grades, transitions
from service.db.prepared import Prepared
from service.domain.episodes.schemas import ResetParams
from service.domain.episodes.services import EpisodeService
from service.domain.runs.services import RunService
from service.env.agents import play_episode
from service.settings import Settings
from tests.db.rows import count_rows

NOW = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)


def _episode_values(episode_id: str) -> dict:
    return dict(
        id=episode_id,
        task_id="decision-easy",
        split="train",
        seed=7,
        ticket_id="train-100007",
        run_id=None,
        status="active",
        step_count=0,
        state={"nested": {"list": [1, 2.5, None, True], "text": "é ✓"}},
        version=1,
        created_at=NOW,
        updated_at=NOW,
        token_sha256="0" * 64,
        client_address="192.0.2.1",
    )


async def test_prepared_statements_store_what_core_statements_store(settings: Settings) -> None:
    db = settings.database()
    await upgrade_to_head(db)
    try:
        # the same row written by the Core path and by the prepared path reads back identically
        await db.write(lambda c: c.execute(insert(episodes).values(**_episode_values("core"))))
        await db.write(repo._INSERT_EPISODE.execute, _episode_values("prepared"))
        rows = await db.read(lambda c: {r.id: dict(r._mapping) for r in c.execute(select(episodes))})
        assert {k: v for k, v in rows["core"].items() if k != "id"} == {
            k: v for k, v in rows["prepared"].items() if k != "id"
        }
        assert rows["prepared"]["created_at"] == NOW and rows["prepared"]["state"]["nested"]["text"] == "é ✓"

        # a prepared read gives what Core reads: the JSON decoded, the datetimes UTC-aware, the NULLs None
        for episode_id in ("core", "prepared"):
            read = await db.read(repo._SELECT_EPISODE.first, {"episode_id": episode_id})
            assert read == rows[episode_id] and list(read) == list(rows[episode_id])
            assert read["created_at"].tzinfo is not None and read["created_at"] == NOW
            assert (await repo.get_episode(db, episode_id)) == repo._episode(
                await db.read(lambda c, i=episode_id: c.execute(select(episodes).where(episodes.c.id == i)).one())
            )
        await db.write(
            lambda c: c.execute(insert(episodes).values(**{**_episode_values("nulls"), "token_sha256": None}))
        )
        assert (await repo.get_episode(db, "nulls")).token_sha256 is None  # type: ignore[union-attr]
        assert await db.read(repo._SELECT_EPISODE.first, {"episode_id": "missing"}) is None
        await db.write(lambda c: c.execute(episodes.delete().where(episodes.c.id == "nulls")))

        # the guarded bump: literals of the statement are bound, the rowcount says who won
        bump = dict(
            episode_id="prepared",
            state={"s": 1},
            status="active",
            now=NOW + timedelta(seconds=1),
            created_at=NOW,
            token_sha256="0" * 64,
        )
        # another incarnation of the id (created at another time, or with another owner) is never bumped
        assert (
            await db.write(repo._BUMP_EPISODE.execute, {**bump, "expected": 0, "created_at": NOW - timedelta(1)}) == 0
        )
        assert await db.write(repo._BUMP_EPISODE.execute, {**bump, "expected": 0, "token_sha256": None}) == 0
        assert await db.write(repo._BUMP_EPISODE.execute, {**bump, "expected": 0}) == 1
        assert await db.write(repo._BUMP_EPISODE.execute, {**bump, "expected": 0}) == 0  # stale expectation
        row = await db.read(lambda c: c.execute(select(episodes).where(episodes.c.id == "prepared")).one())
        assert (row.step_count, row.version, row.state, row.updated_at) == (1, 2, {"s": 1}, NOW + timedelta(seconds=1))

        # driver errors surface as SQLAlchemy's, so callers handle them as on the Core path
        with pytest.raises(IntegrityError):
            await db.write(repo._INSERT_EPISODE.execute, _episode_values("prepared"))
        with pytest.raises(KeyError):
            await db.write(repo._INSERT_EPISODE.execute, {"id": "missing-columns"})
        assert await count_rows(db) == {"episodes": 2, "transitions": 0, "grades": 0}
    finally:
        await db.dispose()


def test_prepared_needs_a_positional_paramstyle() -> None:
    from sqlalchemy.dialects import postgresql

    statement = Prepared(update(episodes).values(status=bindparam("status")))
    with pytest.raises(TypeError, match="positional"):
        statement._compile(postgresql.psycopg2.dialect())  # pyformat


async def _play(service: EpisodeService, seed: int, stop_before_last: bool = False) -> tuple[str, list[dict]]:
    """Play a decision task with the heuristic agent; returns the episode id and the actions left."""
    task = next(t.id for t in core.TASKS.values() if t.family == "decision")
    actions = [a.model_dump(mode="json", exclude_none=True) for a in play_episode("heuristic", task, seed, "train")[1]]
    started = await service.reset(ResetParams(task_id=task, seed=seed))
    last = len(actions) - 1 if stop_before_last else len(actions)
    for action in actions[:last]:
        await service.step(started.episode_id, action)
    return started.episode_id, actions[last:]


async def test_grader_from_cache_equals_grader_from_the_database(settings: Settings) -> None:
    db = settings.database()
    await upgrade_to_head(db)
    try:
        runs = RunService(db, ttl_s=3600)
        here = EpisodeService(db, runs=runs)
        episode_id, _ = await _play(here, seed=11)
        cached = here.cache.get(episode_id)
        assert cached is not None and cached.grade is not None  # the finishing step left its grade
        from_cache = await here.grade(episode_id)
        from_db = await EpisodeService(db, runs=runs).grade(episode_id)  # a fresh process: no cache
        assert from_cache == from_db
        assert from_db.score == core.grade_episode(cached.state).score
        assert await count_rows(db) == {
            "episodes": 1,
            "transitions": len(await repo.list_transitions(db, episode_id)),
            "grades": 1,
        }
    finally:
        await db.dispose()


async def test_grader_after_another_process_finished_the_episode(settings: Settings) -> None:
    """This process cached the episode while active; another finished it: the grade comes from the database."""
    db = settings.database()
    await upgrade_to_head(db)
    try:
        runs = RunService(db, ttl_s=3600)
        first, second = EpisodeService(db, runs=runs), EpisodeService(db, runs=runs)
        episode_id, rest = await _play(first, seed=12, stop_before_last=True)
        assert rest
        finished = await second.step(episode_id, rest[0])
        assert finished.done
        stale = first.cache.get(episode_id)
        assert stale is not None and stale.record.status == "active"
        assert await first.grade(episode_id) == await second.grade(episode_id)
        assert (await first.grade(episode_id)).step_count == finished.metadata["step_count"]
        rows = await db.read(lambda c: c.execute(select(grades.c.episode_id)).all())
        assert (
            len(rows) == 1
            and len(await db.read(lambda c: c.execute(select(transitions)).all())) == finished.metadata["step_count"]
        )
    finally:
        await db.dispose()


# --------------------------------------------------------------- per-request shortcuts (#22 item 5)


@pytest.mark.parametrize("value", ["0f3a9c", "", None, "a%2Fb-._~", "x y", "é", 'q"uote'])
@pytest.mark.parametrize("max_age", [None, 0])
@pytest.mark.parametrize("secure", [False, True])
def test_reset_cookies_are_the_headers_litestar_writes(value: str | None, max_age: int | None, secure: bool) -> None:
    from litestar.datastructures import Cookie

    from service.domain.episodes.cookies import _cookie

    for key in ("ecomm_episode", "ecomm_episode_token"):
        ours = _cookie(key, value, max_age=max_age, secure=secure)  # type: ignore[arg-type]
        plain = Cookie(key=key, value=value, httponly=True, samesite="lax", path="/", max_age=max_age, secure=secure)
        assert ours.to_encoded_header() == plain.to_encoded_header()
        assert ours == plain and hash(ours) == hash(plain)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=False) | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=2), inner, max_size=3),
    max_leaves=10,
)


@given(_JSON, _JSON)
@hsettings(max_examples=500, deadline=None)
def test_compared_by_encoding_as_by_walking(a: object, b: object) -> None:
    """The writer compares a step's values with the step before's by ``==`` and their JSON encoding; that says
    "same" exactly when the walk over types, key order and values does."""
    from service.db.observations import _same, _same_walk

    assert _same(a, b) == _same_walk(a, b)
    assert _same(a, a) and _same(b, b)


def test_compared_by_encoding_keeps_json_types_apart() -> None:
    from service.db.observations import _same

    for a, b in [(1, 1.0), (1, True), (0.0, -0.0), (float("inf"), None), ({"a": 1, "b": 2}, {"b": 2, "a": 1})]:
        assert not _same(a, b) and not _same(b, a)


def test_wire_observation_is_what_the_wire_model_dumps() -> None:
    from service.domain.episodes.schemas import WIRE_LIFTED, WireObservation, wire_observation

    for task_id in core.TASKS:
        state, observation = core.reset(task_id, 3, "train")
        _, actions = play_episode("heuristic", task_id, 3, "train")
        for action in actions:
            wire = wire_observation("e1", observation)
            model = WireObservation.model_construct(**dict(observation), episode_id="e1")
            assert json.dumps(wire) == json.dumps(model.model_dump(mode="json", exclude=set(WIRE_LIFTED)))
            result = core.step(state, action)
            state, observation = result.state, result.observation
