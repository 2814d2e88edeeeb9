"""Atomic reads and writes of episodes, transitions and grades. Plain SQL, short transactions.

The step write is one transaction: bump ``episodes.step_count`` guarded by the step count the
caller computed from (``WHERE step_count = :expected``), then insert the transition (and the
grade when the step finished the episode). Zero rows updated means another step won the race:
:class:`StepConflict`. Nothing but database calls happens inside a transaction.

A transition stores its observation as what changed since the previous step
(:mod:`service.db.observations`); every read here returns whole observations.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from service.db import observations
from service.db.engine import Database
from service.db.models import episodes, grades, transitions, utcnow
from service.db.prepared import Prepared
from service.db.run_store import count_finished_episode


class EpisodeExists(Exception):
    """An episode with this id is already stored."""


class StepConflict(Exception):
    """The episode moved on (another step was applied) since the caller read it."""


@dataclass(frozen=True)
class EpisodeRecord:
    id: str
    task_id: str
    split: str
    seed: int
    ticket_id: str
    run_id: str | None
    status: str
    step_count: int
    state: dict[str, Any]
    version: int
    created_at: datetime
    updated_at: datetime
    token_sha256: str | None = None  # set for client-chosen ids: the owner's episode token, hashed

    def same_incarnation(self, other: EpisodeRecord) -> bool:
        """Whether ``other`` is this very episode with this owner, not a later one stored under the same id
        (retention deleted this one and someone reset the id again) nor one whose token was revoked."""
        return (self.id, self.created_at, self.token_sha256) == (other.id, other.created_at, other.token_sha256)


@dataclass(frozen=True)
class TransitionRecord:
    episode_id: str
    step_index: int
    request_id: str | None
    action: dict[str, Any]
    observation: dict[str, Any]
    reward: float
    done: bool
    created_at: datetime


@dataclass(frozen=True)
class GradeRecord:
    episode_id: str
    score: float
    resolved: bool
    breakdown: dict[str, Any]
    grader_version: str
    created_at: datetime


@dataclass(frozen=True)
class GradeDraft:
    score: float
    resolved: bool
    breakdown: dict[str, Any]
    grader_version: str


def _episode(row: Any) -> EpisodeRecord:
    return EpisodeRecord(**{k: row._mapping[k] for k in EpisodeRecord.__dataclass_fields__})


def _transition(row: Any) -> TransitionRecord:
    return TransitionRecord(**{k: row._mapping[k] for k in TransitionRecord.__dataclass_fields__})


def _grade(row: Any) -> GradeRecord:
    return GradeRecord(**{k: row._mapping[k] for k in GradeRecord.__dataclass_fields__})


def _insert(table: Any) -> Prepared:
    """INSERT of every column but an autoincrement key, one bind parameter per column name."""
    columns = [c for c in table.c if c is not table.autoincrement_column]
    return Prepared(insert(table).values({c.name: bindparam(c.name, type_=c.type) for c in columns}).inline())


# The hot path's statements: built once, compiled once per dialect, run on the DB-API cursor
# (see service.db.prepared); only parameters change per step.
_BUMP_EPISODE = Prepared(
    update(episodes)
    .where(
        episodes.c.id == bindparam("episode_id"),
        episodes.c.step_count == bindparam("expected"),
        episodes.c.status == "active",
        # the same incarnation of the id, with the same owner: an episode deleted by retention and its id
        # reset again by someone else is another row, which a stale cached copy must never step
        episodes.c.created_at == bindparam("created_at", type_=episodes.c.created_at.type),
        episodes.c.token_sha256.is_not_distinct_from(bindparam("token_sha256", type_=episodes.c.token_sha256.type)),
    )
    .values(
        step_count=episodes.c.step_count + 1,
        version=episodes.c.version + 1,
        state=bindparam("state", type_=episodes.c.state.type),
        status=bindparam("status"),
        updated_at=bindparam("now", type_=episodes.c.updated_at.type),
    )
)
_INSERT_EPISODE = _insert(episodes)
_INSERT_TRANSITION = _insert(transitions)
_INSERT_GRADE = _insert(grades)
_SELECT_EPISODE = Prepared(select(episodes).where(episodes.c.id == bindparam("episode_id")))
_EPISODE_FIELDS = tuple(EpisodeRecord.__dataclass_fields__)
_SELECT_TRANSITIONS = (
    select(transitions).where(transitions.c.episode_id == bindparam("episode_id")).order_by(transitions.c.step_index)
)
_SELECT_OBSERVATIONS = (
    select(transitions.c.observation)
    .where(transitions.c.episode_id == bindparam("episode_id"))
    .order_by(transitions.c.step_index)
)


async def insert_episode(
    db: Database,
    *,
    episode_id: str,
    task_id: str,
    split: str,
    seed: int,
    ticket_id: str,
    run_id: str | None,
    state: dict[str, Any],
    done: bool,
    token_sha256: str | None = None,
    client_address: str | None = None,
) -> EpisodeRecord:
    now = utcnow()
    values: dict[str, Any] = dict(
        id=episode_id,
        task_id=task_id,
        split=split,
        seed=seed,
        ticket_id=ticket_id,
        run_id=run_id,
        status="done" if done else "active",
        step_count=0,
        state=state,
        version=1,
        created_at=now,
        updated_at=now,
        token_sha256=token_sha256,
        client_address=client_address,  # counted against the storage cap per address
    )
    try:
        await db.write(_INSERT_EPISODE.execute, values)
    except IntegrityError as exc:
        raise EpisodeExists(episode_id) from exc
    return EpisodeRecord(**{k: v for k, v in values.items() if k in EpisodeRecord.__dataclass_fields__})


async def get_episode(db: Database, episode_id: str) -> EpisodeRecord | None:
    row = await db.read(_SELECT_EPISODE.first, {"episode_id": episode_id})  # every step not served from the cache
    return EpisodeRecord(**{k: row[k] for k in _EPISODE_FIELDS}) if row is not None else None


async def get_transition_by_request(db: Database, episode_id: str, request_id: str) -> TransitionRecord | None:
    return next((t for t in await list_transitions(db, episode_id) if t.request_id == request_id), None)


async def list_transitions(db: Database, episode_id: str) -> list[TransitionRecord]:
    """The episode's transitions in step order, each with its whole observation (rebuilt from the first
    step's, a few rows: an episode has at most its task's max_steps)."""
    rows = await db.read(lambda conn: conn.execute(_SELECT_TRANSITIONS, {"episode_id": episode_id}).all())
    whole = observations.expand_all([r.observation for r in rows])
    return [replace(_transition(r), observation=o) for r, o in zip(rows, whole, strict=True)]


async def last_transition(db: Database, episode_id: str) -> TransitionRecord | None:
    stored = await list_transitions(db, episode_id)
    return stored[-1] if stored else None


async def record_step(
    db: Database,
    *,
    episode: EpisodeRecord,
    new_state: dict[str, Any],
    done: bool,
    request_id: str | None,
    action: dict[str, Any],
    observation: dict[str, Any],
    reward: float,
    grade: GradeDraft | None = None,
    run_id: str | None = None,
    previous_observation: dict[str, Any] | None = None,
) -> TransitionRecord:
    """Persist one applied step of ``episode`` (as the caller read it) atomically, or raise
    :class:`StepConflict` and change nothing: another step moved it on, or the stored row under its id is
    not ``episode`` any more (another incarnation of the id, or its token changed).

    When the step finishes an episode of a run, the run's finished-episode count moves in the
    same transaction (and the run becomes complete with its last episode).

    ``previous_observation``: the whole observation of step ``expected_step_count`` if the caller has
    it (its cache), so only what changed is stored; without it, it is rebuilt inside the transaction.
    """
    now = utcnow()
    episode_id, expected_step_count = episode.id, episode.step_count
    step_index = expected_step_count + 1
    record = TransitionRecord(
        episode_id=episode_id,
        step_index=step_index,
        request_id=request_id,
        action=action,
        observation=observation,
        reward=reward,
        done=done,
        created_at=now,
    )
    try:
        await db.write(_record_step, record, episode, new_state, grade, run_id, previous_observation)
    except IntegrityError as exc:
        # Only reachable if a writer bypassed the step_count guard; treat it as a lost race.
        raise StepConflict(episode_id) from exc
    return record


def _record_step(
    conn: Connection,
    record: TransitionRecord,
    episode: EpisodeRecord,
    new_state: dict[str, Any],
    grade: GradeDraft | None,
    run_id: str | None,
    previous_observation: dict[str, Any] | None = None,
) -> None:
    """The step transaction: guarded bump, transition, grade, run count. Raises StepConflict."""
    expected_step_count = episode.step_count
    bumped = _BUMP_EPISODE.execute(
        conn,
        {
            "episode_id": record.episode_id,
            "expected": expected_step_count,
            "created_at": episode.created_at,
            "token_sha256": episode.token_sha256,
            "state": new_state,
            "status": "done" if record.done else "active",
            "now": record.created_at,
        },
    )
    if bumped != 1:
        raise StepConflict(record.episode_id)
    # The guard held, so step ``expected_step_count`` is the last stored one: the base of this delta.
    previous = None
    if expected_step_count > 0:
        previous = previous_observation
        if previous is None:
            stored = [r[0] for r in conn.execute(_SELECT_OBSERVATIONS, {"episode_id": record.episode_id})]
            previous = observations.expand_all(stored)[-1] if stored else None
    _INSERT_TRANSITION.execute(
        conn, {**record.__dict__, "observation": observations.compact(previous, record.observation)}
    )
    if grade is not None:
        _INSERT_GRADE.execute(
            conn,
            {
                "episode_id": record.episode_id,
                "score": grade.score,
                "resolved": grade.resolved,
                "breakdown": grade.breakdown,
                "grader_version": grade.grader_version,
                "created_at": record.created_at,
            },
        )
    if record.done and run_id is not None:
        count_finished_episode(conn, run_id)


async def get_grade(db: Database, episode_id: str, grader_version: str) -> GradeRecord | None:
    query = select(grades).where(grades.c.episode_id == episode_id, grades.c.grader_version == grader_version)
    row = await db.read(lambda conn: conn.execute(query).first())
    return _grade(row) if row is not None else None


async def save_grade(db: Database, episode_id: str, draft: GradeDraft) -> GradeRecord:
    """Store a grade once per (episode, grader version); a second call returns the stored one."""
    now = utcnow()
    try:
        await db.write(
            lambda conn: conn.execute(
                insert(grades).values(
                    episode_id=episode_id,
                    score=draft.score,
                    resolved=draft.resolved,
                    breakdown=draft.breakdown,
                    grader_version=draft.grader_version,
                    created_at=now,
                )
            )
        )
        return GradeRecord(episode_id, draft.score, draft.resolved, draft.breakdown, draft.grader_version, now)
    except IntegrityError:
        stored = await get_grade(db, episode_id, draft.grader_version)
        if stored is None:  # the episode itself is gone
            raise
        return stored


@dataclass(frozen=True)
class FinishedEpisode:
    """A finished episode as the re-grader replays it."""

    id: str
    task_id: str
    seed: int
    split: str
    state: dict[str, Any]
    run_id: str | None


async def finished_episodes(db: Database, run_id: str | None = None) -> list[FinishedEpisode]:
    """Every finished episode (of one run, if given), by id."""
    query = select(
        episodes.c.id, episodes.c.task_id, episodes.c.seed, episodes.c.split, episodes.c.state, episodes.c.run_id
    ).where(episodes.c.status == "done")
    if run_id is not None:
        query = query.where(episodes.c.run_id == run_id)

    def read(conn: Connection) -> list[FinishedEpisode]:
        return [FinishedEpisode(*row) for row in conn.execute(query.order_by(episodes.c.id))]

    return await db.read(read)


async def latest_grades(db: Database) -> dict[str, tuple[float, bool, str]]:
    """episode id → (score, resolved, grader version) of its latest stored grade."""
    query = select(grades.c.episode_id, grades.c.score, grades.c.resolved, grades.c.grader_version).order_by(
        grades.c.id
    )

    def read(conn: Connection) -> dict[str, tuple[float, bool, str]]:
        return {row.episode_id: (row.score, row.resolved, row.grader_version) for row in conn.execute(query)}

    return await db.read(read)
