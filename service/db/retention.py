"""What is deleted, and when: the storage of a public server stays bounded by age, not by goodwill.

Deleted after their age (time since the last step or reset):

- plain episodes (outside any run) never finished, after ``unfinished_before``;
- plain episodes finished, after ``finished_before`` (None: kept);
- expired runs (idle past their TTL, never ranked) with all their episodes, after ``expired_runs_before``
  (one run at a time, its episodes in batches);
- complete runs that are not ranked (a subset of tasks or tickets: practice, like a plain episode)
  with all their episodes, after ``finished_before`` (None: kept), as finished plain episodes are;
- complete ranked (full-split) runs beyond the ``ranked_keep`` an entrant keeps — its best run (its
  leaderboard row) and its most recent others — with all their episodes, after ``finished_before`` (None:
  kept), on the splits given (the public ones: test runs are bounded by the test-run quota and stay for
  the Ladder); ``ranked_keep=0`` keeps them all.

Never deleted: an entrant's best ranked run or its most recent ones, nor an active run's episodes. Each
pass deletes in short batches (one transaction each, children first, so it does not depend on ``ON
DELETE CASCADE``) and at most ``max_batches`` of them, so a backlog never holds the writer for long.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Select, and_, delete, exists, insert, select, update
from sqlalchemy.engine import Connection

from service.db import names
from service.db.clock import SteadyClock
from service.db.engine import Database
from service.db.models import episodes, grades, process_clocks, runs, transitions

BATCH = 500


@dataclass(frozen=True)
class Purged:
    unfinished_episodes: int = 0
    finished_episodes: int = 0
    expired_runs: int = 0
    run_episodes: int = 0  # of expired, unranked and surplus ranked runs
    unranked_runs: int = 0
    ranked_runs: int = 0  # beyond what their entrant keeps
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


def surplus_ranked_runs(conn: Connection, keep: int, before: datetime, splits: tuple[str, ...]) -> list[str]:
    """The complete ranked runs of ``splits`` finished before ``before`` that their entrant (submitter, agent
    name, model, split, dataset and grader version) does not keep: its best — as the leaderboard ranks it:
    resolved rate, then mean, then the earlier finish — and its ``keep - 1`` most recent others."""
    query = select(
        runs.c.id,
        runs.c.submitter,
        runs.c.agent,
        runs.c.model,
        runs.c.split,
        runs.c.dataset_version,
        runs.c.grader_version,
        runs.c.summary["resolved"].as_float(),
        runs.c.summary["mean"].as_float(),
        runs.c.finished_at,
        runs.c.created_at,
    ).where(runs.c.status == "complete", runs.c.full_split.is_(True), runs.c.split.in_(splits))
    groups: dict[tuple[Any, ...], list[Any]] = {}
    for row in conn.execute(query):
        entrant = (row.submitter, names.name_key(row.agent), row.model, row.split, row[5], row[6])
        groups.setdefault(entrant, []).append(row)
    surplus = []
    for group in groups.values():
        best = min(group, key=lambda r: (-(r[7] or 0.0), -(r[8] or 0.0), r.finished_at or r.created_at))
        recent = sorted(group, key=lambda r: r.finished_at or r.created_at, reverse=True)[: max(keep - 1, 0)]
        kept = {best.id, *(r.id for r in recent)}
        surplus += [r.id for r in group if r.id not in kept and (r.finished_at or r.created_at) < before]
    return sorted(surplus)


async def _purge_ranked(
    db: Database, keep: int, before: datetime, splits: tuple[str, ...], max_batches: int
) -> tuple[int, int]:
    ids = await db.read(surplus_ranked_runs, keep, before, splits)
    if not ids:
        return 0, 0
    # each batch re-reads which of them is still there (the next one of the list, its episodes, then the row)
    return await _purge_runs(db, select(runs.c.id).where(runs.c.id.in_(ids)).limit(1), max_batches)


async def purge(
    db: Database,
    *,
    unfinished_before: datetime,
    finished_before: datetime | None,
    expired_runs_before: datetime,
    ranked_keep: int = 0,
    ranked_splits: tuple[str, ...] = (),
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
    n_ranked = 0
    if finished_before is not None and ranked_keep > 0 and ranked_splits:
        n_ranked, more = await _purge_ranked(db, ranked_keep, finished_before, ranked_splits, max_batches)
        n_run_episodes += more
    return Purged(unfinished, finished, n_runs, n_run_episodes, n_unranked, n_ranked)


PEER_GONE_PASSES = 3  # a process whose clock has not moved for this many retention intervals has stopped


async def align(db: Database, clock: SteadyClock, interval_s: float) -> float:
    """Write ``clock``'s reading as its process's heartbeat, read every other process's, and set
    ``clock.lag`` to how far ``clock`` runs ahead of the slowest live one (0 if none is slower); returns it.

    A peer's reading ``at``, first seen when this clock's monotonic time was ``m0``, says the peer's clock is
    at least ``at + (monotonic − m0)`` by now if it is alive — so the lag counted is never more than the
    peer's true lag (and never less than it by more than the time since the peer's last beat). A reading that
    has not changed for :data:`PEER_GONE_PASSES` intervals is a stopped process's: its row is deleted, and it
    no longer holds anything back (a live process writes its row again at its next pass)."""
    now, mono = clock.now(), clock.monotonic()

    def beat(conn: Connection) -> list[tuple[str, datetime]]:
        if conn.execute(update(process_clocks).where(process_clocks.c.id == clock.id).values(clock_at=now)).rowcount:
            pass
        else:
            conn.execute(insert(process_clocks).values(id=clock.id, clock_at=now))
        rows = conn.execute(
            select(process_clocks.c.id, process_clocks.c.clock_at).where(process_clocks.c.id != clock.id)
        )
        return [(r.id, r.clock_at) for r in rows]

    lag, gone = 0.0, []
    for peer, at in await db.write(beat):
        seen = clock.peers.get(peer)
        if seen is None or seen[0] != at:
            clock.peers[peer] = seen = (at, mono)
        elif mono - seen[1] >= PEER_GONE_PASSES * interval_s:
            gone.append(peer)
            continue
        lag = max(lag, (now - at).total_seconds() - (mono - seen[1]))
    if gone:
        await db.write(lambda conn: conn.execute(delete(process_clocks).where(process_clocks.c.id.in_(gone))))
        for peer in gone:
            clock.peers.pop(peer, None)
    clock.lag = lag
    return lag


async def leave(db: Database, clock: SteadyClock) -> None:
    """At a clean stop: this process no longer holds anyone's ages back."""
    await db.write(lambda conn: conn.execute(delete(process_clocks).where(process_clocks.c.id == clock.id)))


def describe(purged: Purged) -> dict[str, Any]:
    return {k: getattr(purged, k) for k in Purged.__dataclass_fields__}
