"""Tables: episodes, their transitions (one row per applied step) and grades.

Portable types only (works unchanged on SQLite and PostgreSQL); invariants are constraints.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, cast

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    UniqueConstraint,
    false,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

from service.db import clock

JSONType = JSON().with_variant(JSONB(), "postgresql")

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s_%(column_1_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC datetime on every backend (SQLite stores naive text)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetimes are not stored; pass a UTC-aware datetime")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def utcnow() -> datetime:
    """Now, UTC, counted so that a jump of the wall clock ages nothing (:mod:`service.db.clock`)."""
    return clock.utcnow()


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


class EpisodeRow(Base):
    __tablename__ = "episodes"
    __table_args__ = (
        # Retention's scan of plain episodes by age (run_id IS NULL, status, updated_at < cutoff): an index
        # search instead of a scan of every episode while the pass holds the writer.
        Index(
            "ix_episodes_plain_status_updated_at",
            "status",
            "updated_at",
            sqlite_where=text("run_id IS NULL"),
            postgresql_where=text("run_id IS NULL"),
        ),
        # The storage cap per client address: its episodes (plain and of runs) started recently (0008).
        Index("ix_episodes_client_created_at", "client_address", "created_at"),
    )

    id: Mapped[str] = mapped_column(String(255), primary_key=True)
    task_id: Mapped[str] = mapped_column(String(64))
    split: Mapped[str] = mapped_column(String(16))
    seed: Mapped[int] = mapped_column(Integer)
    ticket_id: Mapped[str] = mapped_column(String(64))
    run_id: Mapped[str | None] = mapped_column(String(64), index=True)
    status: Mapped[str] = mapped_column(String(16))  # "active" | "done"
    step_count: Mapped[int] = mapped_column(Integer, default=0)
    state: Mapped[dict[str, Any]] = mapped_column(JSONType)
    version: Mapped[int] = mapped_column(Integer, default=1)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())
    # SHA-256 of the episode token of a client-chosen id (who may act on it). NULL: a server-made id
    # (its 128 random bits are the capability) or a run episode (guarded by the run's token).
    token_sha256: Mapped[str | None] = mapped_column(String(64), nullable=True)
    # The client address that started the episode (a reset, or a run's /next since 0008; NULL for exempt
    # clients and episodes stored before 0007): counted against MAX_*_EPISODES_PER_CLIENT.
    client_address: Mapped[str | None] = mapped_column(String(64), nullable=True)


class TransitionRow(Base):
    __tablename__ = "transitions"
    __table_args__ = (
        UniqueConstraint("episode_id", "step_index"),
        UniqueConstraint("episode_id", "request_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    episode_id: Mapped[str] = mapped_column(ForeignKey("episodes.id", ondelete="CASCADE"))
    step_index: Mapped[int] = mapped_column(Integer)  # 1-based: the episode's step_count after it
    request_id: Mapped[str | None] = mapped_column(String(255))
    action: Mapped[dict[str, Any]] = mapped_column(JSONType)
    observation: Mapped[dict[str, Any]] = mapped_column(JSONType)
    reward: Mapped[float] = mapped_column(Float)
    done: Mapped[bool] = mapped_column(Boolean)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())


class GradeRow(Base):
    __tablename__ = "grades"
    __table_args__ = (UniqueConstraint("episode_id", "grader_version"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    episode_id: Mapped[str] = mapped_column(ForeignKey("episodes.id", ondelete="CASCADE"))
    score: Mapped[float] = mapped_column(Float)
    resolved: Mapped[bool] = mapped_column(Boolean, server_default=false())  # every required check passed
    breakdown: Mapped[dict[str, Any]] = mapped_column(JSONType)
    grader_version: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())


class RunRow(Base):
    """A benchmark run: an agent/model on a split's task list, k trials; the server owns the manifest."""

    __tablename__ = "runs"
    __table_args__ = (
        Index("ix_runs_submitter_created_at", "submitter", "created_at"),
        # the leaderboard (rows and its cache version) reads a split's complete runs from this index alone
        Index("ix_runs_split_status_revision", "split", "status", "revision"),
        Index("ix_runs_status_updated_at", "status", "updated_at"),  # the idle-run sweep
        # What authorising a step reads, answered from the index alone: on SQLite those columns of the
        # row itself sit behind the manifest's overflow pages (50 of them for a 3,200-entry run). Runs
        # created since 0005 store no manifest, so this matters for older runs; run_store reads it by name.
        # (0009: with the test key the run is pinned to, checked on every request of a test run, and why it expired)
        Index(
            "ix_runs_access", "id", "token_sha256", "split", "status", "updated_at", "key_fingerprint", "status_reason"
        ),
    )

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    token_sha256: Mapped[str] = mapped_column(String(64))
    agent: Mapped[str] = mapped_column(String(128))
    model: Mapped[str] = mapped_column(String(200))
    split: Mapped[str] = mapped_column(String(16))
    trials: Mapped[int] = mapped_column(Integer)
    task_ids: Mapped[list[str]] = mapped_column(JSONType)
    full_split: Mapped[bool] = mapped_column(Boolean)  # every task, every ticket: rankable
    # The manifest is derived from (split, task_ids, trials, limit_per_task) and the dataset version;
    # only runs created before 0005 stored it expanded (kept so they read back unchanged).
    limit_per_task: Mapped[int | None] = mapped_column(Integer, nullable=True)
    manifest: Mapped[list[dict[str, Any]] | None] = mapped_column(JSONType, nullable=True)
    episodes_total: Mapped[int] = mapped_column(Integer)
    next_index: Mapped[int] = mapped_column(Integer, default=0)  # manifest entries handed out
    episodes_done: Mapped[int] = mapped_column(Integer, default=0)
    status: Mapped[str] = mapped_column(String(16))  # active | complete | expired
    dataset_version: Mapped[str] = mapped_column(String(32))
    grader_version: Mapped[str] = mapped_column(String(32))
    usage: Mapped[dict[str, Any] | None] = mapped_column(JSONType, nullable=True)  # self-reported
    summary: Mapped[dict[str, Any] | None] = mapped_column(JSONType, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    # Test-split runs: who submitted it (a submitter key's name), under which test key, and the
    # resolved rate the Ladder released for it (None: nothing new was released).
    submitter: Mapped[str | None] = mapped_column(String(128), nullable=True)
    key_fingerprint: Mapped[str | None] = mapped_column(String(32), nullable=True)
    released: Mapped[float | None] = mapped_column(Float, nullable=True)
    # +1 on every change to what the leaderboard shows of a complete run (summary, release, usage); with
    # the count of complete runs it is the version the leaderboard cache is keyed by, in every process.
    revision: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # 0009. Why an expired run expired: idle (past RUN_TTL_S), test_key_changed (the deployment's test key is
    # not the one the run started under), submitter_revoked. NULL for runs that did not expire.
    status_reason: Mapped[str | None] = mapped_column(String(32), nullable=True)
    # Each ticket's resolved share, in manifest order, stored with the summary: what a paired comparison of
    # two runs reads. Private (never served): on the test split it is the per-ticket answer sheet.
    outcomes: Mapped[list[float] | None] = mapped_column(JSONType, nullable=True)
    # An operator's check of the run (python -m service.verify): who, when, and what they checked. A row
    # without it is self-reported: its agent and model names are whatever the submitter declared.
    verified_by: Mapped[str | None] = mapped_column(String(128), nullable=True)
    verified_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    verification_note: Mapped[str | None] = mapped_column(String(500), nullable=True)


class SubmitterRow(Base):
    """A submitter key for test-split runs, issued by the operator and stored hashed."""

    __tablename__ = "submitters"
    __table_args__ = (
        UniqueConstraint("name", name="uq_submitters_name"),
        UniqueConstraint("key_sha256", name="uq_submitters_key_sha256"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(128))
    key_sha256: Mapped[str] = mapped_column(String(64))
    quota: Mapped[int | None] = mapped_column(Integer, nullable=True)  # test runs per period (None: the default)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)


class AgentNameRow(Base):
    """An agent name bound to the submitter who first ran it with a key: nobody else (and no
    anonymous run) may use it. ``name_key`` is the name trimmed and case-folded."""

    __tablename__ = "agent_names"

    name_key: Mapped[str] = mapped_column(String(128), primary_key=True)
    submitter: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())


class DeploymentSecretRow(Base):
    """Secrets a deployment creates for itself at first start (the test split's key)."""

    __tablename__ = "deployment_secrets"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(String(256))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())


class McpSessionRow(Base):
    """An HTTP MCP session (``openenv/session/create``), seen by every worker. Stored under the SHA-256
    of its id (the id is the client's capability); the episode secrets it carries are sealed with a key
    only the id gives (service.db.mcp_store). Deleted once unused for MCP_SESSION_IDLE_S."""

    __tablename__ = "mcp_sessions"
    __table_args__ = (
        Index("ix_mcp_sessions_client_used_at", "client_address", "used_at"),  # the per-address cap
        Index("ix_mcp_sessions_used_at", "used_at"),  # the idle sweep
    )

    id_sha256: Mapped[str] = mapped_column(String(64), primary_key=True)
    client_address: Mapped[str] = mapped_column(String(64))
    episode_id: Mapped[str | None] = mapped_column(String(255), nullable=True)
    sealed_secrets: Mapped[str | None] = mapped_column(String(1024), nullable=True)  # hex: nonce + sealed JSON
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    used_at: Mapped[datetime] = mapped_column(UTCDateTime())


class ProcessClockRow(Base):
    """Each serving process's clock as it last read it (service.db.retention.align): ages are measured
    against the slowest live process's, so one started after a wall-clock jump ages nothing early."""

    __tablename__ = "process_clocks"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    clock_at: Mapped[datetime] = mapped_column(UTCDateTime())


# A declarative class's __table__ is typed as the FromClause it may be; these are all plain Tables.
episodes = cast(Table, EpisodeRow.__table__)
mcp_sessions = cast(Table, McpSessionRow.__table__)
runs = cast(Table, RunRow.__table__)
submitters = cast(Table, SubmitterRow.__table__)
deployment_secrets = cast(Table, DeploymentSecretRow.__table__)
agent_names = cast(Table, AgentNameRow.__table__)
transitions = cast(Table, TransitionRow.__table__)
grades = cast(Table, GradeRow.__table__)
process_clocks = cast(Table, ProcessClockRow.__table__)
