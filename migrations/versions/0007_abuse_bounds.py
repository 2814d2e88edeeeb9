"""abuse bounds: MCP sessions in the database (every worker serves them); the client address of plain episodes

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "mcp_sessions",
        sa.Column("id_sha256", sa.String(length=64), nullable=False),
        sa.Column("client_address", sa.String(length=64), nullable=False),
        sa.Column("episode_id", sa.String(length=255), nullable=True),
        sa.Column("sealed_secrets", sa.String(length=1024), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("used_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id_sha256", name=op.f("pk_mcp_sessions")),
    )
    op.create_index("ix_mcp_sessions_client_used_at", "mcp_sessions", ["client_address", "used_at"], unique=False)
    op.create_index("ix_mcp_sessions_used_at", "mcp_sessions", ["used_at"], unique=False)
    with op.batch_alter_table("episodes") as batch:
        batch.add_column(sa.Column("client_address", sa.String(length=64), nullable=True))
    op.create_index(
        "ix_episodes_plain_client_created_at",
        "episodes",
        ["client_address", "created_at"],
        unique=False,
        sqlite_where=sa.text("run_id IS NULL"),
        postgresql_where=sa.text("run_id IS NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_episodes_plain_client_created_at", table_name="episodes")
    with op.batch_alter_table("episodes") as batch:
        batch.drop_column("client_address")
    op.drop_index("ix_mcp_sessions_used_at", table_name="mcp_sessions")
    op.drop_index("ix_mcp_sessions_client_used_at", table_name="mcp_sessions")
    op.drop_table("mcp_sessions")
