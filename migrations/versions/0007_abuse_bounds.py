"""abuse bounds: MCP sessions in the database (every worker serves them); the client address of plain
episodes; agent-name keys after NFKC

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

import unicodedata
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
    _rekey_agent_names()


def _name_key(name: str) -> str:
    # service.db.run_store.agent_name_key as of this revision (kept here: a migration must not change later)
    text = "".join(ch for ch in unicodedata.normalize("NFKC", name) if unicodedata.category(ch) != "Cf")
    return unicodedata.normalize("NFKC", " ".join(text.split()).casefold())


def _rekey_agent_names() -> None:
    """Bound names are compared after NFKC with format characters dropped from now on: re-key the stored
    bindings so that "Ａｃｍｅ" bound before stays bound. A binding already in the new form stays as it is;
    one that now maps onto a key already taken (a look-alike of it) is dropped; otherwise the oldest wins."""
    conn = op.get_bind()
    names = sa.table(
        "agent_names", sa.column("name_key", sa.String), sa.column("created_at", sa.DateTime(timezone=True))
    )
    kept: set[str] = set()
    for key, _ in conn.execute(sa.select(names.c.name_key, names.c.created_at).order_by(names.c.created_at)).all():
        new = _name_key(key)[:128]
        if new == key:
            kept.add(key)
    for key, _ in conn.execute(sa.select(names.c.name_key, names.c.created_at).order_by(names.c.created_at)).all():
        new = _name_key(key)[:128]
        if new == key:
            continue
        if new in kept:
            conn.execute(sa.delete(names).where(names.c.name_key == key))
        else:
            conn.execute(sa.update(names).where(names.c.name_key == key).values(name_key=new))
            kept.add(new)


def downgrade() -> None:
    op.drop_index("ix_episodes_plain_client_created_at", table_name="episodes")
    with op.batch_alter_table("episodes") as batch:
        batch.drop_column("client_address")
    op.drop_index("ix_mcp_sessions_used_at", table_name="mcp_sessions")
    op.drop_index("ix_mcp_sessions_client_used_at", table_name="mcp_sessions")
    op.drop_table("mcp_sessions")
