"""ownership: episode tokens for client-chosen ids; agent names bound to submitters; runs store their
manifest's parameters

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _json() -> sa.types.TypeEngine:
    return sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def upgrade() -> None:
    # Episodes stored before this revision keep a NULL token: their id stays their capability
    # (unfinished ones are purged by retention after RETAIN_UNFINISHED_EPISODES_S).
    with op.batch_alter_table("episodes") as batch:
        batch.add_column(sa.Column("token_sha256", sa.String(length=64), nullable=True))
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("limit_per_task", sa.Integer(), nullable=True))
        batch.alter_column("manifest", existing_type=_json(), nullable=True)
    op.create_table(
        "agent_names",
        sa.Column("name_key", sa.String(length=128), nullable=False),
        sa.Column("submitter", sa.String(length=128), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name_key", name=op.f("pk_agent_names")),
    )


def downgrade() -> None:
    op.drop_table("agent_names")
    with op.batch_alter_table("runs") as batch:
        batch.alter_column("manifest", existing_type=_json(), nullable=False)
        batch.drop_column("limit_per_task")
    with op.batch_alter_table("episodes") as batch:
        batch.drop_column("token_sha256")
