"""process clocks: each serving process's clock, so that ages are measured against the slowest live one

A process counts time from the wall clock at its start; one started after a wall-clock jump counted 25 h
ahead of the others and its retention deleted their live episodes. Each process now writes its clock here
at every retention pass (service.db.retention.align).

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-09
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "process_clocks",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("clock_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_process_clocks")),
    )


def downgrade() -> None:
    op.drop_table("process_clocks")
