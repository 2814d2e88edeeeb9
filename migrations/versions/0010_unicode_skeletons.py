"""agent-name keys are Unicode's confusable skeletons (UTS #39)

Agent names were compared by a skeleton built from a hand list of look-alikes, which let "CIaude" (a
capital I) pass for "Claude", "modem" for "modern" and small capitals for anything. The key is now
service.db.names.name_key over Unicode's confusables.txt (service.db.confusables). The stored bindings are
re-keyed (a binding whose new key is already taken by an older one is dropped, as 0008 did), and since a
stored key was the old skeleton — case already folded, so a capital I had become an i — every agent name a
submitter's runs used binds its new key too, oldest first, where no one holds it yet.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-09
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from service.db.names import name_key

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    conn = op.get_bind()
    names = sa.table(
        "agent_names",
        sa.column("name_key", sa.String),
        sa.column("submitter", sa.String),
        sa.column("created_at", sa.DateTime(timezone=True)),
    )
    runs = sa.table(
        "runs", sa.column("agent", sa.String), sa.column("submitter", sa.String), sa.column("created_at", sa.DateTime)
    )
    rows = conn.execute(sa.select(names.c.name_key, names.c.created_at).order_by(names.c.created_at)).all()
    kept: set[str] = {key for key, _ in rows if name_key(key)[:128] == key}
    for key, _ in rows:
        new = name_key(key)[:128]
        if new == key:
            continue
        if new in kept:
            conn.execute(sa.delete(names).where(names.c.name_key == key))
        else:
            conn.execute(sa.update(names).where(names.c.name_key == key).values(name_key=new))
            kept.add(new)
    used = conn.execute(
        sa.select(runs.c.agent, runs.c.submitter, runs.c.created_at)
        .where(runs.c.submitter.is_not(None))
        .order_by(runs.c.created_at)
    ).all()
    for agent, submitter, created_at in used:
        new = name_key(agent)[:128]
        if new not in kept:
            conn.execute(sa.insert(names).values(name_key=new, submitter=submitter, created_at=created_at))
            kept.add(new)


def downgrade() -> None:
    """Nothing to undo: the old keys cannot be rebuilt from the new ones, and the old code reads these
    as names it has never seen (a look-alike binds afresh, as before this revision)."""
