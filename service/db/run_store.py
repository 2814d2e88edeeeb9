"""Atomic reads and writes of runs. Plain SQL, short transactions, nothing but database calls inside.

Handing out the next manifest entry is one transaction: ``next_index = next_index + 1`` guarded
by ``next_index < episodes_total`` (so two agents can never get the same entry), then the
episode row for that entry. Completion is counted in the step transaction that finishes a run
episode (:func:`count_finished_episode`), so ``episodes_done`` can never drift from the episodes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, and_, bindparam, exists, func, insert, or_, select, text, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from service.db import names
from service.db.engine import Database
from service.db.models import agent_names, deployment_secrets, episodes, grades, runs, submitters, utcnow


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
    limit_per_task: int | None
    manifest: list[dict[str, Any]] | None  # only runs created before 0005; see service.domain.runs.services.manifest_of
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
    submitter: str | None
    key_fingerprint: str | None
    released: float | None
    status_reason: str | None
    outcomes: list[float] | None  # private: each ticket's resolved share (paired comparisons)
    verified_by: str | None
    verified_at: datetime | None
    verification_note: str | None


@dataclass(frozen=True)
class RunAccess:
    """What authorising a request on a run needs: never its manifest."""

    id: str
    token_sha256: str
    split: str
    status: str
    updated_at: datetime
    key_fingerprint: str | None  # the test key a test run is pinned to
    status_reason: str | None  # why an expired run expired


@dataclass(frozen=True)
class BoardRun:
    """A complete run as the leaderboard shows it (no manifest, no token)."""

    id: str
    agent: str
    model: str
    split: str
    trials: int
    full_split: bool
    dataset_version: str
    grader_version: str
    usage: dict[str, Any] | None
    summary: dict[str, Any] | None
    finished_at: datetime | None
    submitter: str | None
    key_fingerprint: str | None
    released: float | None
    created_at: datetime  # ties between an entrant's runs fall back to it (no finished_at)
    outcomes: list[float] | None  # private: compared pairwise to make the board's tie groups, never shown
    verified_by: str | None
    verified_at: datetime | None
    verification_note: str | None


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
    resolved: bool | None


@dataclass(frozen=True)
class SubmitterRecord:
    id: int
    name: str
    key_sha256: str
    quota: int | None
    created_at: datetime
    revoked_at: datetime | None


class QuotaExceeded(Exception):
    """The submitter has used its test runs for the period; ``retry_at`` is when one frees up."""

    def __init__(self, used: int, retry_at: datetime) -> None:
        super().__init__(f"{used} test runs in the period")
        self.used, self.retry_at = used, retry_at


class BudgetSpent(Exception):
    """The submitter has created its lifetime budget of test runs under this test key."""

    def __init__(self, used: int) -> None:
        super().__init__(f"{used} test runs under this test key")
        self.used = used


class SubmitterExists(Exception):
    pass


class AgentNameTaken(Exception):
    """The agent name belongs to another submitter (``owner``)."""

    def __init__(self, name: str, owner: str) -> None:
        super().__init__(name)
        self.name, self.owner = name, owner


def agent_name_key(name: str) -> str:
    """How agent names are compared for ownership: two names a reader cannot tell apart are one
    (:func:`service.db.names.name_key`: NFKC, invisible characters dropped, look-alike letters of other
    scripts mapped to Latin, accents dropped, spacing collapsed, case folded)."""
    return names.name_key(name)


class EpisodeIdTaken(Exception):
    """The id of a run's next episode is already stored (nothing was claimed)."""

    def __init__(self, episode_id: str) -> None:
        super().__init__(episode_id)
        self.episode_id = episode_id


def _run(row: Any) -> RunRecord:
    return RunRecord(**{k: row._mapping[k] for k in RunRecord.__dataclass_fields__})


def _columns(record: type) -> list[Any]:
    return [runs.c[name] for name in record.__dataclass_fields__]  # type: ignore[attr-defined]


async def insert_run(
    db: Database, quota: tuple[int, datetime] | None = None, budget: int | None = None, **values: Any
) -> RunRecord:
    """Store a new run. With ``quota = (limit, since)`` and a ``submitter``, refuse (QuotaExceeded)
    when that submitter already created ``limit`` runs of this run's split (the test split: only test
    runs carry a quota) since ``since``; with ``budget``, refuse (BudgetSpent) when it has ``budget`` runs
    under this run's test key (``key_fingerprint``) that are active or complete — ever: a run that expired
    released nothing and is not counted. Counted and inserted in one transaction, with the submitter's row
    locked on PostgreSQL, so racing requests cannot both pass."""
    now = utcnow()
    values = {
        "next_index": 0,
        "episodes_done": 0,
        "status": "active",
        "usage": None,
        "summary": None,
        "created_at": now,
        "updated_at": now,
        "finished_at": None,
        "submitter": None,
        "key_fingerprint": None,
        "released": None,
        "revision": 0,
        "status_reason": None,
        "outcomes": None,
        "verified_by": None,
        "verified_at": None,
        "verification_note": None,
        **values,
    }

    def insert_checked(conn: Connection) -> None:
        if quota is not None:
            limit, since = quota
            conn.execute(select(submitters.c.id).where(submitters.c.name == values["submitter"]).with_for_update())
            recent = conn.execute(
                select(func.count(), func.min(runs.c.created_at)).where(
                    runs.c.submitter == values["submitter"], runs.c.split == values["split"], runs.c.created_at >= since
                )
            ).one()
            if recent[0] >= limit:
                raise QuotaExceeded(recent[0], _aware(recent[1]))
        if budget is not None:
            if quota is None:
                conn.execute(select(submitters.c.id).where(submitters.c.name == values["submitter"]).with_for_update())
            spent = conn.execute(
                select(func.count()).where(
                    runs.c.submitter == values["submitter"],
                    runs.c.split == values["split"],
                    runs.c.key_fingerprint == values["key_fingerprint"],
                    runs.c.status != "expired",
                )
            ).scalar_one()
            if spent >= budget:
                raise BudgetSpent(spent)
        _claim_agent_name(conn, values["agent"], values["submitter"], now)
        conn.execute(insert(runs).values(**values))

    await db.write(insert_checked)
    return RunRecord(**{k: v for k, v in values.items() if k in RunRecord.__dataclass_fields__})


def _claim_agent_name(conn: Connection, agent: str, submitter: str | None, now: datetime) -> None:
    """Inside the run's insert: a name bound to a submitter is theirs only; a submitter's first
    run under a free name binds it to them. Anonymous runs use free names, binding nothing."""
    key = agent_name_key(agent)
    owner = conn.execute(select(agent_names.c.submitter).where(agent_names.c.name_key == key)).scalar()
    if owner is not None and owner != submitter:
        raise AgentNameTaken(agent, owner)
    if owner is None and submitter is not None:
        conn.execute(insert(agent_names).values(name_key=key, submitter=submitter, created_at=now))


def _aware(value: datetime) -> datetime:
    # func.min() bypasses the column type: SQLite hands back naive text-parsed datetimes.
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value if value.tzinfo else value.replace(tzinfo=UTC)


async def get_run(db: Database, run_id: str) -> RunRecord | None:
    row = await db.read(lambda conn: conn.execute(select(runs).where(runs.c.id == run_id)).first())
    return _run(row) if row is not None else None


# SQLite would pick the primary key's index and then walk the row's manifest overflow pages to reach
# status and updated_at; the covering index answers alone (PostgreSQL keeps the manifest out of line).
# Since 0005 new runs store no manifest (service.domain.runs.services.manifest_of), so their rows are short; the
# index still spares runs stored before it that walk, and keeps a step's authorisation one index read.
_ACCESS = select(*_columns(RunAccess)).where(runs.c.id == bindparam("run_id"))
_ACCESS_SQLITE = text(
    "SELECT id, token_sha256, split, status, updated_at, key_fingerprint, status_reason FROM runs "
    "INDEXED BY ix_runs_access WHERE id = :run_id"
).columns(*_columns(RunAccess))


async def get_run_access(db: Database, run_id: str) -> RunAccess | None:
    """The run's id, token hash, split, status, last activity and test key: one indexed read, no manifest."""
    row = await db.read(
        lambda conn: conn.execute(
            _ACCESS_SQLITE if conn.dialect.name == "sqlite" else _ACCESS, {"run_id": run_id}
        ).first()
    )
    return RunAccess(*row) if row is not None else None


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
        values = make_episode(index)
        try:
            conn.execute(insert(episodes).values(**values, created_at=now, updated_at=now))
        except IntegrityError as exc:  # the transaction rolls back: the claim is undone too
            raise EpisodeIdTaken(values["id"]) from exc
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


# A run without a summary stores JSON null (SQL NULL only if written so): either means "none yet".
_no_summary = or_(runs.c.summary.is_(None), runs.c.summary == JSON.NULL)


def _idle(cutoff: datetime) -> Any:
    """Active, and nothing happened since ``cutoff``: not the run row, nor any of its episodes."""
    recent = exists().where(and_(episodes.c.run_id == runs.c.id, episodes.c.updated_at >= cutoff))
    return and_(runs.c.status == "active", runs.c.updated_at < cutoff, ~recent)


async def expire_idle(db: Database, cutoff: datetime) -> int:
    """Mark active runs with no activity since ``cutoff`` as expired; returns how many.

    A sweep on a timer, never on a read: ``ix_runs_status_updated_at`` finds the candidates, and only
    those (active and idle on their own row) are checked against their episodes."""
    result = await db.write(
        lambda conn: conn.execute(update(runs).where(_idle(cutoff)).values(status="expired", status_reason="idle"))
    )
    return result.rowcount or 0


async def expire_run(db: Database, run_id: str, cutoff: datetime) -> bool:
    """Expire this one run if it has been idle since ``cutoff`` (before handing out more of it)."""
    result = await db.write(
        lambda conn: conn.execute(
            update(runs).where(runs.c.id == run_id, _idle(cutoff)).values(status="expired", status_reason="idle")
        )
    )
    return bool(result.rowcount)


async def expire_test_runs_of_another_key(db: Database, fingerprint: str | None, run_id: str | None = None) -> int:
    """Expire active test runs started under another test key than ``fingerprint`` (all, or only
    ``run_id``): their remaining episodes would be generated from a different split, so the run would mix
    two splits' tickets under one fingerprint. Nothing of theirs is released or ranked."""
    where = [runs.c.split == "test", runs.c.status == "active", runs.c.key_fingerprint.is_distinct_from(fingerprint)]
    if run_id is not None:
        where.append(runs.c.id == run_id)
    result = await db.write(
        lambda conn: conn.execute(update(runs).where(*where).values(status="expired", status_reason="test_key_changed"))
    )
    return result.rowcount or 0


async def complete_unsummarised(db: Database) -> list[str]:
    """Ids of complete runs whose summary was never stored (their process stopped in between), in
    completion order."""
    query = select(runs.c.id).where(runs.c.status == "complete", _no_summary).order_by(runs.c.finished_at, runs.c.id)
    return await db.read(lambda conn: list(conn.execute(query).scalars()))


async def run_episodes(
    db: Database, run_id: str, grader_version: str, ids: list[str] | None = None
) -> list[RunEpisode]:
    """The run's started episodes (only ``ids`` among them, if given: a page reads its own rows)."""
    query = (
        select(
            episodes.c.id,
            episodes.c.task_id,
            episodes.c.seed,
            episodes.c.status,
            episodes.c.step_count,
            episodes.c.state["truncated"].as_boolean().label("truncated"),
            grades.c.score,
            grades.c.resolved,
        )
        .select_from(
            episodes.outerjoin(
                grades, and_(grades.c.episode_id == episodes.c.id, grades.c.grader_version == grader_version)
            )
        )
        .where(episodes.c.run_id == run_id)
        .order_by(episodes.c.id)  # manifest order (ids end in the entry's index), on every backend
    )
    if ids is not None:
        query = query.where(episodes.c.id.in_(ids))
    rows = await db.read(lambda conn: conn.execute(query).all())
    return [
        RunEpisode(
            r.id,
            r.task_id,
            r.seed,
            r.status,
            r.step_count,
            bool(r.truncated),
            r.score,
            None if r.resolved is None else bool(r.resolved),
        )
        for r in rows
    ]


async def page_version(db: Database, run_id: str, first_id: str, last_id: str) -> tuple[Any, ...] | None:
    """What a run page shows can change only if this changes: the run's status, progress, revision
    (summary, release, usage) and last activity, and for the page's episodes (ids ``first_id`` to
    ``last_id``, a primary-key range) their count, last change and steps. None: no such run. Two
    short indexed reads, no manifest, no JSON: what a conditional read costs before anything is built."""
    run = select(
        runs.c.status, runs.c.next_index, runs.c.episodes_done, runs.c.revision, runs.c.updated_at, runs.c.split
    ).where(runs.c.id == run_id)
    page = select(
        func.count(), func.max(episodes.c.updated_at), func.coalesce(func.sum(episodes.c.step_count), 0)
    ).where(episodes.c.id >= first_id, episodes.c.id <= last_id, episodes.c.run_id == run_id)

    def read(conn: Connection) -> tuple[Any, ...] | None:
        row = conn.execute(run).first()
        if row is None:
            return None
        return (*row, *conn.execute(page).one())

    return await db.read(read)


# Every change to what the leaderboard shows of a run moves its revision (the leaderboard cache's version).
_REVISED = {"revision": runs.c.revision + 1}


async def set_summary(db: Database, run_id: str, summary: dict[str, Any], outcomes: list[float] | None = None) -> None:
    values: dict[str, Any] = {"summary": summary, **_REVISED}
    if outcomes is not None:
        values["outcomes"] = outcomes
    await db.write(lambda conn: conn.execute(update(runs).where(runs.c.id == run_id).values(**values)))


class EarlierRunsUnsummarised(Exception):
    """A test run's Ladder release waits for the runs of its group that completed before it."""

    def __init__(self, run_ids: list[str]) -> None:
        super().__init__(", ".join(run_ids))
        self.run_ids = run_ids


def _ladder_group(run: RunRecord) -> Any:
    """The runs a test run's release is compared with: its submitter's, under the same key and versions."""
    return and_(
        runs.c.submitter == run.submitter,
        runs.c.split == run.split,
        runs.c.key_fingerprint == run.key_fingerprint,
        runs.c.dataset_version == run.dataset_version,
        runs.c.grader_version == run.grader_version,
    )


def _completed_before(run: RunRecord) -> Any:
    """Complete runs that completed before ``run``: completion order is (finished_at, id)."""
    assert run.finished_at is not None
    return and_(
        runs.c.status == "complete",
        runs.c.id != run.id,
        or_(
            runs.c.finished_at < run.finished_at,
            and_(runs.c.finished_at == run.finished_at, runs.c.id < run.id),
        ),
    )


async def set_summary_released(
    db: Database,
    run: RunRecord,
    summary: dict[str, Any],
    outcomes: list[float],
    release: Callable[[float, float | None], float | None],
) -> float | None:
    """Store a test run's summary and what the Ladder releases for it, in one transaction.

    ``release(resolved, best)`` is given the submitter's best released score among the runs of its
    group (same test key and versions) that **completed before this one** — so what is released depends
    only on the runs and their completion order, never on which summary a process wrote first or
    whether one died in between. If one of those earlier runs has no summary yet, nothing is stored
    and :class:`EarlierRunsUnsummarised` names them (summarise them first). A submitter revoked by now
    gets nothing released. Idempotent: a second call for a summarised run changes nothing and returns
    what was released."""

    def store(conn: Connection) -> float | None:
        earlier = conn.execute(
            select(runs.c.id, runs.c.summary, runs.c.released)
            .where(_ladder_group(run), _completed_before(run))
            .order_by(runs.c.finished_at, runs.c.id)
        ).all()
        pending = [r.id for r in earlier if r.summary is None]
        if pending:
            raise EarlierRunsUnsummarised(pending)
        revoked = conn.execute(
            select(submitters.c.revoked_at).where(submitters.c.name == run.submitter)
        ).scalar_one_or_none()
        released_before = [r.released for r in earlier if r.released is not None]
        best = max(released_before) if released_before else None
        released = None if revoked is not None else release(summary["resolved"], best)
        stored = conn.execute(
            update(runs)
            .where(runs.c.id == run.id, _no_summary)
            .values(summary=summary, outcomes=outcomes, released=released, **_REVISED)
        )
        if stored.rowcount == 0:  # another process summarised it first: its release stands
            return conn.execute(select(runs.c.released).where(runs.c.id == run.id)).scalar()
        return released

    return await db.write(store)


async def unsummarised_before(db: Database, run: RunRecord) -> list[str]:
    """Ids of the complete, unsummarised runs of ``run``'s Ladder group that completed before it, in
    completion order."""
    query = (
        select(runs.c.id)
        .where(_ladder_group(run), _completed_before(run), _no_summary)
        .order_by(runs.c.finished_at, runs.c.id)
    )
    return await db.read(lambda conn: list(conn.execute(query).scalars()))


async def best_released(db: Database, run: RunRecord) -> float | None:
    """The submitter's best released resolved rate under this run's test key and versions."""
    query = select(func.max(runs.c.released)).where(
        runs.c.submitter == run.submitter,
        runs.c.split == run.split,
        runs.c.key_fingerprint == run.key_fingerprint,
        runs.c.dataset_version == run.dataset_version,
        runs.c.grader_version == run.grader_version,
    )
    return await db.read(lambda conn: conn.execute(query).scalar())


async def set_usage(db: Database, run_id: str, usage: dict[str, Any]) -> None:
    now = utcnow()
    await db.write(
        lambda conn: conn.execute(
            update(runs).where(runs.c.id == run_id).values(usage=usage, updated_at=now, **_REVISED)
        )
    )


async def leaderboard_version(db: Database, split: str) -> tuple[int, int]:
    """(complete runs, sum of their revisions) of ``split``: changes whenever a run completes or what the
    leaderboard shows of one changes, in any process. Answered from ``ix_runs_split_status_revision``."""
    query = select(func.count(), func.coalesce(func.sum(runs.c.revision), 0)).where(
        runs.c.split == split, runs.c.status == "complete"
    )
    row = await db.read(lambda conn: conn.execute(query).one())
    return int(row[0]), int(row[1])


async def leaderboard_runs(db: Database, split: str, unranked_limit: int) -> tuple[list[BoardRun], int]:
    """The complete runs of ``split`` the leaderboard shows — every ranked (full-split) run and the
    ``unranked_limit`` most recent unranked ones, only the columns it shows — and how many unranked
    complete runs there are in all."""
    complete = and_(runs.c.split == split, runs.c.status == "complete")
    ranked = select(*_columns(BoardRun)).where(complete, runs.c.full_split.is_(True)).order_by(runs.c.created_at.desc())
    unranked = (
        select(*_columns(BoardRun))
        .where(complete, runs.c.full_split.is_(False))
        .order_by(runs.c.created_at.desc())
        .limit(unranked_limit)
    )
    n_unranked = select(func.count()).where(complete, runs.c.full_split.is_(False))

    def read(conn: Connection) -> tuple[list[BoardRun], int]:
        rows = [BoardRun(*r) for r in conn.execute(ranked)] + [BoardRun(*r) for r in conn.execute(unranked)]
        return rows, int(conn.execute(n_unranked).scalar_one())

    return await db.read(read)


# ------------------------------------------------------------------------------- submitters


def _submitter(row: Any) -> SubmitterRecord:
    return SubmitterRecord(**{k: row._mapping[k] for k in SubmitterRecord.__dataclass_fields__})


async def create_submitter(db: Database, name: str, key_sha256: str, quota: int | None = None) -> SubmitterRecord:
    now = utcnow()
    values = dict(name=name, key_sha256=key_sha256, quota=quota, created_at=now, revoked_at=None)
    try:
        await db.write(lambda conn: conn.execute(insert(submitters).values(**values)))
    except IntegrityError as exc:
        raise SubmitterExists(name) from exc
    stored = await submitter_by_name(db, name)
    assert stored is not None
    return stored


async def upsert_submitter(db: Database, name: str, key_sha256: str) -> bool:
    """Preload a key (``SUBMITTER_KEYS``, read at every start): create the submitter, or give it this
    key. A revoked key stays revoked: only a different key re-activates the name (the operator
    re-issued it). Returns False when the name's key is this one and revoked (nothing changed)."""

    def upsert(conn: Connection) -> bool:
        changed = conn.execute(
            update(submitters)
            .where(
                submitters.c.name == name, or_(submitters.c.revoked_at.is_(None), submitters.c.key_sha256 != key_sha256)
            )
            .values(key_sha256=key_sha256, revoked_at=None)
        ).rowcount
        if changed:
            return True
        if conn.execute(select(submitters.c.id).where(submitters.c.name == name)).first() is not None:
            return False  # this very key was revoked
        conn.execute(
            insert(submitters).values(
                name=name, key_sha256=key_sha256, quota=None, created_at=utcnow(), revoked_at=None
            )
        )
        return True

    return await db.write(upsert)


async def revoke_submitter(db: Database, name: str) -> tuple[bool, int]:
    """Revoke the name's key and, in the same transaction, expire every run of that submitter still open:
    they take no further request and are never released. Returns (revoked, runs expired)."""
    now = utcnow()

    def revoke(conn: Connection) -> tuple[bool, int]:
        revoked = conn.execute(
            update(submitters)
            .where(submitters.c.name == name, submitters.c.revoked_at.is_(None))
            .values(revoked_at=now)
        ).rowcount
        if not revoked:
            return False, 0
        expired = conn.execute(
            update(runs)
            .where(runs.c.submitter == name, runs.c.status == "active")
            .values(status="expired", status_reason="submitter_revoked", updated_at=now)
        ).rowcount
        return True, expired or 0

    return await db.write(revoke)


async def submitter_by_name(db: Database, name: str) -> SubmitterRecord | None:
    row = await db.read(lambda conn: conn.execute(select(submitters).where(submitters.c.name == name)).first())
    return _submitter(row) if row is not None else None


async def submitter_by_key(db: Database, key_sha256: str) -> SubmitterRecord | None:
    row = await db.read(
        lambda conn: conn.execute(select(submitters).where(submitters.c.key_sha256 == key_sha256)).first()
    )
    return _submitter(row) if row is not None else None


async def list_submitters(db: Database) -> list[SubmitterRecord]:
    rows = await db.read(lambda conn: conn.execute(select(submitters).order_by(submitters.c.name)).all())
    return [_submitter(r) for r in rows]


# ----------------------------------------------------------------------------- verification


async def verify_run(db: Database, run_id: str, by: str, note: str | None) -> bool:
    """Record that ``by`` checked the complete run ``run_id`` now (what they checked in ``note``)."""
    result = await db.write(
        lambda conn: conn.execute(
            update(runs)
            .where(runs.c.id == run_id, runs.c.status == "complete")
            .values(verified_by=by, verified_at=utcnow(), verification_note=note, **_REVISED)
        )
    )
    return bool(result.rowcount)


async def unverify_run(db: Database, run_id: str) -> bool:
    result = await db.write(
        lambda conn: conn.execute(
            update(runs)
            .where(runs.c.id == run_id, runs.c.verified_by.is_not(None))
            .values(verified_by=None, verified_at=None, verification_note=None, **_REVISED)
        )
    )
    return bool(result.rowcount)


async def verified_runs(db: Database) -> list[RunRecord]:
    query = select(runs).where(runs.c.verified_by.is_not(None)).order_by(runs.c.verified_at.desc())
    rows = await db.read(lambda conn: conn.execute(query).all())
    return [_run(r) for r in rows]


# --------------------------------------------------------------------------- deployment secrets


async def get_or_create_secret(db: Database, name: str, make: Callable[[], str]) -> str:
    """The deployment secret ``name``, created with ``make()`` on first use. Several workers starting
    at once agree on one value: the first insert wins and everyone reads it back."""

    def ensure(conn: Connection) -> str:
        row = conn.execute(select(deployment_secrets.c.value).where(deployment_secrets.c.name == name)).first()
        if row is not None:
            return row[0]
        conn.execute(insert(deployment_secrets).values(name=name, value=make(), created_at=utcnow()))
        return conn.execute(select(deployment_secrets.c.value).where(deployment_secrets.c.name == name)).scalar_one()

    try:
        return await db.write(ensure)
    except IntegrityError:  # another worker inserted it between our read and our insert
        return await db.write(ensure)
