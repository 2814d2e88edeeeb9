"""What is deleted, and when: the storage of a public server stays bounded by age, not by goodwill.

Deleted after their age (time since the last step or reset):

- plain episodes (outside any run) never finished, after ``unfinished_before``;
- plain episodes finished, after ``finished_before`` (None: kept);
- expired runs (idle past their TTL, never ranked) with all their episodes, after ``expired_runs_before``
  (one run at a time, its episodes in batches);
- complete runs that are not ranked (a subset of tasks or tickets: practice, like a plain episode)
  with all their episodes, after ``finished_before`` (None: kept), as finished plain episodes are.

Never deleted: a ranked (full-split) complete run or any of its episodes (leaderboard rows and their
run pages are built from them), nor an active run's. Each pass deletes in short batches (one transaction each,
children first, so it does not depend on ``ON DELETE CASCADE``) and at most ``max_batches`` of
them, so a backlog never holds the writer for long.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Select, and_, delete, exists, select
from sqlalchemy.engine import Connection

from service.db.engine import Database
from service.db.models import episodes, grades, runs, transitions

BATCH = 500


@dataclass(frozen=True)
class Purged:
    unfinished_episodes: int = 0
    finished_episodes: int = 0
    expired_runs: int = 0
    run_episodes: int = 0  # of expired and unranked runs
    unranked_runs: int = 0
    mcp_sessions: int = 0  # unused past MCP_SESSION_IDLE_S (service.housekeeping)

    def __bool__(self) -> bool:
        return any(getattr(self, name) for name in Purged.__dataclass_fields__)


def _delete_episodes(conn: Connection, ids: list[str]) -> int:
    if not ids:
        return 0
    conn.execute(delete(transitions).where(transitions.c.episode_id.in_(ids)))
    conn.execute(delete(grades).where(grades.c.episode_id.in_(ids)))
    return conn.execute(delete(episodes).where(episodes.c.id.in_(ids))).rowcount or 0


def plain_candidates(status: str, before: datetime) -> Select[str]:
    """One batch of plain episodes in ``status`` last touched before ``before`` (an index search:
    ix_episodes_plain_status_updated_at)."""
    return (
        select(episodes.c.id)
        .where(episodes.c.run_id.is_(None), episodes.c.status == status, episodes.c.updated_at < before)
        .limit(BATCH)
    )


async def _purge_plain(db: Database, status: str, before: datetime, max_batches: int) -> int:
    query = plain_candidates(status, before)
    total = 0
    for _ in range(max_batches):
        # re-checked inside the deleting transaction: an episode stepped meanwhile is kept
        def batch(conn: Connection) -> int:
            ids = list(conn.execute(query).scalars())
            return _delete_episodes(conn, ids)

        deleted = await db.write(batch)
        total += deleted
        if deleted < BATCH:
            break
    return total


def _stale_runs(status: str, before: datetime, *extra: Any) -> Select[tuple[str]]:
    """One run in ``status``, untouched since ``before``, none of its episodes either."""
    recent = exists().where(and_(episodes.c.run_id == runs.c.id, episodes.c.updated_at >= before))
    return select(runs.c.id).where(runs.c.status == status, runs.c.updated_at < before, ~recent, *extra).limit(1)


async def _purge_runs(db: Database, stale: Select[tuple[str]], max_batches: int) -> tuple[int, int]:
    n_runs = n_episodes = 0
    for _ in range(max_batches):
        # one run at a time, its episodes in batches; the run row goes with its last batch
        def batch(conn: Connection) -> tuple[int, int] | None:
            run_id = conn.execute(stale).scalar()
            if run_id is None:
                return None
            ids = list(conn.execute(select(episodes.c.id).where(episodes.c.run_id == run_id).limit(BATCH)).scalars())
            gone = _delete_episodes(conn, ids)
            if len(ids) < BATCH:
                return conn.execute(delete(runs).where(runs.c.id == run_id)).rowcount or 0, gone
            return 0, gone

        done = await db.write(batch)
        if done is None:
            break
        n_runs, n_episodes = n_runs + done[0], n_episodes + done[1]
    return n_runs, n_episodes


async def purge(
    db: Database,
    *,
    unfinished_before: datetime,
    finished_before: datetime | None,
    expired_runs_before: datetime,
    max_batches: int = 20,
) -> Purged:
    """One retention pass (see the module docstring); returns what it deleted."""
    unfinished = await _purge_plain(db, "active", unfinished_before, max_batches)
    finished = await _purge_plain(db, "done", finished_before, max_batches) if finished_before is not None else 0
    n_runs, n_run_episodes = await _purge_runs(db, _stale_runs("expired", expired_runs_before), max_batches)
    n_unranked = 0
    if finished_before is not None:
        n_unranked, more = await _purge_runs(
            db, _stale_runs("complete", finished_before, runs.c.full_split.is_(False)), max_batches
        )
        n_run_episodes += more
    return Purged(unfinished, finished, n_runs, n_run_episodes, n_unranked)


def describe(purged: Purged) -> dict[str, Any]:
    return {k: getattr(purged, k) for k in Purged.__dataclass_fields__}
