"""What one client address holds: its episodes — plain ones and those of runs it started — for the storage
cap per address (``MAX_ACTIVE_EPISODES_PER_CLIENT``, ``MAX_EPISODES_PER_CLIENT_PER_DAY``)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Integer, case, func, select

from service.db.engine import Database
from service.db.models import episodes


async def episodes_of(db: Database, client_address: str, since: datetime) -> tuple[int, int]:
    """(episodes this address started since ``since``, how many of them are unfinished): one search of
    ``ix_episodes_client_created_at``. Unfinished ones older than a day are deleted by retention or belong
    to runs that expire after RUN_TTL_S, so with ``since`` a day back the second number is every unfinished
    one it holds."""
    query = select(
        func.count(), func.coalesce(func.sum(case((episodes.c.status == "active", 1), else_=0)), 0).cast(Integer)
    ).where(episodes.c.client_address == client_address, episodes.c.created_at >= since)
    started, active = await db.read(lambda conn: conn.execute(query).one())
    return int(started), int(active)
