"""retention: a partial index for the age scan of plain episodes

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Without it the retention pass filtered every episode through ix_episodes_run_id (380-550 ms per
    # batch at 200k plain episodes, inside the writer's transaction).
    op.create_index(
        "ix_episodes_plain_status_updated_at",
        "episodes",
        ["status", "updated_at"],
        unique=False,
        sqlite_where=sa.text("run_id IS NULL"),
        postgresql_where=sa.text("run_id IS NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_episodes_plain_status_updated_at", table_name="episodes")
