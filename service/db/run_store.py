"""Atomic reads and writes of runs. Plain SQL, short transactions, nothing but database calls inside.

Handing out the next manifest entry is one transaction: ``next_index = next_index + 1`` guarded
by ``next_index < episodes_total`` (so two agents can never get the same entry), then the
episode row for that entry. Completion is counted in the step transaction that finishes a run
episode (:func:`count_finished_episode`), so ``episodes_done`` can never drift from the episodes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import and_, exists, insert, select, update
from sqlalchemy.engine import Connection

from service.db.engine import Database
from service.db.models import episodes, grades, runs, utcnow


@dataclass(frozen=True)
class RunRecord:
    id: str
    token_sha256: str
    agent: str
    model: str
    split: str
    trials: int
    task_ids: list[str]
    full_split: bool
    manifest: list[dict[str, Any]]
    episodes_total: int
    next_index: int
    episodes_done: int
    status: str
    dataset_version: str
    grader_version: str
    usage: dict[str, Any] | None
    summary: dict[str, Any] | None
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None


@dataclass(frozen=True)
class RunEpisode:
    """One started episode of a run, with its latest grade under ``grader_version`` (if finished)."""

    episode_id: str
    task_id: str
    seed: int
    status: str
    step_count: int
    truncated: bool
    score: float | None


def _run(row: Any) -> RunRecord:
    return RunRecord(**{k: row._mapping[k] for k in RunRecord.__dataclass_fields__})


async def insert_run(db: Database, **values: Any) -> RunRecord:
    now = utcnow()
    values = {"next_index": 0, "episodes_done": 0, "status": "active", "usage": None, "summary": None,
              "created_at": now, "updated_at": now, "finished_at": None, **values}
    await db.write(lambda conn: conn.execute(insert(runs).values(**values)))
    return RunRecord(**values)


async def get_run(db: Database, run_id: str) -> RunRecord | None:
    row = await db.read(lambda conn: conn.execute(select(runs).where(runs.c.id == run_id)).first())
    return _run(row) if row is not None else None


async def claim_next(db: Database, run_id: str, make_episode: Callable[[int], dict[str, Any]]) -> int | None:
    """Hand out the run's next manifest entry and store its episode; None when all are handed out.

    ``make_episode(index)`` returns the episode row's values (a pure computation, no I/O).
    """
    now = utcnow()

    def claim(conn: Connection) -> int | None:
        claimed = conn.execute(
            update(runs)
            .where(runs.c.id == run_id, runs.c.status == "active", runs.c.next_index < runs.c.episodes_total)
            .values(next_index=runs.c.next_index + 1, updated_at=now)
            .returning(runs.c.next_index)
        ).first()
        if claimed is None:
            return None
        index = claimed[0] - 1
        conn.execute(insert(episodes).values(**make_episode(index), created_at=now, updated_at=now))
        return index

    return await db.write(claim)


def count_finished_episode(conn: Connection, run_id: str) -> bool:
    """Inside the step transaction that finished a run episode: count it; True if the run is now complete."""
    now = utcnow()
    row = conn.execute(
        update(runs)
        .where(runs.c.id == run_id)
        .values(episodes_done=runs.c.episodes_done + 1, updated_at=now)
        .returning(runs.c.episodes_done, runs.c.episodes_total)
    ).first()
    if row is None or row[0] < row[1]:
        return False
    completed = conn.execute(
        update(runs).where(runs.c.id == run_id, runs.c.status == "active").values(status="complete", finished_at=now)
    )
    return completed.rowcount == 1


async def expire_idle(db: Database, cutoff: datetime) -> int:
    """Mark active runs with no activity since ``cutoff`` as expired; returns how many."""
    recent = exists().where(and_(episodes.c.run_id == runs.c.id, episodes.c.updated_at >= cutoff))
    result = await db.write(
        lambda conn: conn.execute(
            update(runs).where(runs.c.status == "active", runs.c.updated_at < cutoff, ~recent).values(status="expired")
        )
    )
    return result.rowcount or 0


async def run_episodes(db: Database, run_id: str, grader_version: str) -> list[RunEpisode]:
    query = (
        select(episodes.c.id, episodes.c.task_id, episodes.c.seed, episodes.c.status, episodes.c.step_count,
               episodes.c.state["truncated"].as_boolean().label("truncated"), grades.c.score)
        .select_from(episodes.outerjoin(grades, and_(grades.c.episode_id == episodes.c.id, grades.c.grader_version == grader_version)))
        .where(episodes.c.run_id == run_id)
    )
    rows = await db.read(lambda conn: conn.execute(query).all())
    return [
        RunEpisode(r.id, r.task_id, r.seed, r.status, r.step_count, bool(r.truncated), r.score)
        for r in rows
    ]


async def set_summary(db: Database, run_id: str, summary: dict[str, Any]) -> None:
    await db.write(lambda conn: conn.execute(update(runs).where(runs.c.id == run_id).values(summary=summary)))


async def set_usage(db: Database, run_id: str, usage: dict[str, Any]) -> None:
    now = utcnow()
    await db.write(lambda conn: conn.execute(update(runs).where(runs.c.id == run_id).values(usage=usage, updated_at=now)))


async def list_runs(db: Database, split: str | None = None, status: str | None = None) -> list[RunRecord]:
    query = select(runs).order_by(runs.c.created_at.desc())
    if split is not None:
        query = query.where(runs.c.split == split)
    if status is not None:
        query = query.where(runs.c.status == status)
    rows = await db.read(lambda conn: conn.execute(query).all())
    return [_run(r) for r in rows]
