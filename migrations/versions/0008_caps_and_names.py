"""storage caps count every episode of a client address (runs included); agent-name keys are skeletons

The per-address caps counted plain episodes only (a partial index on run_id IS NULL), so the episodes a
run hands out (POST /runs/{id}/next) were never counted: the index now covers every episode. Agent names
are compared by a skeleton from now on (service.db.names.name_key as of this revision, copied below):
the stored bindings are re-keyed as 0007 did, a binding whose new key is already taken is dropped.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01
"""

import unicodedata
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_IGNORABLE = (
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160), (0x17B4, 0x17B5), (0x180B, 0x180F),
    (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x206F), (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF),
)  # fmt: skip
_BLANK = frozenset("\u2800\u3164\uffa0\u115f\u1160")
_FOLD = str.maketrans(
    {
        "а": "a", "б": "6", "в": "b", "е": "e", "з": "3", "к": "k", "м": "m", "н": "h", "о": "o", "п": "n",
        "р": "p", "с": "c", "т": "t", "у": "y", "х": "x", "і": "i", "ј": "j", "ѕ": "s", "ԁ": "d", "һ": "h",
        "ӏ": "l", "ԛ": "q", "ԝ": "w", "ү": "y", "ь": "b",
        "α": "a", "β": "b", "ε": "e", "ζ": "z", "η": "n", "ι": "i", "κ": "k", "μ": "u", "ν": "v", "ο": "o",
        "ρ": "p", "τ": "t", "υ": "u", "χ": "x", "ϲ": "c", "ϳ": "j",
        "օ": "o", "ս": "u", "ո": "n", "ց": "g", "ı": "i", "ȷ": "j", "ɡ": "g", "ℓ": "l",
        "1": "l", "|": "l", "0": "o",
        "\u2010": "-", "\u2011": "-", "\u2012": "-", "\u2013": "-", "\u2014": "-", "\u2015": "-", "\u2212": "-",
    }
)  # fmt: skip


def _name_key(name: str) -> str:
    def ignorable(ch: str) -> bool:
        return any(low <= ord(ch) <= high for low, high in _IGNORABLE)

    text = unicodedata.normalize("NFKC", name)
    text = "".join(" " if ch in _BLANK else ch for ch in text if not ignorable(ch) and unicodedata.category(ch) != "Cf")
    text = unicodedata.normalize("NFD", text)
    text = "".join(ch for ch in text if unicodedata.category(ch) not in ("Mn", "Me"))
    text = " ".join(text.split()).casefold()
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).translate(_FOLD))


def upgrade() -> None:
    op.drop_index("ix_episodes_plain_client_created_at", table_name="episodes")
    op.create_index("ix_episodes_client_created_at", "episodes", ["client_address", "created_at"], unique=False)
    _rekey_agent_names()


def _rekey_agent_names() -> None:
    """The oldest binding of a skeleton keeps it; younger look-alikes of it are dropped."""
    conn = op.get_bind()
    names = sa.table(
        "agent_names", sa.column("name_key", sa.String), sa.column("created_at", sa.DateTime(timezone=True))
    )
    rows = conn.execute(sa.select(names.c.name_key, names.c.created_at).order_by(names.c.created_at)).all()
    kept: set[str] = {key for key, _ in rows if _name_key(key)[:128] == key}
    for key, _ in rows:
        new = _name_key(key)[:128]
        if new == key:
            continue
        if new in kept:
            conn.execute(sa.delete(names).where(names.c.name_key == key))
        else:
            conn.execute(sa.update(names).where(names.c.name_key == key).values(name_key=new))
            kept.add(new)


def downgrade() -> None:
    op.drop_index("ix_episodes_client_created_at", table_name="episodes")
    op.create_index(
        "ix_episodes_plain_client_created_at",
        "episodes",
        ["client_address", "created_at"],
        unique=False,
        sqlite_where=sa.text("run_id IS NULL"),
        postgresql_where=sa.text("run_id IS NULL"),
    )
