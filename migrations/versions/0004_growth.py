"""growth: runs indexed for what the leaderboard, the idle sweep and a step's authorisation read; a leaderboard revision

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("revision", sa.Integer(), server_default="0", nullable=False))
    op.drop_index("ix_runs_split", table_name="runs")  # a prefix of the index below
    op.create_index("ix_runs_split_status_revision", "runs", ["split", "status", "revision"], unique=False)
    op.create_index("ix_runs_status_updated_at", "runs", ["status", "updated_at"], unique=False)
    op.create_index("ix_runs_access", "runs", ["id", "token_sha256", "split", "status", "updated_at"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_runs_access", table_name="runs")
    op.drop_index("ix_runs_status_updated_at", table_name="runs")
    op.drop_index("ix_runs_split_status_revision", table_name="runs")
    op.create_index("ix_runs_split", "runs", ["split"], unique=False)
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("revision")
