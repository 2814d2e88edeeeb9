"""runs

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _json() -> sa.types.TypeEngine:
    return sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("token_sha256", sa.String(length=64), nullable=False),
        sa.Column("agent", sa.String(length=128), nullable=False),
        sa.Column("model", sa.String(length=200), nullable=False),
        sa.Column("split", sa.String(length=16), nullable=False),
        sa.Column("trials", sa.Integer(), nullable=False),
        sa.Column("task_ids", _json(), nullable=False),
        sa.Column("full_split", sa.Boolean(), nullable=False),
        sa.Column("manifest", _json(), nullable=False),
        sa.Column("episodes_total", sa.Integer(), nullable=False),
        sa.Column("next_index", sa.Integer(), nullable=False),
        sa.Column("episodes_done", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("dataset_version", sa.String(length=32), nullable=False),
        sa.Column("grader_version", sa.String(length=32), nullable=False),
        sa.Column("usage", _json(), nullable=True),
        sa.Column("summary", _json(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_runs")),
    )
    op.create_index(op.f("ix_runs_split"), "runs", ["split"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_runs_split"), table_name="runs")
    op.drop_table("runs")
