"""HTTP MCP sessions in the database, so that any worker serves any of them (``service.domain.episodes.mcp``).

A session's id is the client's capability: rows are keyed by its SHA-256, and the secrets a session
carries for its episode (a run token, an episode token) are sealed with a key derived from the id and a
fresh nonce, so neither the id nor the secrets can be read back from the database.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.engine import Connection

from service.db.engine import Database
from service.db.models import mcp_sessions

NONCE = 16


def session_key(session_id: str) -> str:
    return hashlib.sha256(session_id.encode("utf-8", "replace")).hexdigest()


def _stream(session_id: str, nonce: bytes, n: int) -> bytes:
    return hashlib.shake_256(b"ecomm-mcp-session-secrets\0" + nonce + session_id.encode("utf-8", "replace")).digest(n)


def seal(session_id: str, values: dict[str, str | None]) -> str:
    data = json.dumps(values, separators=(",", ":")).encode()
    nonce = secrets.token_bytes(NONCE)
    return (nonce + bytes(a ^ b for a, b in zip(data, _stream(session_id, nonce, len(data)), strict=True))).hex()


def unseal(session_id: str, sealed: str) -> dict[str, str | None]:
    raw = bytes.fromhex(sealed)
    nonce, body = raw[:NONCE], raw[NONCE:]
    return json.loads(bytes(a ^ b for a, b in zip(body, _stream(session_id, nonce, len(body)), strict=True)))


@dataclass(frozen=True)
class StoredSession:
    episode_id: str | None
    sealed_secrets: str | None
    used_at: datetime


async def create(
    db: Database, session_id: str, client_address: str, now: datetime, live_since: datetime, per_client: int | None
) -> int | None:
    """Store a new session for ``client_address`` unless it already holds ``per_client`` live ones
    (used since ``live_since``); returns None when stored, else how many it holds. Counted and inserted
    in one transaction; nobody else's session is ever dropped to make room."""

    def store(conn: Connection) -> int | None:
        if per_client is not None:
            held = conn.execute(
                select(func.count()).where(
                    mcp_sessions.c.client_address == client_address, mcp_sessions.c.used_at >= live_since
                )
            ).scalar_one()
            if held >= per_client:
                return int(held)
        conn.execute(
            insert(mcp_sessions).values(
                id_sha256=session_key(session_id),
                client_address=client_address,
                episode_id=None,
                sealed_secrets=None,
                created_at=now,
                used_at=now,
            )
        )
        return None

    return await db.write(store)


async def load(db: Database, session_id: str, live_since: datetime) -> StoredSession | None:
    query = select(mcp_sessions.c.episode_id, mcp_sessions.c.sealed_secrets, mcp_sessions.c.used_at).where(
        mcp_sessions.c.id_sha256 == session_key(session_id), mcp_sessions.c.used_at >= live_since
    )
    row = await db.read(lambda conn: conn.execute(query).first())
    return StoredSession(*row) if row is not None else None


async def save(db: Database, session_id: str, now: datetime, **values: str | None) -> None:
    """Mark the session used now; with ``episode_id`` / ``sealed_secrets``, store those too."""
    statement = (
        update(mcp_sessions).where(mcp_sessions.c.id_sha256 == session_key(session_id)).values(used_at=now, **values)
    )
    await db.write(lambda conn: conn.execute(statement))


async def close(db: Database, session_id: str) -> bool:
    statement = delete(mcp_sessions).where(mcp_sessions.c.id_sha256 == session_key(session_id))
    result = await db.write(lambda conn: conn.execute(statement))
    return bool(result.rowcount)


async def purge_idle(db: Database, used_before: datetime) -> int:
    """Delete the sessions unused since ``used_before`` (the retention pass)."""
    statement = delete(mcp_sessions).where(mcp_sessions.c.used_at < used_before)
    result = await db.write(lambda conn: conn.execute(statement))
    return result.rowcount or 0
