"""verdicts: operator verification of runs, why a run expired, each ticket's outcome (private) for paired
comparisons, and the test key a run is pinned to in the index every request of a run reads

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-08
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
_ACCESS = ["id", "token_sha256", "split", "status", "updated_at"]


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("status_reason", sa.String(length=32), nullable=True))
        batch.add_column(sa.Column("outcomes", _JSON, nullable=True))
        batch.add_column(sa.Column("verified_by", sa.String(length=128), nullable=True))
        batch.add_column(sa.Column("verified_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("verification_note", sa.String(length=500), nullable=True))
    # Runs that expired before this revision expired for being idle (the only reason there was).
    op.execute("UPDATE runs SET status_reason = 'idle' WHERE status = 'expired'")
    op.drop_index("ix_runs_access", table_name="runs")
    op.create_index("ix_runs_access", "runs", [*_ACCESS, "key_fingerprint", "status_reason"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_runs_access", table_name="runs")
    op.create_index("ix_runs_access", "runs", _ACCESS, unique=False)
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("verification_note")
        batch.drop_column("verified_at")
        batch.drop_column("verified_by")
        batch.drop_column("outcomes")
        batch.drop_column("status_reason")
