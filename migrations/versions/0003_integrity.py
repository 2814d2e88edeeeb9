"""integrity: resolved grades, submitter keys, the test split's key, Ladder releases

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("grades") as batch:
        batch.add_column(sa.Column("resolved", sa.Boolean(), server_default=sa.false(), nullable=False))
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("submitter", sa.String(length=128), nullable=True))
        batch.add_column(sa.Column("key_fingerprint", sa.String(length=32), nullable=True))
        batch.add_column(sa.Column("released", sa.Float(), nullable=True))
    op.create_index("ix_runs_submitter_created_at", "runs", ["submitter", "created_at"], unique=False)
    op.create_table(
        "submitters",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("key_sha256", sa.String(length=64), nullable=False),
        sa.Column("quota", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_submitters")),
        sa.UniqueConstraint("name", name=op.f("uq_submitters_name")),
        sa.UniqueConstraint("key_sha256", name=op.f("uq_submitters_key_sha256")),
    )
    op.create_table(
        "deployment_secrets",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("value", sa.String(length=256), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_deployment_secrets")),
    )


def downgrade() -> None:
    op.drop_table("deployment_secrets")
    op.drop_table("submitters")
    op.drop_index("ix_runs_submitter_created_at", table_name="runs")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("released")
        batch.drop_column("key_fingerprint")
        batch.drop_column("submitter")
    with op.batch_alter_table("grades") as batch:
        batch.drop_column("resolved")
