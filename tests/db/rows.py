"""Rows the database tests write directly, below the API (one plain episode per index), and count."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, func, insert, select

from service.db.engine import Database
from service.db.models import episodes, grades, transitions, utcnow


def episode_row(i: int) -> dict[str, Any]:
    now = utcnow()
    return dict(
        id=f"ep-{i}",
        task_id="decision-easy",
        split="dev",
        seed=i,
        ticket_id="dev-200000",
        run_id=None,
        status="active",
        step_count=0,
        state={},
        version=1,
        created_at=now,
        updated_at=now,
    )


def add_episode(conn: Any, i: int) -> int:
    conn.execute(insert(episodes).values(**episode_row(i)))
    return i


async def count_rows(db: Database) -> dict[str, int]:
    """Row counts of the episodes, transitions and grades tables."""

    def count(conn: Connection) -> dict[str, int]:
        return {
            t.name: conn.execute(select(func.count()).select_from(t)).scalar_one()
            for t in (episodes, transitions, grades)
        }

    return await db.read(count)
