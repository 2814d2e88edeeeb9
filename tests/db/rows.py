"""Rows the database tests write directly, below the API: one plain episode per index."""

from __future__ import annotations

from typing import Any

from sqlalchemy import insert

from service.db.models import episodes, utcnow


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
